//! Creating, changing and dropping keyspaces, and what each keyspace's tree is written with.

use std::sync::Arc;

use super::{lock, Inner, ReadState, Tree};
use crate::error::{Error, Result};
use crate::keyspace::{KeyspaceDef, KeyspaceOptions, DEFAULT_ID};
use crate::manifest::{KeyspaceRecord, VersionEdit};
use crate::options::Options;
use crate::version::Version;

impl Inner {
    /// Creates keyspace `name` with `options`, or records the options `options` sets over
    /// those it has; durable when this returns. Holds the writer lock (no write group
    /// applies meanwhile, and a new memtable takes the log writes go to now) and the shape
    /// lock (the edit and the new state go together).
    pub(super) fn open_keyspace(
        &self,
        name: &str,
        options: KeyspaceOptions,
    ) -> Result<Arc<KeyspaceDef>> {
        let _writer = lock(&self.writer);
        self.refuse_if_failed()?;
        let mut shape = lock(&self.shape);
        let state = self.read_state();
        let existing = state.named(name);
        let (id, given) = match existing {
            Some(tree) => (tree.id(), tree.keyspace.given.updated_by(&options)),
            None => (shape.next_keyspace, options),
        };
        // Made, or given these options, by another thread since the caller looked.
        if let Some(tree) = existing.filter(|tree| tree.keyspace.given == given) {
            return Ok(Arc::clone(&tree.keyspace));
        }
        let next_keyspace = match existing {
            Some(_) => shape.next_keyspace,
            None => id.checked_add(1).ok_or_else(|| {
                Error::InvalidArgument("the store has used every keyspace number".into())
            })?,
        };
        let record = KeyspaceRecord {
            id,
            name: name.to_string(),
            options: given,
        };
        let mut edit = VersionEdit {
            next_keyspace: Some(next_keyspace),
            keyspaces: vec![record],
            ..VersionEdit::default()
        };
        self.log_edit(&mut shape, &mut edit, std::iter::empty())?;
        shape.next_keyspace = next_keyspace;
        let def = Arc::new(KeyspaceDef::recorded(
            id,
            name.to_string(),
            given,
            &self.options,
        ));
        let log_number = state.default_tree().mem.log_number();
        drop(state);
        self.replace_read_state(|old| {
            let mut trees: Vec<Arc<Tree>> = old.trees.clone();
            match trees.iter_mut().find(|t| t.id() == id) {
                // New options reach the memtable at the next freeze, the tables as they are
                // written.
                Some(tree) => {
                    *tree = Arc::new(Tree {
                        keyspace: Arc::clone(&def),
                        mem: Arc::clone(&tree.mem),
                        immutable: tree.immutable.clone(),
                        version: Arc::clone(&tree.version),
                    });
                }
                None => trees.push(Arc::new(Tree::new(
                    Arc::clone(&def),
                    def.new_memtable(log_number),
                    Arc::new(Version::empty(self.options.tuning.num_levels)),
                ))),
            }
            ReadState { trees }
        });
        self.rotate_manifest_if_long(&mut shape);
        Ok(def)
    }

    /// Drops keyspace `name` and its tables, durably. Holds the writer lock (no write lands
    /// in it meanwhile) and the flush lock (no flush is writing its memtable); a compaction
    /// of it that is running finds it gone when it ends, and discards its output.
    pub(super) fn drop_keyspace(&self, name: &str) -> Result<()> {
        let mut writer = lock(&self.writer);
        self.refuse_if_failed()?;
        let _flushing = lock(&self.flushing);
        let mut shape = lock(&self.shape);
        let state = self.read_state();
        let Some(tree) = state.named(name).cloned() else {
            return Err(Error::NoSuchKeyspace {
                name: format!("{name:?}"),
            });
        };
        // A log that holds only the dropped keyspace's writes stops being a frozen memtable's,
        // and a later synced write would forget it unsynced; but recovery still reads it (it
        // is not below the manifest's log number) and wants it whole, since the logs after it
        // say how long it was. So every log is synced first.
        if let Err(e) = writer.sync_all(&state.frozen_logs()) {
            self.fail_wal(format!(
                "syncing the WAL before dropping a keyspace failed: {e}"
            ));
            return Err(e);
        }
        let mut edit = VersionEdit {
            removed: (tree.version.tables())
                .map(|t| (t.meta.level, t.meta.number))
                .collect(),
            dropped_keyspaces: vec![tree.id()],
            ..VersionEdit::default()
        };
        drop(state);
        let without_tree = |old: &ReadState| ReadState {
            trees: (old.trees.iter())
                .filter(|t| t.id() != tree.id())
                .cloned()
                .collect(),
        };
        if let Err(e) = self.log_edit(&mut shape, &mut edit, std::iter::empty()) {
            // The drop may be in the manifest (no new manifest could be written): the keyspace
            // takes no more writes, which a reopen could lose. Its files stay; a reopen that
            // finds it dropped removes them.
            if shape
                .manifest
                .as_ref()
                .is_some_and(|m| m.failed_edit_may_be_durable())
            {
                self.replace_read_state(without_tree);
            }
            return Err(e);
        }
        self.replace_read_state(without_tree);
        for table in tree.version.tables() {
            table.table.mark_obsolete();
            self.count_spans.forget(table.meta.number);
        }
        self.rotate_manifest_if_long(&mut shape);
        drop(shape);
        self.background_cv.notify_all();
        Ok(())
    }

    /// The options `tree`'s tables are written with and its filters held to, its version
    /// being `version`: its keyspace's, with the store's filter memory limit shared among the
    /// keyspaces by their entries (all of it, for a store of one keyspace).
    pub(super) fn tree_options(&self, tree: &Tree, version: &Version) -> Options {
        let mut options = tree.options().clone();
        let Some(limit) = self.governor.filter_limit() else {
            return options;
        };
        let state = self.read_state();
        if state.trees.len() < 2 {
            options.tuning.filter_memory_limit = Some(limit);
            return options;
        }
        let entries = |v: &Version| v.tables().map(|t| t.meta.entries).sum::<u64>();
        let own = entries(version);
        let others: u64 = (state.trees.iter())
            .filter(|t| t.id() != tree.id())
            .map(|t| entries(&t.version))
            .sum();
        options.tuning.filter_memory_limit = limit_share(Some(limit), own, own + others);
        options
    }
}

/// A keyspace's share of the filter memory `limit`: as its `own` entries are of the store's
/// `total`, or all of it when the store holds none.
pub(super) fn limit_share(limit: Option<u64>, own: u64, total: u64) -> Option<u64> {
    let limit = limit?;
    match total {
        0 => Some(limit),
        _ => Some((limit as f64 * (own as f64 / total as f64)) as u64),
    }
}

/// The manifest's records of `state`'s keyspaces, the default aside (it follows the store's
/// options and is never recorded).
pub(super) fn records(state: &ReadState) -> Vec<KeyspaceRecord> {
    (state.trees.iter())
        .filter(|t| t.id() != DEFAULT_ID)
        .map(|t| KeyspaceRecord {
            id: t.id(),
            name: t.keyspace.name.clone(),
            options: t.keyspace.given,
        })
        .collect()
}
