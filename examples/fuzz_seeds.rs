//! Writes seed inputs for the fuzz targets in `fuzz/`: valid tables, WAL files, encoded
//! version edits and serialized Bloom filters, one file each, so the fuzzer starts from inputs
//! that get past the checksums and framing.
//!
//!     cargo run --example fuzz_seeds -- fuzz/corpus
//!
//! creates `DIR/table_reader`, `DIR/wal_reader`, `DIR/manifest_decoder` and
//! `DIR/filter_from_bytes` and fills them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use bloomkv::entry::{Entry, ValueKind};
use bloomkv::filter::{BloomFilter, FilterParams};
use bloomkv::fs::{FaultFs, FileSystem};
use bloomkv::manifest::{TableMeta, VersionEdit};
use bloomkv::sstable::{
    Compression, FilterPolicy, TableBuilder, TableOptions, TableProperties, TRAILER_LEN,
};
use bloomkv::wal::LogWriter;

fn table(keys: u64, options: TableOptions, value_len: usize) -> Vec<u8> {
    build_table(keys, options, value_len).0
}

/// A table of one data block stored with `compression`: checked here, its trailer's type byte
/// is the data kind (1) with the compression code in the high four bits.
fn one_block_table(compression: Compression) -> Vec<u8> {
    let options = TableOptions {
        compression,
        ..TableOptions::default()
    };
    let (bytes, props) = build_table(30, options, 64);
    assert_eq!(props.data_blocks, 1);
    let type_byte = bytes[props.data_size as usize - TRAILER_LEN];
    assert_eq!(type_byte, 1 | compression.code() << 4, "{compression:?}");
    bytes
}

fn build_table(keys: u64, options: TableOptions, value_len: usize) -> (Vec<u8>, TableProperties) {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/t")).unwrap();
    let path = Path::new("/t/000001.sst");
    let mut builder = TableBuilder::new(Arc::new(fs.clone()), path, options, keys).unwrap();
    for i in 0..keys {
        let tombstone = i % 7 == 3;
        builder
            .add(&Entry {
                key: format!("key{i:05}").into_bytes(),
                seq: 10_000 - i,
                kind: if tombstone {
                    ValueKind::Tombstone
                } else {
                    ValueKind::Value
                },
                value: if tombstone {
                    Vec::new()
                } else {
                    vec![b'a' + (i % 26) as u8; value_len]
                },
            })
            .unwrap();
    }
    let props = builder.finish().unwrap();
    (fs.contents(path).unwrap(), props)
}

fn log(records: &[Vec<u8>]) -> Vec<u8> {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/t")).unwrap();
    let path = Path::new("/t/000001.log");
    let mut writer = LogWriter::new(fs.create(path).unwrap());
    for (i, record) in records.iter().enumerate() {
        writer.add_record(record).unwrap();
        // Every other record synced, so that sync marks sit between records.
        if i % 2 == 1 {
            writer.sync().unwrap();
        }
    }
    writer.flush().unwrap();
    fs.contents(path).unwrap()
}

fn meta(number: u64, level: u32, smallest: &[u8], largest: &[u8]) -> TableMeta {
    TableMeta {
        keyspace: 0,
        number,
        level,
        file_size: 4096 * number,
        smallest_key: smallest.to_vec(),
        largest_key: largest.to_vec(),
        smallest_seq: number,
        largest_seq: number * 100,
        entries: number * 10,
    }
}

fn filter(bits_per_key: u32, hashes: u32, keys: u32) -> Vec<u8> {
    let mut f = BloomFilter::new(
        FilterParams::new(bits_per_key, hashes).unwrap(),
        keys.into(),
    );
    for i in 0..keys {
        f.insert(&i.to_le_bytes());
    }
    f.to_bytes()
}

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: fuzz_seeds DIR");
        return ExitCode::FAILURE;
    };

    let small_blocks = TableOptions {
        block_size: 256,
        restart_interval: 4,
        ..TableOptions::default()
    };
    let no_filter = TableOptions {
        filter_policy: FilterPolicy::Disabled,
        ..TableOptions::default()
    };
    let tables = [
        table(1, TableOptions::default(), 5),
        table(40, small_blocks, 12),
        table(30, no_filter, 20),
        table(200, TableOptions::default(), 8),
        // Blocks compressed with LZ4 (the default) and stored raw.
        one_block_table(Compression::Lz4),
        one_block_table(Compression::None),
    ];

    let logs = [
        log(&[b"one record".to_vec()]),
        log(&(0..12u8)
            .map(|i| vec![i; usize::from(i) * 31])
            .collect::<Vec<_>>()),
        // Spans blocks, so it exercises first/middle/last fragments.
        log(&[vec![1u8; 100], vec![2u8; 40_000], vec![3u8; 10]]),
        log(&[]),
    ];

    let edits = [
        VersionEdit::default().encode(),
        VersionEdit {
            log_number: Some(9),
            next_file_number: Some(12),
            last_seq: Some(1000),
            added: vec![meta(7, 1, b"a", b"m")],
            removed: vec![(0, 3), (0, 4)],
            write_totals: None,
            filter_policy: None,
            next_keyspace: None,
            keyspaces: Vec::new(),
            dropped_keyspaces: Vec::new(),
            added_ranges: Vec::new(),
            removed_ranges: Vec::new(),
            seq_times: Vec::new(),
        }
        .encode(),
        VersionEdit {
            log_number: Some(u64::MAX),
            next_file_number: None,
            last_seq: Some(1 << 40),
            added: vec![meta(2, 0, b"", b"zzzz"), meta(3, 6, b"key", b"key")],
            removed: Vec::new(),
            write_totals: Some(bloomkv::manifest::WriteTotals {
                user_bytes: 1 << 30,
                levels: vec![Default::default(); 7],
                ..Default::default()
            }),
            filter_policy: Some(bloomkv::manifest::RecordedPolicy::of(
                &bloomkv::FilterPolicy::BitsPerKeyBudget(10.0),
            )),
            next_keyspace: Some(4),
            keyspaces: vec![bloomkv::manifest::KeyspaceRecord {
                id: 3,
                name: "emails".into(),
                options: bloomkv::KeyspaceOptions::new()
                    .compression(bloomkv::Compression::None)
                    .memtable_size(1 << 20),
            }],
            dropped_keyspaces: vec![2],
            removed_ranges: vec![(0, range(b"a", b"c", 7))],
            seq_times: vec![(1000, 1_700_000_000)],
            added_ranges: vec![(0, range(b"a", b"b", 7)), (3, range(b"", b"\xff", 900))],
        }
        .encode(),
    ];

    let filters = [
        filter(10, 7, 100),
        filter(1, 1, 1),
        filter(20, 14, 1000),
        filter(4, 3, 0),
    ];

    let groups: [(&str, &[Vec<u8>]); 4] = [
        ("table_reader", &tables),
        ("wal_reader", &logs),
        ("manifest_decoder", &edits),
        ("filter_from_bytes", &filters),
    ];
    for (target, inputs) in groups {
        let target_dir = dir.join(target);
        if let Err(e) = std::fs::create_dir_all(&target_dir) {
            eprintln!("{}: {e}", target_dir.display());
            return ExitCode::FAILURE;
        }
        for (i, bytes) in inputs.iter().enumerate() {
            let path = target_dir.join(format!("seed-{i}"));
            if let Err(e) = std::fs::write(&path, bytes) {
                eprintln!("{}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
        println!("{}: {} seeds", target_dir.display(), inputs.len());
    }
    ExitCode::SUCCESS
}

/// A range deletion of `start..end` at `seq`.
fn range(start: &[u8], end: &[u8], seq: u64) -> bloomkv::range_tombstone::RangeTombstone {
    bloomkv::range_tombstone::RangeTombstone {
        start: start.to_vec(),
        end: end.to_vec(),
        seq,
    }
}
