//! Float dot products (F32 / F16 / BF16 weights · activations of the same type) and the attention
//! of one head over the f16 KV cache.
//!
//! The scalar twins keep four partial sums, `acc[i & 3] += w[i] * x[i]`, combined as
//! `(acc[0] + acc[1]) + (acc[2] + acc[3])`. Here partial sum `k` is computed on its own: strided
//! loads (stride 4 elements) fetch elements `k, k + 4, k + 8, ...`, one vector multiplication forms
//! their products (rounded as the scalar `w * x`), and `vfredosum` adds them to the partial sum one
//! by one, in element order: the scalar additions exactly. Elements are whole values of their type,
//! so the weights must be naturally aligned (GGUF tensor data is); an odd address falls back to the
//! scalar kernel, which computes the same bits.
//!
//! The attention's `q·k` keeps eight partial sums `acc[i & 7]` (see [`crate::ops::dot_f32_f16`]):
//! there one 8-lane vector is the eight sums, eight elements added per step; the updates of the
//! output are elementwise, one vector instruction per scalar operation.

use super::{f16_bits_to_f32, rvv_asm, BIG, INF, K112, MAG};
use crate::quant::scalar;

/// Elements in partial sum `k` of `n` (elements `k, k + 4, ...` below `n`).
fn lane_len(n: usize, k: usize) -> usize {
    if k < n {
        (n - k).div_ceil(4)
    } else {
        0
    }
}

/// F32 weights · f32 activations (twin of `scalar::vec_dot_f32_f32`).
pub fn vec_dot_f32_f32(w: &[u8], x: &[f32]) -> f32 {
    if !w.as_ptr().cast::<f32>().is_aligned() {
        return scalar::vec_dot_f32_f32(w, x);
    }
    let n = (w.len() / 4).min(x.len());
    let mut acc = [0.0f32; 4];
    for (k, s) in acc.iter_mut().enumerate() {
        let len = lane_len(n, k);
        if len == 0 {
            continue;
        }
        // SAFETY: reads elements k, k + 4, .., k + 4 (len - 1) < n of `w` (4-byte aligned, 4 bytes
        // each) and `x`; only vector registers, the named scalars and vl/vtype change. Reached only
        // on harts with V (see `runs_on`).
        unsafe {
            rvv_asm!(
                [
                    "vsetvli {t}, zero, e32, m1, ta, ma",
                    "vfmv.s.f v1, {s}",
                    "2:",
                    "vsetvli {vl}, {n}, e32, m8, ta, ma",
                    "vlse32.v v8, ({w}), {st}",
                    "vlse32.v v16, ({x}), {st}",
                    "vfmul.vv v8, v8, v16",
                    "vfredosum.vs v1, v8, v1",
                    "mul {t}, {vl}, {st}",
                    "add {w}, {w}, {t}",
                    "add {x}, {x}, {t}",
                    "sub {n}, {n}, {vl}",
                    "bnez {n}, 2b",
                    "vfmv.f.s {s}, v1",
                ],
                [
                    w = inout(reg) w.as_ptr().wrapping_add(4 * k) => _,
                    x = inout(reg) x.as_ptr().wrapping_add(k) => _,
                    n = inout(reg) len => _,
                    st = in(reg) 16usize,
                    vl = out(reg) _,
                    t = out(reg) _,
                    s = inout(freg) *s,
                ],
                [nostack, readonly]
            );
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// F16 weights · f16 activations (twin of `scalar::vec_dot_f16_f16`).
pub fn vec_dot_f16_f16(w: &[u8], x: &[u16]) -> f32 {
    if !w.as_ptr().cast::<u16>().is_aligned() {
        return scalar::vec_dot_f16_f16(w, x);
    }
    let n = (w.len() / 2).min(x.len());
    let mut acc = [0.0f32; 4];
    for (k, s) in acc.iter_mut().enumerate() {
        let len = lane_len(n, k);
        if len == 0 {
            continue;
        }
        // SAFETY: reads elements k, k + 4, .., k + 4 (len - 1) < n of `w` (2-byte aligned, 2 bytes
        // each) and `x`; only vector registers, the named scalars and vl/vtype change. Reached only
        // on harts with V (see `runs_on`).
        unsafe {
            rvv_asm!(
                [
                    "vsetvli {t}, zero, e32, m1, ta, ma",
                    "vfmv.s.f v1, {s}",
                    "2:",
                    "vsetvli {vl}, {n}, e16, m4, ta, ma",
                    "vlse16.v v16, ({w}), {st}",
                    "vwmulu.vx v8, v16, {c8192}",
                    "vsetvli zero, {vl}, e32, m8, ta, mu",
                    // weights (f32) in v24..v31
                    f16_bits_to_f32!("v8", "v24"),
                    "vsetvli zero, {vl}, e16, m4, ta, ma",
                    "vlse16.v v16, ({x}), {st}",
                    "vwmulu.vx v8, v16, {c8192}",
                    "vsetvli zero, {vl}, e32, m8, ta, mu",
                    // activations (f32) in v16..v23
                    f16_bits_to_f32!("v8", "v16"),
                    "vfmul.vv v16, v24, v16",
                    "vfredosum.vs v1, v16, v1",
                    "mul {t}, {vl}, {st}",
                    "add {w}, {w}, {t}",
                    "add {x}, {x}, {t}",
                    "sub {n}, {n}, {vl}",
                    "bnez {n}, 2b",
                    "vfmv.f.s {s}, v1",
                ],
                [
                    w = inout(reg) w.as_ptr().wrapping_add(2 * k) => _,
                    x = inout(reg) x.as_ptr().wrapping_add(k) => _,
                    n = inout(reg) len => _,
                    st = in(reg) 8usize,
                    vl = out(reg) _,
                    t = out(reg) _,
                    c8192 = in(reg) 8192usize,
                    mag = in(reg) MAG,
                    big = in(reg) BIG,
                    inf = in(reg) INF,
                    k112 = in(freg) K112,
                    s = inout(freg) *s,
                ],
                [nostack, readonly]
            );
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// BF16 weights · bf16 activations (twin of `scalar::vec_dot_bf16_bf16`). bf16 → f32 is the 16
/// bits moved up (as `half` does for every non-NaN value; NaN stays NaN).
pub fn vec_dot_bf16_bf16(w: &[u8], x: &[u16]) -> f32 {
    if !w.as_ptr().cast::<u16>().is_aligned() {
        return scalar::vec_dot_bf16_bf16(w, x);
    }
    let n = (w.len() / 2).min(x.len());
    let mut acc = [0.0f32; 4];
    for (k, s) in acc.iter_mut().enumerate() {
        let len = lane_len(n, k);
        if len == 0 {
            continue;
        }
        // SAFETY: as in `vec_dot_f16_f16`.
        unsafe {
            rvv_asm!(
                [
                    "vsetvli {t}, zero, e32, m1, ta, ma",
                    "vfmv.s.f v1, {s}",
                    "2:",
                    "vsetvli {vl}, {n}, e16, m4, ta, ma",
                    "vlse16.v v16, ({w}), {st}",
                    "vlse16.v v20, ({x}), {st}",
                    "vsetvli zero, {vl}, e32, m8, ta, ma",
                    "vzext.vf2 v8, v16",
                    "vsll.vi v8, v8, 16",
                    "vzext.vf2 v24, v20",
                    "vsll.vi v24, v24, 16",
                    "vfmul.vv v8, v8, v24",
                    "vfredosum.vs v1, v8, v1",
                    "mul {t}, {vl}, {st}",
                    "add {w}, {w}, {t}",
                    "add {x}, {x}, {t}",
                    "sub {n}, {n}, {vl}",
                    "bnez {n}, 2b",
                    "vfmv.f.s {s}, v1",
                ],
                [
                    w = inout(reg) w.as_ptr().wrapping_add(2 * k) => _,
                    x = inout(reg) x.as_ptr().wrapping_add(k) => _,
                    n = inout(reg) len => _,
                    st = in(reg) 8usize,
                    vl = out(reg) _,
                    t = out(reg) _,
                    s = inout(freg) *s,
                ],
                [nostack, readonly]
            );
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// `q · k` (k as f16 bits) with the eight partial sums of [`crate::ops::dot_f32_f16`]: lane `j` of
/// an 8-lane accumulator is `acc[j]`, eight elements per step (the last step's missing lanes are
/// left alone: tail-undisturbed), combined as the scalar code combines them.
pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    let n = q.len().min(k.len());
    let mut acc = [0.0f32; 8];
    if n > 0 {
        // SAFETY: reads elements 0..n of `q` and `k` (steps of 8 while 8 are left, then the rest)
        // and writes the 8 floats of `acc`; only vector registers, the named scalars and vl/vtype
        // change. Reached only on harts with V (see `runs_on`).
        unsafe {
            rvv_asm!(
                [
                    "vsetivli zero, 8, e32, m2, ta, ma",
                    "vmv.v.i v4, 0",
                    "bltu {n}, {c8}, 3f",
                    "2:",
                    "vsetivli zero, 8, e16, m1, ta, ma",
                    "vle16.v v1, ({k})",
                    "vwmulu.vx v8, v1, {c8192}",
                    "vsetivli zero, 8, e32, m2, ta, mu",
                    f16_bits_to_f32!("v8", "v12"),
                    "vle32.v v16, ({q})",
                    "vfmul.vv v12, v16, v12",
                    "vfadd.vv v4, v4, v12",
                    "addi {q}, {q}, 32",
                    "addi {k}, {k}, 16",
                    "addi {n}, {n}, -8",
                    "bgeu {n}, {c8}, 2b",
                    "3:",
                    "beqz {n}, 4f",
                    // n < 8 ≤ VLMAX: vl = n; lanes n..8 of the accumulator stay as they are.
                    "vsetvli zero, {n}, e16, m1, tu, mu",
                    "vle16.v v1, ({k})",
                    "vwmulu.vx v8, v1, {c8192}",
                    "vsetvli zero, {n}, e32, m2, tu, mu",
                    f16_bits_to_f32!("v8", "v12"),
                    "vle32.v v16, ({q})",
                    "vfmul.vv v12, v16, v12",
                    "vfadd.vv v4, v4, v12",
                    "4:",
                    "vsetivli zero, 8, e32, m2, ta, ma",
                    "vse32.v v4, ({acc})",
                ],
                [
                    q = inout(reg) q.as_ptr() => _,
                    k = inout(reg) k.as_ptr() => _,
                    n = inout(reg) n => _,
                    acc = in(reg) acc.as_mut_ptr(),
                    c8 = in(reg) 8usize,
                    c8192 = in(reg) 8192usize,
                    mag = in(reg) MAG,
                    big = in(reg) BIG,
                    inf = in(reg) INF,
                    k112 = in(freg) K112,
                ],
                [nostack]
            );
        }
    }
    crate::ops::sum8(acc)
}

/// `out[i] = out[i] · r + v[i]` (`ADD` false) or `out[i] += r · v[i]` (`ADD` true), `v` as f16 bits:
/// the two update steps of the attention, each a separate multiply and add as in the scalar code.
fn update<const ADD: bool>(out: &mut [f32], r: f32, v: &[u16]) {
    let n = out.len().min(v.len());
    if n == 0 {
        return;
    }
    // SAFETY: reads elements 0..n of `v` and reads and writes elements 0..n of `out` (vl ≤
    // elements left in every step); only vector registers, the named scalars and vl/vtype change.
    // Reached only on harts with V (see `runs_on`).
    unsafe {
        rvv_asm!(
            [
                "2:",
                "vsetvli {vl}, {n}, e16, m4, ta, ma",
                "vle16.v v16, ({v})",
                "vwmulu.vx v8, v16, {c8192}",
                "vsetvli zero, {vl}, e32, m8, ta, mu",
                f16_bits_to_f32!("v8", "v16"),
                "vle32.v v24, ({o})",
                "bnez {add}, 3f",
                // out · r + v
                "vfmul.vf v24, v24, {r}",
                "vfadd.vv v24, v24, v16",
                "j 4f",
                "3:",
                // out + r · v
                "vfmul.vf v16, v16, {r}",
                "vfadd.vv v24, v24, v16",
                "4:",
                "vse32.v v24, ({o})",
                "slli {t}, {vl}, 2",
                "add {o}, {o}, {t}",
                "slli {t}, {vl}, 1",
                "add {v}, {v}, {t}",
                "sub {n}, {n}, {vl}",
                "bnez {n}, 2b",
            ],
            [
                o = inout(reg) out.as_mut_ptr() => _,
                v = inout(reg) v.as_ptr() => _,
                n = inout(reg) n => _,
                add = in(reg) ADD as usize,
                vl = out(reg) _,
                t = out(reg) _,
                c8192 = in(reg) 8192usize,
                mag = in(reg) MAG,
                big = in(reg) BIG,
                inf = in(reg) INF,
                k112 = in(freg) K112,
                r = in(freg) r,
            ],
            [nostack]
        );
    }
}

/// One query head over the cached positions of `head` (twin of [`crate::ops::attend_head`]): its
/// control flow (`ops::Head::attend`), with the `q·k` product and the two update steps in RVV.
pub fn attend_head(out: &mut [f32], q: &[f32], head: &crate::ops::Head<'_>) {
    head.attend(out, q, dot_f32_f16, update::<false>, update::<true>);
}
