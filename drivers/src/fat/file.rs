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

use super::table::{FatCache, Link};
use super::{read, FatError, Volume};
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
        let len = buf.len() as u64;
        let end = match offset.checked_add(len) {
            Some(end) if end <= self.size => end,
            _ => {
                return Err(FatError::ReadPastEnd {
                    offset,
                    len,
                    size: self.size,
                })
            }
        };
        let mut pos = offset;
        let mut out = 0usize;
        while pos < end {
            let Some(run) = self.map_block(pos / BS) else {
                // Unreachable: `pos < end <= size` and the extents cover every block below the size.
                return Err(FatError::ReadPastEnd {
                    offset,
                    len,
                    size: self.size,
                });
            };
            let within = (pos % BS) as usize;
            let n = if within != 0 || end - pos < BS {
                let mut bounce = [0u8; BLOCK_SIZE];
                read(dev, run.lba, &mut bounce)?;
                let n = (BLOCK_SIZE - within).min((end - pos) as usize);
                buf[out..out + n].copy_from_slice(&bounce[within..within + n]);
                n
            } else {
                let blocks = ((end - pos) / BS).min(run.blocks);
                let n = (blocks * BS) as usize;
                read(dev, run.lba, &mut buf[out..out + n])?;
                n
            };
            pos += n as u64;
            out += n;
        }
        Ok(())
    }
}

impl File {
    /// Write `buf` over the file's bytes at `offset .. offset + buf.len()`, in place: an error
    /// ([`FatError::WritePastEnd`], naming the offset, length and size) if that range goes past the
    /// end of the file, which is never extended. Only the file's own data blocks are written (one
    /// request per extent piece); a partial block at either edge is read, patched and written back
    /// through a 512-byte bounce buffer. The FAT, directory entries and FSInfo are not touched.
    pub fn write_at<D: WriteBlocks>(
        &self,
        dev: &mut D,
        offset: u64,
        buf: &[u8],
    ) -> Result<(), FatError<D::Error>> {
        let len = buf.len() as u64;
        let past_end = || FatError::WritePastEnd {
            offset,
            len,
            size: self.size,
        };
        let end = match offset.checked_add(len) {
            Some(end) if end <= self.size => end,
            _ => return Err(past_end()),
        };
        let mut pos = offset;
        let mut done = 0usize;
        while pos < end {
            // Unreachable failure: `pos < end <= size` and the extents cover every block below it.
            let run = self.map_block(pos / BS).ok_or_else(past_end)?;
            let within = (pos % BS) as usize;
            let n = if within != 0 || end - pos < BS {
                let mut bounce = [0u8; BLOCK_SIZE];
                read(dev, run.lba, &mut bounce)?;
                let n = (BLOCK_SIZE - within).min((end - pos) as usize);
                bounce[within..within + n].copy_from_slice(&buf[done..done + n]);
                write(dev, run.lba, &bounce)?;
                n
            } else {
                let blocks = ((end - pos) / BS).min(run.blocks);
                let n = (blocks * BS) as usize;
                write(dev, run.lba, &buf[done..done + n])?;
                n
            };
            pos += n as u64;
            done += n;
        }
        Ok(())
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
/// still end within the volume's cluster count, which is what catches a loop.
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
        return Err(FatError::BadFirstCluster {
            name: name.into(),
            cluster: first,
            limit: vol.clusters + 2,
        });
    }
    let needed = size.div_ceil(vol.cluster_blocks * BS);
    let mut extents: Vec<Extent> = Vec::new();
    let mut cluster = first;
    let mut walked: u64 = 0;
    loop {
        walked += 1;
        if walked > u64::from(vol.clusters) {
            return Err(FatError::ChainLoop {
                first,
                limit: vol.clusters,
            });
        }
        if walked <= needed {
            let lba = vol.cluster_lba(cluster);
            match extents.last_mut() {
                Some(e) if e.lba + e.blocks == lba => e.blocks += vol.cluster_blocks,
                _ => extents.push(Extent {
                    lba,
                    blocks: vol.cluster_blocks,
                }),
            }
        }
        match cache.next(vol, dev, cluster)? {
            Link::Next(n) => cluster = n,
            Link::End => break,
        }
    }
    if walked < needed {
        return Err(FatError::ChainTooShort {
            first,
            clusters: walked,
            needed,
            size,
        });
    }
    // Cut the last cluster's tail: less than one cluster, so the last extent keeps at least a block.
    let excess = needed * vol.cluster_blocks - size.div_ceil(BS);
    if let Some(last) = extents.last_mut() {
        last.blocks -= excess;
    }
    let mut starts = Vec::with_capacity(extents.len());
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
