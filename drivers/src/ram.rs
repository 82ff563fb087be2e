//! RAM as a short list of blocks: what the device tree or the firmware reports, clipped to where
//! the board description allows normal memory and rounded inward to the MMU's block size, and the
//! block the heap takes (the largest: the allocator takes one region).
//!
//! Fixed capacity and no allocation: the kernel works this out before its heap exists.
#![forbid(unsafe_code)]

use core::fmt;

/// Blocks kept (a Pi 4 with 8 GiB reports three or four).
pub const MAX_BLOCKS: usize = 16;

/// `[start, end)` of physical memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Block {
    pub start: u64,
    pub end: u64,
}

impl Block {
    pub const fn new(start: u64, end: u64) -> Self {
        Block { start, end }
    }

    pub const fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub const fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// The part of `self` inside `other` (possibly empty).
    pub fn intersect(&self, other: &Block) -> Block {
        Block::new(self.start.max(other.start), self.end.min(other.end))
    }

    /// `self` shrunk to whole `align`-byte blocks (`align` a power of two; possibly empty).
    pub fn round_inward(&self, align: u64) -> Block {
        let mask = align - 1;
        match self.start.checked_add(mask) {
            Some(s) => Block::new(s & !mask, self.end & !mask),
            None => Block::default(),
        }
    }

    pub const fn contains(&self, other: &Block) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// Up to [`MAX_BLOCKS`] blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RamBlocks {
    blocks: [Block; MAX_BLOCKS],
    len: usize,
}

impl Default for RamBlocks {
    fn default() -> Self {
        Self::new()
    }
}

impl RamBlocks {
    pub const fn new() -> Self {
        RamBlocks {
            blocks: [Block::new(0, 0); MAX_BLOCKS],
            len: 0,
        }
    }

    /// One block, e.g. the firmware's or the board file's fallback.
    pub fn one(start: u64, size: u64) -> Self {
        let mut r = Self::new();
        r.push(start, size);
        r
    }

    /// Add `[start, start + size)`; an empty block is skipped. Returns `false` if the list is full
    /// or the block wraps the address space (nothing is added then).
    pub fn push(&mut self, start: u64, size: u64) -> bool {
        let Some(end) = start.checked_add(size) else {
            return false;
        };
        if size == 0 {
            return true;
        }
        if self.len == MAX_BLOCKS {
            return false;
        }
        self.blocks[self.len] = Block::new(start, end);
        self.len += 1;
        true
    }

    pub fn as_slice(&self) -> &[Block] {
        &self.blocks[..self.len]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes in all blocks, saturating: a device tree may list blocks that overlap or add up
    /// past 2^64 (a fuzzed one did), and the sum is only ever reported.
    pub fn total(&self) -> u64 {
        self.as_slice()
            .iter()
            .fold(0u64, |sum, b| sum.saturating_add(b.len()))
    }

    /// The blocks clipped to `allowed` (the board's normal-memory regions), rounded inward to
    /// `align` (a power of two), sorted, with touching or overlapping blocks merged. Pieces past
    /// [`MAX_BLOCKS`] are dropped.
    pub fn usable(&self, allowed: &[Block], align: u64) -> RamBlocks {
        let mut out = RamBlocks::new();
        for b in self.as_slice() {
            for a in allowed {
                let piece = b.intersect(a).round_inward(align);
                if !piece.is_empty() {
                    out.push(piece.start, piece.len());
                }
            }
        }
        out.sort_and_merge();
        out
    }

    /// Insertion sort by start (at most [`MAX_BLOCKS`] entries), then merge neighbours that touch.
    fn sort_and_merge(&mut self) {
        let b = &mut self.blocks[..self.len];
        for i in 1..b.len() {
            let mut j = i;
            while j > 0 && b[j - 1].start > b[j].start {
                b.swap(j - 1, j);
                j -= 1;
            }
        }
        let mut kept = 0;
        for i in 0..self.len {
            let cur = self.blocks[i];
            if kept > 0 && cur.start <= self.blocks[kept - 1].end {
                let last = &mut self.blocks[kept - 1];
                last.end = last.end.max(cur.end);
            } else {
                self.blocks[kept] = cur;
                kept += 1;
            }
        }
        self.len = kept;
    }

    /// Where the heap goes: the largest free range, where the block holding `kernel` (the image,
    /// its stacks) counts only from the kernel's end. `None` if no block has room.
    pub fn heap(&self, kernel: Block) -> Option<Block> {
        self.as_slice()
            .iter()
            .map(|b| {
                if b.start < kernel.end && kernel.start < b.end {
                    Block::new(kernel.end.max(b.start), b.end)
                } else {
                    *b
                }
            })
            .filter(|b| !b.is_empty())
            .max_by_key(Block::len)
    }

    /// The blocks without `hole` (a block across it is split). Returns whether anything was cut.
    pub fn cut(&mut self, hole: Block) -> bool {
        let mut out = RamBlocks::new();
        let mut cut = false;
        for b in self.as_slice() {
            let below = Block::new(b.start, b.end.min(hole.start));
            let above = Block::new(b.start.max(hole.end), b.end);
            cut |= !b.intersect(&hole).is_empty();
            for piece in [below, above] {
                if !piece.is_empty() {
                    out.push(piece.start, piece.len());
                }
            }
        }
        *self = out;
        cut
    }

    /// Whether one block holds all of `range`.
    pub fn holds(&self, range: Block) -> bool {
        self.as_slice().iter().any(|b| b.contains(&range))
    }
}

/// `0x0..0x3b400000 (948 MiB), 0x40000000..0xfc000000 (3008 MiB)`.
impl fmt::Display for RamBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.as_slice().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{:#x}..{:#x} ({} MiB)", b.start, b.end, b.len() >> 20)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    const MIB2: u64 = 2 << 20;

    fn blocks(list: &[(u64, u64)]) -> RamBlocks {
        let mut r = RamBlocks::new();
        for &(s, e) in list {
            assert!(r.push(s, e - s));
        }
        r
    }

    fn pairs(r: &RamBlocks) -> alloc::vec::Vec<(u64, u64)> {
        r.as_slice().iter().map(|b| (b.start, b.end)).collect()
    }

    #[test]
    fn a_pi4_with_4_gib_clipped_to_its_board_file() {
        let found = blocks(&[(0, 0x3b40_0000), (0x4000_0000, 0xfc00_0000)]);
        let normal = [
            Block::new(0, 0xfc00_0000),
            Block::new(0x1_0000_0000, 0x2_0000_0000),
        ];
        let u = found.usable(&normal, MIB2);
        assert_eq!(pairs(&u), [(0, 0x3b40_0000), (0x4000_0000, 0xfc00_0000)]);
        assert_eq!(
            u.to_string(),
            "0x0..0x3b400000 (948 MiB), 0x40000000..0xfc000000 (3008 MiB)"
        );
        let kernel = Block::new(0x8_0000, 0x60_0000);
        assert_eq!(u.heap(kernel), Some(Block::new(0x4000_0000, 0xfc00_0000)));
    }

    #[test]
    fn ram_over_device_space_is_cut_and_blocks_are_rounded_inward() {
        // QEMU raspi3b's 1 GiB overlaps the peripherals at 0x3f000000; an odd GPU split leaves
        // an end that is not 2 MiB aligned.
        let found = blocks(&[(0, 0x4000_0000)]);
        let u = found.usable(&[Block::new(0, 0x3f00_0000)], MIB2);
        assert_eq!(pairs(&u), [(0, 0x3f00_0000)]);
        let odd = blocks(&[(0x10_0000, 0x3b50_0000)]);
        let u = odd.usable(&[Block::new(0, 0x3f00_0000)], MIB2);
        assert_eq!(pairs(&u), [(0x20_0000, 0x3b40_0000)]);
        let tiny = blocks(&[(0x10_0000, 0x20_0000)]);
        assert!(tiny.usable(&[Block::new(0, 1 << 32)], MIB2).is_empty());
    }

    #[test]
    fn unsorted_overlapping_blocks_are_sorted_and_merged() {
        let found = blocks(&[
            (0x8000_0000, 0xc000_0000),
            (0, 0x4000_0000),
            (0x4000_0000, 0x8000_0000),
            (0x2000_0000, 0x3000_0000),
        ]);
        let u = found.usable(&[Block::new(0, u64::MAX)], MIB2);
        assert_eq!(pairs(&u), [(0, 0xc000_0000)]);
        assert_eq!(u.total(), 0xc000_0000);
    }

    #[test]
    fn a_total_past_two_to_the_64_saturates() {
        // Two overlapping blocks of nearly 2^64 bytes each, as a fuzzed device tree listed.
        let found = blocks(&[(0, u64::MAX - 1), (1, u64::MAX)]);
        assert_eq!(found.total(), u64::MAX);
    }

    #[test]
    fn the_heap_skips_the_kernel_and_takes_the_largest_room() {
        let r = blocks(&[(0, 0x1c00_0000)]);
        let kernel = Block::new(0x8_0000, 0x50_0000);
        assert_eq!(r.heap(kernel), Some(Block::new(0x50_0000, 0x1c00_0000)));
        assert!(r.holds(kernel));
        assert!(!r.holds(Block::new(0x1b00_0000, 0x1d00_0000)));
        let full = blocks(&[(0, 0x50_0000)]);
        assert_eq!(full.heap(kernel), None);
    }

    #[test]
    fn a_hole_is_cut_out_of_the_blocks_across_it() {
        // A mainline Pi 3 tree left as shipped (1 GiB) against the firmware's ARM block end.
        let mut r = blocks(&[(0, 0x4000_0000)]);
        assert!(r.cut(Block::new(0x3c00_0000, 0x4000_0000)));
        assert_eq!(pairs(&r), [(0, 0x3c00_0000)]);
        let mut pi4 = blocks(&[(0, 0x3b40_0000), (0x4000_0000, 0xfc00_0000)]);
        assert!(!pi4.cut(Block::new(0x3b40_0000, 0x4000_0000)));
        assert_eq!(pairs(&pi4), [(0, 0x3b40_0000), (0x4000_0000, 0xfc00_0000)]);
        let mut mid = blocks(&[(0, 0x1000_0000)]);
        assert!(mid.cut(Block::new(0x400_0000, 0x800_0000)));
        assert_eq!(pairs(&mid), [(0, 0x400_0000), (0x800_0000, 0x1000_0000)]);
    }

    #[test]
    fn the_list_is_bounded_and_wrapping_blocks_are_refused() {
        let mut r = RamBlocks::new();
        for i in 0..MAX_BLOCKS as u64 {
            assert!(r.push(i << 30, 1 << 20));
        }
        assert!(!r.push(1 << 40, 1 << 20));
        assert!(r.push(1 << 40, 0), "an empty block is skipped, not refused");
        assert!(!RamBlocks::new().push(u64::MAX - 1, 4));
        assert_eq!(
            Block::new(u64::MAX - 1, u64::MAX).round_inward(MIB2),
            Block::default()
        );
    }
}
