//! A store as `kvtool bench --ycsb` drives it: YCSB's operations on one record (a key and one
//! value: the whole record), and bloomkv's answers through its public API. The peers' answers
//! are in `peer_ycsb.rs`; the run, in `ycsb.rs`, sees only this trait.

use bloomkv::Db;

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
}
