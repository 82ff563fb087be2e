//! `selftest = full`: the board's first-boot checks, before the prompt or the chat, each with a
//! one-line verdict, then one line a user can paste whole into a bug report
//! (`lmboot-report: ...`, decoded by `cargo xtask report`; the format is the `report` crate's).
//!
//! The checks so far:
//! - **model**: the model file read whole from the card, its CRC-32 against the one `cargo xtask
//!   image` wrote in `lmboot.txt` (`model_crc32`): a card corrupted by the write, or a driver
//!   that reads wrong bytes, stops the run here with the error naming it, before any token; the
//!   read rate is measured on the way;
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
mod compute;
mod memory;
mod model;

pub use card::{card_check, CardCheck};
pub(super) use compute::kernels;

use super::RunError;
use crate::card::Direct;
use crate::config::Config;
use crate::console::Out;
use crate::platform::Platform;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use drivers::block::WriteBlocks;
use inference::model::{Model, RunState};
use inference::parallel::Parallel;
use inference::Kernels;
use inference::Storage;
use report::Report;

/// What the checks found, for the report line.
#[derive(Debug, Default)]
pub(super) struct Findings {
    fields: Vec<(&'static str, String)>,
    verdicts: Vec<(&'static str, &'static str)>,
}

impl Findings {
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

/// With `selftest = full`, the checks before the model is loaded: the model file, the card, then
/// memory (while the heap is still free).
pub(super) fn before_load<D: WriteBlocks + Send, P: Platform + ?Sized>(
    cfg: &Config,
    direct: &Direct<D>,
    (platform, found): (&P, &mut Findings),
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    if cfg.selftest.as_deref() != Some("full") {
        return Ok(());
    }
    model::check(cfg, direct, (platform, found), out)?;
    card::check(direct, (platform, found), out)?;
    memory::check(platform, found, out)
}

/// With `selftest = full`, the checks once the model is loaded and the kernels chosen (their
/// check ran in [`kernels`]): the cores (those that disagree are left out of the run), the
/// forward pass (in `st`, reset after); then the report line.
pub(super) fn after_load<S: Storage + Sync + ?Sized, P: Platform + ?Sized>(
    cfg: &Config,
    (platform, k): (&P, &Kernels),
    (model, src, st): (&Model, &S, &mut RunState),
    found: &mut Findings,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    if cfg.selftest.as_deref() != Some("full") {
        return Ok(());
    }
    let keep = compute::cores(cfg, (platform, k), found, out);
    if keep < platform.pool().workers() {
        platform.set_cores(Some(keep));
    }
    compute::forward(cfg, model, st, (src, platform.pool(), k), found, out)?;
    let _ = writeln!(out, "{}", found.line(platform));
    Ok(())
}

/// Bytes per µs (MB/s) of `bytes` moved in `ns`.
fn rate(bytes: usize, ns: u64) -> u64 {
    bytes as u64 * 1000 / ns.max(1)
}
