//! The peer stores, RocksDB and fjall, as `kvtool bench --writes` drives them: their answers to
//! the calls of [`WriteStore`], with the options every bench opens them with (`peers.rs`).
//! Built only with `--features peers`.

use std::path::Path;

use serde_json::json;

use super::peers::{
    rocksdb_options, rocksdb_shape_configuration, rocksdb_shape_options, FJALL_CONFIGURATION,
    ROCKSDB_CONFIGURATION,
};
use super::write_store::{OwnCounters, WriteStore};
use crate::Failure;

/// Opens `store` (`rocksdb`, `rocksdb-shape` or `fjall`) in `dir` for `kvtool bench --writes`.
pub fn open_for_writes(store: &str, dir: &Path) -> Result<Box<dyn WriteStore>, Failure> {
    let (options, configuration) = match store {
        "rocksdb" => (rocksdb_options(), ROCKSDB_CONFIGURATION),
        "rocksdb-shape" => (rocksdb_shape_options(), rocksdb_shape_configuration()),
        "fjall" => {
            let db = fjall::Database::builder(dir)
                .open()
                .map_err(|e| e.to_string())?;
            let items = db
                .keyspace("bench", fjall::KeyspaceCreateOptions::default)
                .map_err(|e| e.to_string())?;
            return Ok(Box::new(FjallWriter { db, items }));
        }
        other => return Err(Failure::from(format!("no such peer store: {other}"))),
    };
    let db = rocksdb::DB::open(&options, dir).map_err(|e| e.to_string())?;
    let mut synced = rocksdb::WriteOptions::default();
    synced.set_sync(true);
    Ok(Box::new(RocksWriter {
        db,
        options,
        synced,
        configuration,
    }))
}

/// RocksDB as `bench --writes` drives it.
struct RocksWriter {
    db: rocksdb::DB,
    /// Kept for its statistics (the tickers).
    options: rocksdb::Options,
    synced: rocksdb::WriteOptions,
    configuration: &'static str,
}

impl WriteStore for RocksWriter {
    fn configuration(&self) -> &'static str {
        self.configuration
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db.put(key, value).map_err(|e| e.to_string())
    }

    fn put_synced(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db
            .put_opt(key, value, &self.synced)
            .map_err(|e| e.to_string())
    }

    fn flush(&self) -> Result<(), String> {
        self.db.flush().map_err(|e| e.to_string())
    }

    fn settle(&self) -> Result<Option<&'static str>, String> {
        let mut wait = rocksdb::WaitForCompactOptions::default();
        wait.set_flush(true);
        self.db.wait_for_compact(&wait).map_err(|e| e.to_string())?;
        Ok(Some("wait_for_compact, with flush"))
    }

    fn counters(&self, user_bytes: u64) -> OwnCounters {
        use rocksdb::statistics::Ticker;
        let ticker = |t: Ticker| self.options.get_ticker_count(t);
        let wal = ticker(Ticker::WalFileBytes);
        let flush = ticker(Ticker::FlushWriteBytes);
        let compaction = ticker(Ticker::CompactWriteBytes);
        let stall_micros = ticker(Ticker::StallMicros);
        // The leader of a write group counts one WRITE_DONE_BY_SELF, and every follower it
        // wrote for one WRITE_DONE_BY_OTHER.
        let (by_self, by_other) = (
            ticker(Ticker::WriteDoneBySelf),
            ticker(Ticker::WriteDoneByOther),
        );
        let tables_per_level: Vec<Option<u64>> = (0..7)
            .map(|level| {
                self.db
                    .property_int_value(&format!("rocksdb.num-files-at-level{level}"))
                    .ok()
                    .flatten()
            })
            .collect();
        OwnCounters {
            stall_micros: Some(stall_micros),
            write_amplification: (user_bytes > 0)
                .then(|| (wal + flush + compaction) as f64 / user_bytes as f64),
            batches_per_write_group: (by_self > 0)
                .then(|| (by_self + by_other) as f64 / by_self as f64),
            details: json!({
                "wal_file_bytes": wal,
                "flush_write_bytes": flush,
                "compact_write_bytes": compaction,
                "compact_read_bytes": ticker(Ticker::CompactReadBytes),
                "stall_micros": stall_micros,
                "wal_file_synced": ticker(Ticker::WalFileSynced),
                "write_done_by_self": by_self,
                "write_done_by_other": by_other,
                "tables_per_level": tables_per_level,
            }),
        }
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        // Dropping the handle waits for its running background jobs.
        drop(self);
        Ok(())
    }
}

/// fjall as `bench --writes` drives it: one keyspace.
struct FjallWriter {
    db: fjall::Database,
    items: fjall::Keyspace,
}

impl WriteStore for FjallWriter {
    fn configuration(&self) -> &'static str {
        FJALL_CONFIGURATION
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.items
            .insert(key.to_vec(), value.to_vec())
            .map_err(|e| e.to_string())
    }

    /// A batch of one pair, committed with `PersistMode::SyncData`: fdatasync, the call
    /// bloomkv's and RocksDB's synced writes make (`SyncAll` would be fsync).
    fn put_synced(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut batch = self
            .db
            .batch()
            .durability(Some(fjall::PersistMode::SyncData));
        batch.insert(&self.items, key.to_vec(), value.to_vec());
        batch.commit().map_err(|e| e.to_string())
    }

    fn flush(&self) -> Result<(), String> {
        self.items
            .rotate_memtable_and_wait()
            .map_err(|e| e.to_string())
    }

    /// fjall offers no way to wait for its compactions.
    fn settle(&self) -> Result<Option<&'static str>, String> {
        Ok(None)
    }

    /// fjall counts neither stalls nor bytes written (its `metrics` feature counts reads).
    fn counters(&self, _user_bytes: u64) -> OwnCounters {
        OwnCounters::default()
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.db
            .persist(fjall::PersistMode::SyncData)
            .map_err(|e| e.to_string())
    }
}
