//! The FAT32 reader at FAT32's limits: a file of 4 GiB - 1 bytes (0xFFFF_FFFF, the largest size a
//! directory entry holds) fragmented into thousands of extents, on multi-GiB volumes behind an MBR
//! as 8 and 32 GB SD cards are formatted: 8 GiB with 4 KiB clusters (a chain of 1,048,576
//! clusters, the most a file can have at that size) and 32 GiB with 32 KiB clusters.
//!
//! The images are sparse files. mkfs.fat formats them and mtools makes `/models` and a placeholder
//! file; the test then writes the file's cluster chain into both FATs itself (pieces of random length
//! placed in shuffled order with a gap after each, so no two merge and the chain jumps back and forth
//! across the FAT), points the directory entry at it with size 0xFFFF_FFFF, and writes only 8-byte
//! markers on both sides of some extent boundaries and at the file's ends. Everything else reads as
//! zeros. The corrupt cases (a chain one cluster short of the size, loops in the file's and in a
//! directory's chain) patch blocks in memory ([`Patched`]) over the good image.
//!
//! Cost, measured on a 2-core machine: 0.3 s for both tests (building an image takes 50-100 ms), and
//! 32 MB of real disk at most (`du`: 21 MB for the 8 GiB image, 10 MB for the 32 GiB one, each
//! removed when its test ends), mostly the zeroed FATs that mkfs.fat writes; the apparent sizes are
//! 8 and 32 GiB. Each test asserts its image stays under 64 MB of real disk.

mod fat_common;

use drivers::block::{BlockDevice, CountingDevice};
use drivers::fat::{Extent, FatError, File, FormatError, Volume};
use fat_common::*;
use std::collections::BTreeSet;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::time::Instant;

/// 4 GiB - 1: FAT32's largest file.
const SIZE: u64 = 0xFFFF_FFFF;
const PATH: &str = "/models/Qwen2.5-Coder-32B-Instruct-Q8_0.gguf";
/// The volume starts at block 2048, behind an MBR, as on a card.
const VOLUME_LBA: u64 = 2048;
/// The file's clusters start here, past what mkfs.fat and mtools allocated (root, `/models`, the
/// placeholder).
const FIRST_FREE: u32 = 16;
/// Bytes of each marker.
const MARK: u64 = 8;
/// Every `MARK_EVERY`th extent boundary is marked (each marker costs a 4 KiB block of real disk).
const MARK_EVERY: usize = 8;
/// Pieces `SPAN .. SPAN + 3` are read in one call; the boundaries around them are all marked.
const SPAN: usize = 17;
const EOC: u32 = 0x0FFF_FFFF;

/// An SD card's size and format.
struct Card {
    tag: &'static str,
    bytes: u64,
    sectors_per_cluster: u8,
    pieces: usize,
    seed: u64,
}

/// `len` clusters from `cluster` hold the file's clusters from `file_cluster`.
#[derive(Debug, Clone, Copy)]
struct Piece {
    file_cluster: u64,
    cluster: u32,
    len: u32,
}

/// A card image holding the fragmented file, and what the test wrote into it.
struct Image {
    _dir: TempDir,
    path: PathBuf,
    layout: Layout,
    pieces: Vec<Piece>,
    /// File offsets of the markers, sorted.
    marks: Vec<u64>,
    models_cluster: u32,
}

/// The marker byte at file offset `o`: never 0, so never mistaken for the sparse zeros.
fn mark(o: u64) -> u8 {
    (o.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8 | 1
}

fn read_bytes(f: &std::fs::File, offset: u64, len: u64) -> Vec<u8> {
    let mut v = vec![0; len as usize];
    f.read_exact_at(&mut v, offset).unwrap();
    v
}

/// The boot sector's numbers, read from the image file.
fn layout_at(f: &std::fs::File, base: u64) -> Layout {
    let boot = SparseDisk::from_bytes(&read_bytes(f, base, 512));
    Layout {
        base,
        ..Layout::read(&boot, 0)
    }
}

/// The 32-byte entries of directory cluster `cluster` with their byte offsets in the image.
fn dir_entries(f: &std::fs::File, l: &Layout, cluster: u32) -> Vec<(u64, Vec<u8>)> {
    let at = l.cluster(cluster);
    let data = read_bytes(f, at, l.cluster_bytes());
    let entries = data.chunks_exact(32).enumerate();
    entries
        .take_while(|(_, e)| e[0] != 0)
        .filter(|(_, e)| e[0] != 0xE5 && e[11] & 0x3F != 0x0F)
        .map(|(i, e)| (at + 32 * i as u64, e.to_vec()))
        .collect()
}

fn first_cluster(e: &[u8]) -> u32 {
    u32::from(u16::from_le_bytes([e[20], e[21]])) << 16
        | u32::from(u16::from_le_bytes([e[26], e[27]]))
}

/// Split the file's `needed` clusters into `count` pieces (the first and last one cluster long, the
/// rest of random lengths) and place them from [`FIRST_FREE`] in shuffled order, each followed by a
/// gap of 1 to `max_gap` free clusters (the volume's spare clusters over `count`): no two pieces
/// merge, and they always fit.
fn plan(needed: u64, count: usize, clusters: u32, rng: &mut Rng) -> Vec<Piece> {
    let mut cuts = BTreeSet::from([0, 1, needed - 1, needed]);
    while cuts.len() < count + 1 {
        cuts.insert(1 + rng.below(needed - 1));
    }
    let cuts: Vec<u64> = cuts.into_iter().collect();
    let mut pieces: Vec<Piece> = cuts
        .windows(2)
        .map(|w| Piece {
            file_cluster: w[0],
            cluster: 0,
            len: (w[1] - w[0]) as u32,
        })
        .collect();
    let mut order: Vec<usize> = (0..count).collect();
    for i in (1..count).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let end = u64::from(clusters) + 2;
    let max_gap = (end - u64::from(FIRST_FREE) - needed) / count as u64;
    let mut at = u64::from(FIRST_FREE);
    for i in order {
        pieces[i].cluster = at as u32;
        at += u64::from(pieces[i].len) + 1 + rng.below(max_gap);
    }
    assert!(at <= end, "the plan overruns the volume: {at} > {end}");
    pieces
}

/// Write the chain of `pieces` into every FAT and free the placeholder's cluster. The FATs were
/// written whole (zeros) by mkfs.fat, so this allocates no disk.
fn write_chain(f: &std::fs::File, l: &Layout, pieces: &[Piece], placeholder: u32) {
    let top = pieces.iter().map(|p| p.cluster + p.len).max().unwrap();
    assert!(
        placeholder < FIRST_FREE,
        "placeholder at cluster {placeholder}"
    );
    let mut fat = read_bytes(f, l.fat_entry(0), u64::from(top) * 4);
    let mut set = |c: u32, v: u32| fat[c as usize * 4..][..4].copy_from_slice(&v.to_le_bytes());
    set(placeholder, 0);
    for (i, p) in pieces.iter().enumerate() {
        let last = p.cluster + p.len - 1;
        for c in p.cluster..last {
            set(c, c + 1);
        }
        set(last, pieces.get(i + 1).map_or(EOC, |n| n.cluster));
    }
    for copy in 0..l.num_fats {
        let fat_at = l.fat_entry(0) + copy * l.fat_sectors * l.bytes_per_sector;
        f.write_all_at(&fat, fat_at).unwrap();
    }
}

/// Byte offset in the image of file offset `o`, from the plan (not from the reader).
fn image_offset(l: &Layout, pieces: &[Piece], o: u64) -> u64 {
    let fc = o / l.cluster_bytes();
    l.cluster(cluster_of(pieces, fc)) + o % l.cluster_bytes()
}

/// The cluster holding file cluster `fc`, from the plan.
fn cluster_of(pieces: &[Piece], fc: u64) -> u32 {
    let p = pieces[pieces.partition_point(|p| p.file_cluster <= fc) - 1];
    p.cluster + (fc - p.file_cluster) as u32
}

/// File offsets of the marked extent boundaries: the start of every [`MARK_EVERY`]th piece and of
/// the pieces around [`SPAN`].
fn marked_boundaries(pieces: &[Piece], cluster_bytes: u64) -> Vec<u64> {
    let marked = |i: usize| i % MARK_EVERY == 1 || (SPAN..=SPAN + 3).contains(&i);
    (1..pieces.len())
        .filter(|&i| marked(i))
        .map(|i| pieces[i].file_cluster * cluster_bytes)
        .collect()
}

/// Write the markers: the file's first and last bytes, and both sides of the marked boundaries.
fn write_marks(f: &std::fs::File, l: &Layout, pieces: &[Piece]) -> Vec<u64> {
    let mut marks = vec![0, SIZE - MARK];
    for b in marked_boundaries(pieces, l.cluster_bytes()) {
        marks.extend([b - MARK, b]);
    }
    for &m in &marks {
        let at = image_offset(l, pieces, m);
        // A marker never crosses a cluster, so its bytes are consecutive in the image.
        assert_eq!(image_offset(l, pieces, m + MARK - 1), at + MARK - 1);
        let bytes: Vec<u8> = (m..m + MARK).map(mark).collect();
        f.write_all_at(&bytes, at).unwrap();
    }
    marks.sort_unstable();
    marks
}

/// Format the card, then write the fragmented file into it.
fn build(card: &Card) -> Image {
    let dir = TempDir::new(card.tag);
    let path = dir.join("card.img");
    let spc = card.sectors_per_cluster.to_string();
    mkfs(
        &path,
        card.bytes,
        Some(VOLUME_LBA),
        &["-F", "32", "-s", &spc],
    );
    write_mbr_file(&path, VOLUME_LBA as u32, 0x0C);
    let base = VOLUME_LBA * 512;
    mmd(&path, base, "/models");
    put(&dir, &path, base, PATH, b"placeholder");

    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let layout = layout_at(&f, base);
    let root = dir_entries(&f, &layout, layout.root_cluster);
    let (_, models) = root
        .iter()
        .find(|(_, e)| &e[..11] == b"MODELS     ")
        .unwrap();
    let models_cluster = first_cluster(models);
    let files: Vec<_> = dir_entries(&f, &layout, models_cluster)
        .into_iter()
        .filter(|(_, e)| e[0] != b'.')
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let (entry_at, entry) = &files[0];

    let needed = SIZE.div_ceil(layout.cluster_bytes());
    let pieces = plan(
        needed,
        card.pieces,
        layout.clusters(),
        &mut Rng::new(card.seed),
    );
    write_chain(&f, &layout, &pieces, first_cluster(entry));
    let first = pieces[0].cluster;
    f.write_all_at(&((first >> 16) as u16).to_le_bytes(), entry_at + 20)
        .unwrap();
    f.write_all_at(&(first as u16).to_le_bytes(), entry_at + 26)
        .unwrap();
    f.write_all_at(&(SIZE as u32).to_le_bytes(), entry_at + 28)
        .unwrap();
    let marks = write_marks(&f, &layout, &pieces);
    Image {
        _dir: dir,
        path,
        layout,
        pieces,
        marks,
        models_cluster,
    }
}

impl Image {
    fn device(&self) -> CountingDevice<Patched<FileDisk>> {
        CountingDevice::new(Patched::new(FileDisk::open(&self.path)))
    }

    fn needed(&self) -> u64 {
        SIZE.div_ceil(self.layout.cluster_bytes())
    }

    /// The extents the reader must find: one per piece, the last cut to the file's last block.
    fn extents(&self) -> Vec<Extent> {
        let cluster_blocks = self.layout.cluster_bytes() / 512;
        let mut v: Vec<Extent> = (self.pieces)
            .iter()
            .map(|p| Extent {
                lba: self.layout.cluster(p.cluster) / 512,
                blocks: u64::from(p.len) * cluster_blocks,
            })
            .collect();
        v.last_mut().unwrap().blocks -= self.needed() * cluster_blocks - SIZE.div_ceil(512);
        v
    }

    /// The file's bytes at `offset .. offset + len`: zeros but for the markers.
    fn expected(&self, offset: u64, len: u64) -> Vec<u8> {
        let mut v = vec![0; len as usize];
        for &m in &self.marks {
            for o in m.max(offset)..(m + MARK).min(offset + len) {
                v[(o - offset) as usize] = mark(o);
            }
        }
        v
    }

    /// File offset where piece `i` starts.
    fn boundary(&self, i: usize) -> u64 {
        self.pieces[i].file_cluster * self.layout.cluster_bytes()
    }

    /// An upper bound on the requests of resolving the chain: each piece's FAT entries take at
    /// most two 4 KiB windows more than their 1024-entry share; a few for the directories.
    fn open_requests(&self) -> u64 {
        self.needed() / 1024 + 2 * self.pieces.len() as u64 + 32
    }

    fn cluster_of(&self, fc: u64) -> u32 {
        cluster_of(&self.pieces, fc)
    }
}

fn check_read<D: BlockDevice>(im: &Image, f: &File, dev: &mut D, offset: u64, len: u64) {
    let mut buf = vec![0xA5; len as usize];
    f.read_at(dev, offset, &mut buf)
        .unwrap_or_else(|e| panic!("read {len} bytes at {offset}: {e:?}"));
    assert!(
        buf == im.expected(offset, len),
        "read {len} bytes at {offset}: wrong bytes"
    );
}

/// Open the good file: its size, extents and markers, reads across extents, reads past the end.
fn check_good(im: &Image) {
    let mut dev = im.device();
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(vol.cluster_bytes(), im.layout.cluster_bytes());
    assert_eq!(vol.cluster_count(), im.layout.clusters());
    dev.reset();
    let t = Instant::now();
    let f = vol.open(&mut dev, PATH).unwrap();
    println!(
        "open: {:?}, {} requests, {} extents",
        t.elapsed(),
        dev.requests(),
        f.extents().len()
    );
    assert!(
        dev.requests() <= im.open_requests(),
        "open took {} requests",
        dev.requests()
    );
    assert_eq!((f.size(), f.blocks()), (SIZE, SIZE.div_ceil(512)));
    let want = im.extents();
    assert_eq!(f.extents().len(), im.pieces.len());
    if let Some(i) = (0..want.len()).find(|&i| f.extents()[i] != want[i]) {
        panic!("extent {i}: {:?}, want {:?}", f.extents()[i], want[i]);
    }

    // Across each marked extent boundary, and its last and first bytes alone.
    for b in marked_boundaries(&im.pieces, im.layout.cluster_bytes()) {
        check_read(im, &f, &mut dev, b - MARK, 2 * MARK);
        check_read(im, &f, &mut dev, b - 1, 1);
        check_read(im, &f, &mut dev, b, 1);
    }
    for (offset, len) in [(0, MARK), (SIZE - MARK, MARK), (SIZE - 1, 1), (SIZE, 0)] {
        check_read(im, &f, &mut dev, offset, len);
    }
    check_span(im, &f, &mut dev);
    check_past_end(&f, &mut dev);
}

/// One read over three whole extents is three requests; unaligned, two more for the edge blocks.
fn check_span<D: BlockDevice>(im: &Image, f: &File, dev: &mut CountingDevice<D>) {
    let (from, to) = (im.boundary(SPAN), im.boundary(SPAN + 3));
    for (offset, len, requests) in [(from, to - from, 3), (from - MARK, to - from + 2 * MARK, 5)] {
        dev.reset();
        check_read(im, f, dev, offset, len);
        assert_eq!(dev.requests(), requests, "read of {len} bytes at {offset}");
    }
}

fn check_past_end<D: BlockDevice>(f: &File, dev: &mut D) {
    for (offset, len) in [(SIZE, 1u64), (SIZE - 1, 2), (1 << 32, 1), (u64::MAX, 1)] {
        let mut buf = vec![0; len as usize];
        let e = f.read_at(dev, offset, &mut buf).unwrap_err();
        assert!(
            matches!(e, FatError::Format(FormatError::ReadPastEnd { offset: o, len: n, size: SIZE }) if o == offset && n == len),
            "read {len} at {offset}: {e:?}"
        );
        assert!(e.to_string().contains("past the end of the file"), "{e}");
    }
    assert_eq!(f.map_block(f.blocks()), None);
    let last = f.extents().last().unwrap();
    assert_eq!(
        f.map_block(f.blocks() - 1),
        Some(Extent {
            lba: last.lba + last.blocks - 1,
            blocks: 1
        })
    );
}

/// A chain one cluster short of the size, and loops in the file's chain: clear errors, found for a
/// few times the requests of a good open (a loop is not walked once per cluster of the volume: the
/// two-cluster loop took 1.57 million requests that way on the 8 GiB card).
fn check_bad_chains(im: &Image) {
    let (needed, first) = (im.needed(), im.pieces[0].cluster);
    let limit = im.layout.clusters();
    // Two consecutive file clusters in different FAT windows (1024 entries of 4 bytes), for a tight
    // loop that needs another window at every step.
    let jump = (1..im.pieces.len())
        .map(|i| im.pieces[i].file_cluster)
        .find(|&fc| fc > needed / 2 && im.cluster_of(fc - 1) / 1024 != im.cluster_of(fc) / 1024)
        .unwrap();
    let cases = [
        (
            "one cluster short",
            needed - 2,
            EOC,
            FatError::Format(FormatError::ChainTooShort {
                first,
                clusters: needed - 1,
                needed,
                size: SIZE,
            }),
        ),
        (
            "loop to the start",
            needed - 1,
            first,
            FatError::Format(FormatError::ChainLoop { first, limit }),
        ),
        (
            "two-cluster loop across FAT windows",
            jump,
            im.cluster_of(jump - 1),
            FatError::Format(FormatError::ChainLoop { first, limit }),
        ),
    ];
    let vol = Volume::mount(&mut im.device()).unwrap();
    for (name, fc, value, want) in cases {
        let mut dev = im.device();
        dev.inner_mut()
            .patch_u32(im.layout.fat_entry(im.cluster_of(fc)), value);
        let t = Instant::now();
        let e = vol.open(&mut dev, PATH).unwrap_err();
        println!(
            "{name}: {e} ({:?}, {} requests)",
            t.elapsed(),
            dev.requests()
        );
        assert_eq!(e.map_device(|e| e.kind()), want, "{name}");
        assert!(
            dev.requests() <= 3 * im.open_requests(),
            "{name}: {} requests",
            dev.requests()
        );
    }
}

/// `/models` made to loop through a far cluster (another FAT window), with no end marker: looking
/// up a missing name is a clear error after three clusters (`/models`, the far one, `/models`
/// again: their blocks one request each, and the FAT windows), not a walk of every block of as
/// many clusters as the volume has (18.8 and 68 million requests on these cards).
fn check_directory_loop(im: &Image) {
    let l = &im.layout;
    let m = im.models_cluster;
    // A free cluster after the piece placed last: the gaps guarantee it is free and in the volume.
    let p = im.pieces.iter().max_by_key(|p| p.cluster).unwrap();
    let far = p.cluster + p.len;
    assert_ne!(m / 1024, far / 1024);
    let mut dev = im.device();
    let image = std::fs::File::open(&im.path).unwrap();
    for (cluster, at) in [(m, l.cluster(m)), (far, l.cluster(far))] {
        let data = read_bytes(&image, at, l.cluster_bytes());
        for (i, e) in data.chunks_exact(32).enumerate() {
            if e[0] == 0 {
                // Deleted entries instead of the end marker, so the walk goes on to the next cluster.
                dev.inner_mut().patch(at + 32 * i as u64, &[0xE5]);
            }
        }
        let next = if cluster == m { far } else { m };
        dev.inner_mut().patch_u32(l.fat_entry(cluster), next);
    }
    let vol = Volume::mount(&mut dev).unwrap();
    dev.reset();
    let t = Instant::now();
    let e = vol.open(&mut dev, "/models/missing.gguf").unwrap_err();
    println!(
        "directory loop: {e} ({:?}, {} requests)",
        t.elapsed(),
        dev.requests()
    );
    let want = FatError::Format(FormatError::ChainLoop {
        first: m,
        limit: l.clusters(),
    });
    assert_eq!(e.map_device(|e| e.kind()), want);
    let bound = 4 * l.sectors_per_cluster * l.bytes_per_sector / 512 + 8;
    assert!(dev.requests() <= bound, "{} requests", dev.requests());
    // The entry before the loop is still found.
    assert_eq!(vol.open(&mut dev, PATH).unwrap().size(), SIZE);
}

fn run_card(card: &Card) {
    let t = Instant::now();
    let im = build(card);
    let disk = std::fs::metadata(&im.path).unwrap().blocks() * 512;
    println!(
        "{}: built in {:?}, {} MB on disk",
        card.tag,
        t.elapsed(),
        disk >> 20
    );
    // The image is sparse: gigabytes long, a few megabytes written.
    assert!(
        disk < 64 << 20,
        "{}: the image takes {disk} bytes of disk",
        card.tag
    );
    check_good(&im);
    check_bad_chains(&im);
    check_directory_loop(&im);
    println!("{}: {:?} in all", card.tag, t.elapsed());
}

#[test]
fn card_8g_4k_clusters() {
    run_card(&Card {
        tag: "8g",
        bytes: 8 << 30,
        sectors_per_cluster: 8,
        pieces: 5000,
        seed: 8,
    });
}

#[test]
fn card_32g_32k_clusters() {
    run_card(&Card {
        tag: "32g",
        bytes: 32 << 30,
        sectors_per_cluster: 64,
        pieces: 2000,
        seed: 32,
    });
}
