//! Writing sorted entries into new table files.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::entry::Entry;
use crate::error::Result;
use crate::filename;
use crate::manifest::TableMeta;
use crate::options::Options;
use crate::sstable::{Table, TableBuilder, TableEnv, TableOptions};

impl super::Inner {
    pub(super) fn table_writer(&self) -> TableWriter<'_> {
        TableWriter {
            dir: &self.dir,
            options: &self.options,
            env: &self.table_env,
            next_file_number: &self.next_file_number,
        }
    }
}

/// Tables written by one flush or compaction: what the manifest records, and the readers.
#[derive(Default)]
pub(super) struct NewTables {
    pub(super) added: Vec<TableMeta>,
    pub(super) opened: HashMap<u64, Table>,
}

impl NewTables {
    /// Adds `more`, written after these.
    pub(super) fn extend(&mut self, more: NewTables) {
        self.added.extend(more.added);
        self.opened.extend(more.opened);
    }

    /// Deletes the files, once no reader holds them: the step that wrote them failed.
    pub(super) fn discard(&self) {
        for table in self.opened.values() {
            table.mark_obsolete();
        }
    }
}

/// Writes sorted entries into new table files; used by flush, compaction and recovery (which
/// writes tables before the store is assembled).
pub(super) struct TableWriter<'a> {
    pub(super) dir: &'a Path,
    pub(super) options: &'a Options,
    pub(super) env: &'a TableEnv,
    pub(super) next_file_number: &'a AtomicU64,
}

impl TableWriter<'_> {
    pub(super) fn table_options(&self) -> TableOptions {
        TableOptions {
            block_size: self.options.block_size,
            filter_policy: self.options.filter_policy,
            compression: self.options.compression,
            ..TableOptions::default()
        }
    }

    /// Writes `entries` into tables at `level`, cut at `table_size` bytes when asked. On
    /// failure no new file stays behind: finished tables are deleted with the one in progress.
    pub(super) fn write(
        &self,
        entries: impl Iterator<Item = Result<Entry>>,
        level: u32,
        expected_keys: u64,
        cut_at_table_size: bool,
    ) -> Result<NewTables> {
        let mut out = NewTables::default();
        let written = self.write_into(&mut out, entries, level, expected_keys, cut_at_table_size);
        if let Err(e) = written {
            out.discard();
            return Err(e);
        }
        Ok(out)
    }

    fn write_into(
        &self,
        out: &mut NewTables,
        entries: impl Iterator<Item = Result<Entry>>,
        level: u32,
        expected_keys: u64,
        cut_at_table_size: bool,
    ) -> Result<()> {
        // A builder dropped unfinished deletes its temporary file.
        let mut current: Option<(u64, TableBuilder)> = None;
        for entry in entries {
            let entry = entry?;
            let (_, builder) = match &mut current {
                Some(open) => open,
                None => current.insert(self.start_table(expected_keys)?),
            };
            builder.add(&entry)?;
            if cut_at_table_size && builder.estimated_file_size() >= self.options.table_size {
                let (number, builder) = current.take().expect("a table is open");
                self.finish_table(number, builder, level, out)?;
            }
        }
        if let Some((number, builder)) = current {
            self.finish_table(number, builder, level, out)?;
        }
        Ok(())
    }

    fn start_table(&self, expected_keys: u64) -> Result<(u64, TableBuilder)> {
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        let path = self.dir.join(filename::table_file_name(number));
        let builder = TableBuilder::new(
            Arc::clone(&self.env.fs),
            &path,
            self.table_options(),
            expected_keys,
        )?;
        Ok((number, builder))
    }

    fn finish_table(
        &self,
        number: u64,
        builder: TableBuilder,
        level: u32,
        out: &mut NewTables,
    ) -> Result<()> {
        let props = builder.finish()?;
        let path = self.dir.join(filename::table_file_name(number));
        let table = Table::open_in(&path, self.env).inspect_err(|_| {
            let _ = self.env.fs.remove(&path);
        })?;
        out.added.push(TableMeta {
            number,
            level,
            file_size: props.file_size,
            smallest_key: props.smallest_key,
            largest_key: props.largest_key,
            smallest_seq: props.smallest_seq,
            largest_seq: props.largest_seq,
            entries: props.entries,
        });
        out.opened.insert(number, table);
        Ok(())
    }
}
