//! A long chat session on a tiny model: thousands of turns through the runtime's whole run (the
//! card, the page cache, the prompt cache, the chat step and its line editor, the same code the
//! kernel runs) with `/reset`, JSON mode, Ctrl-C during replies, typing during replies and random
//! line-editor bytes (escape sequences, erasing keys, control bytes, broken UTF-8, overlong lines).
//!
//! A counting global allocator measures the heap at each prompt: after a warm-up that reaches
//! every kind of input once, the high-water mark never rises again, and the live bytes at the
//! prompt after each `/reset` are the same. The KV cache's fill (from the chat's own turn lines)
//! never passes the context and is back to the system piece after each `/reset`. Every input is
//! answered by a prompt within a bounded number of console polls (no hang).
//!
//! The model is random (F32, llama-shaped, 64 wide) over the SentencePiece vocabulary of the
//! tokenizer fixtures, so its replies are gibberish of real tokens. `soak_session` runs a couple of
//! thousand inputs in the suite; `soak_for_minutes` (ignored) runs for `LMBOOT_SOAK_MINUTES`
//! (default 60) and prints the figures every minute:
//!
//! ```text
//! LMBOOT_SOAK_MINUTES=60 cargo test -p lmboot-tests --test soak -- --ignored --nocapture
//! ```

mod common;

use common::models::{model_file_vocab, LLAMA};
use common::synth::Meta;
use drivers::block::RamDisk;
use inference::gguf::Value;
use inference::{Gguf, SliceStorage};
use runtime::console::Console;
use runtime::platform::Host;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting live bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed on to `System` unchanged; the counters only watch.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for this method, passed on to `System` unchanged.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for this method, passed on to `System` unchanged.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract for this method, passed on to `System` unchanged.
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: the caller's contract for this method, passed on to `System` unchanged.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
            grew(new);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Tokens per reply at most.
const MAX_REPLY: usize = 8;
/// KV positions (the model's whole context): a conversation fills it within a dozen turns.
const CTX: usize = 256;
/// Empty polls in a row, with nothing written between, that mean the chat waits at its prompt
/// (a reply polls once per token, so at most [`MAX_REPLY`] times in a row without output).
const IDLE_POLLS: u32 = 4 * MAX_REPLY as u32;
/// Polls after an input within which the chat must be back at its prompt.
const MAX_POLLS_PER_INPUT: u64 = 20_000;
/// Most output kept per input (preallocated: the capture never allocates during the session).
const OUT_CAP: usize = 1 << 16;
/// Bytes typed during one reply (past the chat's 4096-byte type-ahead).
const TYPE_AHEAD: usize = 5000;
const CTRL_C: u8 = 0x03;
const CTRL_D: u8 = 0x04;
const CTRL_U: u8 = 0x15;

const WORDS: &[&str] = &[
    "hello",
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "tell",
    "me",
    "about",
    "JSON",
    "boards",
    "ring",
    "über",
    "naïve",
    "日本",
    "🙂",
    "42",
    "{",
    "}",
    "\"quoted\"",
    "//not a command",
];

/// What an input was, for the checks at the prompt after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Reset,
    JsonOn,
    Other,
    End,
}

/// The figures of a session.
#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    inputs: u64,
    /// Live heap bytes at the chat's first prompt (the loaded model, the card image, the state).
    start_live: usize,
    replies: u64,
    resets: u64,
    interrupted: u64,
    /// Replies in JSON mode.
    json_replies: u64,
    /// Replies that Ctrl-C stopped.
    stopped: u64,
    context_full: u64,
    /// Live heap bytes at the prompt after the first `/reset` past the warm-up.
    reset_live: Option<usize>,
    /// Smallest and largest live bytes at the prompt after a `/reset` past the warm-up.
    reset_live_range: (usize, usize),
    /// High-water mark at the end of the warm-up.
    warm_peak: usize,
    /// KV positions used after a `/reset` (the system piece), and the most after any turn.
    reset_fill: Option<usize>,
    max_fill: usize,
}

/// The serial line of the session: scripted input from a seeded generator, output inspected at
/// each prompt.
struct Script {
    rng: u64,
    input: VecDeque<u8>,
    /// Typed during the next reply.
    during: VecDeque<u8>,
    /// Ctrl-C after this many polls of the reply.
    interrupt_after: Option<u32>,
    out: Vec<u8>,
    quiet_polls: u32,
    polls_since_input: u64,
    kind: Kind,
    /// Inputs before the measurements start.
    warmup: u64,
    /// When to stop (inputs, or time).
    until: Until,
    started: Instant,
    last_print: Instant,
    print_every: Option<Duration>,
    f: Figures,
    prelude: usize,
    ended: bool,
}

#[derive(Debug, Clone, Copy)]
enum Until {
    Inputs(u64),
    Time(Duration),
}

impl Console for Script {
    fn write_bytes(&mut self, b: &[u8]) {
        self.quiet_polls = 0;
        let room = OUT_CAP - self.out.len();
        self.out.extend_from_slice(&b[..b.len().min(room)]);
    }

    fn read_byte(&mut self) -> Option<u8> {
        if let Some(b) = self.input.pop_front() {
            return Some(b);
        }
        self.polls_since_input += 1;
        assert!(
            self.polls_since_input < MAX_POLLS_PER_INPUT,
            "input {} ({:?}): no prompt after {MAX_POLLS_PER_INPUT} polls; output: {}",
            self.f.inputs,
            self.kind,
            String::from_utf8_lossy(&self.out)
        );
        if let Some(b) = self.during.pop_front() {
            return Some(b);
        }
        if let Some(n) = self.interrupt_after {
            if self.polls_since_input >= n as u64 {
                self.interrupt_after = None;
                self.f.interrupted += 1;
                return Some(CTRL_C);
            }
        }
        self.quiet_polls += 1;
        if self.quiet_polls < IDLE_POLLS {
            return None;
        }
        // At the prompt: measure, check, then type the next input.
        assert!(!self.ended, "the chat went on after Ctrl-D");
        self.at_prompt();
        self.next_input();
        None
    }
}

/// The number after the last `pat` in `hay`, and the one after `then` following it.
fn numbers_after(hay: &[u8], pat: &[u8], then: &[u8]) -> Option<(usize, usize)> {
    let at = hay.windows(pat.len()).rposition(|w| w == pat)? + pat.len();
    let num = |s: &[u8]| -> Option<(usize, usize)> {
        let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let v = std::str::from_utf8(&s[..n]).ok()?.parse().ok()?;
        Some((v, n))
    };
    let (a, n) = num(&hay[at..])?;
    let rest = &hay[at + n..];
    let j = rest.windows(then.len()).position(|w| w == then)? + then.len();
    let (b, _) = num(&rest[j..])?;
    Some((a, b))
}

fn contains(hay: &[u8], pat: &[u8]) -> bool {
    hay.windows(pat.len()).any(|w| w == pat)
}

impl Script {
    fn new(until: Until, warmup: u64, print_every: Option<Duration>) -> Self {
        Script {
            rng: 0x50a6_0001,
            input: VecDeque::with_capacity(2 * TYPE_AHEAD),
            during: VecDeque::with_capacity(2 * TYPE_AHEAD),
            interrupt_after: None,
            out: Vec::with_capacity(OUT_CAP),
            quiet_polls: 0,
            polls_since_input: 0,
            kind: Kind::Other,
            warmup,
            until,
            started: Instant::now(),
            last_print: Instant::now(),
            print_every,
            f: Figures::default(),
            prelude: 0,
            ended: false,
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// The checks after the input just answered, on the output it produced.
    fn at_prompt(&mut self) {
        if self.f.inputs == 0 {
            // The chat's first prompt: the load's own high-water mark (the card image, the
            // weights) is behind; from here on the mark is the chat's.
            let live = LIVE.load(Ordering::Relaxed);
            PEAK.store(live, Ordering::Relaxed);
            self.f.start_live = live;
        }
        let (live, peak) = (LIVE.load(Ordering::Relaxed), PEAK.load(Ordering::Relaxed));
        let out = &self.out;
        let past_warmup = self.f.inputs > self.warmup;
        if self.f.inputs == self.warmup {
            self.f.warm_peak = peak;
        }
        if past_warmup {
            assert_eq!(
                peak, self.f.warm_peak,
                "input {} ({:?}): the heap's high-water mark rose from {} to {peak} bytes after the warm-up",
                self.f.inputs, self.kind, self.f.warm_peak
            );
        }
        match self.kind {
            Kind::Message => {
                if let Some((_, used)) = numbers_after(out, b"(context ", b" -> ") {
                    self.f.replies += 1;
                    let (_, of) = numbers_after(out, b" -> ", b" of ").unwrap_or((0, 0));
                    assert!(
                        used <= CTX && of == CTX,
                        "context {used} of {of} after a turn (ctx {CTX})"
                    );
                    self.f.max_fill = self.f.max_fill.max(used);
                }
                if contains(out, b"JSON value complete") {
                    self.f.json_replies += 1;
                }
                if contains(out, b"stopped (Ctrl-C)]") {
                    self.f.stopped += 1;
                }
                if contains(out, b"context full") {
                    self.f.context_full += 1;
                }
            }
            Kind::Reset => {
                let (used, of) = contains(out, b"conversation reset (")
                    .then(|| numbers_after(out, b"); context ", b" of "))
                    .flatten()
                    .unwrap_or_else(|| {
                        panic!(
                            "no reset line after /reset: {}",
                            String::from_utf8_lossy(out)
                        )
                    });
                assert_eq!(of, CTX);
                let first = *self.f.reset_fill.get_or_insert(used);
                assert_eq!(
                    used, first,
                    "after /reset the KV cache holds {used} positions, the first time {first}"
                );
                if self.f.resets > 0 {
                    assert!(
                        contains(out, b"restored"),
                        "/reset did not restore the system piece from the prompt cache: {}",
                        String::from_utf8_lossy(out)
                    );
                }
                self.f.resets += 1;
                if past_warmup {
                    let base = *self.f.reset_live.get_or_insert(live);
                    let (lo, hi) = &mut self.f.reset_live_range;
                    *lo = if *lo == 0 { live } else { (*lo).min(live) };
                    *hi = (*hi).max(live);
                    assert_eq!(
                        live, base,
                        "input {}: {live} heap bytes live after /reset, {base} after the first one past the warm-up",
                        self.f.inputs
                    );
                }
            }
            Kind::JsonOn => assert!(
                contains(out, b"JSON mode on"),
                "/json on refused: {}",
                String::from_utf8_lossy(out)
            ),
            Kind::Other | Kind::End => {}
        }
        if let Some(every) = self.print_every {
            if self.last_print.elapsed() >= every {
                self.last_print = Instant::now();
                self.print(live, peak);
            }
        }
    }

    fn print(&self, live: usize, peak: usize) {
        let f = &self.f;
        eprintln!(
            "soak: {:.0} s: {} inputs, {} replies ({} in JSON mode), {} resets, {} Ctrl-C ({} replies stopped), {} context full; heap {live} live, {peak} high-water (at the first prompt {} live; at warm-up end {} high-water); after /reset {:?} live; KV fill after /reset {:?}, most {} of {CTX}",
            self.started.elapsed().as_secs_f64(),
            f.inputs,
            f.replies,
            f.json_replies,
            f.resets,
            f.interrupted,
            f.stopped,
            f.context_full,
            f.start_live,
            f.warm_peak,
            f.reset_live_range,
            f.reset_fill,
            f.max_fill
        );
    }

    fn done(&self) -> bool {
        match self.until {
            Until::Inputs(n) => self.f.inputs >= n,
            Until::Time(d) => self.f.inputs > self.warmup && self.started.elapsed() >= d,
        }
    }

    /// Type the next input.
    fn next_input(&mut self) {
        self.out.clear();
        self.quiet_polls = 0;
        self.polls_since_input = 0;
        self.f.inputs += 1;
        if self.kind == Kind::End {
            self.input.push_back(CTRL_D);
            self.ended = true;
            return;
        }
        if self.done() {
            // Ctrl-C clears whatever is half-typed; Ctrl-D on the empty line then ends the chat.
            self.kind = Kind::End;
            self.input.push_back(CTRL_C);
            return;
        }
        // A partial line typed during the last reply is erased first.
        self.input.extend(b"x");
        self.input.push_back(CTRL_U);
        let prelude = [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11,
        ];
        let pick = match prelude.get(self.prelude) {
            Some(&p) => {
                self.prelude += 1;
                p
            }
            None => self.below(44),
        };
        self.kind = match pick {
            0 | 12..=24 => self.message(),
            1 => self.overlong(),
            2 => {
                self.message();
                self.garbage_during(TYPE_AHEAD);
                Kind::Message
            }
            3 => self.line(b"/json on"),
            4 | 25..=27 => {
                self.message();
                self.interrupt_after = Some(1 + self.below(MAX_REPLY as u64 - 2) as u32);
                Kind::Message
            }
            5 => self.line(b"/json off"),
            6 | 28..=31 => self.garbage_line(),
            7 => self.line(b"/stats"),
            8 => self.line(b"/help"),
            9 => self.line(b"/temp 0.7"),
            10 => self.line(b"/nonsense"),
            11 | 32..=35 | 40..=43 => self.line(b"/reset"),
            36 => self.line(b"/json on"),
            37 => self.line(b"/json off"),
            38 => {
                self.message();
                let n = self.below(200) as usize;
                self.garbage_during(n);
                Kind::Message
            }
            _ => {
                let t: &[u8] = if self.below(2) == 0 {
                    b"/temp 1"
                } else {
                    b"/stats"
                };
                self.line(t)
            }
        };
    }

    fn line(&mut self, text: &[u8]) -> Kind {
        self.input.extend(text);
        self.input.push_back(b'\r');
        if text == b"/reset" {
            Kind::Reset
        } else if text == b"/json on" {
            Kind::JsonOn
        } else {
            Kind::Other
        }
    }

    fn message(&mut self) -> Kind {
        let n = 1 + self.below(10);
        for i in 0..n {
            if i > 0 {
                self.input.push_back(b' ');
            }
            let w = WORDS[self.below(WORDS.len() as u64) as usize];
            self.input.extend(w.as_bytes());
        }
        // CR, LF or CR LF.
        match self.below(3) {
            0 => self.input.push_back(b'\r'),
            1 => self.input.push_back(b'\n'),
            _ => self.input.extend(b"\r\n"),
        }
        Kind::Message
    }

    /// A line past the editor's limit: the rest is refused with a bell, the line is sent.
    fn overlong(&mut self) -> Kind {
        for i in 0..3000 {
            self.input.push_back(if i % 7 == 6 {
                b' '
            } else {
                b'a' + (i % 26) as u8
            });
        }
        self.input.push_back(b'\r');
        Kind::Message
    }

    /// One byte of editor garbage: anything but Enter, Ctrl-C and Ctrl-D.
    fn garbage_byte(&mut self) -> u8 {
        loop {
            let b = self.next() as u8;
            if ![b'\r', b'\n', CTRL_C, CTRL_D].contains(&b) {
                return b;
            }
        }
    }

    /// Editor bytes: keys, escape sequences, erasing keys, broken UTF-8.
    fn garbage(&mut self, n: usize, into_during: bool) {
        const PIECES: &[&[u8]] = &[
            b"\x1b[A",
            b"\x1b[1;5D",
            b"\x1bOP",
            b"\x1b[999999999999999999~",
            b"\x1b",
            b"\x7f",
            b"\x08",
            b"\x15",
            b"\x17",
            b"\xc3\xa9",
            b"\xe6\x97\xa5",
            b"\xf0\x9f\x99\x82",
            b"\xc3",
            b"\xff",
            b"\x9b",
            b"\x07",
            b" ",
            b"word",
        ];
        let mut left = n;
        while left > 0 {
            let r = self.below(4);
            let piece: &[u8] = if r == 0 {
                &[self.garbage_byte()]
            } else {
                PIECES[self.below(PIECES.len() as u64) as usize]
            };
            let piece = &piece[..piece.len().min(left)];
            left -= piece.len();
            let q = if into_during {
                &mut self.during
            } else {
                &mut self.input
            };
            q.extend(piece);
        }
    }

    fn garbage_during(&mut self, n: usize) {
        self.garbage(n, true);
        // Ends outside any escape sequence.
        self.during.push_back(b'x');
    }

    fn garbage_line(&mut self) -> Kind {
        let n = 1 + self.below(300) as usize;
        self.garbage(n, false);
        self.input.extend(b"x\r");
        Kind::Message
    }
}

/// The tiny model: llama-shaped random F32 weights over the SentencePiece fixture's vocabulary
/// (its tokenizer entries copied as they are).
fn model() -> Vec<u8> {
    let vocab_path = common::shared().join("fixtures/vocab/ggml-vocab-llama-spm.gguf");
    let bytes = std::fs::read(&vocab_path).unwrap();
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).unwrap();
    assert!(g.tensors.is_empty(), "the vocabulary file has no tensors");
    let Some(Value::Array(tokens)) = g.get("tokenizer.ggml.tokens") else {
        panic!("no token list in {}", vocab_path.display());
    };
    let mut w = model_file_vocab(&LLAMA, tokens.len as usize);
    // Entry i spans from its offset to the next entry's (the last one to the end of the file).
    let ends = g
        .metadata
        .iter()
        .skip(1)
        .map(|e| e.offset)
        .chain([bytes.len() as u64]);
    for (e, end) in g.metadata.iter().zip(ends) {
        if !e.key.starts_with("tokenizer.") {
            continue;
        }
        let raw = &bytes[e.offset as usize..end as usize];
        let value = &raw[8 + e.key.len()..];
        let ty = u32::from_le_bytes(value[..4].try_into().unwrap());
        w.meta(
            &e.key,
            Meta::Raw {
                ty,
                bytes: value[4..].to_vec(),
            },
        );
    }
    w.bytes()
}

/// A card image with the model, a chat configuration and a prompt-cache file.
fn card() -> Vec<u8> {
    let model = model();
    let cfg = format!(
        "model = {}\nmode = chat\nn = {MAX_REPLY}\nctx = {CTX}\ntemperature = 0.9\ntop_k = 40\nseed = 7\nsystem = You are a small test model.\nallow_write = true\n",
        xtask::MODEL_ON_CARD
    );
    let kv = vec![0u8; 1 << 20];
    let img = std::env::temp_dir().join(format!("lmboot-soak-{}.img", std::process::id()));
    use xtask::image::Content;
    xtask::image::make_image(
        &img,
        &[
            ("lmboot.txt", Content::Bytes(cfg.as_bytes())),
            (xtask::MODEL_ON_CARD, Content::Bytes(&model)),
            (xtask::PROMPT_CACHE_ON_CARD, Content::Bytes(&kv)),
        ],
        0,
    )
    .unwrap();
    let bytes = std::fs::read(&img).unwrap();
    let _ = std::fs::remove_file(&img);
    bytes
}

/// Run the session to its end; its figures.
fn soak(until: Until, warmup: u64, print_every: Option<Duration>) -> Figures {
    let mut con = Script::new(until, warmup, print_every);
    let host = Host::new(1 << 30);
    let card = card();
    // The heap without the card image, which the run drops with its device.
    let before = LIVE.load(Ordering::Relaxed) - card.capacity();
    let dev = RamDisk::new(card);
    let r = runtime::run::run(dev, &mut con, &host);
    if let Err(e) = r {
        panic!(
            "the run failed after {} inputs: {e}; last output: {}",
            con.f.inputs,
            String::from_utf8_lossy(&con.out)
        );
    }
    assert!(con.ended, "the chat ended before its Ctrl-D");
    let f = con.f;
    let after = LIVE.load(Ordering::Relaxed);
    con.print(after, PEAK.load(Ordering::Relaxed));
    eprintln!(
        "soak: {before} heap bytes live before the run (without the card image), {after} after it"
    );
    // Everything the run allocated went back.
    assert_eq!(
        after, before,
        "heap bytes live before the run (without the card image) and after it"
    );
    assert!(f.reset_live.is_some(), "no /reset past the warm-up");
    assert!(f.replies > f.inputs / 3, "few replies: {f:?}");
    assert!(
        f.interrupted > 0 && f.stopped > 0 && f.context_full > 0 && f.json_replies > 0,
        "{f:?}"
    );
    assert!(
        f.reset_fill.is_some_and(|n| n > 0 && n < f.max_fill),
        "{f:?}"
    );
    f
}

#[test]
fn soak_session() {
    let t = Instant::now();
    let f = soak(Until::Inputs(2000), 200, None);
    eprintln!(
        "soak: {} inputs in {:.1} s",
        f.inputs,
        t.elapsed().as_secs_f64()
    );
}

/// The same session for `LMBOOT_SOAK_MINUTES` minutes (default 60), figures every minute.
#[test]
#[ignore = "an hour by default; run with --ignored (see the file's comment)"]
fn soak_for_minutes() {
    let minutes: u64 = std::env::var("LMBOOT_SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(60);
    soak(
        Until::Time(Duration::from_secs(minutes * 60)),
        200,
        Some(Duration::from_secs(60)),
    );
}
