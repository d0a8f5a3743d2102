//! Arbitrary bytes as a WAL file, in every recovery mode; never a panic, and what is returned
//! is consistent with the input.
#![no_main]

use std::path::Path;

use bloomkv::wal::{parse_log, RecoveryMode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for mode in [
        RecoveryMode::TolerateTornTail,
        RecoveryMode::Strict,
        RecoveryMode::PointInTime,
        RecoveryMode::Salvage,
    ] {
        if let Ok(contents) = parse_log(Path::new("fuzz.log"), data, mode) {
            assert_eq!(contents.records.len(), contents.offsets.len());
            assert!(contents.offsets.windows(2).all(|w| w[0] < w[1]));
            for range in &contents.skipped {
                assert!(range.offset + range.bytes <= data.len() as u64);
            }
            if let Some(tail) = contents.torn_tail {
                assert_eq!(tail.offset + tail.dropped_bytes, data.len() as u64);
            }
        }
    }
});
