//! [`VersionEdit`]: one change to the set of live tables, and its encoding.

use std::path::Path;

use crate::entry::{MAX_KEY_LEN, MAX_SEQ};
use crate::error::{Error, Result};
use crate::filter::FilterParams;
use crate::keyspace::{KeyspaceId, KeyspaceOptions, DEFAULT_ID, MAX_KEYSPACE_NAME_LEN};
use crate::range_tombstone::RangeTombstone;
use crate::sstable::{Compression, FilterPolicy, MAX_BLOCK_SIZE};

/// What the manifest records about one table file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    /// The file number (`NNNNNN.sst`).
    pub number: u64,
    /// The LSM level the table lives in.
    pub level: u32,
    /// The file's size in bytes.
    pub file_size: u64,
    /// The smallest user key in the table.
    pub smallest_key: Vec<u8>,
    /// The largest user key in the table.
    pub largest_key: Vec<u8>,
    /// The smallest sequence number of any entry in the table.
    pub smallest_seq: u64,
    /// The largest sequence number of any entry in the table.
    pub largest_seq: u64,
    /// The number of entries (values and tombstones).
    pub entries: u64,
    /// The number of the keyspace the table belongs to (0, the default keyspace, in a store
    /// without keyspaces).
    pub keyspace: u32,
}

impl TableMeta {
    /// What the manifest records of table `number` at `level` of the default keyspace,
    /// written with `props`.
    pub fn of_table(number: u64, level: u32, props: crate::sstable::TableProperties) -> TableMeta {
        TableMeta {
            keyspace: DEFAULT_ID,
            number,
            level,
            file_size: props.file_size,
            smallest_key: props.smallest_key,
            largest_key: props.largest_key,
            smallest_seq: props.smallest_seq,
            largest_seq: props.largest_seq,
            entries: props.entries,
        }
    }
}

/// The store's write I/O since it was created, as of an edit: what `Stats` reports as write
/// amplification and stall time, kept in the manifest so that it outlives a reopen (and a
/// read-only open can report it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteTotals {
    /// Bytes of keys and values users wrote.
    pub user_bytes: u64,
    /// Bytes appended to WAL files.
    pub wal_bytes: u64,
    /// Writes delayed or stalled, and the time they waited, in microseconds.
    pub write_stalls: u64,
    pub stall_micros: u64,
    pub flushes: u64,
    pub compactions: u64,
    pub trivial_moves: u64,
    /// Per level, level 0 first.
    pub levels: Vec<LevelTotals>,
}

/// One level's share of [`WriteTotals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LevelTotals {
    /// Bytes of tables written into the level (by flushes at level 0, compactions deeper).
    pub bytes_written: u64,
    /// Bytes of the level's tables compactions read.
    pub bytes_read: u64,
    /// Compactions into the level.
    pub compactions: u64,
    /// Tables moved into the level without a rewrite, and their bytes.
    pub tables_moved: u64,
    pub bytes_moved: u64,
}

const TOTALS_FIELDS: u64 = 7;
const LEVEL_TOTALS_FIELDS: u64 = 5;

impl WriteTotals {
    fn fields(&self) -> [u64; TOTALS_FIELDS as usize] {
        [
            self.user_bytes,
            self.wal_bytes,
            self.write_stalls,
            self.stall_micros,
            self.flushes,
            self.compactions,
            self.trivial_moves,
        ]
    }

    fn from_fields(f: [u64; TOTALS_FIELDS as usize], levels: Vec<LevelTotals>) -> WriteTotals {
        WriteTotals {
            user_bytes: f[0],
            wal_bytes: f[1],
            write_stalls: f[2],
            stall_micros: f[3],
            flushes: f[4],
            compactions: f[5],
            trivial_moves: f[6],
            levels,
        }
    }
}

impl LevelTotals {
    fn fields(&self) -> [u64; LEVEL_TOTALS_FIELDS as usize] {
        [
            self.bytes_written,
            self.bytes_read,
            self.compactions,
            self.tables_moved,
            self.bytes_moved,
        ]
    }

    fn from_fields(f: [u64; LEVEL_TOTALS_FIELDS as usize]) -> LevelTotals {
        LevelTotals {
            bytes_written: f[0],
            bytes_read: f[1],
            compactions: f[2],
            tables_moved: f[3],
            bytes_moved: f[4],
        }
    }
}

/// A change to the store's version: counters to update, tables added and removed.
///
/// A manifest starts with a snapshot edit (every counter set, every live table added) and
/// continues with one edit per flush or compaction. Removals apply before additions, so one
/// edit can move a table between levels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionEdit {
    /// The number of the oldest write-ahead log still needed: older logs are flushed.
    pub log_number: Option<u64>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// The largest sequence number in use.
    pub last_seq: Option<u64>,
    /// Tables added.
    pub added: Vec<TableMeta>,
    /// Tables removed, as (level, file number).
    pub removed: Vec<(u32, u64)>,
    /// The store's write I/O up to this edit; the last edit that has it counts.
    pub write_totals: Option<WriteTotals>,
    /// The filter policy the store writes its tables with; the last edit that has it counts.
    pub filter_policy: Option<RecordedPolicy>,
    /// The number the next keyspace created takes; the last edit that has it counts.
    pub next_keyspace: Option<u32>,
    /// Keyspaces created, or whose options changed: each record replaces the one before.
    pub keyspaces: Vec<KeyspaceRecord>,
    /// Keyspaces dropped, by number (their tables are in `removed`, their range deletions
    /// go with them).
    pub dropped_keyspaces: Vec<u32>,
    /// Range deletions that became live (a flush recorded its memtable's), with their
    /// keyspace's number.
    pub added_ranges: Vec<(u32, RangeTombstone)>,
    /// Range deletions no longer needed (or replaced by the pieces of them in
    /// `added_ranges`): no table holds an older entry in what they covered.
    pub removed_ranges: Vec<(u32, RangeTombstone)>,
    /// Samples of when sequence numbers were written, `(sequence number, seconds since the
    /// Unix epoch)`, added to those before (see `seq_time`).
    pub seq_times: Vec<(u64, u64)>,
}

/// What the manifest records of a keyspace other than the default.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyspaceRecord {
    pub id: u32,
    pub name: String,
    /// The options it was created with, or last opened with.
    pub options: KeyspaceOptions,
}

impl Eq for KeyspaceRecord {}

/// Which of a keyspace's options its record holds.
const HAS_FILTER_POLICY: u64 = 1;
const HAS_COMPRESSION: u64 = 2;
const HAS_BLOCK_SIZE: u64 = 4;
const HAS_MEMTABLE_SIZE: u64 = 8;
const HAS_BOTTOM_COMPRESSION: u64 = 16;
const HAS_TTL: u64 = 32;

/// A [`FilterPolicy`] as a manifest records it: its kind and its number's bits, so that it
/// compares and re-encodes exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedPolicy {
    kind: u8,
    /// The rate, budget or target as an `f64`'s bits; for exact parameters, the bits per key
    /// in the high half and the hashes in the low half.
    value: u64,
}

const POLICY_DISABLED: u8 = 0;
const POLICY_RATE: u8 = 1;
const POLICY_BUDGET: u8 = 2;
const POLICY_WASTED_READS: u8 = 3;
const POLICY_PARAMS: u8 = 4;

impl RecordedPolicy {
    /// The record of `policy`.
    pub fn of(policy: &FilterPolicy) -> RecordedPolicy {
        let (kind, value) = match *policy {
            FilterPolicy::Disabled => (POLICY_DISABLED, 0),
            FilterPolicy::FalsePositiveRate(p) => (POLICY_RATE, p.to_bits()),
            FilterPolicy::BitsPerKeyBudget(b) => (POLICY_BUDGET, b.to_bits()),
            FilterPolicy::WastedReadsTarget(r) => (POLICY_WASTED_READS, r.to_bits()),
            FilterPolicy::Params(p) => (
                POLICY_PARAMS,
                (u64::from(p.bits_per_key()) << 32) | u64::from(p.hashes()),
            ),
        };
        RecordedPolicy { kind, value }
    }

    /// The policy recorded; `None` for a record no valid policy makes (a kind this version
    /// does not know, a rate outside (0, 1), parameters no filter can have).
    pub fn policy(&self) -> Option<FilterPolicy> {
        self.any_policy().filter(|p| p.validate().is_ok())
    }

    fn any_policy(&self) -> Option<FilterPolicy> {
        let number = f64::from_bits(self.value);
        match self.kind {
            POLICY_DISABLED if self.value == 0 => Some(FilterPolicy::Disabled),
            POLICY_RATE => Some(FilterPolicy::FalsePositiveRate(number)),
            POLICY_BUDGET => Some(FilterPolicy::BitsPerKeyBudget(number)),
            POLICY_WASTED_READS => Some(FilterPolicy::WastedReadsTarget(number)),
            POLICY_PARAMS => {
                let (bits, hashes) = ((self.value >> 32) as u32, self.value as u32);
                FilterParams::new(bits, hashes)
                    .ok()
                    .map(FilterPolicy::Params)
            }
            _ => None,
        }
    }
}

const TAG_LOG_NUMBER: u8 = 1;
const TAG_NEXT_FILE_NUMBER: u8 = 2;
const TAG_LAST_SEQ: u8 = 3;
const TAG_REMOVED: u8 = 4;
const TAG_ADDED: u8 = 5;
const TAG_WRITE_TOTALS: u8 = 6;
const TAG_FILTER_POLICY: u8 = 7;
const TAG_NEXT_KEYSPACE: u8 = 8;
const TAG_KEYSPACE: u8 = 9;
const TAG_KEYSPACE_DROPPED: u8 = 10;
const TAG_ADDED_IN_KEYSPACE: u8 = 11;
const TAG_RANGE_REMOVED: u8 = 12;
const TAG_RANGE_ADDED: u8 = 13;
const TAG_SEQ_TIME: u8 = 14;

use crate::varint::put as put_varint;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_table(out: &mut Vec<u8>, t: &TableMeta) {
    put_varint(out, u64::from(t.level));
    put_varint(out, t.number);
    put_varint(out, t.file_size);
    put_bytes(out, &t.smallest_key);
    put_bytes(out, &t.largest_key);
    put_varint(out, t.smallest_seq);
    put_varint(out, t.largest_seq);
    put_varint(out, t.entries);
}

fn put_policy(out: &mut Vec<u8>, policy: &RecordedPolicy) {
    put_varint(out, u64::from(policy.kind));
    out.extend_from_slice(&policy.value.to_le_bytes());
}

fn put_keyspace(out: &mut Vec<u8>, keyspace: &KeyspaceRecord) {
    let o = &keyspace.options;
    put_varint(out, u64::from(keyspace.id));
    put_bytes(out, keyspace.name.as_bytes());
    let present = [
        (o.filter_policy.is_some(), HAS_FILTER_POLICY),
        (o.compression.is_some(), HAS_COMPRESSION),
        (o.block_size.is_some(), HAS_BLOCK_SIZE),
        (o.memtable_size.is_some(), HAS_MEMTABLE_SIZE),
        (o.bottom_compression.is_some(), HAS_BOTTOM_COMPRESSION),
        (o.ttl.is_some(), HAS_TTL),
    ];
    put_varint(out, present.iter().filter(|p| p.0).map(|p| p.1).sum());
    if let Some(policy) = &o.filter_policy {
        put_policy(out, &RecordedPolicy::of(policy));
    }
    if let Some(compression) = o.compression {
        put_varint(out, u64::from(compression.code()));
    }
    for size in [o.block_size, o.memtable_size].into_iter().flatten() {
        put_varint(out, size as u64);
    }
    if let Some(compression) = o.bottom_compression {
        put_varint(out, u64::from(compression.code()));
    }
    if let Some(ttl) = o.ttl {
        put_varint(out, ttl.as_secs());
    }
}

/// Why decoding failed and where, before a file name is attached.
pub(crate) struct DecodeError {
    pub offset: usize,
    pub reason: String,
}

struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    fn fail<T>(&self, at: usize, reason: impl Into<String>) -> std::result::Result<T, DecodeError> {
        Err(DecodeError {
            offset: at,
            reason: reason.into(),
        })
    }

    /// A varint in its shortest form, fitting in 64 bits.
    fn varint(&mut self, what: &str) -> std::result::Result<u64, DecodeError> {
        let start = self.pos;
        let rest = self.data.get(start..).unwrap_or_default();
        match crate::varint::decode(rest) {
            Ok((value, len)) => {
                self.pos += len;
                Ok(value)
            }
            Err(e) => self.fail(start, format!("{what}: {e}")),
        }
    }

    fn level(&mut self) -> std::result::Result<u32, DecodeError> {
        let start = self.pos;
        let v = self.varint("level")?;
        u32::try_from(v).or_else(|_| self.fail(start, format!("level {v} out of range")))
    }

    fn bytes(&mut self, what: &str) -> std::result::Result<Vec<u8>, DecodeError> {
        let start = self.pos;
        let len = self.varint(what)?;
        let available = self.data.len() - self.pos;
        match usize::try_from(len) {
            Ok(len) if len <= available => {
                let out = self.data[self.pos..self.pos + len].to_vec();
                self.pos += len;
                Ok(out)
            }
            _ => self.fail(
                start,
                format!("{what}: length {len} exceeds the {available} bytes left"),
            ),
        }
    }

    fn table(&mut self) -> std::result::Result<TableMeta, DecodeError> {
        let level = self.level()?;
        let number = self.varint("table number")?;
        let file_size = self.varint("file size")?;
        let smallest_key = self.bytes("smallest key")?;
        let largest_key = self.bytes("largest key")?;
        let smallest_seq = self.varint("smallest sequence number")?;
        let largest_seq = self.varint("largest sequence number")?;
        let entries = self.varint("entry count")?;
        Ok(TableMeta {
            keyspace: DEFAULT_ID,
            number,
            level,
            file_size,
            smallest_key,
            largest_key,
            smallest_seq,
            largest_seq,
            entries,
        })
    }

    fn keyspace_id(&mut self) -> std::result::Result<KeyspaceId, DecodeError> {
        let start = self.pos;
        match self.varint("keyspace number")? {
            0 => self.fail(start, "keyspace number 0 is the default keyspace's"),
            v => KeyspaceId::try_from(v)
                .or_else(|_| self.fail(start, format!("keyspace number {v} out of range"))),
        }
    }

    fn keyspace(&mut self) -> std::result::Result<KeyspaceRecord, DecodeError> {
        let id = self.keyspace_id()?;
        let start = self.pos;
        let name = String::from_utf8(self.bytes("keyspace name")?)
            .or_else(|_| self.fail(start, "keyspace name is not UTF-8"))?;
        if name.is_empty() || name.len() > MAX_KEYSPACE_NAME_LEN {
            return self.fail(start, format!("keyspace name of {} bytes", name.len()));
        }
        let start = self.pos;
        let present = self.varint("keyspace options present")?;
        if present >= 2 * HAS_TTL {
            return self.fail(start, format!("unknown keyspace options {present:#x}"));
        }
        let mut options = KeyspaceOptions::default();
        if present & HAS_FILTER_POLICY != 0 {
            options.filter_policy = self.filter_policy()?.policy();
        }
        if present & HAS_COMPRESSION != 0 {
            options.compression = Some(self.compression()?);
        }
        // The sizes the options' own checks allow (`Options::validate`).
        let block_sizes = 64..=MAX_BLOCK_SIZE as u64;
        for (flag, field, what, range) in [
            (
                HAS_BLOCK_SIZE,
                &mut options.block_size,
                "block size",
                block_sizes,
            ),
            (
                HAS_MEMTABLE_SIZE,
                &mut options.memtable_size,
                "memtable size",
                1024..=u64::MAX,
            ),
        ] {
            if present & flag != 0 {
                let start = self.pos;
                let v = self.varint(what)?;
                match usize::try_from(v) {
                    Ok(size) if range.contains(&v) => *field = Some(size),
                    _ => return self.fail(start, format!("{what} {v} out of range")),
                }
            }
        }
        if present & HAS_BOTTOM_COMPRESSION != 0 {
            options.bottom_compression = Some(self.compression()?);
        }
        if present & HAS_TTL != 0 {
            let start = self.pos;
            let secs = self.varint("time to live")?;
            if secs == 0 {
                return self.fail(start, "a time to live of 0 seconds");
            }
            options.ttl = Some(std::time::Duration::from_secs(secs));
        }
        Ok(KeyspaceRecord { id, name, options })
    }

    /// A range deletion: its keyspace's number, its start and end (each a key the store
    /// accepts, the start below the end) and its sequence number.
    fn range(&mut self) -> std::result::Result<(u32, RangeTombstone), DecodeError> {
        let start = self.pos;
        let keyspace = self.varint("range deletion keyspace")?;
        let keyspace = u32::try_from(keyspace)
            .or_else(|_| self.fail(start, format!("keyspace number {keyspace}")))?;
        let start = self.pos;
        let from = self.bytes("range deletion start")?;
        let to = self.bytes("range deletion end")?;
        // A trimmed deletion may start just past a largest key: one byte past the limit.
        if from.len() > MAX_KEY_LEN + 1 || to.len() > MAX_KEY_LEN + 1 || from >= to {
            return self.fail(start, "range deletion ends too long, or not in order");
        }
        let start = self.pos;
        let seq = self.varint("range deletion sequence number")?;
        if seq > MAX_SEQ {
            return self.fail(start, format!("range deletion sequence number {seq}"));
        }
        Ok((
            keyspace,
            RangeTombstone {
                start: from,
                end: to,
                seq,
            },
        ))
    }

    fn compression(&mut self) -> std::result::Result<Compression, DecodeError> {
        let start = self.pos;
        let code = self.varint("compression")?;
        match u8::try_from(code).ok().and_then(Compression::from_code) {
            Some(compression) => Ok(compression),
            None => self.fail(start, format!("unknown compression {code}")),
        }
    }

    /// A count of fields that must be `expected`.
    fn field_count(&mut self, what: &str, expected: u64) -> std::result::Result<(), DecodeError> {
        let start = self.pos;
        match self.varint(what)? {
            n if n == expected => Ok(()),
            n => self.fail(start, format!("{what}: {n} fields where {expected} belong")),
        }
    }

    fn varints<const N: usize>(
        &mut self,
        what: &str,
    ) -> std::result::Result<[u64; N], DecodeError> {
        let mut out = [0; N];
        for v in &mut out {
            *v = self.varint(what)?;
        }
        Ok(out)
    }

    /// A recorded filter policy: a kind this version knows, and its 8-byte value, which
    /// must make a policy.
    fn filter_policy(&mut self) -> std::result::Result<RecordedPolicy, DecodeError> {
        let start = self.pos;
        let kind = self.varint("filter policy kind")?;
        let value = match self.data.get(self.pos..self.pos + 8) {
            Some(bytes) => u64::from_le_bytes(bytes.try_into().expect("eight bytes")),
            None => return self.fail(self.pos, "filter policy value cut short"),
        };
        self.pos += 8;
        let record = RecordedPolicy {
            kind: u8::try_from(kind).unwrap_or(u8::MAX),
            value,
        };
        match record.policy() {
            Some(_) => Ok(record),
            None => self.fail(
                start,
                format!("filter policy of kind {kind} not known or not valid"),
            ),
        }
    }

    fn write_totals(&mut self) -> std::result::Result<WriteTotals, DecodeError> {
        self.field_count("write totals", TOTALS_FIELDS)?;
        let fields = self.varints("write total")?;
        let start = self.pos;
        let levels = self.varint("write totals' level count")?;
        if levels > 64 {
            return self.fail(start, format!("write totals for {levels} levels"));
        }
        let levels = (0..levels)
            .map(|_| {
                self.field_count("level write totals", LEVEL_TOTALS_FIELDS)?;
                Ok(LevelTotals::from_fields(self.varints("level write total")?))
            })
            .collect::<std::result::Result<Vec<_>, DecodeError>>()?;
        Ok(WriteTotals::from_fields(fields, levels))
    }
}

impl VersionEdit {
    /// Encodes the edit: tagged fields in a fixed order (see `docs/format-log-manifest.md`).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (tag, value) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQ, self.last_seq),
        ] {
            if let Some(v) = value {
                out.push(tag);
                put_varint(&mut out, v);
            }
        }
        for &(level, number) in &self.removed {
            out.push(TAG_REMOVED);
            put_varint(&mut out, u64::from(level));
            put_varint(&mut out, number);
        }
        for t in self.added.iter().filter(|t| t.keyspace == DEFAULT_ID) {
            out.push(TAG_ADDED);
            put_table(&mut out, t);
        }
        if let Some(totals) = &self.write_totals {
            out.push(TAG_WRITE_TOTALS);
            put_varint(&mut out, TOTALS_FIELDS);
            totals
                .fields()
                .iter()
                .for_each(|&v| put_varint(&mut out, v));
            put_varint(&mut out, totals.levels.len() as u64);
            for level in &totals.levels {
                put_varint(&mut out, LEVEL_TOTALS_FIELDS);
                level.fields().iter().for_each(|&v| put_varint(&mut out, v));
            }
        }
        if let Some(policy) = &self.filter_policy {
            out.push(TAG_FILTER_POLICY);
            put_policy(&mut out, policy);
        }
        if let Some(next) = self.next_keyspace {
            out.push(TAG_NEXT_KEYSPACE);
            put_varint(&mut out, u64::from(next));
        }
        for keyspace in &self.keyspaces {
            out.push(TAG_KEYSPACE);
            put_keyspace(&mut out, keyspace);
        }
        for &id in &self.dropped_keyspaces {
            out.push(TAG_KEYSPACE_DROPPED);
            put_varint(&mut out, u64::from(id));
        }
        for t in self.added.iter().filter(|t| t.keyspace != DEFAULT_ID) {
            out.push(TAG_ADDED_IN_KEYSPACE);
            put_varint(&mut out, u64::from(t.keyspace));
            put_table(&mut out, t);
        }
        for (tag, ranges) in [
            (TAG_RANGE_REMOVED, &self.removed_ranges),
            (TAG_RANGE_ADDED, &self.added_ranges),
        ] {
            for (keyspace, range) in ranges {
                out.push(tag);
                put_varint(&mut out, u64::from(*keyspace));
                put_bytes(&mut out, &range.start);
                put_bytes(&mut out, &range.end);
                put_varint(&mut out, range.seq);
            }
        }
        for &(seq, time) in &self.seq_times {
            out.push(TAG_SEQ_TIME);
            put_varint(&mut out, seq);
            put_varint(&mut out, time);
        }
        out
    }

    /// Decodes an edit. Strict: only what [`VersionEdit::encode`] writes is accepted (fields
    /// in order, each counter at most once, varints in shortest form), so the result
    /// re-encodes to exactly `data`. Anything else is [`Error::Corruption`].
    pub fn decode(data: &[u8]) -> Result<VersionEdit> {
        Self::decode_inner(data).map_err(|e| {
            Error::corruption(Path::new("<version edit>"), Some(e.offset as u64), e.reason)
        })
    }

    pub(crate) fn decode_inner(data: &[u8]) -> std::result::Result<VersionEdit, DecodeError> {
        let mut d = Decoder { data, pos: 0 };
        let mut edit = VersionEdit::default();
        let mut last_tag = 0u8;
        while let Some(&tag) = d.data.get(d.pos) {
            let at = d.pos;
            d.pos += 1;
            let repeatable = matches!(
                tag,
                TAG_REMOVED
                    | TAG_ADDED
                    | TAG_KEYSPACE
                    | TAG_KEYSPACE_DROPPED
                    | TAG_ADDED_IN_KEYSPACE
                    | TAG_RANGE_REMOVED
                    | TAG_RANGE_ADDED
                    | TAG_SEQ_TIME
            );
            if tag < last_tag || (tag == last_tag && !repeatable) {
                return d.fail(
                    at,
                    format!("field tag {tag} out of order after tag {last_tag}"),
                );
            }
            last_tag = tag;
            match tag {
                TAG_LOG_NUMBER => edit.log_number = Some(d.varint("log number")?),
                TAG_NEXT_FILE_NUMBER => edit.next_file_number = Some(d.varint("next file number")?),
                TAG_LAST_SEQ => edit.last_seq = Some(d.varint("last sequence number")?),
                TAG_REMOVED => {
                    let level = d.level()?;
                    let number = d.varint("removed table number")?;
                    edit.removed.push((level, number));
                }
                TAG_ADDED => {
                    let table = d.table()?;
                    edit.added.push(table);
                }
                TAG_WRITE_TOTALS => edit.write_totals = Some(d.write_totals()?),
                TAG_FILTER_POLICY => edit.filter_policy = Some(d.filter_policy()?),
                TAG_NEXT_KEYSPACE => {
                    let start = d.pos;
                    let next = d.varint("next keyspace number")?;
                    let next = u32::try_from(next)
                        .or_else(|_| d.fail(start, format!("next keyspace number {next}")))?;
                    edit.next_keyspace = Some(next);
                }
                TAG_KEYSPACE => edit.keyspaces.push(d.keyspace()?),
                TAG_KEYSPACE_DROPPED => edit.dropped_keyspaces.push(d.keyspace_id()?),
                TAG_ADDED_IN_KEYSPACE => {
                    let keyspace = d.keyspace_id()?;
                    let table = d.table()?;
                    edit.added.push(TableMeta { keyspace, ..table });
                }
                TAG_RANGE_REMOVED => edit.removed_ranges.push(d.range()?),
                TAG_RANGE_ADDED => edit.added_ranges.push(d.range()?),
                TAG_SEQ_TIME => {
                    let start = d.pos;
                    let seq = d.varint("sampled sequence number")?;
                    if seq > MAX_SEQ {
                        return d.fail(start, format!("sampled sequence number {seq}"));
                    }
                    let time = d.varint("sample time")?;
                    edit.seq_times.push((seq, time));
                }
                _ => return d.fail(at, format!("unknown field tag {tag}")),
            }
        }
        Ok(edit)
    }
}
