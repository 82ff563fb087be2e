//! K-quants (Q2_K..Q6_K) · Q8_K activations: the RVV set's kernels (`quant::rvv::kquant`, whose
//! docs give the method and each kernel's bound), written here by `kq_kernels!` through this
//! set's encoding layer. They hold under RVV 0.7.1 at VLEN 128 as they stand: every vector is
//! 16 (e8 m1) or 32 (e8 m2) lanes, widening to e16 m2/m4 and e32 m4/m8 with destinations apart
//! from their sources, masks made and used under one vtype (Q5_K's `qh` bits at e8 m2, Q3_K's
//! `hmask` bits at e8 m1), no masked-off lane read after a masked operation but the ones it
//! left alone. What differs: the sum's element 0 comes out through `th.vext.x.v`, which
//! zero-extends (the callers read the low 32 bits as i32), and Q6_K always takes the
//! sixteen-lane path (the RVV set's 32-lane one needs e8 mf2).

use super::xtv_asm as vec_asm;
use super::{xtv_enter, xtv_leave, xtv_refused};
use crate::quant::act::BlockQ8K;
use crate::quant::rvv::{
    dm_k_kernels, dm_summs, dm_term, f16_at, kmat, kq16_asm, kq16_isum, kq_asm, kq_entries,
    kq_kernels, kq_mat, kq_sum, q2_k_scales, q2k_part, q3_k_scales, q3k_part, q4_k_scales,
    q4k_pair, q5k_pair, q6k_col, q6k_dec, q6k_io, q6k_mul, q6k_part, q6k_vals, Q3KScales,
    Q4KScales, Q6KDec,
};

/// Element 0 of the e32 register `$v` into the scalar register `$rd`, zero-extended (0.7.1's
/// `th.vext.x.v` with index x0; RVV 1.0's `vmv.x.s` has no twin).
macro_rules! vmv_x_s {
    ($rd:literal, $v:literal) => {
        concat!("th.vext.x.v ", $rd, ", ", $v, ", zero\n")
    };
}

kq_kernels!();

/// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`): sixteen lanes.
pub fn vec_dot_q6_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    vec_dot_q6_k_q8_k_16(w, a)
}

/// Q6_K weights · Q8_K activations, batched: each block decoded once per row to int8, each column
/// reading the values with unit-stride loads.
pub fn mat_q6_k_q8_k(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    mat_q6_k_q8_k_16(w, rb, a, cols, out)
}
