//! mimalloc, the allocator `bloomkv-node` runs on, set to give memory back as a store expects.
//!
//! Over gRPC every call allocates and frees small buffers on every core, where glibc's
//! malloc contends on its arena locks; mimalloc's per-thread heaps do not. But by default it
//! commits its arenas eagerly and keeps freed memory for a while before returning it, which
//! took a node's resident memory during a load from 180 to 257 MiB (3M keys). A store held to
//! a memory limit cannot lend the allocator that: [`return_freed_memory_promptly`] turns both
//! off, and the load's peak was 180 MiB again, with gets as fast.

use libmimalloc_sys::{mi_option_set, mi_option_t};

/// `mi_option_arena_eager_commit` in mimalloc 3's `mimalloc.h` (the crate names it only for
/// version 2): whether arenas are committed when reserved (default 2: on overcommitting
/// systems).
const ARENA_EAGER_COMMIT: mi_option_t = 4;

/// `mi_option_purge_delay` in mimalloc 3's `mimalloc.h`: milliseconds before freed memory is
/// returned to the system (default 1,000 in its `options.c`).
const PURGE_DELAY: mi_option_t = 15;

/// Sets mimalloc to commit arenas as they are used and to return freed memory at once. Call
/// it first thing in a program whose global allocator is mimalloc; elsewhere it changes
/// nothing that is used.
pub fn return_freed_memory_promptly() {
    // SAFETY: setting an option of mimalloc's is safe at any time: it takes effect for the
    // allocations that follow.
    unsafe {
        mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi_option_set(PURGE_DELAY, 0);
    }
}

#[cfg(test)]
mod tests {
    use std::os::raw::c_long;

    use libmimalloc_sys::mi_option_get;

    use super::*;

    /// The value of one of mimalloc's options.
    fn option(which: mi_option_t) -> c_long {
        // SAFETY: reading an option is safe at any time.
        unsafe { mi_option_get(which) }
    }

    #[test]
    fn the_option_numbers_are_mimallocs_and_setting_them_takes() {
        // mimalloc's own defaults identify the options behind the numbers: a mimalloc whose
        // enum moved would show other values here. (This test binary allocates with the
        // system allocator, so nothing here changes its memory.)
        assert_eq!(option(ARENA_EAGER_COMMIT), 2);
        assert_eq!(option(PURGE_DELAY), 1000);
        return_freed_memory_promptly();
        assert_eq!(option(ARENA_EAGER_COMMIT), 0);
        assert_eq!(option(PURGE_DELAY), 0);
    }
}
