//! K-quants (Q2_K..Q6_K) · Q8_K activations.
//!
//! Per super-block of 256 values the scalar twin forms an exact integer `isum` = Σ scale(g) ·
//! Σ_{l in group g} q(l) · a(l) (groups of 16 or 32 values) plus, for some types, `summs` from the
//! activations' 16-value sums, then one float expression. Here `isum` is computed with RVV: the
//! group's values are decoded to int8, multiplied with the activations into e16 lanes (`vwmul`),
//! and the products multiplied by the group's scale into e32 lanes (`vwmacc.vx`), one reduction at
//! the end; the float expression stays in Rust, written as in the scalar code, and so does
//! `summs` but for Q4_K and Q5_K, whose eight products of mins and sums the block's `asm!` adds
//! too (`dm_summs!`). Vector lengths are 32 (Q4_K, Q5_K: e8 LMUL=2) or 16 (Q2_K, Q3_K, Q6_K: e8
//! LMUL=1, one scale per 16 values), which every VLEN ≥ 128 holds. Each kernel states its bound:
//! no lane overflows. Q6_K where VLEN ≥ 512 (vlenb read per call) takes 32 lanes per instruction
//! at the same cost as 16 (e8 mf2, e16 m1, e32 m2): a 32-value group has two scales, so its
//! products are multiplied by the first in every lane and by the difference of the two in lanes
//! 16..32 (under a mask); batched, its blocks are decoded once to their values times their scales
//! (i16) and each column is 8 widening multiply-accumulates.
//!
//! Each type is a decode of a block (`*_scales` / `q6_k_dec`: what does not depend on the
//! activations) and a term (`*_term`: the block's contribution, the scalar twin's expression).
//! The one-row kernel sums `term(decode(block))` in block order; the batched kernel (`kmat`)
//! decodes each block of a row once and adds its term to every column's sum, in the same order, so
//! each output is bit for bit the one-row kernel's.
//!
//! Shared with the XTheadVector set (`quant::xtheadvector`, RVV 0.7.1 at VLEN 128): all but the
//! Q6_K paths for VLEN ≥ 512 is also 0.7.1 code under that set's encoding layer (vl from a
//! register, never `vsetivli`; LMUL 1 or 2 at e8; no `tu`, no `vsext`; no widening destination
//! overlaps a source; each mask made and used under one SEW/LMUL). So the text macros, the
//! decoders and `kmat` serve both sets, and the macros that write kernels holding `asm!` blocks
//! ([`kq_kernels!`] for Q4_K and Q5_K; `q6k_fns!`, `q3k_fns!`, `q2k_fns!`, given a block's
//! text) write them into the module that invokes them, with that module's `vec_asm!` (`rvv_asm!`,
//! `xtv_asm!`) and `vmv_x_s!` (element 0 to a scalar register: `vmv.x.s`, `th.vext.x.v`).

use super::rvv_asm;
use super::rvv_asm as vec_asm;
use super::{BIG, INF, K112};
use crate::quant::act::BlockQ8K;
use crate::quant::scalar::q3k_scales;

/// Element 0 of the e32 register `$v` into the scalar register `$rd` (sign-extended).
macro_rules! vmv_x_s {
    ($rd:literal, $v:literal) => {
        concat!("vmv.x.s ", $rd, ", ", $v, "\n")
    };
}

/// The f16 at `b[at..at + 2]` as f32, by `f16_bits_to_f32!`'s method in scalar code: `half`'s
/// value for every non-NaN f16 (and NaN for NaN, whose payload the kernels never see: they only
/// multiply it, which gives the canonical NaN either way), without `half`'s software conversion.
#[inline(always)]
pub(crate) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16_bits(u16::from_le_bytes([b[at], b[at + 1]]) as u32)
}

/// The f16 in the low 16 bits of `h` (the rest zero) as f32, as [`f16_at`].
#[inline(always)]
fn f16_bits(h: u32) -> f32 {
    let mag = (h & 0x7fff) << 13;
    // The magnitude times 2^-112 (normal or subnormal), restored by one exact multiplication;
    // exponent 31 (inf, NaN) sets every f32 exponent bit.
    let v = if mag as usize > BIG {
        f32::from_bits(mag | INF as u32)
    } else {
        f32::from_bits(mag) * K112
    };
    f32::from_bits(v.to_bits() | (h & 0x8000) << 16)
}

/// The operands shared by the K-quant `asm!` blocks: `b` the weight block, `y` the activations'
/// `qs`, `isum` the result; scratch `p`, `s`; more named operands may follow.
#[rustfmt::skip]
macro_rules! kq_asm {
    ([$($tpl:tt)*], $b:expr, $y:expr, $isum:ident $(, $($extra:tt)+)?) => {
        vec_asm!(
            [$($tpl)*],
            [
                $($($extra)+ ,)?
                b = in(reg) $b,
                y = in(reg) $y,
                p = out(reg) _,
                s = out(reg) _,
                isum = out(reg) $isum,
            ],
            [nostack, readonly]
        )
    };
}

/// Sum the e32 lanes of `$acc` (vl and vtype set by `$set`) into `{isum}` (its low 32 bits: the
/// callers read it as i32, so the element move may sign- or zero-extend, see `vmv_x_s!`).
#[rustfmt::skip]
macro_rules! kq_sum {
    ($set:literal, $acc:literal, $tmp:literal) => {
        concat!(
            $set, "\n",
            "vmv.s.x ", $tmp, ", zero\n",
            "vredsum.vs ", $tmp, ", ", $acc, ", ", $tmp, "\n",
            vmv_x_s!("{isum}", $tmp),
        )
    };
}

/// A K-quant's batched entry `$mat` through `kmat`: `$dec` per row and block, `$term` per column.
macro_rules! kq_mat {
    ($(#[$doc:meta])* $mat:ident, $bytes:literal, $dec:ident, $term:ident) => {
        $(#[$doc])*
        pub fn $mat(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
            kmat(w, rb, a, cols, out, $bytes, $dec, $term);
        }
    };
}

/// A K-quant's one-row kernel `$one` (per block `$term(b, &$dec(b), y)`, summed in order) and its
/// batched entry `$mat` (see `kq_mat!`).
macro_rules! kq_entries {
    ($(#[$doc:meta])* $one:ident, $(#[$mdoc:meta])* $mat:ident, $bytes:literal, $dec:ident, $term:ident) => {
        $(#[$doc])*
        pub fn $one(w: &[u8], a: &[BlockQ8K]) -> f32 {
            let mut sumf = 0.0f32;
            for (b, y) in w.chunks_exact($bytes).zip(a) {
                sumf += $term(b, &$dec(b), y);
            }
            sumf
        }

        kq_mat!($(#[$mdoc])* $mat, $bytes, $dec, $term);
    };
}

/// `kq_asm!` for the 16-lane kernels: `isum` = the e32 sums v24..v27 that the four parts add to.
#[rustfmt::skip]
macro_rules! kq16_asm {
    ([$($part:tt)*], $b:expr, $y:expr, $isum:ident $(, $($extra:tt)+)?) => {
        kq_asm!(
            [
                "vsetvli zero, {c16}, e32, m4, ta, ma",
                "vmv.v.i v24, 0",
                $($part)*
                kq_sum!("vsetvli zero, {c16}, e32, m4, ta, ma", "v24", "v8"),
            ],
            $b,
            $y,
            $isum,
            c16 = in(reg) 16usize
            $(, $($extra)+)?
        )
    };
}

/// `isum` (i32) of a block `$b` with the activations `$y` from the sixteen-lane parts `$part`
/// (`kq16_asm!`), with the extra operands `$extra` (the buffers the parts read besides the two).
#[rustfmt::skip]
macro_rules! kq16_isum {
    ([$($part:tt)*], $b:expr, $y:expr $(, $($extra:tt)+)?) => {{
        let isum: isize;
        // SAFETY: the parts read the bytes of `$b`, `$y.qs` and the extra operands' buffers at
        // the offsets they name, all inside them (each caller says which); the vector unit
        // present (reached only on its harts); only vector registers, the named scalars and
        // vl/vtype change.
        unsafe {
            kq16_asm!([$($part)*], $b.as_ptr(), $y.qs.as_ptr(), isum $(, $($extra)+)?);
        }
        isum as i32
    }};
}

// ---------------------------------------------------------------------------------------------
// Q4_K: d | dmin | scales[12] | qs[128]; sub-block 2j: low nibbles of qs[32j..32j + 32] with
// a[64j..64j + 32], sub-block 2j + 1: high nibbles with a[64j + 32..64j + 64].

/// Sub-blocks `2j` and `2j + 1` of a Q4_K block into v0..v7 (e32, 32 lanes). Bound per lane:
/// 8 products of at most 63 · 15 · 128 = 120960: < 2^20.
#[rustfmt::skip]
macro_rules! q4k_pair {
    ($qo:literal, $ao:literal, $ao2:literal, $s1:literal, $s2:literal) => {
        concat!(
            "vsetvli zero, {c32}, e8, m2, ta, ma\n",
            "addi {p}, {b}, ", $qo, "\n",
            "vle8.v v8, ({p})\n",
            "addi {p}, {y}, ", $ao, "\n",
            "vle8.v v10, ({p})\n",
            "addi {p}, {y}, ", $ao2, "\n",
            "vle8.v v12, ({p})\n",
            "vand.vi v14, v8, 15\n",
            "vsrl.vi v8, v8, 4\n",
            "vwmul.vv v16, v14, v10\n",
            "vwmul.vv v20, v8, v12\n",
            "vsetvli zero, {c32}, e16, m4, ta, ma\n",
            "lbu {s}, ", $s1, "({sc})\n",
            "vwmacc.vx v0, {s}, v16\n",
            "lbu {s}, ", $s2, "({sc})\n",
            "vwmacc.vx v0, {s}, v20\n",
        )
    };
}

/// A Q4_K (or Q5_K) block's scales decoded: `d`, `dmin` (f32) and the 6-bit scales and mins of its
/// eight sub-blocks.
pub(crate) struct Q4KScales {
    pub(crate) d: f32,
    pub(crate) dmin: f32,
    pub(crate) scales: [u8; 8],
    pub(crate) mins: [u8; 8],
}

#[inline(always)]
pub(crate) fn q4_k_scales(b: &[u8]) -> Q4KScales {
    // `scalar::scale_min_k4` for the eight sub-blocks at once, four bytes to a word (as
    // llama.cpp's kernels decode them): scales 0..4 and mins 0..4 are the low six bits of bytes
    // 0..4 and 4..8; scales 4..8 and mins 4..8 the low and high nibbles of bytes 8..12 with the
    // top two bits of bytes 0..4 and 4..8 above them.
    let (w0, w1) = head_words(b);
    let (q0, q1, q2) = ((w0 >> 32) as u32, w1 as u32, (w1 >> 32) as u32);
    let (low6, nib, top2) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x0303_0303);
    let pair = |lo: u32, hi: u32| (lo as u64 | (hi as u64) << 32).to_le_bytes();
    Q4KScales {
        d: f16_bits(w0 as u32 & 0xffff),
        dmin: f16_bits(w0 as u32 >> 16 & 0xffff),
        scales: pair(q0 & low6, q2 & nib | (q0 >> 6 & top2) << 4),
        mins: pair(q1 & low6, q2 >> 4 & nib | (q1 >> 6 & top2) << 4),
    }
}

/// The first 16 bytes of a block (`d`, `dmin`, the 12 bytes of scales and mins) as two
/// little-endian words: two loads where the block is 8-byte aligned (in a GGUF file every block
/// of these types is: tensors start 32-byte aligned and blocks are 144 or 176 bytes), else bytes.
#[inline(always)]
fn head_words(b: &[u8]) -> (u64, u64) {
    let h = &b[..16];
    if h.as_ptr().cast::<u64>().is_aligned() {
        // SAFETY: `h` is 16 bytes long and 8-byte aligned: two whole, aligned u64 reads.
        unsafe {
            let p = h.as_ptr().cast::<u64>();
            (u64::from_le(p.read()), u64::from_le(p.add(1).read()))
        }
    } else {
        let word = |i: usize| u64::from_le_bytes(core::array::from_fn(|k| h[i + k]));
        (word(0), word(8))
    }
}

/// The float expression of Q4_K and Q5_K, `(d · y.d) · isum - (dmin · y.d) · summs`, with
/// `summs` each sub-block's min times its activations' sum (two 16-value sums, `dm_summs!`).
pub(crate) fn dm_term(x: &Q4KScales, y: &BlockQ8K, isum: i32, summs: i32) -> f32 {
    let (d, dmin) = (x.d * y.d, x.dmin * y.d);
    d * isum as f32 - dmin * summs as f32
}

/// `summs` of Q4_K and Q5_K into `{sm}`: Σ_j mins[j] · (bsums[2j] + bsums[2j + 1]) (mins at
/// `{mn}`, the activations' i16 sums at `{bs}`), exact for any i16 sums: each min times the even
/// sum, then plus the min times the odd one, widened to e32 (sixteen products of at most
/// 63 · 2^15: < 2^26). Eight lanes: the even and odd sums by strided loads, the mins widened to
/// e16 by a widening add of x0.
#[rustfmt::skip]
macro_rules! dm_summs {
    () => {
        concat!(
            "vsetvli zero, {c8}, e8, m1, ta, ma\n",
            "vle8.v v1, ({mn})\n",
            "vwaddu.vx v2, v1, zero\n",
            "vsetvli zero, {c8}, e16, m1, ta, ma\n",
            "vlse16.v v4, ({bs}), {c4}\n",
            "addi {p}, {bs}, 2\n",
            "vlse16.v v5, ({p}), {c4}\n",
            "vwmul.vv v6, v2, v4\n",
            "vwmacc.vv v6, v2, v5\n",
            "vsetvli zero, {c8}, e32, m2, ta, ma\n",
            "vmv.s.x v8, zero\n",
            "vredsum.vs v8, v6, v8\n",
            vmv_x_s!("{sm}", "v8"),
        )
    };
}

/// Rows · columns for a K-quant of `bytes` per block (shapes as in `batch::Mat`; a call whose
/// `out` is not `rows · cols` floats does nothing): per row and block, `dec` once, then `term`
/// for each column, added to that column's sum in block order as in the one-row kernel.
pub(crate) fn kmat<D>(
    w: &[u8],
    rb: usize,
    a: &[BlockQ8K],
    cols: usize,
    out: &mut [f32],
    bytes: usize,
    dec: impl Fn(&[u8]) -> D,
    term: impl Fn(&[u8], &D, &BlockQ8K) -> f32,
) {
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let nb = a.len().checked_div(cols).unwrap_or(0);
    if rb == 0 || cols == 0 || rows * cols != out.len() {
        return;
    }
    for (r, o) in out.chunks_exact_mut(cols).enumerate() {
        o.fill(0.0);
        let row = &w[r * rb..(r + 1) * rb];
        for (i, b) in row.chunks_exact(bytes).take(nb).enumerate() {
            let x = dec(b);
            for (c, sumf) in o.iter_mut().enumerate() {
                *sumf += term(b, &x, &a[c * nb + i]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Q5_K: d | dmin | scales[12] | qh[32] | qs[128]; as Q4_K, plus 16 where bit 2j (low nibbles)
// or 2j + 1 (high nibbles) of qh[l] is set.

/// Sub-blocks `2j` and `2j + 1` of a Q5_K block into v8..v15 (e32, 32 lanes); qh in v2..v3.
/// Bound per lane: 8 products of at most 63 · 31 · 128 = 249984: < 2^21.
#[rustfmt::skip]
macro_rules! q5k_pair {
    ($qo:literal, $ao:literal, $ao2:literal, $s1:literal, $s2:literal, $sh1:literal, $sh2:literal) => {
        concat!(
            // Mask-undisturbed: the masked `vor`s must leave unselected lanes alone.
            "vsetvli zero, {c32}, e8, m2, ta, mu\n",
            "addi {p}, {b}, ", $qo, "\n",
            "vle8.v v4, ({p})\n",
            "addi {p}, {y}, ", $ao, "\n",
            "vle8.v v6, ({p})\n",
            "addi {p}, {y}, ", $ao2, "\n",
            "vle8.v v24, ({p})\n",
            "vand.vi v26, v4, 15\n",
            "vsll.vi v28, v2, ", $sh1, "\n",
            "vmslt.vx v0, v28, zero\n",
            "vor.vx v26, v26, {c16}, v0.t\n",
            "vsrl.vi v4, v4, 4\n",
            "vsll.vi v28, v2, ", $sh2, "\n",
            "vmslt.vx v0, v28, zero\n",
            "vor.vx v4, v4, {c16}, v0.t\n",
            "vwmul.vv v16, v26, v6\n",
            "vwmul.vv v20, v4, v24\n",
            "vsetvli zero, {c32}, e16, m4, ta, ma\n",
            "lbu {s}, ", $s1, "({sc})\n",
            "vwmacc.vx v8, {s}, v16\n",
            "lbu {s}, ", $s2, "({sc})\n",
            "vwmacc.vx v8, {s}, v20\n",
        )
    };
}

// ---------------------------------------------------------------------------------------------
// Q6_K: ql[128] | qh[64] | scales[16] (i8) | d. Half n (128 values), l in 0..32:
// q1 = ql[l] & 15 | (qh[l] & 3) << 4, q2 = ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4,
// q3 = ql[l] >> 4 | (qh[l] >> 4 & 3) << 4, q4 = ql[l + 32] >> 4 | (qh[l] >> 6 & 3) << 4, each
// minus 32, with a[l], a[l + 32], a[l + 64], a[l + 96] and scales sc[l / 16 + 0, 2, 4, 6].

/// Sixteen `l` of half `n` (`l0 = 16·lh`) into v24..v27 (e32, 16 lanes). Offsets: `$ql` = 64n +
/// l0, `$qh` = 128 + 32n + l0, `$a` = 128n + l0, `$sc` = 192 + 8n + lh. Bound per lane: 16
/// products of at most 32 · 128 · 128 = 2^19: < 2^23.
#[rustfmt::skip]
macro_rules! q6k_part {
    ($ql:literal, $ql2:literal, $qh:literal, $a0:literal, $a1:literal, $a2:literal, $a3:literal, $s0:literal, $s1:literal, $s2:literal, $s3:literal) => {
        concat!(
            q6k_vals!($ql, $ql2, $qh),
            q6k_io!("vle8.v", "{y}", ["v4", "v5", "v6", "v7"], [$a0, $a1, $a2, $a3]),
            q6k_mul!($s0, $s1, $s2, $s3),
        )
    };
}

/// The 64 values q1..q4 of sixteen `l` (offsets as in `q6k_part!`) decoded to int8 in v8..v11.
/// With registers named (`$set` the vtype, e8; `$l1`, `$l2`, `$h` for the two `ql` loads and the
/// `qh` load, `$t` a temporary, `$o1..$o4` the outputs, each a group of that LMUL): the same for
/// as many `l` as vl says (the XTheadVector set's Q6_K takes 32, e8 m2).
#[rustfmt::skip]
macro_rules! q6k_vals {
    ($ql:literal, $ql2:literal, $qh:literal) => {
        q6k_vals!(
            "vsetvli zero, {c16}, e8, m1, ta, ma", ["v1", "v2", "v3", "v12"],
            ["v8", "v9", "v10", "v11"], $ql, $ql2, $qh
        )
    };
    // Thirty-two `l` (VLEN 128, e8 m2: the XTheadVector set's Q6_K) into v8, v10, v12, v14.
    (m2 $ql:literal, $ql2:literal, $qh:literal) => {
        q6k_vals!(
            "vsetvli zero, {c32}, e8, m2, ta, ma", ["v2", "v4", "v6", "v16"],
            ["v8", "v10", "v12", "v14"], $ql, $ql2, $qh
        )
    };
    ($set:literal, [$l1:literal, $l2:literal, $h:literal, $t:literal],
     [$o1:literal, $o2:literal, $o3:literal, $o4:literal], $ql:literal, $ql2:literal, $qh:literal) => {
        concat!(
            $set, "\n",
            "addi {p}, {b}, ", $ql, "\n",
            "vle8.v ", $l1, ", ({p})\n",
            "addi {p}, {b}, ", $ql2, "\n",
            "vle8.v ", $l2, ", ({p})\n",
            "addi {p}, {b}, ", $qh, "\n",
            "vle8.v ", $h, ", ({p})\n",
            // q1
            "vand.vi ", $o1, ", ", $l1, ", 15\n",
            "vsll.vi ", $t, ", ", $h, ", 4\n",
            q6k_vals!(@hi $o1, $t),
            // q2
            "vand.vi ", $o2, ", ", $l2, ", 15\n",
            "vsll.vi ", $t, ", ", $h, ", 2\n",
            q6k_vals!(@hi $o2, $t),
            // q3
            "vsrl.vi ", $o3, ", ", $l1, ", 4\n",
            "vand.vx ", $t, ", ", $h, ", {c48}\n",
            "vor.vv ", $o3, ", ", $o3, ", ", $t, "\n",
            "vsub.vx ", $o3, ", ", $o3, ", {c32}\n",
            // q4
            "vsrl.vi ", $o4, ", ", $l2, ", 4\n",
            "vsrl.vi ", $t, ", ", $h, ", 2\n",
            q6k_vals!(@hi $o4, $t),
        )
    };
    // The two high bits (bits 4..6 of `$t`) joined to the low nibble in `$o`, minus 32.
    (@hi $o:literal, $t:literal) => {
        concat!(
            "vand.vx ", $t, ", ", $t, ", {c48}\n",
            "vor.vv ", $o, ", ", $o, ", ", $t, "\n",
            "vsub.vx ", $o, ", ", $o, ", {c32}\n",
        )
    };
}

/// `$op` (`vle8.v` or `vse8.v`, vl bytes each: 16, or 32 in the XTheadVector set's Q6_K) of the
/// four registers `$r*` at `$base` + `$a*`.
#[rustfmt::skip]
macro_rules! q6k_io {
    ($op:literal, $base:literal, [$($r:literal),*], [$($a:literal),*]) => {
        concat!($("addi {p}, ", $base, ", ", $a, "\n", $op, " ", $r, ", ({p})\n",)*)
    };
}

/// v8..v11 (int8 weights) times v4..v7 (activations), each by its scale (i8 at `{b}` + `$s*`),
/// added into v24..v27 (e32, 16 lanes).
#[rustfmt::skip]
macro_rules! q6k_mul {
    ($s0:literal, $s1:literal, $s2:literal, $s3:literal) => {
        concat!(
            "vwmul.vv v16, v8, v4\n",
            "vwmul.vv v18, v9, v5\n",
            "vwmul.vv v20, v10, v6\n",
            "vwmul.vv v22, v11, v7\n",
            "vsetvli zero, {c16}, e16, m2, ta, ma\n",
            "lb {s}, ", $s0, "({b})\n",
            "vwmacc.vx v24, {s}, v16\n",
            "lb {s}, ", $s1, "({b})\n",
            "vwmacc.vx v24, {s}, v18\n",
            "lb {s}, ", $s2, "({b})\n",
            "vwmacc.vx v24, {s}, v20\n",
            "lb {s}, ", $s3, "({b})\n",
            "vwmacc.vx v24, {s}, v22\n",
        )
    };
}

/// A Q6_K block decoded once for the batched kernel: `d` and the 256 values as int8 (minus 32),
/// value `e` at `q[e]`, beside activation `e`.
pub(crate) struct Q6KDec {
    pub(crate) d: f32,
    pub(crate) q: [i8; 256],
}

/// Sixteen `l` of a Q6_K block decoded and stored at `{q}` (offsets as in `q6k_part!`).
#[rustfmt::skip]
macro_rules! q6k_dec {
    ($ql:literal, $ql2:literal, $qh:literal, [$($a:literal),*]) => {
        concat!(
            q6k_vals!($ql, $ql2, $qh),
            q6k_io!("vse8.v", "{q}", ["v8", "v9", "v10", "v11"], [$($a),*]),
        )
    };
}

/// Sixteen `l` of a decoded Q6_K block (at `{q}`) with their activations and scales into
/// v24..v27, as `q6k_part!` (offsets as there).
#[rustfmt::skip]
macro_rules! q6k_col {
    ([$($a:literal),*], $s0:literal, $s1:literal, $s2:literal, $s3:literal) => {
        concat!(
            "vsetvli zero, {c16}, e8, m1, ta, ma\n",
            q6k_io!("vle8.v", "{q}", ["v8", "v9", "v10", "v11"], [$($a),*]),
            q6k_io!("vle8.v", "{y}", ["v4", "v5", "v6", "v7"], [$($a),*]),
            q6k_mul!($s0, $s1, $s2, $s3),
        )
    };
}

// ---------------------------------------------------------------------------------------------
// Q3_K and Q2_K: half h (128 values), shift s (0..4), part p (16 values): values
// (qs[32h + 16p + l] >> 2s) & 3 (Q3_K: minus 4 where bit 4h + s of hmask[16p + l] is clear) with
// a[128h + 32s + 16p + l], scale index 8h + 2s + p.

/// Q3_K, half `h`, part `p`: into v24..v27 (e32, 16 lanes). `$q` = 32 + 32h + 16p, `$hm` = 16p,
/// `$a*` = 128h + 32s + 16p, `$k*` = 7 - (4h + s) (moves the hmask bit to the sign bit), `$i*` =
/// 8h + 2s + p. Bound per lane: 16 products of at most 4 · 128 · 32 = 2^14: < 2^18.
#[rustfmt::skip]
macro_rules! q3k_part {
    ($q:literal, $hm:literal, [$($a:literal),*], [$($k:literal),*], [$($i:literal),*]) => {
        concat!(
            // Mask-undisturbed: the masked `vadd`s must leave unselected lanes alone.
            "vsetvli zero, {c16}, e8, m1, ta, mu\n",
            "addi {p}, {b}, ", $q, "\n",
            "vle8.v v1, ({p})\n",
            "addi {p}, {b}, ", $hm, "\n",
            "vle8.v v2, ({p})\n",
            q6k_io!("vle8.v", "{y}", ["v4", "v5", "v6", "v7"], [$($a),*]),
            q3k_part!(@vals $($k),*),
            "vwmul.vv v16, v8, v4\n",
            "vwmul.vv v18, v9, v5\n",
            "vwmul.vv v20, v10, v6\n",
            "vwmul.vv v22, v11, v7\n",
            "vsetvli zero, {c16}, e16, m2, ta, ma\n",
            q3k_part!(@scale $($i),*),
        )
    };
    (@vals $k0:literal, $k1:literal, $k2:literal, $k3:literal) => {
        q3k_part!(@vals ["v1", "v2", "v12"], ["v8", "v9", "v10", "v11"], [$k0, $k1, $k2, $k3])
    };
    // The four values of the `qs` bytes in `$q` (shifts 0, 2, 4, 6) into `$o*`, minus 4 where the
    // `hmask` bit in `$hm` that `$k*` moves to the sign bit is clear (`$t` a temporary; v0 the
    // mask, made and used under the current vtype, which must be mask-undisturbed).
    (@vals [$q:literal, $hm:literal, $t:literal], [$o0:literal, $o1:literal, $o2:literal, $o3:literal],
     [$k0:literal, $k1:literal, $k2:literal, $k3:literal]) => {
        concat!(
            q3k_part!(@one $o0, $q, $hm, $t, 0, $k0),
            q3k_part!(@one $o1, $q, $hm, $t, 2, $k1),
            q3k_part!(@one $o2, $q, $hm, $t, 4, $k2),
            q3k_part!(@one $o3, $q, $hm, $t, 6, $k3),
        )
    };
    (@one $r:literal, $q:literal, $hm:literal, $t:literal, $sh:literal, $k:literal) => {
        concat!(
            "vsrl.vi ", $r, ", ", $q, ", ", $sh, "\n",
            "vand.vi ", $r, ", ", $r, ", 3\n",
            "vsll.vi ", $t, ", ", $hm, ", ", $k, "\n",
            "vmsgt.vi v0, ", $t, ", -1\n",
            "vadd.vi ", $r, ", ", $r, ", -4, v0.t\n",
        )
    };
    (@scale $i0:literal, $i1:literal, $i2:literal, $i3:literal) => {
        concat!(
            "lb {s}, ", $i0, "({sc})\n", "vwmacc.vx v24, {s}, v16\n",
            "lb {s}, ", $i1, "({sc})\n", "vwmacc.vx v24, {s}, v18\n",
            "lb {s}, ", $i2, "({sc})\n", "vwmacc.vx v24, {s}, v20\n",
            "lb {s}, ", $i3, "({sc})\n", "vwmacc.vx v24, {s}, v22\n",
        )
    };
}

/// A Q3_K block's scales decoded: `d` and the sixteen 6-bit scales.
pub(crate) struct Q3KScales {
    pub(crate) d: f32,
    pub(crate) scales: [i8; 16],
}

pub(crate) fn q3_k_scales(b: &[u8]) -> Q3KScales {
    Q3KScales {
        d: f16_at(b, 108),
        scales: q3k_scales(&b[96..108]),
    }
}

/// Q2_K, half `h`, part `p`: into v24..v27 (e32, 16 lanes). `$q` = 16 + 32h + 16p, `$a*` = 128h +
/// 32s + 16p, `$i*` = 8h + 2s + p (scale byte: low nibble). Bound per lane: 16 products of at
/// most 3 · 128 · 15 = 5760: < 2^17.
#[rustfmt::skip]
macro_rules! q2k_part {
    ($q:literal, [$a0:literal, $a1:literal, $a2:literal, $a3:literal], [$i0:literal, $i1:literal, $i2:literal, $i3:literal]) => {
        concat!(
            "vsetvli zero, {c16}, e8, m1, ta, ma\n",
            "addi {p}, {b}, ", $q, "\n",
            "vle8.v v1, ({p})\n",
            q6k_io!("vle8.v", "{y}", ["v4", "v5", "v6", "v7"], [$a0, $a1, $a2, $a3]),
            q2k_part!(@vals "v1", ["v8", "v9", "v10", "v11"]),
            "vwmul.vv v16, v8, v4\n",
            "vwmul.vv v18, v9, v5\n",
            "vwmul.vv v20, v10, v6\n",
            "vwmul.vv v22, v11, v7\n",
            "vsetvli zero, {c16}, e16, m2, ta, ma\n",
            "lbu {s}, ", $i0, "({b})\n", "andi {s}, {s}, 15\n", "vwmacc.vx v24, {s}, v16\n",
            "lbu {s}, ", $i1, "({b})\n", "andi {s}, {s}, 15\n", "vwmacc.vx v24, {s}, v18\n",
            "lbu {s}, ", $i2, "({b})\n", "andi {s}, {s}, 15\n", "vwmacc.vx v24, {s}, v20\n",
            "lbu {s}, ", $i3, "({b})\n", "andi {s}, {s}, 15\n", "vwmacc.vx v24, {s}, v22\n",
        )
    };
    // The four 2-bit values of the `qs` bytes in `$q` (shifts 0, 2, 4, 6) into `$o*`.
    (@vals $q:literal, [$o0:literal, $o1:literal, $o2:literal, $o3:literal]) => {
        concat!(
            "vand.vi ", $o0, ", ", $q, ", 3\n",
            "vsrl.vi ", $o1, ", ", $q, ", 2\n",
            "vand.vi ", $o1, ", ", $o1, ", 3\n",
            "vsrl.vi ", $o2, ", ", $q, ", 4\n",
            "vand.vi ", $o2, ", ", $o2, ", 3\n",
            "vsrl.vi ", $o3, ", ", $q, ", 6\n",
        )
    };
}

pub(crate) fn q2_k_scales(b: &[u8]) -> (f32, f32) {
    (f16_at(b, 80), f16_at(b, 82))
}

/// The entries of Q4_K or Q5_K (`$one`, `$mat`, as `kq_entries!` with the decoder `q4_k_scales`)
/// and their block's term `$term` (`$bytes` per block, its scales decoded in `x`): the `asm!` text
/// `$body` sums the block's sub-block pairs into the 32 e32 lanes of `$acc`, then `dm_term`.
#[rustfmt::skip]
macro_rules! dm_k_kernels {
    ($(#[$doc:meta])* $one:ident, $(#[$mdoc:meta])* $mat:ident, $term:ident, $bytes:literal,
     $acc:literal, [$($body:tt)*] $(, $($extra:tt)+)?) => {
        /// The block's term with activations `y`, its scales decoded in `x`.
        fn $term(b: &[u8], x: &Q4KScales, y: &BlockQ8K) -> f32 {
            let (isum, summs): (isize, isize);
            // SAFETY: reads the block `b` (a whole block: `chunks_exact` in the callers) from
            // byte 16 (Q4_K: the 128 bytes of qs; Q5_K: qh and qs, 160), the 256 bytes of `y.qs`,
            // the 32 of `y.bsums` and the 8 bytes of `scales` and of `mins`; the vector unit
            // present (reached only on its harts); only vector registers, the named scalars and
            // vl/vtype change.
            unsafe {
                kq_asm!(
                    [
                        "vsetvli zero, {c32}, e32, m8, ta, ma",
                        concat!("vmv.v.i ", $acc, ", 0"),
                        $($body)*
                        kq_sum!("vsetvli zero, {c32}, e32, m8, ta, ma", $acc, "v16"),
                        dm_summs!(),
                    ],
                    b.as_ptr(),
                    y.qs.as_ptr(),
                    isum,
                    sc = in(reg) x.scales.as_ptr(),
                    mn = in(reg) x.mins.as_ptr(),
                    bs = in(reg) y.bsums.as_ptr(),
                    sm = lateout(reg) summs,
                    c4 = in(reg) 4usize,
                    c8 = in(reg) 8usize,
                    c32 = in(reg) 32usize
                    $(, $($extra)+)?
                );
            }
            dm_term(x, y, isum as i32, summs as i32)
        }

        kq_entries!($(#[$doc])* $one, $(#[$mdoc])* $mat, $bytes, q4_k_scales, $term);
    };
}

/// Q6_K's one-row kernel `$one` and batched entry `$mat` (through `q6_k_dec`, then a term per
/// column) from sixteen-lane sums (`kq16_isum!`): `$block` is the `asm!` text of a block (at
/// `{b}`, with `{c32}`, `{c48}`), `$col` that of a decoded block (at `{q}`, with the operands
/// `$cx`), each adding into v24..v27.
#[rustfmt::skip]
macro_rules! q6k_fns {
    ($(#[$doc:meta])* $one:ident, [$($block:tt)*], $(#[$mdoc:meta])* $mat:ident, [$($col:tt)*]
     $(, $($cx:tt)+)?) => {
        $(#[$doc])*
        pub fn $one(w: &[u8], a: &[BlockQ8K]) -> f32 {
            let mut sumf = 0.0f32;
            for (b, y) in w.chunks_exact(210).zip(a) {
                let d = f16_at(b, 208) * y.d;
                // Reads bytes 0..208 of the block `b` (210 bytes) and the 256 bytes of `y.qs`.
                let isum = kq16_isum!(
                    [$($block)*], b, y, c32 = in(reg) 32usize, c48 = in(reg) 48usize
                );
                sumf += d * isum as f32;
            }
            sumf
        }

        /// A Q6_K block's term (`d · y.d · isum`, as the one-row kernel) from its decoded values.
        fn q6_k_term(b: &[u8], x: &Q6KDec, y: &BlockQ8K) -> f32 {
            let d = x.d * y.d;
            // Reads the scales (bytes 192..208) of the block `b` (210 bytes), the 256 bytes of
            // `x.q` and of `y.qs`.
            let isum = kq16_isum!([$($col)*], b, y, q = in(reg) x.q.as_ptr() $(, $($cx)+)?);
            d * isum as f32
        }

        kq_mat!($(#[$mdoc])* $mat, 210, q6_k_dec, q6_k_term);
    };
}

/// Q3_K's term and entries (as `kq_entries!`) from the `asm!` text `$parts` of a block (with
/// `{sc}` its decoded scales and the operands `$extra`), adding into v24..v27 (`kq16_isum!`).
#[rustfmt::skip]
macro_rules! q3k_fns {
    ([$($parts:tt)*] $(, $($extra:tt)+)?) => {
        /// A Q3_K block's term with activations `y`, its scales decoded in `x`.
        fn q3_k_term(b: &[u8], x: &Q3KScales, y: &BlockQ8K) -> f32 {
            let d = x.d * y.d;
            // Reads bytes 0..96 of the block `b` (110 bytes, `chunks_exact` in the callers), the
            // 256 bytes of `y.qs` and the 16 bytes of `scales`.
            let isum = kq16_isum!(
                [$($parts)*], b, y, sc = in(reg) x.scales.as_ptr() $(, $($extra)+)?
            );
            d * isum as f32
        }

        kq_entries!(
            /// Q3_K weights · Q8_K activations (twin of `scalar::vec_dot_q3_k_q8_k`).
            vec_dot_q3_k_q8_k,
            /// Q3_K weights · Q8_K activations, batched: each block's scales decoded once per row.
            mat_q3_k_q8_k, 110, q3_k_scales, q3_k_term
        );
    };
}

/// Q2_K's term and entries (as `kq_entries!`) from the `asm!` text `$parts` of a block (with the
/// operands `$extra`), adding into v24..v27 (`kq16_isum!`).
#[rustfmt::skip]
macro_rules! q2k_fns {
    ([$($parts:tt)*] $(, $($extra:tt)+)?) => {
        /// A Q2_K block's term with activations `y`, its `d` and `dmin` decoded in `x`.
        fn q2_k_term(b: &[u8], x: &(f32, f32), y: &BlockQ8K) -> f32 {
            let (d, dmin) = *x;
            let sc = &b[0..16];
            let mut summs = 0i32;
            for j in 0..16 {
                summs += y.bsums[j] as i32 * (sc[j] >> 4) as i32;
            }
            // Reads bytes 0..80 of the block `b` (84 bytes, `chunks_exact` in the callers) and the
            // 256 bytes of `y.qs`.
            let isum = kq16_isum!([$($parts)*], b, y $(, $($extra)+)?);
            (y.d * d) * isum as f32 - (y.d * dmin) * summs as f32
        }

        kq_entries!(
            /// Q2_K weights · Q8_K activations (twin of `scalar::vec_dot_q2_k_q8_k`).
            vec_dot_q2_k_q8_k,
            /// Q2_K weights · Q8_K activations, batched: each block's `d` and `dmin` decoded once
            /// per row.
            mat_q2_k_q8_k, 84, q2_k_scales, q2_k_term
        );
    };
}

/// The K-quant kernels that hold `asm!` blocks, written into the invoking module: the Q4_K and
/// Q5_K entries (`vec_dot_*_q8_k`, `mat_*_q8_k`) and Q6_K's decoder for the batched kernels
/// (`q6_k_dec`); Q6_K, Q3_K and Q2_K take their block's text from the module (`q6k_fns!`,
/// `q3k_fns!`, `q2k_fns!`). The module has the text macros and decoders of
/// this one in scope, `vec_asm!` (the set's `asm!`) and `vmv_x_s!`, and runs only on harts with
/// the set's vector unit (as the SAFETY comments assume).
macro_rules! kq_kernels {
    () => {
        dm_k_kernels!(
            /// Q4_K weights · Q8_K activations (twin of `scalar::vec_dot_q4_k_q8_k`).
            vec_dot_q4_k_q8_k,
            /// Q4_K weights · Q8_K activations, batched: each block's scales decoded once per row.
            mat_q4_k_q8_k,
            q4_k_term, 144, "v0",
            [
                q4k_pair!(16, 0, 32, 0, 1),
                q4k_pair!(48, 64, 96, 2, 3),
                q4k_pair!(80, 128, 160, 4, 5),
                q4k_pair!(112, 192, 224, 6, 7),
            ]
        );

        dm_k_kernels!(
            /// Q5_K weights · Q8_K activations (twin of `scalar::vec_dot_q5_k_q8_k`).
            vec_dot_q5_k_q8_k,
            /// Q5_K weights · Q8_K activations, batched: each block's scales decoded once per row.
            mat_q5_k_q8_k,
            q5_k_term, 176, "v8",
            [
                "vsetvli zero, {c32}, e8, m2, ta, ma",
                "addi {p}, {b}, 16",
                "vle8.v v2, ({p})",
                // bit 2j of qh to the sign bit: shift left by 7 - 2j (and 6 - 2j for 2j + 1)
                q5k_pair!(48, 0, 32, 0, 1, 7, 6),
                q5k_pair!(80, 64, 96, 2, 3, 5, 4),
                q5k_pair!(112, 128, 160, 4, 5, 3, 2),
                q5k_pair!(144, 192, 224, 6, 7, 1, 0),
            ],
            c16 = in(reg) 16usize
        );

        fn q6_k_dec(b: &[u8]) -> Q6KDec {
            let mut x = Q6KDec {
                d: f16_at(b, 208),
                q: [0; 256],
            };
            // SAFETY: reads bytes 0..192 of the block `b` (210 bytes, `chunks_exact` in the caller)
            // and writes the 256 bytes of `x.q`; the vector unit present (reached only on its
            // harts); only vector registers, the named scalars, vl/vtype and `x.q` change.
            unsafe {
                vec_asm!(
                    [
                        q6k_dec!(0, 32, 128, [0, 32, 64, 96]),
                        q6k_dec!(16, 48, 144, [16, 48, 80, 112]),
                        q6k_dec!(64, 96, 160, [128, 160, 192, 224]),
                        q6k_dec!(80, 112, 176, [144, 176, 208, 240]),
                    ],
                    [
                        b = in(reg) b.as_ptr(),
                        q = in(reg) x.q.as_mut_ptr(),
                        p = out(reg) _,
                        c16 = in(reg) 16usize,
                        c32 = in(reg) 32usize,
                        c48 = in(reg) 48usize,
                    ],
                    [nostack]
                );
            }
            x
        }
    };
}
pub(crate) use {
    dm_k_kernels, dm_summs, kq16_asm, kq16_isum, kq_asm, kq_entries, kq_kernels, kq_mat, kq_sum,
    q2k_fns, q2k_part, q3k_fns, q3k_part, q4k_pair, q5k_pair, q6k_dec, q6k_fns, q6k_io, q6k_vals,
};

kq_kernels!();

q3k_fns!([
    q3k_part!(32, 0, [0, 32, 64, 96], [7, 6, 5, 4], [0, 2, 4, 6]),
    q3k_part!(48, 16, [16, 48, 80, 112], [7, 6, 5, 4], [1, 3, 5, 7]),
    q3k_part!(64, 0, [128, 160, 192, 224], [3, 2, 1, 0], [8, 10, 12, 14]),
    q3k_part!(80, 16, [144, 176, 208, 240], [3, 2, 1, 0], [9, 11, 13, 15]),
]);

q2k_fns!([
    q2k_part!(16, [0, 32, 64, 96], [0, 2, 4, 6]),
    q2k_part!(32, [16, 48, 80, 112], [1, 3, 5, 7]),
    q2k_part!(48, [128, 160, 192, 224], [8, 10, 12, 14]),
    q2k_part!(64, [144, 176, 208, 240], [9, 11, 13, 15]),
]);

q6k_fns!(
    /// `vec_dot_q6_k_q8_k` with sixteen lanes (any VLEN).
    vec_dot_q6_k_q8_k_16,
    [
        q6k_part!(0, 32, 128, 0, 32, 64, 96, 192, 194, 196, 198),
        q6k_part!(16, 48, 144, 16, 48, 80, 112, 193, 195, 197, 199),
        q6k_part!(64, 96, 160, 128, 160, 192, 224, 200, 202, 204, 206),
        q6k_part!(80, 112, 176, 144, 176, 208, 240, 201, 203, 205, 207),
    ],
    /// `mat_q6_k_q8_k` with sixteen lanes (any VLEN).
    #[inline(never)]
    mat_q6_k_q8_k_16,
    [
        q6k_col!([0, 32, 64, 96], 192, 194, 196, 198),
        q6k_col!([16, 48, 80, 112], 193, 195, 197, 199),
        q6k_col!([128, 160, 192, 224], 200, 202, 204, 206),
        q6k_col!([144, 176, 208, 240], 201, 203, 205, 207),
    ]
);

/// The seven 32-byte loads of half `n` of a Q6_K block (VLEN ≥ 512, e8 mf2): `ql[64n..]` into
/// `$r0`, `ql[64n + 32..]` into `$r1`, `qh[32n..]` into `$r2`, the activations `a[128n + 32k..]`
/// into `$r3..$r6`. Offsets `$o*` in that order, from `{b}` (three) and `{y}` (four).
#[rustfmt::skip]
macro_rules! q6k32_load {
    ([$r0:literal, $r1:literal, $r2:literal, $r3:literal, $r4:literal, $r5:literal, $r6:literal],
     [$o0:literal, $o1:literal, $o2:literal, $o3:literal, $o4:literal, $o5:literal, $o6:literal]) => {
        concat!(
            "addi {p}, {b}, ", $o0, "\n",
            "addi {q}, {b}, ", $o2, "\n",
            "vle8.v ", $r0, ", ({p})\n",
            "addi {p}, {b}, ", $o1, "\n",
            "vle8.v ", $r2, ", ({q})\n",
            "addi {q}, {y}, ", $o3, "\n",
            "vle8.v ", $r1, ", ({p})\n",
            "addi {p}, {y}, ", $o4, "\n",
            "vle8.v ", $r3, ", ({q})\n",
            "addi {q}, {y}, ", $o5, "\n",
            "vle8.v ", $r4, ", ({p})\n",
            "addi {p}, {y}, ", $o6, "\n",
            "vle8.v ", $r5, ", ({q})\n",
            "vle8.v ", $r6, ", ({p})\n",
        )
    };
}

/// Half `n` of a Q6_K block, loaded by `q6k32_load!` into `$r*`: its 128 values decoded, times
/// four (`w` = 4·(q - 32) as int8: with `qh ^ 0xaa` each 2-bit field h becomes h ^ 2 = (h - 2) mod
/// 4, so `(h ^ 2) << 6 | low << 2` is 64·(h - 2) + 4·low mod 256), each times its activation into
/// the e16 products `$p0..$p3` (one per group of 32 values, 32 lanes). Between the vector
/// instructions the scales of the half: `$a*` = sc[8n + 2k] (lanes 0..16 of group k) and `$d*`
/// = sc[8n + 2k + 1] - sc[8n + 2k] (what lanes 16..32 add), read from byte offsets `$s*` (`A0 B0
/// A1 B1 ...`).
#[rustfmt::skip]
macro_rules! q6k32_dec {
    ([$ql0:literal, $ql1:literal, $qh:literal, $x0:literal, $x1:literal, $x2:literal, $x3:literal],
     [$p0:literal, $p1:literal, $p2:literal, $p3:literal],
     [$s0:literal, $s1:literal, $s2:literal, $s3:literal, $s4:literal, $s5:literal, $s6:literal, $s7:literal],
     [$a0:literal, $a1:literal, $a2:literal, $a3:literal], [$d0:literal, $d1:literal, $d2:literal, $d3:literal]) => {
        concat!(
            "vxor.vx ", $qh, ", ", $qh, ", {cx}\n",
            "lb ", $a0, ", ", $s0, "({b})\n",
            "vand.vi v8, ", $ql0, ", 15\n",
            "lb ", $d0, ", ", $s1, "({b})\n",
            "vsrl.vi v10, ", $ql0, ", 4\n",
            "lb ", $a1, ", ", $s2, "({b})\n",
            "vand.vi v9, ", $ql1, ", 15\n",
            "lb ", $d1, ", ", $s3, "({b})\n",
            "vsrl.vi v11, ", $ql1, ", 4\n",
            "lb ", $a2, ", ", $s4, "({b})\n",
            "vsll.vi v12, ", $qh, ", 6\n",
            "lb ", $d2, ", ", $s5, "({b})\n",
            "vsll.vi v13, ", $qh, ", 4\n",
            "lb ", $a3, ", ", $s6, "({b})\n",
            "vsll.vi v14, ", $qh, ", 2\n",
            "lb ", $d3, ", ", $s7, "({b})\n",
            "vand.vx v15, ", $qh, ", {c192}\n",
            "sub ", $d0, ", ", $d0, ", ", $a0, "\n",
            "vand.vx v13, v13, {c192}\n",
            "sub ", $d1, ", ", $d1, ", ", $a1, "\n",
            "vand.vx v14, v14, {c192}\n",
            "sub ", $d2, ", ", $d2, ", ", $a2, "\n",
            "vmacc.vx v12, {c4}, v8\n",
            "sub ", $d3, ", ", $d3, ", ", $a3, "\n",
            "vmacc.vx v13, {c4}, v9\n",
            "vmacc.vx v14, {c4}, v10\n",
            "vmacc.vx v15, {c4}, v11\n",
            "vwmul.vv ", $p0, ", v12, ", $x0, "\n",
            "vwmul.vv ", $p1, ", v13, ", $x1, "\n",
            "vwmul.vv ", $p2, ", v14, ", $x2, "\n",
            "vwmul.vv ", $p3, ", v15, ", $x3, "\n",
        )
    };
}

/// 4 · `isum` of a Q6_K block with 32 lanes (VLEN ≥ 512: e8 mf2, e16 m1, e32 m2), returned as
/// `isum`. Both halves are decoded first (products v16..v23), then each group's product is
/// multiplied by its first scale in all lanes and by the difference of its two scales in lanes
/// 16..32 (mask v0), into four e32 accumulators v24..v31 (round robin, so no instruction waits
/// for the one before). Bound: every intermediate sum is exact modulo 2^32 and the total,
/// |4 · isum| ≤ 4 · 256 · 32 · 128 · 128 = 2^29, fits.
fn q6k32(b: &[u8], y: &BlockQ8K) -> i32 {
    let isum: isize;
    // SAFETY: reads bytes 0..208 of the block `b` (210 bytes, `chunks_exact` in the caller) and
    // the 256 bytes of `y.qs`; V present with VLEN ≥ 512 (the caller checks vlenb); only vector
    // registers, the named scalars and vl/vtype change.
    unsafe {
        rvv_asm!(
            [
                "vsetvli zero, {c32}, e8, mf2, ta, ma",
                q6k32_load!(["v1", "v2", "v3", "v4", "v5", "v6", "v7"], [0, 32, 128, 0, 32, 64, 96]),
                q6k32_load!(
                    ["v24", "v25", "v26", "v27", "v28", "v29", "v30"],
                    [64, 96, 160, 128, 160, 192, 224]
                ),
                "vid.v v8",
                "vmsgtu.vi v0, v8, 15",
                q6k32_dec!(
                    ["v1", "v2", "v3", "v4", "v5", "v6", "v7"],
                    ["v16", "v17", "v18", "v19"],
                    [192, 193, 194, 195, 196, 197, 198, 199],
                    ["{a0}", "{a1}", "{a2}", "{a3}"],
                    ["{d0}", "{d1}", "{d2}", "{d3}"]
                ),
                q6k32_dec!(
                    ["v24", "v25", "v26", "v27", "v28", "v29", "v30"],
                    ["v20", "v21", "v22", "v23"],
                    [200, 201, 202, 203, 204, 205, 206, 207],
                    ["{e0}", "{e1}", "{e2}", "{e3}"],
                    ["{f0}", "{f1}", "{p}", "{q}"]
                ),
                // Mask-undisturbed: the masked `vwmacc`s must leave lanes 0..16 alone.
                "vsetvli zero, {c32}, e16, m1, ta, mu",
                "vwmul.vx v24, v16, {a0}",
                "vwmul.vx v26, v17, {a1}",
                "vwmul.vx v28, v18, {a2}",
                "vwmul.vx v30, v19, {a3}",
                "vwmacc.vx v26, {d0}, v16, v0.t",
                "vwmacc.vx v28, {d1}, v17, v0.t",
                "vwmacc.vx v30, {d2}, v18, v0.t",
                "vwmacc.vx v24, {d3}, v19, v0.t",
                "vwmacc.vx v28, {e0}, v20",
                "vwmacc.vx v30, {e1}, v21",
                "vwmacc.vx v24, {e2}, v22",
                "vwmacc.vx v26, {e3}, v23",
                "vwmacc.vx v30, {f0}, v20, v0.t",
                "vwmacc.vx v24, {f1}, v21, v0.t",
                "vwmacc.vx v26, {p}, v22, v0.t",
                "vwmacc.vx v28, {q}, v23, v0.t",
                "vsetvli zero, {c32}, e32, m2, ta, ma",
                "vmv.s.x v12, zero",
                "vadd.vv v24, v24, v26",
                "vadd.vv v28, v28, v30",
                "vadd.vv v24, v24, v28",
                "vredsum.vs v12, v24, v12",
                "vmv.x.s {p}, v12",
                "srai {p}, {p}, 2",
            ],
            [
                b = in(reg) b.as_ptr(),
                y = in(reg) y.qs.as_ptr(),
                c32 = in(reg) 32usize,
                cx = in(reg) 0xaausize,
                c192 = in(reg) 192usize,
                c4 = in(reg) 4usize,
                p = out(reg) isum,
                q = out(reg) _,
                a0 = out(reg) _,
                a1 = out(reg) _,
                a2 = out(reg) _,
                a3 = out(reg) _,
                d0 = out(reg) _,
                d1 = out(reg) _,
                d2 = out(reg) _,
                d3 = out(reg) _,
                e0 = out(reg) _,
                e1 = out(reg) _,
                e2 = out(reg) _,
                e3 = out(reg) _,
                f0 = out(reg) _,
                f1 = out(reg) _,
            ],
            [nostack, readonly]
        );
    }
    isum as i32
}

/// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`): 32 lanes per
/// instruction where VLEN ≥ 512 (`q6k32`), else sixteen.
pub fn vec_dot_q6_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    if super::vlenb() < 64 {
        return vec_dot_q6_k_q8_k_16(w, a);
    }
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(210).zip(a) {
        let d = f16_at(b, 208) * y.d;
        let isum = q6k32(b, y);
        sumf += d * isum as f32;
    }
    sumf
}

/// Q6_K weights · Q8_K activations, batched: each block decoded once per row, to int8 (VLEN <
/// 512) or, where VLEN ≥ 512, to its values times their scales (`Q6KScaled`, 32 lanes per
/// instruction in the column loop).
pub fn mat_q6_k_q8_k(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    if super::vlenb() < 64 {
        return mat_q6_k_q8_k_16(w, rb, a, cols, out);
    }
    kmat(w, rb, a, cols, out, 210, q6_k_scaled, q6_k_scaled_term);
}

/// A Q6_K block decoded once for the batched kernel where VLEN ≥ 512: `d` and each value minus
/// 32 times its group's scale (|·| ≤ 32 · 128 = 4096), value `e` at `ws[e]`, beside activation `e`.
struct Q6KScaled {
    ws: [i16; 256],
    d: f32,
}

/// Sixteen `l` of a Q6_K block (offsets as in `q6k_part!`, `$e*` = 2 · the values' indices)
/// decoded, times their scales (i8 at `{b}` + `$s*`), stored as i16 at `{q}`.
#[rustfmt::skip]
macro_rules! q6k_scaled {
    ($ql:literal, $ql2:literal, $qh:literal, [$($e:literal),*], $s0:literal, $s1:literal, $s2:literal, $s3:literal) => {
        concat!(
            q6k_vals!($ql, $ql2, $qh),
            "lb {s}, ", $s0, "({b})\n",
            "vwmul.vx v16, v8, {s}\n",
            "lb {s}, ", $s1, "({b})\n",
            "vwmul.vx v18, v9, {s}\n",
            "lb {s}, ", $s2, "({b})\n",
            "vwmul.vx v20, v10, {s}\n",
            "lb {s}, ", $s3, "({b})\n",
            "vwmul.vx v22, v11, {s}\n",
            "vsetvli zero, {c16}, e16, m2, ta, ma\n",
            q6k_io!("vse16.v", "{q}", ["v16", "v18", "v20", "v22"], [$($e),*]),
        )
    };
}

fn q6_k_scaled(b: &[u8]) -> Q6KScaled {
    let mut x = Q6KScaled {
        ws: [0; 256],
        d: f16_at(b, 208),
    };
    // SAFETY: reads bytes 0..208 of the block `b` (210 bytes, `chunks_exact` in the caller) and
    // writes the 512 bytes of `x.ws`; V present (reached only on harts with V); only vector
    // registers, the named scalars, vl/vtype and `x.ws` change.
    unsafe {
        rvv_asm!(
            [
                q6k_scaled!(0, 32, 128, [0, 64, 128, 192], 192, 194, 196, 198),
                q6k_scaled!(16, 48, 144, [32, 96, 160, 224], 193, 195, 197, 199),
                q6k_scaled!(64, 96, 160, [256, 320, 384, 448], 200, 202, 204, 206),
                q6k_scaled!(80, 112, 176, [288, 352, 416, 480], 201, 203, 205, 207),
            ],
            [
                b = in(reg) b.as_ptr(),
                q = in(reg) x.ws.as_mut_ptr(),
                p = out(reg) _,
                s = out(reg) _,
                c16 = in(reg) 16usize,
                c32 = in(reg) 32usize,
                c48 = in(reg) 48usize,
            ],
            [nostack]
        );
    }
    x
}

/// Two of the eight 32-value chunks of a scaled Q6_K block (`j`, `j + 1`): their values (e16, at
/// `{q}` + `$w*`) into `$r0`/`$r1`, their activations (at `{y}` + `$a*`) into `$x0`/`$x1`.
#[rustfmt::skip]
macro_rules! q6k_scaled_load {
    ($w0:literal, $a0:literal, $w1:literal, $a1:literal, $r0:literal, $x0:literal, $r1:literal, $x1:literal) => {
        concat!(
            "addi {p0}, {q}, ", $w0, "\n",
            "addi {p1}, {y}, ", $a0, "\n",
            "addi {p2}, {q}, ", $w1, "\n",
            "addi {p3}, {y}, ", $a1, "\n",
            "vle16.v ", $r0, ", ({p0})\n",
            "vle8.v ", $x0, ", ({p1})\n",
            "vle16.v ", $r1, ", ({p2})\n",
            "vle8.v ", $x1, ", ({p3})\n",
        )
    };
}

/// A Q6_K block's term (`d · y.d · isum`, as `vec_dot_q6_k_q8_k`) from its scaled values, 32
/// lanes per instruction (VLEN ≥ 512: e16 m1, e32 m2): each chunk's activations sign-extended to
/// e16 and multiplied with the scaled values into two e32 accumulators (v16, v18). Bound per lane:
/// 8 products of at most 4096 · 128 = 2^19: < 2^22.
fn q6_k_scaled_term(_b: &[u8], x: &Q6KScaled, y: &BlockQ8K) -> f32 {
    let d = x.d * y.d;
    let isum: isize;
    // SAFETY: reads the 512 bytes of `x.ws` and the 256 bytes of `y.qs`; V present with VLEN ≥
    // 512 (the caller checks vlenb); only vector registers, the named scalars and vl/vtype change.
    unsafe {
        rvv_asm!(
            [
                "vsetvli zero, {c32}, e16, m1, ta, ma",
                q6k_scaled_load!(0, 0, 64, 32, "v1", "v24", "v2", "v25"),
                q6k_scaled_load!(128, 64, 192, 96, "v3", "v26", "v4", "v27"),
                "vsext.vf2 v9, v24",
                "vsext.vf2 v10, v25",
                q6k_scaled_load!(256, 128, 320, 160, "v5", "v28", "v6", "v29"),
                "vsext.vf2 v11, v26",
                "vsext.vf2 v12, v27",
                q6k_scaled_load!(384, 192, 448, 224, "v7", "v30", "v8", "v31"),
                "vsext.vf2 v13, v28",
                "vsext.vf2 v14, v29",
                "vsext.vf2 v15, v30",
                "vsext.vf2 v20, v31",
                "vwmul.vv v16, v1, v9",
                "vwmul.vv v18, v2, v10",
                "vwmacc.vv v16, v3, v11",
                "vwmacc.vv v18, v4, v12",
                "vwmacc.vv v16, v5, v13",
                "vwmacc.vv v18, v6, v14",
                "vwmacc.vv v16, v7, v15",
                "vwmacc.vv v18, v8, v20",
                "vsetvli zero, {c32}, e32, m2, ta, ma",
                "vmv.s.x v12, zero",
                "vadd.vv v16, v16, v18",
                "vredsum.vs v12, v16, v12",
                "vmv.x.s {isum}, v12",
            ],
            [
                q = in(reg) x.ws.as_ptr(),
                y = in(reg) y.qs.as_ptr(),
                c32 = in(reg) 32usize,
                p0 = out(reg) _,
                p1 = out(reg) _,
                p2 = out(reg) _,
                p3 = out(reg) _,
                isum = lateout(reg) isum,
            ],
            [nostack, readonly]
        );
    }
    d * isum as f32
}
