//! Append-only memory for a memtable's entries: large blocks, handed out in 8-byte-aligned
//! pieces that stay where they are, unchanged once written, until the arena is dropped; all
//! blocks are freed together (as LevelDB's and RocksDB's memtables do).
//!
//! Holding each entry in a heap allocation of its own cost allocations on the writer's thread
//! and frees on the flush thread, and the freed small buffers stayed with the allocator,
//! spread over its per-thread arenas.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Every piece handed out is aligned to this, so that a node's atomic links are aligned.
pub(super) const ALIGN: usize = 8;

/// Blocks given out so far, and the free room of the one that small pieces come from.
struct Blocks {
    all: Vec<(NonNull<u8>, Layout)>,
    /// The next free byte of the current block (aligned), and how many bytes are left in it.
    free: *mut u8,
    left: usize,
}

/// Append-only storage shared by the threads that insert into one memtable.
pub(super) struct Arena {
    /// Bytes of a block; pieces over a quarter of it get a block of their own, so that a
    /// large value does not leave most of a block unused.
    block_size: usize,
    blocks: Mutex<Blocks>,
    /// Bytes of every block together: the memory the arena holds.
    allocated: AtomicUsize,
}

// SAFETY: the arena owns its blocks. A piece is handed out to one caller only (under the
// lock), who writes it before publishing it to others; published bytes are never written
// again. Moving the arena between threads or sharing it thus shares only that discipline.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Arena {
    pub(super) fn new(block_size: usize) -> Arena {
        Arena {
            block_size: block_size.next_multiple_of(ALIGN),
            blocks: Mutex::new(Blocks {
                all: Vec::new(),
                free: std::ptr::null_mut(),
                left: 0,
            }),
            allocated: AtomicUsize::new(0),
        }
    }

    /// Bytes of every block handed out so far.
    pub(super) fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    /// A piece of `len` bytes (at least one), aligned to [`ALIGN`], that no one else is given;
    /// its bytes are not initialised. It stays valid until the arena is dropped.
    pub(super) fn alloc(&self, len: usize) -> NonNull<u8> {
        let len = len.max(1).next_multiple_of(ALIGN);
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if len > self.block_size / 4 {
            return self.new_block(&mut blocks, len);
        }
        if blocks.left < len {
            let block = self.new_block(&mut blocks, self.block_size);
            blocks.free = block.as_ptr();
            blocks.left = self.block_size;
        }
        let piece = blocks.free;
        // SAFETY: `len <= left`, so the piece and the pointer past it lie within the block.
        blocks.free = unsafe { piece.add(len) };
        blocks.left -= len;
        NonNull::new(piece).expect("a block's pointer is not null")
    }

    fn new_block(&self, blocks: &mut Blocks, len: usize) -> NonNull<u8> {
        let layout = Layout::from_size_align(len, ALIGN).expect("a block's size fits a layout");
        // SAFETY: the layout's size is at least ALIGN, not zero.
        let block = unsafe { std::alloc::alloc(layout) };
        let Some(block) = NonNull::new(block) else {
            std::alloc::handle_alloc_error(layout);
        };
        blocks.all.push((block, layout));
        self.allocated.fetch_add(len, Ordering::Relaxed);
        block
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let blocks = self.blocks.get_mut().unwrap_or_else(|e| e.into_inner());
        for &(block, layout) in &blocks.all {
            // SAFETY: each block was allocated in `new_block` with this layout, and is freed
            // once, here.
            unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_aligned_disjoint_and_counted_by_whole_blocks() {
        let arena = Arena::new(1024);
        assert_eq!(arena.allocated(), 0);
        let a = arena.alloc(3);
        let b = arena.alloc(10);
        assert_eq!(a.as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, 8);
        assert_eq!(arena.allocated(), 1024);
        // Over a quarter of a block: a block of its own, of just that size.
        let big = arena.alloc(300);
        assert_eq!(arena.allocated(), 1024 + 304);
        // Small pieces go on filling the first block.
        let c = arena.alloc(8);
        assert_eq!(c.as_ptr() as usize - b.as_ptr() as usize, 16);
        // SAFETY: each piece is ours, of at least the length written.
        unsafe {
            std::ptr::write_bytes(a.as_ptr(), 1, 3);
            std::ptr::write_bytes(big.as_ptr(), 2, 300);
            std::ptr::write_bytes(c.as_ptr(), 3, 8);
            assert_eq!(*a.as_ptr(), 1);
            assert_eq!(*big.as_ptr().add(299), 2);
        }
        // A full block starts another.
        for _ in 0..200 {
            arena.alloc(64);
        }
        assert!(arena.allocated() > 1024 * 10);
    }
}
