//! The table cache: open table files, at most `max_open_files` of them, opened on demand and
//! closed when least used. A store with many more tables than the limit keeps working: a read
//! of a table whose file is closed opens it again (and closes another).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, UnitWeighter};

use super::CountEvictions;
use crate::error::Result;
use crate::fs::{RandomAccessFile, SharedFs};

type OpenFile = Arc<dyn RandomAccessFile>;

/// What a table cache has done since the store opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableCacheStats {
    /// Files it may keep open.
    pub capacity: u64,
    /// Files open now.
    pub open_files: u64,
    /// Table files opened (the first time, and again after being closed).
    pub opens: u64,
    /// Files closed to make room.
    pub closes: u64,
    /// Times the process ran out of file descriptors and the cache closed files to free some.
    pub descriptor_shortages: u64,
}

/// The open files of a store's tables, keyed by table reader id.
pub struct TableCache {
    fs: SharedFs,
    files: Cache<u64, OpenFile, UnitWeighter, super::hash::NumberHashBuilder, CountEvictions>,
    capacity: u64,
    opens: AtomicU64,
    closes: Arc<AtomicU64>,
    descriptor_shortages: AtomicU64,
}

impl TableCache {
    /// A cache keeping at most `max_open_files` files open (at least 1). Readers in the middle
    /// of a read keep their file open until they finish, so for an instant the count may pass
    /// the limit by the number of concurrent readers.
    pub fn new(fs: SharedFs, max_open_files: usize) -> TableCache {
        let capacity = max_open_files.max(1) as u64;
        let closes = Arc::new(AtomicU64::new(0));
        // Few shards, so a small limit is not split into shards of a file or two; a power of two,
        // as quick_cache rounds to one; and a total they divide exactly, since each shard takes
        // the ceiling of its share and those must not add up to more than the limit.
        let shards = (capacity / 64).clamp(1, 16).next_power_of_two();
        let per_shard_total = capacity / shards * shards;
        let options = OptionsBuilder::new()
            .estimated_items_capacity(per_shard_total as usize)
            .weight_capacity(per_shard_total)
            .shards(shards as usize)
            .build()
            .expect("estimated capacity and weight capacity are set");
        TableCache {
            fs,
            files: Cache::with_options(
                options,
                UnitWeighter,
                super::hash::NumberHashBuilder::default(),
                CountEvictions(Arc::clone(&closes)),
            ),
            capacity,
            opens: AtomicU64::new(0),
            closes,
            descriptor_shortages: AtomicU64::new(0),
        }
    }

    /// Closes about half the open files, when the process ran out of descriptors; true when
    /// it closed any. Files are reopened on demand, so this costs reopens, not data.
    pub fn make_room(&self) -> bool {
        self.descriptor_shortages.fetch_add(1, Ordering::Relaxed);
        let open: Vec<u64> = self.files.iter().map(|(id, _)| id).collect();
        let to_close = open.len().div_ceil(2);
        for id in &open[..to_close] {
            self.files.remove(id);
        }
        self.closes.fetch_add(to_close as u64, Ordering::Relaxed);
        to_close > 0
    }

    /// The open file of table `id` at `path`, opening it if it is closed.
    pub fn file(&self, id: u64, path: &Path) -> Result<OpenFile> {
        self.files.get_or_insert_with(&id, || {
            self.opens.fetch_add(1, Ordering::Relaxed);
            self.fs.open_read(path)
        })
    }

    /// Table `id`'s file if it is open now; never opens it.
    pub fn open_file(&self, id: u64) -> Option<OpenFile> {
        self.files.get(&id)
    }

    /// Hands in a file opened elsewhere (a table reads its footer, index and filter at open
    /// through this file), so the first data-block read does not open it again.
    pub fn adopt(&self, id: u64, file: OpenFile) {
        self.opens.fetch_add(1, Ordering::Relaxed);
        self.files.insert(id, file);
    }

    /// Closes table `id`'s file (its table is gone).
    pub fn forget(&self, id: u64) {
        self.files.remove(&id);
    }

    pub fn stats(&self) -> TableCacheStats {
        TableCacheStats {
            capacity: self.capacity,
            open_files: self.files.len() as u64,
            opens: self.opens.load(Ordering::Relaxed),
            closes: self.closes.load(Ordering::Relaxed),
            descriptor_shortages: self.descriptor_shortages.load(Ordering::Relaxed),
        }
    }
}
