//! The keys every bench loads and looks up, and the mix behind them and behind the values.
//! Each key is made from its index, so every store and every setting gets the same keys
//! without any of them held in memory.

/// A deterministic 16-byte key: present keys use even indexes' mixes, absent keys odd ones,
/// spread over the whole key space so absent keys fall inside the tables' key ranges.
pub fn bench_key(index: u64, present: bool) -> [u8; 16] {
    let tagged = index * 2 + u64::from(!present);
    let hi = splitmix(tagged);
    let lo = splitmix(hi ^ tagged);
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&hi.to_be_bytes());
    key[8..].copy_from_slice(&lo.to_be_bytes());
    key
}

/// One step of SplitMix64: a well-spread 64-bit mix of `z`, for keys and values alike.
pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
