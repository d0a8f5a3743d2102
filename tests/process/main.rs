//! Tests that change or measure the whole process: one lowers its limit on open files, one
//! counts every live allocation. Each holds `WHOLE_PROCESS` while it runs, so that neither
//! sees the other at work.

use std::sync::{Mutex, MutexGuard};

#[path = "../common/mod.rs"]
mod common;

mod descriptor_limit;
mod memtable_memory;

static WHOLE_PROCESS: Mutex<()> = Mutex::new(());

/// The process to this test alone, for as long as the guard lives (a test that failed
/// while holding it does not fail the next one).
fn whole_process() -> MutexGuard<'static, ()> {
    WHOLE_PROCESS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
