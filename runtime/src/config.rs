//! The configuration file on the card (`lmboot.txt`): `key = value` lines, `#` comments.
//!
//! Every key is checked: an unknown key, a repeated key, a value that does not parse, NaN, or a
//! number outside its range is an error naming the key, the line and what is allowed. Prompts may
//! use the escapes `\n`, `\t` and `\\` to hold several lines.
#![forbid(unsafe_code)]

use alloc::borrow::Cow;
use alloc::string::String;
use core::fmt;
use inference::oom::OutOfMemory;
use inference::sampler::{Given, SamplerConfig};
use inference::speculate::{SpecSettings, MAX_LOOKUP};

/// Longest line accepted.
pub const MAX_LINE: usize = 4096;

/// How the kernel talks to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Chat when no prompt is configured, else generate (the default).
    Auto,
    /// Run the configured prompt once and power off.
    Generate,
    /// Read prompts from the serial line.
    Chat,
}

/// `io_core`: when a core serves the card while the others compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCore {
    /// When the model streams, read-ahead is on and the card cannot queue reads (the Pi's SD host).
    Auto,
    /// Whenever the model streams and read-ahead is on (also over virtio-blk, e.g. to test it).
    On,
    Off,
}

/// `arm_freq`: the ARM cores' clock, on boards whose firmware sets it (the Raspberry Pi's
/// VideoCore); other boards ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmClock {
    /// The board's maximum rate, temperature permitting (the default: the firmware boots the
    /// cores slower).
    Max,
    /// The rate the firmware booted with.
    Boot,
    /// This many MHz, within [`ARM_MHZ`] (the firmware keeps it within the board's own limits).
    Mhz(u32),
}

/// The MHz `arm_freq` accepts: the Pi 3's and 4's lowest rate to an overclocked Pi 4's.
pub const ARM_MHZ: (u32, u32) = (600, 2400);

impl fmt::Display for ArmClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArmClock::Max => f.write_str("max"),
            ArmClock::Boot => f.write_str("boot"),
            ArmClock::Mhz(m) => write!(f, "{m} MHz"),
        }
    }
}

/// `forward_check`: a token, the CRC-32 of the logits after it alone ([`report::logits_crc32`])
/// and their three highest tokens, as the PC computed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardCheck {
    pub token: u32,
    pub crc: u32,
    pub top: [u32; 3],
}

impl ForwardCheck {
    /// `TOKEN:CRC:A,B,C` (the CRC in eight hex digits).
    pub fn parse(v: &str) -> Option<ForwardCheck> {
        let mut parts = v.split(':');
        let token = parts.next()?.parse().ok()?;
        let crc = parts.next().filter(|c| c.len() == 8)?;
        let crc = u32::from_str_radix(crc, 16).ok()?;
        let mut top = [0u32; 3];
        let mut ids = parts.next()?.split(',');
        for t in &mut top {
            *t = ids.next()?.parse().ok()?;
        }
        (ids.next().is_none() && parts.next().is_none()).then_some(ForwardCheck { token, crc, top })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Path of the GGUF file on the FAT volume (the default is borrowed: nothing allocated).
    pub model: Cow<'static, str>,
    pub prompt: Option<String>,
    /// Chat: the system prompt (`None`: the model's default, if its template has one).
    pub system: Option<String>,
    /// Constrain the output to one JSON value (generate mode; the starting state of `/json` in chat).
    pub json: bool,
    /// Allow writing the card: only the prompt-cache file's own blocks, never the FAT.
    pub allow_write: bool,
    /// The prompt-cache file (preallocated on the card); `None` turns the cache off.
    pub prompt_cache: Option<Cow<'static, str>>,
    pub mode: Mode,
    /// Tokens to generate.
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
    /// The sampling settings the file gives (the model's recommendations fill the others).
    pub sampler_given: Given,
    /// KV-cache positions.
    pub ctx: usize,
    /// Prompt tokens per forward pass (1 to 64); `None` = sized from free RAM (up to 32).
    pub batch: Option<usize>,
    /// Page-cache bytes; `None` = all free RAM after the other buffers.
    pub cache_bytes: Option<u64>,
    pub page_bytes: usize,
    /// Page-cache pages read ahead of the forward pass (0 = off) when the card is read through a
    /// request queue (virtio-blk).
    pub readahead: usize,
    /// Whether one core serves the card while the others compute (read-ahead on a device without
    /// a request queue).
    pub io_core: IoCore,
    /// Cores to use; `None` = all.
    pub cores: Option<usize>,
    /// Parse special-token text (`<|im_start|>`) in the prompt.
    pub special: bool,
    /// Kernel set: `auto` (the fastest this CPU runs) or one of `inference::quant::SET_NAMES`.
    pub kernels: &'static str,
    /// Benchmarking: run an N-core split on one core, counting each core's share of every job.
    pub measure_cores: Option<usize>,
    /// Diagnostics: `full` runs the first-boot checks and prints the report line before the
    /// prompt or chat; `panic` or `exception` stops the run that way after loading, to check
    /// that the board reports faults (location on the UART, non-zero exit).
    pub selftest: Option<String>,
    /// A fault `selftest = full` is to find, to show what it does then (`kernels`: the set in
    /// use computes one operation wrong; `core`: the last core's answer is lost).
    pub selftest_fault: Option<String>,
    /// CRC-32 of the model file as `cargo xtask image` wrote it (`selftest = full` checks the
    /// file on the card against it).
    pub model_crc32: Option<u32>,
    /// What the model check digests (`model_digest = all | N`): the whole file (`None`), or its
    /// first and last N MiB (in bytes here), for a large model on a slow card.
    pub model_digest: Option<u64>,
    /// What the PC computed when the card was written (`forward_check = TOKEN:CRC:A,B,C`): the
    /// logits' digest and top three tokens after `TOKEN` alone; `selftest = full` computes the
    /// same on the board.
    pub forward_check: Option<ForwardCheck>,
    /// The ARM cores' clock (Raspberry Pi), set once this file is read.
    pub arm_freq: ArmClock,
    /// This board's place in a ring of boards (`ring = K/N`); `None`: the board runs alone.
    pub ring: Option<RingPlace>,
    /// The ring's line rate (bits/s) on the board's link UART; `None` (`max`): the highest its
    /// clock makes, up to [`MAX_RING_BAUD`].
    pub ring_baud: Option<u32>,
    /// Speculative decoding: `lookup`, `self_draft`, `draft`, `draft_max`, `speculate`.
    pub spec: SpecSettings,
}

/// `ring = K/N`: board `board` (1 is the head: console, tokenizer, sampler) of `boards`, wired
/// TX to the next board's RX, the last board's TX to the head's RX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPlace {
    pub board: u8,
    pub boards: u8,
}

/// Most boards in a ring.
pub const MAX_RING: u8 = 8;

/// The fastest line `ring_baud = max` picks: what short jumper wires between boards carry (a
/// Pi's PL011 makes 3 Mbaud from its 48 MHz clock).
pub const MAX_RING_BAUD: u32 = 4_000_000;

impl Default for Config {
    fn default() -> Self {
        Self {
            model: Cow::Borrowed("/model.gguf"),
            prompt: None,
            system: None,
            json: false,
            allow_write: false,
            prompt_cache: Some(Cow::Borrowed("/lmboot.kv")),
            mode: Mode::Auto,
            max_tokens: 64,
            sampler: SamplerConfig::default(),
            sampler_given: Given::default(),
            ctx: 512,
            batch: None,
            cache_bytes: None,
            page_bytes: 256 * 1024,
            readahead: crate::pagecache::DEFAULT_READAHEAD,
            io_core: IoCore::Auto,
            cores: None,
            special: true,
            kernels: "auto",
            measure_cores: None,
            selftest: None,
            selftest_fault: None,
            model_crc32: None,
            model_digest: None,
            forward_check: None,
            arm_freq: ArmClock::Max,
            ring: None,
            ring_baud: None,
            spec: SpecSettings::default(),
        }
    }
}

/// What was wrong with the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// 1-based line number.
    pub line: usize,
    pub kind: ConfigErrorKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ConfigErrorKind {
    NotUtf8,
    LineTooLong {
        len: usize,
    },
    ControlChar {
        byte: u8,
    },
    NoEquals,
    UnknownKey {
        key: String,
    },
    Repeated {
        key: String,
    },
    BadValue {
        key: String,
        value: String,
        allowed: &'static str,
    },
    BadEscape {
        key: String,
        escape: char,
    },
    /// The heap cannot hold a value of the file (a path, a prompt).
    OutOfMemory(OutOfMemory),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config line {}: ", self.line)?;
        match &self.kind {
            ConfigErrorKind::NotUtf8 => write!(f, "not valid UTF-8"),
            ConfigErrorKind::LineTooLong { len } => {
                write!(f, "line of {len} bytes is longer than {MAX_LINE}")
            }
            ConfigErrorKind::ControlChar { byte } => {
                write!(f, "control character {byte:#04x} (use \\n or \\t escapes)")
            }
            ConfigErrorKind::NoEquals => write!(f, "expected `key = value`"),
            ConfigErrorKind::UnknownKey { key } => {
                write!(f, "unknown key {key:?} (known: {KnownKeys})")
            }
            ConfigErrorKind::Repeated { key } => write!(f, "key {key:?} is set twice"),
            ConfigErrorKind::BadValue {
                key,
                value,
                allowed,
            } => {
                write!(f, "{key} = {value:?} is not allowed ({allowed})")
            }
            ConfigErrorKind::BadEscape { key, escape } => {
                write!(f, "{key}: unknown escape \\{escape} (use \\n, \\t or \\\\)")
            }
            ConfigErrorKind::OutOfMemory(e) => write!(f, "{e}"),
        }
    }
}

/// One key of `lmboot.txt`, as `docs/card.md` documents it (its table is [`keys_markdown`],
/// which `cargo xtask docs` writes there and a test compares).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    /// What the value may be: the parser's own words for a bad value (a test checks them);
    /// a key taking any text says `text`.
    pub values: &'static str,
    /// What an absent key means (markdown).
    pub default: &'static str,
    /// What the key does (markdown); keys side by side with the same description share a row.
    pub description: &'static str,
}

const SAMPLING: &str = r"sampling (temperature 0 = greedy); a setting left out takes the model's recommendation when its GGUF has `general.sampling.*` keys (a `sampling:` line says which); a chat with neither sets `repeat_penalty` 1.1 over the last 64 tokens, Ollama's default, so that a reply does not loop (`repeat_penalty = 1` turns it off; `/set` changes any setting during the chat)";

/// Every key the parser knows, in the order of its "unknown key" message; a key's index is its
/// bit in the parser's mask of keys seen (so fewer than 64).
pub const KEYS: &[Key] = &[
    Key {
        name: "model",
        values: r"a path on the card, e.g. /model.gguf",
        default: r"`/model.gguf`",
        description: r"path of the GGUF file on the card",
    },
    Key {
        name: "prompt",
        values: r"text, with the escapes `\n`, `\t`, `\\`",
        default: r"none",
        description: r"the prompt; `\n`, `\t`, `\\` escapes; `<|im_start|>` etc. are special tokens",
    },
    Key {
        name: "system",
        values: r"text, with the escapes `\n`, `\t`, `\\`",
        default: r"model's",
        description: r"chat: the system prompt (default: the model's own, if its chat template has one)",
    },
    Key {
        name: "mode",
        values: r"auto, generate or chat",
        default: r"`auto`",
        description: r"`chat` (talk on the serial line), `generate` (run `prompt` once and power off), `auto` (chat if no `prompt`)",
    },
    Key {
        name: "json",
        values: r"true or false",
        default: r"`false`",
        description: r"constrain the output to one valid JSON object or array, ending when it is complete (chat: `/json on`)",
    },
    Key {
        name: "allow_write",
        values: r"true or false",
        default: r"`false`",
        description: r"let lmboot write the card: only the prompt-cache file's own blocks, never the FAT or directories",
    },
    Key {
        name: "prompt_cache",
        values: r"off, or a path on the card starting with /",
        default: r"`/lmboot.kv`",
        description: r"a preallocated file on the card holding the KV state after the system prompt (keyed by model and prompt, checksummed); `off` to disable",
    },
    Key {
        name: "n",
        values: r"1 to 1048576 tokens",
        default: r"64",
        description: r"tokens to generate",
    },
    Key {
        name: "temperature",
        values: r"0 (greedy) to 100",
        default: r"0.8",
        description: SAMPLING,
    },
    Key {
        name: "top_k",
        values: r"0 (off) to 1048576",
        default: r"40",
        description: SAMPLING,
    },
    Key {
        name: "top_p",
        values: r"0 to 1",
        default: r"0.95",
        description: SAMPLING,
    },
    Key {
        name: "min_p",
        values: r"0 to 1",
        default: r"0.05",
        description: SAMPLING,
    },
    Key {
        name: "repeat_penalty",
        values: r"0.01 to 100, 1 = off",
        default: r"1 (a chat: 1.1)",
        description: SAMPLING,
    },
    Key {
        name: "repeat_last_n",
        values: r"0 to 4096",
        default: r"64",
        description: SAMPLING,
    },
    Key {
        name: "seed",
        values: r"0 to 18446744073709551615",
        default: r"0",
        description: SAMPLING,
    },
    Key {
        name: "ctx",
        values: r"1 to 1048576 positions",
        default: r"512",
        description: r"KV-cache positions",
    },
    Key {
        name: "batch",
        values: r"auto, or 1 to 64 tokens",
        default: r"`auto`",
        description: r"prompt tokens per forward pass, 1 to 64: each weight is read (from the card, when the model streams) and decoded once per batch; any value gives the same logits, bit for bit (`auto` = up to 32, as many as fit in a sixteenth of the free RAM)",
    },
    Key {
        name: "cache",
        values: r"auto, or 1M to 1024G, e.g. 64M",
        default: r"`auto`",
        description: r"page-cache size (`auto` = free RAM)",
    },
    Key {
        name: "page",
        values: r"4K to 16M, a multiple of 4K",
        default: r"`256K`",
        description: r"page size",
    },
    Key {
        name: "readahead",
        values: r"off, or 0 to 8 pages",
        default: r"4",
        description: r"pages read ahead of the forward pass when the model does not fit in RAM; `off` or 0 to 8",
    },
    Key {
        name: "io_core",
        values: r"auto, on or off",
        default: r"`auto`",
        description: r"one core serves the card while the others compute (read-ahead on a card that cannot queue reads: the Pi's SD host); `auto`, `on`, `off`",
    },
    Key {
        name: "cores",
        values: r"all, or 1 to 16",
        default: r"`all`",
        description: r"cores to use",
    },
    Key {
        name: "special",
        values: r"true or false",
        default: r"`true`",
        description: r"parse special-token text in the prompt",
    },
    Key {
        name: "kernels",
        values: inference::quant::SET_CHOICES,
        default: r"`auto`",
        description: r"`auto`, `scalar`, `neon`, `neon-dotprod`, `rvv`, `xtheadvector` (refused if the CPU lacks it)",
    },
    Key {
        name: "measure_cores",
        values: r"1 to 16",
        default: r"none",
        description: r"benchmark only: run an N-core split on one core, counting each core's share",
    },
    Key {
        name: "selftest",
        values: r"none, full, panic or exception",
        default: r"none",
        description: r"`full`: the first-boot checks before the prompt or chat (model file, clocks, memory, card, kernels, cores, rates, forward pass; see [the self-test card](bring-up.md#first-the-self-test-card)), each with a verdict line, then the `lmboot-report:` line; `panic` or `exception`: stop that way after loading, to see the board's fault report",
    },
    Key {
        name: "selftest_fault",
        values: r"none, kernels or core",
        default: r"none",
        description: r"`kernels`: the self-test sees the set in use compute one operation wrong; `core`: the last core's answer is lost; to show what the self-test does then",
    },
    Key {
        name: "model_crc32",
        values: r"eight hex digits (cargo xtask image writes it)",
        default: r"written by `cargo xtask image`",
        description: r"the model file's CRC-32 as `cargo xtask image` wrote it (eight hex digits; over the bytes `model_digest` names); `selftest = full` reads them and stops with an error naming both digests if they differ",
    },
    Key {
        name: "model_digest",
        values: r"all, or 1 to 65536 (MiB at each end of the file)",
        default: r"`all`",
        description: r"what the model check reads: `all` (the whole file), or N (1 to 65536): the first and last N MiB, for a large model on a slow card (`cargo xtask image --set model_digest=N` computes `model_crc32` over the same bytes)",
    },
    Key {
        name: "forward_check",
        values: r"TOKEN:CRC:A,B,C (cargo xtask image writes it)",
        default: r"written by `cargo xtask image`",
        description: r"`TOKEN:CRC:A,B,C`: the CRC-32 of the logits after one token alone and their three likeliest tokens, as the PC computed them when `cargo xtask image` wrote the card; `selftest = full` computes the same on the board and says whether they match",
    },
    Key {
        name: "arm_freq",
        values: r"max, boot, or 600 to 2400 (MHz)",
        default: r"`max`",
        description: r"Raspberry Pi: the ARM cores' clock once this file is read: `max` (the board's maximum, temperature permitting), `boot` (what the firmware booted with) or 600 to 2400 (MHz); other boards ignore it",
    },
    Key {
        name: "ring",
        values: r"off, or K/N: this board's place K of N boards (1 <= K <= N <= 8)",
        default: r"`off`",
        description: r"`K/N`: this board is board K of a ring of N boards (1 is the head), on the link UART its board file names; `off` runs alone. The prompt cache is off on a ring",
    },
    Key {
        name: "ring_baud",
        values: r"max, or 1200 to 12000000 bits/s",
        default: r"`max`",
        description: r"the ring's line rate: `max` (the fastest the link UART's clock makes exactly, up to 4 Mbaud: 3 Mbaud on a Pi's PL011) or 1200 to 12000000",
    },
    Key {
        name: "lookup",
        values: r"0 (off) to 8 tokens",
        default: r"0 (off)",
        description: r"speculative decoding: guess the next tokens from earlier text (the prompt, the conversation) that ends like the last N tokens, 1 to 8; costs no memory; suits code edits, JSON, replies that quote the prompt",
    },
    Key {
        name: "self_draft",
        values: r"0 (off), or 1 to the model's layers less one",
        default: r"0 (off)",
        description: r"speculative decoding: the model's own first L layers and output head guess (in the model's own KV cache: no memory of its own; the page cache pins the head and those layers first, as they are read at every guess; `auto` does not use it where they cannot be held and it could not pay)",
    },
    Key {
        name: "draft",
        values: r"off, or a path on the card starting with /",
        default: r"`off`",
        description: r"speculative decoding: a smaller model of the same vocabulary guesses (e.g. `/draft.gguf`); refused if its tokens or special ids differ. Its layers and its output head (or the part `draft_vocab` keeps) are read into RAM at boot, beside the model; its token embedding stays on the card, read a row a token; with `speculate = auto` it is loaded only if its guesses could pay for the page cache it takes",
    },
    Key {
        name: "draft_vocab",
        values: r"auto, all, or 256 or more tokens",
        default: r"`auto`",
        description: r"how much of the draft model's output head it keeps: `all`, N (at least 256: the N lowest token ids, the common ones in a byte-pair vocabulary, and every token of the prompt and the conversation as it comes), or `auto` (the whole head if it fits in a sixth of the RAM left for the page cache and the head, else as many rows as do). The draft can only guess tokens it keeps; the output is unchanged",
    },
    Key {
        name: "draft_max",
        values: r"1 to 63 guesses",
        default: r"8",
        description: r"most guesses checked in one pass (1 to 63)",
    },
    Key {
        name: "speculate",
        values: r"auto, off, or 1 to 63 guesses every pass",
        default: r"`auto`",
        description: r"`auto`: check as many guesses as pay for themselves, measured (the card's time per pass against the arithmetic per token, and the share of guesses taken; none at all when they do not pay); `off`; or K: always K. The output is the same either way: greedy, token for token; sampled, the same distribution",
    },
];

const _: () = assert!(KEYS.len() < 64);

/// The names of [`KEYS`], as the "unknown key" error lists them.
struct KnownKeys;

impl fmt::Display for KnownKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, k) in KEYS.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(k.name)?;
        }
        Ok(())
    }
}

/// [`KEYS`] as the markdown table of `docs/card.md`: one row a key, or one row for keys side by
/// side that share a description (their values joined by `; `, their defaults by `, `).
pub fn keys_markdown() -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from("| key | meaning | allowed values | default |\n|---|---|---|---|\n");
    let mut rest = KEYS;
    while let Some(first) = rest.first() {
        let n = rest
            .iter()
            .take_while(|k| k.description == first.description)
            .count();
        let (row, tail) = rest.split_at(n);
        let join = |part: fn(&Key) -> String, sep: &str| -> String {
            row.iter()
                .map(part)
                .collect::<alloc::vec::Vec<_>>()
                .join(sep)
        };
        out += &alloc::format!(
            "| {} | {} | {} | {} |\n",
            join(|k| alloc::format!("`{}`", k.name), ", "),
            cell(first.description),
            cell(&join(|k| k.values.into(), "; ")),
            cell(&join(|k| k.default.into(), ", ")),
        );
        rest = tail;
    }
    out
}

/// `ring = K/N` (`off` or `1/1`: alone).
fn ring_place(f: &Field<'_>) -> Result<Option<RingPlace>, ConfigError> {
    const ALLOWED: &str = "off, or K/N: this board's place K of N boards (1 <= K <= N <= 8)";
    if f.v == "off" {
        return Ok(None);
    }
    let (k, n) = f.v.split_once('/').ok_or_else(|| f.bad(ALLOWED))?;
    let (k, n) = match (k.trim().parse::<u8>(), n.trim().parse::<u8>()) {
        (Ok(k), Ok(n)) if 1 <= k && k <= n && n <= MAX_RING => (k, n),
        _ => return Err(f.bad(ALLOWED)),
    };
    Ok((n > 1).then_some(RingPlace {
        board: k,
        boards: n,
    }))
}

/// One `key = value` line, for checking its value.
#[derive(Debug, Clone, Copy)]
struct Field<'a> {
    line: usize,
    key: &'a str,
    v: &'a str,
}

impl Field<'_> {
    fn bad(&self, allowed: &'static str) -> ConfigError {
        ConfigError {
            line: self.line,
            kind: ConfigErrorKind::BadValue {
                key: self.key.into(),
                value: self.v.into(),
                allowed,
            },
        }
    }

    /// The error for a value of `bytes` bytes the heap cannot hold (`what` it is).
    fn no_memory(&self, what: &'static str, bytes: usize) -> ConfigError {
        ConfigError {
            line: self.line,
            kind: ConfigErrorKind::OutOfMemory(OutOfMemory { what, bytes }),
        }
    }

    /// The value as an owned path, allocated fallibly (`what` names it in the error).
    fn path(&self, what: &'static str) -> Result<Cow<'static, str>, ConfigError> {
        let mut s = String::new();
        s.try_reserve_exact(self.v.len())
            .map_err(|_| self.no_memory(what, self.v.len()))?;
        s.push_str(self.v);
        Ok(Cow::Owned(s))
    }

    fn boolean(&self) -> Result<bool, ConfigError> {
        match self.v {
            "true" | "yes" | "on" | "1" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(self.bad("true or false")),
        }
    }

    /// The value as a `T` within `[min, max]` (NaN is never within).
    fn within<T: core::str::FromStr + PartialOrd>(
        &self,
        min: T,
        max: T,
        allowed: &'static str,
    ) -> Result<T, ConfigError> {
        match self.v.parse::<T>() {
            Ok(x) if x >= min && x <= max => Ok(x),
            _ => Err(self.bad(allowed)),
        }
    }

    fn int(&self, min: u64, max: u64, allowed: &'static str) -> Result<u64, ConfigError> {
        self.within(min, max, allowed)
    }

    fn float(&self, min: f32, max: f32, allowed: &'static str) -> Result<f32, ConfigError> {
        self.within(min, max, allowed)
    }

    /// A size in bytes with an optional K, M or G suffix (powers of 1024).
    fn size(&self, min: u64, max: u64, allowed: &'static str) -> Result<u64, ConfigError> {
        let v = self.v;
        let (num, mult) = match v.as_bytes().last() {
            Some(b'K' | b'k') => (&v[..v.len() - 1], 1u64 << 10),
            Some(b'M' | b'm') => (&v[..v.len() - 1], 1 << 20),
            Some(b'G' | b'g') => (&v[..v.len() - 1], 1 << 30),
            _ => (v, 1),
        };
        match num
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(mult))
        {
            Some(n) if n >= min && n <= max => Ok(n),
            _ => Err(self.bad(allowed)),
        }
    }
}

/// `f`'s value with its escapes replaced (never longer than the value, so reserved once).
fn unescape(f: &Field<'_>) -> Result<String, ConfigError> {
    let Field { line, key, v } = *f;
    let mut out = String::new();
    out.try_reserve_exact(v.len())
        .map_err(|_| f.no_memory("a prompt", v.len()))?;
    let mut it = v.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(e) => {
                return Err(ConfigError {
                    line,
                    kind: ConfigErrorKind::BadEscape {
                        key: key.into(),
                        escape: e,
                    },
                })
            }
            None => {
                return Err(ConfigError {
                    line,
                    kind: ConfigErrorKind::BadEscape {
                        key: key.into(),
                        escape: ' ',
                    },
                })
            }
        }
    }
    Ok(out)
}

impl Config {
    /// Whether the run chats (`mode = chat`, or `auto` with no prompt).
    pub fn chats(&self) -> bool {
        self.mode == Mode::Chat || (self.mode == Mode::Auto && self.prompt.is_none())
    }

    /// Parse a configuration file's bytes; unset keys keep their defaults.
    pub fn parse(text: &[u8]) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        // Bit i: the i-th key of KEYS was set (fewer than 64 keys).
        let mut seen = 0u64;
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = i + 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.len() > MAX_LINE {
                return Err(ConfigError {
                    line,
                    kind: ConfigErrorKind::LineTooLong { len: raw.len() },
                });
            }
            if let Some(&b) = raw.iter().find(|&&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(ConfigError {
                    line,
                    kind: ConfigErrorKind::ControlChar { byte: b },
                });
            }
            let s = core::str::from_utf8(raw).map_err(|_| ConfigError {
                line,
                kind: ConfigErrorKind::NotUtf8,
            })?;
            let s = s.trim();
            if s.is_empty() || s.starts_with('#') {
                continue;
            }
            let (k, v) = s.split_once('=').ok_or(ConfigError {
                line,
                kind: ConfigErrorKind::NoEquals,
            })?;
            let (k, v) = (k.trim(), v.trim());
            let (i, key) = match KEYS.iter().enumerate().find(|(_, known)| known.name == k) {
                Some((i, known)) => (i, known.name),
                None => {
                    return Err(ConfigError {
                        line,
                        kind: ConfigErrorKind::UnknownKey { key: k.into() },
                    })
                }
            };
            if seen & 1 << i != 0 {
                return Err(ConfigError {
                    line,
                    kind: ConfigErrorKind::Repeated { key: key.into() },
                });
            }
            seen |= 1 << i;
            set(&mut c, &Field { line, key, v })?;
        }
        Ok(c)
    }
}

/// Set `f.key` in `c` from its value, checked.
fn set(c: &mut Config, f: &Field<'_>) -> Result<(), ConfigError> {
    // A sampling setting given here wins over the model's recommendation.
    c.sampler_given.mark(f.key);
    for group in [
        set_text,
        set_sampling,
        set_memory,
        set_machine,
        set_spec_ring,
    ] {
        if group(c, f)? {
            return Ok(());
        }
    }
    Err(ConfigError {
        line: f.line,
        kind: ConfigErrorKind::UnknownKey { key: f.key.into() },
    })
}

/// The model, the text and how it is run: set if `f.key` is one of those; `false`: not one of them.
fn set_text(c: &mut Config, f: &Field<'_>) -> Result<bool, ConfigError> {
    let Field { key, v, .. } = *f;
    match key {
        "model" => {
            if v.is_empty() {
                return Err(f.bad("a path on the card, e.g. /model.gguf"));
            }
            c.model = f.path("the model's path")?;
        }
        "prompt" => c.prompt = Some(unescape(f)?),
        "system" => c.system = Some(unescape(f)?),
        "json" => c.json = f.boolean()?,
        "allow_write" => c.allow_write = f.boolean()?,
        "prompt_cache" => {
            c.prompt_cache = match v {
                "off" | "none" => None,
                p if p.starts_with('/') => Some(f.path("the prompt cache's path")?),
                _ => return Err(f.bad("off, or a path on the card starting with /")),
            }
        }
        "mode" => {
            c.mode = match v {
                "auto" => Mode::Auto,
                "generate" => Mode::Generate,
                "chat" => Mode::Chat,
                _ => return Err(f.bad("auto, generate or chat")),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Length, sampling and context settings: set if `f.key` is one of those; `false`: not one of them.
fn set_sampling(c: &mut Config, f: &Field<'_>) -> Result<bool, ConfigError> {
    let Field { key, .. } = *f;
    match key {
        "n" => c.max_tokens = f.int(1, 1 << 20, "1 to 1048576 tokens")? as usize,
        "temperature" => c.sampler.temperature = f.float(0.0, 100.0, "0 (greedy) to 100")?,
        "top_k" => c.sampler.top_k = f.int(0, 1 << 20, "0 (off) to 1048576")? as usize,
        "top_p" => c.sampler.top_p = f.float(0.0, 1.0, "0 to 1")?,
        "min_p" => c.sampler.min_p = f.float(0.0, 1.0, "0 to 1")?,
        "repeat_penalty" => {
            c.sampler.repeat_penalty = f.float(0.01, 100.0, "0.01 to 100, 1 = off")?
        }
        "repeat_last_n" => c.sampler.repeat_last_n = f.int(0, 4096, "0 to 4096")? as usize,
        "seed" => c.sampler.seed = f.int(0, u64::MAX, "0 to 18446744073709551615")?,
        "ctx" => c.ctx = f.int(1, 1 << 20, "1 to 1048576 positions")? as usize,
        _ => return Ok(false),
    }
    Ok(true)
}

/// Page cache and batch settings: set if `f.key` is one of those; `false`: not one of them.
fn set_memory(c: &mut Config, f: &Field<'_>) -> Result<bool, ConfigError> {
    let Field { key, v, .. } = *f;
    match key {
        "cache" => {
            c.cache_bytes = if v == "auto" {
                None
            } else {
                Some(f.size(1 << 20, 1 << 40, "auto, or 1M to 1024G, e.g. 64M")?)
            }
        }
        "page" => {
            let p = f.size(4096, 16 << 20, "4K to 16M, a multiple of 4K")?;
            if p % 4096 != 0 {
                return Err(f.bad("4K to 16M, a multiple of 4K"));
            }
            c.page_bytes = p as usize;
        }
        "batch" => {
            c.batch = if v == "auto" {
                None
            } else {
                let max = inference::quant::MAX_BATCH as u64;
                Some(f.int(1, max, "auto, or 1 to 64 tokens")? as usize)
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Cores, kernels, self-tests and the card's helpers: set if `f.key` is one of those; `false`: not one of them.
fn set_machine(c: &mut Config, f: &Field<'_>) -> Result<bool, ConfigError> {
    let Field { key, v, .. } = *f;
    match key {
        "cores" => {
            c.cores = if v == "all" {
                None
            } else {
                Some(f.int(1, 16, "all, or 1 to 16")? as usize)
            }
        }
        "kernels" => {
            let names = inference::quant::SET_NAMES;
            c.kernels = match names.iter().find(|&&n| n == v) {
                Some(name) => name,
                None if v == "auto" => "auto",
                None => return Err(f.bad(inference::quant::SET_CHOICES)),
            };
        }
        "selftest" => {
            if !["none", "full", "panic", "exception"].contains(&v) {
                return Err(f.bad("none, full, panic or exception"));
            }
            c.selftest = (v != "none").then(|| v.into());
        }
        "model_crc32" => {
            let ok = v.len() == 8 && v.bytes().all(|b| b.is_ascii_hexdigit());
            c.model_crc32 = match u32::from_str_radix(v, 16) {
                Ok(x) if ok => Some(x),
                _ => return Err(f.bad("eight hex digits (cargo xtask image writes it)")),
            };
        }
        "model_digest" => {
            c.model_digest = match v {
                "all" => None,
                _ => Some(
                    f.int(1, 65536, "all, or 1 to 65536 (MiB at each end of the file)")?
                        * report::MIB,
                ),
            };
        }
        "forward_check" => {
            c.forward_check = Some(
                ForwardCheck::parse(v)
                    .ok_or_else(|| f.bad("TOKEN:CRC:A,B,C (cargo xtask image writes it)"))?,
            )
        }
        "selftest_fault" => {
            if !["none", "kernels", "core"].contains(&v) {
                return Err(f.bad("none, kernels or core"));
            }
            c.selftest_fault = (v != "none").then(|| v.into());
        }
        "readahead" => {
            c.readahead = if v == "off" {
                0
            } else {
                let max = crate::pagecache::MAX_READAHEAD as u64;
                f.int(0, max, "off, or 0 to 8 pages")? as usize
            }
        }
        "io_core" => {
            c.io_core = match v {
                "auto" => IoCore::Auto,
                "on" | "true" | "yes" => IoCore::On,
                "off" | "false" | "no" => IoCore::Off,
                _ => return Err(f.bad("auto, on or off")),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Speculative decoding, the ring and the board's clock: set if `f.key` is one of those; `false`: not one of them.
fn set_spec_ring(c: &mut Config, f: &Field<'_>) -> Result<bool, ConfigError> {
    let Field { key, v, .. } = *f;
    match key {
        "lookup" => c.spec.lookup = f.int(0, MAX_LOOKUP as u64, "0 (off) to 8 tokens")? as usize,
        "self_draft" => {
            c.spec.self_draft =
                f.int(0, 1 << 10, "0 (off), or 1 to the model's layers less one")? as usize
        }
        "draft" => {
            c.spec.draft = match v {
                "off" | "none" => None,
                p if p.starts_with('/') => Some(p.into()),
                _ => return Err(f.bad("off, or a path on the card starting with /")),
            }
        }
        "draft_vocab" => {
            c.spec.draft_vocab = inference::speculate::DraftVocab::parse(v)
                .ok_or_else(|| f.bad("auto, all, or 256 or more tokens"))?
        }
        "draft_max" => c.spec.draft_max = f.int(1, 63, "1 to 63 guesses")? as usize,
        "speculate" => {
            c.spec.mode = SpecSettings::parse_mode(v)
                .ok_or_else(|| f.bad("auto, off, or 1 to 63 guesses every pass"))?
        }
        "measure_cores" => c.measure_cores = Some(f.int(1, 16, "1 to 16")? as usize),
        "ring" => c.ring = ring_place(f)?,
        "ring_baud" => {
            c.ring_baud = match v {
                "max" => None,
                _ => Some(f.int(1200, 12_000_000, "max, or 1200 to 12000000 bits/s")? as u32),
            };
        }
        "arm_freq" => {
            c.arm_freq = match v {
                "max" => ArmClock::Max,
                "boot" => ArmClock::Boot,
                _ => {
                    let allowed = "max, boot, or 600 to 2400 (MHz)";
                    let (lo, hi) = ARM_MHZ;
                    ArmClock::Mhz(f.int(lo as u64, hi as u64, allowed)? as u32)
                }
            }
        }
        "special" => {
            c.special = match v {
                "true" | "yes" | "1" => true,
                "false" | "no" | "0" => false,
                _ => return Err(f.bad("true or false")),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_config() {
        let c = Config::parse(
            b"# lmboot\r\nmodel = /models/smol.gguf\nprompt = <|im_start|>user\\nHi<|im_end|>\\n\n n=32 \ntemperature = 0\n\
              top_k=0\ntop_p = 0.9\nmin_p=0.1\nrepeat_penalty = 1.1\nseed = 7\nctx = 1024\ncache = 64M\npage = 128K\ncores = 2\nspecial = no\nmode = chat\n",
        )
        .unwrap();
        assert_eq!(c.model, "/models/smol.gguf");
        assert_eq!(
            c.prompt.as_deref(),
            Some("<|im_start|>user\nHi<|im_end|>\n")
        );
        assert_eq!(
            (c.max_tokens, c.ctx, c.cache_bytes, c.page_bytes, c.cores),
            (32, 1024, Some(64 << 20), 128 << 10, Some(2))
        );
        assert_eq!(c.sampler.temperature, 0.0);
        assert_eq!(
            (
                c.sampler.top_k,
                c.sampler.top_p,
                c.sampler.min_p,
                c.sampler.seed
            ),
            (0, 0.9, 0.1, 7)
        );
        assert!(!c.special);
        assert_eq!(c.mode, Mode::Chat);
        assert_eq!(Config::parse(b"").unwrap(), Config::default());
    }

    #[test]
    fn read_ahead_keys() {
        let c = Config::parse(b"batch = 7\n").unwrap();
        assert_eq!(c.batch, Some(7));
        assert_eq!(Config::parse(b"batch = auto\n").unwrap().batch, None);
        for bad in ["0", "65", "big", "-1"] {
            let e = Config::parse(alloc::format!("batch = {bad}\n").as_bytes()).unwrap_err();
            assert!(e.to_string().contains("1 to 64"), "{e}");
        }
        let c = Config::parse(b"readahead = off\nio_core = on\n").unwrap();
        assert_eq!((c.readahead, c.io_core), (0, IoCore::On));
        let c = Config::parse(b"readahead = 8\nio_core = off\n").unwrap();
        assert_eq!((c.readahead, c.io_core), (8, IoCore::Off));
        let c = Config::default();
        assert_eq!(
            (c.readahead, c.io_core),
            (crate::pagecache::DEFAULT_READAHEAD, IoCore::Auto)
        );
    }

    #[test]
    fn ring_place_and_rate() {
        let c = Config::default();
        assert_eq!((c.ring, c.ring_baud), (None, None));
        assert_eq!(Config::parse(b"ring_baud = max\n").unwrap().ring_baud, None);
        let c = Config::parse(b"ring = 2/3\nring_baud = 921600\n").unwrap();
        let place = RingPlace {
            board: 2,
            boards: 3,
        };
        assert_eq!((c.ring, c.ring_baud), (Some(place), Some(921_600)));
        for alone in ["off", "1/1"] {
            let c = Config::parse(alloc::format!("ring = {alone}\n").as_bytes()).unwrap();
            assert_eq!(c.ring, None, "{alone}");
        }
        for bad in ["0/3", "4/3", "1/9", "2", "a/b", "1/", "/2", "-1/2"] {
            let e = Config::parse(alloc::format!("ring = {bad}\n").as_bytes()).unwrap_err();
            assert!(e.to_string().contains("K/N"), "{bad}: {e}");
        }
        for bad in ["0", "1199", "12000001", "fast"] {
            let e = Config::parse(alloc::format!("ring_baud = {bad}\n").as_bytes()).unwrap_err();
            assert!(e.to_string().contains("bits/s"), "{bad}: {e}");
        }
    }

    #[test]
    fn arm_freq_is_max_boot_or_mhz() {
        assert_eq!(Config::default().arm_freq, ArmClock::Max);
        let cases = [
            ("max", ArmClock::Max),
            ("boot", ArmClock::Boot),
            ("600", ArmClock::Mhz(600)),
            ("1200", ArmClock::Mhz(1200)),
            ("2400", ArmClock::Mhz(2400)),
        ];
        for (v, want) in cases {
            let c = Config::parse(alloc::format!("arm_freq = {v}\n").as_bytes()).unwrap();
            assert_eq!(c.arm_freq, want, "{v}");
        }
        assert_eq!(alloc::format!("{}", ArmClock::Mhz(1500)), "1500 MHz");
        let e = Config::parse(b"arm_freq = max\narm_freq = boot\n").unwrap_err();
        assert!(e.to_string().contains("set twice"), "{e}");
    }

    #[test]
    fn bad_configs_name_line_key_and_range() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"n = 0", 1, "n = \"0\""),
            (b"n = -5", 1, "1 to 1048576"),
            (b"\n\ntemperature = NaN", 3, "temperature"),
            (b"temperature = inf", 1, "0 (greedy) to 100"),
            (b"top_p = 1.5", 1, "0 to 1"),
            (b"min_p = nan", 1, "min_p"),
            (b"ctx = 99999999999999999999", 1, "ctx"),
            (b"cache = 12Q", 1, "auto, or 1M"),
            (b"page = 5000", 1, "multiple of 4K"),
            (b"cores = 0", 1, "all, or 1 to 16"),
            (b"readahead = 9", 1, "off, or 0 to 8 pages"),
            (b"io_core = maybe", 1, "auto, on or off"),
            (b"temprature = 1", 1, "unknown key \"temprature\""),
            (b"n = 1\nn = 2", 2, "set twice"),
            (b"just words", 1, "key = value"),
            (b"prompt = a\x00b", 1, "control character 0x00"),
            (b"prompt = \xff\xfe", 1, "UTF-8"),
            (b"prompt = bad \\q escape", 1, "escape \\q"),
            (b"special = maybe", 1, "true or false"),
            (b"mode = dance", 1, "generate or chat"),
            (b"arm_freq = fast", 1, "arm_freq = \"fast\""),
            (b"\narm_freq = 100", 2, "max, boot, or 600 to 2400 (MHz)"),
            (b"arm_freq = 2401", 1, "600 to 2400"),
            (b"arm_freq = 1.2", 1, "600 to 2400"),
            (b"arm_freq = -1", 1, "600 to 2400"),
            (b"lookup = 9", 1, "0 (off) to 8 tokens"),
            (b"draft = draft.gguf", 1, "starting with /"),
            (b"draft_max = 0", 1, "1 to 63 guesses"),
            (b"draft_vocab = 12", 1, "auto, all, or 256 or more tokens"),
            (b"speculate = 64", 1, "auto, off, or 1 to 63"),
            (b"speculate = always", 1, "auto, off, or 1 to 63"),
        ];
        for (text, line, needle) in cases {
            let e = Config::parse(text).unwrap_err();
            let msg = alloc::format!("{e}");
            assert_eq!(e.line, *line, "{msg}");
            assert!(
                msg.contains(needle),
                "{:?}: {msg} lacks {needle:?}",
                core::str::from_utf8(text)
            );
        }
        let long = alloc::vec![b'a'; MAX_LINE + 1];
        assert!(matches!(
            Config::parse(&long).unwrap_err().kind,
            ConfigErrorKind::LineTooLong { .. }
        ));
    }

    /// Each key's `values` are the parser's words for a bad value, and every key is parsed.
    #[test]
    fn keys_say_what_the_parser_allows() {
        for key in KEYS {
            assert!(
                !key.description.is_empty() && !key.default.is_empty(),
                "{key:?}"
            );
            let mut said = alloc::vec::Vec::new();
            for bad in ["?bad?", ""] {
                let line = alloc::format!("{} = {bad}\n", key.name);
                match Config::parse(line.as_bytes()) {
                    Ok(_) => {}
                    Err(ConfigError {
                        kind: ConfigErrorKind::BadValue { allowed, .. },
                        ..
                    }) => said.push(allowed),
                    Err(e) => panic!("{}: {e}", key.name),
                }
            }
            if said.is_empty() {
                assert!(
                    key.values.starts_with("text"),
                    "{}: takes any text",
                    key.name
                );
            }
            for allowed in said {
                assert_eq!(key.values, allowed, "{}: KEYS against the parser", key.name);
            }
        }
        let e = Config::parse(b"nope = 1").unwrap_err().to_string();
        assert!(e.contains("(known: model, prompt, system, mode,") && e.ends_with(", speculate)"));
        let table = keys_markdown();
        assert_eq!(table.lines().count(), 2 + KEYS.len() - 6, "{table}");
        assert!(table.contains("| `temperature`, `top_k`, `top_p`, `min_p`, `repeat_penalty`, `repeat_last_n`, `seed` |"));
    }

    #[test]
    fn speculation_settings() {
        use inference::speculate::SpecMode;
        let c =
            Config::parse(b"lookup = 3\nself_draft = 4\ndraft = /d.gguf\ndraft_max = 6\n").unwrap();
        let s = &c.spec;
        assert_eq!((s.lookup, s.self_draft, s.draft_max), (3, 4, 6));
        assert_eq!(
            (s.draft.as_deref(), s.mode),
            (Some("/d.gguf"), SpecMode::Auto)
        );
        assert!(s.on() && s.max_guesses() == 6);
        let c = Config::parse(b"lookup = 3\nspeculate = off").unwrap();
        assert!(!c.spec.on());
        let c = Config::parse(b"lookup = 3\nspeculate = 5").unwrap();
        assert_eq!((c.spec.mode, c.spec.max_guesses()), (SpecMode::Fixed(5), 5));
        assert!(!Config::default().spec.on());
    }
}
