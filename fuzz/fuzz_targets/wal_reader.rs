//! Arbitrary bytes as a WAL file, in both recovery modes; never a panic.
#![no_main]

use std::path::Path;

use bloomkv::wal::{parse_log, RecoveryMode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::PointInTime] {
        if let Ok(contents) = parse_log(Path::new("fuzz.log"), data, mode) {
            assert_eq!(contents.records.len(), contents.offsets.len());
        }
    }
});
