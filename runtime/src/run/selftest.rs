//! `selftest = full`: the board's first-boot checks, before the prompt or the chat, each with a
//! one-line verdict, then one line a user can paste whole into a bug report
//! (`lmboot-report: ...`, decoded by `cargo xtask report`; the format is the `report` crate's).
//!
//! The checks so far: **kernels**, every kernel set this CPU runs against the scalar set, bit for
//! bit ([`inference::quant::selfcheck`]); a set that differs is disabled for the run and named,
//! and the next set (at worst the scalar one) runs instead. `selftest_fault = kernels` makes the
//! check see a set that computes one operation wrong, to show that path.

use super::RunError;
use crate::config::Config;
use crate::console::Out;
use crate::platform::Platform;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use inference::quant::selfcheck::{self, Mismatch};
use inference::Kernels;
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

/// A copy of `k` whose q·k product is off by one (`selftest_fault = kernels`).
fn broken(k: Kernels) -> Kernels {
    fn wrong(q: &[f32], key: &[u16]) -> f32 {
        inference::ops::dot_f32_f16(q, key) + 1.0
    }
    Kernels {
        dot_f32_f16: wrong,
        ..k
    }
}

/// The kernels check: every set this CPU runs against scalar; the set the run uses (the one
/// `cfg.kernels` names, or `auto`'s pick, or the best set that passed when that one failed).
pub(super) fn kernels<P: Platform + ?Sized>(
    cfg: &Config,
    platform: &P,
    found: &mut Findings,
    out: &mut Out<'_>,
) -> Result<Kernels, RunError> {
    let auto = platform.kernels();
    let fault = cfg.selftest_fault.as_deref() == Some("kernels");
    let t0 = platform.now_ns();
    let mut passed: Vec<Kernels> = Vec::new();
    let mut failed: Vec<Mismatch> = Vec::new();
    let mut compared = 0;
    for k in Kernels::available().filter(|k| k.name != Kernels::SCALAR.name) {
        let checked = if fault && k.name == auto.name {
            broken(k)
        } else {
            k
        };
        match selfcheck::check(&checked) {
            Ok(n) => {
                compared = n;
                passed.push(k);
            }
            Err(m) => failed.push(m),
        }
    }
    let ms = (platform.now_ns() - t0) / 1_000_000;
    let names = |v: &[Kernels]| v.iter().map(|k| k.name).collect::<Vec<_>>().join(", ");
    for m in &failed {
        let _ = writeln!(
            out,
            "selftest: kernels FAILED: {m}; that set is disabled for this run"
        );
    }
    let wanted = match cfg.kernels {
        "auto" => auto,
        name => Kernels::by_name(name).ok_or_else(|| RunError::KernelsUnavailable(name.into()))?,
    };
    let usable =
        |k: &Kernels| k.name == Kernels::SCALAR.name || passed.iter().any(|p| p.name == k.name);
    let chosen = match usable(&wanted) {
        true => wanted,
        // The best set that passed (`available` lists the best last), else the scalar one.
        false => passed.last().copied().unwrap_or(Kernels::SCALAR),
    };
    let verdict = if failed.is_empty() { "ok" } else { "fail" };
    let _ = match passed.is_empty() {
        true if failed.is_empty() => writeln!(
            out,
            "selftest: kernels ok: this CPU runs no set but the scalar one; the run uses {}",
            chosen.name
        ),
        true => writeln!(
            out,
            "selftest: kernels fail: no set passed ({ms} ms); the run uses {}",
            chosen.name
        ),
        false => writeln!(
            out,
            "selftest: kernels {verdict}: {} equal to scalar bit for bit ({compared} results each, {ms} ms); the run uses {}",
            names(&passed),
            chosen.name
        ),
    };
    found.field("kernels", chosen.name);
    found.field("auto", auto.name);
    found.verdicts.push(("kernels", verdict));
    Ok(chosen)
}
