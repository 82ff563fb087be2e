//! Activation quantization: twins of [`crate::quant::act::quantize_q8_0`], `quantize_q8_1` and
//! `quantize_q8_k`, byte for byte: the RVV set's quantizers (`rvv::quantize`, whose docs give the
//! method: `vfredmax` for the scale, the scalar code's float operations, `nearest_int` through
//! the magic number) assembled for XTheadVector (`quantizers!(xtv_asm, ...)`). Element 0 of the
//! e16 byte sum is read with `th.vext.x.v`, which zero-extends, and taken as an i16. VLEN is 128
//! on the C906, so Q8_0 goes one block at a time (the RVV set's two-block step needs VLEN ≥ 512
//! and a fractional LMUL, which 0.7.1 lacks).

use super::{xtv_asm, xtv_enter, xtv_leave, xtv_refused};
use crate::quant::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::rvv::quantize::{f16_round, quantizers, MAGIC};
use crate::quant::types::{QK32, QK_K};

quantizers!(xtv_asm, "th.vext.x.v {sum}, v2, zero");

/// Quantize `x` (length a multiple of 32) to Q8_0 blocks (twin of `act::quantize_q8_0`).
pub fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    q8_0_blocks(x, out);
}
