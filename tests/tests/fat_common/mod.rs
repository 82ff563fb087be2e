//! Helpers for the FAT32 reader tests: images made with mkfs.fat + mtools, block devices over a file
//! or a sparse in-memory copy, an MBR writer, deterministic bytes, and read checks.
#![allow(dead_code)]

use drivers::block::{check_request, BlockDevice, RequestError, BLOCK_SIZE};
use drivers::fat::{File, Volume};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// A tool from dosfstools or mtools; fails (never skips) when missing.
pub fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from));
    for d in dirs {
        let p = d.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` not found (dosfstools / mtools are needed to build FAT test images): run `cargo xtask setup`");
}

/// Run a command, panicking with its output when it fails.
pub fn run(cmd: &mut Command) {
    // Fixed timestamps (mtools honours SOURCE_DATE_EPOCH), so images are the same on every run.
    let out = cmd
        .env("MTOOLS_SKIP_CHECK", "1")
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("lmboot-fat-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// splitmix64: deterministic pseudo-random numbers.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// `len` deterministic pseudo-random bytes.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Create a sparse image of `size` bytes and format it with mkfs.fat (`offset`: sectors before the
/// volume, as `--offset`; `extra`: more arguments, e.g. `-F 32 -s 8`). `--invariant` fixes the volume
/// ID and times, so images are deterministic.
pub fn mkfs(img: &Path, size: u64, offset: Option<u64>, extra: &[&str]) {
    let f = std::fs::File::create(img).unwrap();
    f.set_len(size).unwrap();
    drop(f);
    let mut cmd = Command::new(tool("mkfs.fat"));
    cmd.arg("--invariant").args(extra);
    if let Some(o) = offset {
        cmd.arg(format!("--offset={o}"));
    }
    run(cmd.arg(img));
}

/// [`mkfs`] a FAT32 volume of 512-byte clusters into a sparse image of `size` bytes, behind an MBR
/// partition from block 2048 (type 0x0C); returns the volume's byte offset.
pub fn mkfs_mbr(img: &Path, size: u64) -> u64 {
    mkfs(img, size, Some(2048), &["-F", "32", "-s", "1"]);
    write_mbr_file(img, 2048, 0x0C);
    2048 * 512
}

/// The `-i` argument of mtools for a volume at byte `offset` of `img`.
fn mtools_image(img: &Path, offset: u64) -> String {
    if offset == 0 {
        img.display().to_string()
    } else {
        format!("{}@@{offset}", img.display())
    }
}

/// `mmd` a directory into the volume at byte `offset` of `img`.
pub fn mmd(img: &Path, offset: u64, dir: &str) {
    run(Command::new(tool("mmd"))
        .arg("-i")
        .arg(mtools_image(img, offset))
        .arg(format!("::{dir}")));
}

/// `mcopy` the host file `src` to `dst` (an absolute path in the volume).
pub fn mcopy(img: &Path, offset: u64, src: &Path, dst: &str) {
    run(Command::new(tool("mcopy"))
        .arg("-i")
        .arg(mtools_image(img, offset))
        .arg(src)
        .arg(format!("::{dst}")));
}

/// `mdel` a file.
pub fn mdel(img: &Path, offset: u64, path: &str) {
    run(Command::new(tool("mdel"))
        .arg("-i")
        .arg(mtools_image(img, offset))
        .arg(format!("::{path}")));
}

/// Write `data` to a host file in `dir` and mcopy it to `dst`.
pub fn put(dir: &TempDir, img: &Path, offset: u64, dst: &str, data: &[u8]) {
    let host = dir.join("upload.tmp");
    std::fs::write(&host, data).unwrap();
    mcopy(img, offset, &host, dst);
}

/// Write an MBR into the first block of `img`: one partition of type `kind` at `start` for `blocks`.
pub fn write_mbr(img: &mut [u8], start: u32, blocks: u32, kind: u8) {
    img[..512].fill(0);
    set_mbr_entry(img, 0, start, blocks, kind);
    img[510] = 0x55;
    img[511] = 0xAA;
}

/// Set MBR entry `i` (0..4).
pub fn set_mbr_entry(img: &mut [u8], i: usize, start: u32, blocks: u32, kind: u8) {
    let e = &mut img[0x1BE + 16 * i..0x1BE + 16 * (i + 1)];
    e.fill(0);
    e[0] = 0x00;
    e[1..4].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
    e[4] = kind;
    e[5..8].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
    e[8..12].copy_from_slice(&start.to_le_bytes());
    e[12..16].copy_from_slice(&blocks.to_le_bytes());
}

/// Write the MBR into the image file at `img` (partition of the whole image after `start`).
pub fn write_mbr_file(img: &Path, start: u32, kind: u8) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let blocks = (f.metadata().unwrap().len() / 512) as u32 - start;
    let mut s = [0u8; 512];
    f.read_exact(&mut s).unwrap();
    write_mbr(&mut s, start, blocks, kind);
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(&s).unwrap();
}

/// A block device over an image file, read with `pread`.
pub struct FileDisk {
    file: std::fs::File,
    blocks: u64,
}

impl FileDisk {
    pub fn open(path: &Path) -> FileDisk {
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let blocks = file.metadata().unwrap().len() / 512;
        FileDisk { file, blocks }
    }
}

impl BlockDevice for FileDisk {
    type Error = std::io::Error;

    fn num_blocks(&self) -> u64 {
        self.blocks
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), std::io::Error> {
        use std::os::unix::fs::FileExt;
        check_request(lba, buf.len(), self.blocks).map_err(std::io::Error::other)?;
        self.file.read_exact_at(buf, lba * 512)
    }
}

/// An image in memory that keeps only its non-zero blocks, so a 40 MB volume costs a few hundred
/// KB and can be cloned and patched per test case.
#[derive(Clone)]
pub struct SparseDisk {
    blocks: BTreeMap<u64, Box<[u8; BLOCK_SIZE]>>,
    num_blocks: u64,
}

impl SparseDisk {
    pub fn from_file(path: &Path) -> SparseDisk {
        SparseDisk::from_bytes(&std::fs::read(path).unwrap())
    }

    pub fn from_bytes(data: &[u8]) -> SparseDisk {
        let mut blocks = BTreeMap::new();
        for (i, b) in data.chunks_exact(BLOCK_SIZE).enumerate() {
            if b.iter().any(|&x| x != 0) {
                blocks.insert(i as u64, Box::new(<[u8; BLOCK_SIZE]>::try_from(b).unwrap()));
            }
        }
        SparseDisk {
            blocks,
            num_blocks: (data.len() / BLOCK_SIZE) as u64,
        }
    }

    /// Blocks on the device.
    pub fn len_blocks(&self) -> u64 {
        self.num_blocks
    }

    /// Cut (or grow) the device to `blocks` blocks.
    pub fn set_len_blocks(&mut self, blocks: u64) {
        self.num_blocks = blocks;
        self.blocks.retain(|&k, _| k < blocks);
    }

    /// The bytes at `offset`.
    pub fn get(&self, offset: u64, len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|i| {
                let at = offset + i;
                self.blocks
                    .get(&(at / 512))
                    .map_or(0, |b| b[(at % 512) as usize])
            })
            .collect()
    }

    pub fn u16_at(&self, offset: u64) -> u16 {
        u16::from_le_bytes(self.get(offset, 2).try_into().unwrap())
    }

    pub fn u32_at(&self, offset: u64) -> u32 {
        u32::from_le_bytes(self.get(offset, 4).try_into().unwrap())
    }

    /// Overwrite the bytes at `offset`.
    pub fn patch(&mut self, offset: u64, data: &[u8]) {
        for (i, &x) in data.iter().enumerate() {
            let at = offset + i as u64;
            self.blocks
                .entry(at / 512)
                .or_insert_with(|| Box::new([0; BLOCK_SIZE]))[(at % 512) as usize] = x;
        }
    }

    pub fn patch_u16(&mut self, offset: u64, v: u16) {
        self.patch(offset, &v.to_le_bytes());
    }

    pub fn patch_u32(&mut self, offset: u64, v: u32) {
        self.patch(offset, &v.to_le_bytes());
    }

    /// Offsets of every 32-byte-aligned occurrence of an 11-byte short name (directory entries).
    pub fn find_short_entries(&self, name: &[u8; 11]) -> Vec<u64> {
        let mut out = Vec::new();
        for (&lba, b) in &self.blocks {
            for (i, e) in b.chunks_exact(32).enumerate() {
                if &e[..11] == name {
                    out.push(lba * 512 + i as u64 * 32);
                }
            }
        }
        out
    }
}

impl BlockDevice for SparseDisk {
    type Error = RequestError;

    fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), RequestError> {
        check_request(lba, buf.len(), self.num_blocks)?;
        for (i, chunk) in buf.chunks_exact_mut(BLOCK_SIZE).enumerate() {
            match self.blocks.get(&(lba + i as u64)) {
                Some(b) => chunk.copy_from_slice(&b[..]),
                None => chunk.fill(0),
            }
        }
        Ok(())
    }
}

/// The 11-byte directory form of a short name like `LMBOOT.TXT`.
pub fn short_entry_name(short: &str) -> [u8; 11] {
    let mut n = [b' '; 11];
    let (base, ext) = short.split_once('.').unwrap_or((short, ""));
    n[..base.len()].copy_from_slice(base.as_bytes());
    n[8..8 + ext.len()].copy_from_slice(ext.as_bytes());
    n
}

/// Open `path`, check size and extents, read it whole and at `reads` pseudo-random ranges (plus the
/// edges), and compare with `expected`. Returns the file.
pub fn check_file<D: BlockDevice>(
    vol: &Volume,
    dev: &mut D,
    path: &str,
    expected: &[u8],
    seed: u64,
) -> File
where
    D::Error: std::fmt::Debug,
{
    let f = vol
        .open(dev, path)
        .unwrap_or_else(|e| panic!("open {path}: {e}"));
    let size = expected.len() as u64;
    assert_eq!(f.size(), size, "{path}: size");
    let blocks: u64 = f.extents().iter().map(|e| e.blocks).sum();
    assert_eq!(
        blocks,
        size.div_ceil(512),
        "{path}: extents cover ceil(size / 512) blocks"
    );
    assert_eq!(f.blocks(), size.div_ceil(512));
    for e in f.extents() {
        assert!(e.blocks > 0, "{path}: empty extent {e:?}");
    }
    for w in f.extents().windows(2) {
        assert_ne!(
            w[0].lba + w[0].blocks,
            w[1].lba,
            "{path}: adjacent extents not merged: {:?}",
            w
        );
    }

    let mut whole = vec![0u8; expected.len()];
    f.read_at(dev, 0, &mut whole)
        .unwrap_or_else(|e| panic!("read {path}: {e}"));
    assert!(whole == expected, "{path}: whole-file read differs");

    let mut rng = Rng::new(seed);
    let mut ranges: Vec<(u64, u64)> = vec![
        (0, 0),
        (size, 0),
        (0, size.min(1)),
        (size.saturating_sub(1), size.min(1)),
    ];
    for _ in 0..200 {
        if size == 0 {
            break;
        }
        let off = rng.below(size);
        let max = (size - off).min(if rng.below(4) == 0 { size } else { 3000 });
        let len = rng.below(max + 1);
        ranges.push((off, len));
        // Block-aligned starts and lengths too, the multi-block path.
        let aoff = off / 512 * 512;
        let alen = (size - aoff) / 512 * 512;
        ranges.push((aoff, rng.below(alen / 512 + 1) * 512));
    }
    for (off, len) in ranges {
        let mut buf = vec![0xA5u8; len as usize];
        f.read_at(dev, off, &mut buf)
            .unwrap_or_else(|e| panic!("read {path} at {off}+{len}: {e}"));
        assert!(
            buf[..] == expected[off as usize..(off + len) as usize],
            "{path}: read at {off}+{len} differs"
        );
    }
    f
}

/// The model-like file of the small images.
pub const SMALL_MODEL: &str = "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
pub const SMALL_MODEL_LEN: usize = 40_000;
pub const SMALL_TEXT: &[u8] = b"model=/models/SmolLM2-135M-Instruct.Q4_1.gguf\n";
/// Files in `/many`, enough to span several 512-byte directory clusters.
pub const MANY: usize = 30;

pub fn many_name(i: usize) -> String {
    format!("file number {i:02}.txt")
}

/// A 36 MiB FAT32 volume (512-byte clusters, the smallest mtools accepts) made with mkfs.fat and
/// mtools, bare or behind an MBR at block 2048 (type 0x0C): `/models/<long name>` (40 000 bytes),
/// `/LMBOOT.TXT`, `/empty.dat`, `/many/file number NN.txt` x 30.
pub fn small_image(partitioned: bool) -> SparseDisk {
    let dir = TempDir::new(if partitioned { "small-mbr" } else { "small" });
    let img = dir.join("small.img");
    let (offset, start) = if partitioned {
        (1 << 20, Some(2048))
    } else {
        (0, None)
    };
    mkfs(&img, (36 << 20) + offset, start, &["-F", "32", "-s", "1"]);
    if partitioned {
        write_mbr_file(&img, 2048, 0x0C);
    }
    mmd(&img, offset, "/models");
    mmd(&img, offset, "/many");
    put(&dir, &img, offset, SMALL_MODEL, &bytes(7, SMALL_MODEL_LEN));
    put(&dir, &img, offset, "/LMBOOT.TXT", SMALL_TEXT);
    put(&dir, &img, offset, "/empty.dat", b"");
    let src = dir.join("many");
    std::fs::create_dir(&src).unwrap();
    let mut cmd = Command::new(tool("mcopy"));
    cmd.arg("-i").arg(mtools_image(&img, offset));
    for i in 0..MANY {
        let p = src.join(many_name(i));
        std::fs::write(&p, bytes(100 + i as u64, 100 * i)).unwrap();
        cmd.arg(p);
    }
    run(cmd.arg("::/many/"));
    SparseDisk::from_file(&img)
}

/// The BPB numbers a test needs to find things in an image, read independently of the reader.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Byte offset of the boot sector.
    pub base: u64,
    pub bytes_per_sector: u64,
    pub sectors_per_cluster: u64,
    pub reserved: u64,
    pub num_fats: u64,
    pub fat_sectors: u64,
    pub total_sectors: u64,
    pub root_cluster: u32,
}

impl Layout {
    pub fn read(d: &SparseDisk, base: u64) -> Layout {
        Layout {
            base,
            bytes_per_sector: d.u16_at(base + 0x0B).into(),
            sectors_per_cluster: d.get(base + 0x0D, 1)[0].into(),
            reserved: d.u16_at(base + 0x0E).into(),
            num_fats: d.get(base + 0x10, 1)[0].into(),
            fat_sectors: d.u32_at(base + 0x24).into(),
            total_sectors: d.u32_at(base + 0x20).into(),
            root_cluster: d.u32_at(base + 0x2C),
        }
    }

    /// Byte offset of the first FAT's entry for `cluster`.
    pub fn fat_entry(&self, cluster: u32) -> u64 {
        self.base + self.reserved * self.bytes_per_sector + u64::from(cluster) * 4
    }

    pub fn data_sectors_start(&self) -> u64 {
        self.reserved + self.num_fats * self.fat_sectors
    }

    pub fn clusters(&self) -> u32 {
        ((self.total_sectors - self.data_sectors_start()) / self.sectors_per_cluster) as u32
    }

    /// Byte offset of a data cluster.
    pub fn cluster(&self, cluster: u32) -> u64 {
        self.base
            + (self.data_sectors_start() + u64::from(cluster - 2) * self.sectors_per_cluster)
                * self.bytes_per_sector
    }

    pub fn cluster_bytes(&self) -> u64 {
        self.sectors_per_cluster * self.bytes_per_sector
    }

    /// The chain from `first` as the first FAT has it (for tests on good images).
    pub fn chain(&self, d: &SparseDisk, first: u32) -> Vec<u32> {
        let mut c = first;
        let mut out = vec![c];
        loop {
            let next = d.u32_at(self.fat_entry(c)) & 0x0FFF_FFFF;
            if next >= 0x0FFF_FFF8 {
                return out;
            }
            assert!(out.len() < 1 << 20, "chain from {first} too long");
            out.push(next);
            c = next;
        }
    }
}

/// A FAT32 volume formatted and filled by `fatfs` in memory, with 512-byte clusters.
#[allow(dead_code)]
pub fn fatfs_image(
    size: usize,
    fill: impl FnOnce(&fatfs::Dir<'_, std::io::Cursor<&mut [u8]>>),
) -> Vec<u8> {
    use std::io::Cursor;
    let mut img = vec![0u8; size];
    fatfs::format_volume(
        Cursor::new(&mut img[..]),
        fatfs::FormatVolumeOptions::new()
            .fat_type(fatfs::FatType::Fat32)
            .bytes_per_cluster(512),
    )
    .unwrap();
    {
        let fs =
            fatfs::FileSystem::new(Cursor::new(&mut img[..]), fatfs::FsOptions::new()).unwrap();
        fill(&fs.root_dir());
        fs.unmount().unwrap();
    }
    img
}

/// A device that reads `inner` except for blocks patched in memory: a test corrupts a multi-GiB
/// image file this way without writing to it, and every case starts again from the good image.
pub struct Patched<D> {
    inner: D,
    blocks: BTreeMap<u64, Box<[u8; BLOCK_SIZE]>>,
}

impl<D: BlockDevice> Patched<D> {
    pub fn new(inner: D) -> Patched<D> {
        Patched {
            inner,
            blocks: BTreeMap::new(),
        }
    }

    /// Overwrite the bytes at byte `offset`; the rest of their blocks stay as `inner` has them.
    pub fn patch(&mut self, offset: u64, data: &[u8]) {
        for (i, &x) in data.iter().enumerate() {
            let at = offset + i as u64;
            let lba = at / 512;
            let inner = &mut self.inner;
            let block = self.blocks.entry(lba).or_insert_with(|| {
                let mut b = Box::new([0; BLOCK_SIZE]);
                inner.read_blocks(lba, &mut b[..]).unwrap();
                b
            });
            block[(at % 512) as usize] = x;
        }
    }

    pub fn patch_u32(&mut self, offset: u64, v: u32) {
        self.patch(offset, &v.to_le_bytes());
    }
}

impl<D: BlockDevice> BlockDevice for Patched<D> {
    type Error = D::Error;

    fn num_blocks(&self) -> u64 {
        self.inner.num_blocks()
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        // The inner device checks the range first, so the one below is inside the device.
        self.inner.read_blocks(lba, buf)?;
        let end = lba + (buf.len() / BLOCK_SIZE) as u64;
        for (&b, data) in self.blocks.range(lba..end) {
            let at = (b - lba) as usize * BLOCK_SIZE;
            buf[at..at + BLOCK_SIZE].copy_from_slice(&data[..]);
        }
        Ok(())
    }
}
