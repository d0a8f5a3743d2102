//! `sst`: one table file's properties, like RocksDB's `sst_dump --show_properties`, after
//! verifying its checksums. It reads the file alone, not a store.

use std::path::Path;
use std::sync::Arc;

use bloomkv::fs::OsFileSystem;
use bloomkv::FilterKind;
use serde_json::json;

use super::output::emit;
use crate::codec;
use crate::Failure;

pub(super) fn sst(file: &Path, hex: bool, as_json: bool) -> Result<(), Failure> {
    if !file.is_file() {
        return Err(Failure::from(match file.is_dir() {
            true => format!(
                "{} is a directory; sst takes one table file (NNNNNN.sst), and \
                 `kvtool --db DIR stats` describes a store",
                file.display()
            ),
            false => format!("no such table file: {}", file.display()),
        }));
    }
    // A store's other files are named for what they are: say so rather than "bad magic".
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(kind) = bloomkv::filename::parse_file_name(name) {
        if !matches!(kind, bloomkv::filename::FileKind::Table(_)) {
            return Err(Failure::from(format!(
                "{} is not a table but a store's {} file; `kvtool --db DIR check` reads those",
                file.display(),
                kind.describe()
            )));
        }
    }
    let props = bloomkv::sstable::verify_table(Arc::new(OsFileSystem), file)?;
    let kind = props.filter_kind.map_or("bloom", FilterKind::name);
    // Bits of filter per distinct key as written: the header and checksum are a few bytes.
    let held_bits = props.filter_size_bytes as f64 * 8.0 / props.distinct_keys.max(1) as f64;
    if as_json {
        let filter = props.filter.map(|(bits, hashes, fpr)| {
            json!({"kind": kind, "bits_per_key": bits, "hashes": hashes,
                   "predicted_false_positive_rate": fpr, "written_bits_per_key": held_bits})
        });
        let doc = json!({
            "file": file.display().to_string(),
            "entries": props.entries, "tombstones": props.tombstones,
            "distinct_keys": props.distinct_keys,
            "smallest_key": codec::format(&props.smallest_key, hex),
            "largest_key": codec::format(&props.largest_key, hex),
            "smallest_seq": props.smallest_seq, "largest_seq": props.largest_seq,
            "data_blocks": props.data_blocks, "data_size": props.data_size,
            "index_size": props.index_size, "filter_size": props.filter_size_bytes,
            "file_size": props.file_size, "filter": filter,
            "filter_partitions": props.filter_partitions,
            "format_version": props.format_version,
            "raw_key_bytes": props.raw_key_bytes, "raw_value_bytes": props.raw_value_bytes,
        });
        return emit(
            &(serde_json::to_string_pretty(&doc).expect("a JSON value serializes") + "\n"),
        );
    }
    let filter = match props.filter {
        Some((bits, hashes, fpr)) => {
            let parts = match props.filter_partitions {
                0 => String::new(),
                n => format!(", in {n} partitions"),
            };
            match props.filter_kind {
                Some(FilterKind::Ribbon) => format!(
                    "{kind}, {held_bits:.2} bits per key (a {bits}-bit Bloom filter's memory), \
                     predicted fpr {fpr:.6}"
                ),
                _ => format!(
                    "{kind}, {bits} bits per key, {hashes} hashes, predicted fpr {fpr:.6}{parts}"
                ),
            }
        }
        None => "none".to_string(),
    };
    let rows: [(&str, String); 17] = [
        ("file", file.display().to_string()),
        ("format version", props.format_version.to_string()),
        ("file size", props.file_size.to_string()),
        ("entries", props.entries.to_string()),
        ("tombstones", props.tombstones.to_string()),
        ("distinct keys", props.distinct_keys.to_string()),
        ("smallest key", codec::format(&props.smallest_key, hex)),
        ("largest key", codec::format(&props.largest_key, hex)),
        ("smallest seq", props.smallest_seq.to_string()),
        ("largest seq", props.largest_seq.to_string()),
        ("raw key bytes", props.raw_key_bytes.to_string()),
        ("raw value bytes", props.raw_value_bytes.to_string()),
        ("data blocks", props.data_blocks.to_string()),
        ("data size", props.data_size.to_string()),
        ("index size", props.index_size.to_string()),
        ("filter size", props.filter_size_bytes.to_string()),
        ("filter", filter),
    ];
    let mut out = String::from("table properties:\n");
    for (name, value) in rows {
        out += &format!("  {name:<16} {value}\n");
    }
    out += "checksums: OK\n";
    emit(&out)
}
