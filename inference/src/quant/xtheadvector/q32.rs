//! 32-wide weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) · Q8_0 / Q8_1 activations, one row or
//! four: the RVV set's kernels (`rvv::q32`, whose docs give the design: strided segment loads
//! transposing up to VLEN/8 blocks, one block per lane, the scalar float expression per lane and
//! `vfredosum` in block order) assembled for XTheadVector through the encoding layer
//! (`q32_kernels!(xtv_asm)`). Their text holds under RVV 0.7.1 as it is:
//! - every `vsetvli` says `ta` (0.7.1 zeroes tails) and masked ops run under `mu` (0.7.1 leaves
//!   masked-off lanes alone); a pass's registers are loaded with vl = blocks, the integer phase
//!   then runs at VLMAX over lanes whose tails are zero (their products are never read: the
//!   reduction and the float phase run at vl = blocks);
//! - Q5's fifth-bit masks are made and used at `e8, m1`, the f16 conversion's at `e32, m4` /
//!   `e32, m8`: each under one vtype, so MLEN's layout does not matter;
//! - no widening op writes over one of its sources (`vwmul.vv v0, v24, v16`, `vwaddu.wv` whose
//!   wide source is its destination, as 0.7.1 allows);
//! - loads are `vlsseg8e8` / `vlsseg2e8` / `vlsseg4e8` / `vlse8` at SEW 8 and `vlse32` /
//!   `vlsseg2e32` at SEW 32 (= `vlsseg8bu`, ..., `vlswu`: the same instructions);
//! - `vfcvt.f.x.v`, `vfmv.s.f` and `vfmv.f.s` are re-encoded by the layer.
//!
//! Batched: `mat` (the RVV set's batched kernels, with unit-stride stand-ins for their
//! whole-register operations).

use super::{xtv_asm, xtv_enter, xtv_leave, xtv_refused};
use crate::quant::act::{BlockQ8_0, BlockQ8_1};
use crate::quant::rvv::q32::{
    blocks, entries, float_d, float_dm, kernel, next_pass, nibble_pass, osum, q32_asm, q32_kernels,
    q32_rows_asm, q4_adj, q4_half, q5_bit, q5_cols, q5_half, q5_nib, q5_pre, q8_quarter, q8_sum,
    reduce_positions, scale_d, scale_dm, term_d, term_dm, Q8_0_BYTES, Q8_1_BYTES,
};
use crate::quant::rvv::{f16_bits_to_f32, BIG, INF, K112, MAG};

q32_kernels!(xtv_asm);

mod mat;
pub use mat::{mat_q4_0_q8_0, mat_q4_1_q8_1, mat_q5_0_q8_0, mat_q5_1_q8_1, mat_q8_0_q8_0};
