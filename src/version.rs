//! A version: the set of live tables, level by level, and which of them may hold a key.
//!
//! Level 0 holds tables flushed from memtables; their key ranges overlap, so a lookup asks
//! them newest first. Deeper levels hold tables with disjoint key ranges sorted by key, so a
//! lookup asks at most one table per level.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::entry::Entry;
use crate::error::Result;
use crate::filter::KeyHash;
use crate::iter::EntryStream;
use crate::manifest::{TableMeta, VersionEdit};
use crate::sstable::Table;

/// A live table: what the manifest records of it, and the open reader.
pub struct TableHandle {
    pub meta: TableMeta,
    pub table: Arc<Table>,
}

impl TableHandle {
    /// True when the table's key range includes `key`.
    pub fn covers(&self, key: &[u8]) -> bool {
        self.meta.smallest_key.as_slice() <= key && key <= self.meta.largest_key.as_slice()
    }

    /// True when the table's key range meets `[smallest, largest]`.
    pub fn overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.meta.smallest_key.as_slice() <= largest && smallest <= self.meta.largest_key.as_slice()
    }
}

/// The live tables at one moment. Immutable: changes make a new version.
#[derive(Clone)]
pub struct Version {
    levels: Vec<Vec<Arc<TableHandle>>>,
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub fn empty(num_levels: usize) -> Version {
        Version {
            levels: vec![Vec::new(); num_levels],
        }
    }

    /// Tables of `level`: level 0 newest first, deeper levels by key.
    pub fn level(&self, level: usize) -> &[Arc<TableHandle>] {
        &self.levels[level]
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Total file bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|t| t.meta.file_size).sum()
    }

    /// The newest entry for `key` in any table, asking each candidate table's filter first.
    /// `hash` is the key's hash, computed once by the caller for all tables.
    pub fn get(&self, key: &[u8], hash: &KeyHash) -> Result<Option<Entry>> {
        for handle in self.candidate_tables(key) {
            if let Some(entry) = handle.table.get(key, hash)? {
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }

    /// The tables that may hold `key`, in the order a lookup must ask them: level-0 tables
    /// covering the key newest first, then at most one table per deeper level.
    pub fn candidate_tables<'a>(
        &'a self,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<TableHandle>> + 'a {
        let level0 = self.levels[0].iter().filter(move |t| t.covers(key));
        let deeper = self.levels[1..]
            .iter()
            .filter_map(move |tables| Self::table_covering(tables, key));
        level0.chain(deeper)
    }

    /// In a level of disjoint sorted tables, the one whose range includes `key`.
    fn table_covering<'a>(
        tables: &'a [Arc<TableHandle>],
        key: &[u8],
    ) -> Option<&'a Arc<TableHandle>> {
        let idx = tables.partition_point(|t| t.meta.largest_key.as_slice() < key);
        tables.get(idx).filter(|t| t.covers(key))
    }

    /// Tables of `level` whose key range meets `[smallest, largest]`.
    pub fn overlapping(
        &self,
        level: usize,
        smallest: &[u8],
        largest: &[u8],
    ) -> Vec<Arc<TableHandle>> {
        self.levels[level]
            .iter()
            .filter(|t| t.overlaps(smallest, largest))
            .cloned()
            .collect()
    }

    /// Sorted streams over every table from `start` on, newest data first: one per level-0
    /// table, one per deeper level.
    pub fn streams_from(&self, start: Bound<&[u8]>) -> Vec<EntryStream> {
        let mut streams: Vec<EntryStream> = self.levels[0]
            .iter()
            .map(|t| table_stream(&t.table, start))
            .collect();
        for tables in &self.levels[1..] {
            if !tables.is_empty() {
                streams.push(level_stream(tables.clone(), start));
            }
        }
        streams
    }

    /// The version after `edit`; `opened` holds the readers of the tables the edit adds.
    pub fn apply(&self, edit: &VersionEdit, opened: &HashMap<u64, Arc<Table>>) -> Version {
        let mut levels = self.levels.clone();
        for (level, number) in &edit.removed {
            if let Some(tables) = levels.get_mut(*level as usize) {
                tables.retain(|t| t.meta.number != *number);
            }
        }
        for meta in &edit.added {
            if let (Some(tables), Some(table)) = (
                levels.get_mut(meta.level as usize),
                opened.get(&meta.number),
            ) {
                tables.push(Arc::new(TableHandle {
                    meta: meta.clone(),
                    table: Arc::clone(table),
                }));
            }
        }
        levels[0].sort_by_key(|t| std::cmp::Reverse(t.meta.number));
        for tables in &mut levels[1..] {
            tables.sort_by(|a, b| a.meta.smallest_key.cmp(&b.meta.smallest_key));
        }
        Version { levels }
    }
}

/// A sorted stream over one table from `start` on.
pub fn table_stream(table: &Arc<Table>, start: Bound<&[u8]>) -> EntryStream {
    match start {
        Bound::Included(key) => Box::new(table.iter_from(key)),
        Bound::Excluded(key) => {
            let after = key.to_vec();
            let iter = table.iter_from(key);
            Box::new(iter.skip_while(move |e| matches!(e, Ok(e) if e.key == after)))
        }
        Bound::Unbounded => Box::new(table.iter()),
    }
}

/// A sorted stream over a level of disjoint tables, opening each table's iterator only when
/// the previous one is exhausted.
fn level_stream(tables: Vec<Arc<TableHandle>>, start: Bound<&[u8]>) -> EntryStream {
    let first = match start {
        Bound::Included(key) | Bound::Excluded(key) => {
            tables.partition_point(|t| t.meta.largest_key.as_slice() < key)
        }
        Bound::Unbounded => 0,
    };
    let owned_start: Bound<Vec<u8>> = start.map(|k| k.to_vec());
    let iter = tables
        .into_iter()
        .skip(first)
        .enumerate()
        .flat_map(move |(i, t)| {
            let bound = if i == 0 {
                owned_start.as_ref().map(|k| k.as_slice())
            } else {
                Bound::Unbounded
            };
            table_stream(&t.table, bound)
        });
    Box::new(iter)
}
