//! XTheadVector kernels (T-Head C906: Milk-V Duo, CV1800B / SG2002; also the C910 / C920):
//! SIMD twins of the scalar reference kernels in [`super::scalar`] returning bit-identical
//! results (`to_bits()` equal) for every input, as the RVV 1.0 set ([`super::rvv`]) does.
//!
//! XTheadVector is the draft RVV 0.7.1 with a `th.` prefix (XUANTIE-RV/thead-extension-spec,
//! `xtheadvector.adoc`): VLEN 128 on the C906. Rust's LLVM knows neither the extension nor its
//! mnemonics, and the crate must never be built with `+v` (LLVM would emit RVV 1.0 code, which
//! traps on a C906 or, worse, means something else). So the kernels are `asm!` blocks written with
//! RVV 1.0 mnemonics under `.option arch, +v` for the instructions whose encodings the two share,
//! and the few that differ are re-encoded by the assembler macros of [`xtv_asm!`] (the encoding
//! layer, below): the RVV set's kernel text runs here unchanged where its logic holds under 0.7.1.
//!
//! What 0.7.1 changes besides encodings, and how the kernels keep to it:
//! - `vsetvli`'s vtype is `vlmul[1:0] | vsew[4:2]` (vediv, bits 6:5, is 0); there are no ta/ma
//!   bits, no `vsetivli` and no fractional LMUL. Tail elements (vl..VLMAX) of a vector result
//!   are zeroed, masked-off elements undisturbed: code written for `ta, ma` or `ta, mu` holds,
//!   `tu` is refused by the encoding layer. (`vsetvli rd=x0, rs1=x0` sets vl to VLMAX rather
//!   than keeping vl: the kernels never use it.)
//! - A mask register holds element `i`'s bit at bit `i · MLEN`, MLEN = SEW/LMUL: a mask must be
//!   made and used under the same SEW/LMUL (every kernel does so).
//! - Widening and narrowing instructions may not overlap their destination with a source of
//!   another width (RVV 1.0 allows some overlaps): the kernels' register use never does.
//! - Loads and stores: `vlb/vlh/vlw` (sign-extended), `vlbu/vlhu/vlwu` (zero-extended), `vle`
//!   (SEW). RVV 1.0's `vle8/vle16/vle32/vle64` (unit-stride, strided `vlse*`, segment `vlseg*`,
//!   `vlsseg*`) encode as `vlbu/vlhu/vlwu/vle`, so they are the same instruction when the width
//!   equals SEW, the only way the kernels use them. No whole-register loads, stores or moves
//!   (the batched kernels use unit-stride stand-ins, `q32::mat`).
//! - No `vzext`/`vsext` (a widening add with x0 instead); `vmv.x.s` is `th.vext.x.v`, which
//!   zero-extends (RVV 1.0 sign-extends).
//!
//! Layout: `q32` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 · Q8_0 / Q8_1, one row, four, batched), `kquant`
//! (Q2_K..Q6_K · Q8_K, one row and batched: the RVV set's text through `kq_kernels!`, Q6_K, Q3_K
//! and Q2_K with 32 lanes of their own), `float` (F32/F16/BF16 dots, the attention's `q·k`
//! and online softmax), `quantize` (Q8_0, Q8_1, Q8_K activations): every entry of the table is an
//! XTheadVector twin of the scalar one except f32 → f16 (the KV stores), as in the RVV set.
//!
//! Writing a kernel here: an `asm!` block goes through [`xtv_asm!`] (as `rvv_asm!`), written with RVV 1.0
//! mnemonics. The layer re-encodes what differs and refuses, at compile time, what 0.7.1 lacks;
//! what it cannot see is the meaning: a load's width must equal SEW, no `tu`, a mask used under
//! the vtype that made it, no overlap of a widening op with its sources, `th.vext.x.v`
//! zero-extends. Where an RVV kernel's text holds under 0.7.1, expand it here as `q32` and
//! `quantize` do (the RVV file turns it into a macro taking the `asm!` wrapper) rather than copy
//! it; the shared harness checks every entry against scalar under `-cpu c906fdv`.
//!
//! Which hart has XTheadVector: [`isa_has_xtheadvector`] (a device tree's `riscv,isa` string or
//! `riscv,isa-extensions` entry) and, per the spec, [`ids_have_xtheadvector`] (SBI's mvendorid
//! and mimpid with the ISA's `v`); `quant::set_features` records the answer once at boot, and
//! `Kernels::best()` / `Kernels::available()` follow it ([`runs_on`]). The boot code must also
//! have turned the vector unit on (`sstatus.VS`, bits 24:23, as for V).

mod float;
mod kquant;
mod q32;
mod quantize;

pub use float::{attend_head, dot_f32_f16, vec_dot_bf16_bf16, vec_dot_f16_f16, vec_dot_f32_f32};
pub use kquant::{
    mat_q2_k_q8_k, mat_q3_k_q8_k, mat_q4_k_q8_k, mat_q5_k_q8_k, mat_q6_k_q8_k, vec_dot_q2_k_q8_k,
    vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k, vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k,
};
pub use q32::{
    mat_q4_0_q8_0, mat_q4_1_q8_1, mat_q5_0_q8_0, mat_q5_1_q8_1, mat_q8_0_q8_0, vec_dot_q4_0_q8_0,
    vec_dot_q4_0_q8_0_x4, vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4, vec_dot_q5_0_q8_0,
    vec_dot_q5_0_q8_0_x4, vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4, vec_dot_q8_0_q8_0,
    vec_dot_q8_0_q8_0_x4,
};
pub use quantize::{quantize_q8_0, quantize_q8_1, quantize_q8_k};

use super::scalar::with_q32;
use super::table::{with_floats, with_k_quants};
use super::{Features, Kernels};

/// T-Head's JEDEC vendor id as `mvendorid` reads it (bank 12, 0x37: `0x5b7`).
pub const MVENDORID_THEAD: usize = 0x5b7;

/// Whether a CPU with `f` runs [`KERNELS`]: the harts have XTheadVector and not RVV 1.0 (the two
/// encodings overlap with other meanings, so a record claiming both runs neither).
pub fn runs_on(f: &Features) -> bool {
    f.xtheadvector && !f.rvv
}

/// Whether a device tree ISA string names XTheadVector: `riscv,isa` with a multi-letter extension
/// `_xtheadvector` (any case, maybe with a version such as `1p0`), or an entry of the newer
/// `riscv,isa-extensions` list, `"xtheadvector"`, passed alone.
pub fn isa_has_xtheadvector(isa: &str) -> bool {
    isa.split('_')
        .any(|token| without_version(token).eq_ignore_ascii_case("xtheadvector"))
}

/// An ISA string's extension name without its version (`xtheadvector1p0` → `xtheadvector`).
fn without_version(token: &str) -> &str {
    let digit = |c: char| c.is_ascii_digit();
    let t = token.trim_end_matches(digit);
    match t.strip_suffix(['p', 'P']) {
        Some(major) if major.ends_with(digit) && t.len() < token.len() => {
            major.trim_end_matches(digit)
        }
        _ => t,
    }
}

/// Whether a hart has XTheadVector by the spec's rule ("Availability"): `mvendorid` is T-Head's
/// ([`MVENDORID_THEAD`]), `misa` has V (`isa_v`: the device tree's `v`, or misa bit 21) and
/// `mimpid` is 0 (later T-Head cores, with RVV 1.0, have another). SBI returns both ids
/// (`sbi_get_mvendorid`, `sbi_get_mimpid`).
pub fn ids_have_xtheadvector(mvendorid: usize, mimpid: usize, isa_v: bool) -> bool {
    mvendorid == MVENDORID_THEAD && mimpid == 0 && isa_v
}

/// The XTheadVector set: the scalar set's entries, with XTheadVector twins where this module has
/// them. Only for harts with XTheadVector: take it from `Kernels::best()` /
/// `Kernels::available()`, which consult [`runs_on`].
pub const KERNELS: Kernels = {
    let set = Kernels {
        name: "xtheadvector",
        quantize_q8_0,
        quantize_q8_1,
        quantize_q8_k,
        attend_head,
        dot_f32_f16,
        ..Kernels::SCALAR
    };
    // The 32-wide types: one row, four and batched; the K-quants: one row and batched (decoded
    // once per row and block). Float weights: one row; a batch goes column by column.
    with_k_quants!(with_q32!(with_floats!(set, self), self, q32), self)
};

/// The encoding layer: assembler macros, defined at the start of every XTheadVector `asm!` block
/// and purged at its end ([`xtv_asm!`]), that give the RVV 1.0 mnemonics whose 0.7.1 encodings
/// differ their XTheadVector encoding (LLVM expands a macro before it looks for an instruction of
/// that name), and refuse those with no 0.7.1 twin. Everything else is assembled as RVV 1.0 under
/// `.option arch, +v` and is the same instruction in both (see the module docs for loads).
///
/// Re-encoded (sources: the RVV 0.7.1 spec's opcode tables; LLVM's XTheadVector MC tests,
/// `llvm/test/MC/RISCV/xtheadvector/*.s`; Linux's `THEAD_VSETVLI_T4X0E8M8D1`, `0x00307ed7`;
/// each checked against a known word in `tests`):
/// - `vsetvli rd, rs1, eSEW, mLMUL, ta|tu, ma|mu` → `th.vsetvli`: the same instruction with
///   vtype `vlmul | vsew << 2`; `tu` is an error (0.7.1 zeroes the tail), `mf*` and unknown
///   widths too (no such symbol);
/// - `vfmv.f.s`, `vfmv.s.f`, `vmv.s.x`: funct6 0b001100 / 0b001101 (RVV 1.0: 0b010000);
/// - `th.vext.x.v rd, vs2, rs1` (element `rs1` of `vs2`, zero-extended), funct6 0b001100;
///   RVV 1.0's `vmv.x.s`, which sign-extends, is an error;
/// - `vfcvt.{xu.f, x.f, f.xu, f.x}.v`, `vfwcvt.f.f.v`, `vfncvt.f.f.w` (0.7.1 `vfncvt.f.f.v`):
///   VFUNARY0 is funct6 0b100010 (RVV 1.0: 0b010010), the same vs1 codes;
/// - `vfsqrt.v`, `vfclass.v`: VFUNARY1 is funct6 0b100011 (RVV 1.0: 0b010011), the same vs1
///   codes;
/// - `vid.v`, `viota.m`, `vmsbf.m`, `vmsof.m`, `vmsif.m`: funct6 0b010110 (RVV 1.0: 0b010100),
///   the same vs1 codes; `vwmaccsu.vv`/`.vx` (signed · unsigned) funct6 0b111110 and
///   `vwmaccus.vx` 0b111111 (RVV 1.0 has the two the other way round); `vfirst.m` →
///   `th.vmfirst.m` (0b010101),
///   `vcpop.m` → `th.vmpopc.m` (0b010100) (RVV 1.0: 0b010000 with vs1 codes).
///
/// `.insn r` takes vector register names for its register fields, and `funct7` is
/// `funct6 << 1 | vm` (all of these unmasked).
#[rustfmt::skip]
#[allow(unused_macros)]
macro_rules! xtv_enter {
    () => {
        concat!(
            ".set .Lxtv_e8, 0\n.set .Lxtv_e16, 4\n.set .Lxtv_e32, 8\n.set .Lxtv_e64, 12\n",
            ".set .Lxtv_m1, 0\n.set .Lxtv_m2, 1\n.set .Lxtv_m4, 2\n.set .Lxtv_m8, 3\n",
            ".macro vsetvli rd, rs1, sew, lmul, ta, ma\n",
            ".ifc \\ta, tu\n.error \"XTheadVector zeroes the tail: tu cannot be had\"\n.endif\n",
            ".insn i 0x57, 7, \\rd, \\rs1, .Lxtv_\\sew + .Lxtv_\\lmul\n",
            ".endm\n",
            ".macro vfmv.f.s rd, vs2\n.insn r 0x57, 1, 0x19, \\rd, x0, \\vs2\n.endm\n",
            ".macro vfmv.s.f vd, rs1\n.insn r 0x57, 5, 0x1b, \\vd, \\rs1, x0\n.endm\n",
            ".macro vmv.s.x vd, rs1\n.insn r 0x57, 6, 0x1b, \\vd, \\rs1, x0\n.endm\n",
            ".macro th.vext.x.v rd, vs2, rs1\n.insn r 0x57, 2, 0x19, \\rd, \\rs1, \\vs2\n.endm\n",
            ".macro vfcvt.xu.f.v vd, vs2\n.insn r 0x57, 1, 0x45, \\vd, x0, \\vs2\n.endm\n",
            ".macro vfcvt.x.f.v vd, vs2\n.insn r 0x57, 1, 0x45, \\vd, x1, \\vs2\n.endm\n",
            ".macro vfcvt.f.xu.v vd, vs2\n.insn r 0x57, 1, 0x45, \\vd, x2, \\vs2\n.endm\n",
            ".macro vfcvt.f.x.v vd, vs2\n.insn r 0x57, 1, 0x45, \\vd, x3, \\vs2\n.endm\n",
            ".macro vfwcvt.f.f.v vd, vs2\n.insn r 0x57, 1, 0x45, \\vd, x12, \\vs2\n.endm\n",
            ".macro vfncvt.f.f.w vd, vs2\n.insn r 0x57, 1, 0x45, \\vd, x20, \\vs2\n.endm\n",
            ".macro vid.v vd\n.insn r 0x57, 2, 0x2d, \\vd, x17, x0\n.endm\n",
            ".macro viota.m vd, vs2\n.insn r 0x57, 2, 0x2d, \\vd, x16, \\vs2\n.endm\n",
            ".macro vmsbf.m vd, vs2\n.insn r 0x57, 2, 0x2d, \\vd, x1, \\vs2\n.endm\n",
            ".macro vmsof.m vd, vs2\n.insn r 0x57, 2, 0x2d, \\vd, x2, \\vs2\n.endm\n",
            ".macro vmsif.m vd, vs2\n.insn r 0x57, 2, 0x2d, \\vd, x3, \\vs2\n.endm\n",
            ".macro vfsqrt.v vd, vs2\n.insn r 0x57, 1, 0x47, \\vd, x0, \\vs2\n.endm\n",
            ".macro vfclass.v vd, vs2\n.insn r 0x57, 1, 0x47, \\vd, x16, \\vs2\n.endm\n",
            ".macro vwmaccsu.vv vd, vs1, vs2\n.insn r 0x57, 2, 0x7d, \\vd, \\vs1, \\vs2\n.endm\n",
            ".macro vwmaccsu.vx vd, rs1, vs2\n.insn r 0x57, 6, 0x7d, \\vd, \\rs1, \\vs2\n.endm\n",
            ".macro vwmaccus.vx vd, rs1, vs2\n.insn r 0x57, 6, 0x7f, \\vd, \\rs1, \\vs2\n.endm\n",
            ".macro vfirst.m rd, vs2\n.insn r 0x57, 2, 0x2b, \\rd, x0, \\vs2\n.endm\n",
            ".macro vcpop.m rd, vs2\n.insn r 0x57, 2, 0x29, \\rd, x0, \\vs2\n.endm\n",
            ".irp name, ", xtv_refused!(), "\n",
            ".macro \\name args:vararg\n",
            ".error \"not in XTheadVector (RVV 0.7.1): see quant::xtheadvector\"\n",
            ".endm\n",
            ".endr\n",
        )
    };
}

/// The end of an XTheadVector `asm!` block: the encoding layer's macros purged, so that the RVV
/// 1.0 kernels assembled after it get the RVV 1.0 instructions.
#[rustfmt::skip]
#[allow(unused_macros)]
macro_rules! xtv_leave {
    () => {
        concat!(
            ".purgem vsetvli\n.purgem vfmv.f.s\n.purgem vfmv.s.f\n.purgem vmv.s.x\n",
            ".purgem th.vext.x.v\n.purgem vfcvt.xu.f.v\n.purgem vfcvt.x.f.v\n",
            ".purgem vfcvt.f.xu.v\n.purgem vfcvt.f.x.v\n.purgem vfwcvt.f.f.v\n",
            ".purgem vfncvt.f.f.w\n.purgem vid.v\n.purgem vfirst.m\n.purgem vcpop.m\n",
            ".purgem viota.m\n.purgem vmsbf.m\n.purgem vmsof.m\n.purgem vmsif.m\n",
            ".purgem vfsqrt.v\n.purgem vfclass.v\n",
            ".purgem vwmaccsu.vv\n.purgem vwmaccsu.vx\n.purgem vwmaccus.vx\n",
            ".irp name, ", xtv_refused!(), "\n.purgem \\name\n.endr\n",
        )
    };
}

/// RVV 1.0 mnemonics with no XTheadVector twin (or a twin that means something else: the
/// averaging adds are OPIVV with other rounding in 0.7.1; 0.7.1's indexed accesses take SEW-wide
/// indices and the element width from the instruction), refused
/// inside [`xtv_asm!`].
#[rustfmt::skip]
#[allow(unused_macros)]
macro_rules! xtv_refused {
    () => {
        concat!(
            "vsetivli, vmv.x.s, vzext.vf2, vzext.vf4, vzext.vf8, vsext.vf2, vsext.vf4, vsext.vf8, ",
            "vlm.v, vsm.v, vmv1r.v, vmv2r.v, vmv4r.v, vmv8r.v, vs1r.v, vs2r.v, vs4r.v, vs8r.v, ",
            "vl1re8.v, vl2re8.v, vl4re8.v, vl8re8.v, vl1re16.v, vl2re16.v, vl4re16.v, vl8re16.v, ",
            "vl1re32.v, vl2re32.v, vl4re32.v, vl8re32.v, vfcvt.rtz.x.f.v, vfcvt.rtz.xu.f.v, ",
            "vfncvt.rod.f.f.w, vfwcvt.rtz.x.f.v, vfncvt.rtz.x.f.w, vfslide1up.vf, vfslide1down.vf, ",
            "vrgatherei16.vv, vfrsqrt7.v, vfrec7.v, vaadd.vv, vaadd.vx, vaaddu.vv, vaaddu.vx, ",
            "vasub.vv, vasub.vx, vasubu.vv, vasubu.vx, vluxei8.v, vluxei16.v, vluxei32.v, ",
            "vluxei64.v, vloxei8.v, vloxei16.v, vloxei32.v, vloxei64.v, vsuxei8.v, vsuxei16.v, ",
            "vsuxei32.v, vsuxei64.v, vsoxei8.v, vsoxei16.v, vsoxei32.v, vsoxei64.v",
        )
    };
}

/// `asm!` for XTheadVector: `rvv_asm!` (the assembler's `+v`, every vector register clobbered)
/// with the encoding layer's macros around the template ([`xtv_enter!`], [`xtv_leave!`]). Usage
/// as `rvv_asm!`: `xtv_asm!([template pieces, each followed by a comma], [operands...],
/// [options...])`.
#[rustfmt::skip]
#[allow(unused_macros)]
macro_rules! xtv_asm {
    ([$($tpl:tt)*], [$($ops:tt)*], [$($opt:tt)*]) => {
        $crate::quant::rvv::rvv_asm!(
            [xtv_enter!(), $($tpl)* xtv_leave!(),],
            [$($ops)*],
            [$($opt)*]
        )
    };
}
#[allow(unused_imports)]
pub(crate) use {xtv_asm, xtv_enter, xtv_leave, xtv_refused};

#[cfg(test)]
pub(crate) mod tests;
