//! K-quants (Q2_K..Q6_K) · Q8_K activations: the RVV set's kernels (`quant::rvv::kquant`, whose
//! docs give the method and each kernel's bound), written here by `kq_kernels!` through this
//! set's encoding layer. They hold under RVV 0.7.1 at VLEN 128 as they stand: every vector is
//! 16 (e8 m1) or 32 (e8 m2) lanes, widening to e16 m2/m4 and e32 m4/m8 with destinations apart
//! from their sources, masks made and used under one vtype (Q5_K's `qh` bits at e8 m2, Q3_K's
//! `hmask` bits at e8 m1), no masked-off lane read after a masked operation but the ones it
//! left alone. What differs: the sum's element 0 comes out through `th.vext.x.v`, which
//! zero-extends (the callers read the low 32 bits as i32), and Q6_K is this set's own (below):
//! 32 lanes at e8 m2, each product's 16-lane halves scaled as register pairs, which holds at
//! VLEN 128 only (the RVV set's 32-lane path needs e8 mf2, its 16-lane one runs at any VLEN).

use super::xtv_asm as vec_asm;
use super::{xtv_enter, xtv_leave, xtv_refused};
use crate::quant::act::BlockQ8K;
use crate::quant::rvv::{
    dm_k_kernels, dm_summs, dm_term, f16_at, kmat, kq16_asm, kq16_isum, kq_asm, kq_entries,
    kq_kernels, kq_mat, kq_sum, q2_k_scales, q2k_part, q3_k_scales, q3k_part, q4_k_scales,
    q4k_pair, q5k_pair, q6k_dec, q6k_fns, q6k_io, q6k_vals, Q3KScales, Q4KScales, Q6KDec,
};

/// Element 0 of the e32 register `$v` into the scalar register `$rd`, zero-extended (0.7.1's
/// `th.vext.x.v` with index x0; RVV 1.0's `vmv.x.s` has no twin).
macro_rules! vmv_x_s {
    ($rd:literal, $v:literal) => {
        concat!("th.vext.x.v ", $rd, ", ", $v, ", zero\n")
    };
}

kq_kernels!();

// ---------------------------------------------------------------------------------------------
// Q6_K with 32 lanes (e8 m2: VLEN 128 has no e8 mf2, so the RVV set's 32-lane path is not
// this one): per half n (offsets as in the RVV set's `q6k_part!`), the 32 `l` of each of q1..q4
// decoded at once (`q6k_vals!`), multiplied with their activations into e16 (m4, 32 lanes), and
// each 16-lane half of a product, one register pair at VLEN 128, multiplied by its own scale
// into the e32 sums (m4, 16 lanes: v24..v27, as `kq16_asm!` sums them). Bound per lane: 32
// products of at most 32 · 128 · 128 = 2^19: < 2^24.

/// Groups `k` and `k + 1` of half `n` (values in `$q0`, `$q1`: e8 m2) with their activations (at
/// `{y}` + `$a*`) and scales (i8 at `{b}` + `$s*`: lanes 0..16 of group k, lanes 16..32, then
/// group k + 1's) into v24..v27. Starts and ends at e8 m2.
#[rustfmt::skip]
macro_rules! q6x_pair {
    ($q0:literal, $q1:literal, [$a0:literal, $a1:literal], [$s0:literal, $s1:literal, $s2:literal, $s3:literal]) => {
        concat!(
            "addi {p}, {y}, ", $a0, "\n",
            "vle8.v v16, ({p})\n",
            "addi {p}, {y}, ", $a1, "\n",
            "vle8.v v18, ({p})\n",
            "vwmul.vv v20, ", $q0, ", v16\n",
            "vwmul.vv v28, ", $q1, ", v18\n",
            "vsetvli zero, {c16}, e16, m2, ta, ma\n",
            "lb {s}, ", $s0, "({b})\n",
            "vwmacc.vx v24, {s}, v20\n",
            "lb {s}, ", $s1, "({b})\n",
            "vwmacc.vx v24, {s}, v22\n",
            "lb {s}, ", $s2, "({b})\n",
            "vwmacc.vx v24, {s}, v28\n",
            "lb {s}, ", $s3, "({b})\n",
            "vwmacc.vx v24, {s}, v30\n",
            "vsetvli zero, {c32}, e8, m2, ta, ma\n",
        )
    };
}

/// Half `n` (`$a` = 128n, `$s` = 192 + 8n) of a block whose values are in v8, v10, v12, v14 (q1..q4,
/// e8 m2) into v24..v27.
#[rustfmt::skip]
macro_rules! q6x_half {
    ([$a0:literal, $a1:literal, $a2:literal, $a3:literal], [$($s:literal),*]) => {
        q6x_half!(@split [$a0, $a1, $a2, $a3], [$($s),*])
    };
    (@split [$a0:literal, $a1:literal, $a2:literal, $a3:literal],
     [$s0:literal, $s1:literal, $s2:literal, $s3:literal, $s4:literal, $s5:literal, $s6:literal, $s7:literal]) => {
        concat!(
            q6x_pair!("v8", "v10", [$a0, $a1], [$s0, $s1, $s2, $s3]),
            q6x_pair!("v12", "v14", [$a2, $a3], [$s4, $s5, $s6, $s7]),
        )
    };
}

q6k_fns!(
    /// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`): 32 lanes per
    /// instruction.
    vec_dot_q6_k_q8_k,
    [
        q6k_vals!(m2 0, 32, 128),
        q6x_half!([0, 32, 64, 96], [192, 193, 194, 195, 196, 197, 198, 199]),
        q6k_vals!(m2 64, 96, 160),
        q6x_half!([128, 160, 192, 224], [200, 201, 202, 203, 204, 205, 206, 207]),
    ],
    /// Q6_K weights · Q8_K activations, batched: each block decoded once per row to int8 (in the
    /// activations' order), each column reading the values with 32-byte loads.
    mat_q6_k_q8_k,
    [
        "vsetvli zero, {c32}, e8, m2, ta, ma",
        q6k_io!("vle8.v", "{q}", ["v8", "v10", "v12", "v14"], [0, 32, 64, 96]),
        q6x_half!([0, 32, 64, 96], [192, 193, 194, 195, 196, 197, 198, 199]),
        q6k_io!("vle8.v", "{q}", ["v8", "v10", "v12", "v14"], [128, 160, 192, 224]),
        q6x_half!([128, 160, 192, 224], [200, 201, 202, 203, 204, 205, 206, 207]),
    ],
    c32 = in(reg) 32usize
);
