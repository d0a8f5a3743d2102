//! A store as `kvtool bench --ycsb` drives it: YCSB's operations on one record (a key and one
//! value: the whole record), and bloomkv's answers through its public API. The peers' answers
//! are in `peer_ycsb.rs`; the run, in `ycsb.rs`, sees only this trait.

use bloomkv::Db;
use serde_json::{json, Value};

/// A store as `bench --ycsb` drives it. Every call reads or writes as an application would,
/// with default read and write options (writes not synced).
pub trait YcsbStore: Sync {
    /// How the store is configured, for the report.
    fn configuration(&self) -> &'static str;
    /// Reads the record at `key`: the length of its value, `None` when there is none.
    fn read(&self, key: &[u8]) -> Result<Option<usize>, String>;
    /// Writes `key` = `value`, one put per write: YCSB's insert, and its update, which
    /// writes the whole record here (a record is one value).
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Reads up to `count` records in key order from `start` on: the records read and the
    /// bytes of their values.
    fn scan(&self, start: &[u8], count: usize) -> Result<(u64, u64), String>;
    /// Reads the record at `key`, then writes `value` in its place: what the read found, as
    /// [`read`](Self::read) says it.
    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<Option<usize>, String> {
        let found = self.read(key)?;
        self.put(key, value)?;
        Ok(found)
    }
    /// Writes the memtable to a table and waits until compactions settle; says how it waited,
    /// `None` when the store offers no way to wait for its compactions.
    fn settle(&self) -> Result<Option<&'static str>, String>;
    /// Closes the store.
    fn close(self: Box<Self>) -> Result<(), String>;
    /// The store's own counters now, where the harness can read them (bloomkv's `Stats`):
    /// what a phase's report says the store did in the background meanwhile.
    fn counters(&self) -> Option<Counters> {
        None
    }
}

/// What a store did, counted from its opening; `during` gives a phase's share.
#[derive(Debug, Clone, Copy)]
pub struct Counters {
    pub flushes: u64,
    pub compactions: u64,
    pub compaction_bytes_read: u64,
    pub compaction_bytes_written: u64,
    pub stall_micros: u64,
    pub data_block_reads: u64,
    pub block_cache_misses: u64,
    /// Tables in level 0 now (not a count).
    pub level0_tables: usize,
}

impl Counters {
    /// The counts from `before` to `self`, and level 0 at both ends.
    pub fn during(&self, before: &Counters) -> Value {
        json!({
            "flushes": self.flushes - before.flushes,
            "compactions": self.compactions - before.compactions,
            "compaction_bytes_read": self.compaction_bytes_read - before.compaction_bytes_read,
            "compaction_bytes_written":
                self.compaction_bytes_written - before.compaction_bytes_written,
            "stall_micros": self.stall_micros - before.stall_micros,
            "data_block_reads": self.data_block_reads - before.data_block_reads,
            "block_cache_misses": self.block_cache_misses - before.block_cache_misses,
            "level0_tables_at_start": before.level0_tables,
            "level0_tables_at_end": self.level0_tables,
        })
    }
}

/// bloomkv as `bench --ycsb` drives it, with the options it was opened with, described.
pub struct Bloomkv(pub Db, pub &'static str);

impl YcsbStore for Bloomkv {
    fn configuration(&self) -> &'static str {
        self.1
    }

    fn read(&self, key: &[u8]) -> Result<Option<usize>, String> {
        let value = self.0.get_pinned(key).map_err(|e| e.to_string())?;
        Ok(value.map(|v| v.len()))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.0.put(key, value).map_err(|e| e.to_string())
    }

    /// A cursor, sought to `start` and stepped: it lends each pair, as RocksDB's raw
    /// iterator does.
    fn scan(&self, start: &[u8], count: usize) -> Result<(u64, u64), String> {
        let (mut records, mut bytes) = (0, 0);
        if count == 0 {
            return Ok((records, bytes));
        }
        let mut cursor = self.0.cursor();
        cursor.seek(start).map_err(|e| e.to_string())?;
        while let Some(value) = cursor.value() {
            records += 1;
            bytes += value.len() as u64;
            if records == count as u64 {
                break;
            }
            cursor.next().map_err(|e| e.to_string())?;
        }
        Ok((records, bytes))
    }

    fn settle(&self) -> Result<Option<&'static str>, String> {
        self.0.flush().map_err(|e| e.to_string())?;
        self.0
            .wait_for_background_work()
            .map_err(|e| e.to_string())?;
        Ok(Some("flush, then wait_for_background_work"))
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.0.close().map_err(|e| e.to_string())
    }

    fn counters(&self) -> Option<Counters> {
        let s = self.0.stats();
        Some(Counters {
            flushes: s.flushes,
            compactions: s.compactions,
            compaction_bytes_read: s.compaction_bytes_read(),
            compaction_bytes_written: s.compaction_bytes_written(),
            stall_micros: s.stall_micros,
            data_block_reads: s.data_block_reads,
            block_cache_misses: s.block_cache.misses,
            level0_tables: s.levels.first().map_or(0, |l| l.tables),
        })
    }
}
