//! Batched 32-wide kernels (rows · several activation columns): the RVV set's (`rvv::q32::mat`,
//! whose docs give the design: each pass of a row, or of two, decoded once to int8 into a
//! scratch laid out as whole registers, then multiplied with every column) assembled for
//! XTheadVector (`mat_kernels!(xtv_asm)`). RVV 0.7.1 has no whole-register loads, stores or
//! moves: [`whole_reg!`] stands in for them with unit-stride accesses under the vtype that
//! covers the registers (`e8, m8` for eight byte registers, ...), which lay the bytes out as the
//! whole-register ones do, and restores the vtype the text asks for; a register-group move is a
//! `vmv.v.v` of the vl lanes the text reads. VLENB is 16 on the C906 (the scratch holds 64).

use super::super::{xtv_asm, xtv_enter, xtv_leave, xtv_refused};
use super::{
    vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1, vec_dot_q8_0_q8_0,
};
use crate::quant::act::{BlockQ8_0, BlockQ8_1};
use crate::quant::rvv::q32::mat::{
    adv, col16, col8_pair, col_nib, col_nib_pair, dec_pair, dec_q4, dec_q4_pass, dec_q5,
    dec_q5_pass, ld_d, mat, mat_asm, mat_entry, mat_fn, mat_kernels, out1, out2, pair_fn,
    st_q8_cols, store_d, store_dm, term_d_pair, term_dm_pair, Row,
};
use crate::quant::rvv::q32::{
    next_pass, osum, q32_asm, q4_adj, q5_bit, q5_nib, q5_pre, q8_quarter, q8_sum, reduce_positions,
    scale_d, scale_dm, term_d, term_dm, Q8_0_BYTES, Q8_1_BYTES,
};
use crate::quant::rvv::{f16_bits_to_f32, BIG, INF, K112, MAG};

/// XTheadVector's stand-ins for the whole-register operations of the shared text (see
/// `mat_kernels!`): `st` / `ld` set the vtype `e$eew, m$n` at VLMAX (`$n` registers of `$eew`-bit
/// elements), access them with `vse` / `vle` of that width (the same bytes, in the same order, as
/// `vs$nr.v` / `vl$nre$eew.v`), then run `$back` (the vtype the text goes on with, or nothing
/// where it sets one itself); `mv` copies the vl lanes of the current vtype (`vmv.v.v`).
#[rustfmt::skip]
macro_rules! whole_reg {
    (st, $n:literal, $eew:literal, $v:literal, $addr:literal, $back:literal) => {
        concat!(
            "vsetvli {t}, zero, e", $eew, ", m", $n, ", ta, ma\n",
            "vse", $eew, ".v ", $v, ", (", $addr, ")\n",
            $back,
        )
    };
    (ld, $n:literal, $eew:literal, $v:literal, $addr:literal, $back:literal) => {
        concat!(
            "vsetvli {t}, zero, e", $eew, ", m", $n, ", ta, ma\n",
            "vle", $eew, ".v ", $v, ", (", $addr, ")\n",
            $back,
        )
    };
    (mv, $n:literal, $eew:literal, $vd:literal, $vs:literal, $back:literal) => {
        concat!("vmv.v.v ", $vd, ", ", $vs, "\n")
    };
}

mat_kernels!(xtv_asm);
