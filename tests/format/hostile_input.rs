//! Bounded property tests on hostile bytes: random and mutated input to the table reader (via
//! a file), `wal::parse_log`, `VersionEdit::decode`, `BloomFilter::from_bytes` and
//! `BlockedBloomFilter::from_bytes`. Each must return a value or an error, never panic. The
//! same inputs drive the fuzz targets in `fuzz/` (all but the blocked filter's).

use std::path::Path;
use std::sync::Arc;

use bloomkv::entry::{Entry, ValueKind};
use bloomkv::filter::KeyHash;
use bloomkv::filter::{BlockedBloomFilter, BlockedParams, BloomFilter, FilterParams};
use bloomkv::fs::{FaultFs, FileSystem};
use bloomkv::manifest::{TableMeta, VersionEdit};
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{verify_table, Table, TableBuilder, TableOptions};
use bloomkv::wal::{parse_log, LogWriter, RecoveryMode};
use proptest::prelude::*;

fn valid_table() -> Vec<u8> {
    valid_table_of_blocks(256)
}

/// A table with one entry per data block: 60 blocks, so its index has four restart points.
fn valid_table_of_many_blocks() -> Vec<u8> {
    valid_table_of_blocks(16)
}

fn valid_table_of_blocks(block_size: usize) -> Vec<u8> {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/t")).unwrap();
    let path = Path::new("/t/000001.sst");
    let options = TableOptions {
        block_size,
        ..TableOptions::default()
    };
    let mut builder = TableBuilder::new(Arc::new(fs.clone()), path, options, 60).unwrap();
    for i in 0..60u64 {
        builder
            .add(&Entry {
                key: format!("key{i:04}").into_bytes(),
                seq: 100 - i,
                kind: if i % 9 == 0 {
                    ValueKind::Tombstone
                } else {
                    ValueKind::Value
                },
                value: if i % 9 == 0 {
                    Vec::new()
                } else {
                    format!("value{i}").into_bytes()
                },
            })
            .unwrap();
    }
    builder.finish().unwrap();
    fs.contents(path).unwrap()
}

fn valid_log() -> Vec<u8> {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/t")).unwrap();
    let path = Path::new("/t/000001.log");
    let mut log = LogWriter::new(fs.create(path).unwrap());
    for i in 0..20usize {
        log.add_record(&vec![i as u8; i * 37]).unwrap();
        // Some syncs, so that sync marks sit between records.
        if i % 5 == 4 {
            log.sync().unwrap();
        }
    }
    log.add_record(&vec![7u8; 40_000]).unwrap();
    log.flush().unwrap();
    fs.contents(path).unwrap()
}

fn valid_edit() -> Vec<u8> {
    VersionEdit {
        log_number: Some(9),
        next_file_number: Some(12),
        last_seq: Some(1000),
        added: vec![TableMeta {
            keyspace: 0,
            number: 7,
            level: 1,
            file_size: 4096,
            smallest_key: b"a".to_vec(),
            largest_key: b"m".to_vec(),
            smallest_seq: 1,
            largest_seq: 900,
            entries: 50,
        }],
        removed: vec![(0, 3), (0, 4)],
        write_totals: Some(bloomkv::manifest::WriteTotals {
            user_bytes: 5_000,
            wal_bytes: 6_000,
            levels: vec![bloomkv::manifest::LevelTotals::default(); 2],
            ..Default::default()
        }),
        filter_policy: Some(bloomkv::manifest::RecordedPolicy::of(
            &bloomkv::FilterPolicy::FalsePositiveRate(0.001),
        )),
        next_keyspace: Some(3),
        keyspaces: vec![bloomkv::manifest::KeyspaceRecord {
            id: 2,
            name: "users".into(),
            options: bloomkv::KeyspaceOptions::new().block_size(8192),
        }],
        dropped_keyspaces: vec![1],
        added_ranges: Vec::new(),
        removed_ranges: Vec::new(),
        seq_times: Vec::new(),
    }
    .encode()
}

fn valid_filter() -> Vec<u8> {
    let mut f = BloomFilter::new(FilterParams::new(10, 7).unwrap(), 100);
    for i in 0..100u32 {
        f.insert(&i.to_le_bytes());
    }
    f.to_bytes()
}

fn valid_blocked_filter() -> Vec<u8> {
    let mut f = BlockedBloomFilter::new(BlockedParams::new(10, 6).unwrap(), 100);
    for i in 0..100u32 {
        f.insert(&i.to_le_bytes());
    }
    f.to_bytes()
}

/// Opens bytes as a table file and reads everything it can.
pub fn exercise_table(bytes: &[u8]) {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/t")).unwrap();
    let path = Path::new("/t/000001.sst");
    fs.set_contents(path, bytes.to_vec());
    let shared: Arc<dyn FileSystem> = Arc::new(fs);
    let _ = verify_table(Arc::clone(&shared), path);
    if let Ok(table) = Table::open(shared, path, Arc::new(ReadCounters::new())) {
        for item in table.iter() {
            if item.is_err() {
                break;
            }
        }
        for i in [0u64, 5, 30, 59, 99] {
            let key = format!("key{i:04}").into_bytes();
            let _ = table.get(&key, &KeyHash::of(&key));
        }
    }
}

/// A mutation of `base`: flips, overwrites, truncation or extension driven by `ops`.
fn mutate(base: &[u8], ops: &[(u32, u8, u8)]) -> Vec<u8> {
    let mut out = base.to_vec();
    for &(pos, byte, kind) in ops {
        if out.is_empty() {
            out.push(byte);
            continue;
        }
        let at = pos as usize % out.len();
        match kind % 5 {
            0 => out[at] ^= 1 << (byte % 8),
            1 => out[at] = byte,
            2 => out.truncate(at),
            3 => out.insert(at, byte),
            _ => {
                let end = (at + 8).min(out.len());
                out[at..end].fill(byte);
            }
        }
    }
    out
}

fn ops() -> impl Strategy<Value = Vec<(u32, u8, u8)>> {
    proptest::collection::vec(any::<(u32, u8, u8)>(), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn table_reader_never_panics_on_mutated_tables(ops in ops()) {
        exercise_table(&mutate(&valid_table(), &ops));
    }

    #[test]
    fn table_reader_never_panics_on_mutated_tables_of_many_blocks(ops in ops()) {
        exercise_table(&mutate(&valid_table_of_many_blocks(), &ops));
    }

    #[test]
    fn table_reader_never_panics_on_random_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..600)
    ) {
        exercise_table(&bytes);
    }

    #[test]
    fn wal_parser_never_panics(ops in ops(), random in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mutated = mutate(&valid_log(), &ops);
        for bytes in [&mutated, &random] {
            for mode in [
                RecoveryMode::TolerateTornTail,
                RecoveryMode::Strict,
                RecoveryMode::PointInTime,
                RecoveryMode::Salvage,
            ] {
                if let Ok(contents) = parse_log(Path::new("x.log"), bytes, mode) {
                    prop_assert_eq!(contents.records.len(), contents.offsets.len());
                    prop_assert!(contents.offsets.windows(2).all(|w| w[0] < w[1]));
                    let skipped_end = contents.skipped.iter().map(|r| r.offset + r.bytes).max();
                    prop_assert!(skipped_end.is_none_or(|end| end <= bytes.len() as u64));
                }
            }
        }
    }

    #[test]
    fn version_edit_decoder_never_panics(ops in ops(), random in proptest::collection::vec(any::<u8>(), 0..200)) {
        for bytes in [mutate(&valid_edit(), &ops), random] {
            if let Ok(edit) = VersionEdit::decode(&bytes) {
                // Strict decoding: what decodes re-encodes to the same bytes.
                prop_assert_eq!(edit.encode(), bytes);
            }
        }
    }

    #[test]
    fn filter_decoder_never_panics(ops in ops(), random in proptest::collection::vec(any::<u8>(), 0..200)) {
        for bytes in [mutate(&valid_filter(), &ops), random] {
            if let Ok(filter) = BloomFilter::from_bytes(&bytes) {
                prop_assert_eq!(filter.to_bytes(), bytes);
            }
        }
    }

    #[test]
    fn blocked_filter_decoder_never_panics(ops in ops(), random in proptest::collection::vec(any::<u8>(), 0..200)) {
        for bytes in [mutate(&valid_blocked_filter(), &ops), random] {
            if let Ok(filter) = BlockedBloomFilter::from_bytes(&bytes) {
                prop_assert_eq!(filter.to_bytes(), bytes);
            }
        }
    }
}

#[test]
fn valid_inputs_decode() {
    let table = valid_table();
    exercise_table(&table);
    exercise_table(&valid_table_of_many_blocks());
    assert_eq!(
        parse_log(
            Path::new("x.log"),
            &valid_log(),
            RecoveryMode::TolerateTornTail
        )
        .unwrap()
        .records
        .len(),
        21
    );
    assert!(VersionEdit::decode(&valid_edit()).is_ok());
    assert!(BloomFilter::from_bytes(&valid_filter()).is_ok());
    assert!(BlockedBloomFilter::from_bytes(&valid_blocked_filter()).is_ok());
}
