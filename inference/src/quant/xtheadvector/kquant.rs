//! K-quants (Q2_K..Q6_K) · Q8_K activations: the RVV set's kernels (`quant::rvv::kquant`, whose
//! docs give the method and each kernel's bound), written here through this set's encoding layer
//! (`kq_kernels!`, `q6k_fns!`, `q3k_fns!`, `q2k_fns!`). The RVV text holds under RVV 0.7.1 at
//! VLEN 128 as it stands: vectors of 16 (e8 m1) or 32 (e8 m2) lanes, widening to e16 m2/m4 and
//! e32 m4/m8 with destinations apart from their sources, masks made and used under one vtype
//! (Q5_K's `qh` bits at e8 m2, Q3_K's `hmask` bits at e8 m2 here), no masked-off lane read
//! after a masked operation but the ones it left alone. What differs: the sums' element 0 comes
//! out through `th.vext.x.v`, which zero-extends (the callers read the low 32 bits as i32); and
//! Q6_K, Q3_K and Q2_K, whose scales cover 16 values, take 32 lanes here (below), which holds at
//! VLEN 128 only (the RVV set's 32-lane Q6_K needs e8 mf2; its 16-lane kernels run at any VLEN).
//!
//! `asm!` instructions per super-block (scalar ones included; the RVV set's at VLEN 128 in
//! brackets): Q4_K 83 (83), Q5_K 110 (110), Q6_K 122 (194), Q3_K 118 (190), Q2_K 104 (142); a
//! batched column of Q6_K 87 (126). Q4_K and Q5_K also sum the mins times the activations' sums
//! in the block (13 of their 83 and 110).

use super::xtv_asm as vec_asm;
use super::{xtv_enter, xtv_leave, xtv_refused};
use crate::quant::act::BlockQ8K;
use crate::quant::rvv::{
    dm_k_kernels, dm_summs, dm_term, f16_at, kmat, kq16_asm, kq16_isum, kq_asm, kq_entries,
    kq_kernels, kq_mat, kq_sum, q2_k_scales, q2k_fns, q2k_part, q3_k_scales, q3k_fns, q3k_part,
    q4_k_scales, q4k_pair, q5k_pair, q6k_dec, q6k_fns, q6k_io, q6k_vals, Q3KScales, Q4KScales,
    Q6KDec,
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
// Q6_K, Q3_K and Q2_K with 32 lanes (e8 m2; VLEN 128 has no e8 mf2, so the RVV set's 32-lane
// Q6_K path is not this one). These types scale groups of 16 values; here a group of 32 values
// (32 consecutive `l`, offsets as in the RVV set's `q6k_part!`, `q3k_part!`, `q2k_part!`) is
// decoded at once, multiplied with its activations into e16 (m4, 32 lanes), and each 16-lane half
// of the product, one register pair at VLEN 128, is multiplied by its own scale into the e32 sums
// (m4, 16 lanes: v24..v27, as `kq16_asm!` sums them). Each lane of the sums adds the same
// products as the RVV set's sixteen-lane kernels (their bounds hold).

/// Two groups of 32 values (`$q0`, `$q1`: e8 m2) with their activations (at `{y}` + `$a*`) into
/// v24..v27: the scales of lanes 0..16 and 16..32 of the first group, then of the second, are the
/// `$sc` scalar loads (`kq32_sc!`) of the offsets `$o*`. Starts and ends at e8 m2
/// (mask-undisturbed, for Q3_K's masked adds).
#[rustfmt::skip]
macro_rules! kq32_pair {
    ($q0:literal, $q1:literal, [$a0:literal, $a1:literal], $sc:tt [$o0:literal, $o1:literal, $o2:literal, $o3:literal]) => {
        concat!(
            "addi {p}, {y}, ", $a0, "\n",
            "vle8.v v16, ({p})\n",
            "addi {p}, {y}, ", $a1, "\n",
            "vle8.v v18, ({p})\n",
            "vwmul.vv v20, ", $q0, ", v16\n",
            "vwmul.vv v28, ", $q1, ", v18\n",
            "vsetvli zero, {c16}, e16, m2, ta, ma\n",
            kq32_sc!($sc $o0), "vwmacc.vx v24, {s}, v20\n",
            kq32_sc!($sc $o1), "vwmacc.vx v24, {s}, v22\n",
            kq32_sc!($sc $o2), "vwmacc.vx v24, {s}, v28\n",
            kq32_sc!($sc $o3), "vwmacc.vx v24, {s}, v30\n",
            "vsetvli zero, {c32}, e8, m2, ta, mu\n",
        )
    };
}

/// A scale into `{s}`: `q6` the i8 at `{b}` + `$o` (Q6_K), `q3` the decoded i8 at `{sc}` + `$o`
/// (Q3_K), `q2` the low nibble of the byte at `{b}` + `$o` (Q2_K).
macro_rules! kq32_sc {
    (q6 $o:literal) => {
        concat!("lb {s}, ", $o, "({b})\n")
    };
    (q3 $o:literal) => {
        concat!("lb {s}, ", $o, "({sc})\n")
    };
    (q2 $o:literal) => {
        concat!("lbu {s}, ", $o, "({b})\n", "andi {s}, {s}, 15\n")
    };
}

/// Four groups of 32 values in v8, v10, v12, v14 (e8 m2) with the activations at `{y}` + `$a*`
/// into v24..v27, their eight scales (two a group) loaded by `$sc` from the offsets `$o*`.
#[rustfmt::skip]
macro_rules! kq32_quad {
    ([$a0:literal, $a1:literal, $a2:literal, $a3:literal], $sc:tt
     [$o0:literal, $o1:literal, $o2:literal, $o3:literal, $o4:literal, $o5:literal, $o6:literal, $o7:literal]) => {
        concat!(
            kq32_pair!("v8", "v10", [$a0, $a1], $sc [$o0, $o1, $o2, $o3]),
            kq32_pair!("v12", "v14", [$a2, $a3], $sc [$o4, $o5, $o6, $o7]),
        )
    };
}

/// Half `h` of a Q3_K block (`$q` = 32 + 32h, `$a*` = 128h + 32s, `$k*` = 7 - (4h + s), `$i*` =
/// 8h + 2s + p as in `q3k_part!`) into v24..v27.
#[rustfmt::skip]
macro_rules! q3x_half {
    ($q:literal, [$($a:literal),*], [$($k:literal),*], [$($i:literal),*]) => {
        concat!(
            "vsetvli zero, {c32}, e8, m2, ta, mu\n",
            "addi {p}, {b}, ", $q, "\n",
            "vle8.v v2, ({p})\n",
            "vle8.v v4, ({b})\n",
            q3k_part!(@vals ["v2", "v4", "v6"], ["v8", "v10", "v12", "v14"], [$($k),*]),
            kq32_quad!([$($a),*], q3 [$($i),*]),
        )
    };
}

q3k_fns!(
    [
        q3x_half!(32, [0, 32, 64, 96], [7, 6, 5, 4], [0, 1, 2, 3, 4, 5, 6, 7]),
        q3x_half!(64, [128, 160, 192, 224], [3, 2, 1, 0], [8, 9, 10, 11, 12, 13, 14, 15]),
    ],
    c32 = in(reg) 32usize
);

/// Half `h` of a Q2_K block (`$q` = 16 + 32h, `$a*` = 128h + 32s, `$i*` = 8h + 2s + p as in
/// `q2k_part!`) into v24..v27.
#[rustfmt::skip]
macro_rules! q2x_half {
    ($q:literal, [$($a:literal),*], [$($i:literal),*]) => {
        concat!(
            "vsetvli zero, {c32}, e8, m2, ta, ma\n",
            "addi {p}, {b}, ", $q, "\n",
            "vle8.v v2, ({p})\n",
            q2k_part!(@vals "v2", ["v8", "v10", "v12", "v14"]),
            kq32_quad!([$($a),*], q2 [$($i),*]),
        )
    };
}

q2k_fns!(
    [
        q2x_half!(16, [0, 32, 64, 96], [0, 1, 2, 3, 4, 5, 6, 7]),
        q2x_half!(48, [128, 160, 192, 224], [8, 9, 10, 11, 12, 13, 14, 15]),
    ],
    c32 = in(reg) 32usize
);

q6k_fns!(
    /// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`): 32 lanes per
    /// instruction.
    vec_dot_q6_k_q8_k,
    [
        q6k_vals!(m2 0, 32, 128),
        kq32_quad!([0, 32, 64, 96], q6 [192, 193, 194, 195, 196, 197, 198, 199]),
        q6k_vals!(m2 64, 96, 160),
        kq32_quad!([128, 160, 192, 224], q6 [200, 201, 202, 203, 204, 205, 206, 207]),
    ],
    /// Q6_K weights · Q8_K activations, batched: each block decoded once per row to int8 (in the
    /// activations' order), each column reading the values with 32-byte loads.
    mat_q6_k_q8_k,
    [
        "vsetvli zero, {c32}, e8, m2, ta, ma",
        q6k_io!("vle8.v", "{q}", ["v8", "v10", "v12", "v14"], [0, 32, 64, 96]),
        kq32_quad!([0, 32, 64, 96], q6 [192, 193, 194, 195, 196, 197, 198, 199]),
        q6k_io!("vle8.v", "{q}", ["v8", "v10", "v12", "v14"], [128, 160, 192, 224]),
        kq32_quad!([128, 160, 192, 224], q6 [200, 201, 202, 203, 204, 205, 206, 207]),
    ],
    c32 = in(reg) 32usize
);
