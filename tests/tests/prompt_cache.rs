//! Prompt reuse on the real model (SmolLM2-135M-Instruct Q4_1) through a FAT32 image made by the
//! `fatfs` crate with a preallocated, zero-filled `/lmboot.kv`: the state after a system prompt is
//! saved into the file and restored into a fresh run state, after which generation continues with
//! the same tokens and bit-identical logits (straight from the prompt's logits, and after feeding a
//! user turn); a changed prompt, another model key, a damaged payload, a smaller context and a save
//! cut by a power loss are mismatches, never a silent reuse; a file too small is a clear error;
//! and saving writes nothing outside the file's data blocks.

mod common;
mod fat_common;

use drivers::block::{CountingDevice, Fault, FaultyDevice, RamDisk};
use drivers::fat::{File, Volume};
use inference::model::{Model, RunState};
use inference::parallel::SingleThread;
use inference::sampler::greedy;
use inference::storage::FileStorage;
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels};
use runtime::promptcache::{
    self, LoadOutcome, PromptCacheError, WHY_CHECKSUM, WHY_CONTEXT, WHY_INCOMPLETE, WHY_MODEL,
    WHY_NEVER_WRITTEN, WHY_PROMPT,
};
use std::io::{Cursor, Read, Write};

const CTX: usize = 96;
const SYSTEM: &str = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
const USER: &str =
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
const GENERATE: usize = 8;
const KV_FILE_BYTES: usize = 1 << 20;
const SMALL_FILE_BYTES: usize = 64 << 10;

struct Setup {
    src: FileStorage,
    model: Model,
    system: Vec<u32>,
    user: Vec<u32>,
    key: u64,
}

fn setup() -> Setup {
    let (src, g): (FileStorage, Gguf) = common::open(&common::model_path());
    let model = Model::load(&g, &src).unwrap();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap();
    let system = tok.encode(SYSTEM, false, true).unwrap();
    let user = tok.encode(USER, false, true).unwrap();
    assert!(system.len() > 10 && system.len() + user.len() + GENERATE < CTX);
    let key = promptcache::model_key(&g, &src).unwrap();
    assert_eq!(
        key,
        promptcache::model_key(&g, &src).unwrap(),
        "deterministic"
    );
    Setup {
        src,
        model,
        system,
        user,
        key,
    }
}

impl Setup {
    fn state(&self, ctx: usize) -> RunState {
        RunState::new(&self.model, ctx, 1).unwrap()
    }

    fn forward(&self, st: &mut RunState, token: u32, logits: bool) {
        self.model
            .forward(
                st,
                &self.src,
                &SingleThread,
                &Kernels::best(),
                token,
                logits,
            )
            .unwrap();
    }

    /// Feed `tokens` (logits for the last one).
    fn feed(&self, st: &mut RunState, tokens: &[u32]) {
        for (i, &t) in tokens.iter().enumerate() {
            self.forward(st, t, i + 1 == tokens.len());
        }
    }

    /// Greedy generation from the current logits: the tokens and the logits each was chosen from.
    fn generate(&self, st: &mut RunState, n: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
        let mut toks = Vec::new();
        let mut logits = Vec::new();
        for i in 0..n {
            logits.push(st.logits.iter().map(|x| x.to_bits()).collect());
            let t = greedy(&st.logits).unwrap();
            toks.push(t);
            if i + 1 < n {
                self.forward(st, t, true);
            }
        }
        (toks, logits)
    }
}

/// A FAT32 image with `/lmboot.kv` (1 MiB of zeros), `/small.kv` (64 KiB) and `/lmboot.txt`.
fn card() -> Vec<u8> {
    fat_common::fatfs_image(36 << 20, |root| {
        for (name, data) in [
            ("lmboot.txt", b"allow_write = true\n".to_vec()),
            ("lmboot.kv", vec![0u8; KV_FILE_BYTES]),
            ("small.kv", vec![0u8; SMALL_FILE_BYTES]),
        ] {
            let mut f = root.create_file(name).unwrap();
            f.write_all(&data).unwrap();
            f.flush().unwrap();
        }
    })
}

/// Bytes outside `file`'s data (its `size` bytes through its extents) are the same in both images.
fn same_outside(file: &File, before: &[u8], after: &[u8]) {
    let mut inside = vec![false; before.len()];
    let mut left = file.size() as usize;
    for e in file.extents() {
        let s = e.lba as usize * 512;
        let n = (e.blocks as usize * 512).min(left);
        inside[s..s + n].iter_mut().for_each(|b| *b = true);
        left -= n;
    }
    let changed: Vec<usize> = (0..before.len())
        .filter(|&i| !inside[i] && before[i] != after[i])
        .take(10)
        .collect();
    assert!(
        changed.is_empty(),
        "bytes outside the file changed at {changed:?}"
    );
}

fn why(o: LoadOutcome) -> &'static str {
    match o {
        LoadOutcome::Mismatch { why } => why,
        other => panic!("expected a mismatch, got {other:?}"),
    }
}

#[test]
fn saved_prompt_state_continues_exactly() {
    let s = setup();
    let img = card();
    let mut dev = CountingDevice::new(RamDisk::new(img.clone()));
    let vol = Volume::mount(&mut dev).unwrap();
    let file = vol.open(&mut dev, "/lmboot.kv").unwrap();
    let n = s.system.len();

    // Nothing saved yet.
    let mut st = s.state(CTX);
    let o = promptcache::load(&file, &mut dev, s.key, &s.system, &mut st).unwrap();
    assert_eq!(why(o), WHY_NEVER_WRITTEN);
    assert_eq!(st.pos, 0);

    // Run the prompt and save.
    s.feed(&mut st, &s.system);
    assert_eq!(st.pos, n);
    dev.reset();
    let rep = promptcache::save(&file, &mut dev, s.key, &s.system, &st).unwrap();
    let needed = promptcache::required_file_bytes(&s.model.config, n);
    eprintln!(
        "saved {n} tokens: {} KiB written in {} requests; the file needs {needed} bytes",
        rep.bytes >> 10,
        dev.write_requests()
    );
    assert_eq!(rep.tokens, n);
    assert_eq!(rep.bytes, needed + 512, "the header is written twice");
    assert_eq!(dev.blocks_written() * 512, rep.bytes);
    assert_eq!(dev.flushes(), 3);
    assert_eq!(
        needed,
        512 + (4 * n as u64 + 4 * 49152 + 2 * 30 * n as u64 * 192 * 2).div_ceil(512) * 512
    );
    let after = dev.inner().data().clone();
    same_outside(&file, &img, &after);
    // Read with fatfs: the file holds the magic, and the other files are intact.
    {
        let mut copy = after.clone();
        let fs =
            fatfs::FileSystem::new(Cursor::new(&mut copy[..]), fatfs::FsOptions::new()).unwrap();
        let mut kv = Vec::new();
        fs.root_dir()
            .open_file("lmboot.kv")
            .unwrap()
            .read_to_end(&mut kv)
            .unwrap();
        assert_eq!(kv.len(), KV_FILE_BYTES, "size unchanged");
        assert_eq!(&kv[..6], b"LMBKV\0");
        assert!(kv[needed as usize..].iter().all(|&b| b == 0));
        let mut txt = String::new();
        fs.root_dir()
            .open_file("lmboot.txt")
            .unwrap()
            .read_to_string(&mut txt)
            .unwrap();
        assert_eq!(txt, "allow_write = true\n");
    }

    // Restore into a fresh state (another context length, even).
    let mut restored = s.state(CTX + 16);
    let o = promptcache::load(&file, &mut dev, s.key, &s.system, &mut restored).unwrap();
    assert_eq!(
        o,
        LoadOutcome::Restored {
            tokens: n,
            bytes: needed
        }
    );
    assert_eq!(restored.pos, n);
    for l in 0..s.model.config.n_layer {
        assert_eq!(restored.kv.keys(l, n), st.kv.keys(l, n));
        assert_eq!(restored.kv.values(l, n), st.kv.values(l, n));
    }

    // Straight from the prompt's logits: the same tokens from the same logits, bit for bit.
    let (ta, la) = s.generate(&mut st, GENERATE);
    let (tb, lb) = s.generate(&mut restored, GENERATE);
    eprintln!("after the system prompt: {ta:?}");
    assert_eq!(ta, tb);
    assert!(la == lb, "logits differ");

    // A user turn fed after the system prompt, run in full and after a restore.
    let mut full = s.state(CTX);
    s.feed(&mut full, &s.system);
    s.feed(&mut full, &s.user);
    let mut restored = s.state(CTX);
    let o = promptcache::load(&file, &mut dev, s.key, &s.system, &mut restored).unwrap();
    assert!(matches!(o, LoadOutcome::Restored { .. }));
    s.feed(&mut restored, &s.user);
    assert_eq!(restored.pos, full.pos);
    let (ta, la) = s.generate(&mut full, GENERATE);
    let (tb, lb) = s.generate(&mut restored, GENERATE);
    eprintln!("after the user turn: {ta:?}");
    assert_eq!(ta, tb);
    assert!(la == lb, "logits differ");
}

#[test]
fn mismatches_are_detected_and_never_reused() {
    let s = setup();
    let mut dev = RamDisk::new(card());
    let vol = Volume::mount(&mut dev).unwrap();
    let file = vol.open(&mut dev, "/lmboot.kv").unwrap();
    let n = s.system.len();
    let mut st = s.state(CTX);
    s.feed(&mut st, &s.system);
    promptcache::save(&file, &mut dev, s.key, &s.system, &st).unwrap();

    let mut fresh = s.state(CTX);
    let mut load = |dev: &mut RamDisk<Vec<u8>>, key: u64, tokens: &[u32], ctx: usize| {
        fresh = s.state(ctx);
        let o = promptcache::load(&file, dev, key, tokens, &mut fresh).unwrap();
        if matches!(o, LoadOutcome::Mismatch { .. }) {
            assert_eq!(fresh.pos, 0, "a mismatch leaves the state reset");
        }
        o
    };
    assert!(matches!(
        load(&mut dev, s.key, &s.system, CTX),
        LoadOutcome::Restored { .. }
    ));
    // A changed prompt: one token different, one token more, one fewer.
    let mut other = s.system.clone();
    other[n / 2] = other[n / 2].wrapping_add(1);
    assert_eq!(why(load(&mut dev, s.key, &other, CTX)), WHY_PROMPT);
    let mut longer = s.system.clone();
    longer.push(s.user[0]);
    assert_eq!(why(load(&mut dev, s.key, &longer, CTX)), WHY_PROMPT);
    assert_eq!(
        why(load(&mut dev, s.key, &s.system[..n - 1], CTX)),
        WHY_PROMPT
    );
    // Another model.
    assert_eq!(
        why(load(
            &mut dev,
            promptcache::mix(s.key, b"other"),
            &s.system,
            CTX
        )),
        WHY_MODEL
    );
    // A context too small for the saved prompt.
    assert_eq!(why(load(&mut dev, s.key, &s.system, n - 1)), WHY_CONTEXT);

    // One payload byte damaged on the card, in the KV part: the checksum.
    let off = 512 + 4 * n as u64 + 4 * 49152 + 1000;
    let lba = file.map_block(off / 512).unwrap().lba;
    let at = lba as usize * 512 + (off % 512) as usize;
    dev.data_mut()[at] ^= 0x10;
    assert_eq!(why(load(&mut dev, s.key, &s.system, CTX)), WHY_CHECKSUM);
    dev.data_mut()[at] ^= 0x10;
    assert!(matches!(
        load(&mut dev, s.key, &s.system, CTX),
        LoadOutcome::Restored { .. }
    ));
    // And a logit byte.
    let off = 512 + 4 * n as u64 + 7;
    let lba = file.map_block(off / 512).unwrap().lba;
    let at = lba as usize * 512 + (off % 512) as usize;
    dev.data_mut()[at] ^= 0x01;
    assert_eq!(why(load(&mut dev, s.key, &s.system, CTX)), WHY_CHECKSUM);
}

#[test]
fn a_save_cut_by_a_power_loss_is_not_used() {
    let s = setup();
    let img = card();
    let mut st = s.state(CTX);
    s.feed(&mut st, &s.system);
    let needed_blocks = promptcache::required_file_bytes(&s.model.config, st.pos) / 512;
    // Cut after the invalidating header, in the payload, and just before the final header.
    for after_blocks in [1, needed_blocks / 2, needed_blocks] {
        let mut dev = FaultyDevice::new(
            RamDisk::new(img.clone()),
            &[Fault::PowerCut { after_blocks }],
        );
        let vol = Volume::mount(&mut dev).unwrap();
        let file = vol.open(&mut dev, "/lmboot.kv").unwrap();
        let e = promptcache::save(&file, &mut dev, s.key, &s.system, &st).unwrap_err();
        assert!(matches!(e, PromptCacheError::Io(_)), "{e:?}");
        assert!(e.to_string().contains("power cut"), "{e}");
        // The card comes back (a new boot): the half-written file is not used.
        let mut dev = RamDisk::new(dev.into_inner().into_inner());
        let mut fresh = s.state(CTX);
        let o = promptcache::load(&file, &mut dev, s.key, &s.system, &mut fresh).unwrap();
        assert_eq!(why(o), WHY_INCOMPLETE, "cut after {after_blocks} blocks");
        assert_eq!(fresh.pos, 0);
    }
}

#[test]
fn a_file_too_small_is_a_clear_error() {
    let s = setup();
    let img = card();
    let mut dev = RamDisk::new(img.clone());
    let vol = Volume::mount(&mut dev).unwrap();
    let small = vol.open(&mut dev, "/small.kv").unwrap();
    let mut st = s.state(CTX);
    s.feed(&mut st, &s.system);
    let e = promptcache::save(&small, &mut dev, s.key, &s.system, &st).unwrap_err();
    let needed = promptcache::required_file_bytes(&s.model.config, s.system.len());
    assert_eq!(
        e,
        PromptCacheError::FileTooSmall {
            size: SMALL_FILE_BYTES as u64,
            needed
        }
    );
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(
        msg.contains(&needed.to_string()) && msg.contains("at least 1 MiB"),
        "{msg}"
    );
    assert!(dev.into_inner() == img, "nothing written");
    // Tokens that do not match the state, and an empty prompt, are errors too.
    let mut dev = RamDisk::new(img);
    let file = drivers::fat::open(&mut dev, "/lmboot.kv").unwrap();
    assert!(matches!(
        promptcache::save(&file, &mut dev, s.key, &s.user, &st),
        Err(PromptCacheError::StateMismatch { .. })
    ));
}
