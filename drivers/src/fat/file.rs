//! Files: the cluster chain resolved once into extents, and reads and in-place writes through them.
//!
//! An [`Extent`] is a run of consecutive device blocks; consecutive clusters merge into one. The
//! extents cover exactly `ceil(size / 512)` blocks (the last one is cut to the file's end), so every
//! block they name holds file data. [`File::read_at`] reads whole blocks straight into the caller's
//! buffer, one request per extent piece, and only the partial blocks at either edge go through a
//! 512-byte bounce buffer.
//!
//! [`File::write_at`] is the mirror image, for a file preallocated on the card (the prompt cache):
//! it writes only blocks the extents name, inside the file's size, so it never allocates a cluster,
//! never grows the file and never touches the FAT, a directory entry or FSInfo; the volume's
//! metadata stays byte for byte what it was. A partial block at either edge is read, patched in a
//! 512-byte bounce buffer and written back (the bytes of the last block past the file's end are
//! written back as they were).

use alloc::vec::Vec;

use super::table::{ChainCheck, FatCache, Link};
use super::{read, FatError, FormatError, Volume};
use crate::block::{BlockDevice, WriteBlocks, BLOCK_SIZE};

const BS: u64 = BLOCK_SIZE as u64;

/// `blocks` consecutive 512-byte device blocks from `lba`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub lba: u64,
    pub blocks: u64,
}

/// An open file: its size and where its blocks are. Holds no device; reads take one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    size: u64,
    first_cluster: u32,
    extents: Vec<Extent>,
    /// File block index at which each extent starts.
    starts: Vec<u64>,
}

impl File {
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// First cluster (0 for an empty file).
    pub fn first_cluster(&self) -> u32 {
        self.first_cluster
    }

    /// The file's blocks on the device, in file order.
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// Blocks holding file data: `ceil(size / 512)`.
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(BS)
    }

    /// Where file block `block` lives: the run from it to the end of its extent. `None` past the end.
    pub fn map_block(&self, block: u64) -> Option<Extent> {
        if block >= self.blocks() {
            return None;
        }
        let i = self
            .starts
            .partition_point(|&s| s <= block)
            .checked_sub(1)?;
        let e = self.extents.get(i)?;
        let off = block - self.starts[i];
        Some(Extent {
            lba: e.lba + off,
            blocks: e.blocks - off,
        })
    }

    /// Fill `buf` with the file's bytes at `offset .. offset + buf.len()`; an error if that range goes
    /// past the end of the file.
    pub fn read_at<D: BlockDevice>(
        &self,
        dev: &mut D,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), FatError<D::Error>> {
        self.pieces(offset, buf.len(), false, |p| {
            let dst = &mut buf[p.at..p.at + p.len];
            if !p.partial {
                return read(dev, p.lba, dst);
            }
            let mut bounce = [0u8; BLOCK_SIZE];
            read(dev, p.lba, &mut bounce)?;
            dst.copy_from_slice(&bounce[p.within..p.within + p.len]);
            Ok(())
        })
    }

    /// Walk the bytes `offset .. offset + len` of the file as [`Piece`]s, in order, for a read or
    /// (`write`) a write: a partial block at either edge alone, whole blocks in runs as long as
    /// their extent. An error ([`FormatError::ReadPastEnd`] or [`FormatError::WritePastEnd`]) if the range
    /// goes past the end of the file.
    fn pieces<E>(
        &self,
        offset: u64,
        len: usize,
        write: bool,
        mut each: impl FnMut(Piece) -> Result<(), FatError<E>>,
    ) -> Result<(), FatError<E>> {
        let (len, size) = (len as u64, self.size);
        let past_end = || {
            if write {
                FatError::Format(FormatError::WritePastEnd { offset, len, size })
            } else {
                FatError::Format(FormatError::ReadPastEnd { offset, len, size })
            }
        };
        let end = match offset.checked_add(len) {
            Some(end) if end <= size => end,
            _ => return Err(past_end()),
        };
        let mut pos = offset;
        while pos < end {
            // Unreachable failure: `pos < end <= size` and the extents cover every block below it.
            let run = self.map_block(pos / BS).ok_or_else(&past_end)?;
            let within = (pos % BS) as usize;
            let partial = within != 0 || end - pos < BS;
            let n = if partial {
                (BLOCK_SIZE - within).min((end - pos) as usize)
            } else {
                (((end - pos) / BS).min(run.blocks) * BS) as usize
            };
            each(Piece {
                lba: run.lba,
                at: (pos - offset) as usize,
                within,
                len: n,
                partial,
            })?;
            pos += n as u64;
        }
        Ok(())
    }
}

/// A step of [`File::read_at`] or [`File::write_at`]: bytes `at .. at + len` of the caller's
/// buffer are the device's bytes from byte `within` of block `lba`, part of that one block when
/// `partial` (through a bounce buffer), else `len / 512` whole blocks (`within` 0).
#[derive(Debug, Clone, Copy)]
struct Piece {
    lba: u64,
    at: usize,
    within: usize,
    len: usize,
    partial: bool,
}

impl File {
    /// Write `buf` over the file's bytes at `offset .. offset + buf.len()`, in place: an error
    /// ([`FormatError::WritePastEnd`], naming the offset, length and size) if that range goes past the
    /// end of the file, which is never extended. Only the file's own data blocks are written (one
    /// request per extent piece); a partial block at either edge is read, patched and written back
    /// through a 512-byte bounce buffer. The FAT, directory entries and FSInfo are not touched.
    pub fn write_at<D: WriteBlocks>(
        &self,
        dev: &mut D,
        offset: u64,
        buf: &[u8],
    ) -> Result<(), FatError<D::Error>> {
        self.pieces(offset, buf.len(), true, |p| {
            let src = &buf[p.at..p.at + p.len];
            if !p.partial {
                return write(dev, p.lba, src);
            }
            let mut bounce = [0u8; BLOCK_SIZE];
            read(dev, p.lba, &mut bounce)?;
            bounce[p.within..p.within + p.len].copy_from_slice(src);
            write(dev, p.lba, &bounce)
        })
    }
}

/// Write whole blocks at `lba`, wrapping a device failure with where it happened.
fn write<D: WriteBlocks>(dev: &mut D, lba: u64, buf: &[u8]) -> Result<(), FatError<D::Error>> {
    let blocks = (buf.len() / BLOCK_SIZE) as u64;
    dev.write_blocks(lba, buf)
        .map_err(|error| FatError::DeviceWrite { lba, blocks, error })
}

/// Resolve the chain of the file `name` (`size` bytes from cluster `first`) into extents.
///
/// The whole chain is walked and validated, to its end-of-chain mark: a chain shorter than the size
/// is an error; one longer is tolerated (the extra clusters are not part of the file), but it must
/// still end, which [`ChainCheck`] makes a loop an error.
///
/// Memory: 24 bytes per extent (the [`Extent`] and its start in `starts`), a list that grows only
/// where the chain jumps. A 4 GiB - 1 file in 10,000 pieces keeps 240 KB (at most 384 KiB while the
/// list doubles during the walk); the worst case, every cluster apart, is one extent per cluster:
/// 24 MiB for 4 GiB - 1 in 4 KiB clusters, 3 MiB in 32 KiB ones, 192 MiB in 512-byte ones.
/// Allocation is fallible, so a card too fragmented for the heap is [`FormatError::OutOfMemory`], not
/// an abort.
pub(super) fn resolve<D: BlockDevice>(
    vol: &Volume,
    dev: &mut D,
    cache: &mut FatCache,
    name: &str,
    first: u32,
    size: u64,
) -> Result<File, FatError<D::Error>> {
    if size == 0 {
        return Ok(File {
            size,
            first_cluster: first,
            extents: Vec::new(),
            starts: Vec::new(),
        });
    }
    if !vol.is_data_cluster(first) {
        return Err(FatError::Format(FormatError::BadFirstCluster {
            name: name.into(),
            cluster: first,
            limit: vol.clusters + 2,
        }));
    }
    let needed = size.div_ceil(vol.cluster_blocks * BS);
    let mut extents: Vec<Extent> = Vec::new();
    let mut check = ChainCheck::new(first);
    let mut cluster = first;
    loop {
        if check.seen() <= needed {
            let lba = vol.cluster_lba(cluster);
            match extents.last_mut() {
                Some(e) if e.lba + e.blocks == lba => e.blocks += vol.cluster_blocks,
                _ => push(&mut extents, lba, vol.cluster_blocks)?,
            }
        }
        match cache.next(vol, dev, cluster)? {
            Link::Next(n) => {
                check.step(vol, cluster, n)?;
                cluster = n;
            }
            Link::End => break,
        }
    }
    finish(vol, first, size, check.seen(), extents)
}

/// Append an extent, failing with [`FormatError::OutOfMemory`] rather than aborting when the heap
/// cannot grow the list.
fn push<E>(extents: &mut Vec<Extent>, lba: u64, blocks: u64) -> Result<(), FatError<E>> {
    let count = extents.len() as u64 + 1;
    extents
        .try_reserve(1)
        .map_err(|_| FatError::Format(FormatError::OutOfMemory { extents: count }))?;
    extents.push(Extent { lba, blocks });
    Ok(())
}

/// The [`File`] of `size` bytes from the extents of a chain of `walked` clusters from `first`: an
/// error if they do not cover the size, else the last extent cut to the file's last block.
fn finish<E>(
    vol: &Volume,
    first: u32,
    size: u64,
    walked: u64,
    mut extents: Vec<Extent>,
) -> Result<File, FatError<E>> {
    let needed = size.div_ceil(vol.cluster_blocks * BS);
    if walked < needed {
        return Err(FatError::Format(FormatError::ChainTooShort {
            first,
            clusters: walked,
            needed,
            size,
        }));
    }
    // Cut the last cluster's tail: less than one cluster, so the last extent keeps at least a block.
    let excess = needed * vol.cluster_blocks - size.div_ceil(BS);
    if let Some(last) = extents.last_mut() {
        last.blocks -= excess;
    }
    // The pushes doubled the capacity: give back up to half the list for as long as the file is open
    // (a copy of the exact size, when the heap has room for it; else the list stays as it is).
    if extents.capacity() > extents.len() {
        let mut tight = Vec::new();
        if tight.try_reserve_exact(extents.len()).is_ok() {
            tight.extend_from_slice(&extents);
            extents = tight;
        }
    }
    let mut starts = Vec::new();
    starts.try_reserve_exact(extents.len()).map_err(|_| {
        FatError::Format(FormatError::OutOfMemory {
            extents: extents.len() as u64,
        })
    })?;
    let mut at = 0;
    for e in &extents {
        starts.push(at);
        at += e.blocks;
    }
    Ok(File {
        size,
        first_cluster: first,
        extents,
        starts,
    })
}
