//! The checks of what the CPU computes: the kernel sets against scalar, the cores against each
//! other, the forward pass against the PC's.

use super::{Findings, RunError};
use crate::config::Config;
use crate::console::Out;
use crate::platform::Platform;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use inference::model::{Model, RunState};
use inference::parallel::Parallel;
use inference::quant::selfcheck::{self, Mismatch};
use inference::Kernels;
use inference::Storage;

/// The cores check: every worker computes [`selfcheck::checksum`] of `k`; returns how many
/// cores the run keeps (those before the first that differs or does not answer).
pub(super) fn cores<P: Platform + ?Sized>(
    cfg: &Config,
    (platform, k): (&P, &Kernels),
    found: &mut Findings,
    out: &mut Out<'_>,
) -> usize {
    use core::sync::atomic::{AtomicU32, Ordering};
    let pool = platform.pool();
    let n = pool.workers();
    let sums: [AtomicU32; inference::parallel::MAX_WORKERS] =
        core::array::from_fn(|_| AtomicU32::new(0));
    let answered: [AtomicU32; inference::parallel::MAX_WORKERS] =
        core::array::from_fn(|_| AtomicU32::new(0));
    let drop_last = cfg.selftest_fault.as_deref() == Some("core") && n > 1;
    pool.run(&|w| {
        if drop_last && w == n - 1 {
            return;
        }
        sums[w].store(selfcheck::checksum(k), Ordering::Relaxed);
        answered[w].store(1, Ordering::Relaxed);
    });
    let first = sums[0].load(Ordering::Relaxed);
    let good = (0..n)
        .take_while(|&w| {
            answered[w].load(Ordering::Relaxed) == 1 && sums[w].load(Ordering::Relaxed) == first
        })
        .count();
    found.field("cores", format_args!("{good}/{n}"));
    if good == n {
        let _ = writeln!(
            out,
            "selftest: cores ok: {n} {} computed the same checksum ({first:08x})",
            if n == 1 { "core" } else { "cores" }
        );
        found.verdicts.push(("cores", "ok"));
    } else {
        let why = match answered[good].load(Ordering::Relaxed) {
            0 => String::from("did not answer"),
            _ => alloc::format!(
                "computed {:08x}, core 0 {first:08x}",
                sums[good].load(Ordering::Relaxed)
            ),
        };
        let _ = writeln!(
            out,
            "selftest: cores FAILED: core {good} {why}; the run uses cores 0-{}",
            good.max(1) - 1
        );
        found.verdicts.push(("cores", "fail"));
    }
    good.max(1)
}

/// The forward check: `cfg.forward_check`'s token alone through the model in `st` (reset before
/// and after), its logits' digest and top three against the PC's.
pub(super) fn forward<S: Storage + Sync + ?Sized, P: Parallel + ?Sized>(
    cfg: &Config,
    model: &Model,
    st: &mut RunState,
    (src, pool, k): (&S, &P, &Kernels),
    found: &mut Findings,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let Some(want) = cfg.forward_check else {
        let _ = writeln!(
            out,
            "selftest: forward skip: lmboot.txt has no forward_check (cargo xtask image writes it)"
        );
        found.verdicts.push(("forward", "skip"));
        return Ok(());
    };
    st.reset();
    let r = model.forward(st, src, pool, k, want.token, true);
    let (crc, top) = (report::logits_crc32(&st.logits), report::top3(&st.logits));
    st.reset();
    r.map_err(RunError::Model)?;
    found.field("top", format_args!("{},{},{}", top[0], top[1], top[2]));
    let ok = crc == want.crc && top == want.top;
    let _ = match ok {
        true => writeln!(
            out,
            "selftest: forward ok: the logits after token {} are the PC's bit for bit (CRC-32 {crc:08x}; top tokens {top:?})",
            want.token
        ),
        false => writeln!(
            out,
            "selftest: forward FAILED: the logits after token {} have CRC-32 {crc:08x} and top tokens {top:?}; the PC's: {:08x}, {:?}",
            want.token, want.crc, want.top
        ),
    };
    found
        .verdicts
        .push(("forward", if ok { "ok" } else { "fail" }));
    Ok(())
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
pub(in crate::run) fn kernels<P: Platform + ?Sized>(
    cfg: &Config,
    platform: &P,
    found: &mut Findings,
    out: &mut Out<'_>,
) -> Result<Kernels, RunError> {
    let auto = platform.kernels();
    let fault = cfg.selftest_fault.as_deref() == Some("kernels");
    let mark = super::Mark::now(platform);
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
    found.took("kernels", mark, platform);
    Ok(chosen)
}
