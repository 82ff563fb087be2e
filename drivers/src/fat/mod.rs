//! FAT32: mount a volume, find a file by path, resolve it to extents, read it; write inside a
//! preallocated file without touching the file system's metadata.
//!
//! # Design
//!
//! The reader exists to hand the page cache a model file as a list of block ranges ([`Extent`]s) on
//! the SD card, so that weights are then read with large multi-block requests and no file-system
//! work on the hot path. It is small, strict and bounded:
//!
//! - **Mount** ([`Volume::mount`]): sector 0 is either a bare FAT boot sector (starts with a jump and
//!   has a plausible BPB) or an MBR, in which case the first partition of type 0x0B/0x0C is used
//!   (failing that a FAT12/16 type, whose BPB then says "not FAT32"). The BPB is validated field by
//!   field ([`FormatError::BadField`] names the field, its value and the LBA): signature, bytes per
//!   sector (512, 1024, 2048, 4096), sectors per cluster, reserved sectors, FAT count, FAT32-ness
//!   (`BPB_FATSz16 == 0` and `BPB_RootEntCnt == 0`, so small volumes that mkfs.fat forces to FAT32
//!   are accepted), FAT size against the cluster count, root cluster, and the volume against its
//!   partition and the device. Everything after mounting is in 512-byte device blocks.
//! - **Lookup** ([`Volume::open`], [`Volume::list_dir`]): `/`-separated paths, leading slash
//!   optional, `.` and `..` resolved by name; each component matched case-insensitively against the
//!   long (VFAT) or the short (8.3) name.
//! - **Chains**: every FAT entry read inside a chain is checked (free, reserved, bad, beyond the
//!   volume: errors naming the cluster), every walk is bounded by the cluster count and checked for
//!   loops on the way (a loop is an error found for a few times the reads of the chain up to it,
//!   never a hang or a walk of the whole volume), and a file's chain must cover its size. FAT
//!   blocks come through a 4 KiB window cache, so a long contiguous chain costs one request per 1024
//!   clusters.
//! - **Files** ([`File`]): size (up to FAT32's 4 GiB - 1; every offset and block number is a u64)
//!   and extents, resolved once at open; [`File::read_at`] reads through them with one request per
//!   extent piece and a bounce buffer only for partial edge blocks, finding each piece's extent by
//!   binary search over their starts, so a read costs O(log extents) per piece however fragmented
//!   the file.
//!   [`File::write_at`] writes the same way, only inside the file's existing size (on a device that
//!   implements [`crate::block::WriteBlocks`]): no allocation, no FAT, directory or FSInfo write.
//!
//! A [`Volume`] holds only the geometry, never the device: every call takes `&mut D` where
//! `D: BlockDevice`, so the kernel keeps one device and shares it with the page cache. Nothing here
//! panics on any disk content and nothing loops without a bound; `#![forbid(unsafe_code)]`.
//! Not supported: creating, growing or deleting files (any metadata write), FAT12/16, exFAT, GPT, extended partitions, OEM code pages in short names
//! (bytes above 0x7F read as Latin-1).
//!
//! Why not the `embedded-sdmmc` crate: it reads a file through its volume manager's open-file
//! handles, block by block through its own buffers, and never hands out where the file lies, so
//! there is no extent list for the page cache to issue large multi-block or queued reads from,
//! which is what this reader is for. It also wants its own block-device trait (`&self` reads of
//! whole `Block`s) rather than [`BlockDevice`] with [`crate::block::Submitted`] queueing.
#![forbid(unsafe_code)]

mod boot;
mod dir;
mod error;
mod file;
mod table;

use alloc::string::String;
use alloc::vec::Vec;

pub use dir::DirEntry;
pub use error::{FatError, FormatError};
pub use file::{Extent, File};

use crate::block::{BlockDevice, BLOCK_SIZE};
use table::FatCache;

/// FAT32 cluster numbers are 28 bits and 0x0FFFFFF7 up are marks, so the last data cluster is
/// 0x0FFFFFF6: at most this many clusters.
const MAX_CLUSTERS: u32 = 0x0FFF_FFF5;

/// The MBR partition a volume was mounted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// Entry number, 0..4.
    pub index: u8,
    /// Partition type byte (0x0B, 0x0C, ...).
    pub kind: u8,
    /// First block.
    pub start: u64,
    /// Length in blocks.
    pub blocks: u64,
}

/// A mounted FAT32 volume: its validated geometry, in 512-byte device blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    partition: Option<Partition>,
    /// Boot sector LBA (0 for a bare volume).
    start_lba: u64,
    total_blocks: u64,
    bytes_per_sector: u32,
    cluster_blocks: u64,
    /// First block of the FAT in use.
    fat_lba: u64,
    /// Blocks of one FAT.
    fat_blocks: u64,
    num_fats: u8,
    /// Block of cluster 2.
    data_lba: u64,
    /// Data clusters: valid cluster numbers are 2 .. clusters + 2.
    clusters: u32,
    root_cluster: u32,
}

/// What a path names.
enum Target {
    Root,
    Entry(DirEntry),
}

impl Volume {
    /// Find and validate the FAT32 volume on `dev` (MBR-partitioned or bare).
    pub fn mount<D: BlockDevice>(dev: &mut D) -> Result<Volume, FatError<D::Error>> {
        boot::mount(dev)
    }

    /// Open the file at `path` (e.g. `/models/SmolLM2-135M-Instruct.Q4_1.gguf`) and resolve its
    /// cluster chain into extents.
    pub fn open<D: BlockDevice>(
        &self,
        dev: &mut D,
        path: &str,
    ) -> Result<File, FatError<D::Error>> {
        let mut cache = FatCache::new();
        match self.lookup(dev, &mut cache, path)? {
            Target::Root => Err(FatError::Format(FormatError::IsADirectory {
                path: "/".into(),
            })),
            Target::Entry(e) if e.is_dir => Err(FatError::Format(FormatError::IsADirectory {
                path: path.into(),
            })),
            Target::Entry(e) => {
                file::resolve(self, dev, &mut cache, &e.name, e.first_cluster, e.size)
            }
        }
    }

    /// The entries of the directory at `path` (`/` or `""` for the root), without `.` and `..`.
    pub fn list_dir<D: BlockDevice>(
        &self,
        dev: &mut D,
        path: &str,
    ) -> Result<Vec<DirEntry>, FatError<D::Error>> {
        let mut cache = FatCache::new();
        let (name, cluster) = match self.lookup(dev, &mut cache, path)? {
            Target::Root => (String::from("/"), self.root_cluster),
            Target::Entry(e) if e.is_dir => (e.name, e.first_cluster),
            Target::Entry(_) => {
                return Err(FatError::Format(FormatError::NotADirectory {
                    path: path.into(),
                }))
            }
        };
        let mut entries = Vec::new();
        dir::walk(self, dev, &mut cache, &name, cluster, |e| {
            entries.push(e);
            None::<()>
        })?;
        Ok(entries)
    }

    /// Walk `path` from the root.
    fn lookup<D: BlockDevice>(
        &self,
        dev: &mut D,
        cache: &mut FatCache,
        path: &str,
    ) -> Result<Target, FatError<D::Error>> {
        // The entries from the root down to the current one; empty = the root.
        let mut stack: Vec<DirEntry> = Vec::new();
        // The path of the entries on the stack, then `last` (for errors).
        let shown = |stack: &[DirEntry], last: Option<&str>| {
            let names = stack.iter().map(|e| e.name.as_str()).chain(last);
            let chars = names.flat_map(|n| core::iter::once('/').chain(n.chars()));
            dir::string_of(chars, "a path")
        };
        for comp in path.split('/') {
            if comp.is_empty() || comp == "." {
                continue;
            }
            if stack.last().is_some_and(|e| !e.is_dir) {
                return Err(FatError::Format(FormatError::NotADirectory {
                    path: shown(&stack, None)?,
                }));
            }
            if comp == ".." {
                stack.pop();
                continue;
            }
            let (name, cluster) = match stack.last() {
                Some(e) => (e.name.as_str(), e.first_cluster),
                None => ("/", self.root_cluster),
            };
            let found = dir::walk(self, dev, cache, name, cluster, |e| {
                e.matches(comp).then_some(e)
            })?;
            match found {
                Some(e) => {
                    stack.try_reserve(1).map_err(|_| FormatError::NoMemory {
                        what: "the entries of a path",
                        bytes: core::mem::size_of::<DirEntry>(),
                    })?;
                    stack.push(e);
                }
                None => {
                    let path = shown(&stack, Some(comp))?;
                    return Err(FatError::Format(FormatError::NotFound { path }));
                }
            }
        }
        Ok(stack.pop().map_or(Target::Root, Target::Entry))
    }

    /// The MBR partition mounted, `None` for a bare volume.
    pub fn partition(&self) -> Option<Partition> {
        self.partition
    }

    /// LBA of the volume's boot sector.
    pub fn start_lba(&self) -> u64 {
        self.start_lba
    }

    /// Volume size in 512-byte blocks.
    pub fn total_blocks(&self) -> u64 {
        self.total_blocks
    }

    /// Logical sector size from the BPB.
    pub fn bytes_per_sector(&self) -> u32 {
        self.bytes_per_sector
    }

    /// Cluster size in bytes.
    pub fn cluster_bytes(&self) -> u64 {
        self.cluster_blocks * BLOCK_SIZE as u64
    }

    /// Number of data clusters (valid cluster numbers are 2 ..= count + 1).
    pub fn cluster_count(&self) -> u32 {
        self.clusters
    }

    /// Number of FAT copies.
    pub fn num_fats(&self) -> u8 {
        self.num_fats
    }

    /// First block of the FAT in use.
    pub fn fat_lba(&self) -> u64 {
        self.fat_lba
    }

    /// Block of cluster 2, the start of the data area.
    pub fn data_lba(&self) -> u64 {
        self.data_lba
    }

    pub fn root_cluster(&self) -> u32 {
        self.root_cluster
    }

    fn is_data_cluster(&self, cluster: u32) -> bool {
        cluster >= 2 && cluster - 2 < self.clusters
    }

    /// First block of a data cluster (which the caller has checked with `is_data_cluster`).
    fn cluster_lba(&self, cluster: u32) -> u64 {
        self.data_lba + u64::from(cluster.saturating_sub(2)) * self.cluster_blocks
    }
}

/// Mount the volume on `dev` and open `path`: [`Volume::mount`] then [`Volume::open`].
pub fn open<D: BlockDevice>(dev: &mut D, path: &str) -> Result<File, FatError<D::Error>> {
    Volume::mount(dev)?.open(dev, path)
}

/// Mount the volume on `dev` and list the directory at `path`.
pub fn list_dir<D: BlockDevice>(
    dev: &mut D,
    path: &str,
) -> Result<Vec<DirEntry>, FatError<D::Error>> {
    Volume::mount(dev)?.list_dir(dev, path)
}

/// Read whole blocks at `lba` into `buf`, wrapping a device failure with where it happened.
fn read<D: BlockDevice>(dev: &mut D, lba: u64, buf: &mut [u8]) -> Result<(), FatError<D::Error>> {
    let blocks = (buf.len() / BLOCK_SIZE) as u64;
    dev.read_blocks(lba, buf)
        .map_err(|error| FatError::Device { lba, blocks, error })
}
