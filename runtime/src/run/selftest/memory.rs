//! The memory check: copy and read rates and a pattern test over the heap the model will use.

use super::{rate, Findings, RunError};
use crate::console::Out;
use crate::platform::Platform;
use core::fmt::Write;

/// Largest span the pattern test covers, and the span of its walking bits.
const PATTERN_MAX: usize = 64 << 20;
const WALK: usize = 1 << 20;

/// The memory check: copy and read rates (one core, all cores) and the pattern test, over a buffer of up
/// to [`PATTERN_MAX`] taken from the heap and given back.
pub(super) fn check<P: Platform + ?Sized>(
    platform: &P,
    found: &mut Findings,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let words = ((platform.heap_free() / 2) as usize).min(PATTERN_MAX) / 8 / 2 * 2;
    let mut buf = inference::oom::filled(words, 0u64, "the memory check's buffer")
        .map_err(RunError::OutOfMemory)?;
    let half = words / 2;
    let (a, b) = buf.split_at_mut(half);
    let r = rates(platform, a, b);
    found.field("mem1", r.copy.0);
    found.field("memn", r.copy.1);
    found.field("mr1", r.read.0);
    found.field("mrn", r.read.1);
    found.field("heap", (words * 8) >> 20);
    let t0 = platform.now_ns();
    let bad = pattern(&mut buf);
    let ms = (platform.now_ns() - t0) / 1_000_000;
    drop(buf);
    let verdict = match bad {
        None => {
            let _ = writeln!(out, "selftest: memory ok: copy {} MB/s on one core, {} MB/s on all; read {} and {} MB/s; {} MiB patterned in {ms} ms", r.copy.0, r.copy.1, r.read.0, r.read.1, (words * 8) >> 20);
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

/// Copy and read rates, MB/s, each (one core, all cores).
struct Rates {
    copy: (u64, u64),
    read: (u64, u64),
}

/// `a` copied into `b` and `a` summed, on one core and then split across the pool's workers.
fn rates<P: Platform + ?Sized>(platform: &P, a: &[u64], b: &mut [u64]) -> Rates {
    let bytes = a.len() * 8;
    let mut units = [(); inference::parallel::MAX_WORKERS];
    let t0 = platform.now_ns();
    b.copy_from_slice(a);
    let copy1 = rate(bytes, platform.now_ns() - t0);
    let t0 = platform.now_ns();
    let _ = inference::parallel::par_chunks(platform.pool(), b, 1, &mut units, |r, part, _| {
        part.copy_from_slice(&a[r]);
        Ok::<(), ()>(())
    });
    let copyn = rate(bytes, platform.now_ns() - t0);
    let sum = |words: &[u64]| words.iter().fold(0u64, |s, w| s.wrapping_add(*w));
    let t0 = platform.now_ns();
    core::hint::black_box(sum(a));
    let read1 = rate(bytes, platform.now_ns() - t0);
    let t0 = platform.now_ns();
    let _ = inference::parallel::par_chunks(platform.pool(), b, 1, &mut units, |r, _, _| {
        core::hint::black_box(sum(&a[r]));
        Ok::<(), ()>(())
    });
    let readn = rate(bytes, platform.now_ns() - t0);
    Rates {
        copy: (copy1, copyn),
        read: (read1, readn),
    }
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
