//! A homogeneous Ribbon filter (Dillinger and Walzer, "Ribbon filter: practically smaller than
//! Bloom and Xor", 2021): about 1.44 log2(1/rate) bits per key fewer than a Bloom filter's for
//! the same rate, for a filter built once from all its keys.
//!
//! Each key is an equation over GF(2): a 64-bit coefficient row `c` (lowest bit set) placed at
//! a start slot `s`, saying that the XOR of the solution rows `S[s + j]` over the set bits `j`
//! of `c` is zero. Building bands the rows by on-the-fly Gaussian elimination (each row is
//! XORed with the row already pivoted at its start until it finds a free slot, or vanishes: a
//! homogeneous system never fails), then solves from the last slot back, filling each free slot
//! with random bits. A key's query then computes that XOR and finds zero; any other key finds
//! `r` random-looking bits, zero with probability `2^-r`.
//!
//! The solution is kept interleaved, a block of 64 slots at a time: word `k` of a block holds
//! result bit `k` of its 64 slots, so a query reads `r` words from each of at most two
//! adjacent blocks (two or three cache lines) and takes `r` parities. Rates between powers of
//! two come from blocks of `r` and `r + 1` columns: the first blocks have `r`, the rest
//! `r + 1`, and a query uses the columns of the block it starts in (never more than the next
//! block holds).
//!
//! The slots number the keys times `1 + slack(r)` (rounded up to whole blocks). With fewer
//! spare slots, more keys' rows are dependent on others, and more other keys' rows fall in
//! the span of the keys': those are found zero whatever the random bits.

use byteorder::{ByteOrder, LittleEndian};

use super::error::{FilterError, Result};
use super::hash::{reduce, splitmix64, KeyHash};

/// Slots a key's coefficient row spans, and slots a block holds.
const WIDTH: u64 = 64;

/// Spare slots per key: `SLACK` up to `SLACK_FROM_COLUMNS` result bits, and
/// `SLACK_PER_COLUMN` more for each bit past them. A key outside the filter whose row falls in
/// the span of the keys' rows is found zero whatever the random bits; that share is near zero
/// past a threshold of spare slots, climbs steeply below it, varies there from one set of keys
/// to the next, and weighs more the lower the rate. Measured with 10% throughout at 1M keys:
/// 1% measured 1.01%, 0.1% 0.107%, 0.01% 0.011%; with 7% at `2^-7`, from 1.0x to 1.8x the rate
/// between 10k and 16M keys; with 15%, every rate within 2%. (Rows of 128 slots need half the
/// spare slots, but build at twice the time: the repository's filter notes, "Ribbon filters".)
const SLACK: f64 = 0.10;
const SLACK_FROM_COLUMNS: u32 = 7;
const SLACK_PER_COLUMN: f64 = 0.005;

/// Spare slots per key for `columns` result bits (see [`SLACK`]).
fn slack(columns: u32) -> f64 {
    SLACK + SLACK_PER_COLUMN * f64::from(columns.saturating_sub(SLACK_FROM_COLUMNS))
}

/// The most result bits a slot holds: a rate of `2^-32`.
const MAX_COLUMNS: u32 = 32;

const MAGIC: &[u8; 4] = b"BKRB";
const FORMAT_VERSION: u16 = 1;
const HEADER_LEN: usize = 40;
const CHECKSUM_LEN: usize = 4;

/// A homogeneous Ribbon filter over 64-slot blocks, built once from all its keys.
///
/// ```
/// use bloomkv::filter::RibbonFilter;
///
/// let keys: Vec<[u8; 4]> = (0..10_000u32).map(u32::to_be_bytes).collect();
/// let filter = RibbonFilter::build(keys.iter().map(|k| &k[..]), 0.01)?; // about 7.4 bits/key
/// assert!(keys.iter().all(|k| filter.contains(k))); // never a false negative
/// let again = RibbonFilter::from_bytes(&filter.to_bytes())?; // checksummed
/// assert_eq!(again, filter);
/// # Ok::<(), bloomkv::filter::FilterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RibbonFilter {
    blocks: u64,
    /// Result bits of the first `upper_start` blocks; the rest hold one more.
    lower_columns: u32,
    upper_start: u64,
    key_count: u64,
    /// Each block's columns in turn: `lower_columns` words per block, then one more per block
    /// from `upper_start` on.
    words: Vec<u64>,
}

/// Where a key's row lies, and which slots it sets, in a filter of `blocks` blocks.
#[inline]
fn row_of(hash: u64, blocks: u64) -> (u64, u64) {
    let starts = blocks * WIDTH - WIDTH + 1;
    let start = reduce(hash, starts);
    let coefficients = splitmix64(hash ^ 0x9e37_79b9_7f4a_7c15) | 1;
    (start, coefficients)
}

impl RibbonFilter {
    /// A filter of `keys` (hashed with xxh3-64) at about `target` false-positive rate.
    pub fn build<'k>(
        keys: impl IntoIterator<Item = &'k [u8]>,
        target: f64,
    ) -> Result<RibbonFilter> {
        let hashes: Vec<u64> = keys.into_iter().map(|k| KeyHash::of(k).as_u64()).collect();
        RibbonFilter::from_hashes(&hashes, target)
    }

    /// A filter of the keys whose xxh3-64 hashes are `hashes` ([`KeyHash::as_u64`]) at about
    /// `target` false-positive rate, which may lie anywhere strictly between 0 and 1; rates
    /// below `2^-32` are refused.
    pub fn from_hashes(hashes: &[u64], target: f64) -> Result<RibbonFilter> {
        RibbonFilter::from_hash_iter(hashes.iter().copied(), target)
    }

    /// [`from_hashes`](Self::from_hashes) for keys hashed with [`KeyHash::of`], as a table
    /// writer keeps them.
    pub fn from_key_hashes(hashes: &[KeyHash], target: f64) -> Result<RibbonFilter> {
        RibbonFilter::from_hash_iter(hashes.iter().map(KeyHash::as_u64), target)
    }

    /// The filter of the hashes `hashes` yields (read twice, so never collected apart from
    /// their sorting).
    fn from_hash_iter(
        hashes: impl ExactSizeIterator<Item = u64> + Clone,
        target: f64,
    ) -> Result<RibbonFilter> {
        let (lower_columns, upper_share) = columns_for(target)?;
        let key_count = hashes.len() as u64;
        let slots = (key_count as f64 * (1.0 + slack(lower_columns))).ceil() as u64;
        // At least two blocks, so that every start has a whole row of slots.
        let blocks = slots.div_ceil(WIDTH).max(2);
        let upper_blocks = (upper_share * blocks as f64).round() as u64;
        let upper_start = blocks - upper_blocks.min(blocks);
        let pivots = band(&by_start(hashes), blocks);
        let words = solve_fastest(&pivots, blocks, lower_columns, upper_start, key_count);
        Ok(RibbonFilter {
            blocks,
            lower_columns,
            upper_start,
            key_count,
            words,
        })
    }

    /// Whether `key` may be among the filter's keys (never false for one that is).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(&KeyHash::of(key))
    }

    /// [`contains`](Self::contains) for a key hashed once with [`KeyHash::of`].
    #[inline]
    pub fn contains_hash(&self, hash: &KeyHash) -> bool {
        #[cfg(target_arch = "x86_64")]
        if has_popcnt() {
            // SAFETY: the processor has the instruction.
            return unsafe { probe_popcnt(self, hash) };
        }
        self.probe(hash)
    }

    /// [`contains_hash`](Self::contains_hash)'s work, inlined where it is called.
    #[inline(always)]
    fn probe(&self, hash: &KeyHash) -> bool {
        let (start, coefficients) = row_of(hash.as_u64(), self.blocks);
        let block = start / WIDTH;
        let shift = (start % WIDTH) as u32;
        let columns = self.columns(block) as usize;
        // The row's slots from its block's slot `shift` on, then those of the next block
        // (none when `shift` is 0: the row then lies in one block, which may be the last).
        let in_block = coefficients << shift;
        let in_next = coefficients.checked_shr(64 - shift).unwrap_or(0);
        let here = self.block_offset(block);
        let next = if shift == 0 {
            here
        } else {
            self.block_offset(block + 1)
        };
        let (here, next) = (
            &self.words[here..here + columns],
            &self.words[next..next + columns],
        );
        // Every column's parity taken, without a branch on each: a key outside the filter
        // fails a column with odds one half, which no predictor guesses.
        let mut odd = 0;
        for (h, n) in here.iter().zip(next) {
            odd |= ((h & in_block) ^ (n & in_next)).count_ones();
        }
        odd & 1 == 0
    }

    /// The keys the filter was built from.
    pub fn key_count(&self) -> u64 {
        self.key_count
    }

    /// Starts loading the words a probe of `hash` reads first towards the CPU cache, ahead
    /// of [`contains_hash`](Self::contains_hash).
    #[inline]
    pub fn prefetch(&self, hash: &KeyHash) {
        let (start, _) = row_of(hash.as_u64(), self.blocks);
        if let Some(word) = self.words.get(self.block_offset(start / WIDTH)) {
            super::bloom::prefetch_read(word);
        }
    }

    /// Bytes of the solution in memory.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Bits of solution per key the filter was built from.
    pub fn bits_per_key(&self) -> f64 {
        (self.words.len() * 64) as f64 / self.key_count.max(1) as f64
    }

    /// The rate the filter's columns give other keys, `2^-r` per block averaged over the
    /// starts (the spare slots keep the measured rate within a few percent of it).
    pub fn predicted_false_positive_rate(&self) -> f64 {
        RibbonFilter::rate_of_shape(self.lower_columns, self.upper_start, self.blocks)
    }

    /// Its result bits `r` of the first blocks, and the first block with `r + 1`.
    pub fn shape(&self) -> (u32, u64) {
        (self.lower_columns, self.upper_start)
    }

    /// The rate [`predicted_false_positive_rate`](Self::predicted_false_positive_rate)
    /// gives a filter of `blocks` blocks, `r` result bits up to block `upper_start` and
    /// `r + 1` from there.
    pub fn rate_of_shape(r: u32, upper_start: u64, blocks: u64) -> f64 {
        let upper = blocks.saturating_sub(upper_start) as f64 / blocks.max(1) as f64;
        let lower = 0.5f64.powi(r as i32);
        lower * (1.0 - upper) + lower / 2.0 * upper
    }

    /// Result bits of block `block`'s slots.
    fn columns(&self, block: u64) -> u32 {
        self.lower_columns + u32::from(block >= self.upper_start)
    }

    /// Where block `block`'s words begin.
    fn block_offset(&self, block: u64) -> usize {
        let extra = block.saturating_sub(self.upper_start);
        (block * u64::from(self.lower_columns) + extra) as usize
    }

    /// The filter's bytes, checksummed (described in the repository's filter notes, "Ribbon filters").
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN + self.words.len() * 8 + CHECKSUM_LEN];
        out[0..4].copy_from_slice(MAGIC);
        LittleEndian::write_u16(&mut out[4..6], FORMAT_VERSION);
        LittleEndian::write_u16(&mut out[6..8], 0);
        LittleEndian::write_u32(&mut out[8..12], self.lower_columns);
        LittleEndian::write_u32(&mut out[12..16], 0);
        LittleEndian::write_u64(&mut out[16..24], self.blocks);
        LittleEndian::write_u64(&mut out[24..32], self.upper_start);
        LittleEndian::write_u64(&mut out[32..40], self.key_count);
        let body_end = out.len() - CHECKSUM_LEN;
        LittleEndian::write_u64_into(&self.words, &mut out[HEADER_LEN..body_end]);
        let crc = crc32fast::hash(&out[..body_end]);
        LittleEndian::write_u32(&mut out[body_end..], crc);
        out
    }

    /// Reads [`to_bytes`](Self::to_bytes)' form; truncated, damaged or inconsistent bytes are
    /// [`FilterError::Corrupt`], never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<RibbonFilter> {
        if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
            return Err(corrupt("shorter than its header"));
        }
        let body_end = bytes.len() - CHECKSUM_LEN;
        if crc32fast::hash(&bytes[..body_end]) != LittleEndian::read_u32(&bytes[body_end..]) {
            return Err(corrupt("checksum mismatch"));
        }
        let header = Header::decode(bytes, bytes.len() as u64)?;
        // On huge pages where it spans them, as a Bloom filter's bits are: a probe of a
        // large filter would otherwise miss the translation cache as well as the data cache.
        let mut solution = super::huge_pages::filled((body_end - HEADER_LEN) / 8, 0u64);
        LittleEndian::read_u64_into(&bytes[HEADER_LEN..body_end], &mut solution);
        Ok(RibbonFilter {
            blocks: header.blocks,
            lower_columns: header.lower_columns,
            upper_start: header.upper_start,
            key_count: header.key_count,
            words: solution,
        })
    }

    /// Whether `head`, the first bytes of a serialized filter, begins a Ribbon filter's form.
    pub fn is_serialized(head: &[u8]) -> bool {
        head.starts_with(MAGIC)
    }

    /// The 64-bit words and the [`shape`](Self::shape) of the Ribbon filter whose serialized
    /// form is `len` bytes long and begins with `head` (its first 40 bytes at least), known
    /// without reading the rest; the checksum is checked when the whole form is read.
    pub fn shape_in_serialized(head: &[u8], len: u64) -> Result<(u64, (u32, u64))> {
        let header = Header::decode(head, len)?;
        Ok((header.words, (header.lower_columns, header.upper_start)))
    }
}

/// Whether the processor counts bits in one instruction. A probe and a build take one parity
/// per result bit for each slot they meet, which the portable target computes with a dozen
/// shifts and masks; the check is a load of a flag the standard library caches. (Other
/// processors keep their portable target's count: aarch64's has one instruction for it.)
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_popcnt() -> bool {
    std::arch::is_x86_feature_detected!("popcnt")
}

/// [`RibbonFilter::probe`] compiled with the population-count instruction.
///
/// # Safety
/// Only where [`has_popcnt`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn probe_popcnt(filter: &RibbonFilter, hash: &KeyHash) -> bool {
    filter.probe(hash)
}

/// [`solve`], compiled with the population-count instruction where the processor has it.
fn solve_fastest(pivots: &[u64], blocks: u64, columns: u32, upper: u64, seed: u64) -> Vec<u64> {
    #[cfg(target_arch = "x86_64")]
    if has_popcnt() {
        // SAFETY: the processor has the instruction.
        return unsafe { solve_popcnt(pivots, blocks, columns, upper, seed) };
    }
    solve(pivots, blocks, columns, upper, seed)
}

/// [`solve`] compiled with the population-count instruction.
///
/// # Safety
/// Only where [`has_popcnt`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn solve_popcnt(
    pivots: &[u64],
    blocks: u64,
    columns: u32,
    upper: u64,
    seed: u64,
) -> Vec<u64> {
    solve(pivots, blocks, columns, upper, seed)
}

fn corrupt(why: &str) -> FilterError {
    FilterError::Corrupt(format!("ribbon filter: {why}"))
}

/// The serialized form's header, checked against the form's length.
struct Header {
    lower_columns: u32,
    blocks: u64,
    upper_start: u64,
    key_count: u64,
    words: u64,
}

impl Header {
    fn decode(bytes: &[u8], len: u64) -> Result<Header> {
        if bytes.len() < HEADER_LEN || len < (HEADER_LEN + CHECKSUM_LEN) as u64 {
            return Err(corrupt("shorter than its header"));
        }
        if &bytes[0..4] != MAGIC || LittleEndian::read_u16(&bytes[4..6]) != FORMAT_VERSION {
            return Err(corrupt("unknown magic or version"));
        }
        if LittleEndian::read_u16(&bytes[6..8]) != 0 || LittleEndian::read_u32(&bytes[12..16]) != 0
        {
            return Err(corrupt("reserved fields set"));
        }
        let lower_columns = LittleEndian::read_u32(&bytes[8..12]);
        let blocks = LittleEndian::read_u64(&bytes[16..24]);
        let upper_start = LittleEndian::read_u64(&bytes[24..32]);
        let key_count = LittleEndian::read_u64(&bytes[32..40]);
        // Slots number below 2^64 (a filter of no columns has no words to bound them).
        let blocks_fit = (2..=u64::MAX / WIDTH).contains(&blocks) && upper_start <= blocks;
        if !blocks_fit || lower_columns >= MAX_COLUMNS {
            return Err(corrupt("block or column counts out of range"));
        }
        let words = (blocks.checked_mul(u64::from(lower_columns)))
            .and_then(|w| w.checked_add(blocks - upper_start));
        let body = len - (HEADER_LEN + CHECKSUM_LEN) as u64;
        match words {
            Some(words) if words.checked_mul(8) == Some(body) => Ok(Header {
                lower_columns,
                blocks,
                upper_start,
                key_count,
                words,
            }),
            _ => Err(corrupt("length does not match its blocks and columns")),
        }
    }
}

/// The rate a Ribbon filter reaches at `bits_per_key` bits per key: the inverse of the bits
/// [`RibbonFilter::from_hashes`] spends for a rate ([`ribbon_bits_per_key`]), for spending a
/// given memory on the lowest rate it buys. `None` below the bits of a rate of 1/2.
///
/// The spare slots grow with the result bits, so some bits per key lie between what `r` bits
/// at most and `r + 1` at least take: those buy `2^-(r+1)`, the rate of `r + 1` bits.
pub fn ribbon_rate_for_bits_per_key(bits_per_key: f64) -> Option<f64> {
    let mut rate = None;
    for lower in 1..MAX_COLUMNS {
        let upper = bits_per_key / (1.0 + slack(lower)) - f64::from(lower);
        if upper < 0.0 {
            break;
        }
        rate = Some(0.5f64.powi(lower as i32) * (1.0 - upper.min(1.0) / 2.0));
    }
    rate
}

/// Bits per key a Ribbon filter of many keys spends for `rate` (before its slots are rounded
/// up to whole blocks); `None` for a rate [`RibbonFilter::from_hashes`] refuses.
pub fn ribbon_bits_per_key(rate: f64) -> Option<f64> {
    let (lower, upper) = columns_for(rate).ok()?;
    Some((1.0 + slack(lower)) * (f64::from(lower) + upper))
}

/// The result bits `r` for `target`, and the share of blocks that hold `r + 1`: blocks of
/// `r` columns give `2^-r`, of `r + 1` half that, and the mix meets the target.
fn columns_for(target: f64) -> Result<(u32, f64)> {
    if !(target > 0.0 && target < 1.0) {
        return Err(FilterError::NotARate(target));
    }
    let lower = (1.0 / target).log2().floor();
    if lower >= f64::from(MAX_COLUMNS) {
        let best = 0.5f64.powi(MAX_COLUMNS as i32);
        return Err(FilterError::UnreachableRate { target, best });
    }
    let lower = lower as u32;
    // target = 2^-lower * (1 - upper / 2)
    let upper = (2.0 * (1.0 - target * 2f64.powi(lower as i32))).clamp(0.0, 1.0);
    Ok((lower, upper))
}

/// `hashes` in about the order of their start slots, which grow with the hash: a counting
/// sort by the top `ORDER_BITS` bits. Banded in that order, the slots a row meets lie near
/// the last row's, in cache, where banding in the keys' order met a cache miss a key.
fn by_start(hashes: impl ExactSizeIterator<Item = u64> + Clone) -> Vec<u64> {
    const ORDER_BITS: u32 = 12;
    let bucket = |h: u64| (h >> (64 - ORDER_BITS)) as usize;
    let mut starts = vec![0usize; (1 << ORDER_BITS) + 1];
    for h in hashes.clone() {
        starts[bucket(h) + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut sorted = vec![0u64; hashes.len()];
    for h in hashes {
        let at = &mut starts[bucket(h)];
        sorted[*at] = h;
        *at += 1;
    }
    sorted
}

/// Bands every key's row into `blocks * 64` slots: each slot keeps at most one row, whose
/// lowest set bit is the slot's own. Returns each slot's row (0: free).
///
/// A row's elimination is a chain of dependent steps (load the pivot, XOR, shift, load the
/// next), so [`STREAMS`] rows from as many stretches of the sorted hashes are eliminated
/// together, a step of each in turn, for the processor to overlap their loads. Any order of
/// insertion bands a valid system; this one is as deterministic as the hashes.
fn band(hashes: &[u64], blocks: u64) -> Vec<u64> {
    /// A row being eliminated: its next hash, the end of its stretch, its slot and row.
    #[derive(Clone, Copy)]
    struct Stream {
        next: usize,
        end: usize,
        slot: u64,
        row: u64,
    }
    const STREAMS: usize = 4;
    let mut pivots = vec![0u64; (blocks * WIDTH) as usize];
    let per = hashes.len().div_ceil(STREAMS);
    let mut streams: [Stream; STREAMS] = std::array::from_fn(|i| Stream {
        next: (i * per).min(hashes.len()),
        end: ((i + 1) * per).min(hashes.len()),
        slot: 0,
        row: 0,
    });
    loop {
        let mut active = false;
        for s in &mut streams {
            if s.row == 0 {
                if s.next == s.end {
                    continue;
                }
                (s.slot, s.row) = row_of(hashes[s.next], blocks);
                s.next += 1;
            }
            active = true;
            let pivot = &mut pivots[s.slot as usize];
            if *pivot == 0 {
                *pivot = s.row;
                s.row = 0;
                continue;
            }
            // Zero: dependent on rows already banded, which any solution of theirs satisfies.
            s.row ^= *pivot;
            let skip = s.row.trailing_zeros() % 64;
            s.slot += u64::from(skip);
            s.row >>= skip;
        }
        if !active {
            return pivots;
        }
    }
}

/// Solves the banded rows from the last slot back, one bit of every column at a time, free
/// slots taking random bits; lays the solution out interleaved by block.
#[inline(always)]
fn solve(pivots: &[u64], blocks: u64, lower_columns: u32, upper_start: u64, seed: u64) -> Vec<u64> {
    let columns = (lower_columns + 1) as usize;
    // Bit t of `after[k]`: result bit k of the slot t + 1 past the current one. Once a
    // block's 64 slots are solved, `after[k]` holds bit k of each, in slot order: the block's
    // column k as it is laid out.
    let mut after = vec![0u64; columns];
    let mut random = splitmix64(seed ^ 0x5851_f42d_4c95_7f2d);
    let words_len = blocks * u64::from(lower_columns) + (blocks - upper_start);
    let mut words = super::huge_pages::filled(words_len as usize, 0u64);
    for block in (0..blocks).rev() {
        let from = (block * WIDTH) as usize;
        for &pivot in pivots[from..from + WIDTH as usize].iter().rev() {
            // A free slot (no row) takes fresh random bits; one with a row takes what makes
            // the row's XOR zero. Both without a branch, as the first is a tenth of slots
            // with no pattern.
            let free = u64::from(pivot == 0);
            let fresh = splitmix64(random);
            random = if pivot == 0 { fresh } else { random };
            let row = pivot >> 1;
            for (k, window) in after.iter_mut().enumerate() {
                let bit = u64::from((row & *window).count_ones()) ^ ((random >> k) & free);
                *window = (*window << 1) | (bit & 1);
            }
        }
        let block_columns = lower_columns as usize + usize::from(block >= upper_start);
        let offset =
            (block * u64::from(lower_columns) + block.saturating_sub(upper_start)) as usize;
        words[offset..offset + block_columns].copy_from_slice(&after[..block_columns]);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(from: u64, count: u64) -> Vec<u64> {
        (from..from + count)
            .map(|i| KeyHash::of(&i.to_le_bytes()).as_u64())
            .collect()
    }

    fn measured_rate(filter: &RibbonFilter, probes: u64) -> f64 {
        let found = (0..probes)
            .filter(|i| filter.contains_hash(&KeyHash::from_u64(keys(1 << 40 | i, 1)[0])))
            .count();
        found as f64 / probes as f64
    }

    #[test]
    fn every_key_is_found() {
        for (n, target) in [
            (1, 0.01),
            (63, 0.5),
            (1000, 0.01),
            (100_000, 0.001),
            (5000, 0.3),
        ] {
            let hashes = keys(0, n);
            let filter = RibbonFilter::from_hashes(&hashes, target).unwrap();
            for h in &hashes {
                assert!(filter.contains_hash(&KeyHash::from_u64(*h)), "n {n}");
            }
        }
        let empty = RibbonFilter::from_hashes(&[], 0.01).unwrap();
        assert_eq!(empty.key_count(), 0);
    }

    #[test]
    fn every_key_count_and_rate_round_trips_with_every_key_found() {
        let counts = (0..=130).chain([255, 256, 257, 1000, 4095, 65_537, 2_000_000]);
        for n in counts {
            for target in [0.4, 0.01, 0.0007, 1e-6] {
                let hashes = keys(n << 24, n);
                let filter = RibbonFilter::from_hashes(&hashes, target).unwrap();
                let again = RibbonFilter::from_bytes(&filter.to_bytes()).unwrap();
                assert_eq!(again, filter, "{n} keys at {target}");
                let missed = (hashes.iter())
                    .filter(|&&h| !again.contains_hash(&KeyHash::from_u64(h)))
                    .count();
                assert_eq!(missed, 0, "{n} keys at {target}");
            }
        }
    }

    #[test]
    fn the_measured_rate_is_near_the_target_at_rates_between_powers_of_two() {
        for target in [0.01, 0.005, 0.001, 0.03] {
            let filter = RibbonFilter::from_hashes(&keys(0, 200_000), target).unwrap();
            let predicted = filter.predicted_false_positive_rate();
            assert!(
                (predicted / target - 1.0).abs() < 0.02,
                "{target}: {predicted}"
            );
            let measured = measured_rate(&filter, 2_000_000);
            assert!(
                (measured / target - 1.0).abs() < 0.1,
                "{target}: measured {measured}"
            );
        }
    }

    #[test]
    fn keys_are_banded_in_the_order_of_their_starts() {
        let hashes = keys(0, 10_000);
        let sorted = by_start(hashes.iter().copied());
        assert!(sorted.windows(2).all(|w| w[0] >> 52 <= w[1] >> 52));
        let (mut given, mut banded) = (hashes.clone(), sorted);
        given.sort_unstable();
        banded.sort_unstable();
        assert_eq!(given, banded, "the same keys");
    }

    #[test]
    fn one_percent_takes_about_seven_bits_per_key() {
        let filter = RibbonFilter::from_hashes(&keys(0, 1_000_000), 0.01).unwrap();
        let bits = filter.bits_per_key();
        // 6 and 7 result bits mixed for 1% (6.72), and 10% spare slots: a Bloom filter
        // takes 10.
        assert!(bits > 7.3 && bits < 7.45, "{bits}");
    }

    #[test]
    fn the_rate_for_bits_per_key_is_the_inverse_of_the_bits_for_a_rate() {
        for bits in [1.2, 3.0, 5.5, 7.39, 10.0, 14.0, 20.0] {
            let rate = ribbon_rate_for_bits_per_key(bits).unwrap();
            let back = ribbon_bits_per_key(rate).unwrap();
            assert!((back - bits).abs() < 1e-9, "{bits}: {rate} back to {back}");
            let filter = RibbonFilter::from_hashes(&keys(0, 100_000), rate).unwrap();
            assert!((filter.bits_per_key() / bits - 1.0).abs() < 0.01, "{bits}");
        }
        assert!(ribbon_rate_for_bits_per_key(1.0).is_none());
        // Between what 8 result bits at most and 9 at least take, and the like: the rate of
        // the larger count, and never a rate that rises with the bits.
        let mut last = 1.0;
        for tenth in 11..400 {
            let rate = ribbon_rate_for_bits_per_key(f64::from(tenth) / 10.0).unwrap();
            assert!(rate <= last, "{tenth}: {rate} after {last}");
            last = rate;
        }
        for bits in [8.82, 9.96, 22.0] {
            assert!(ribbon_rate_for_bits_per_key(bits).is_some(), "{bits}");
        }
        let ten = ribbon_rate_for_bits_per_key(10.0).unwrap();
        // A Bloom filter's 10 bits per key give 1%; a Ribbon filter's about a fifth of it.
        assert!(ten > 0.0015 && ten < 0.0025, "{ten}");
    }

    #[test]
    fn bytes_round_trip_and_any_damage_is_an_error() {
        let filter = RibbonFilter::from_hashes(&keys(0, 3000), 0.02).unwrap();
        let bytes = filter.to_bytes();
        assert_eq!(RibbonFilter::from_bytes(&bytes).unwrap(), filter);
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert!(RibbonFilter::from_bytes(&damaged).is_err(), "byte {i}");
        }
        for len in 0..bytes.len() {
            assert!(
                RibbonFilter::from_bytes(&bytes[..len]).is_err(),
                "length {len}"
            );
        }
    }

    #[test]
    fn targets_that_are_not_rates_or_out_of_reach_are_refused() {
        for target in [0.0, 1.0, -0.5, f64::NAN] {
            assert!(matches!(
                RibbonFilter::from_hashes(&[1], target),
                Err(FilterError::NotARate(_))
            ));
        }
        assert!(matches!(
            RibbonFilter::from_hashes(&[1], 1e-12),
            Err(FilterError::UnreachableRate { .. })
        ));
    }
}
