//! The peer stores, RocksDB and fjall, as `kvtool bench --ycsb` drives them: their answers to
//! the calls of [`YcsbStore`], with the options every bench opens them with (`peers.rs`).
//! Built only with `--features peers`.

use std::path::Path;

use super::peers::{rocksdb_options, FJALL_CONFIGURATION, ROCKSDB_CONFIGURATION};
use super::ycsb_store::YcsbStore;
use crate::Failure;

/// Opens `store` (`rocksdb` or `fjall`) in `dir` for `kvtool bench --ycsb`.
pub fn open_for_ycsb(store: &str, dir: &Path) -> Result<Box<dyn YcsbStore>, Failure> {
    match store {
        "rocksdb" => {
            let db = rocksdb::DB::open(&rocksdb_options(), dir).map_err(|e| e.to_string())?;
            Ok(Box::new(Rocks(db)))
        }
        "fjall" => {
            let db = fjall::Database::builder(dir)
                .open()
                .map_err(|e| e.to_string())?;
            let items = db
                .keyspace("bench", fjall::KeyspaceCreateOptions::default)
                .map_err(|e| e.to_string())?;
            Ok(Box::new(Fjall { db, items }))
        }
        other => Err(Failure::from(format!("no such peer store: {other}"))),
    }
}

/// RocksDB as `bench --ycsb` drives it.
struct Rocks(rocksdb::DB);

impl YcsbStore for Rocks {
    fn configuration(&self) -> &'static str {
        ROCKSDB_CONFIGURATION
    }

    fn read(&self, key: &[u8]) -> Result<Option<usize>, String> {
        let value = self.0.get_pinned(key).map_err(|e| e.to_string())?;
        Ok(value.map(|v| v.len()))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.0.put(key, value).map_err(|e| e.to_string())
    }

    /// A raw iterator, sought to `start` and stepped: RocksDB's own way to read a range,
    /// without copying the pairs.
    fn scan(&self, start: &[u8], count: usize) -> Result<(u64, u64), String> {
        let mut iterator = self.0.raw_iterator();
        iterator.seek(start);
        let (mut records, mut bytes) = (0, 0);
        while records < count as u64 && iterator.valid() {
            bytes += iterator.value().map_or(0, <[u8]>::len) as u64;
            records += 1;
            iterator.next();
        }
        iterator.status().map_err(|e| e.to_string())?;
        Ok((records, bytes))
    }

    fn settle(&self) -> Result<Option<&'static str>, String> {
        let mut wait = rocksdb::WaitForCompactOptions::default();
        wait.set_flush(true);
        self.0.wait_for_compact(&wait).map_err(|e| e.to_string())?;
        Ok(Some("wait_for_compact, with flush"))
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        // Dropping the handle waits for its running background jobs.
        drop(self);
        Ok(())
    }
}

/// fjall as `bench --ycsb` drives it: one keyspace.
struct Fjall {
    db: fjall::Database,
    items: fjall::Keyspace,
}

impl YcsbStore for Fjall {
    fn configuration(&self) -> &'static str {
        FJALL_CONFIGURATION
    }

    fn read(&self, key: &[u8]) -> Result<Option<usize>, String> {
        let value = self.items.get(key).map_err(|e| e.to_string())?;
        Ok(value.map(|v| v.len()))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.items
            .insert(key.to_vec(), value.to_vec())
            .map_err(|e| e.to_string())
    }

    fn scan(&self, start: &[u8], count: usize) -> Result<(u64, u64), String> {
        let (mut records, mut bytes) = (0, 0);
        for guard in self.items.range(start..).take(count) {
            let (_, value) = guard.into_inner().map_err(|e| e.to_string())?;
            records += 1;
            bytes += value.len() as u64;
        }
        Ok((records, bytes))
    }

    /// Flushes the memtable; fjall offers no way to wait for its compactions.
    fn settle(&self) -> Result<Option<&'static str>, String> {
        self.items
            .rotate_memtable_and_wait()
            .map_err(|e| e.to_string())?;
        Ok(None)
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.db
            .persist(fjall::PersistMode::SyncData)
            .map_err(|e| e.to_string())
    }
}
