//! Mounting: sector 0 as an MBR or a bare boot sector, then strict BPB validation into a [`Volume`].
//!
//! BPB offsets (Microsoft "FAT: General Overview of On-Disk Format", FAT32 layout):
//!
//! | offset | field | | offset | field |
//! |---|---|---|---|---|
//! | 0 | BS_jmpBoot (EB xx 90 or E9 xx xx) | | 0x16 | BPB_FATSz16 (0 on FAT32) |
//! | 0x0B | BPB_BytsPerSec | | 0x20 | BPB_TotSec32 |
//! | 0x0D | BPB_SecPerClus | | 0x24 | BPB_FATSz32 |
//! | 0x0E | BPB_RsvdSecCnt | | 0x28 | BPB_ExtFlags (bit 7: one active FAT, bits 0-3) |
//! | 0x10 | BPB_NumFATs | | 0x2A | BPB_FSVer (0) |
//! | 0x11 | BPB_RootEntCnt (0 on FAT32) | | 0x2C | BPB_RootClus |
//! | 0x13 | BPB_TotSec16 | | 0x1FE | signature 0x55 0xAA |
//!
//! MBR: four 16-byte entries at 0x1BE (status at +0, type at +4, first LBA at +8, sector count at +12).

use super::{read, FatError, FormatError, Partition, Volume, MAX_CLUSTERS};
use crate::block::{BlockDevice, BLOCK_SIZE};

fn u16_at(s: &[u8; BLOCK_SIZE], off: usize) -> u16 {
    u16::from_le_bytes([s[off], s[off + 1]])
}

fn u32_at(s: &[u8; BLOCK_SIZE], off: usize) -> u32 {
    u32::from_le_bytes([s[off], s[off + 1], s[off + 2], s[off + 3]])
}

/// Partition types that may hold a FAT volume: FAT32 (CHS, LBA) first, then FAT12/16 ones, which are
/// mounted only to say "not FAT32" from their BPB (or accepted if the BPB is FAT32 after all).
const FAT32_TYPES: [u8; 2] = [0x0B, 0x0C];
const FAT16_TYPES: [u8; 4] = [0x0E, 0x06, 0x01, 0x04];
const GPT_PROTECTIVE: u8 = 0xEE;

fn check_signature(s: &[u8; BLOCK_SIZE], lba: u64) -> Result<(), FormatError> {
    let value = u16_at(s, 510);
    if value != 0xAA55 {
        return Err(FormatError::BadSignature { lba, value });
    }
    Ok(())
}

/// Sector 0 is taken for a bare FAT boot sector when it starts with a jump instruction and its BPB's
/// basic fields are plausible; an MBR (boot code, often zeros) fails this.
fn looks_like_boot_sector(s: &[u8; BLOCK_SIZE]) -> bool {
    let jump = (s[0] == 0xEB && s[2] == 0x90) || s[0] == 0xE9;
    let bps = u16_at(s, 0x0B);
    let spc = s[0x0D];
    jump && matches!(bps, 512 | 1024 | 2048 | 4096)
        && spc.is_power_of_two()
        && u16_at(s, 0x0E) != 0
        && s[0x10] != 0
}

/// One MBR partition entry.
#[derive(Clone, Copy)]
struct MbrEntry {
    kind: u8,
    start: u64,
    blocks: u64,
}

/// The four entries, when the table is well-formed: every status byte 0x00 or 0x80, every used entry
/// with a non-zero start and size, and at least one used entry.
fn parse_mbr(s: &[u8; BLOCK_SIZE]) -> Option<[MbrEntry; 4]> {
    let mut entries = [MbrEntry {
        kind: 0,
        start: 0,
        blocks: 0,
    }; 4];
    let mut used = 0;
    for (i, e) in entries.iter_mut().enumerate() {
        let off = 0x1BE + 16 * i;
        let status = s[off];
        if status != 0x00 && status != 0x80 {
            return None;
        }
        e.kind = s[off + 4];
        e.start = u64::from(u32_at(s, off + 8));
        e.blocks = u64::from(u32_at(s, off + 12));
        if e.kind != 0 {
            if e.start == 0 || e.blocks == 0 {
                return None;
            }
            used += 1;
        }
    }
    (used > 0).then_some(entries)
}

pub(super) fn mount<D: BlockDevice>(dev: &mut D) -> Result<Volume, FatError<D::Error>> {
    let device_blocks = dev.num_blocks();
    let mut s0 = [0u8; BLOCK_SIZE];
    read(dev, 0, &mut s0)?;
    check_signature(&s0, 0)?;
    if looks_like_boot_sector(&s0) {
        return Ok(parse_boot_sector(&s0, 0, None, device_blocks)?);
    }
    let Some(entries) = parse_mbr(&s0) else {
        // Neither a plausible boot sector nor a partition table: report what is wrong with the BPB.
        return Ok(parse_boot_sector(&s0, 0, None, device_blocks)?);
    };
    let pick = |types: &[u8]| entries.iter().position(|e| types.contains(&e.kind));
    let Some(index) = pick(&FAT32_TYPES).or_else(|| pick(&FAT16_TYPES)) else {
        // A hybrid MBR with a FAT partition was used above; a plain protective MBR means GPT.
        if entries.iter().any(|e| e.kind == GPT_PROTECTIVE) {
            return Err(FatError::Format(FormatError::GptUnsupported));
        }
        return Err(FatError::Format(FormatError::NoFatPartition {
            types: entries.map(|e| e.kind),
        }));
    };
    let e = entries[index];
    if e.start + e.blocks > device_blocks {
        return Err(FatError::Format(FormatError::PartitionOutOfDevice {
            index,
            start: e.start,
            blocks: e.blocks,
            device_blocks,
        }));
    }
    let mut boot = [0u8; BLOCK_SIZE];
    read(dev, e.start, &mut boot)?;
    let part = Partition {
        index: index as u8,
        kind: e.kind,
        start: e.start,
        blocks: e.blocks,
    };
    Ok(parse_boot_sector(
        &boot,
        e.start,
        Some(part),
        device_blocks,
    )?)
}

/// A field of the boot sector at `lba` that holds `value` where `expected` was wanted.
fn bad(lba: u64, field: &'static str, value: u64, expected: &'static str) -> FormatError {
    FormatError::BadField {
        lba,
        field,
        value,
        expected,
    }
}

/// The BIOS parameter block's sizes, each checked on its own.
struct Bpb {
    bytes_per_sector: u16,
    sectors_per_cluster: u8,
    reserved: u16,
    num_fats: u8,
    fat_size: u32,
    total_sectors: u32,
    /// The field `total_sectors` came from (BPB_TotSec16 or BPB_TotSec32).
    total_field: &'static str,
}

impl Bpb {
    /// The sizes of the boot sector `s` at `lba`: a FAT32 volume's, or what is wrong.
    fn read(s: &[u8; BLOCK_SIZE], lba: u64) -> Result<Bpb, FormatError> {
        let bytes_per_sector = u16_at(s, 0x0B);
        if !matches!(bytes_per_sector, 512 | 1024 | 2048 | 4096) {
            let v = bytes_per_sector.into();
            return Err(bad(lba, "BPB_BytsPerSec", v, "512, 1024, 2048 or 4096"));
        }
        let sectors_per_cluster = s[0x0D];
        if !sectors_per_cluster.is_power_of_two() {
            let v = sectors_per_cluster.into();
            return Err(bad(
                lba,
                "BPB_SecPerClus",
                v,
                "a power of two from 1 to 128",
            ));
        }
        let reserved = u16_at(s, 0x0E);
        if reserved == 0 {
            return Err(bad(lba, "BPB_RsvdSecCnt", 0, "at least 1"));
        }
        let num_fats = s[0x10];
        if num_fats == 0 {
            return Err(bad(lba, "BPB_NumFATs", 0, "at least 1"));
        }
        let root_entries = u16_at(s, 0x11);
        let fat_size16 = u16_at(s, 0x16);
        if fat_size16 != 0 || root_entries != 0 {
            return Err(FormatError::NotFat32 {
                lba,
                fat_size16,
                root_entries,
            });
        }
        let fat_size = u32_at(s, 0x24);
        if fat_size == 0 {
            return Err(bad(lba, "BPB_FATSz32", 0, "at least 1"));
        }
        let total16 = u16_at(s, 0x13);
        let (total_sectors, total_field) = if total16 != 0 {
            (u32::from(total16), "BPB_TotSec16")
        } else {
            (u32_at(s, 0x20), "BPB_TotSec32")
        };
        Ok(Bpb {
            bytes_per_sector,
            sectors_per_cluster,
            reserved,
            num_fats,
            fat_size,
            total_sectors,
            total_field,
        })
    }

    /// The first data sector and the cluster count, checked against the FAT's size.
    fn clusters(&self, lba: u64) -> Result<(u64, u32), FormatError> {
        let total = self.total_sectors;
        let too_small = |expected| bad(lba, self.total_field, total.into(), expected);
        let data_start =
            u64::from(self.reserved) + u64::from(self.num_fats) * u64::from(self.fat_size);
        if u64::from(total) <= data_start {
            return Err(too_small("more than the reserved sectors plus the FATs"));
        }
        let clusters64 = (u64::from(total) - data_start) / u64::from(self.sectors_per_cluster);
        if clusters64 == 0 {
            return Err(too_small("room for at least one cluster after the FATs"));
        }
        if clusters64 > u64::from(MAX_CLUSTERS) {
            return Err(too_small("at most 0x0ffffff5 clusters"));
        }
        let clusters = clusters64 as u32;
        let fat_entries = u64::from(self.fat_size) * u64::from(self.bytes_per_sector) / 4;
        if fat_entries < clusters64 + 2 {
            return Err(FormatError::FatTooSmall {
                lba,
                fat_sectors: self.fat_size,
                bytes_per_sector: self.bytes_per_sector.into(),
                clusters,
            });
        }
        Ok((data_start, clusters))
    }
}

/// The FAT32 fields of the boot sector `s` at `lba`: the active FAT and the root directory's
/// cluster, checked (the version too).
fn fat32_fields(
    s: &[u8; BLOCK_SIZE],
    lba: u64,
    num_fats: u8,
    clusters: u32,
) -> Result<(u16, u32), FormatError> {
    let ext_flags = u16_at(s, 0x28);
    let active_fat = if ext_flags & 0x80 != 0 {
        ext_flags & 0x0F
    } else {
        0
    };
    if active_fat >= u16::from(num_fats) {
        let expected = "an active FAT number below BPB_NumFATs";
        return Err(bad(lba, "BPB_ExtFlags", ext_flags.into(), expected));
    }
    let version = u16_at(s, 0x2A);
    if version != 0 {
        return Err(bad(lba, "BPB_FSVer", version.into(), "0 (version 0.0)"));
    }
    let root_cluster = u32_at(s, 0x2C);
    if root_cluster < 2 || root_cluster >= clusters + 2 {
        let expected = "a data cluster: at least 2 and below cluster count + 2";
        return Err(bad(lba, "BPB_RootClus", root_cluster.into(), expected));
    }
    Ok((active_fat, root_cluster))
}

/// Validate the boot sector at `lba` (a partition's first block, or 0) and compute the layout.
fn parse_boot_sector(
    s: &[u8; BLOCK_SIZE],
    lba: u64,
    partition: Option<Partition>,
    device_blocks: u64,
) -> Result<Volume, FormatError> {
    check_signature(s, lba)?;
    let bpb = Bpb::read(s, lba)?;
    let (data_start, clusters) = bpb.clusters(lba)?;
    let (active_fat, root_cluster) = fat32_fields(s, lba, bpb.num_fats, clusters)?;

    // Everything in 512-byte device blocks from here on.
    let sector_blocks = u64::from(bpb.bytes_per_sector) / BLOCK_SIZE as u64;
    let total_blocks = u64::from(bpb.total_sectors) * sector_blocks;
    if lba + total_blocks > device_blocks {
        return Err(FormatError::VolumeOutOfDevice {
            lba,
            blocks: total_blocks,
            device_blocks,
        });
    }
    if let Some(p) = partition {
        if total_blocks > p.blocks {
            return Err(FormatError::VolumeOutOfPartition {
                lba,
                blocks: total_blocks,
                partition_blocks: p.blocks,
            });
        }
    }
    let fat_blocks = u64::from(bpb.fat_size) * sector_blocks;
    Ok(Volume {
        partition,
        start_lba: lba,
        total_blocks,
        bytes_per_sector: bpb.bytes_per_sector.into(),
        cluster_blocks: u64::from(bpb.sectors_per_cluster) * sector_blocks,
        fat_lba: lba + u64::from(bpb.reserved) * sector_blocks + u64::from(active_fat) * fat_blocks,
        fat_blocks,
        num_fats: bpb.num_fats,
        data_lba: lba + data_start * sector_blocks,
        clusters,
        root_cluster,
    })
}
