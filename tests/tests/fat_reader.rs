//! The FAT32 reader on good volumes: images made by mkfs.fat + mtools (bare, MBR-partitioned, 512- and
//! 4096-byte sectors, 512-byte and 4 KiB clusters) and by the `fatfs` crate; long and short names,
//! paths, fragmented files, reads at random offsets, the request counts, and the block-device fakes.

mod fat_common;

use drivers::block::{BlockDevice, CountingDevice, RamDisk, RequestError};
use drivers::fat::{self, FatError, FormatError, Partition, Volume};
use fat_common::*;
use std::io::{Cursor, Seek, SeekFrom, Write};

const MODEL: &str = "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
const TEXT: &[u8] = b"lmboot: model=/models/SmolLM2-135M-Instruct.Q4_1.gguf\ntemperature=0\n";

/// The files every image holds: (path, contents).
fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (MODEL, bytes(1, 300_001)),
        ("/LMBOOT.TXT", TEXT.to_vec()),
        ("/empty.dat", Vec::new()),
        ("/models/notes/Readme for the model card.md", bytes(2, 5000)),
    ]
}

/// Fill the volume at byte `offset` of `img` with [`files`] through mtools.
fn fill_with_mtools(dir: &TempDir, img: &std::path::Path, offset: u64) {
    mmd(img, offset, "/models");
    mmd(img, offset, "/models/notes");
    for (path, data) in files() {
        put(dir, img, offset, path, &data);
    }
}

/// Check every file of [`files`] and the listings of `/` and `/models`.
fn check_volume<D: BlockDevice>(vol: &Volume, dev: &mut D)
where
    D::Error: std::fmt::Debug,
{
    for (i, (path, data)) in files().into_iter().enumerate() {
        check_file(vol, dev, path, &data, 100 + i as u64);
    }
    let root = vol.list_dir(dev, "/").unwrap();
    let find = |list: &[fat::DirEntry], name: &str| {
        list.iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("{name} not in {list:#?}"))
            .clone()
    };
    let models = find(&root, "models");
    assert!(models.is_dir);
    let txt = find(&root, "LMBOOT.TXT");
    assert!(!txt.is_dir);
    assert_eq!(txt.size, TEXT.len() as u64);
    assert_eq!(txt.short_name, "LMBOOT.TXT");
    let empty = find(&root, "empty.dat");
    assert_eq!((empty.size, empty.is_dir), (0, false));
    assert!(root.iter().all(|e| e.name != "." && e.name != ".."));

    let sub = vol.list_dir(dev, "models").unwrap();
    let m = find(&sub, "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(m.size, 300_001);
    assert!(m.short_name.ends_with(".GGU"), "{}", m.short_name);
    assert!(find(&sub, "notes").is_dir);
    assert_eq!(sub.len(), 2, "{sub:#?}");
}

#[test]
fn mkfs_bare_volume_4k_clusters() {
    let dir = TempDir::new("bare");
    let img = dir.join("bare.img");
    mkfs(&img, 300 << 20, None, &["-F", "32", "-s", "8"]);
    fill_with_mtools(&dir, &img, 0);
    let mut dev = FileDisk::open(&img);
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(vol.partition(), None);
    assert_eq!(vol.start_lba(), 0);
    assert_eq!(vol.bytes_per_sector(), 512);
    assert_eq!(vol.cluster_bytes(), 4096);
    // mkfs.fat rounds the size down to whole tracks.
    assert!(
        vol.total_blocks() <= 300 << 11 && vol.total_blocks() > (300 << 11) - 64,
        "{}",
        vol.total_blocks()
    );
    assert!(vol.cluster_count() >= 65525);
    check_volume(&vol, &mut dev);
    // Contiguous on a fresh volume: one extent.
    assert_eq!(vol.open(&mut dev, MODEL).unwrap().extents().len(), 1);
}

#[test]
fn mkfs_partitioned_volume_512_byte_clusters() {
    let dir = TempDir::new("mbr");
    let img = dir.join("card.img");
    let offset = mkfs_mbr(&img, 40 << 20);
    fill_with_mtools(&dir, &img, offset);
    let mut dev = RamDisk::new(std::fs::read(&img).unwrap());
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(
        vol.partition(),
        Some(Partition {
            index: 0,
            kind: 0x0C,
            start: 2048,
            blocks: (40 << 11) - 2048
        })
    );
    assert_eq!(vol.start_lba(), 2048);
    assert_eq!(vol.cluster_bytes(), 512);
    assert!(vol.fat_lba() > 2048 && vol.data_lba() > vol.fat_lba());
    check_volume(&vol, &mut dev);

    // The free functions mount on their own.
    assert_eq!(fat::open(&mut dev, MODEL).unwrap().size(), 300_001);
    assert_eq!(fat::list_dir(&mut dev, "/models").unwrap().len(), 2);

    // Partition type 0x0B (FAT32 CHS) and the partition in the second slot are found as well.
    let mut data = dev.into_inner();
    set_mbr_entry(&mut data, 0, 0, 0, 0);
    set_mbr_entry(&mut data, 1, 2048, (40 << 11) - 2048, 0x0B);
    let mut dev = RamDisk::new(&data[..]);
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(vol.partition().map(|p| (p.index, p.kind)), Some((1, 0x0B)));
    check_file(&vol, &mut dev, MODEL, &files()[0].1, 7);
}

#[test]
fn mkfs_4096_byte_sectors() {
    let dir = TempDir::new("s4k");
    let img = dir.join("s4k.img");
    mkfs(
        &img,
        300 << 20,
        None,
        &["-F", "32", "-S", "4096", "-s", "1"],
    );
    fill_with_mtools(&dir, &img, 0);
    let mut dev = FileDisk::open(&img);
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(vol.bytes_per_sector(), 4096);
    assert_eq!(vol.cluster_bytes(), 4096);
    check_volume(&vol, &mut dev);
}

#[test]
fn small_forced_fat32_volume_mounts() {
    // Fewer clusters than the spec's FAT32 minimum: mkfs.fat -F 32 makes it anyway, and the BPB
    // says FAT32, so it mounts.
    let dir = TempDir::new("small");
    let img = dir.join("small.img");
    mkfs(&img, 4 << 20, None, &["-F", "32", "-s", "1"]);
    let mut dev = RamDisk::new(std::fs::read(&img).unwrap());
    let vol = Volume::mount(&mut dev).unwrap();
    assert!(vol.cluster_count() < 65525);
    assert_eq!(vol.list_dir(&mut dev, "/").unwrap(), vec![]);
    assert!(
        matches!(vol.open(&mut dev, "x"), Err(FatError::Format(FormatError::NotFound { path })) if path == "/x")
    );
}

fn create(dir: &fatfs::Dir<'_, Cursor<&mut [u8]>>, path: &str, data: &[u8]) {
    let mut f = dir.create_file(path).unwrap();
    f.truncate().unwrap();
    f.write_all(data).unwrap();
    f.flush().unwrap();
}

const UNICODE: &str = "/a/b/c/Ünïcödé naïve — a rather long file name over 39 characters.txt";

#[test]
fn fatfs_crate_volume() {
    let img = fatfs_image(36 << 20, |root| {
        root.create_dir("models").unwrap();
        root.create_dir("models/notes").unwrap();
        for (path, data) in files() {
            create(root, path.trim_start_matches('/'), &data);
        }
        root.create_dir("a").unwrap();
        root.create_dir("a/b").unwrap();
        root.create_dir("a/b/c").unwrap();
        create(root, UNICODE.trim_start_matches('/'), &bytes(3, 1234));
    });
    let mut dev = RamDisk::new(&img[..]);
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(vol.partition(), None);
    check_volume(&vol, &mut dev);
    check_file(&vol, &mut dev, UNICODE, &bytes(3, 1234), 9);
    // Long UTF-16 names, matched case-insensitively beyond ASCII.
    let list = vol.list_dir(&mut dev, "/A/B/C").unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, UNICODE.rsplit('/').next().unwrap());
    let upper = UNICODE.to_uppercase();
    assert_eq!(vol.open(&mut dev, &upper).unwrap().size(), 1234);
    // By its short name too.
    let short = format!("a/b/c/{}", list[0].short_name);
    assert_eq!(vol.open(&mut dev, &short).unwrap().size(), 1234);
}

#[test]
fn fragmented_file_fatfs() {
    // Three files grown in turns by small appends: their 512-byte clusters interleave.
    let parts: Vec<Vec<u8>> = (0..3).map(|i| bytes(10 + i, 40_000)).collect();
    let img = fatfs_image(36 << 20, |root| {
        let mut fs: Vec<_> = ["A.BIN", "B.BIN", "C.BIN"]
            .iter()
            .map(|n| root.create_file(n).unwrap())
            .collect();
        for chunk in 0..40_000usize.div_ceil(700) {
            for (f, data) in fs.iter_mut().zip(&parts) {
                let lo = chunk * 700;
                let hi = (lo + 700).min(data.len());
                f.seek(SeekFrom::End(0)).unwrap();
                f.write_all(&data[lo..hi]).unwrap();
            }
        }
        for f in &mut fs {
            f.flush().unwrap();
        }
    });
    let mut dev = RamDisk::new(&img[..]);
    let vol = Volume::mount(&mut dev).unwrap();
    for (name, data) in ["A.BIN", "B.BIN", "C.BIN"].iter().zip(&parts) {
        let f = check_file(&vol, &mut dev, name, data, 20);
        assert!(
            f.extents().len() > 10,
            "{name}: {} extents",
            f.extents().len()
        );
        // map_block agrees with the extents.
        let mut block = 0;
        for e in f.extents() {
            assert_eq!(f.map_block(block), Some(*e));
            assert_eq!(
                f.map_block(block + e.blocks - 1).unwrap().lba,
                e.lba + e.blocks - 1
            );
            block += e.blocks;
        }
        assert_eq!(f.map_block(block), None);
    }
}

#[test]
fn fragmented_file_mtools() {
    // f1 f2 f3, delete f2, then copy a larger file: it fills f2's hole and continues after f3.
    let dir = TempDir::new("frag");
    let img = dir.join("frag.img");
    mkfs(&img, 40 << 20, None, &["-F", "32", "-s", "1"]);
    for n in 1..=3 {
        put(&dir, &img, 0, &format!("/f{n}.bin"), &bytes(30 + n, 10_000));
    }
    mdel(&img, 0, "/f2.bin");
    // Forget the FSInfo next-free hint, so the allocator searches from cluster 2 and finds the hole.
    let mut data = std::fs::read(&img).unwrap();
    let fsinfo = u16::from_le_bytes([data[0x30], data[0x31]]) as usize * 512;
    data[fsinfo + 492..fsinfo + 496].copy_from_slice(&[0xFF; 4]);
    std::fs::write(&img, &data).unwrap();
    let big = bytes(40, 50_000);
    put(&dir, &img, 0, "/big.bin", &big);

    let mut dev = RamDisk::new(std::fs::read(&img).unwrap());
    let vol = Volume::mount(&mut dev).unwrap();
    let f = check_file(&vol, &mut dev, "big.bin", &big, 41);
    assert_eq!(f.extents().len(), 2, "{:?}", f.extents());
    check_file(&vol, &mut dev, "F1.BIN", &bytes(31, 10_000), 42);
    check_file(&vol, &mut dev, "f3.bin", &bytes(33, 10_000), 43);
    assert!(matches!(
        vol.open(&mut dev, "/f2.bin"),
        Err(FatError::Format(FormatError::NotFound { .. }))
    ));
}

#[test]
fn paths_and_names() {
    let img = fatfs_image(36 << 20, |root| {
        root.create_dir("models").unwrap();
        create(
            root,
            "models/SmolLM2-135M-Instruct.Q4_1.gguf",
            &bytes(1, 3000),
        );
        create(root, "LMBOOT.TXT", TEXT);
    });
    let mut dev = RamDisk::new(&img[..]);
    let vol = Volume::mount(&mut dev).unwrap();
    for p in [
        MODEL,
        "models/SmolLM2-135M-Instruct.Q4_1.gguf",
        "/MODELS/smollm2-135m-instruct.q4_1.GGUF",
        "//models//./SmolLM2-135M-Instruct.Q4_1.gguf",
        "/models/../models/SmolLM2-135M-Instruct.Q4_1.gguf",
        "/../models/SmolLM2-135M-Instruct.Q4_1.gguf",
    ] {
        assert_eq!(
            vol.open(&mut dev, p)
                .unwrap_or_else(|e| panic!("{p}: {e}"))
                .size(),
            3000,
            "{p}"
        );
    }
    for p in [
        "lmboot.txt",
        "/LMBOOT.TXT",
        "LmBoot.Txt",
        "models/../lmboot.txt",
    ] {
        assert_eq!(
            vol.open(&mut dev, p).unwrap().size(),
            TEXT.len() as u64,
            "{p}"
        );
    }
    let e = vol.open(&mut dev, "/models/missing.gguf").unwrap_err();
    assert_eq!(
        e,
        FatError::Format(FormatError::NotFound {
            path: "/models/missing.gguf".into()
        })
    );
    assert_eq!(e.to_string(), "FAT: '/models/missing.gguf' not found");
    assert!(
        matches!(vol.open(&mut dev, "/nodir/x"), Err(FatError::Format(FormatError::NotFound { path })) if path == "/nodir")
    );
    assert!(matches!(vol.open(&mut dev, "/LMBOOT.TXT/x"),
        Err(FatError::Format(FormatError::NotADirectory { path })) if path == "/LMBOOT.TXT"));
    for dir in ["/models", "/", ""] {
        assert!(
            matches!(
                vol.open(&mut dev, dir),
                Err(FatError::Format(FormatError::IsADirectory { .. }))
            ),
            "{dir:?}"
        );
    }
    assert!(matches!(
        vol.list_dir(&mut dev, "/LMBOOT.TXT"),
        Err(FatError::Format(FormatError::NotADirectory { .. }))
    ));
    assert_eq!(vol.list_dir(&mut dev, "").unwrap().len(), 2);
    assert_eq!(vol.list_dir(&mut dev, "/models/..").unwrap().len(), 2);
}

#[test]
fn read_at_bounds() {
    let img = fatfs_image(36 << 20, |root| create(root, "F.BIN", &bytes(5, 1000)));
    let mut dev = RamDisk::new(&img[..]);
    let f = fat::open(&mut dev, "F.BIN").unwrap();
    let mut buf = [0u8; 10];
    assert_eq!(
        f.read_at(&mut dev, 995, &mut buf),
        Err(FatError::Format(FormatError::ReadPastEnd {
            offset: 995,
            len: 10,
            size: 1000
        }))
    );
    assert!(f.read_at(&mut dev, u64::MAX, &mut buf).is_err());
    assert!(f.read_at(&mut dev, 1001, &mut []).is_err());
    f.read_at(&mut dev, 1000, &mut []).unwrap();
    f.read_at(&mut dev, 990, &mut buf).unwrap();
    assert_eq!(buf[..], bytes(5, 1000)[990..]);
    assert_eq!(f.extents().iter().map(|e| e.blocks).sum::<u64>(), 2);
}

#[test]
fn requests_are_batched() {
    // 4 MB in 512-byte clusters: 8192 clusters, a chain of 64 FAT blocks.
    let data = bytes(50, 4 << 20);
    let img = fatfs_image(40 << 20, |root| {
        root.create_dir("models").unwrap();
        create(root, "models/model.gguf", &data);
    });
    let mut dev = CountingDevice::new(RamDisk::new(&img[..]));
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(dev.requests(), 1, "mount reads the boot sector only");
    dev.reset();
    let f = vol.open(&mut dev, "/models/model.gguf").unwrap();
    assert_eq!(f.extents().len(), 1);
    // Directory blocks (a few) plus 64 FAT blocks in 8-block windows (about 8 requests).
    assert!(
        dev.requests() <= 16,
        "open took {} requests",
        dev.requests()
    );
    dev.reset();
    let mut buf = vec![0u8; data.len()];
    f.read_at(&mut dev, 0, &mut buf).unwrap();
    assert!(buf == data);
    assert_eq!(
        (dev.requests(), dev.blocks(), dev.largest_request()),
        (1, 8192, 8192)
    );
    // Unaligned: bounce blocks at both edges and one multi-block request between.
    dev.reset();
    f.read_at(&mut dev, 100, &mut buf[..10_000]).unwrap();
    assert!(buf[..10_000] == data[100..10_100]);
    assert_eq!(dev.requests(), 3);
    assert_eq!(dev.bytes(), 512 * 20);
}

#[test]
fn ram_disk_and_counting_device() {
    let data: Vec<u8> = (0..2048u32).map(|i| i as u8).collect();
    let mut d = RamDisk::new(data.clone());
    assert_eq!(d.num_blocks(), 4);
    let mut buf = [0u8; 1024];
    d.read_blocks(2, &mut buf).unwrap();
    assert_eq!(buf[..], data[1024..]);
    let e = d.read_blocks(3, &mut buf).unwrap_err();
    assert_eq!(
        e,
        RequestError::OutOfRange {
            lba: 3,
            blocks: 2,
            num_blocks: 4
        }
    );
    assert!(e.to_string().contains("LBA 3"), "{e}");
    assert!(d.read_blocks(u64::MAX, &mut buf[..512]).is_err());
    assert_eq!(
        d.read_blocks(0, &mut buf[..100]),
        Err(RequestError::PartialBlock { lba: 0, len: 100 })
    );
    // A trailing partial block is not addressable.
    let mut d = RamDisk::new(&data[..1000]);
    assert_eq!(d.num_blocks(), 1);
    assert!(d.read_blocks(1, &mut buf[..512]).is_err());

    let mut c = CountingDevice::new(RamDisk::new(&data[..]));
    c.read_blocks(0, &mut buf).unwrap();
    c.read_blocks(1, &mut buf[..512]).unwrap();
    assert!(c.read_blocks(4, &mut buf[..512]).is_err());
    assert_eq!(
        (c.requests(), c.blocks(), c.largest_request(), c.bytes()),
        (3, 4, 2, 2048)
    );
    c.reset();
    assert_eq!((c.requests(), c.blocks()), (0, 0));

    // A device error surfaces through the FAT reader with its LBA.
    let mut empty = RamDisk::new(Vec::new());
    let e = Volume::mount(&mut empty).unwrap_err();
    assert!(
        matches!(
            e,
            FatError::Device {
                lba: 0,
                blocks: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("LBA 0"), "{e}");
}

#[test]
fn xtask_card_image() {
    // The card image the kernel boots from (`xtask image`: MBR + FAT32 by fatfs), read back.
    use xtask::image::{make_image, Content, PART_START_LBA};
    let dir = TempDir::new("xtask");
    let img = dir.join("card.img");
    let fs = files();
    let contents: Vec<(&str, Content<'_>)> =
        fs.iter().map(|(p, d)| (*p, Content::Bytes(d))).collect();
    make_image(&img, &contents, 0).unwrap();
    let mut dev = FileDisk::open(&img);
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(
        vol.partition().map(|p| (p.kind, p.start)),
        Some((0x0C, PART_START_LBA))
    );
    for (i, (path, data)) in fs.iter().enumerate() {
        check_file(&vol, &mut dev, path, data, 200 + i as u64);
    }
}
