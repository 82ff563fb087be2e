//! The first-boot report: one line, `lmboot-report: k=v k=v ... sum=XXXXXXXX`, that a board's
//! self-test (`selftest = full`) prints after its table of verdicts, holding every figure it
//! measured, so that a user can paste one line into a bug report; `cargo xtask report LOG`
//! decodes it. Both ends use this crate, so the format has one definition.
//!
//! The line is plain ASCII `key=value` pairs separated by single spaces, in the order of
//! [`FIELDS`] (a board leaves out what it cannot measure), then `sum=` and the CRC-32 of every
//! byte before ` sum=` as eight hex digits: a line cut or altered when it was copied is named as
//! such. A value holds no space and no `=` (the writer replaces them with `_`). At most
//! [`MAX_LEN`] characters: what does not fit is left out and `cut=1` says so.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// What starts the line.
pub const PREFIX: &str = "lmboot-report: ";

/// The format's version (the `v` field).
pub const VERSION: u32 = 1;

/// Longest line, prefix and checksum included.
pub const MAX_LEN: usize = 1000;

/// Bytes ` sum=XXXXXXXX` takes.
const SUM_LEN: usize = 13;

/// The fields, in the order a board writes them, and what each holds (the decoder prints it).
pub const FIELDS: &[(&str, &str)] = &[
    ("v", "report format version"),
    ("lmboot", "lmboot version"),
    ("board", "board (its board file's name)"),
    (
        "cpu",
        "CPU id (MIDR_EL1 on Arm; mvendorid.marchid on RISC-V)",
    ),
    (
        "cores",
        "cores that computed the same checksum / cores working",
    ),
    ("kernels", "kernel set the run uses"),
    ("auto", "kernel set `kernels = auto` picks on this CPU"),
    (
        "cntfrq",
        "counter frequency, Hz (measured against the firmware's or device tree's)",
    ),
    ("arm", "ARM clock, Hz (firmware)"),
    ("core", "core (VPU) clock, Hz (firmware)"),
    ("temp", "SoC temperature, millidegrees C (firmware)"),
    ("throttled", "firmware throttling flags (hex; 0: none)"),
    ("mem1", "memory copy, one core, MB/s"),
    ("memn", "memory copy, all cores, MB/s"),
    ("mr1", "memory read, one core, MB/s"),
    ("mrn", "memory read, all cores, MB/s"),
    ("mv1", "weights through the matrix kernels, one core, MB/s"),
    ("mvn", "weights through the matrix kernels, all cores, MB/s"),
    ("heap", "heap the model uses, MiB (the pattern test's span)"),
    (
        "bus",
        "card bus reached: mode (DS, HS, DDR, SDR), clock in MHz, x data lines",
    ),
    ("read", "the model file read whole from the card, MB/s"),
    ("pio", "card read by programmed I/O, MB/s"),
    (
        "dma",
        "card read by DMA, MB/s (the same bytes as by PIO, compared)",
    ),
    (
        "blk",
        "card read on a device with one way to read (virtio-blk), MB/s",
    ),
    ("crc", "card commands failed with a CRC error"),
    ("retries", "card commands tried again"),
    (
        "stream",
        "MB a token reads from the card (the page cache's plan)",
    ),
    ("weights", "MB of weights a token runs through the kernels"),
    (
        "top",
        "the three likeliest tokens after the forward check's token, on the board",
    ),
    ("verdicts", "each check: name:ok, name:fail or name:skip"),
    ("cut", "1: fields left out to keep the line short"),
];

/// What `lmboot-host --board-sim` assumes of a board no one has measured (the decoder prints a
/// report's measured figures beside these).
#[derive(Debug, Clone, Copy)]
pub struct Assumed {
    /// The board-sim's name for it.
    pub sim: &'static str,
    /// The board files it stands for.
    pub boards: &'static [&'static str],
    /// Card bytes per second, and weight bytes per second through the kernels on all cores.
    pub card: f64,
    pub matvec: f64,
}

/// The boards simulated: the card rates are the slots' bus ceilings in their best mode (25 MB/s:
/// sdhost in High Speed at 50 MHz, 4-bit; 50 MB/s: UHS-I DDR50); the kernel rates are
/// assumptions for Q4_K weights on four cores (Cortex-A53 at 1 GHz, Cortex-A72 at 1.5 GHz).
pub const ASSUMED: [Assumed; 2] = [
    Assumed {
        sim: "zero2w",
        boards: &["rpi3", "rpi2"],
        card: 25e6,
        matvec: 0.5e9,
    },
    Assumed {
        sim: "pi4",
        boards: &["rpi4"],
        card: 50e6,
        matvec: 1.5e9,
    },
];

/// Bytes in a MiB, the unit of `model_digest`.
pub const MIB: u64 = 1 << 20;

/// The byte ranges of a model file of `size` bytes that `model_crc32` covers, in order: the whole
/// file (`ends = None`, `model_digest = all`), or its first and last `ends` bytes
/// (`model_digest = N`, N MiB), the second range empty when the two would meet. The board and
/// `cargo xtask image` both take them from here.
pub fn digest_ranges(size: u64, ends: Option<u64>) -> [core::ops::Range<u64>; 2] {
    match ends {
        None => [0..size, size..size],
        Some(e) => {
            let head = e.min(size);
            [0..head, size.saturating_sub(e).max(head)..size]
        }
    }
}

/// The forward pass's check (`selftest = full`): a digest of a token's logits, the same on the
/// PC that wrote the card and on the board, since every kernel set computes the scalar set's
/// bits. CRC-32 of each logit's bits, little-endian.
pub fn logits_crc32(logits: &[f32]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for l in logits {
        h.update(&l.to_bits().to_le_bytes());
    }
    h.finalize()
}

/// The three highest logits' token ids, highest first (ties: the lower id; NaN never).
pub fn top3(logits: &[f32]) -> [u32; 3] {
    let mut best = [(u32::MAX, f32::NEG_INFINITY); 3];
    for (i, &l) in logits.iter().enumerate() {
        if let Some(at) = best.iter().position(|b| l > b.1) {
            best.copy_within(at..2, at + 1);
            best[at] = (i as u32, l);
        }
    }
    best.map(|b| b.0)
}

/// Builds the line: [`Report::push`] each field, then [`Report::finish`].
#[derive(Debug, Clone, Default)]
pub struct Report {
    line: String,
    cut: bool,
}

impl Report {
    pub fn new() -> Report {
        let mut r = Report {
            line: String::from(PREFIX),
            cut: false,
        };
        r.push("v", VERSION);
        r
    }

    /// Add `key=value` (spaces and `=` in the value become `_`); left out, and the line marked
    /// as cut, if it would not leave room for the checksum.
    pub fn push(&mut self, key: &str, value: impl fmt::Display) -> &mut Report {
        let mut v = String::new();
        let _ = write!(v, "{value}");
        let v: String = v
            .chars()
            .map(|c| match c {
                ' ' | '=' => '_',
                c if c.is_ascii_graphic() => c,
                _ => '?',
            })
            .collect();
        // Room for this field, ` cut=1` and the checksum.
        if self.line.len() + key.len() + v.len() + 2 + 6 + SUM_LEN > MAX_LEN {
            self.cut = true;
            return self;
        }
        if self.line.len() > PREFIX.len() {
            self.line.push(' ');
        }
        let _ = write!(self.line, "{key}={v}");
        self
    }

    /// The line, with its checksum.
    pub fn finish(mut self) -> String {
        if self.cut {
            self.line.push_str(" cut=1");
        }
        let sum = crc32fast::hash(self.line.as_bytes());
        let _ = write!(self.line, " sum={sum:08x}");
        self.line
    }
}

/// Why a report line could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    /// No line starts with [`PREFIX`].
    Missing,
    /// The line has no ` sum=` field, or its checksum is not the line's: it was cut or altered.
    Checksum { want: Option<u32>, got: u32 },
    /// A field is not `key=value`.
    Field(String),
    /// A version this decoder does not know.
    Version(String),
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::Missing => write!(f, "no line starts with `{}`", PREFIX.trim_end()),
            ReportError::Checksum { want: None, .. } => {
                write!(f, "the report line has no checksum: it was cut when copied (copy the whole line)")
            }
            ReportError::Checksum { want: Some(w), got } => write!(
                f,
                "the report line's checksum is {w:08x} but its text sums to {got:08x}: it was altered or cut when copied (copy the whole line)"
            ),
            ReportError::Field(s) => write!(f, "the report line has a field that is not key=value: {s:?}"),
            ReportError::Version(v) => write!(f, "report format version {v}; this decoder reads version {VERSION}"),
        }
    }
}

/// The fields of the last report line in `log` (a saved serial log), checked against its sum.
pub fn parse(log: &str) -> Result<Vec<(String, String)>, ReportError> {
    let line = log
        .lines()
        .rev()
        .find_map(|l| l.find(PREFIX).map(|i| l[i..].trim_end()))
        .ok_or(ReportError::Missing)?;
    let (body, sum) = match line.rfind(" sum=") {
        Some(i) => (&line[..i], u32::from_str_radix(&line[i + 5..], 16).ok()),
        None => (line, None),
    };
    let got = crc32fast::hash(body.as_bytes());
    if sum != Some(got) {
        return Err(ReportError::Checksum { want: sum, got });
    }
    let mut fields = Vec::new();
    for f in body[PREFIX.len()..].split(' ') {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| ReportError::Field(f.into()))?;
        fields.push((String::from(k), String::from(v)));
    }
    match fields.first() {
        Some((k, v)) if k == "v" && v.parse() == Ok(VERSION) => Ok(fields),
        Some((k, v)) if k == "v" => Err(ReportError::Version(v.clone())),
        _ => Err(ReportError::Version(String::from("(none)"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::ToString;

    #[test]
    fn a_line_reads_back_with_its_fields() {
        let mut r = Report::new();
        r.push("board", "rpi3")
            .push("kernels", "neon dotprod")
            .push("pio", 12.5);
        let line = r.finish();
        assert!(
            line.starts_with("lmboot-report: v=1 board=rpi3 kernels=neon_dotprod pio=12.5 sum=")
        );
        let log = format!("boot...\r\n{line}\r\nstats: done\r\n");
        let f = parse(&log).unwrap();
        let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["v", "board", "kernels", "pio"]);
        assert_eq!(f[2].1, "neon_dotprod");
    }

    #[test]
    fn the_top_three_and_the_digest_of_logits() {
        let l = [0.5, 3.0, f32::NAN, 3.0, -1.0, 2.0];
        assert_eq!(top3(&l), [1, 3, 5]);
        assert_eq!(top3(&[1.0]), [0, u32::MAX, u32::MAX]);
        assert_ne!(logits_crc32(&l), logits_crc32(&l[..5]));
        assert_ne!(logits_crc32(&[0.0]), logits_crc32(&[-0.0]));
    }

    #[test]
    fn a_cut_or_altered_line_is_named() {
        let line = Report::new().push("board", "rpi3").clone().finish();
        let cut = &line[..line.len() - 14];
        assert!(matches!(
            parse(cut),
            Err(ReportError::Checksum { want: None, .. })
        ));
        let altered = line.replace("rpi3", "rpi4");
        let e = parse(&altered).unwrap_err();
        assert!(e.to_string().contains("altered or cut"), "{e}");
        assert_eq!(parse("no report here"), Err(ReportError::Missing));
    }

    #[test]
    fn a_long_report_stays_within_the_limit_and_says_it_was_cut() {
        let mut r = Report::new();
        for i in 0..200 {
            r.push("verdicts", format_args!("check{i}:ok"));
        }
        let line = r.finish();
        assert!(line.len() <= MAX_LEN, "{}", line.len());
        let f = parse(&line).unwrap();
        assert_eq!(f.last().unwrap(), &("cut".to_string(), "1".to_string()));
    }

    #[test]
    fn the_digest_covers_the_whole_file_or_its_two_ends() {
        assert_eq!(digest_ranges(100, None), [0..100, 100..100]);
        assert_eq!(digest_ranges(100, Some(10)), [0..10, 90..100]);
        // Ends that meet or overlap cover the file once.
        assert_eq!(digest_ranges(100, Some(50)), [0..50, 50..100]);
        assert_eq!(digest_ranges(100, Some(70)), [0..70, 70..100]);
        assert_eq!(digest_ranges(100, Some(500)), [0..100, 100..100]);
    }
}
