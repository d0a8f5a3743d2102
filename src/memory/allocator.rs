//! Keeping the process allocator from holding memory the store has freed.
//!
//! A store frees memory in large pieces: a flush drops a whole memtable, a compaction its
//! tables' builders and read buffers. glibc's allocator keeps such memory for reuse in the
//! arena of the thread that allocated it, and two of its habits keep it resident long after:
//!
//! - **Its thresholds move.** A block of at least `M_MMAP_THRESHOLD` bytes (128 KiB) gets a
//!   map of its own and goes back to the system when freed, but each time such a block is
//!   freed glibc raises the threshold to that block's size (up to 32 MiB) and the trim
//!   threshold to twice that. After a few compactions, blocks of megabytes come from the
//!   arenas, and a per-thread arena gives back the free space at its top only once it passes
//!   the raised trim threshold: 64 MiB, which an arena of a compaction thread rarely reaches.
//! - **`malloc_trim` skips those tops.** It returns the free pages inside every arena, but
//!   the top of a per-thread arena only shrinks through the trim threshold above.
//!
//! After a 10M-key load in 1 GiB, the arenas held 220 MB of which 50 MB were in use, and the
//! process 127 MiB resident; with the thresholds held at glibc's defaults, 65 MiB
//! (docs/benchmarks.md, "Resident memory and the allocator's thresholds").
//!
//! So a store, unless told otherwise (`Options::tune_allocator`), holds glibc's mmap
//! threshold at its default when it opens, which also stops the trim threshold from moving,
//! and trims after each flush and compaction. Both are process-wide and harmless to memory
//! in use. An embedder who tunes glibc through its environment (`MALLOC_MMAP_THRESHOLD_`,
//! `MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES`) keeps its own settings. Under another
//! allocator, or off Linux, both are no-ops.

/// glibc's own default mmap threshold, which the store keeps from moving.
#[cfg(all(linux_extras, target_env = "gnu"))]
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Environment variables through which a process tunes glibc's allocator itself.
#[cfg(all(linux_extras, target_env = "gnu"))]
const TUNING_VARIABLES: [&str; 3] = [
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "GLIBC_TUNABLES",
];

/// Holds glibc's mmap threshold (and so its trim threshold) at their defaults, once per
/// process, unless the environment tunes the allocator. True when the thresholds are held,
/// by this call or an earlier one.
pub(crate) fn hold_thresholds() -> bool {
    #[cfg(all(linux_extras, target_env = "gnu"))]
    {
        static HELD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HELD.get_or_init(|| {
            let tuned_by_environment = TUNING_VARIABLES
                .iter()
                .any(|name| std::env::var_os(name).is_some());
            // SAFETY: mallopt only changes glibc's allocation parameters; memory in use is
            // untouched. It returns 1 on success.
            !tuned_by_environment
                && unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) } == 1
        })
    }
    #[cfg(not(all(linux_extras, target_env = "gnu")))]
    false
}

/// Hands what a finished flush or compaction freed back to the operating system: the free
/// pages inside every arena of glibc's allocator. Under another allocator this finds glibc's
/// heap nearly empty and costs next to nothing.
pub(crate) fn release_freed_memory() {
    #[cfg(all(linux_extras, target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's own arenas to the system; it
    // touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, linux_extras, target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn holds_the_thresholds_where_the_environment_leaves_them() {
        let tuned = TUNING_VARIABLES
            .iter()
            .any(|name| std::env::var_os(name).is_some());
        assert_eq!(hold_thresholds(), !tuned);
        // A second call changes nothing and answers the same.
        assert_eq!(hold_thresholds(), !tuned);
    }

    /// Run alone, in a process of its own (`large_blocks_keep_maps_of_their_own_once_held`):
    /// a block freed by another test running beside it may serve a request from an arena
    /// whatever the threshold.
    #[test]
    #[ignore = "run by large_blocks_keep_maps_of_their_own_once_held in a process of its own"]
    fn large_blocks_keep_maps_of_their_own_once_held_alone() {
        if !hold_thresholds() {
            return;
        }
        // Freeing a mapped block of 4 MiB would raise a moving threshold to 4 MiB, and blocks
        // of 1 MiB would come from an arena from then on. Held, each is mapped on its own:
        // glibc places such a block 16 bytes into a fresh page.
        drop(std::hint::black_box(vec![1u8; 4 << 20]));
        for _ in 0..3 {
            let block = std::hint::black_box(vec![1u8; 1 << 20]);
            assert_eq!(block.as_ptr() as usize % 4096, 16, "a block from an arena");
        }
    }

    #[test]
    fn large_blocks_keep_maps_of_their_own_once_held() {
        let name = "memory::allocator::tests::large_blocks_keep_maps_of_their_own_once_held_alone";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", name, "--test-threads=1"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("1 passed"), "{stdout}");
    }
}

#[cfg(all(test, not(all(linux_extras, target_env = "gnu"))))]
mod fallback_tests {
    #[test]
    fn elsewhere_the_allocator_is_left_alone() {
        assert!(
            !super::hold_thresholds(),
            "no setting where glibc is not tuned"
        );
    }
}
