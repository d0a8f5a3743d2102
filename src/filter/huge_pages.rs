//! Large filters on huge pages. A filter's probes land anywhere in its bit array, so once the
//! array spans many pages, most probes also miss the CPU's translation cache (its second
//! level holds some 1,500 entries: 6 MiB of 4 KiB pages), and each miss walks the page
//! tables before the probe's own load can start. Pages of 2 MiB cover 512 times as much.
//! Linux backs a region with them when it is advised to (`MADV_HUGEPAGE`; the kernel's
//! `transparent_hugepage` setting `madvise` or `always`), or not at all (`never`): the advice
//! is a hint, and changes no byte.

/// The size of a huge page on x86-64 and most 64-bit Arm kernels.
const HUGE_PAGE: usize = 2 << 20;

/// `len` copies of `value` in memory the kernel is advised, before anything is written to
/// it, to back with huge pages where it spans whole ones.
pub(crate) fn filled<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    advise(
        v.as_ptr() as usize,
        len.saturating_mul(std::mem::size_of::<T>()),
    );
    v.resize(len, value);
    v
}

/// Advises the whole huge pages within `bytes` bytes from address `start` (none for a
/// region smaller than one).
fn advise(start: usize, bytes: usize) {
    let begin = start.next_multiple_of(HUGE_PAGE);
    let end = start.saturating_add(bytes) / HUGE_PAGE * HUGE_PAGE;
    if end > begin {
        advise_range(begin, end - begin);
    }
}

#[cfg(linux_extras)]
fn advise_range(begin: usize, len: usize) {
    // SAFETY: the range lies within one live allocation of ours; MADV_HUGEPAGE changes how
    // its pages are backed, never what they hold. A failure (a kernel without transparent
    // huge pages) leaves the 4 KiB pages, which work as well, only slower.
    unsafe {
        libc::madvise(begin as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(linux_extras))]
fn advise_range(_: usize, _: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_holds_its_values_whatever_its_size() {
        for len in [0, 1, 1000, (3 * HUGE_PAGE) / 8 + 5] {
            let v = filled(len, 7u64);
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&x| x == 7));
        }
    }
}
