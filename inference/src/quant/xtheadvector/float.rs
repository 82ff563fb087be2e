//! Float dot products (F32 / F16 / BF16 weights · activations of the same type) and the attention
//! of one head over the f16 KV cache: the RVV set's kernels (`quant::rvv::float`, whose docs give
//! the method), written here by `float_kernels!` through this set's encoding layer. The same text
//! is RVV 0.7.1: strided loads at the element's width (`vlswu.v`, `vlshu.v`), f16 → f32 with
//! integer operations and one exact multiplication, bf16 zero-extended by a widening add of x0, the
//! ordered reduction `vfredosum` with the accumulator moved in and out by the re-encoded
//! `vfmv.s.f` / `vfmv.f.s`, and the attention's `q·k` in steps of 32 elements (the four 8-lane
//! chunks of an e32 m8 group read as register pairs: VLEN 128), then of 8, never with vl below
//! 8 (0.7.1 has no tail-undisturbed partial step): the last `n % 8` go to Rust.

use super::xtv_asm as vec_asm;
use super::{xtv_enter, xtv_leave, xtv_refused};
use crate::quant::rvv::{
    f16_bits_to_f32, float_kernels, lane_len, strided_dot, BIG, INF, K112, MAG,
};
use crate::quant::scalar;

// The C906: VLEN 128.
float_kernels!(true);
