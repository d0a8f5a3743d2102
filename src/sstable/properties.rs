//! The properties block: what a table holds, written once by the builder and read at open.
//!
//! Stored fields (all varints, then two length-prefixed keys; see `docs/format.md`) are the
//! ones only the builder knows; sizes of the blocks that follow the properties block (the
//! index) and of the file itself are filled in by the reader from the footer.

use super::format::{put_varint, BlockHandle, Decoder, Malformed, PREFIX_FILTER_VERSION};
use crate::entry::SeqNo;
use crate::filter::FilterParams;
use crate::prefix::MAX_NAME_LEN;
use crate::sstable::filter::unit::FilterKind;

/// Where a table's prefix filter is and what it holds (format version 5, `docs/format.md`,
/// "Prefix filter block").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixFilterProperties {
    /// The name of the extractor that cut the prefixes ([`crate::PrefixExtractor::name`]).
    pub extractor: String,
    /// The prefix filter block.
    pub handle: BlockHandle,
    /// Distinct prefixes of the table's keys: the keys in the prefix filter.
    pub prefixes: u64,
    /// Whether the index is two-level (its version 4 layout) or one block (version 3).
    pub two_level_index: bool,
}

/// What a table holds and how big its parts are.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TableProperties {
    /// The table format version from the footer.
    pub format_version: u32,
    /// Entries (values and tombstones, every version counted).
    pub entries: u64,
    /// Entries that are tombstones.
    pub tombstones: u64,
    /// Distinct user keys: the number of keys in the filter.
    pub distinct_keys: u64,
    /// Smallest user key (empty for an empty table).
    pub smallest_key: Vec<u8>,
    /// Largest user key (empty for an empty table).
    pub largest_key: Vec<u8>,
    /// Smallest sequence number of any entry (0 for an empty table).
    pub smallest_seq: SeqNo,
    /// Largest sequence number of any entry (0 for an empty table).
    pub largest_seq: SeqNo,
    /// Sum of user key lengths over all entries, before prefix compression.
    pub raw_key_bytes: u64,
    /// Sum of value lengths over all entries.
    pub raw_value_bytes: u64,
    /// The filter's bits per key, hash count and predicted false-positive rate; `None` when
    /// the table has no filter.
    pub filter: Option<(u32, u32, f64)>,
    /// Bytes of the filter block, trailer included (0 without a filter).
    pub filter_size_bytes: u64,
    /// Partitions of a partitioned filter (`docs/format.md`, "Partitioned filter"); 0 for a
    /// whole filter or none. Like the sizes, known from the file, not stored here.
    pub filter_partitions: u64,
    /// The kind of the filter (a whole one's header says which, a partitioned one's top
    /// level); `None` without a filter. Like the sizes, known from the file, not stored
    /// here.
    pub filter_kind: Option<FilterKind>,
    /// Bytes of all data blocks, trailers included.
    pub data_size: u64,
    /// Number of data blocks.
    pub data_blocks: u64,
    /// Bytes of the index block, trailer included.
    pub index_size: u64,
    /// Bytes of the properties block, trailer included.
    pub properties_size: u64,
    /// Size of the whole file.
    pub file_size: u64,
    /// The prefix filter of a table written with a prefix extractor (format version 5);
    /// `None` before version 5.
    pub prefix_filter: Option<PrefixFilterProperties>,
}

impl TableProperties {
    /// The filter's parameters, when the table has a filter.
    pub fn filter_params(&self) -> Option<FilterParams> {
        self.filter
            .and_then(|(bits, hashes, _)| FilterParams::new(bits, hashes).ok())
    }

    /// The properties block's contents.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let (bits, hashes) = self.filter.map_or((0, 0), |(b, h, _)| (b, h));
        for v in [
            self.entries,
            self.tombstones,
            self.distinct_keys,
            self.smallest_seq,
            self.largest_seq,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.data_size,
            self.data_blocks,
            u64::from(bits),
            u64::from(hashes),
        ] {
            put_varint(&mut out, v);
        }
        for key in [&self.smallest_key, &self.largest_key] {
            put_varint(&mut out, key.len() as u64);
            out.extend_from_slice(key);
        }
        if let Some(prefix) = &self.prefix_filter {
            put_varint(&mut out, 1 + u64::from(prefix.two_level_index));
            put_varint(&mut out, prefix.extractor.len() as u64);
            out.extend_from_slice(prefix.extractor.as_bytes());
            put_varint(&mut out, prefix.handle.offset);
            put_varint(&mut out, prefix.handle.size);
            put_varint(&mut out, prefix.prefixes);
        }
        out
    }

    /// Decodes the properties block of a table of format `version` and checks that its
    /// fields agree with each other. The fields the reader derives from the footer are left at
    /// zero.
    pub(crate) fn decode(contents: &[u8], version: u32) -> Result<TableProperties, Malformed> {
        let mut d = Decoder::new(contents, 0);
        let entries = d.varint("entries")?;
        let tombstones = d.varint("tombstones")?;
        let distinct_keys = d.varint("distinct keys")?;
        let smallest_seq = d.varint("smallest sequence number")?;
        let largest_seq = d.varint("largest sequence number")?;
        let raw_key_bytes = d.varint("raw key bytes")?;
        let raw_value_bytes = d.varint("raw value bytes")?;
        let data_size = d.varint("data size")?;
        let data_blocks = d.varint("data blocks")?;
        let bits_at = d.pos();
        let bits = d.varint("filter bits per key")?;
        let hashes = d.varint("filter hashes")?;
        let smallest_key = d.length_prefixed("smallest key")?.to_vec();
        let largest_key = d.length_prefixed("largest key")?.to_vec();
        let prefix_filter = match version >= PREFIX_FILTER_VERSION {
            true => Some(decode_prefix_filter(&mut d)?),
            false => None,
        };
        if !d.is_empty() {
            return Err(Malformed::new(
                d.pos(),
                "unexpected bytes after the last property",
            ));
        }
        let filter = match (bits, hashes) {
            (0, 0) => None,
            (b, h) => {
                let params = u32::try_from(b)
                    .ok()
                    .zip(u32::try_from(h).ok())
                    .and_then(|(b, h)| FilterParams::new(b, h).ok())
                    .ok_or_else(|| {
                        Malformed::new(bits_at, format!("invalid filter parameters {b}/{h}"))
                    })?;
                Some((
                    params.bits_per_key(),
                    params.hashes(),
                    params.predicted_false_positive_rate(),
                ))
            }
        };
        let inconsistent = |what: &str| Err(Malformed::new(0, format!("inconsistent: {what}")));
        if tombstones > entries || distinct_keys > entries {
            return inconsistent("more tombstones or distinct keys than entries");
        }
        if (entries == 0) != (distinct_keys == 0) || (entries == 0) != (data_blocks == 0) {
            return inconsistent("entry, key and block counts disagree on emptiness");
        }
        if entries > 0 && (smallest_seq > largest_seq || smallest_key > largest_key) {
            return inconsistent("smallest above largest");
        }
        if data_blocks > entries {
            return inconsistent("more data blocks than entries");
        }
        Ok(TableProperties {
            format_version: 0,
            entries,
            tombstones,
            distinct_keys,
            smallest_key,
            largest_key,
            smallest_seq,
            largest_seq,
            raw_key_bytes,
            raw_value_bytes,
            filter,
            filter_size_bytes: 0,
            filter_partitions: 0,
            filter_kind: None,
            data_size,
            data_blocks,
            index_size: 0,
            properties_size: 0,
            file_size: 0,
            prefix_filter,
        })
    }
}

/// The prefix filter's fields, after the keys of a version 5 properties block.
fn decode_prefix_filter(d: &mut Decoder<'_>) -> Result<PrefixFilterProperties, Malformed> {
    let levels_at = d.pos();
    let two_level_index = match d.varint("index levels")? {
        1 => false,
        2 => true,
        n => return Err(Malformed::new(levels_at, format!("{n} index levels"))),
    };
    let name_at = d.pos();
    let name = d.length_prefixed("prefix extractor")?;
    let extractor = match std::str::from_utf8(name) {
        Ok(name) if !name.is_empty() && name.len() <= MAX_NAME_LEN => name.to_string(),
        _ => {
            return Err(Malformed::new(
                name_at,
                "prefix extractor name is empty, too long, or not UTF-8",
            ))
        }
    };
    let handle = BlockHandle::decode_varint(d)?;
    let prefixes = d.varint("prefixes")?;
    Ok(PrefixFilterProperties {
        extractor,
        handle,
        prefixes,
        two_level_index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TableProperties {
        TableProperties {
            format_version: 0,
            entries: 10,
            tombstones: 2,
            distinct_keys: 7,
            smallest_key: b"a".to_vec(),
            largest_key: b"zz".to_vec(),
            smallest_seq: 3,
            largest_seq: 90,
            raw_key_bytes: 15,
            raw_value_bytes: 1000,
            filter: Some((
                10,
                7,
                FilterParams::new(10, 7)
                    .unwrap()
                    .predicted_false_positive_rate(),
            )),
            filter_size_bytes: 0,
            filter_partitions: 0,
            filter_kind: None,
            data_size: 1100,
            data_blocks: 1,
            index_size: 0,
            properties_size: 0,
            file_size: 0,
            prefix_filter: None,
        }
    }

    #[test]
    fn round_trip() {
        let p = sample();
        assert_eq!(TableProperties::decode(&p.encode(), 4).unwrap(), p);
        let no_filter = TableProperties {
            filter: None,
            ..sample()
        };
        assert_eq!(
            TableProperties::decode(&no_filter.encode(), 3).unwrap(),
            no_filter
        );
    }

    #[test]
    fn rejects_truncation_trailing_bytes_and_inconsistency() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(TableProperties::decode(&bytes[..cut], 4).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(TableProperties::decode(&longer, 4).is_err());
        let bad = TableProperties {
            tombstones: 11,
            ..sample()
        };
        assert!(TableProperties::decode(&bad.encode(), 4).is_err());
    }

    #[test]
    fn a_prefix_filter_round_trips_in_version_5_only() {
        let p = TableProperties {
            prefix_filter: Some(PrefixFilterProperties {
                extractor: "fixed:8".into(),
                handle: BlockHandle {
                    offset: 1100,
                    size: 44,
                },
                prefixes: 3,
                two_level_index: true,
            }),
            ..sample()
        };
        assert_eq!(TableProperties::decode(&p.encode(), 5).unwrap(), p);
        let bytes = p.encode();
        for cut in sample().encode().len()..bytes.len() {
            assert!(TableProperties::decode(&bytes[..cut], 5).is_err());
        }
        // A version 4 reader of the same bytes finds bytes after the last property.
        assert!(TableProperties::decode(&bytes, 4).is_err());
        let no_name = TableProperties {
            prefix_filter: Some(PrefixFilterProperties {
                extractor: String::new(),
                ..p.prefix_filter.clone().unwrap()
            }),
            ..sample()
        };
        assert!(TableProperties::decode(&no_name.encode(), 5).is_err());
    }
}
