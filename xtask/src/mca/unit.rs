//! The unit-stride alternative to the RVV Q4_1 · Q8_1 pass, as assembly text for llvm-mca (it is
//! not a kernel: nothing runs it). One block per iteration, as llama.cpp's RVV loop: 16 weight
//! bytes with one `vle8.v`, nibbles with `vand`/`vsrl`, the 32 activation bytes with two `vle8.v`,
//! `vwmul`/`vwmacc` into e16 and `vwredsum` to one e32; then the segment kernel's float expression
//! `(d · y.d) · sumi + m · y.s` in scalar code. Registers: a0 weights (20-byte blocks), a1
//! activations (40-byte blocks), a2 blocks left, fa0 the running sum, v0 zero (e32), t/ft scratch.

/// The integer phase of one block: `sumi` in t2.
const INTEGER: &str = "
vsetivli zero, 16, e8, m1, ta, ma
addi t0, a0, 4
vle8.v v8, (t0)
addi t1, a1, 8
vle8.v v9, (t1)
addi t1, a1, 24
vle8.v v10, (t1)
vand.vi v11, v8, 15
vsrl.vi v12, v8, 4
vwmul.vv v2, v11, v9
vwmacc.vv v2, v12, v10
vsetivli zero, 16, e16, m2, ta, ma
vwredsum.vs v1, v2, v0
vsetivli zero, 1, e32, m1, ta, ma
vmv.x.s t2, v1
";

/// d, m to f32 in ft0, ft1 with Zfhmin (`flh`, `fcvt.s.h`).
const SCALES_ZFH: &str = "
flh ft0, 0(a0)
flh ft1, 2(a0)
fcvt.s.h ft0, ft0
fcvt.s.h ft1, ft1
";

/// One f16 at `$off(a0)` to f32 in `$f` with base V's integer operations, as the kernels'
/// `f16_bits_to_f32!` (t3..t6 scratch; s2 = MAG, s3 = BIG, s4 = INF, fs0 = 2^112).
fn scale_base(off: u8, f: &str) -> String {
    format!(
        "
lhu t3, {off}(a0)
slli t3, t3, 13
and t4, t3, s2
fmv.w.x {f}, t4
fmul.s {f}, {f}, fs0
sltu t5, s3, t4
neg t5, t5
and t5, t5, s4
fmv.x.w t6, {f}
or t6, t6, t5
slli t3, t3, 3
fmv.w.x {f}, t6
fmv.w.x ft5, t3
fsgnj.s {f}, {f}, ft5
"
    )
}

/// `sumf += (d · y.d) · sumi + m · y.s`, next block.
const FLOAT: &str = "
flw ft2, 0(a1)
flw ft3, 4(a1)
fcvt.s.w ft4, t2
fmul.s ft0, ft0, ft2
fmul.s ft0, ft0, ft4
fmul.s ft1, ft1, ft3
fadd.s ft0, ft0, ft1
fadd.s fa0, fa0, ft0
addi a0, a0, 20
addi a1, a1, 40
addi a2, a2, -1
bnez a2, .Lblock
";

/// The loop body (`zfh`: scales with Zfhmin, else with integer operations as base V needs).
pub fn q4_1_unit_stride(zfh: bool) -> String {
    let scales = if zfh {
        SCALES_ZFH.to_string()
    } else {
        scale_base(0, "ft0") + &scale_base(2, "ft1")
    };
    format!(".Lblock:{INTEGER}{scales}{FLOAT}")
}
