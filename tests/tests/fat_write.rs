//! In-place writes to a preallocated file ([`drivers::fat::File::write_at`]) on FAT32 volumes made
//! by the `fatfs` crate: random ranges (aligned, unaligned, across fragments, the partial last
//! block) read back with our reader and with `fatfs`; every byte of the image outside the file's
//! data is unchanged (no FAT, directory or FSInfo write, no other file touched); writes past the end
//! are typed errors that write nothing; device failures name the LBA; the request counts.

mod fat_common;

use drivers::block::{CountingDevice, Fault, FaultyDevice, RamDisk};
use drivers::fat::{FatError, File, FormatError, Volume};
use fat_common::{bytes, fatfs_image, Rng};
use std::io::{Cursor, Read, Seek, SeekFrom, Write};

/// The contents of `path` as `fatfs` reads them.
fn fatfs_read(img: &[u8], path: &str) -> Vec<u8> {
    let mut copy = img.to_vec();
    let fs = fatfs::FileSystem::new(Cursor::new(&mut copy[..]), fatfs::FsOptions::new()).unwrap();
    let mut out = Vec::new();
    fs.root_dir()
        .open_file(path)
        .unwrap()
        .read_to_end(&mut out)
        .unwrap();
    out
}

const KV_LEN: usize = 70_000 + 123;
const OTHER_LEN: usize = 50_000;

/// An image with `KV.BIN` (zeros, preallocated) and `OTHER.BIN` grown in turns so their clusters
/// interleave: the preallocated file has many extents.
fn image() -> Vec<u8> {
    fatfs_image(36 << 20, |root| {
        let mut kv = root.create_file("KV.BIN").unwrap();
        let mut other = root.create_file("OTHER.BIN").unwrap();
        let other_data = bytes(1, OTHER_LEN);
        let zeros = vec![0u8; KV_LEN];
        let mut at = (0usize, 0usize);
        while at.0 < KV_LEN || at.1 < OTHER_LEN {
            let n = (KV_LEN - at.0).min(1500);
            kv.seek(SeekFrom::End(0)).unwrap();
            kv.write_all(&zeros[..n]).unwrap();
            at.0 += n;
            let m = (OTHER_LEN - at.1).min(1100);
            other.seek(SeekFrom::End(0)).unwrap();
            other.write_all(&other_data[at.1..at.1 + m]).unwrap();
            at.1 += m;
        }
        kv.flush().unwrap();
        other.flush().unwrap();
    })
}

/// Every byte outside the file's data (`size` bytes through its extents) is the same in both images.
fn same_outside(file: &File, before: &[u8], after: &[u8]) {
    assert_eq!(before.len(), after.len());
    let mut mask = vec![false; before.len()];
    let mut left = file.size() as usize;
    for e in file.extents() {
        let start = e.lba as usize * 512;
        let n = (e.blocks as usize * 512).min(left);
        mask[start..start + n].iter_mut().for_each(|m| *m = true);
        left -= n;
    }
    assert_eq!(left, 0);
    let changed: Vec<usize> = (0..before.len())
        .filter(|&i| !mask[i] && before[i] != after[i])
        .take(10)
        .collect();
    assert!(
        changed.is_empty(),
        "bytes outside the file changed at {changed:?}"
    );
}

#[test]
fn writes_land_in_the_file_and_nowhere_else() {
    let img = image();
    let mut dev = RamDisk::new(img.clone());
    let vol = Volume::mount(&mut dev).unwrap();
    let file = vol.open(&mut dev, "/kv.bin").unwrap();
    assert_eq!(file.size(), KV_LEN as u64);
    assert!(
        file.extents().len() > 10,
        "not fragmented: {:?}",
        file.extents()
    );

    let size = KV_LEN as u64;
    let mut expected = vec![0u8; KV_LEN];
    let mut rng = Rng::new(7);
    let mut ranges = vec![
        (0u64, 0u64),
        (size, 0),
        (0, 1),
        (size - 1, 1),
        (size - 123, 123),
        (size - 700, 700),
        (0, size),
        (511, 2),
        (512, 512),
        (1000, 30_000),
    ];
    for _ in 0..150 {
        let off = rng.below(size);
        let max = (size - off).min(if rng.below(4) == 0 { size } else { 3000 });
        ranges.push((off, rng.below(max + 1)));
        let aoff = off / 512 * 512;
        ranges.push((aoff, rng.below((size - aoff) / 512 + 1) * 512));
    }
    for (i, (off, len)) in ranges.into_iter().enumerate() {
        let data = bytes(1000 + i as u64, len as usize);
        file.write_at(&mut dev, off, &data)
            .unwrap_or_else(|e| panic!("write at {off}+{len}: {e}"));
        expected[off as usize..(off + len) as usize].copy_from_slice(&data);
        let mut back = vec![0u8; len as usize];
        file.read_at(&mut dev, off, &mut back).unwrap();
        assert!(back == data, "read back at {off}+{len}");
    }
    let mut whole = vec![0u8; KV_LEN];
    file.read_at(&mut dev, 0, &mut whole).unwrap();
    assert!(whole == expected, "our reader");
    let after = dev.into_inner();
    assert!(fatfs_read(&after, "KV.BIN") == expected, "fatfs reader");
    assert!(fatfs_read(&after, "OTHER.BIN") == bytes(1, OTHER_LEN));
    same_outside(&file, &img, &after);
    // The bytes of the last block past the file's end kept their value too.
    let last = file.extents().last().unwrap();
    let end_block = (last.lba + last.blocks) as usize * 512;
    if !file.size().is_multiple_of(512) {
        let tail = end_block - (512 - file.size() as usize % 512);
        assert_eq!(after[tail..end_block], img[tail..end_block]);
    }
}

#[test]
fn writes_past_the_end_are_errors_and_write_nothing() {
    let img = image();
    let mut dev = RamDisk::new(img.clone());
    let file = drivers::fat::open(&mut dev, "KV.BIN").unwrap();
    let size = KV_LEN as u64;
    for (off, len) in [
        (size, 1u64),
        (size - 10, 11),
        (0, size + 1),
        (size + 512, 0),
    ] {
        let e = file
            .write_at(&mut dev, off, &vec![1u8; len as usize])
            .unwrap_err();
        assert_eq!(
            e,
            FatError::Format(FormatError::WritePastEnd {
                offset: off,
                len,
                size
            })
        );
        let s = e.to_string();
        assert!(
            s.contains(&format!("offset {off}")) && s.contains(&format!("({size} bytes)")),
            "{s}"
        );
    }
    let e = file.write_at(&mut dev, u64::MAX, &[1]).unwrap_err();
    assert!(matches!(
        e,
        FatError::Format(FormatError::WritePastEnd {
            offset: u64::MAX,
            len: 1,
            ..
        })
    ));
    assert!(dev.into_inner() == img, "a refused write changed the image");

    // An empty file takes only empty writes.
    let img = fatfs_image(36 << 20, |root| {
        root.create_file("EMPTY").unwrap();
    });
    let mut dev = RamDisk::new(img);
    let empty = drivers::fat::open(&mut dev, "EMPTY").unwrap();
    empty.write_at(&mut dev, 0, &[]).unwrap();
    assert!(matches!(
        empty.write_at(&mut dev, 0, &[0]),
        Err(FatError::Format(FormatError::WritePastEnd { size: 0, .. }))
    ));
}

#[test]
fn one_request_per_extent_piece_and_reads_only_for_partial_edges() {
    let img = image();
    let mut dev = CountingDevice::new(RamDisk::new(img));
    let file = drivers::fat::open(&mut dev, "KV.BIN").unwrap();
    // Whole blocks from the start through the first three extents: one write each, no read.
    let e = file.extents();
    let blocks: u64 = e[..3].iter().map(|x| x.blocks).sum();
    dev.reset();
    file.write_at(&mut dev, 0, &vec![5u8; blocks as usize * 512])
        .unwrap();
    assert_eq!((dev.requests(), dev.write_requests()), (0, 3));
    assert_eq!(dev.blocks_written(), blocks);
    // Unaligned at both edges inside one extent of at least three blocks: a read and a write for
    // each edge block, one write for the whole blocks between.
    let (i, big) = e
        .iter()
        .enumerate()
        .find(|(_, x)| x.blocks >= 3)
        .expect("an extent of 3 blocks");
    let start: u64 = e[..i].iter().map(|x| x.blocks).sum::<u64>() * 512;
    dev.reset();
    file.write_at(&mut dev, start + 100, &vec![6u8; 512])
        .unwrap();
    assert_eq!((dev.requests(), dev.write_requests()), (2, 2), "{big:?}");
    dev.reset();
    file.write_at(&mut dev, start + 100, &vec![6u8; 3 * 512 - 200])
        .unwrap();
    assert_eq!((dev.requests(), dev.write_requests()), (2, 3));
    assert_eq!(dev.blocks_written(), 3);
    assert!(dev.flushes() == 0);
}

#[test]
fn device_write_failures_name_the_block() {
    let img = image();
    let mut dev = FaultyDevice::new(RamDisk::new(img.clone()), &[Fault::ReadOnly]);
    let file = drivers::fat::open(&mut dev, "KV.BIN").unwrap();
    let lba = file.extents()[0].lba;
    let e = file.write_at(&mut dev, 0, &[1u8; 1024]).unwrap_err();
    assert!(
        matches!(e, FatError::DeviceWrite { lba: l, blocks: 2, .. } if l == lba),
        "{e:?}"
    );
    let s = e.to_string();
    assert!(
        s.contains(&format!("writing 2 block(s) at LBA {lba}")) && s.contains("write-protected"),
        "{s}"
    );
    // A power cut in the middle of a write: the blocks before it are written, the rest not.
    let mut dev = FaultyDevice::new(
        RamDisk::new(img.clone()),
        &[Fault::PowerCut { after_blocks: 2 }],
    );
    let data = vec![9u8; file.extents()[0].blocks.min(4) as usize * 512];
    assert!(data.len() > 2 * 512);
    assert!(file.write_at(&mut dev, 0, &data).is_err());
    let after = dev.into_inner().into_inner();
    let s = lba as usize * 512;
    assert!(after[s..s + 1024].iter().all(|&b| b == 9));
    assert_eq!(after[s + 1024..], img[s + 1024..]);
}
