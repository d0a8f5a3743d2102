//! Arbitrary bytes as a manifest version edit; what decodes must re-encode to the same bytes.
#![no_main]

use bloomkv::manifest::VersionEdit;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(edit) = VersionEdit::decode(data) {
        assert_eq!(edit.encode(), data);
    }
});
