//! `selftest = full`: the board's first-boot checks, before the prompt or the chat, each with a
//! one-line verdict, then one line a user can paste whole into a bug report
//! (`lmboot-report: ...`, decoded by `cargo xtask report`; the format is the `report` crate's).
//!
//! The checks so far:
//! - **model**: the model file read whole from the card, its CRC-32 against the one `cargo xtask
//!   image` wrote in `lmboot.txt` (`model_crc32`): a card corrupted by the write, or a driver
//!   that reads wrong bytes, stops the run here with the error naming it, before any token; the
//!   read rate is measured on the way;
//! - **clocks**: the counter's frequency against the device tree's and a second clock, the
//!   cycle counter against the firmware's measured ARM clock, the firmware's core clock,
//!   temperature and throttling flags ([`clocks`]);
//! - **card**: the bus the card runs on, its CRC errors and retries, and on a host that reads
//!   both ways the model file's first 4 MiB read by DMA and by PIO, timed and compared: DMA
//!   that reads other bytes (a missing cache invalidate) is named and the run reads by PIO;
//! - **memory**: a copy's rate on one core and on all, then a pattern test over as much of the
//!   heap as the model will use (up to 64 MiB, before the page cache takes it): every word its
//!   own address, read back, then walking ones and zeros over the first MiB;
//! - **cores**: every working core computes the same checksum of kernel work
//!   ([`inference::quant::selfcheck::checksum`]); a core that differs or does not answer is
//!   named and the run keeps the cores before it (`selftest_fault = core`: the last core's
//!   answer is dropped, to show that path);
//! - **forward**: the logits after one token alone, their CRC-32 and top three tokens, against
//!   what the PC computed when `cargo xtask image` wrote the card (`forward_check`): "this CPU
//!   computes what the PC computes" in one line (a mismatch is reported; the run goes on);
//! - **kernels**: every kernel set this CPU runs against the scalar set, bit for bit
//!   ([`inference::quant::selfcheck`]); a set that differs is disabled for the run and named,
//!   and the next set (at worst the scalar one) runs instead. `selftest_fault = kernels` makes
//!   the check see a set that computes one operation wrong, to show that path.

mod card;
mod clocks;
mod compute;
mod memory;
mod model;
mod rates;

pub use card::{card_check, CardCheck, SPAN as CARD_SPAN};
pub(super) use compute::kernels;

use super::RunError;
use crate::card::Direct;
use crate::config::Config;
use crate::console::Out;
use crate::pagecache::{FileSource, PageCache};
use crate::platform::Platform;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use drivers::block::WriteBlocks;
use inference::model::{Model, RunState};
use inference::parallel::Parallel;
use inference::Kernels;
use report::Report;

/// What the checks found, for the report line.
#[derive(Debug, Default)]
pub(super) struct Findings {
    fields: Vec<(&'static str, String)>,
    verdicts: Vec<(&'static str, &'static str)>,
    /// What each check took: its name, nanoseconds, core 0's instructions (if counted).
    took: Vec<(&'static str, u64, Option<u64>)>,
}

/// Where a check started: the clock and this core's instruction counter.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark {
    ns: u64,
    instructions: Option<u64>,
}

impl Mark {
    pub fn now<P: Platform + ?Sized>(platform: &P) -> Mark {
        Mark {
            ns: platform.now_ns(),
            instructions: platform.instruction_counter().map(|(read, _)| read()),
        }
    }
}

impl Findings {
    /// Note what `check` took since `from`.
    pub fn took<P: Platform + ?Sized>(&mut self, check: &'static str, from: Mark, platform: &P) {
        let now = Mark::now(platform);
        let instructions = platform
            .instruction_counter()
            .zip(now.instructions.zip(from.instructions))
            .map(|((_, bits), (b, a))| b.wrapping_sub(a) & (u64::MAX >> (64 - bits.clamp(1, 64))));
        self.took.push((check, now.ns - from.ns, instructions));
    }

    /// `selftest: took 812 ms: model 120 ms (14 M instructions on core 0), memory ...`: what
    /// `cargo xtask bench --only selftest` reads under `-icount`.
    fn took_line(&self) -> String {
        let total: u64 = self.took.iter().map(|t| t.1).sum();
        let mut s = alloc::format!("selftest: took {} ms:", total / 1_000_000);
        let counted = self.took.iter().any(|t| t.2.is_some_and(|n| n > 0));
        for (i, (check, ns, instructions)) in self.took.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep} {check} {} ms", ns / 1_000_000);
            // A counter that counted nothing (QEMU's, without -icount) is left out.
            if let Some(n) = instructions.filter(|_| counted) {
                let _ = write!(s, " ({} M instructions on core 0)", n / 1_000_000);
            }
        }
        s
    }

    fn field(&mut self, key: &'static str, value: impl core::fmt::Display) {
        let mut v = String::new();
        let _ = write!(v, "{value}");
        self.fields.push((key, v));
    }

    /// The report line: the board, lmboot's version, every field, the verdicts.
    pub fn line<P: Platform + ?Sized>(&self, platform: &P) -> String {
        let mut r = Report::new();
        r.push("lmboot", env!("CARGO_PKG_VERSION"));
        r.push("board", platform.board());
        for (k, v) in &self.fields {
            r.push(k, v);
        }
        let mut verdicts = String::new();
        for (i, (check, v)) in self.verdicts.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(verdicts, "{sep}{check}:{v}");
        }
        r.push("verdicts", verdicts);
        r.finish()
    }
}

/// With `selftest = full`, the checks before the model is loaded: the model file, the card, the
/// clocks, then memory (while the heap is still free).
pub(super) fn before_load<D: WriteBlocks + Send, P: Platform + ?Sized>(
    cfg: &Config,
    direct: &Direct<D>,
    (platform, found): (&P, &mut Findings),
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    if cfg.selftest.as_deref() != Some("full") {
        return Ok(());
    }
    let t = Mark::now(platform);
    model::check(cfg, direct, (platform, found), out)?;
    found.took("model", t, platform);
    let t = Mark::now(platform);
    card::check(direct, (platform, found), out)?;
    found.took("card", t, platform);
    let t = Mark::now(platform);
    clocks::check(platform, found, out);
    found.took("clocks", t, platform);
    let t = Mark::now(platform);
    memory::check(platform, found, out)?;
    found.took("memory", t, platform);
    Ok(())
}

/// With `selftest = full`, the checks once the model is loaded and the kernels chosen (their
/// check ran in [`kernels`]): the cores (those that disagree are left out of the run), the
/// forward pass (in `st`, reset after); then the report line.
pub(super) fn after_load<F: FileSource + Send, P: Platform + ?Sized>(
    cfg: &Config,
    (platform, k): (&P, &Kernels),
    (model, src, st): (&Model, &PageCache<F>, &mut RunState),
    found: &mut Findings,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    if cfg.selftest.as_deref() != Some("full") {
        return Ok(());
    }
    let t = Mark::now(platform);
    let keep = compute::cores(cfg, (platform, k), found, out);
    if keep < platform.pool().workers() {
        platform.set_cores(Some(keep));
    }
    found.took("cores", t, platform);
    let t = Mark::now(platform);
    rates::measure(cfg, (platform, k), (model, src), found, out);
    found.took("rates", t, platform);
    let t = Mark::now(platform);
    compute::forward(cfg, model, st, (src, platform.pool(), k), found, out)?;
    found.took("forward", t, platform);
    let _ = writeln!(out, "{}", found.took_line());
    let _ = writeln!(out, "{}", found.line(platform));
    Ok(())
}

/// Bytes per µs (MB/s) of `bytes` moved in `ns`.
fn rate(bytes: usize, ns: u64) -> u64 {
    bytes as u64 * 1000 / ns.max(1)
}
