//! Arbitrary bytes as a serialized Bloom filter and as a Ribbon filter; what decodes must
//! re-encode to the same bytes, and answer a probe.
#![no_main]

use bloomkv::filter::{BloomFilter, RibbonFilter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(filter) = BloomFilter::from_bytes(data) {
        assert_eq!(filter.to_bytes(), data);
        let _ = filter.contains(b"probe");
    }
    if let Ok(filter) = RibbonFilter::from_bytes(data) {
        assert_eq!(filter.to_bytes(), data);
        let _ = filter.contains(b"probe");
    }
});
