//! What a Bloom filter promises: no false negatives (plain and counting), a serialized form that
//! round-trips and rejects every damaged variant, and the classic operations.

use std::collections::HashSet;

use bloomkv::filter::{BloomFilter, CountingBloomFilter, FilterError, FilterParams, KeyHash};
use proptest::prelude::*;

fn key(tag: &str, i: u64) -> Vec<u8> {
    format!("{tag}-{i}").into_bytes()
}

fn filled(n: u64, rate: f64, tag: &str) -> BloomFilter {
    let mut f = BloomFilter::with_capacity(n, rate).unwrap();
    for i in 0..n {
        f.insert(&key(tag, i));
    }
    f
}

/// Keys of 0 to 4 KiB, the empty key included, with repeats likely among short ones.
fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let short = prop::collection::vec(any::<u8>(), 0..4);
    let long = prop::collection::vec(any::<u8>(), 0..=4096);
    prop::collection::vec(prop_oneof![3 => short, 1 => long], 0..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn bloom_filter_has_no_false_negatives(
        keys in keys_strategy(),
        capacity in 1u64..200,
        rate in prop::sample::select(vec![0.3, 0.1, 0.01, 0.001, 1e-6]),
    ) {
        // Small capacities overfill the filter: still no false negative.
        let mut f = BloomFilter::with_capacity(capacity, rate).unwrap();
        for k in &keys {
            f.insert(k);
        }
        let mut g = BloomFilter::with_capacity(capacity, rate).unwrap();
        for k in &keys {
            g.insert_hash(&KeyHash::of(k));
        }
        prop_assert_eq!(&f, &g);
        for k in &keys {
            prop_assert!(f.contains(k));
            prop_assert!(f.contains_hash(&KeyHash::of(k)));
        }
        let decoded = BloomFilter::from_bytes(&f.to_bytes()).unwrap();
        for k in &keys {
            prop_assert!(decoded.contains(k));
        }
    }

    #[test]
    fn counting_filter_has_no_false_negatives_after_removals(
        keys in keys_strategy(),
        remove_mask in prop::collection::vec(any::<bool>(), 80),
        capacity in 1u64..100,
    ) {
        // Tiny filters saturate counters; removals of other keys must not hide kept ones.
        let mut f = CountingBloomFilter::with_capacity(capacity, 0.01).unwrap();
        for k in &keys {
            f.insert(k);
        }
        for k in &keys {
            prop_assert!(f.contains(k));
        }
        let mut kept = Vec::new();
        for (k, &remove) in keys.iter().zip(&remove_mask) {
            if remove {
                prop_assert!(f.remove(k), "an inserted key must be removable");
            } else {
                kept.push(k);
            }
        }
        for k in kept {
            prop_assert!(f.contains(k));
        }
    }
}

// ---- serialization ----

#[test]
fn serialization_round_trips() {
    for (n, rate) in [(0, 0.01), (1, 0.5), (1_000, 0.01), (20_000, 0.0001)] {
        let f = filled(n, rate, "k");
        let bytes = f.to_bytes();
        assert_eq!(bytes.len(), 32 + f.memory_bytes() + 4);
        let g = BloomFilter::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        assert_eq!(g.len(), n);
        assert_eq!(g.params(), f.params());
        assert_eq!(g.to_bytes(), bytes);
        for i in 0..n + 2_000 {
            let k = key("k", i);
            assert_eq!(f.contains(&k), g.contains(&k));
        }
    }
}

fn sample_bytes() -> Vec<u8> {
    filled(100, 0.01, "s").to_bytes()
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample_bytes();
    for len in 0..bytes.len() {
        match BloomFilter::from_bytes(&bytes[..len]) {
            Err(FilterError::Corrupt(_)) => {}
            other => panic!("prefix of {len} bytes: {other:?}"),
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        BloomFilter::from_bytes(&longer),
        Err(FilterError::Corrupt(_))
    ));
}

#[test]
fn every_single_byte_change_is_an_error() {
    let bytes = sample_bytes();
    let mut damaged = bytes.clone();
    for offset in 0..bytes.len() {
        for mask in [0x01u8, 0x02, 0x10, 0x80, 0x5a, 0xff] {
            damaged[offset] ^= mask;
            match BloomFilter::from_bytes(&damaged) {
                Err(FilterError::Corrupt(_)) => {}
                other => panic!("offset {offset} xor {mask:#04x}: {other:?}"),
            }
            damaged[offset] = bytes[offset];
        }
    }
}

/// Rewrites header field bytes, resizes the body to `body_len` bytes, and re-checksums, so
/// the damage gets past the checksum.
fn rewritten(bytes: &[u8], edits: &[(usize, &[u8])], body_len: Option<usize>) -> Vec<u8> {
    let mut body = bytes[..bytes.len() - 4].to_vec();
    for (offset, value) in edits {
        body[*offset..offset + value.len()].copy_from_slice(value);
    }
    if let Some(len) = body_len {
        body.resize(32 + len, 0);
    }
    let crc = crc32fast::hash(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

#[test]
fn header_fields_with_bad_values_are_errors() {
    let bytes = sample_bytes();
    // Re-checksumming an unchanged header gives back the original bytes.
    assert_eq!(rewritten(&bytes, &[], None), bytes);
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("bad magic", rewritten(&bytes, &[(0, b"BKBX")], None)),
        (
            "version 0",
            rewritten(&bytes, &[(4, &0u16.to_le_bytes())], None),
        ),
        (
            "version 2",
            rewritten(&bytes, &[(4, &2u16.to_le_bytes())], None),
        ),
        (
            "algorithm 0",
            rewritten(&bytes, &[(6, &0u16.to_le_bytes())], None),
        ),
        (
            "algorithm 3",
            rewritten(&bytes, &[(6, &3u16.to_le_bytes())], None),
        ),
        (
            "0 hashes",
            rewritten(&bytes, &[(8, &0u32.to_le_bytes())], None),
        ),
        (
            "65 hashes",
            rewritten(&bytes, &[(8, &65u32.to_le_bytes())], None),
        ),
        (
            "0 bits/key",
            rewritten(&bytes, &[(12, &0u32.to_le_bytes())], None),
        ),
        (
            "65 bits/key",
            rewritten(&bytes, &[(12, &65u32.to_le_bytes())], None),
        ),
        (
            "bit count 0",
            rewritten(&bytes, &[(16, &0u64.to_le_bytes())], Some(0)),
        ),
        (
            "bit count 1000 (not a multiple of 64)",
            rewritten(&bytes, &[(16, &1000u64.to_le_bytes())], Some(125)),
        ),
        (
            "bit count 1003 (not a multiple of 8)",
            rewritten(&bytes, &[(16, &1003u64.to_le_bytes())], Some(125)),
        ),
        (
            "bit count 72",
            rewritten(&bytes, &[(16, &72u64.to_le_bytes())], Some(9)),
        ),
        (
            "bit count larger than the body",
            rewritten(&bytes, &[(16, &(1u64 << 40).to_le_bytes())], None),
        ),
        (
            "bit count u64::MAX",
            rewritten(&bytes, &[(16, &u64::MAX.to_le_bytes())], None),
        ),
    ];
    for (what, damaged) in bad {
        match BloomFilter::from_bytes(&damaged) {
            Err(FilterError::Corrupt(_)) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    // A re-checksummed change of a valid kind decodes: the checks above are not blanket
    // rejections of any edit.
    let fewer_hashes = rewritten(&bytes, &[(8, &3u32.to_le_bytes())], None);
    assert_eq!(BloomFilter::from_bytes(&fewer_hashes).unwrap().hashes(), 3);
}

// ---- classic uses ----

#[test]
fn with_capacity_sizes_from_the_rate() {
    let f = BloomFilter::with_capacity(10_000, 0.01).unwrap();
    assert_eq!((f.bits_per_key(), f.hashes()), (10, 5));
    assert_eq!(f.bit_count(), 100_032); // 100_000 rounded up to whole 64-bit words
    assert_eq!(f.memory_bytes(), 100_032 / 8);
    assert_eq!(f.capacity(), 10_003);
    assert!(f.is_empty());
    assert_eq!(f.len(), 0);
    assert_eq!(
        f.params(),
        FilterParams::for_false_positive_rate(0.01).unwrap()
    );
    // Never smaller than one word.
    assert_eq!(BloomFilter::with_capacity(0, 0.01).unwrap().bit_count(), 64);
    assert!(matches!(
        BloomFilter::with_capacity(10, 0.0),
        Err(FilterError::NotARate(_))
    ));
    assert!(matches!(
        BloomFilter::with_capacity(10, 1e-30),
        Err(FilterError::UnreachableRate { .. })
    ));
}

#[test]
fn estimated_len_tracks_the_true_count() {
    assert_eq!(filled(0, 0.01, "e").estimated_len(), 0.0);
    for n in [10_000u64, 100_000] {
        for rate in [0.1, 0.01, 0.001] {
            let f = filled(n, rate, "e");
            let estimate = f.estimated_len();
            let gap = (estimate - n as f64).abs() / n as f64;
            assert!(gap < 0.03, "{n} keys at {rate}: estimated {estimate}");
        }
    }
    // Re-inserting the same keys does not change the estimate (distinct keys are counted).
    let mut f = filled(10_000, 0.01, "e");
    let before = f.estimated_len();
    for i in 0..10_000 {
        f.insert(&key("e", i));
    }
    assert_eq!(f.estimated_len(), before);
    assert_eq!(f.len(), 20_000);
}

#[test]
fn union_holds_the_keys_of_both() {
    let n = 20_000;
    let mut a = BloomFilter::with_capacity(2 * n, 0.01).unwrap();
    let mut b = a.clone();
    for i in 0..n {
        a.insert(&key("a", i));
        b.insert(&key("b", i));
    }
    a.union(&b).unwrap();
    for i in 0..n {
        assert!(a.contains(&key("a", i)) && a.contains(&key("b", i)));
    }
    let gap = (a.len() as f64 - 2.0 * n as f64).abs() / (2.0 * n as f64);
    assert!(gap < 0.03, "len after union {}", a.len());
    // The union answers like a filter built from both key sets.
    let mut both = BloomFilter::with_capacity(2 * n, 0.01).unwrap();
    for i in 0..n {
        both.insert(&key("a", i));
        both.insert(&key("b", i));
    }
    let (x, y) = (a.to_bytes(), both.to_bytes());
    assert_eq!(x[32..x.len() - 4], y[32..y.len() - 4]);
}

#[test]
fn intersect_holds_the_common_keys() {
    let n = 20_000;
    let mut a = BloomFilter::with_capacity(n, 0.01).unwrap();
    let mut b = a.clone();
    for i in 0..n {
        a.insert(&key("a", i));
        b.insert(&key("b", i));
        if i % 4 == 0 {
            a.insert(&key("common", i));
            b.insert(&key("common", i));
        }
    }
    a.intersect(&b).unwrap();
    for i in (0..n).step_by(4) {
        assert!(a.contains(&key("common", i)));
    }
    // Keys in only one filter mostly fail the intersection.
    let one_sided = (0..n).filter(|&i| a.contains(&key("a", i))).count();
    assert!(one_sided < n as usize / 5, "{one_sided} of {n}");
}

#[test]
fn combining_filters_of_different_shapes_is_an_error() {
    let mut a = BloomFilter::with_capacity(1_000, 0.01).unwrap();
    let bigger = BloomFilter::with_capacity(2_000, 0.01).unwrap();
    let more_hashes = BloomFilter::new(FilterParams::new(10, 6).unwrap(), 1_000);
    assert_eq!(
        a.union(&bigger),
        Err(FilterError::ShapeMismatch {
            left: (10_048, 5),
            right: (20_032, 5)
        })
    );
    assert_eq!(
        a.intersect(&more_hashes),
        Err(FilterError::ShapeMismatch {
            left: (10_048, 5),
            right: (10_048, 6)
        })
    );
    assert!(a.union(&more_hashes).is_err());
    assert!(a.intersect(&bigger).is_err());
}

#[test]
fn counting_filter_insert_remove_contains() {
    let mut f = CountingBloomFilter::with_capacity(10_000, 0.01).unwrap();
    assert!(!f.contains(b"x"));
    assert!(!f.remove(b"x"), "removing from an empty filter");
    for i in 0..5_000 {
        f.insert(&key("c", i));
    }
    assert_eq!(f.len(), 5_000);
    for i in 0..5_000 {
        assert!(f.contains(&key("c", i)));
    }
    for i in 0..2_500 {
        assert!(f.remove(&key("c", i)));
    }
    assert_eq!(f.len(), 2_500);
    for i in 2_500..5_000 {
        assert!(f.contains(&key("c", i)));
    }
    // The removed keys are gone, apart from the odd false positive.
    let lingering = (0..2_500).filter(|&i| f.contains(&key("c", i))).count();
    assert!(
        lingering < 100,
        "{lingering} removed keys still read present"
    );
    // Removing keys the filter says are absent returns false and changes nothing.
    let before = f.clone();
    let absent: Vec<Vec<u8>> = (0..10_000)
        .map(|i| key("never", i))
        .filter(|k| !f.contains(k))
        .collect();
    assert!(absent.len() > 9_000);
    for k in &absent {
        assert!(!f.remove(k));
    }
    assert_eq!(f, before);
    // Removing everything empties it.
    for i in 2_500..5_000 {
        assert!(f.remove(&key("c", i)));
    }
    assert!(f.is_empty());
    assert_eq!(f.saturated_cells(), 0);
    assert!(!f.contains(&key("c", 4_000)));
}

#[test]
fn counting_filter_saturation_never_causes_a_false_negative() {
    let mut f = CountingBloomFilter::new(FilterParams::new(10, 5).unwrap(), 200);
    // A hot key drives its counters to saturation (15), then other keys share cells.
    for _ in 0..40 {
        f.insert(b"hot");
    }
    assert!(f.saturated_cells() >= 1);
    for i in 0..200 {
        f.insert(&key("other", i));
    }
    // Remove the hot key more times than a 4-bit counter can count.
    for _ in 0..40 {
        assert!(f.remove(b"hot"));
    }
    for i in 0..200 {
        assert!(f.contains(&key("other", i)), "other-{i} lost");
    }
    // And removing half the others keeps the other half.
    for i in 0..100 {
        assert!(f.remove(&key("other", i)));
    }
    for i in 100..200 {
        assert!(f.contains(&key("other", i)), "other-{i} lost");
    }
}

#[test]
fn is_over_capacity_after_the_sized_key_count() {
    let mut f = BloomFilter::with_capacity(100, 0.01).unwrap();
    let capacity = f.capacity();
    assert_eq!(capacity, 102); // 1000 bits round up to 1024
    for i in 0..capacity {
        assert!(!f.is_over_capacity(), "after {i} keys");
        f.insert(&key("o", i));
    }
    assert!(!f.is_over_capacity());
    f.insert(&key("o", capacity));
    assert!(f.is_over_capacity());
    assert!(f.expected_false_positive_rate() > f.params().predicted_false_positive_rate());
}

#[test]
fn key_hash_probes_filters_of_any_size() {
    let small = filled(100, 0.01, "h");
    let large = filled(100_000, 0.001, "h");
    let mut seen = HashSet::new();
    for i in 0..100 {
        let k = key("h", i);
        let h = KeyHash::of(&k);
        assert_eq!(h.as_u64(), KeyHash::of(&k).as_u64());
        assert!(small.contains_hash(&h) && large.contains_hash(&h));
        seen.insert(h.as_u64());
    }
    assert_eq!(seen.len(), 100);
    assert_eq!(
        KeyHash::of(b"abc"),
        KeyHash::from_u64(KeyHash::of(b"abc").as_u64())
    );
}
