//! The file allocation table: a window cache over the active FAT and a validated "next cluster" step.
//!
//! Each FAT32 entry is 4 bytes, of which the low 28 bits count (mask 0x0FFFFFFF). Inside a chain an
//! entry must be the next data cluster (2 .. cluster count + 2) or end-of-chain (>= 0x0FFFFFF8);
//! free (0), reserved (1), the bad-cluster mark (0x0FFFFFF7) and anything else beyond the volume are
//! errors naming the cluster whose entry it is.
//!
//! The cache holds one aligned window of [`WINDOW_BLOCKS`] blocks (4 KiB, 1024 entries) read in one
//! request, so walking a contiguous chain of a 100 MB file with 4 KiB clusters costs about 25 requests.
//!
//! Every walk goes through a [`ChainCheck`], which finds a loop for a few times the FAT reads of the
//! chain up to it, and in any case stops after the volume's cluster count.

use super::{read, FatError, FormatError, Volume};
use crate::block::{BlockDevice, BLOCK_SIZE};

/// Blocks per FAT window read.
const WINDOW_BLOCKS: usize = 8;

/// FAT32 entries use the low 28 bits.
const ENTRY_MASK: u32 = 0x0FFF_FFFF;
/// The bad-cluster mark.
const BAD: u32 = 0x0FFF_FFF7;
/// End of chain: any value from here up.
const EOC_MIN: u32 = 0x0FFF_FFF8;

/// Where a chain goes after a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Link {
    Next(u32),
    End,
}

/// One window of the active FAT.
pub(super) struct FatCache {
    buf: [u8; WINDOW_BLOCKS * BLOCK_SIZE],
    /// Block index within the FAT of the window's first block.
    first: u64,
    /// Blocks held; 0 = empty.
    len: u64,
}

impl FatCache {
    pub(super) fn new() -> Self {
        FatCache {
            buf: [0; WINDOW_BLOCKS * BLOCK_SIZE],
            first: 0,
            len: 0,
        }
    }

    /// The raw (masked) FAT entry of `cluster`, which must be a data cluster of `vol`.
    fn entry<D: BlockDevice>(
        &mut self,
        vol: &Volume,
        dev: &mut D,
        cluster: u32,
    ) -> Result<u32, FatError<D::Error>> {
        let byte = u64::from(cluster) * 4;
        let block = byte / BLOCK_SIZE as u64;
        if block < self.first || block >= self.first + self.len {
            let first = block - block % WINDOW_BLOCKS as u64;
            // The mount checked the FAT holds cluster count + 2 entries, so `block < fat_blocks`.
            let len = (WINDOW_BLOCKS as u64).min(vol.fat_blocks - first);
            self.len = 0;
            read(
                dev,
                vol.fat_lba + first,
                &mut self.buf[..len as usize * BLOCK_SIZE],
            )?;
            self.first = first;
            self.len = len;
        }
        let off = (block - self.first) as usize * BLOCK_SIZE + (byte % BLOCK_SIZE as u64) as usize;
        let b = &self.buf[off..off + 4];
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & ENTRY_MASK)
    }

    /// The cluster after `cluster` in its chain, validated.
    pub(super) fn next<D: BlockDevice>(
        &mut self,
        vol: &Volume,
        dev: &mut D,
        cluster: u32,
    ) -> Result<Link, FatError<D::Error>> {
        let limit = vol.clusters + 2;
        if cluster < 2 || cluster >= limit {
            // Callers only step from data clusters; kept so a slip is an error, never an index panic.
            return Err(FatError::Format(FormatError::ClusterOutOfRange {
                cluster,
                value: cluster,
                limit,
            }));
        }
        let value = self.entry(vol, dev, cluster)?;
        match value {
            0 => Err(FatError::Format(FormatError::FreeClusterInChain {
                cluster,
            })),
            1 => Err(FatError::Format(FormatError::ReservedClusterInChain {
                cluster,
            })),
            BAD => Err(FatError::Format(FormatError::BadClusterInChain { cluster })),
            v if v >= EOC_MIN => Ok(Link::End),
            v if v >= limit => Err(FatError::Format(FormatError::ClusterOutOfRange {
                cluster,
                value: v,
                limit,
            })),
            v => Ok(Link::Next(v)),
        }
    }
}

/// The bound on a chain walk: the clusters seen (an error past the volume's cluster count) and a loop
/// check by Brent's algorithm over the chain's jumps (links to anything but the next cluster).
///
/// The count alone ends every loop, but only after as many steps as the volume has clusters, and a
/// loop of two clusters in different FAT windows reads a window at every step: up to 8 million
/// 4 KiB reads on a 32 GB card of 4 KiB clusters (32 GB of I/O, half an hour or more on an SD card);
/// a directory loop reads every block of every cluster it passes (68 million requests on a 32 GB
/// card of 32 KiB clusters, in `tests/tests/fat_large.rs`). Brent's check compares each cluster with one saved
/// cluster, saved anew at the 1st, 3rd, 7th, 15th ... jump. Every loop has a jump (cluster numbers
/// only grow along consecutive links) and the cluster after a jump determines the next jump, so the
/// clusters after jumps repeat once the chain loops, and the check meets the saved one within
/// about 3 x (jumps before the loop + jumps in it) jumps. Window reads happen at jumps (and once per 1024
/// consecutive entries), so a loop costs a few times what the good chain up to it costs. Counting
/// jumps, not steps, matters: with steps, a tiny loop after a long tail is walked for as many steps
/// as the tail, one window read each.
pub(super) struct ChainCheck {
    first: u32,
    /// Clusters seen, the first one included.
    seen: u64,
    saved: u32,
    /// Jumps since `saved` was taken, and the number after which it is taken anew (a power of two).
    jumps: u64,
    window: u64,
}

impl ChainCheck {
    /// A walk starting at `first`, which counts as seen.
    pub(super) fn new(first: u32) -> Self {
        ChainCheck {
            first,
            seen: 1,
            saved: first,
            jumps: 0,
            window: 1,
        }
    }

    /// Clusters seen so far.
    pub(super) fn seen(&self) -> u64 {
        self.seen
    }

    /// The walk went from `from` on to `to`: [`FormatError::ChainLoop`] if that closes a loop or goes
    /// past the volume's cluster count.
    pub(super) fn step(&mut self, vol: &Volume, from: u32, to: u32) -> Result<(), FormatError> {
        self.seen += 1;
        if to == self.saved || self.seen > u64::from(vol.clusters) {
            return Err(FormatError::ChainLoop {
                first: self.first,
                limit: vol.clusters,
            });
        }
        if to != from.wrapping_add(1) {
            self.jumps += 1;
            if self.jumps == self.window {
                self.saved = to;
                self.jumps = 0;
                self.window *= 2;
            }
        }
        Ok(())
    }
}
