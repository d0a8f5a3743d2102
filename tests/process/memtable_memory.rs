//! The memtable's size as the store counts it against `memtable_size` is the memory it
//! holds: measured here by an allocator that tracks every live allocation's real size.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use bloomkv::{Db, Options};

/// The system allocator, counting the bytes of live allocations as malloc really sizes them.
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

fn usable_size(ptr: *mut u8) -> isize {
    // SAFETY: `ptr` was returned by the system allocator (malloc) and is still live.
    unsafe { libc::malloc_usable_size(ptr.cast()) as isize }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(usable_size(ptr), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(usable_size(ptr), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Writes `key_len`/`value_len` pairs until the memtable counts `target` bytes; returns the
/// bytes counted and the bytes the allocator says were added.
fn fill_memtable(key_len: usize, value_len: usize, target: u64) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options::default().memtable_size(4 * target as usize),
    )
    .unwrap();
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let mut i = 0u64;
    let mut key = vec![0u8; key_len];
    let value = vec![b'v'; value_len];
    while db.stats().memtable_bytes < target {
        for _ in 0..1_000 {
            key[..8.min(key_len)].copy_from_slice(&i.to_be_bytes()[..8.min(key_len)]);
            db.put(&key, &value).unwrap();
            i += 1;
        }
    }
    let added = (LIVE_BYTES.load(Ordering::Relaxed) - before) as u64;
    let counted = db.stats().memtable_bytes;
    assert_eq!(db.stats().immutable_memtables, 0);
    assert_eq!(db.stats().flushes, 0);
    (counted, added)
}

#[test]
fn the_memtable_counts_the_memory_it_holds_within_one_and_a_half() {
    let _alone = crate::whole_process();
    for (key_len, value_len) in [(16, 16), (8, 0), (24, 100), (16, 1000)] {
        let (counted, resident) = fill_memtable(key_len, value_len, 16 << 20);
        let ratio = resident as f64 / counted as f64;
        eprintln!("keys {key_len} B, values {value_len} B: counted {counted}, held {resident}, ratio {ratio:.2}");
        assert!(
            (1.0 / 1.5..=1.5).contains(&ratio),
            "keys {key_len} B, values {value_len} B: counted {counted} bytes, {resident} held"
        );
    }
}
