//! Allocation failure on the host load path: a global allocator that fails the n-th allocation
//! made inside a measured region, and a sweep of n over every allocation the runtime's whole run
//! makes (mount, `lmboot.txt`, GGUF open, model, tokenizer, buffers and run state, page cache, the
//! prompt cache saved on a first boot and restored on a second, and one chat turn), on a tiny
//! synthetic llama with the first tokens of a real SentencePiece vocabulary. Every run must end in
//! an error naming what ran out ("out of memory ...") or succeed; never a panic or an abort.
//!
//! std aborts the process when an infallible allocation fails, so the sweep runs in a child
//! process of this test binary: it prints each n before trying it, and when it dies the parent
//! knows which allocation aborted, runs that one again with a backtrace taken at the failing
//! allocation (the call site), and goes on from the next n.

mod common;

use common::models::{model_file_vocab, LLAMA};
use common::synth::Meta;
use drivers::block::RamDisk;
use inference::{Gguf, SliceStorage};
use runtime::console::Console;
use runtime::platform::Host;
use runtime::run::run;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Allocations counted so far in the measured region.
static COUNT: AtomicU64 = AtomicU64::new(0);
/// The allocation (1-based) that fails; 0: none.
static FAIL_AT: AtomicU64 = AtomicU64::new(0);

/// Record where each allocation is made, in [`SITES`].
static CENSUS: AtomicBool = AtomicBool::new(false);
/// The load step and the frames in lmboot's crates of each allocation of the census run, in
/// order.
static SITES: std::sync::Mutex<Vec<(inference::oom::Stage, String)>> =
    std::sync::Mutex::new(Vec::new());

thread_local! {
    /// This thread is in the measured region (other threads of the test harness are not counted).
    static MEASURED: Cell<bool> = const { Cell::new(false) };
}

/// Fails allocation number [`FAIL_AT`] of the measured region; forwards everything to `System`.
struct FailNth;

impl FailNth {
    /// Count an allocation; false if it is the one to fail.
    fn allowed() -> bool {
        if !MEASURED.with(|m| m.get()) {
            return true;
        }
        let n = COUNT.fetch_add(1, Ordering::Relaxed) + 1;
        if CENSUS.load(Ordering::Relaxed) {
            // The backtrace allocates: not counted.
            MEASURED.with(|m| m.set(false));
            let bt = std::backtrace::Backtrace::force_capture().to_string();
            let step = inference::oom::stage();
            SITES.lock().unwrap().push((step, our_frames(&bt)));
            MEASURED.with(|m| m.set(true));
        }
        n != FAIL_AT.load(Ordering::Relaxed)
    }
}

// SAFETY: forwards to `System` (a correct allocator) and may return null, which the contract
// allows.
unsafe impl GlobalAlloc for FailNth {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::allowed() {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::allowed() {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !Self::allowed() {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: FailNth = FailNth;

/// The frames of a backtrace in lmboot's own crates (and the test), with their source lines.
fn our_frames(bt: &str) -> String {
    let lines: Vec<&str> = bt.lines().collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let own = ["inference::", "runtime::", "drivers::"]
            .iter()
            .any(|c| l.contains(c));
        if own {
            out.push_str(l.trim());
            if let Some(at) = lines
                .get(i + 1)
                .filter(|n| n.trim_start().starts_with("at "))
            {
                out.push_str("\n      ");
                out.push_str(at.trim());
            }
            out.push('\n');
        }
    }
    out
}

/// Run `f` in the measured region with allocation `fail_at` failing (0: none); its result and the
/// number of allocations it made.
fn measured<T>(fail_at: u64, f: impl FnOnce() -> T) -> (T, u64) {
    COUNT.store(0, Ordering::Relaxed);
    FAIL_AT.store(fail_at, Ordering::Relaxed);
    MEASURED.with(|m| m.set(true));
    let r = f();
    MEASURED.with(|m| m.set(false));
    FAIL_AT.store(0, Ordering::Relaxed);
    (r, COUNT.load(Ordering::Relaxed))
}

// ---------------------------------------------------------------------------------------------
// The card: a tiny llama with a real vocabulary, in chat mode with a prompt cache.

/// Tokens kept from the SentencePiece vocabulary: the specials, the 256 byte tokens and the first
/// pieces (byte fallback spells everything else).
const VOCAB: usize = 320;
const KV_FILE: &str = "/lmboot.kv";
/// A turn typed on the console: a message, then Ctrl-D to end the chat.
const TYPED: &[u8] = b"Hello there\r\x04";

/// SmolLM2-135M-Instruct's chat template.
const CHAT_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The tiny model's file, with the first [`VOCAB`] tokens of llama.cpp's SentencePiece test
/// vocabulary.
fn model_bytes() -> Vec<u8> {
    let path = common::shared().join("fixtures/vocab/ggml-vocab-llama-spm.gguf");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).unwrap();
    let arr = |k| g.array(&src, k).unwrap();
    let mut tokens = arr("tokenizer.ggml.tokens").strings().unwrap();
    let mut scores = arr("tokenizer.ggml.scores").f32s().unwrap();
    let mut types = arr("tokenizer.ggml.token_type").ints().unwrap();
    tokens.truncate(VOCAB);
    scores.truncate(VOCAB);
    types.truncate(VOCAB);
    let mut w = model_file_vocab(&LLAMA, VOCAB);
    w.meta("general.name", Meta::Str("alloc-sweep".into()))
        .meta("tokenizer.ggml.model", Meta::Str("llama".into()))
        .meta("tokenizer.ggml.tokens", Meta::Strs(tokens))
        .meta("tokenizer.ggml.scores", Meta::F32s(scores))
        .meta(
            "tokenizer.ggml.token_type",
            Meta::I32s(types.iter().map(|&t| t as i32).collect()),
        )
        .meta("tokenizer.ggml.bos_token_id", Meta::U32(1))
        .meta("tokenizer.ggml.eos_token_id", Meta::U32(2))
        // A ChatML template with a default system prompt (SmolLM2's), as real models carry:
        // the chat reads its default from it.
        .meta("tokenizer.chat_template", Meta::Str(CHAT_TEMPLATE.into()));
    w.bytes()
}

/// A card image with the model, `lmboot.txt` (chat with the template's default system prompt,
/// greedy, a prompt cache that may be written)
/// and a zero-filled prompt-cache file.
fn card() -> &'static [u8] {
    static CARD: OnceLock<Vec<u8>> = OnceLock::new();
    CARD.get_or_init(|| {
        let cfg = format!(
            "model = {}\nmode = chat\nn = 4\ntemperature = 0\nctx = 160\n\
             prompt_cache = {KV_FILE}\nallow_write = true\ncores = 1\n",
            xtask::MODEL_ON_CARD
        );
        let model = model_bytes();
        let kv = vec![0u8; 256 << 10];
        let img = std::env::temp_dir().join(format!("lmboot-alloc-{}.img", std::process::id()));
        use xtask::image::Content;
        xtask::image::make_image(
            &img,
            &[
                ("lmboot.txt", Content::Bytes(cfg.as_bytes())),
                (&xtask::MODEL_ON_CARD[1..], Content::Bytes(&model)),
                (&KV_FILE[1..], Content::Bytes(&kv)),
            ],
            0,
        )
        .unwrap();
        let bytes = std::fs::read(&img).unwrap();
        let _ = std::fs::remove_file(&img);
        bytes
    })
}

/// The console: [`TYPED`] as input, the output kept.
struct Typist {
    input: &'static [u8],
    out: Vec<u8>,
}

impl Console for Typist {
    fn write_bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
    fn read_byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.input.split_first()?;
        self.input = rest;
        Some(b)
    }
}

/// The stages swept: a first boot (the system prompt run and saved to the prompt cache, one chat
/// turn) and a second boot on the card the first left (the prompt cache restored, one turn).
const STAGES: [&str; 2] = ["first boot", "second boot"];

/// The card as the stage starts it.
fn stage_card(stage: &str) -> Vec<u8> {
    let mut disk = card().to_vec();
    if stage == "second boot" {
        let (r, uart) = boot(&mut disk);
        r.unwrap_or_else(|e| panic!("first boot: {e}\n{uart}"));
        assert!(uart.contains("saved"), "the first boot saves: {uart}");
    }
    disk
}

/// One boot over `disk` (changed in place); the result and the console text.
fn boot(disk: &mut [u8]) -> (Result<(), String>, String) {
    let mut con = Typist {
        input: TYPED,
        out: Vec::with_capacity(1 << 20),
    };
    let r = run_on(disk, &mut con);
    (
        r.map_err(|e| e.to_string()),
        String::from_utf8_lossy(&con.out).into_owned(),
    )
}

/// The run alone (what the sweep measures): the console is made before, the error's text after.
fn run_on(disk: &mut [u8], con: &mut Typist) -> Result<(), runtime::run::RunError> {
    run(RamDisk::new(disk), con, &Host::new(1 << 30))
}

// ---------------------------------------------------------------------------------------------
// The child: sweep one stage, each n in a forked copy of itself.

/// The stage the child sweeps.
const CHILD_ENV: &str = "LMBOOT_ALLOC_SWEEP";

/// How one failed allocation ended.
enum Ending {
    Ok,
    /// An error naming the allocation.
    Clean,
    /// An error that does not say memory ran out.
    Unclear(String),
    Panic(String),
    /// The process died (an infallible allocation failed): the function that asked for it (the
    /// innermost frame in lmboot's crates) and the frames with their source lines.
    Abort {
        site: String,
        frames: String,
    },
}

/// Boot with allocation `n` failing, in a forked copy of this process (so that an abort ends the
/// copy only, and the copy's writes to the card vanish with it): how it ended. An abort is placed
/// by the census run's backtrace of allocation `n` (the run is deterministic; a backtrace taken in
/// each dying copy would parse the debug information afresh, 0.5 s each).
fn fail_nth(n: u64, disk: &mut [u8], con: &mut Typist) -> Ending {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe` writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: this process runs one test on one thread (`--test-threads=1`); the copy only runs
    // the boot and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // The copy: stderr (the abort's backtrace) and the verdict go into the pipe.
        // SAFETY: valid descriptors from `pipe`.
        unsafe {
            libc::dup2(fds[1], 2);
            libc::close(fds[0]);
        }
        let (r, _) = measured(n, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_on(disk, con)))
        });
        let verdict = match r {
            Ok(Ok(())) => "ok".to_string(),
            Ok(Err(e)) => format!("err {e}"),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                format!("panic {msg}")
            }
        };
        let line = format!("\nverdict {}", verdict.replace('\n', " "));
        // SAFETY: writing a buffer we own to our descriptor, then leaving without unwinding.
        unsafe {
            libc::write(fds[1], line.as_ptr().cast(), line.len());
            libc::_exit(0)
        }
    }
    // SAFETY: closing our copy of the write end, so that reading ends when the child is gone.
    unsafe { libc::close(fds[1]) };
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into a buffer we own.
        let got = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
        if got <= 0 {
            break;
        }
        text.extend_from_slice(&buf[..got as usize]);
    }
    let mut status = 0;
    // SAFETY: waiting for our own child; closing our read end.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
        libc::close(fds[0]);
    }
    let text = String::from_utf8_lossy(&text);
    match text.rsplit_once("\nverdict ") {
        Some((_, v)) => match v.split_once(' ').unwrap_or((v, "")) {
            ("ok", _) => Ending::Ok,
            ("err", e) if names_memory(e) => Ending::Clean,
            ("err", e) => Ending::Unclear(e.into()),
            (_, p) => Ending::Panic(p.into()),
        },
        None => {
            // No verdict: the copy died (std printed the allocation's size).
            let size = text.lines().find(|l| l.starts_with("memory allocation of"));
            let census = SITES.lock().unwrap();
            let at = census.get(n as usize - 1).map_or("", |s| s.1.as_str());
            let frames = format!("{}\n{at}", size.unwrap_or("(no message)"));
            let site = at
                .lines()
                .next()
                .map_or("(no frame in lmboot)", |l| {
                    l.split_once(": ").map_or(l, |(_, f)| f)
                })
                .to_string();
            Ending::Abort { site, frames }
        }
    }
}

/// An error that says memory ran out ("out of memory allocating X", or the FAT reader's "no
/// memory for the extent list").
fn names_memory(e: &str) -> bool {
    e.contains("out of memory") || e.contains("no memory for")
}

#[test]
fn child() {
    let Ok(arg) = std::env::var(CHILD_ENV) else {
        return; // Run by the parent only.
    };
    let stage = arg.as_str();
    let mut disk = stage_card(stage);
    let mut con = Typist {
        input: TYPED,
        out: Vec::with_capacity(1 << 20),
    };
    CENSUS.store(true, Ordering::Relaxed);
    let (r, total) = {
        let mut copy = disk.clone();
        measured(0, || run_on(&mut copy, &mut con))
    };
    CENSUS.store(false, Ordering::Relaxed);
    let uart = String::from_utf8_lossy(&con.out).into_owned();
    r.unwrap_or_else(|e| panic!("{stage} without failures: {e}\n{uart}"));
    let mut out = std::io::stdout().lock();
    writeln!(out, "\ntotal {total}").unwrap();
    con.out.clear();
    con.input = TYPED;
    for n in 1..=total {
        let step = SITES.lock().unwrap()[n as usize - 1].0.name();
        let line = match fail_nth(n, &mut disk, &mut con) {
            Ending::Ok => "ok".into(),
            Ending::Clean => "clean".into(),
            Ending::Unclear(e) => format!("unclear {e}"),
            Ending::Panic(p) => format!("panic {p}"),
            Ending::Abort { site, frames } => {
                format!("abort {site}\t{}", frames.replace('\n', "\t"))
            }
        };
        writeln!(out, "{n} {line}").unwrap();
        writeln!(out, "step {n} {step}").unwrap();
    }
    writeln!(out, "done").unwrap();
}

// ---------------------------------------------------------------------------------------------
// The parent: run the child for each stage, check what each n did.

/// Sweep `stage` over every allocation in a child process: (allocations, how each ended).
fn sweep(stage: &str) -> (u64, Vec<(u64, Ending)>) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, stage)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l == "done"),
        "{stage}: the sweep did not finish:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut total = 0;
    let mut endings = Vec::new();
    let mut steps = Vec::new();
    for line in stdout.lines() {
        if let Some(t) = line.strip_prefix("total ") {
            total = t.parse().unwrap();
            continue;
        }
        if let Some((_, step)) = line.strip_prefix("step ").and_then(|r| r.split_once(' ')) {
            steps.push(step.to_string());
            continue;
        }
        let Some((n, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        let (kind, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let ending = match kind {
            "ok" => Ending::Ok,
            "clean" => Ending::Clean,
            "unclear" => Ending::Unclear(text.into()),
            "panic" => Ending::Panic(text.into()),
            _ => {
                let (site, frames) = text.split_once('\t').unwrap_or((text, ""));
                Ending::Abort {
                    site: site.into(),
                    frames: frames.replace('\t', "\n"),
                }
            }
        };
        endings.push((n, ending));
    }
    // Per load step: allocations, clean errors, aborts.
    let mut by_step: Vec<(String, [usize; 3])> = Vec::new();
    for (step, (_, e)) in steps.iter().zip(&endings) {
        let i = match by_step.iter().position(|(s, _)| s == step) {
            Some(i) => i,
            None => {
                by_step.push((step.clone(), [0; 3]));
                by_step.len() - 1
            }
        };
        by_step[i].1[0] += 1;
        match e {
            Ending::Clean => by_step[i].1[1] += 1,
            Ending::Abort { .. } => by_step[i].1[2] += 1,
            _ => {}
        }
    }
    for (step, [n, clean, aborts]) in by_step {
        eprintln!("  {stage}, {step}: {n} allocations, {clean} clean errors, {aborts} aborts");
    }
    (total, endings)
}

/// Functions whose allocations may still abort when they fail (std's infallible `Vec`, `String`,
/// `format!` growth). Empty: every allocation of the load path fails cleanly. The sweep fails on
/// an abort anywhere not listed here, and says when a listed one no longer aborts.
const STILL_INFALLIBLE: &[&str] = &[];

#[test]
fn every_allocation_of_the_load_path_fails_cleanly() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let mut bad = Vec::new();
    let mut known = std::collections::BTreeMap::<String, usize>::new();
    for stage in STAGES {
        let t0 = std::time::Instant::now();
        let (total, endings) = sweep(stage);
        let count = |f: fn(&Ending) -> bool| endings.iter().filter(|(_, e)| f(e)).count();
        eprintln!(
            "{stage}: {total} allocations, each failed once: {} clean errors, {} runs that went \
             on, {} aborts, in {:.1} s",
            count(|e| matches!(e, Ending::Clean)),
            count(|e| matches!(e, Ending::Ok)),
            count(|e| matches!(e, Ending::Abort { .. })),
            t0.elapsed().as_secs_f64()
        );
        assert!(total > 0, "{stage}: no allocation counted");
        assert_eq!(
            endings.len() as u64,
            total,
            "{stage}: every allocation swept"
        );
        for (n, e) in endings {
            match e {
                Ending::Ok | Ending::Clean => {}
                Ending::Abort { site, .. } if STILL_INFALLIBLE.contains(&site.as_str()) => {
                    *known.entry(site).or_default() += 1;
                }
                Ending::Abort { site, frames } => bad.push(format!(
                    "{stage}, allocation {n}: aborted in {site}\n{frames}"
                )),
                Ending::Unclear(e) => bad.push(format!(
                    "{stage}, allocation {n}: an error not naming memory: {e}"
                )),
                Ending::Panic(p) => bad.push(format!("{stage}, allocation {n}: panic: {p}")),
            }
        }
    }
    for site in STILL_INFALLIBLE {
        match known.get(*site) {
            Some(n) => eprintln!("still infallible: {site} ({n} allocations)"),
            None => eprintln!("no longer aborts: {site} (take it off STILL_INFALLIBLE)"),
        }
    }
    assert!(
        bad.is_empty(),
        "{} failures:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
