//! A store as `kvtool bench --writes` drives it: the calls its two phases make, what the store
//! counts about its own writes, and bloomkv's answers. The peers' answers are in
//! `peer_writes.rs`; the phases, in `writes.rs`, see only this trait.

use bloomkv::{Db, WriteBatch, WriteOptions};
use serde_json::{json, Value};

/// A store as `bench --writes` drives it.
pub trait WriteStore: Sync {
    /// How the store is configured, for the report.
    fn configuration(&self) -> &'static str;
    /// Writes `key` = `value` as a write of its own, not synced.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Writes `key` = `value` as a write of its own, on stable storage when it returns.
    fn put_synced(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Writes the memtable to a table and waits for it.
    fn flush(&self) -> Result<(), String>;
    /// Waits until compactions settle and says how; `None` when the store offers no way to
    /// wait.
    fn settle(&self) -> Result<Option<&'static str>, String>;
    /// What the store counts about its own writes since it was opened; `user_bytes` are the
    /// key and value bytes written, for stores that do not count them.
    fn counters(&self, user_bytes: u64) -> OwnCounters;
    /// Closes the store.
    fn close(self: Box<Self>) -> Result<(), String>;
}

/// A store's own counts of its writes; `None` where it counts nothing of the kind.
#[derive(Debug, Default)]
pub struct OwnCounters {
    pub stall_micros: Option<u64>,
    /// Bytes the store wrote for its data per byte of keys and values.
    pub write_amplification: Option<f64>,
    /// Writes per log append.
    pub batches_per_write_group: Option<f64>,
    /// The counters behind these, and more, by the store's own names.
    pub details: Value,
}

/// bloomkv as `bench --writes` drives it, with the options it was opened with, described.
pub struct Bloomkv(pub Db, pub &'static str);

impl WriteStore for Bloomkv {
    fn configuration(&self) -> &'static str {
        self.1
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.0.put(key, value).map_err(|e| e.to_string())
    }

    fn put_synced(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.0
            .write_opt(batch, &WriteOptions::synced())
            .map_err(|e| e.to_string())
    }

    fn flush(&self) -> Result<(), String> {
        self.0.flush().map_err(|e| e.to_string())
    }

    fn settle(&self) -> Result<Option<&'static str>, String> {
        self.0
            .wait_for_background_work()
            .map_err(|e| e.to_string())?;
        Ok(Some("wait_for_background_work"))
    }

    fn counters(&self, _user_bytes: u64) -> OwnCounters {
        let s = self.0.stats();
        OwnCounters {
            stall_micros: Some(s.stall_micros),
            write_amplification: s.write_amplification(),
            batches_per_write_group: s.batches_per_write_group(),
            details: json!({
                "user_bytes_written": s.user_bytes_written,
                "wal_bytes_written": s.wal_bytes_written,
                "flush_bytes_written": s.flush_bytes_written(),
                "compaction_bytes_written": s.compaction_bytes_written(),
                "compaction_bytes_read": s.compaction_bytes_read(),
                "disk_bytes_written": s.disk_bytes_written(),
                "write_stalls": s.write_stalls,
                "stall_micros": s.stall_micros,
                "write_groups": s.write_groups,
                "grouped_batches": s.grouped_batches,
                "flushes": s.flushes,
                "compactions": s.compactions,
                "trivial_moves": s.trivial_moves,
                "split_compactions": s.split_compactions,
                "tables_per_level": s.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
                "levels": crate::store_json::levels_json(&s),
            }),
        }
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.0.close().map_err(|e| e.to_string())
    }
}
