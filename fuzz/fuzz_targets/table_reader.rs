//! Arbitrary bytes as a table file: open, verify, scan and look up; never a panic.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use bloomkv::filter::KeyHash;
use bloomkv::fs::{FaultFs, FileSystem};
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{verify_table, Table};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/t")).unwrap();
    let path = Path::new("/t/000001.sst");
    fs.set_contents(path, data.to_vec());
    let shared: Arc<dyn FileSystem> = Arc::new(fs);
    let _ = verify_table(Arc::clone(&shared), path);
    if let Ok(table) = Table::open(shared, path, Arc::new(ReadCounters::new())) {
        for item in table.iter() {
            if item.is_err() {
                break;
            }
        }
        let key = data.get(..8).unwrap_or(data);
        let _ = table.get(key, &KeyHash::of(key));
    }
});
