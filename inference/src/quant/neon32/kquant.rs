//! Q4_K and Q6_K · Q8_K: per super-block, one `asm!` forms the integer sums of the sub-blocks
//! (exact: each bound below), and the rest is the scalar code's own arithmetic in Rust (Q4_K: the
//! very function, `scalar::q4_k_term`: the 6-bit scales and mins, the `bsums` term; the f16 scales
//! through `half`; the float expression), so the float work is the scalar's operation for
//! operation.

use crate::quant::act::BlockQ8K;
use crate::quant::scalar::q4_k_term;
use core::arch::asm;
use half::f16;

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Sub-block `j` of a Q4_K super-block (32 bytes of nibbles at `{q}`, 64 activations at `{a}`,
/// both advanced): `[lo_j, hi_j]` into `$out` (a d register), where `lo_j` = Σ low nibble ·
/// activation over the first 32 values and `hi_j` = Σ high nibble · activation over the next 32.
/// Nibbles are 0..15: four products per i16 lane, 4 · 15 · 128 < 2^15.
#[rustfmt::skip]
macro_rules! q4k_sub {
    ($out:literal) => {
        concat!(
            "vld1.8 {{d16-d19}}, [{q}]!\n",
            "vld1.8 {{d20-d23}}, [{a}]!\n",
            "vld1.8 {{d24-d27}}, [{a}]!\n",
            "vand q2, q8, q15\n",
            "vand q3, q9, q15\n",
            "vshr.u8 q8, q8, #4\n",
            "vshr.u8 q9, q9, #4\n",
            "vmull.s8 q4, d4, d20\n",
            "vmull.s8 q5, d5, d21\n",
            "vmlal.s8 q4, d6, d22\n",
            "vmlal.s8 q5, d7, d23\n",
            "vmull.s8 q6, d16, d24\n",
            "vmull.s8 q7, d17, d25\n",
            "vmlal.s8 q6, d18, d26\n",
            "vmlal.s8 q7, d19, d27\n",
            "vadd.i16 q4, q4, q5\n",
            "vadd.i16 q6, q6, q7\n",
            "vpaddl.s16 q4, q4\n",
            "vpaddl.s16 q6, q6\n",
            "vpadd.i32 d8, d8, d9\n",
            "vpadd.i32 d12, d12, d13\n",
            "vpadd.i32 ", $out, ", d8, d12\n",
        )
    };
}

/// The eight sub-block sums `[lo_0, hi_0, .., lo_3, hi_3]` of a Q4_K super-block's nibbles `qs`
/// (128 bytes) with the activations `q8` (256).
fn q4k_sums(qs: &[u8], q8: &[i8; 256]) -> [i32; 8] {
    assert!(qs.len() >= 128);
    let mut out = [0i32; 8];
    // SAFETY: reads the 128 bytes of `qs` (checked above) and the 256 of `q8`, writes the 32 bytes
    // of `out`; VLD1.8 and VST1.8 need no alignment; registers only written, all declared.
    unsafe {
        asm!(
            "vmov.i8 q15, #0x0f",
            q4k_sub!("d0"),
            q4k_sub!("d1"),
            q4k_sub!("d2"),
            q4k_sub!("d3"),
            "vst1.8 {{d0-d3}}, [{o}]",
            q = inout(reg) qs.as_ptr() => _,
            a = inout(reg) q8.as_ptr() => _,
            o = in(reg) out.as_mut_ptr(),
            out("q0") _, out("q1") _, out("q2") _, out("q3") _,
            out("q4") _, out("q5") _, out("q6") _, out("q7") _,
            out("q8") _, out("q9") _, out("q10") _, out("q11") _,
            out("q12") _, out("q13") _, out("q15") _,
            options(nostack, preserves_flags)
        );
    }
    out
}

/// Q4_K weights · Q8_K activations (twin of `scalar::vec_dot_q4_k_q8_k`).
pub fn vec_dot_q4_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(144).zip(a) {
        sumf += q4_k_term(b, y, &q4k_sums(&b[16..144], &y.qs));
    }
    sumf
}

/// One part of a Q6_K half super-block: the 32 weights of part `k` (low bits by `$l0`, `$l1`
/// into q2, q3; high bits by `$h0`, `$h1` into q4, q5, then masked to 0x30), minus 32; their
/// products with the next 32 activations (`{a}`, advanced); `[s_2k, s_2k+1]` (the sums over the
/// two halves of 16) stored at `{o}` (advanced). Weights are -32..31: two products per i16 lane,
/// 2 · 32 · 128 < 2^15.
#[rustfmt::skip]
macro_rules! q6k_part {
    ($l0:literal, $l1:literal, $h0:literal, $h1:literal) => {
        concat!(
            $l0, "\n", $l1, "\n", $h0, "\n", $h1, "\n",
            "vand q4, q4, q1\n",
            "vand q5, q5, q1\n",
            "vorr q2, q2, q4\n",
            "vorr q3, q3, q5\n",
            "vsub.i8 q2, q2, q14\n",
            "vsub.i8 q3, q3, q14\n",
            "vld1.8 {{d8-d11}}, [{a}]!\n",
            "vmull.s8 q6, d4, d8\n",
            "vmlal.s8 q6, d5, d9\n",
            "vmull.s8 q7, d6, d10\n",
            "vmlal.s8 q7, d7, d11\n",
            "vpaddl.s16 q6, q6\n",
            "vpaddl.s16 q7, q7\n",
            "vpadd.i32 d12, d12, d13\n",
            "vpadd.i32 d14, d14, d15\n",
            "vpadd.i32 d12, d12, d14\n",
            "vst1.8 {{d12}}, [{o}]!\n",
        )
    };
}

/// The sixteen group sums of a Q6_K super-block (`ql` 128 bytes, `qh` 64) with the activations
/// `q8`: `out[8n + k]` is the scalar code's `s[k]` of half `n`.
fn q6k_sums(ql: &[u8], qh: &[u8], q8: &[i8; 256]) -> [i32; 16] {
    assert!(ql.len() >= 128 && qh.len() >= 64);
    let mut out = [0i32; 16];
    // SAFETY: reads the 128 bytes of `ql`, the 64 of `qh` (checked above) and the 256 of `q8`,
    // writes the 64 bytes of `out`; byte loads and stores need no alignment; registers only
    // written otherwise, all declared.
    unsafe {
        asm!(
            "vmov.i8 q0, #0x0f",
            "vmov.i8 q1, #0x30",
            "vmov.i8 q14, #32",
            "mov {n}, #2",
            "2:",
            "vld1.8 {{d16-d19}}, [{ql}]!",
            "vld1.8 {{d20-d23}}, [{ql}]!",
            "vld1.8 {{d24-d27}}, [{qh}]!",
            // q1: ql[l] & 0xf | (qh[l] & 3) << 4
            q6k_part!("vand q2, q8, q0", "vand q3, q9, q0", "vshl.i8 q4, q12, #4", "vshl.i8 q5, q13, #4"),
            // q2: ql[l + 32] & 0xf | (qh[l] >> 2 & 3) << 4
            q6k_part!("vand q2, q10, q0", "vand q3, q11, q0", "vshl.i8 q4, q12, #2", "vshl.i8 q5, q13, #2"),
            // q3: ql[l] >> 4 | (qh[l] >> 4 & 3) << 4
            q6k_part!("vshr.u8 q2, q8, #4", "vshr.u8 q3, q9, #4", "vmov q4, q12", "vmov q5, q13"),
            // q4: ql[l + 32] >> 4 | (qh[l] >> 6 & 3) << 4
            q6k_part!("vshr.u8 q2, q10, #4", "vshr.u8 q3, q11, #4", "vshr.u8 q4, q12, #2", "vshr.u8 q5, q13, #2"),
            "subs {n}, {n}, #1",
            "bne 2b",
            ql = inout(reg) ql.as_ptr() => _,
            qh = inout(reg) qh.as_ptr() => _,
            a = inout(reg) q8.as_ptr() => _,
            o = inout(reg) out.as_mut_ptr() => _,
            n = out(reg) _,
            out("q0") _, out("q1") _, out("q2") _, out("q3") _,
            out("q4") _, out("q5") _, out("q6") _, out("q7") _,
            out("q8") _, out("q9") _, out("q10") _, out("q11") _,
            out("q12") _, out("q13") _, out("q14") _,
            options(nostack)
        );
    }
    out
}

/// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`).
pub fn vec_dot_q6_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(210).zip(a) {
        let sc = &b[192..208];
        let d = f16_at(b, 208) * y.d;
        let s = q6k_sums(&b[0..128], &b[128..192], &y.qs);
        let mut isum = 0i32;
        for (k, s) in s.iter().enumerate() {
            isum += (sc[k] as i8) as i32 * s;
        }
        sumf += d * isum as f32;
    }
    sumf
}
