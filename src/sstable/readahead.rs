//! Large sequential reads for iterators. Table files are opened with a hint that their reads
//! are random (point lookups must not make the kernel read around every block), which also
//! turns off the kernel's read-ahead for scans and compaction. They read ahead here instead:
//! the first read is just the block asked for; each read after it that continues the last one
//! (it starts inside the window, or where it ended) doubles the window, up to [`MAX_WINDOW`].
//! The part of a block already in the window is kept, not read again. Once the window has
//! grown to its full size, each read also asks the kernel to start fetching the window after
//! it, so the device works while the reader decodes (a compaction would otherwise wait on
//! every window in turn). A short scan never gets there, and does not send the device for a
//! window it will not read.

use crate::error::Result;
use crate::fs::RandomAccessFile;

/// The largest single read: big enough that a sequential pass costs few system calls and the
/// disk sees long requests, small enough to hold one per open iterator.
pub const MAX_WINDOW: usize = 256 << 10;

/// A window of a file read ahead of an iterator.
#[derive(Debug, Default)]
pub struct ReadAhead {
    /// File offset of `buf[0]`.
    start: u64,
    /// The window's memory, kept from read to read: a compaction reads gigabytes through it,
    /// and a fresh window of 256 KiB each time is a map of its own from the allocator, whose
    /// pages fault in zeroed and whose unmapping interrupts the other processors (about a
    /// quarter of a 5M-record load's compaction time went there). Only `buf[..filled]` is
    /// the file's.
    buf: Vec<u8>,
    /// Bytes of `buf` read from the file at `start`.
    filled: usize,
    /// Bytes of the file the last read covered from `start`: `filled`, or, after a read of
    /// just one block handed out whole (`filled` then 0), that block's.
    span: usize,
    /// Bytes the next read from the file asks for (at least the block wanted).
    window: usize,
}

impl ReadAhead {
    pub fn new() -> ReadAhead {
        ReadAhead::default()
    }

    /// `len` bytes at `offset` of `file`, from the window when it holds them, else from a new
    /// read of at least `len` bytes that stops at `limit` (the end of the data blocks).
    pub fn read(
        &mut self,
        file: &dyn RandomAccessFile,
        offset: u64,
        len: usize,
        limit: u64,
    ) -> Result<Vec<u8>> {
        if let Some(bytes) = self.cached(offset, len) {
            return Ok(bytes.to_vec());
        }
        let sequential = self.continues(offset);
        self.window = if sequential {
            (self.window * 2).clamp(len, MAX_WINDOW.max(len))
        } else {
            len
        };
        let available = usize::try_from(limit.saturating_sub(offset)).unwrap_or(usize::MAX);
        let want = self.window.min(available).max(len);
        // The start of a block that straddles the window's end is in memory already.
        let (held_from, held) = match sequential {
            true => {
                let from = (offset - self.start) as usize;
                (from, self.filled.saturating_sub(from))
            }
            false => (0, 0),
        };
        if held == 0 && want == len {
            // Just the block asked for: handed out as read, with no copy, and nothing kept
            // (the next block starts where it ends). The first read of every seek is one.
            let block = file.read_at(offset, len)?;
            self.filled = 0;
            (self.start, self.span) = (offset, len);
            return Ok(block);
        }
        // The held part moves to the front and the rest is read in after it. Until the read
        // succeeds the window holds nothing.
        if held > 0 {
            self.buf.copy_within(held_from..held_from + held, 0);
        }
        (self.filled, self.span) = (0, 0);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        } else if want <= MAX_WINDOW && self.buf.len() > 2 * MAX_WINDOW {
            // A block larger than a window (a large value) grew it; windows of the usual size
            // do not keep that memory.
            self.buf.truncate(MAX_WINDOW);
            self.buf.shrink_to_fit();
        }
        file.read_into(offset + held as u64, &mut self.buf[held..want])?;
        self.start = offset;
        (self.filled, self.span) = (want, want);
        if sequential && self.window >= MAX_WINDOW {
            self.announce_next(file, limit);
        }
        Ok(self.buf[..len].to_vec())
    }

    /// Hints the window a sequential reader will ask for next.
    fn announce_next(&self, file: &dyn RandomAccessFile, limit: u64) {
        let next = self.start + self.filled as u64;
        let available = usize::try_from(limit.saturating_sub(next)).unwrap_or(usize::MAX);
        let len = (self.window * 2)
            .min(MAX_WINDOW.max(self.window))
            .min(available);
        if len > 0 {
            file.will_need(next, len);
        }
    }

    /// True when a read at `offset` carries on from the window: it starts inside it or right
    /// after it. Blocks vary in size, so a window seldom ends where a block does: the block
    /// after the last whole one starts inside the window and runs past its end. Taken for a
    /// jump, that block would start the window again from one block, and a compaction would
    /// read its inputs a block or two at a time (a 30M-key load made reads of 6 KiB on
    /// average, 40,000 a second, until this took it for what it is).
    fn continues(&self, offset: u64) -> bool {
        self.start < offset && offset <= self.start + self.span as u64
    }

    fn cached(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let from = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.buf[..self.filled].get(from..from.checked_add(len)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A file of `data` that counts its reads.
    struct Counted {
        data: Vec<u8>,
        reads: AtomicUsize,
        /// Bytes read, over all reads.
        bytes: AtomicUsize,
        /// Every range announced with `will_need`, in order.
        announced: std::sync::Mutex<Vec<(u64, usize)>>,
    }

    impl Counted {
        fn new(data: Vec<u8>) -> Counted {
            Counted {
                data,
                reads: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
                announced: std::sync::Mutex::new(Vec::new()),
            }
        }

        fn announced(&self) -> Vec<(u64, usize)> {
            self.announced.lock().unwrap().clone()
        }
    }

    impl RandomAccessFile for Counted {
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(len, Ordering::Relaxed);
            let at = offset as usize;
            Ok(self.data[at..at + len].to_vec())
        }
        fn size(&self) -> u64 {
            self.data.len() as u64
        }
        fn will_need(&self, offset: u64, len: usize) {
            self.announced.lock().unwrap().push((offset, len));
        }
    }

    #[test]
    fn sequential_reads_grow_the_window_and_return_the_right_bytes() {
        let data: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
        let file = Counted::new(data.clone());
        let mut ahead = ReadAhead::new();
        let limit = 1_900_000u64;
        let mut offset = 0u64;
        let mut blocks = 0;
        while offset + 4096 <= limit {
            let got = ahead.read(&file, offset, 4096, limit).unwrap();
            assert_eq!(got, &data[offset as usize..offset as usize + 4096]);
            offset += 4096;
            blocks += 1;
        }
        let reads = file.reads.load(Ordering::Relaxed);
        // 463 blocks; windows of 4 KiB, 8, 16, ... up to 256 KiB: about a dozen reads.
        assert!(reads < 20, "{reads} reads for {blocks} blocks");
        assert!(reads > 5);
    }

    #[test]
    fn blocks_that_straddle_a_window_keep_it_growing() {
        // Blocks of 4,000 to 4,200 bytes, as compressed blocks are: windows seldom end where a
        // block does, so a window's last block usually runs past it.
        let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 253) as u8).collect();
        let file = Counted::new(data.clone());
        let mut ahead = ReadAhead::new();
        let limit = 3_900_000u64;
        let (mut offset, mut blocks) = (0u64, 0u64);
        loop {
            let block = 4000 + (blocks * 37 % 201) as usize;
            if offset + block as u64 > limit {
                break;
            }
            let got = ahead.read(&file, offset, block, limit).unwrap();
            assert_eq!(got, &data[offset as usize..offset as usize + block]);
            offset += block as u64;
            blocks += 1;
        }
        // Windows follow one another without overlap: every byte up to the last window's end
        // was read once, none of a straddling block twice.
        let window_end = ahead.start + ahead.span as u64;
        assert_eq!(file.bytes.load(Ordering::Relaxed) as u64, window_end);
        assert!(window_end <= limit);
        let reads = file.reads.load(Ordering::Relaxed) as u64;
        // About 15 windows of 256 KiB after a ramp of a few reads, not one read or two a block.
        let least = limit / MAX_WINDOW as u64;
        assert!(
            reads <= least + 12,
            "{reads} reads for {blocks} blocks ({least} windows of the largest size)"
        );
    }

    #[test]
    fn every_read_returns_the_files_bytes_as_the_one_window_is_reused() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let limit = 2_900_000;
        let file = Counted::new(data.clone());
        let mut ahead = ReadAhead::new();
        // Blocks of varied sizes read in order, with jumps forward and back between passes:
        // windows grow to the full size, blocks straddle their ends, jumps start again.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut offset = 0u64;
        for _ in 0..3_000 {
            if random(100) == 0 {
                offset = random(limit - 10_000);
            }
            let len = 1 + random(9_000) as usize;
            if offset + len as u64 > limit {
                offset = 0;
            }
            let got = ahead.read(&file, offset, len, limit).unwrap();
            let want = &data[offset as usize..offset as usize + len];
            assert!(got == want, "{len} bytes at {offset}");
            offset += len as u64;
        }
        assert!(ahead.buf.len() <= MAX_WINDOW + 9_000, "{}", ahead.buf.len());
    }

    #[test]
    fn a_window_grown_by_a_huge_block_gives_its_memory_back() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let file = Counted::new(data.clone());
        let mut ahead = ReadAhead::new();
        let mut offset = 0;
        // The window after the second read ends inside the huge block, which then goes through it.
        for len in [1000, 1500, 600_000, 1000] {
            let got = ahead.read(&file, offset, len, 3_000_000).unwrap();
            assert!(
                got == data[offset as usize..offset as usize + len],
                "at {offset}"
            );
            if len == 600_000 {
                assert!(
                    ahead.buf.len() >= 600_000,
                    "the huge block went through the window"
                );
            }
            offset += len as u64;
        }
        assert_eq!(ahead.buf.len(), MAX_WINDOW);
    }

    #[test]
    fn a_jump_starts_again_from_one_block_and_never_reads_past_the_limit() {
        let data = vec![7u8; 100_000];
        let file = Counted::new(data);
        let mut ahead = ReadAhead::new();
        ahead.read(&file, 0, 1000, 50_000).unwrap();
        ahead.read(&file, 1000, 1000, 50_000).unwrap();
        assert_eq!(ahead.span, 2000);
        ahead.read(&file, 30_000, 1000, 50_000).unwrap();
        assert_eq!(ahead.span, 1000, "a jump reads one block");
        assert!(ahead.filled == 0, "and hands it out without keeping a copy");
        for _ in 0..10 {
            let next = ahead.start + ahead.span as u64;
            if next + 1000 > 50_000 {
                break;
            }
            ahead.read(&file, next, 1000, 50_000).unwrap();
            assert!(ahead.start + ahead.span as u64 <= 50_000);
        }
    }

    #[test]
    fn long_sequential_reads_announce_the_next_window_and_nothing_past_the_limit() {
        let file = Counted::new(vec![1u8; 1_000_000]);
        let mut ahead = ReadAhead::new();
        let limit = 900_000u64;
        // A short scan's reads (4 + 8 + ... + 128 KiB) announce nothing: the device is not
        // sent for a window the scan may never read.
        let mut offset = 0;
        while ahead.window < MAX_WINDOW {
            ahead.read(&file, offset, 4096, limit).unwrap();
            offset = ahead.start + ahead.span as u64;
        }
        let window_reads = file.reads.load(Ordering::Relaxed);
        assert_eq!(window_reads, 7, "4 KiB doubled six times is 256 KiB");
        // The read that brought the window to its full size announced the one after it.
        assert_eq!(file.announced(), vec![(offset, MAX_WINDOW)]);
        while offset < limit {
            let len = 4096.min((limit - offset) as usize);
            ahead.read(&file, offset, len, limit).unwrap();
            offset = ahead.start + ahead.span as u64;
        }
        let announced = file.announced();
        for &(at, len) in &announced {
            assert!(at + len as u64 <= limit, "{at}+{len} runs past {limit}");
            assert!(len <= MAX_WINDOW);
        }
        // From the full window on, each read announced the next, but the last, which reached
        // the limit: every window after the full one was announced before it was read.
        let reads = file.reads.load(Ordering::Relaxed);
        assert_eq!(announced.len(), reads - window_reads, "{announced:?}");
        ahead.read(&file, 100_000, 4096, limit).unwrap();
        assert_eq!(
            file.announced().len(),
            announced.len(),
            "a jump announces nothing"
        );
    }
}
