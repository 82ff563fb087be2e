//! The table's rows: every loop a Q4_K_M model runs (Q4_K, Q5_K and Q6_K weights with Q8_K
//! activations; Q5_0 and Q8_0 weights, which such files use for some tensors, with Q8_0
//! activations; the two activation quantizers) and SmolLM2's Q4_1, each beside llama.cpp's loop
//! for the same type. How each loop is cut ([`Pick`]) is said in the notes of the table.

use super::asm::Pick::{self, Innermost, Nest, Nth, Outer, Trace};
use super::llama::Unit::{ArmA53, ArmA55, RefA53, RefA55, Riscv};
use super::Cpu::{self, A53, A55, X280};
use super::Src::{Llama, Ours, UnitStride};
use super::{l, Loop, Row, RVV_BLOCKS};

fn row(name: &'static str, cpu: Cpu, ours: Loop, theirs: Option<Loop>, note: &'static str) -> Row {
    Row {
        name,
        cpu,
        ours,
        theirs,
        note,
    }
}

fn ours(path: &'static str, blocks: f64) -> Loop {
    l(Ours(path), Innermost, blocks)
}

fn theirs(u: super::llama::Unit, f: &'static str, pick: Pick, blocks: f64) -> Option<Loop> {
    Some(l(Llama(u, f), pick, blocks))
}

/// Every row, in table order (the four-row K-quant kernels apart: [`k_quant_x4_rows`]).
pub fn rows() -> Vec<Row> {
    let mut v = q4_1_rows();
    v.extend(q32_rows());
    v.extend(k_rows());
    v.extend(quantizer_rows());
    v
}

/// Q4_1 · Q8_1 (SmolLM2), with the unit-stride RVV alternative.
fn q4_1_rows() -> Vec<Row> {
    const Q41: &str = "ggml_vec_dot_q4_1_q8_1";
    const LL_Q41_ONE: &str = "ours: 4 blocks of the row per iteration (the four-row loop, the blocks in the rows' places); llama.cpp: 2 blocks";
    let q41 = |u| theirs(u, Q41, Innermost, 2.0);
    let rv_q41 = theirs(Riscv, Q41, Innermost, 1.0);
    vec![
        row("Q4_1·Q8_1 matvec (4 rows, `_x4`)", A53, ours("neon::q32::vec_dot_q4_1_q8_1_x4", 4.0), q41(ArmA53), "ours: 1 block of 4 rows per iteration; llama.cpp: 2 blocks of 1 row"),
        row("Q4_1·Q8_1 matvec (4 rows, `_x4`)", A55, ours("neon::q32::vec_dot_q4_1_q8_1_x4_dp", 4.0), q41(ArmA55), "SDOT; ours: 1 block of 4 rows; llama.cpp: 2 blocks"),
        row("Q4_1·Q8_1 matvec (segment pass)", X280, ours("rvv::q32::vec_dot_q4_1_q8_1_x4", RVV_BLOCKS), rv_q41, "ours: one pass = vl = 64 blocks (`vlsseg8e8`); llama.cpp: 1 block, vl = 16"),
        row("Q4_1·Q8_1 one row (`dot1`)", A53, ours("neon::q32::vec_dot_q4_1_q8_1", 4.0), q41(ArmA53), LL_Q41_ONE),
        row("Q4_1·Q8_1 one row (`dot1`)", A55, ours("neon::q32::vec_dot_q4_1_q8_1_dp", 4.0), q41(ArmA55), LL_Q41_ONE),
        row("Q4_1·Q8_1 batched (`mat`, 4×4 tile)", A53, ours("neon::q32::mat_q4_1_q8_1", 16.0), q41(ArmA53), "per block·column: 4 rows × 4 columns per iteration; llama.cpp has no Q4_1 batched loop on these cores, its vec_dot runs per column"),
        row("Q4_1·Q8_1 batched (`mat`, 4×4 tile)", A55, ours("neon::q32::mat_q4_1_q8_1_dp", 16.0), q41(ArmA55), "per block·column, SDOT by element"),
        row("Q4_1·Q8_1 unit-stride, Zfhmin scales", X280, l(UnitStride(true), Innermost, 1.0), rv_q41, "alternative layout (not a kernel): 1 block, vl = 16 at m1, f16 scales with `flh`/`fcvt.s.h`"),
        row("Q4_1·Q8_1 unit-stride, base-V scales", X280, l(UnitStride(false), Innermost, 1.0), rv_q41, "alternative layout: as above, f16 scales decoded with integer ops (no Zfh), as the kernels must"),
    ]
}

/// The rows of one 32-value format `$t` (`q5_0_q8_0`) named `$name`: one row, four rows and
/// batched on each core. llama.cpp's NEON loop is its first (2 blocks; a scalar tail loop
/// follows), its RVV loop `$rv_pick` (1 block).
macro_rules! q32_rows {
    ($name:literal, $t:literal, $rv_pick:expr, $rv_mat:expr) => {{
        let ll = |u| theirs(u, concat!("ggml_vec_dot_", $t), Nth(0), 2.0);
        let rv = theirs(Riscv, concat!("ggml_vec_dot_", $t), $rv_pick, 1.0);
        let (mat, mat_pick, mat_blocks, mat_note) = $rv_mat;
        vec![
            row(concat!($name, " one row (`dot1`)"), A53, ours(concat!("neon::q32::vec_dot_", $t), 4.0), ll(ArmA53), "ours: 4 blocks of the row per iteration (the four-row loop, the blocks in the rows' places); llama.cpp: 2 blocks"),
            row(concat!($name, " one row (`dot1`)"), A55, ours(concat!("neon::q32::vec_dot_", $t, "_dp"), 4.0), ll(ArmA55), "SDOT; ours: 4 blocks per iteration; llama.cpp: 2 blocks"),
            row(concat!($name, " one row (pass)"), X280, ours(concat!("rvv::q32::vec_dot_", $t), RVV_BLOCKS), rv, "ours: one pass = vl = 64 blocks; llama.cpp: 1 block, vl = 32 at m2"),
            row(concat!($name, " matvec (4 rows, `_x4`)"), A53, ours(concat!("neon::q32::vec_dot_", $t, "_x4"), 4.0), ll(ArmA53), "ours: 1 block of 4 rows; llama.cpp: 2 blocks of 1 row"),
            row(concat!($name, " matvec (4 rows, `_x4`)"), A55, ours(concat!("neon::q32::vec_dot_", $t, "_x4_dp"), 4.0), ll(ArmA55), "SDOT; ours: 1 block of 4 rows; llama.cpp: 2 blocks"),
            row(concat!($name, " matvec (4 rows, `_x4`)"), X280, ours(concat!("rvv::q32::vec_dot_", $t, "_x4"), RVV_BLOCKS), rv, "ours: the one-row pass (64 blocks), run row after row"),
            row(concat!($name, " batched (`mat`, 4×4 tile)"), A53, ours(concat!("neon::q32::mat_", $t), 16.0), ll(ArmA53), "per block·column: 4 rows × 4 columns per iteration; llama.cpp: its vec_dot per column"),
            row(concat!($name, " batched (`mat`, 4×4 tile)"), A55, ours(concat!("neon::q32::mat_", $t, "_dp"), 16.0), ll(ArmA55), "per block·column, SDOT by element"),
            row(concat!($name, " batched (column loop)"), X280, l(Ours(mat), mat_pick, mat_blocks), rv, mat_note),
        ]
    }};
}

/// Q5_0 · Q8_0 and Q8_0 · Q8_0.
fn q32_rows() -> Vec<Row> {
    let mut v = q32_rows!(
        "Q5_0·Q8_0",
        "q5_0_q8_0",
        Nth(1),
        (
            "rvv::q32::mat::mat_q5_0_q8_0::pair",
            Innermost,
            2.0 * RVV_BLOCKS,
            "per block·column: a pair of rows' passes (2 × 64 blocks) with one column; llama.cpp: its VLEN > 128 loop"
        )
    );
    v.extend(q32_rows!(
        "Q8_0·Q8_0",
        "q8_0_q8_0",
        Innermost,
        (
            "rvv::q32::mat::mat_q8_0_q8_0",
            Nth(0),
            RVV_BLOCKS,
            "per block·column: one row's pass (64 blocks) with one column (Q8_0 rows are not paired)"
        )
    ));
    v
}

/// The rows of one K-quant: `$k` (`q5_k`), llama.cpp's `$ll` (`q5_K`) cut by `$a53` on
/// cortex-a53 (its `j` loop is not unrolled there), its RVV function `$rv`; ours on the X280 `$rv_ours`.
macro_rules! k_rows {
    ($name:literal, $k:literal, $ll:literal, $a53:expr, $a53_note:literal, $rv:literal, $rv_note:literal, $rv_ours:expr) => {{
        let ll = concat!("ggml_vec_dot_", $ll, "_q8_K");
        let (a53, a55) = (theirs(ArmA53, ll, $a53, 1.0), theirs(ArmA55, ll, Innermost, 1.0));
        let rv = theirs(Riscv, $rv, Innermost, 1.0);
        vec![
            row(concat!($name, " one row"), A53, ours(concat!("neon::kquant::vec_dot_", $k, "_q8_k"), 1.0), a53, $a53_note),
            row(concat!($name, " one row"), A55, ours(concat!("neon::kquant::vec_dot_", $k, "_q8_k_dp"), 1.0), a55, "1 super-block, SDOT"),
            row(concat!($name, " one row (the matvec: no four-row kernel)"), X280, l(Ours(concat!("rvv::kquant::vec_dot_", $k, "_q8_k")), $rv_ours, 1.0), rv, $rv_note),
            row(concat!($name, " batched (per column)"), A53, ours(concat!("neon::kquant::mat_", $k, "_q8_k"), 1.0), a53, "per block·column: ours the column loop (the decode, once per block for all columns, not counted)"),
            row(concat!($name, " batched (per column)"), A55, ours(concat!("neon::kquant::mat_", $k, "_q8_k_dp"), 1.0), a55, "as above, SDOT"),
            row(concat!($name, " batched (per column)"), X280, ours(concat!("rvv::kquant::mat_", $k, "_q8_k"), 1.0), rv, "per block·column: ours the column loop (scales decoded once per block)"),
        ]
    }};
}

/// Q4_K, Q5_K and Q6_K · Q8_K: one row and batched.
fn k_rows() -> Vec<Row> {
    let mut v =
        k_rows!(
        "Q4_K·Q8_K", "q4_k", "q4_K", Outer(4),
        "1 super-block; llama.cpp's inner `j` loop (not unrolled here) written out 4 times",
        "ggml_vec_dot_q4_K_q8_K_vl256",
        "1 super-block; ours: the common path (normal f16 scales); llama.cpp: its VLEN ≥ 256 loop",
        Innermost
    );
    v.extend(k_rows!(
        "Q5_K·Q8_K",
        "q5_k",
        "q5_K",
        Outer(4),
        "1 super-block; llama.cpp's `j` loop (4 × 64 values) written out 4 times",
        "ggml_vec_dot_q5_K_q8_K",
        "1 super-block; llama.cpp: one loop for every VLEN (vl = 32 at m2)",
        Innermost
    ));
    v.extend(k_rows!(
        "Q6_K·Q8_K", "q6_k", "q6_K", Outer(2),
        "1 super-block; llama.cpp's `j` loop (2 × 128 values) written out twice",
        "ggml_vec_dot_q6_K_q8_K_vl512",
        "1 super-block; ours: the path of a normal f16 `d` in the VLEN ≥ 512 loop (32 lanes); llama.cpp: its VLEN = 512 loop (what it runs on the X280)",
        // The 32-lane (VLEN ≥ 512) block loop's blocks: the f16 `d` read (.LBB_24), normal
        // (.LBB_28), the body (.LBB_23).
        Trace(&[(24, 1), (28, 1), (23, 1)])
    ));
    v
}

/// The activation quantizers: Q8_1 (SmolLM2's Q4_1), Q8_0 and Q8_K.
fn quantizer_rows() -> Vec<Row> {
    // Ours on the X280: the VLEN ≥ 512 loop, two blocks per step (.LBB_7: both blocks, the
    // first scale's f16 rounding on its normal path and its store, the second's range check;
    // .LBB_5: the second's rounding; .LBB_6: its store, the loop back).
    const RV_Q8_0: Pick = Trace(&[(7, 1), (5, 1), (6, 1)]);
    // llama.cpp's: the block (.LBB_4), d != 0 (.LBB_7), ggml's FP32_TO_FP16 for a normal d
    // (.LBB_8, .LBB_9), the store (.LBB_3).
    const LL_RV_Q8_0: Pick = Trace(&[(4, 1), (7, 1), (8, 1), (9, 1), (3, 1)]);
    // llama.cpp's RVV Q8_K at vl = 128 (e32, m8, VLEN 512): the max/min loop twice (.LBB_6),
    // |max| > |min| (bb.7 to .LBB_2, .LBB_9 to .LBB_11), the quantize loop twice (.LBB_13,
    // bb.14) with its bsums loop 7 times each (.LBB_15, 16 values past the first), .LBB_4.
    const LL_RV_Q8_K: Pick = Trace(&[
        (5, 1),
        (6, 2),
        (7, 1),
        (2, 1),
        (9, 1),
        (11, 1),
        (13, 1),
        (14, 1),
        (15, 7),
        (12, 1),
        (13, 1),
        (14, 1),
        (15, 7),
        (12, 1),
        (4, 1),
    ]);
    let q8_0 = |u| theirs(u, "quantize_row_q8_0", Innermost, 1.0);
    let q8_k = |u| theirs(u, "quantize_row_q8_K_ref", Nest(&[8]), 1.0);
    // Ours on NEON: the max loop 63 times (4 values each, after the first 4), no tie scan, the
    // 16 groups.
    let neon_q8_k = l(
        Ours("neon::quantize::quantize_q8_k"),
        Nest(&[63, 0, 16]),
        1.0,
    );
    vec![
        row("Q8_1 activation quantizer", A53, ours("neon::quantize::q8_1_fcvt", 4.0), theirs(ArmA53, "quantize_row_q8_1", Innermost, 1.0), "ours: 4 blocks of 32 values per iteration (one FDIV pair for the four scales), the FCVT loop (FPCR is IEEE, as on every board); llama.cpp: 1 block"),
        row("Q8_0 activation quantizer", A53, ours("neon::quantize::q8_0_fcvt", 4.0), q8_0(ArmA53), "ours: 4 blocks of 32 values per iteration, the FCVT loop; llama.cpp: 1 block"),
        row("Q8_0 activation quantizer", A55, ours("neon::quantize::q8_0_fcvt", 4.0), q8_0(ArmA55), "as above"),
        row("Q8_0 activation quantizer", X280, l(Ours("rvv::quantize::quantize_q8_0"), RV_Q8_0, 2.0), theirs(Riscv, "quantize_row_q8_0", LL_RV_Q8_0, 1.0), "ours: 2 blocks of 32 values per iteration, the VLEN ≥ 512 loop (vl = 32 at e32 m2, e16 m1, e8 mf2; the X280's VLEN is 512); llama.cpp: 1 block (vl = 32 at e32 m8); both: the path of a normal f16 scale"),
        row("Q8_K activation quantizer", A53, neon_q8_k, q8_k(RefA53), "1 super-block of 256 values; ours: max loop × 63, 16 groups, no tie scan; llama.cpp: the reference C (`ggml-quants.c`), its max loop (32 values) × 8"),
        row("Q8_K activation quantizer", A55, neon_q8_k, q8_k(RefA55), "as above"),
        row("Q8_K activation quantizer", X280, l(Ours("rvv::quantize::quantize_q8_k"), Nest(&[2, 2, 2]), 1.0), theirs(Riscv, "quantize_row_q8_K", LL_RV_Q8_K, 1.0), "1 super-block, vl = 128; ours: the quantize loop × 2, the max loop × 2, the first-max scan × 2 (at most: it stops in the pass holding the max); llama.cpp: max/min × 2, quantize × 2 with 7 bsum slides each"),
    ]
}

/// The four-row K-quant kernels (`vec_dot_q4_k_q8_k_x4` and the like, one super-block of four
/// rows per iteration), each beside llama.cpp's one-row loop: rows whose symbol is not in our
/// assembly are reported as not built.
pub fn k_quant_x4_rows() -> Vec<Row> {
    let ll = |u, f| theirs(u, f, Innermost, 1.0);
    let ll53 = |f, p| theirs(ArmA53, f, p, 1.0);
    let note = "ours: 1 super-block of 4 rows; llama.cpp: 1 super-block of 1 row";
    vec![
        row(
            "Q4_K·Q8_K matvec (4 rows, `_x4`)",
            A53,
            ours("neon::kquant::vec_dot_q4_k_q8_k_x4", 4.0),
            ll53("ggml_vec_dot_q4_K_q8_K", Outer(4)),
            note,
        ),
        row(
            "Q4_K·Q8_K matvec (4 rows, `_x4`)",
            A55,
            ours("neon::kquant::vec_dot_q4_k_q8_k_x4_dp", 4.0),
            ll(ArmA55, "ggml_vec_dot_q4_K_q8_K"),
            "SDOT; as above",
        ),
        row(
            "Q5_K·Q8_K matvec (4 rows, `_x4`)",
            A53,
            ours("neon::kquant::vec_dot_q5_k_q8_k_x4", 4.0),
            ll53("ggml_vec_dot_q5_K_q8_K", Outer(4)),
            note,
        ),
        row(
            "Q5_K·Q8_K matvec (4 rows, `_x4`)",
            A55,
            ours("neon::kquant::vec_dot_q5_k_q8_k_x4_dp", 4.0),
            ll(ArmA55, "ggml_vec_dot_q5_K_q8_K"),
            "SDOT; as above",
        ),
        row(
            "Q6_K·Q8_K matvec (4 rows, `_x4`)",
            A53,
            ours("neon::kquant::vec_dot_q6_k_q8_k_x4", 4.0),
            ll53("ggml_vec_dot_q6_K_q8_K", Outer(2)),
            note,
        ),
        row(
            "Q6_K·Q8_K matvec (4 rows, `_x4`)",
            A55,
            ours("neon::kquant::vec_dot_q6_k_q8_k_x4_dp", 4.0),
            ll(ArmA55, "ggml_vec_dot_q6_K_q8_K"),
            "SDOT; as above",
        ),
    ]
}
