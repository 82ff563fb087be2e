//! [`FatError`]: what was wrong and where. A failed device read or write keeps the block device's
//! own error (`E`) with the LBA and block count; everything else is a [`FormatError`] (the volume's
//! format or the request: LBA, cluster, field, value), which does not depend on the device.

use alloc::string::String;
use core::fmt;

/// Everything the FAT reader can report. `E` is the block device's error type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FatError<E> {
    /// The block device failed a read of `blocks` blocks at `lba`.
    Device { lba: u64, blocks: u64, error: E },
    /// The block device failed a write of `blocks` blocks at `lba`.
    DeviceWrite { lba: u64, blocks: u64, error: E },
    /// The volume's format is wrong, or the request does not fit it.
    Format(FormatError),
}

/// What is wrong with the volume's format or with a request, whatever the block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// The sector at `lba` (MBR or boot sector) does not end in 0x55 0xAA; `value` is the
    /// little-endian u16 at byte 510 (a good one reads 0xAA55).
    BadSignature { lba: u64, value: u16 },
    /// The MBR at LBA 0 has no FAT partition; `types` are its four partition type bytes.
    NoFatPartition { types: [u8; 4] },
    /// The disk is GPT-partitioned (a protective MBR entry of type 0xEE); only MBR is read.
    GptUnsupported,
    /// MBR partition `index` (0..4) covers blocks `start .. start + blocks`, past the device's end.
    PartitionOutOfDevice {
        index: usize,
        start: u64,
        blocks: u64,
        device_blocks: u64,
    },
    /// A boot-sector (BPB) field of the volume at `lba` holds `value`, which is not `expected`.
    BadField {
        lba: u64,
        field: &'static str,
        value: u64,
        expected: &'static str,
    },
    /// The volume at `lba` is FAT12 or FAT16 (BPB_FATSz16 or BPB_RootEntCnt non-zero).
    NotFat32 {
        lba: u64,
        fat_size16: u16,
        root_entries: u16,
    },
    /// One FAT of `fat_sectors` sectors holds fewer entries than the volume's `clusters` + 2.
    FatTooSmall {
        lba: u64,
        fat_sectors: u32,
        bytes_per_sector: u32,
        clusters: u32,
    },
    /// The volume at `lba` spans `blocks` blocks, past the end of a device of `device_blocks`.
    VolumeOutOfDevice {
        lba: u64,
        blocks: u64,
        device_blocks: u64,
    },
    /// The volume at `lba` spans `blocks` blocks, more than its partition's `partition_blocks`.
    VolumeOutOfPartition {
        lba: u64,
        blocks: u64,
        partition_blocks: u64,
    },
    /// The FAT entry of `cluster`, inside a chain, says "free" (0).
    FreeClusterInChain { cluster: u32 },
    /// The FAT entry of `cluster`, inside a chain, is the reserved value 1.
    ReservedClusterInChain { cluster: u32 },
    /// The FAT entry of `cluster`, inside a chain, is the bad-cluster mark 0x0FFFFFF7.
    BadClusterInChain { cluster: u32 },
    /// The FAT entry of `cluster` points to `value`, which is not a data cluster (2 .. `limit`).
    ClusterOutOfRange {
        cluster: u32,
        value: u32,
        limit: u32,
    },
    /// The chain from `first` loops: it comes back to a cluster it passed, or runs on past the
    /// volume's `limit` clusters (which only a loop can).
    ChainLoop { first: u32, limit: u32 },
    /// The chain from `first` ends after `clusters` clusters; `size` bytes need `needed`.
    ChainTooShort {
        first: u32,
        clusters: u64,
        needed: u64,
        size: u64,
    },
    /// The entry `name` starts at cluster `cluster`, which is not a data cluster (2 .. `limit`),
    /// and it is a directory or a non-empty file.
    BadFirstCluster {
        name: String,
        cluster: u32,
        limit: u32,
    },
    /// The heap cannot hold the extent list of a file in (at least) `extents` extents: a file
    /// fragmented beyond what memory allows (24 bytes an extent).
    OutOfMemory { extents: u64 },
    /// The heap cannot hold `bytes` more bytes for `what` (a name, a path, the walk's stack).
    NoMemory { what: &'static str, bytes: usize },
    /// No entry `path` (the path up to the missing component).
    NotFound { path: String },
    /// `path` names a file where a directory was needed.
    NotADirectory { path: String },
    /// `path` names a directory where a file was needed.
    IsADirectory { path: String },
    /// A read of `len` bytes at `offset` goes past the end of a file of `size` bytes.
    ReadPastEnd { offset: u64, len: u64, size: u64 },
    /// A write of `len` bytes at `offset` goes past the end of a file of `size` bytes (writes never
    /// grow a file).
    WritePastEnd { offset: u64, len: u64, size: u64 },
}

impl<E> FatError<E> {
    /// The same error with the device error converted, e.g. to a common kernel error type.
    pub fn map_device<F>(self, f: impl FnOnce(E) -> F) -> FatError<F> {
        match self {
            FatError::Device { lba, blocks, error } => FatError::Device {
                lba,
                blocks,
                error: f(error),
            },
            FatError::DeviceWrite { lba, blocks, error } => FatError::DeviceWrite {
                lba,
                blocks,
                error: f(error),
            },
            FatError::Format(e) => FatError::Format(e),
        }
    }
}

impl<E> From<FormatError> for FatError<E> {
    fn from(e: FormatError) -> Self {
        FatError::Format(e)
    }
}

impl<E: fmt::Display> fmt::Display for FatError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FatError::Device { lba, blocks, error } => {
                write!(
                    f,
                    "FAT: block device error reading {blocks} block(s) at LBA {lba}: {error}"
                )
            }
            FatError::DeviceWrite { lba, blocks, error } => {
                write!(
                    f,
                    "FAT: block device error writing {blocks} block(s) at LBA {lba}: {error}"
                )
            }
            FatError::Format(e) => e.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for FatError<E> {}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FormatError::*;
        match self {
            BadSignature { lba, value } => write!(
                f,
                "FAT: LBA {lba}: boot signature is {:#06x}, expected 0xaa55 (bytes 0x55 0xAA at offset 510)",
                value
            ),
            NoFatPartition { types } => write!(
                f,
                "FAT: the MBR has no FAT partition (types {:#04x} {:#04x} {:#04x} {:#04x}; want 0x0b or 0x0c)",
                types[0], types[1], types[2], types[3]
            ),
            GptUnsupported => write!(f, "FAT: the disk is GPT-partitioned; only MBR partition tables are read"),
            PartitionOutOfDevice { index, start, blocks, device_blocks } => write!(
                f,
                "FAT: MBR partition {index} (LBA {start}, {blocks} blocks) ends past the device \
                 ({device_blocks} blocks)"
            ),
            BadField { lba, field, value, expected } => write!(
                f,
                "FAT: boot sector at LBA {lba}: {field} = {value} ({value:#x}) is invalid (expected {expected})"
            ),
            NotFat32 { lba, fat_size16, root_entries } => write!(
                f,
                "FAT: volume at LBA {lba} is not FAT32 but FAT12/FAT16 (BPB_FATSz16 = {fat_size16}, \
                 BPB_RootEntCnt = {root_entries}); format the card as FAT32"
            ),
            FatTooSmall { lba, fat_sectors, bytes_per_sector, clusters } => write!(
                f,
                "FAT: boot sector at LBA {lba}: BPB_FATSz32 = {fat_sectors} sectors of {bytes_per_sector} bytes \
                 cannot hold the entries of {clusters} clusters"
            ),
            VolumeOutOfDevice { lba, blocks, device_blocks } => write!(
                f,
                "FAT: volume at LBA {lba} spans {blocks} blocks, past the end of the device ({device_blocks} blocks)"
            ),
            VolumeOutOfPartition { lba, blocks, partition_blocks } => write!(
                f,
                "FAT: volume at LBA {lba} spans {blocks} blocks, more than its partition ({partition_blocks} blocks)"
            ),
            FreeClusterInChain { cluster } => {
                write!(f, "FAT: cluster chain broken: FAT entry of cluster {cluster} is 0 (free)")
            }
            ReservedClusterInChain { cluster } => {
                write!(f, "FAT: cluster chain broken: FAT entry of cluster {cluster} is 1 (reserved)")
            }
            BadClusterInChain { cluster } => write!(
                f,
                "FAT: cluster chain broken: FAT entry of cluster {cluster} is 0x0ffffff7 (bad cluster)"
            ),
            ClusterOutOfRange { cluster, value, limit } => write!(
                f,
                "FAT: cluster chain broken: FAT entry of cluster {cluster} points to {value:#x}, \
                 outside the data clusters 2..{limit}"
            ),
            ChainLoop { first, limit } => write!(
                f,
                "FAT: cluster chain from {first} loops: it comes back to a cluster it passed \
                 (the volume has {limit} clusters)"
            ),
            ChainTooShort { first, clusters, needed, size } => write!(
                f,
                "FAT: cluster chain from {first} ends after {clusters} cluster(s); a size of {size} bytes \
                 needs {needed}"
            ),
            BadFirstCluster { name, cluster, limit } => {
                write!(f, "FAT: entry '{name}' starts at cluster {cluster}, outside the data clusters 2..{limit}")
            }
            OutOfMemory { extents } => write!(
                f,
                "FAT: no memory for the extent list of a file in at least {extents} extents (24 bytes \
                 each); the file is too fragmented: copy it to a freshly formatted card"
            ),
            NoMemory { what, bytes } => {
                write!(f, "FAT: out of memory allocating {what} ({bytes} bytes)")
            }
            NotFound { path } => write!(f, "FAT: '{path}' not found"),
            NotADirectory { path } => write!(f, "FAT: '{path}' is not a directory"),
            IsADirectory { path } => write!(f, "FAT: '{path}' is a directory"),
            ReadPastEnd { offset, len, size } => {
                write!(f, "FAT: read of {len} bytes at offset {offset} goes past the end of the file ({size} bytes)")
            }
            WritePastEnd { offset, len, size } => write!(
                f,
                "FAT: write of {len} bytes at offset {offset} goes past the end of the file ({size} bytes); \
                 files are written only inside their preallocated size"
            ),
        }
    }
}

impl core::error::Error for FormatError {}
