//! Bad volumes, made by patching bytes of good mkfs.fat images: each gives its own error naming the
//! field, value, LBA or cluster, and nothing panics.

mod fat_common;

use drivers::block::RequestError;
use drivers::fat::{DirEntry, FatError, FormatError, Volume};
use fat_common::*;
use std::sync::OnceLock;

type E = FatError<RequestError>;

fn bare() -> SparseDisk {
    static IMG: OnceLock<SparseDisk> = OnceLock::new();
    IMG.get_or_init(|| small_image(false)).clone()
}

fn partitioned() -> SparseDisk {
    static IMG: OnceLock<SparseDisk> = OnceLock::new();
    IMG.get_or_init(|| small_image(true)).clone()
}

fn mount(d: &mut SparseDisk) -> Result<Volume, E> {
    Volume::mount(d)
}

/// Mount must fail with `want`; its message must be non-empty.
fn expect_mount(name: &str, mut d: SparseDisk, want: E) {
    match mount(&mut d) {
        Ok(v) => panic!("{name}: mounted a bad volume: {v:?}"),
        Err(e) => {
            assert_eq!(e, want, "{name}");
            assert!(e.to_string().starts_with("FAT: "), "{name}: {e}");
        }
    }
}

fn field(lba: u64, field: &'static str, value: u64) -> impl Fn(&E) -> bool {
    move |e| matches!(e, FatError::Format(FormatError::BadField { lba: l, field: f, value: v, .. }) if *l == lba && *f == field && *v == value)
}

/// Patch the boot sector at byte `base`, mount, and check the error with `check`.
fn bad_bpb(
    name: &str,
    mut d: SparseDisk,
    base: u64,
    offset: u64,
    value: &[u8],
    check: impl Fn(&E) -> bool,
) {
    d.patch(base + offset, value);
    match mount(&mut d) {
        Ok(v) => panic!("{name}: mounted a bad volume: {v:?}"),
        Err(e) => {
            assert!(check(&e), "{name}: wrong error {e:?}");
            println!("{name}: {e}");
        }
    }
}

#[test]
fn good_images_mount() {
    for (mut d, start) in [(bare(), 0), (partitioned(), 2048)] {
        let vol = mount(&mut d).unwrap();
        assert_eq!(vol.start_lba(), start);
        let f = vol.open(&mut d, SMALL_MODEL).unwrap();
        let mut buf = vec![0; SMALL_MODEL_LEN];
        f.read_at(&mut d, 0, &mut buf).unwrap();
        assert!(buf == bytes(7, SMALL_MODEL_LEN));
        assert_eq!(vol.list_dir(&mut d, "/many").unwrap().len(), MANY);
    }
}

#[test]
fn bad_boot_sector_fields() {
    // Bare volume: the BPB is at LBA 0; partitioned: at LBA 2048.
    for (img, base) in [
        (bare as fn() -> SparseDisk, 0u64),
        (partitioned, 2048 * 512),
    ] {
        let lba = base / 512;
        let l = Layout::read(&img(), base);
        let sig = |e: &E| matches!(e, FatError::Format(FormatError::BadSignature { lba: x, value: 0x1234 }) if *x == lba);
        bad_bpb("signature", img(), base, 510, &[0x34, 0x12], sig);
        for bps in [0u16, 1, 256, 513, 8192, 0xFFFF] {
            bad_bpb(
                "bytes per sector",
                img(),
                base,
                0x0B,
                &bps.to_le_bytes(),
                field(lba, "BPB_BytsPerSec", bps.into()),
            );
        }
        for spc in [0u8, 3, 6, 255] {
            bad_bpb(
                "sectors per cluster",
                img(),
                base,
                0x0D,
                &[spc],
                field(lba, "BPB_SecPerClus", spc.into()),
            );
        }
        bad_bpb(
            "reserved sectors",
            img(),
            base,
            0x0E,
            &[0, 0],
            field(lba, "BPB_RsvdSecCnt", 0),
        );
        bad_bpb(
            "number of FATs",
            img(),
            base,
            0x10,
            &[0],
            field(lba, "BPB_NumFATs", 0),
        );
        bad_bpb(
            "FAT size 0",
            img(),
            base,
            0x24,
            &[0; 4],
            field(lba, "BPB_FATSz32", 0),
        );
        // Total sectors inside the reserved area, then inside the FATs, then short of one cluster.
        let tot = |n: u64| (n as u32).to_le_bytes();
        bad_bpb(
            "total in reserved",
            img(),
            base,
            0x20,
            &tot(l.reserved),
            field(lba, "BPB_TotSec32", l.reserved),
        );
        bad_bpb(
            "total in FATs",
            img(),
            base,
            0x20,
            &tot(l.reserved + l.fat_sectors),
            field(lba, "BPB_TotSec32", l.reserved + l.fat_sectors),
        );
        let d0 = l.data_sectors_start();
        bad_bpb(
            "total at FAT end",
            img(),
            base,
            0x20,
            &tot(d0),
            field(lba, "BPB_TotSec32", d0),
        );
        bad_bpb(
            "total 0",
            img(),
            base,
            0x20,
            &tot(0),
            field(lba, "BPB_TotSec32", 0),
        );
        // A non-zero BPB_TotSec16 wins over BPB_TotSec32 and is checked the same way.
        bad_bpb(
            "total16 in reserved",
            img(),
            base,
            0x13,
            &(l.reserved as u16).to_le_bytes(),
            field(lba, "BPB_TotSec16", l.reserved),
        );
        for root in [0u32, 1, l.clusters() + 2, 0x0FFF_FFFF, u32::MAX] {
            bad_bpb(
                "root cluster",
                img(),
                base,
                0x2C,
                &root.to_le_bytes(),
                field(lba, "BPB_RootClus", root.into()),
            );
        }
        bad_bpb(
            "FS version",
            img(),
            base,
            0x2A,
            &[0, 1],
            field(lba, "BPB_FSVer", 256),
        );
        // Mirroring off, active FAT 5 of 2.
        bad_bpb(
            "active FAT",
            img(),
            base,
            0x28,
            &[0x85, 0],
            field(lba, "BPB_ExtFlags", 0x85),
        );
        // One FAT sector cannot map the clusters.
        bad_bpb(
            "FAT too small",
            img(),
            base,
            0x24,
            &1u32.to_le_bytes(),
            |e| matches!(e, FatError::Format(FormatError::FatTooSmall { lba: x, fat_sectors: 1, bytes_per_sector: 512, .. }) if *x == lba),
        );
        // FAT12/16 markers.
        bad_bpb(
            "FATSz16",
            img(),
            base,
            0x16,
            &[8, 0],
            |e| matches!(e, FatError::Format(FormatError::NotFat32 { lba: x, fat_size16: 8, root_entries: 0 }) if *x == lba),
        );
        bad_bpb(
            "RootEntCnt",
            img(),
            base,
            0x11,
            &[0, 2],
            |e| matches!(e, FatError::Format(FormatError::NotFat32 { lba: x, fat_size16: 0, root_entries: 512 }) if *x == lba),
        );
    }
}

#[test]
fn active_fat_from_ext_flags() {
    // Mirroring off with FAT 1 active: the second copy is read (it is identical here).
    let mut d = bare();
    let l = Layout::read(&d, 0);
    let first = mount(&mut d).unwrap().fat_lba();
    d.patch(0x28, &[0x81, 0]);
    let vol = mount(&mut d).unwrap();
    assert_eq!(vol.fat_lba(), first + l.fat_sectors);
    // Breaking FAT 0 no longer matters; breaking FAT 1 does.
    let model = entry(&vol, &mut d, "/models", "SmolLM2-135M-Instruct.Q4_1.gguf");
    d.patch_u32(l.fat_entry(model.first_cluster), 0);
    assert!(vol.open(&mut d, SMALL_MODEL).is_ok());
    d.patch_u32(l.fat_entry(model.first_cluster) + l.fat_sectors * 512, 0);
    assert_eq!(
        vol.open(&mut d, SMALL_MODEL),
        Err(FatError::Format(FormatError::FreeClusterInChain {
            cluster: model.first_cluster
        }))
    );
}

#[test]
fn fat12_and_fat16_volumes_are_not_fat32() {
    let dir = TempDir::new("fat16");
    for (bits, size) in [("16", 16u64 << 20), ("12", 2 << 20)] {
        let img = dir.join(&format!("fat{bits}.img"));
        mkfs(&img, size, None, &["-F", bits]);
        let mut d = SparseDisk::from_file(&img);
        let e = mount(&mut d).unwrap_err();
        assert!(
            matches!(
                e,
                FatError::Format(FormatError::NotFat32 {
                    lba: 0,
                    fat_size16: 1..,
                    root_entries: 1..
                })
            ),
            "FAT{bits}: {e:?}"
        );
        assert!(e.to_string().contains("not FAT32"), "{e}");
        // Behind an MBR with a FAT16 partition type: the BPB is read and says the same, at LBA 2048.
        let img = dir.join(&format!("fat{bits}-mbr.img"));
        mkfs(&img, size + (1 << 20), Some(2048), &["-F", bits]);
        for kind in [0x0E, 0x06, 0x04, 0x01] {
            write_mbr_file(&img, 2048, kind);
            let mut d = SparseDisk::from_file(&img);
            let e = mount(&mut d).unwrap_err();
            assert!(
                matches!(e, FatError::Format(FormatError::NotFat32 { lba: 2048, .. })),
                "FAT{bits} type {kind:#x}: {e:?}"
            );
        }
    }
}

#[test]
fn bad_partition_tables() {
    let total = partitioned().len_blocks();
    let part = (total - 2048) as u32;
    let mbr = |f: &dyn Fn(&mut [u8])| {
        let mut d = partitioned();
        let mut s = d.get(0, 512);
        f(&mut s);
        d.patch(0, &s);
        d
    };
    expect_mount(
        "MBR signature",
        mbr(&|s| s[510] = 0),
        FatError::Format(FormatError::BadSignature {
            lba: 0,
            value: 0xAA00,
        }),
    );
    expect_mount(
        "Linux only",
        mbr(&|s| set_mbr_entry(s, 0, 2048, part, 0x83)),
        FatError::Format(FormatError::NoFatPartition {
            types: [0x83, 0, 0, 0],
        }),
    );
    expect_mount(
        "GPT",
        mbr(&|s| set_mbr_entry(s, 0, 1, part + 2047, 0xEE)),
        FatError::Format(FormatError::GptUnsupported),
    );
    expect_mount(
        "partition past the device",
        mbr(&|s| set_mbr_entry(s, 0, 2048, part + 1, 0x0C)),
        FatError::Format(FormatError::PartitionOutOfDevice {
            index: 0,
            start: 2048,
            blocks: u64::from(part) + 1,
            device_blocks: total,
        }),
    );
    expect_mount(
        "volume larger than its partition",
        mbr(&|s| set_mbr_entry(s, 0, 2048, part - 8, 0x0C)),
        FatError::Format(FormatError::VolumeOutOfPartition {
            lba: 2048,
            blocks: u64::from(part),
            partition_blocks: u64::from(part) - 8,
        }),
    );
    // A Linux partition first and the FAT32 one second: the FAT32 one is used.
    let mut d = mbr(&|s| {
        set_mbr_entry(s, 0, 100, 1000, 0x83);
        set_mbr_entry(s, 1, 2048, part, 0x0C);
    });
    assert_eq!(mount(&mut d).unwrap().partition().unwrap().index, 1);
    // The partition's boot sector pointing at a non-FAT block (here: zeros).
    let d = mbr(&|s| set_mbr_entry(s, 0, 1024, part, 0x0C));
    expect_mount(
        "partition start wrong",
        d,
        FatError::Format(FormatError::BadSignature {
            lba: 1024,
            value: 0,
        }),
    );
}

#[test]
fn truncated_devices() {
    let mut d = bare();
    let l = Layout::read(&d, 0);
    let blocks = l.total_sectors;
    assert!(blocks <= d.len_blocks());
    d.set_len_blocks(blocks - 1);
    expect_mount(
        "bare, one block short",
        d,
        FatError::Format(FormatError::VolumeOutOfDevice {
            lba: 0,
            blocks,
            device_blocks: blocks - 1,
        }),
    );
    let mut d = partitioned();
    let total = d.len_blocks();
    d.set_len_blocks(total / 2);
    expect_mount(
        "partitioned, half",
        d,
        FatError::Format(FormatError::PartitionOutOfDevice {
            index: 0,
            start: 2048,
            blocks: total - 2048,
            device_blocks: total / 2,
        }),
    );
    let mut d = bare();
    d.set_len_blocks(0);
    assert!(matches!(
        mount(&mut d),
        Err(FatError::Device {
            lba: 0,
            blocks: 1,
            ..
        })
    ));
    // A device that shrinks after mounting: the read error names the LBA.
    let mut d = bare();
    let vol = mount(&mut d).unwrap();
    let f = vol.open(&mut d, SMALL_MODEL).unwrap();
    let last = f.extents().last().unwrap();
    d.set_len_blocks(last.lba);
    let mut buf = vec![0u8; SMALL_MODEL_LEN];
    let e = f.read_at(&mut d, 0, &mut buf).unwrap_err();
    assert!(
        matches!(e, FatError::Device { lba, .. } if lba >= f.extents()[0].lba),
        "{e:?}"
    );
    assert!(e.to_string().contains("past the end of the device"), "{e}");
}

/// The entry `name` in directory `dir`.
fn entry(vol: &Volume, d: &mut SparseDisk, dir: &str, name: &str) -> DirEntry {
    vol.list_dir(d, dir)
        .unwrap()
        .into_iter()
        .find(|e| e.name == name)
        .unwrap()
}

/// The byte offset of the short directory entry of `e`.
fn entry_offset(d: &SparseDisk, e: &DirEntry) -> u64 {
    let at = d.find_short_entries(&short_entry_name(&e.short_name));
    assert_eq!(at.len(), 1, "{}", e.short_name);
    at[0]
}

#[test]
fn bad_cluster_chains() {
    let mut good = bare();
    let l = Layout::read(&good, 0);
    let vol = mount(&mut good).unwrap();
    let model = model_entry(&vol, &mut good);
    let chain = l.chain(&good, model.first_cluster);
    assert_eq!(
        chain.len() as u64,
        (SMALL_MODEL_LEN as u64).div_ceil(l.cluster_bytes())
    );
    let (first, mid, last) = (chain[0], chain[chain.len() / 2], *chain.last().unwrap());
    let limit = vol.cluster_count() + 2;
    let open = |d: &mut SparseDisk| vol.open(d, SMALL_MODEL);
    let with_entry = |cluster: u32, value: u32| {
        let mut d = good.clone();
        d.patch_u32(l.fat_entry(cluster), value);
        d
    };

    // The top four bits of an entry are not part of it.
    assert!(open(&mut with_entry(last, 0xFFFF_FFFF)).is_ok());
    assert!(open(&mut with_entry(mid, 0xF000_0000 | (mid + 1))).is_ok());

    let cases: Vec<(&str, u32, u32, E)> = vec![
        (
            "loop to the start",
            last,
            first,
            FatError::Format(FormatError::ChainLoop {
                first,
                limit: limit - 2,
            }),
        ),
        (
            "self loop",
            mid,
            mid,
            FatError::Format(FormatError::ChainLoop {
                first,
                limit: limit - 2,
            }),
        ),
        (
            "free",
            mid,
            0,
            FatError::Format(FormatError::FreeClusterInChain { cluster: mid }),
        ),
        (
            "reserved",
            mid,
            1,
            FatError::Format(FormatError::ReservedClusterInChain { cluster: mid }),
        ),
        (
            "bad cluster",
            mid,
            0x0FFF_FFF7,
            FatError::Format(FormatError::BadClusterInChain { cluster: mid }),
        ),
        (
            "past the volume",
            mid,
            limit,
            FatError::Format(FormatError::ClusterOutOfRange {
                cluster: mid,
                value: limit,
                limit,
            }),
        ),
        (
            "reserved range",
            mid,
            0x0FFF_FFF0,
            FatError::Format(FormatError::ClusterOutOfRange {
                cluster: mid,
                value: 0x0FFF_FFF0,
                limit,
            }),
        ),
        (
            "last entry free",
            last,
            0,
            FatError::Format(FormatError::FreeClusterInChain { cluster: last }),
        ),
        (
            "ends early",
            mid,
            0x0FFF_FFF8,
            FatError::Format(FormatError::ChainTooShort {
                first,
                clusters: chain.len() as u64 / 2 + 1,
                needed: chain.len() as u64,
                size: SMALL_MODEL_LEN as u64,
            }),
        ),
    ];
    for (name, cluster, value, want) in cases {
        let e = open(&mut with_entry(cluster, value)).unwrap_err();
        assert_eq!(e, want, "{name}");
        println!("{name}: {e}");
    }

    // A chain that continues past the file's size is tolerated if it ends.
    let free_cluster = l.clusters() + 1;
    let mut d = with_entry(last, free_cluster);
    d.patch_u32(l.fat_entry(free_cluster), 0x0FFF_FFFF);
    assert_eq!(
        open(&mut d).unwrap().extents(),
        vol.open(&mut good.clone(), SMALL_MODEL).unwrap().extents()
    );
    // ... but not if it then loops.
    d.patch_u32(l.fat_entry(free_cluster), first);
    assert_eq!(
        open(&mut d),
        Err(FatError::Format(FormatError::ChainLoop {
            first,
            limit: limit - 2
        }))
    );

    // Sizes and first clusters in the directory entry.
    let at = entry_offset(&good, &model);
    let with_dirent = |offset: u64, v: &[u8]| {
        let mut d = good.clone();
        d.patch(at + offset, v);
        d
    };
    let size = SMALL_MODEL_LEN as u64 + l.cluster_bytes();
    let e = open(&mut with_dirent(28, &(size as u32).to_le_bytes())).unwrap_err();
    assert_eq!(
        e,
        FatError::Format(FormatError::ChainTooShort {
            first,
            clusters: chain.len() as u64,
            needed: chain.len() as u64 + 1,
            size
        })
    );
    let e = open(&mut with_dirent(28, &u32::MAX.to_le_bytes())).unwrap_err();
    assert!(
        matches!(e, FatError::Format(FormatError::ChainTooShort { .. })),
        "{e:?}"
    );
    for (hi, lo, cluster) in [(0u16, 0u16, 0u32), (0, 1, 1), (0x7FFF, 0, 0x7FFF_0000)] {
        let mut d = with_dirent(20, &hi.to_le_bytes());
        d.patch(at + 26, &lo.to_le_bytes());
        let e = open(&mut d).unwrap_err();
        assert!(
            matches!(&e, FatError::Format(FormatError::BadFirstCluster { cluster: c, .. }) if *c == cluster),
            "{e:?}"
        );
    }
    // A file that shrinks to 0 bytes has no extents and reads nothing.
    let f = open(&mut with_dirent(28, &[0; 4])).unwrap();
    assert_eq!((f.size(), f.extents().len()), (0, 0));

    // A directory whose first cluster is 0.
    let models = entry(&vol, &mut good, "/", "models");
    let at = entry_offset(&good, &models);
    let mut d = good.clone();
    d.patch(at + 20, &[0, 0]);
    d.patch(at + 26, &[0, 0]);
    let e = vol.open(&mut d, SMALL_MODEL).unwrap_err();
    assert_eq!(
        e,
        FatError::Format(FormatError::BadFirstCluster {
            name: "models".into(),
            cluster: 0,
            limit
        })
    );
}

#[test]
fn directory_chains() {
    let mut good = bare();
    let l = Layout::read(&good, 0);
    let vol = mount(&mut good).unwrap();
    let many = entry(&vol, &mut good, "/", "many");
    let chain = l.chain(&good, many.first_cluster);
    assert!(chain.len() >= 3, "{chain:?}");
    let last = *chain.last().unwrap();

    // Fill the free slots of the last cluster with deleted entries: no end marker, the chain ends.
    let mut d = good.clone();
    let base = l.cluster(last);
    for i in 0..l.cluster_bytes() / 32 {
        if d.get(base + i * 32, 1)[0] == 0 {
            d.patch(base + i * 32, &[0xE5]);
        }
    }
    let list = vol.list_dir(&mut d, "/many").unwrap();
    assert_eq!(list.len(), MANY);
    for (i, e) in list.iter().enumerate() {
        assert_eq!(e.name, many_name(i));
        assert_eq!(e.size, 100 * i as u64);
    }
    assert!(matches!(
        vol.open(&mut d, "/many/missing"),
        Err(FatError::Format(FormatError::NotFound { .. }))
    ));

    // The same directory with its chain looping back: bounded, an error.
    d.patch_u32(l.fat_entry(last), many.first_cluster);
    let e = vol.open(&mut d, "/many/missing").unwrap_err();
    assert_eq!(
        e,
        FatError::Format(FormatError::ChainLoop {
            first: many.first_cluster,
            limit: vol.cluster_count()
        })
    );
    // Entries before the loop are still found.
    assert!(vol.open(&mut d, &format!("/many/{}", many_name(3))).is_ok());

    // A broken link inside the directory chain.
    let mut d = good.clone();
    d.patch_u32(l.fat_entry(chain[0]), 0);
    assert_eq!(
        vol.list_dir(&mut d, "/many"),
        Err(FatError::Format(FormatError::FreeClusterInChain {
            cluster: chain[0]
        }))
    );
}

#[test]
fn long_name_checksum_and_order() {
    let mut good = bare();
    let vol = mount(&mut good).unwrap();
    let model = model_entry(&vol, &mut good);
    let at = entry_offset(&good, &model);
    // Change the short name's last byte: the long-name checksum no longer matches, so the entry is
    // known by its short name only.
    let mut d = good.clone();
    d.patch(at + 10, b"X");
    let list = vol.list_dir(&mut d, "/models").unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, list[0].short_name);
    assert!(
        list[0].short_name.ends_with(".GGX"),
        "{}",
        list[0].short_name
    );
    assert!(matches!(
        vol.open(&mut d, SMALL_MODEL),
        Err(FatError::Format(FormatError::NotFound { .. }))
    ));
    assert!(vol
        .open(&mut d, &format!("/models/{}", list[0].short_name))
        .is_ok());
    // Swap the order bytes of two long-name parts: out of order, dropped.
    let mut d = good.clone();
    let (p1, p2) = (at - 32, at - 64);
    let (o1, o2) = (d.get(p1, 1)[0], d.get(p2, 1)[0]);
    d.patch(p1, &[o2]);
    d.patch(p2, &[o1]);
    let list = vol.list_dir(&mut d, "/models").unwrap();
    assert_eq!(list[0].name, list[0].short_name);
    // A deleted short entry hides its long name as well.
    let mut d = good.clone();
    d.patch(at, &[0xE5]);
    assert_eq!(vol.list_dir(&mut d, "/models").unwrap(), vec![]);
    // The 0x05 first byte stands for 0xE5.
    let txt = entry(&vol, &mut good, "/", "LMBOOT.TXT");
    let mut d = good.clone();
    d.patch(entry_offset(&good, &txt), &[0x05]);
    let list = vol.list_dir(&mut d, "/").unwrap();
    assert!(
        list.iter().any(|e| e.short_name == "\u{e5}MBOOT.TXT"),
        "{list:#?}"
    );
}

#[test]
fn no_panic_on_any_sector_zero() {
    // Sector 0 as each of a few structured patterns: every result is an error or a mount.
    let d0 = bare();
    for fill in [0x00u8, 0xFF, 0xE5, 0x55] {
        let mut d = d0.clone();
        let mut s = vec![fill; 512];
        s[510] = 0x55;
        s[511] = 0xAA;
        d.patch(0, &s);
        let e = mount(&mut d).unwrap_err();
        println!("fill {fill:#x}: {e}");
    }
}

/// The model's directory entry in the `bare` image.
fn model_entry(vol: &Volume, img: &mut SparseDisk) -> DirEntry {
    entry(vol, img, "/models", "SmolLM2-135M-Instruct.Q4_1.gguf")
}
