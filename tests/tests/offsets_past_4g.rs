//! Offsets and sizes past 4 GiB, on 64-bit hosts and under qemu-arm as armv7 (a 32-bit `usize`):
//! a GGUF file whose tensors all lie past 4 GiB (a 5 GiB hole between the tensor table and the
//! data, which a storage fabricates as zeros, holding only the two ends) opens, loads and runs bit
//! for bit as the compact file does, read directly and through the page cache (streamed, and with
//! its tensors pinned past 4 GiB); a FAT32 volume that starts 12 GiB into its card reads its file;
//! and a context whose KV cache a 32-bit board cannot address is refused up front, naming it.
//!
//! Cost: well under a second on the host, a few seconds under qemu-arm (no file on disk).

mod common;

use common::synth::{GgufWriter, Meta};
use drivers::block::{check_request, BlockDevice, RequestError, BLOCK_SIZE};
use drivers::fat::Volume;
use inference::model::{Model, ModelError, Part, RunState};
use inference::parallel::SingleThread;
use inference::storage::check_range;
use inference::{Gguf, Kernels, SliceStorage, Storage, StorageError};
use runtime::pagecache::{FileSource, Options, PageCache, Policy};
use std::io::{Cursor, Write};

/// The hole before the tensor data.
const GAP: u64 = 5 << 30;
const VOCAB: u64 = 40;

/// A file of `head`, then `gap` zeros, then `data`, holding only the two ends.
struct Holey {
    head: Vec<u8>,
    gap: u64,
    data: Vec<u8>,
}

impl Holey {
    fn data_at(&self) -> u64 {
        self.head.len() as u64 + self.gap
    }
}

impl Storage for Holey {
    fn len(&self) -> u64 {
        self.data_at() + self.data.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        check_range(offset, buf.len() as u64, self.len())?;
        let (head, data_at) = (self.head.len() as u64, self.data_at());
        for (o, b) in (offset..).zip(buf.iter_mut()) {
            *b = match o {
                o if o < head => self.head[o as usize],
                o if o >= data_at => self.data[(o - data_at) as usize],
                _ => 0,
            };
        }
        Ok(())
    }
}

/// The page cache's view of a [`Holey`] file.
struct Source<'a>(&'a Holey);

impl FileSource for Source<'_> {
    type Error = StorageError;
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        self.0.read_at(offset, buf)
    }
}

/// A tiny llama with random F32 weights.
fn model_file() -> GgufWriter {
    let (d, f, q, kv) = (32u64, 64u64, 32u64, 16u64);
    let mut w = GgufWriter::default();
    w.meta("general.architecture", Meta::Str("llama".into()));
    for (key, v) in [
        ("block_count", 2),
        ("embedding_length", d as u32),
        ("feed_forward_length", f as u32),
        ("attention.head_count", 4),
        ("attention.head_count_kv", 2),
        ("context_length", 1 << 20),
    ] {
        w.meta(&format!("llama.{key}"), Meta::U32(v));
    }
    let mut rng = common::XorShift(0x4_0000_0000);
    let mut m = |cols: u64, rows: u64, scale: f32| -> Vec<f32> {
        (0..cols * rows)
            .map(|_| ((rng.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale)
            .collect()
    };
    let ones = |n: u64| vec![1f32; n as usize];
    w.tensor("token_embd.weight", &[d, VOCAB], m(d, VOCAB, 1.0));
    w.tensor("output_norm.weight", &[d], ones(d));
    for l in 0..2 {
        let n = |s: &str| format!("blk.{l}.{s}");
        w.tensor(&n("attn_norm.weight"), &[d], ones(d));
        w.tensor(&n("attn_q.weight"), &[d, q], m(d, q, 0.5));
        w.tensor(&n("attn_k.weight"), &[d, kv], m(d, kv, 0.5));
        w.tensor(&n("attn_v.weight"), &[d, kv], m(d, kv, 0.5));
        w.tensor(&n("attn_output.weight"), &[q, d], m(q, d, 0.4));
        w.tensor(&n("ffn_norm.weight"), &[d], ones(d));
        w.tensor(&n("ffn_gate.weight"), &[d, f], m(d, f, 0.5));
        w.tensor(&n("ffn_up.weight"), &[d, f], m(d, f, 0.5));
        w.tensor(&n("ffn_down.weight"), &[f, d], m(f, d, 0.4));
    }
    w
}

fn holey() -> Holey {
    let (head, gap, data) = model_file().gap(GAP).parts();
    Holey { head, gap, data }
}

/// The logits (as bits) after each of a few tokens, run through `src`.
fn logits<S: Storage + Sync + ?Sized>(model: &Model, src: &S) -> Vec<Vec<u32>> {
    let mut st = RunState::new(model, 16, 1).unwrap();
    (0..6u32)
        .map(|i| {
            let tok = (i * 7 + 3) % VOCAB as u32;
            let k = Kernels::SCALAR;
            model
                .forward(&mut st, src, &SingleThread, &k, tok, true)
                .unwrap();
            st.logits.iter().map(|v| v.to_bits()).collect()
        })
        .collect()
}

#[test]
fn a_model_past_4_gib_runs_as_the_compact_one() {
    let compact = model_file().bytes();
    let src = SliceStorage::new(&compact);
    let g = Gguf::open(&src).unwrap();
    let want = logits(&Model::load(&g, &src).unwrap(), &src);

    let far = holey();
    let g = Gguf::open(&far).unwrap();
    assert_eq!(g.file_len, compact.len() as u64 + GAP);
    for t in &g.tensors {
        assert!(t.offset >= GAP, "{} at {}", t.name, t.offset);
    }
    let model = Model::load(&g, &far).unwrap();
    assert_eq!(logits(&model, &far), want, "read directly");

    // Streamed: 64 KiB of cache for a ~100 KiB model, the head pinned and the tensors streamed.
    let page = 4096;
    let cache = PageCache::new(Source(&far), 64 << 10, page, &mut |_, _| {}).unwrap();
    assert_eq!(logits(&model, &cache), want, "streamed");
    let stats = cache.stats();
    assert!(stats.misses > 0 && stats.bytes_read > 0, "{stats:?}");

    // A board of a ring pins the tensors it reads, wherever they are: here all past 4 GiB.
    let whole = Part::whole(model.config.n_layer);
    let wanted: Vec<(u64, u64)> = model.weights.ranges_of(&whole).collect();
    let opts = Options {
        policy: Policy::ResidentPrefix,
        readahead: 0,
    };
    let pinned =
        PageCache::for_ranges(Source(&far), 1 << 20, page, opts, &wanted, &mut |_, _| {}).unwrap();
    let embd = &model.weights.token_embd;
    assert!(pinned.resident(embd.offset, embd.size as usize).is_some());
    assert_eq!(logits(&model, &pinned), want, "pinned");
}

/// A card with an MBR whose one partition, `image`, starts at block `start`; zeros between.
struct Far {
    mbr: [u8; BLOCK_SIZE],
    start: u64,
    image: Vec<u8>,
}

impl BlockDevice for Far {
    type Error = RequestError;
    fn num_blocks(&self) -> u64 {
        self.start + (self.image.len() / BLOCK_SIZE) as u64
    }
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), RequestError> {
        check_request(lba, buf.len(), self.num_blocks())?;
        for (b, block) in (lba..).zip(buf.chunks_mut(BLOCK_SIZE)) {
            match b {
                0 => block.copy_from_slice(&self.mbr),
                b if b >= self.start => {
                    let at = (b - self.start) as usize * BLOCK_SIZE;
                    block.copy_from_slice(&self.image[at..at + BLOCK_SIZE]);
                }
                _ => block.fill(0),
            }
        }
        Ok(())
    }
}

#[test]
fn a_fat_volume_past_4_gib_reads_its_files() {
    // The smallest FAT32 volume: 65,525 clusters of 512 bytes and the FATs.
    let blocks: u32 = 68_000;
    let mut image = vec![0u8; blocks as usize * BLOCK_SIZE];
    let opts = fatfs::FormatVolumeOptions::new()
        .fat_type(fatfs::FatType::Fat32)
        .bytes_per_cluster(512)
        .total_sectors(blocks);
    fatfs::format_volume(Cursor::new(&mut image[..]), opts).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| ((i * 131) >> 3) as u8).collect();
    {
        let fs =
            fatfs::FileSystem::new(Cursor::new(&mut image[..]), fatfs::FsOptions::new()).unwrap();
        let mut f = fs.root_dir().create_file("model.bin").unwrap();
        f.write_all(&data).unwrap();
    }
    let start: u32 = (12u64 << 30).div_ceil(BLOCK_SIZE as u64) as u32;
    let mut mbr = [0u8; BLOCK_SIZE];
    let e = &mut mbr[0x1BE..0x1CE];
    e[4] = 0x0C; // FAT32 LBA
    e[8..12].copy_from_slice(&start.to_le_bytes());
    e[12..16].copy_from_slice(&blocks.to_le_bytes());
    (mbr[510], mbr[511]) = (0x55, 0xAA);
    let mut dev = Far {
        mbr,
        start: start as u64,
        image,
    };
    let vol = Volume::mount(&mut dev).unwrap();
    assert_eq!(vol.start_lba(), start as u64);
    let f = vol.open(&mut dev, "/model.bin").unwrap();
    assert_eq!(f.size(), data.len() as u64);
    for (offset, len) in [(0, 512), (1, 1000), (4095, 70_000), (299_000, 1000)] {
        let mut buf = vec![0u8; len];
        f.read_at(&mut dev, offset, &mut buf).unwrap();
        assert_eq!(
            buf,
            data[offset as usize..offset as usize + len],
            "at {offset}"
        );
    }
}

#[test]
fn a_kv_cache_past_a_32_bit_address_space_is_refused_up_front() {
    let compact = model_file().bytes();
    let src = SliceStorage::new(&compact);
    let g = Gguf::open(&src).unwrap();
    let mut model = Model::load(&g, &src).unwrap();
    // Pose as a model with 32 layers of 1024-wide keys: 4 GiB of KV cache at 32768 positions,
    // 2 GiB of keys and 2 GiB of values.
    let (ctx, whole) = (32_768, Part::whole(32));
    (
        model.config.n_layer,
        model.config.n_head_kv,
        model.config.head_dim,
    ) = (32, 8, 128);
    // Counted in u64 on every board.
    assert_eq!(RunState::kv_bytes_for(&model, ctx), 4 << 30);
    let as_32_bit = i32::MAX as u64;
    let e = RunState::size_within(&model, ctx, 1, 1, &whole, as_32_bit).unwrap_err();
    let text = format!("{e}");
    assert!(
        matches!(e, ModelError::TooLarge(ref t) if t.bytes == 2 << 30),
        "{text}"
    );
    assert_eq!(
        text,
        "the KV cache's keys (or values) for 32768 positions and batches of 1 is 2 GiB: more \
         than this 32-bit board can address in one piece (1.9 GiB)"
    );
    // Half the context fits each piece, but not both together.
    let e = RunState::size_within(&model, ctx / 2, 1, 1, &whole, as_32_bit).unwrap_err();
    assert!(
        format!("{e}").starts_with("the KV cache (2 GiB) and buffers ("),
        "{e}"
    );
    // On a 32-bit board the run state itself refuses, before allocating anything.
    if usize::BITS == 32 {
        model.config.train_ctx = ctx;
        let e = RunState::new(&model, ctx, 1).unwrap_err();
        assert!(matches!(e, ModelError::TooLarge(_)), "{e}");
    }
}

#[test]
fn an_array_larger_than_a_32_bit_address_space_is_refused_by_name() {
    // One metadata key, an array of 600 million u32 (2.4 GB of zeros, fabricated), and no tensors.
    let n: u64 = 600_000_000;
    let mut head = Vec::new();
    head.extend(b"GGUF");
    head.extend(3u32.to_le_bytes());
    head.extend(0u64.to_le_bytes()); // tensors
    head.extend(1u64.to_le_bytes()); // metadata entries
    head.extend(3u64.to_le_bytes());
    head.extend(b"big");
    head.extend(9u32.to_le_bytes()); // array
    head.extend(4u32.to_le_bytes()); // of u32
    head.extend(n.to_le_bytes());
    let far = Holey {
        head,
        gap: n * 4,
        data: vec![],
    };
    let g = Gguf::open(&far).unwrap();
    assert_eq!(g.array_info("big").unwrap().len, n);
    // Read as i64 it is 4.8 GB: no 32-bit board can hold it (a 64-bit one would read it all).
    if usize::BITS == 32 {
        let e = g.array(&far, "big").unwrap().ints().unwrap_err();
        assert_eq!(
            e.to_string(),
            "GGUF error at byte 51: array \"big\" of 600000000 elements is 4.4 GiB: more than this \
             32-bit board can address in one piece (1.9 GiB)"
        );
    }
}
