//! A table's filter as units the store's filter memory can keep apart: one unit for a whole
//! filter, or (a partitioned filter block) one filter per run of consecutive user keys, all
//! Bloom filters or all Ribbon filters, under a top level that names the partitions' kind and
//! each partition's last key, size and key count.
//!
//! Under a filter memory limit the store folds or drops filters where lookups go least
//! (`docs/design.md`, "Filter memory"). A whole filter is one unit: a table with one busy key
//! range among half a million keys buys its whole filter or none. Cut into partitions of
//! `TableOptions::filter_partition_size` bytes each, the filter is kept partition by
//! partition, every partition still in memory (folded or not), so no lookup ever reads a
//! filter from the disk; the top level stays resident and costs a binary search per probe.
//!
//! `docs/format.md`, "Partitioned filter", has the bytes.

use byteorder::{ByteOrder, LittleEndian};

use crate::entry::key_prefix;
use crate::filter::{BloomFilter, FilterParams, KeyHash, RibbonFilter};
use crate::sstable::filter::block::FOLD_LIMIT;
use crate::sstable::filter::unit::FilterKind;
use crate::sstable::format::{put_varint, BlockHandle, Decoder, Malformed};

/// The first four bytes of a partitioned filter block; a whole filter's are "BKBF".
pub const PARTITIONED_MAGIC: &[u8; 4] = b"BKFP";
const VERSION: u16 = 1;
/// Magic, version, reserved, partition count, top-level length.
const HEADER_LEN: usize = 16;
const CHECKSUM_LEN: usize = 4;
/// A serialized Bloom filter's header and checksum around its words (`filter/codec.rs`).
const SERIALIZED_OVERHEAD: u64 = 36;
/// A serialized Ribbon filter's (`filter/ribbon.rs`).
const RIBBON_SERIALIZED_OVERHEAD: u64 = 44;
/// The top level's code for partitions that are Ribbon filters (0: Bloom filters).
const RIBBON_PARTITIONS: u16 = 1;
/// At most this many partitions: a top level of more is damage, not a table.
const MAX_PARTITIONS: usize = 1 << 24;

/// One unit of a table's filter: where its serialized filter starts in the file, its words
/// and the keys it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterUnit {
    pub offset: u64,
    pub words: u64,
    pub keys: u64,
    /// For a Ribbon filter, not a Bloom filter: its result bits `r`, and the first of its
    /// blocks with `r + 1` (which with its words give its rate).
    pub ribbon: Option<(u32, u64)>,
}

impl FilterUnit {
    /// Bytes of its serialized form.
    pub fn serialized_len(&self) -> u64 {
        self.overhead() + self.words * 8
    }

    /// Bytes of its serialized form's header and checksum around its words.
    fn overhead(&self) -> u64 {
        match self.ribbon {
            Some(_) => RIBBON_SERIALIZED_OVERHEAD,
            None => SERIALIZED_OVERHEAD,
        }
    }

    /// A Ribbon unit's predicted rate; `None` for a Bloom unit.
    pub fn ribbon_rate(&self) -> Option<f64> {
        let (r, upper_start) = self.ribbon?;
        // words = blocks * r + (blocks - upper_start)
        let blocks = (self.words + upper_start) / (u64::from(r) + 1);
        Some(RibbonFilter::rate_of_shape(r, upper_start, blocks))
    }
}

/// The resident description of a table's filter units: for a partitioned filter, the top
/// level (each partition's last user key, searched by its first eight bytes first).
#[derive(Debug)]
pub struct FilterLayout {
    units: Vec<FilterUnit>,
    /// Each partition's last user key's first eight bytes, big-endian (zero-padded); empty
    /// for a whole filter.
    prefixes: Vec<u64>,
    /// The last keys, one after another, and where each one ends.
    keys: Vec<u8>,
    key_ends: Vec<u32>,
    /// The keys of every unit together.
    total_keys: u64,
    /// The kind of the filter's units.
    kind: FilterKind,
}

impl FilterLayout {
    /// A whole filter: one unit, the block at `handle`, whose contents begin with `head` (at
    /// least a Ribbon filter's 40-byte header, when the block is shorter all of it), of the
    /// table's keys ([`set_whole_keys`](Self::set_whole_keys) gives them). The header names
    /// its kind.
    pub fn whole(handle: BlockHandle, head: &[u8]) -> Result<FilterLayout, String> {
        let (words, kind, shape) = match RibbonFilter::is_serialized(head) {
            true => {
                let (words, shape) = RibbonFilter::shape_in_serialized(head, handle.size)
                    .map_err(|e| e.to_string())?;
                (words, FilterKind::Ribbon, Some(shape))
            }
            false => {
                let words =
                    BloomFilter::words_in_serialized(handle.size).ok_or("bad size".to_string())?;
                let kind = match BloomFilter::serialized_is_blocked(head) {
                    Some(true) => FilterKind::CacheLocalBloom,
                    _ => FilterKind::Bloom,
                };
                (words, kind, None)
            }
        };
        let unit = FilterUnit {
            offset: handle.offset,
            words,
            keys: 0,
            ribbon: shape,
        };
        Ok(FilterLayout {
            units: vec![unit],
            prefixes: Vec::new(),
            keys: Vec::new(),
            key_ends: Vec::new(),
            total_keys: 0,
            kind,
        })
    }

    /// The kind of the filter's units.
    pub fn kind(&self) -> FilterKind {
        self.kind
    }

    /// A Ribbon filter's predicted rate, known without reading it: a whole one's, or its
    /// partitions' weighed by their keys. `None` for Bloom filters.
    pub fn ribbon_rate(&self) -> Option<f64> {
        let rates: Vec<(f64, u64)> = (self.units.iter())
            .map(|u| Some((u.ribbon_rate()?, u.keys)))
            .collect::<Option<_>>()?;
        let keys: u64 = rates.iter().map(|&(_, k)| k).sum();
        Some(match keys {
            // A whole filter before its keys are set: its one rate.
            0 => rates.first()?.0,
            _ => rates.iter().map(|&(r, k)| r * k as f64).sum::<f64>() / keys as f64,
        })
    }

    /// A whole filter holds each of the table's `keys` distinct keys.
    pub fn set_whole_keys(&mut self, keys: u64) {
        if !self.is_partitioned() {
            self.units[0].keys = keys;
            self.total_keys = keys;
        }
    }

    pub fn len(&self) -> usize {
        self.units.len()
    }

    pub fn unit(&self, i: usize) -> FilterUnit {
        self.units[i]
    }

    pub fn units(&self) -> &[FilterUnit] {
        &self.units
    }

    pub fn is_partitioned(&self) -> bool {
        !self.prefixes.is_empty()
    }

    /// Every unit's keys together.
    pub fn total_keys(&self) -> u64 {
        self.total_keys
    }

    /// Every unit's words together: the memory of the whole filter as written.
    pub fn words(&self) -> u64 {
        self.units.iter().map(|u| u.words).sum()
    }

    /// The unit that holds `key` if the table does: the first partition whose last key is
    /// at or after it (0 for a whole filter). `None` for a key past the last partition's.
    pub fn unit_for(&self, key: &[u8]) -> Option<usize> {
        if self.prefixes.is_empty() {
            return Some(0);
        }
        let p = key_prefix(key);
        // Prefixes order keys when they differ; among equal ones, the keys decide.
        let mut lo = self.prefixes.partition_point(|&q| q < p);
        let mut hi = lo + self.prefixes[lo..].partition_point(|&q| q == p);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.last_key(mid) < key {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        (lo < self.units.len()).then_some(lo)
    }

    /// Partition `i`'s last user key.
    pub fn last_key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.key_ends[i - 1] as usize
        };
        &self.keys[start..self.key_ends[i] as usize]
    }

    /// Memory the layout itself keeps: per partition its entry, last key and search prefix.
    pub fn resident_bytes(&self) -> usize {
        self.units.len() * std::mem::size_of::<FilterUnit>()
            + self.prefixes.len() * 8
            + self.keys.len()
            + self.key_ends.len() * 4
    }

    /// The top level's length from the first `HEADER_LEN` bytes of a partitioned filter
    /// block (`None`: they are not a partitioned filter's).
    pub fn top_len(header: &[u8]) -> Option<usize> {
        if header.len() < HEADER_LEN || &header[..4] != PARTITIONED_MAGIC {
            return None;
        }
        usize::try_from(LittleEndian::read_u32(&header[12..16])).ok()
    }

    /// Decodes the top level at the start of a partitioned filter block's `contents` (at
    /// least its top level; the block is `handle`), checking that the partitions it names
    /// fill the block exactly.
    pub fn decode_top(contents: &[u8], handle: BlockHandle) -> Result<FilterLayout, Malformed> {
        if contents.len() < HEADER_LEN + CHECKSUM_LEN || &contents[..4] != PARTITIONED_MAGIC {
            return Err(Malformed::new(0, "not a partitioned filter's top level"));
        }
        let version = LittleEndian::read_u16(&contents[4..6]);
        if version != VERSION {
            return Err(Malformed::new(4, format!("unknown version {version}")));
        }
        let ribbon = match LittleEndian::read_u16(&contents[6..8]) {
            0 => false,
            RIBBON_PARTITIONS => true,
            other => return Err(Malformed::new(6, format!("unknown partition kind {other}"))),
        };
        let top_len = LittleEndian::read_u32(&contents[12..16]) as usize;
        if top_len < HEADER_LEN + CHECKSUM_LEN || top_len > contents.len() {
            return Err(Malformed::new(
                12,
                format!("top level of {top_len} bytes in {} bytes", contents.len()),
            ));
        }
        let body_end = top_len - CHECKSUM_LEN;
        // An entry takes at least three bytes: no more partitions than that allows are
        // allocated for, whatever the count says.
        let count = LittleEndian::read_u32(&contents[8..12]) as usize;
        if !(2..=MAX_PARTITIONS).contains(&count) || count > (body_end - HEADER_LEN) / 3 {
            return Err(Malformed::new(
                8,
                format!("{count} partitions in {top_len} bytes"),
            ));
        }
        let stored = LittleEndian::read_u32(&contents[body_end..top_len]);
        if crc32fast::hash(&contents[..body_end]) != stored {
            return Err(Malformed::new(body_end, "top level checksum mismatch"));
        }
        let mut d = Decoder::new(&contents[..body_end], HEADER_LEN);
        let mut layout = FilterLayout {
            units: Vec::with_capacity(count),
            prefixes: Vec::with_capacity(count),
            keys: Vec::new(),
            key_ends: Vec::with_capacity(count),
            total_keys: 0,
            kind: match ribbon {
                true => FilterKind::Ribbon,
                false => FilterKind::Bloom,
            },
        };
        let contents_end = handle.offset.saturating_add(handle.size);
        let mut at = handle.offset.saturating_add(top_len as u64);
        for _ in 0..count {
            let key = d.length_prefixed("partition's last key")?;
            if let Some(prev) = layout.key_ends.len().checked_sub(1) {
                if layout.last_key(prev) >= key {
                    return Err(Malformed::new(
                        d.pos(),
                        "partitions' last keys out of order",
                    ));
                }
            }
            let words = d.varint("partition words")?;
            let keys = d.varint("partition keys")?;
            let columns = match ribbon {
                true => Some(ribbon_columns(&mut d, words)?),
                false => None,
            };
            let unit = FilterUnit {
                offset: at,
                words,
                keys,
                ribbon: columns,
            };
            let end = (words.checked_mul(8))
                .and_then(|b| b.checked_add(unit.overhead()))
                .and_then(|len| at.checked_add(len))
                .filter(|&end| words > 0 && end <= contents_end);
            let (Some(end), Some(total)) = (end, layout.total_keys.checked_add(keys)) else {
                return Err(Malformed::new(
                    d.pos(),
                    format!("partition of {words} words and {keys} keys past the block's end"),
                ));
            };
            layout.prefixes.push(key_prefix(key));
            layout.keys.extend_from_slice(key);
            let key_end = u32::try_from(layout.keys.len())
                .map_err(|_| Malformed::new(d.pos(), "partition keys too long"))?;
            layout.key_ends.push(key_end);
            layout.units.push(unit);
            layout.total_keys = total;
            at = end;
        }
        if !d.is_empty() {
            return Err(Malformed::new(
                d.pos(),
                "bytes after the last partition entry",
            ));
        }
        if at != contents_end {
            return Err(Malformed::new(
                body_end,
                format!("partitions end at {at}, the filter block's contents at {contents_end}"),
            ));
        }
        Ok(layout)
    }
}

/// A Ribbon partition entry's result bits `r` and first block with `r + 1`, checked against
/// its `words`: they must make whole blocks of at least two.
fn ribbon_columns(d: &mut Decoder<'_>, words: u64) -> Result<(u32, u64), Malformed> {
    let r = d.varint("partition result bits")?;
    let upper_start = d.varint("partition's first block with one more result bit")?;
    let per_block = r + 1;
    // At least one result bit: a table's Ribbon filter is built for a rate below 1/2.
    let fits = (1..32).contains(&r)
        && (words.checked_add(upper_start)).is_some_and(|w| {
            w % per_block == 0 && {
                let blocks = w / per_block;
                blocks >= 2 && upper_start <= blocks
            }
        });
    match fits {
        true => Ok((r as u32, upper_start)),
        false => Err(Malformed::new(
            d.pos(),
            format!(
                "a Ribbon partition of {words} words, {r} result bits from block {upper_start}"
            ),
        )),
    }
}

/// The keys each partition of a filter of `keys` keys at `bits_per_key` holds, for
/// partitions of about `partition_size` bytes; `None` when it would be one partition.
pub fn keys_per_partition(partition_size: usize, bits_per_key: u32) -> Option<u64> {
    if partition_size == 0 {
        return None;
    }
    Some((partition_size as u64 * 8 / u64::from(bits_per_key.max(1))).max(64))
}

/// One partition as [`encode`] writes it: its top-level entry's fields and its bytes.
struct Encoded {
    words: u64,
    keys: u64,
    ribbon: Option<(u32, u64)>,
    bytes: Vec<u8>,
}

/// A partitioned filter block's contents: the top level, then each partition's filter over
/// its run of `hashes`; `last_keys[i]` is partition `i`'s last user key and `ends[i]` where
/// its run of hashes ends. With `ribbon` (the bits per key a partition of Ribbon filters
/// spends: `params`' divided by the fold the store means to keep Bloom filters at), every
/// partition is a Ribbon filter when every run has at least `MIN_RIBBON_KEYS` keys, else
/// every partition is a Bloom filter. Returns the contents and whether they are Ribbon
/// filters.
pub fn encode(
    params: FilterParams,
    hashes: &[KeyHash],
    last_keys: &[Vec<u8>],
    ends: &[usize],
    ribbon: Option<u32>,
) -> (Vec<u8>, bool) {
    let runs: Vec<&[KeyHash]> = (0..ends.len())
        .map(|i| &hashes[if i == 0 { 0 } else { ends[i - 1] }..ends[i]])
        .collect();
    let ribbons: Option<Vec<RibbonFilter>> = ribbon.and_then(|fold_target| {
        (runs.iter())
            .map(|run| crate::sstable::filter::block::build_ribbon(params, run, fold_target))
            .collect()
    });
    let filters: Vec<Encoded> = match &ribbons {
        Some(ribbons) => (ribbons.iter())
            .map(|f| Encoded {
                words: f.memory_bytes() as u64 / 8,
                keys: f.key_count(),
                ribbon: Some(f.shape()),
                bytes: f.to_bytes(),
            })
            .collect(),
        None => (runs.iter())
            .map(|run| {
                // Every partition folds by up to `FOLD_LIMIT`, whatever its size: the memory
                // plan folds partitions one by one.
                let mut filter = BloomFilter::new_foldable(params, run.len() as u64, FOLD_LIMIT);
                for h in *run {
                    filter.insert_hash(h);
                }
                Encoded {
                    words: filter.bit_count() / 64,
                    keys: filter.len(),
                    ribbon: None,
                    bytes: filter.to_bytes(),
                }
            })
            .collect(),
    };
    let mut out = vec![0u8; HEADER_LEN];
    out[..4].copy_from_slice(PARTITIONED_MAGIC);
    LittleEndian::write_u16(&mut out[4..6], VERSION);
    if ribbons.is_some() {
        LittleEndian::write_u16(&mut out[6..8], RIBBON_PARTITIONS);
    }
    LittleEndian::write_u32(&mut out[8..12], filters.len() as u32);
    for (key, f) in last_keys.iter().zip(&filters) {
        put_varint(&mut out, key.len() as u64);
        out.extend_from_slice(key);
        put_varint(&mut out, f.words);
        put_varint(&mut out, f.keys);
        if let Some((r, upper_start)) = f.ribbon {
            put_varint(&mut out, u64::from(r));
            put_varint(&mut out, upper_start);
        }
    }
    let top_len = out.len() + CHECKSUM_LEN;
    LittleEndian::write_u32(&mut out[12..16], top_len as u32);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    for f in &filters {
        out.extend_from_slice(&f.bytes);
    }
    (out, ribbons.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::FilterParams;

    fn layout_of(keys: &[&[u8]]) -> (Vec<u8>, FilterLayout) {
        let hashes: Vec<KeyHash> = keys.iter().map(|k| KeyHash::of(k)).collect();
        // Runs of two keys each.
        let ends: Vec<usize> = (1..=keys.len() / 2).map(|i| i * 2).collect();
        let last: Vec<Vec<u8>> = ends.iter().map(|&e| keys[e - 1].to_vec()).collect();
        let params = FilterParams::new(10, 7).unwrap();
        let (contents, _) = encode(params, &hashes, &last, &ends, None);
        let handle = BlockHandle {
            offset: 1000,
            size: contents.len() as u64,
        };
        let layout = FilterLayout::decode_top(&contents, handle).unwrap();
        (contents, layout)
    }

    #[test]
    fn keys_sharing_their_first_eight_bytes_find_their_partition_by_the_whole_key() {
        let keys: [&[u8]; 8] = [
            b"a",
            b"abcdefgh",
            b"abcdefgh\x00",
            b"abcdefgh1",
            b"abcdefgh2",
            b"abcdefgh9",
            b"b",
            b"c\xff",
        ];
        let (contents, layout) = layout_of(&keys);
        assert_eq!(layout.len(), 4);
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(layout.unit_for(key), Some(i / 2), "{key:?}");
        }
        assert_eq!(layout.unit_for(b""), Some(0));
        assert_eq!(layout.unit_for(b"abcdefgh0"), Some(1));
        assert_eq!(layout.unit_for(b"abcdefgh3"), Some(2));
        assert_eq!(layout.unit_for(b"abcdefgh99"), Some(3));
        assert_eq!(layout.unit_for(b"c\xff\x00"), None);
        let top = FilterLayout::top_len(&contents).unwrap() as u64;
        assert_eq!(layout.unit(0).offset, 1000 + top);
        assert_eq!(
            layout.unit(1).offset,
            layout.unit(0).offset + layout.unit(0).serialized_len()
        );
    }

    #[test]
    fn ribbon_partitions_name_their_kind_and_shape_and_refuse_damage() {
        let keys: Vec<Vec<u8>> = (0..800u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let hashes: Vec<KeyHash> = keys.iter().map(|k| KeyHash::of(k)).collect();
        let ends = [200, 400, 600, 800];
        let last: Vec<Vec<u8>> = ends.iter().map(|&e| keys[e - 1].clone()).collect();
        let params = FilterParams::new(10, 7).unwrap();
        let (contents, ribbon) = encode(params, &hashes, &last, &ends, Some(1));
        assert!(ribbon);
        let handle = BlockHandle {
            offset: 0,
            size: contents.len() as u64,
        };
        let layout = FilterLayout::decode_top(&contents, handle).unwrap();
        assert_eq!(layout.kind(), FilterKind::Ribbon);
        let top = FilterLayout::top_len(&contents).unwrap() as u64;
        let mut at = top;
        for u in layout.units() {
            assert_eq!(u.offset, at);
            let bytes = &contents[at as usize..(at + u.serialized_len()) as usize];
            let filter = RibbonFilter::from_bytes(bytes).unwrap();
            assert_eq!(Some(filter.shape()), u.ribbon);
            assert_eq!(
                u.ribbon_rate(),
                Some(filter.predicted_false_positive_rate())
            );
            at += u.serialized_len();
        }
        assert_eq!(at, contents.len() as u64);
        for byte in 0..top as usize {
            let mut bad = contents.clone();
            bad[byte] ^= 0x21;
            assert!(
                FilterLayout::decode_top(&bad, handle).is_err(),
                "byte {byte}"
            );
        }
        // An entry whose result bits disagree with its words, its checksum made good: the
        // range checks find it.
        let varint_len = |v: u64| (64 - v.leading_zeros()).div_ceil(7).max(1) as usize;
        let first = layout.unit(0);
        let r_at = HEADER_LEN + 1 + 4 + varint_len(first.words) + varint_len(first.keys);
        for r in [0u8, 40, first.ribbon.unwrap().0 as u8 + 1] {
            let mut bad = contents.clone();
            bad[r_at] = r;
            let crc = crc32fast::hash(&bad[..top as usize - CHECKSUM_LEN]);
            bad[top as usize - CHECKSUM_LEN..top as usize].copy_from_slice(&crc.to_le_bytes());
            assert!(FilterLayout::decode_top(&bad, handle).is_err(), "r {r}");
        }
        // Runs too small for Ribbon filters make Bloom partitions, all of them.
        let (_, ribbon) = encode(params, &hashes, &last[..1], &[100], Some(1));
        assert!(!ribbon);
    }

    #[test]
    fn a_damaged_or_cut_top_level_is_malformed_never_a_panic() {
        let keys: [&[u8]; 6] = [b"k1", b"k2", b"k3", b"k4", b"k5", b"k6"];
        let (contents, _) = layout_of(&keys);
        let top = FilterLayout::top_len(&contents).unwrap();
        let handle = BlockHandle {
            offset: 0,
            size: contents.len() as u64,
        };
        for at in 0..top {
            let mut bad = contents.clone();
            bad[at] ^= 0x21;
            assert!(FilterLayout::decode_top(&bad, handle).is_err(), "byte {at}");
        }
        for len in 0..top {
            assert!(
                FilterLayout::decode_top(&contents[..len], handle).is_err(),
                "{len}"
            );
        }
        // A block handle that does not end where the partitions do.
        let longer = BlockHandle {
            offset: 0,
            size: handle.size + 8,
        };
        assert!(FilterLayout::decode_top(&contents, longer).is_err());
    }
}
