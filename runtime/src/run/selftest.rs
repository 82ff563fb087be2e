//! `selftest = full`: the board's first-boot checks, before the prompt or the chat, each with a
//! one-line verdict, then one line a user can paste whole into a bug report
//! (`lmboot-report: ...`, decoded by `cargo xtask report`; the format is the `report` crate's).
//!
//! The checks so far:
//! - **model**: the model file read whole from the card, its CRC-32 against the one `cargo xtask
//!   image` wrote in `lmboot.txt` (`model_crc32`): a card corrupted by the write, or a driver
//!   that reads wrong bytes, stops the run here with the error naming it, before any token; the
//!   read rate is measured on the way;
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
use inference::quant::selfcheck::{self, Mismatch};
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

/// With `selftest = full`, the checks before the model is loaded: the model file, then memory
/// (while the heap is still free).
pub(super) fn before_load<D: WriteBlocks + Send, P: Platform + ?Sized>(
    cfg: &Config,
    direct: &Direct<D>,
    (platform, found): (&P, &mut Findings),
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    if cfg.selftest.as_deref() != Some("full") {
        return Ok(());
    }
    model(cfg, direct, (platform, found), out)?;
    memory(platform, found, out)
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
    let keep = cores(cfg, (platform, k), found, out);
    if keep < platform.pool().workers() {
        platform.set_cores(Some(keep));
    }
    forward(cfg, model, st, (src, platform.pool(), k), found, out)?;
    let _ = writeln!(out, "{}", found.line(platform));
    Ok(())
}

/// Bytes read from the card per call while digesting the model.
const CHUNK: usize = 1 << 20;

/// The model check: the file's CRC-32 against `model_crc32`. A mismatch is an error (printed
/// with the report line first); no `model_crc32` is a skip.
fn model<D: WriteBlocks + Send, P: Platform + ?Sized>(
    cfg: &Config,
    direct: &Direct<D>,
    (platform, found): (&P, &mut Findings),
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let Some(want) = cfg.model_crc32 else {
        let _ = writeln!(
            out,
            "selftest: model skip: lmboot.txt has no model_crc32 (cargo xtask image writes it)"
        );
        found.verdicts.push(("model", "skip"));
        return Ok(());
    };
    let size = direct.len();
    let mut buf = inference::oom::filled(CHUNK, 0u8, "the model check's buffer")
        .map_err(RunError::OutOfMemory)?;
    let mut crc = crc32fast::Hasher::new();
    let t0 = platform.now_ns();
    let mut at = 0u64;
    while at < size {
        let n = (size - at).min(CHUNK as u64) as usize;
        direct
            .read_at(at, &mut buf[..n])
            .map_err(|e| RunError::SelfTest(alloc::format!("model: {e}")))?;
        crc.update(&buf[..n]);
        at += n as u64;
    }
    let ns = (platform.now_ns() - t0).max(1);
    let rate = size * 1000 / ns;
    found.field("read", rate);
    let got = crc.finalize();
    if got != want {
        found.verdicts.push(("model", "fail"));
        let _ = writeln!(out, "{}", found.line(platform));
        return Err(RunError::SelfTest(alloc::format!(
            "model FAILED: {}'s CRC-32 is {got:08x}, but lmboot.txt's model_crc32 says {want:08x}: the file on the card is not the file written to it (write the card again with cargo xtask image, or try another card)",
            cfg.model
        )));
    }
    let _ = writeln!(
        out,
        "selftest: model ok: {} MiB read from the card in {} ms ({rate} MB/s), CRC-32 {got:08x} as written",
        size >> 20,
        ns / 1_000_000
    );
    found.verdicts.push(("model", "ok"));
    Ok(())
}

/// Largest span the pattern test covers, and the span of its walking bits.
const PATTERN_MAX: usize = 64 << 20;
const WALK: usize = 1 << 20;

/// The memory check: copy rates (one core, all cores) and the pattern test, over a buffer of up
/// to [`PATTERN_MAX`] taken from the heap and given back.
fn memory<P: Platform + ?Sized>(
    platform: &P,
    found: &mut Findings,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let words = ((platform.heap_free() / 2) as usize).min(PATTERN_MAX) / 8 / 2 * 2;
    let mut buf = inference::oom::filled(words, 0u64, "the memory check's buffer")
        .map_err(RunError::OutOfMemory)?;
    let half = words / 2;
    let (a, b) = buf.split_at_mut(half);
    let t0 = platform.now_ns();
    b.copy_from_slice(a);
    let one = rate(half * 8, platform.now_ns() - t0);
    let t0 = platform.now_ns();
    let mut units = [(); inference::parallel::MAX_WORKERS];
    let _ = inference::parallel::par_chunks(platform.pool(), b, 1, &mut units, |r, part, _| {
        part.copy_from_slice(&a[r]);
        Ok::<(), ()>(())
    });
    let all = rate(half * 8, platform.now_ns() - t0);
    found.field("mem1", one);
    found.field("memn", all);
    found.field("heap", (words * 8) >> 20);
    let t0 = platform.now_ns();
    let bad = pattern(&mut buf);
    let ms = (platform.now_ns() - t0) / 1_000_000;
    drop(buf);
    let verdict = match bad {
        None => {
            let _ = writeln!(out, "selftest: memory ok: copy {one} MB/s on one core, {all} MB/s on all; {} MiB patterned in {ms} ms", (words * 8) >> 20);
            "ok"
        }
        Some((at, wrote, read)) => {
            let _ = writeln!(out, "selftest: memory FAILED: word {at} of the {} MiB tested read {read:#018x} after {wrote:#018x} was written", (words * 8) >> 20);
            "fail"
        }
    };
    found.verdicts.push(("memory", verdict));
    Ok(())
}

/// Bytes per µs (MB/s) of `bytes` moved in `ns`.
fn rate(bytes: usize, ns: u64) -> u64 {
    bytes as u64 * 1000 / ns.max(1)
}

/// Each word its own index (scrambled), read back; then walking ones and zeros over the first
/// [`WALK`] bytes. The first word that reads back wrong: (index, written, read).
fn pattern(buf: &mut [u64]) -> Option<(usize, u64, u64)> {
    let mark = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5a5a_5a5a_5a5a_5a5a;
    for (i, w) in buf.iter_mut().enumerate() {
        // SAFETY: `w` is a valid, aligned word of the buffer; volatile so that every write and
        // the read below reach memory rather than staying in registers.
        unsafe { core::ptr::write_volatile(w, mark(i)) };
    }
    if let Some(bad) = read_back(buf, mark) {
        return Some(bad);
    }
    let walk = (WALK / 8).min(buf.len());
    for bit in 0..128 {
        let v = |_: usize| {
            if bit < 64 {
                1u64 << bit
            } else {
                !(1u64 << (bit - 64))
            }
        };
        for w in buf[..walk].iter_mut() {
            // SAFETY: as above.
            unsafe { core::ptr::write_volatile(w, v(0)) };
        }
        if let Some(bad) = read_back(&buf[..walk], v) {
            return Some(bad);
        }
    }
    None
}

/// The first word of `buf` that is not `want(index)`.
fn read_back(buf: &[u64], want: impl Fn(usize) -> u64) -> Option<(usize, u64, u64)> {
    buf.iter().enumerate().find_map(|(i, w)| {
        // SAFETY: `w` is a valid, aligned word of the buffer.
        let got = unsafe { core::ptr::read_volatile(w) };
        (got != want(i)).then_some((i, want(i), got))
    })
}

/// The cores check: every worker computes [`selfcheck::checksum`] of `k`; returns how many
/// cores the run keeps (those before the first that differs or does not answer).
fn cores<P: Platform + ?Sized>(
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
            "selftest: cores ok: {n} cores computed the same checksum ({first:08x})"
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
fn forward<S: Storage + Sync + ?Sized, P: Parallel + ?Sized>(
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
