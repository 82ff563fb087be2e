//! Float dot products (F32 / F16 / BF16 weights · activations of the same type) and the attention
//! of one head over the f16 KV cache.
//!
//! The scalar twins keep four partial sums, `acc[i & 3] += w[i] * x[i]`, combined as
//! `(acc[0] + acc[1]) + (acc[2] + acc[3])`. Here partial sum `k` is computed on its own: strided
//! loads (stride 4 elements) fetch elements `k, k + 4, k + 8, ...`, one vector multiplication forms
//! their products (rounded as the scalar `w * x`), and `vfredosum` adds them to the partial sum one
//! by one, in element order: the scalar additions exactly. Elements are whole values of their type,
//! so the weights must be naturally aligned (GGUF tensor data is); an odd address falls back to the
//! scalar kernel, which computes the same bits.
//!
//! The attention's `q·k` keeps eight partial sums `acc[i & 7]` (see [`crate::ops::dot_f32_f16`]):
//! there one 8-lane vector is the eight sums, 32 elements converted and multiplied per step and
//! added as four 8-lane chunks in element order; the updates of the output are elementwise, one
//! vector instruction per scalar operation.
//!
//! Shared with the XTheadVector set (RVV 0.7.1): [`float_kernels!`] writes the kernels into the
//! invoking module with its `asm!`.

use super::rvv_asm as vec_asm;
use super::{f16_bits_to_f32, BIG, INF, K112, MAG};
use crate::quant::scalar;

/// Elements in partial sum `k` of `n` (elements `k, k + 4, ...` below `n`).
pub(crate) fn lane_len(n: usize, k: usize) -> usize {
    if k < n {
        (n - k).div_ceil(4)
    } else {
        0
    }
}

/// A float dot product `$name(w, x)` (`x` of `$elem`, `w` the same elements as bytes) with the
/// scalar twin's four partial sums, each computed on its own (see the module docs): `$prod` is
/// the `asm!` text that sets vl (`{vl}`, from the `{n}` elements left) and leaves the products of
/// the next vl elements at `{w}` and `{x}` (stride `{st}` bytes) as e32 m8 in `$p`; `$extra` are
/// the operands it needs besides those. A `w` not aligned to `$elem` goes to `$scalar`.
#[rustfmt::skip]
macro_rules! strided_dot {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $scalar:path, $p:literal, [$($prod:tt)*]
     $(, $($extra:tt)+)?) => {
        $(#[$doc])*
        pub fn $name(w: &[u8], x: &[$elem]) -> f32 {
            const SIZE: usize = core::mem::size_of::<$elem>();
            if !w.as_ptr().cast::<$elem>().is_aligned() {
                return $scalar(w, x);
            }
            let n = (w.len() / SIZE).min(x.len());
            let mut acc = [0.0f32; 4];
            for (k, s) in acc.iter_mut().enumerate() {
                let len = lane_len(n, k);
                if len == 0 {
                    continue;
                }
                // SAFETY: reads elements k, k + 4, .., k + 4 (len - 1) < n of `w` (aligned to its
                // element type, SIZE bytes each) and `x`; only vector registers, the named
                // scalars and vl/vtype change. Reached only on harts with the set's vector unit.
                unsafe {
                    vec_asm!(
                        [
                            "vsetvli {t}, zero, e32, m1, ta, ma",
                            "vfmv.s.f v1, {s}",
                            "2:",
                            $($prod)*
                            concat!("vfredosum.vs v1, ", $p, ", v1"),
                            "mul {t}, {vl}, {st}",
                            "add {w}, {w}, {t}",
                            "add {x}, {x}, {t}",
                            "sub {n}, {n}, {vl}",
                            "bnez {n}, 2b",
                            "vfmv.f.s {s}, v1",
                        ],
                        [
                            w = inout(reg) w.as_ptr().wrapping_add(SIZE * k) => _,
                            x = inout(reg) x.as_ptr().wrapping_add(k) => _,
                            n = inout(reg) len => _,
                            st = in(reg) 4 * SIZE,
                            vl = out(reg) _,
                            t = out(reg) _,
                            s = inout(freg) *s,
                            $($($extra)+ ,)?
                        ],
                        [nostack, readonly]
                    );
                }
            }
            (acc[0] + acc[1]) + (acc[2] + acc[3])
        }
    };
}
pub(crate) use strided_dot;

/// The float kernels, written into the invoking module (`vec_dot_f32_f32`, `vec_dot_f16_f16`,
/// `vec_dot_bf16_bf16`, `dot_f32_f16`, `attend_head`), `$vlen128` saying whether VLEN is 128 (for
/// `dot_f32_f16`'s 32-element steps): the module has `vec_asm!` (its set's `asm!`), `strided_dot!`,
/// `f16_bits_to_f32!` with `K112`, `MAG`, `BIG`, `INF`, `lane_len` and `scalar` in scope, and runs
/// only on harts with the set's vector unit. The text is RVV 0.7.1 as well (the XTheadVector set's
/// encoding layer re-encodes `vfmv.f.s` / `vfmv.s.f`): vl from registers, every load and store at
/// its element's width (0.7.1's `vlse16.v` at e16 is `vlshu.v`), no `tu` or `vzext`, widening
/// destinations apart from their sources, the f16 masks made and used under one vtype.
macro_rules! float_kernels {
    ($vlen128:expr) => {
        strided_dot!(
            /// F32 weights · f32 activations (twin of `scalar::vec_dot_f32_f32`).
            vec_dot_f32_f32, f32, scalar::vec_dot_f32_f32, "v8",
            [
                "vsetvli {vl}, {n}, e32, m8, ta, ma",
                "vlse32.v v8, ({w}), {st}",
                "vlse32.v v16, ({x}), {st}",
                "vfmul.vv v8, v8, v16",
            ]
        );

        strided_dot!(
            /// F16 weights · f16 activations (twin of `scalar::vec_dot_f16_f16`).
            vec_dot_f16_f16, u16, scalar::vec_dot_f16_f16, "v16",
            [
                "vsetvli {vl}, {n}, e16, m4, ta, ma",
                "vlse16.v v16, ({w}), {st}",
                "vwmulu.vx v8, v16, {c8192}",
                "vsetvli zero, {vl}, e32, m8, ta, mu",
                // weights (f32) in v24..v31
                f16_bits_to_f32!("v8", "v24"),
                "vsetvli zero, {vl}, e16, m4, ta, ma",
                "vlse16.v v16, ({x}), {st}",
                "vwmulu.vx v8, v16, {c8192}",
                "vsetvli zero, {vl}, e32, m8, ta, mu",
                // activations (f32) in v16..v23
                f16_bits_to_f32!("v8", "v16"),
                "vfmul.vv v16, v24, v16",
            ],
            c8192 = in(reg) 8192usize,
            mag = in(reg) MAG,
            big = in(reg) BIG,
            inf = in(reg) INF,
            k112 = in(freg) K112
        );

        strided_dot!(
            /// BF16 weights · bf16 activations (twin of `scalar::vec_dot_bf16_bf16`). bf16 → f32 is
            /// the 16 bits moved up (as `half` does for every non-NaN value; NaN stays NaN).
            vec_dot_bf16_bf16, u16, scalar::vec_dot_bf16_bf16, "v8",
            [
                "vsetvli {vl}, {n}, e16, m4, ta, ma",
                "vlse16.v v16, ({w}), {st}",
                "vlse16.v v20, ({x}), {st}",
                // zero-extended to e32 (a widening add of x0: 0.7.1 has no vzext)
                "vwaddu.vx v8, v16, zero",
                "vwaddu.vx v24, v20, zero",
                "vsetvli zero, {vl}, e32, m8, ta, ma",
                "vsll.vi v8, v8, 16",
                "vsll.vi v24, v24, 16",
                "vfmul.vv v8, v8, v24",
            ]
        );

        /// `q · k` (k as f16 bits) with the eight partial sums of [`crate::ops::dot_f32_f16`]: lane
        /// `j` of an 8-lane accumulator is `acc[j]`. Where VLEN is 128 (`$vlen128`), thirty-two
        /// elements per step while 32 are left (converted and multiplied as one 32-lane group, e32
        /// m8, whose four 8-lane chunks, the register pairs from v24, are added to the accumulator
        /// in element order); then eight per step; the last `n % 8` (none for the models' head
        /// widths) go to their partial sums in Rust, as the scalar code adds them.
        pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
            let n = q.len().min(k.len());
            let vn = n & !7;
            // Steps of 32 while this many are left (never where VLEN is not 128).
            let wide = if $vlen128 { 32 } else { usize::MAX };
            let mut acc = [0.0f32; 8];
            if vn > 0 {
                // SAFETY: reads elements 0..vn of `q` and `k` (steps of 32 while 32 are left, then
                // of 8; vn ≤ both lengths, a multiple of 8) and writes the 8 floats of `acc`; only
                // vector registers, the named scalars and vl/vtype change. Reached only on harts
                // with the set's vector unit (VLEN ≥ 128: 32 lanes at e32 m8, 8 at e32 m2).
                unsafe {
                    vec_asm!(
                        [
                            "vsetvli zero, {c8}, e32, m2, ta, ma",
                            "vmv.v.i v4, 0",
                            "bltu {n}, {wide}, 3f",
                            "2:",
                            "vsetvli zero, {c32}, e16, m4, ta, ma",
                            "vle16.v v16, ({k})",
                            "addi {k}, {k}, 64",
                            "vwmulu.vx v8, v16, {c8192}",
                            "vsetvli zero, {c32}, e32, m8, ta, mu",
                            f16_bits_to_f32!("v8", "v24"),
                            "vle32.v v16, ({q})",
                            "addi {q}, {q}, 128",
                            "addi {n}, {n}, -32",
                            "vfmul.vv v24, v16, v24",
                            "vsetvli zero, {c8}, e32, m2, ta, ma",
                            "vfadd.vv v4, v4, v24",
                            "vfadd.vv v4, v4, v26",
                            "vfadd.vv v4, v4, v28",
                            "vfadd.vv v4, v4, v30",
                            "bgeu {n}, {wide}, 2b",
                            "3:",
                            "beqz {n}, 5f",
                            "4:",
                            "vsetvli zero, {c8}, e16, m1, ta, ma",
                            "vle16.v v1, ({k})",
                            "addi {k}, {k}, 16",
                            "vwmulu.vx v8, v1, {c8192}",
                            "vsetvli zero, {c8}, e32, m2, ta, mu",
                            f16_bits_to_f32!("v8", "v12"),
                            "vle32.v v16, ({q})",
                            "addi {q}, {q}, 32",
                            "addi {n}, {n}, -8",
                            "vfmul.vv v12, v16, v12",
                            "vfadd.vv v4, v4, v12",
                            "bnez {n}, 4b",
                            "5:",
                            "vsetvli zero, {c8}, e32, m2, ta, ma",
                            "vse32.v v4, ({acc})",
                        ],
                        [
                            acc = in(reg) acc.as_mut_ptr(),
                            c8 = in(reg) 8usize,
                            q = inout(reg) q.as_ptr() => _,
                            k = inout(reg) k.as_ptr() => _,
                            n = inout(reg) vn => _,
                            c32 = in(reg) 32usize,
                            wide = in(reg) wide,
                            // f16_bits_to_f32!'s constants
                            c8192 = in(reg) 8192usize, mag = in(reg) MAG, big = in(reg) BIG,
                            inf = in(reg) INF, k112 = in(freg) K112,
                        ],
                        [nostack]
                    );
                }
            }
            crate::ops::dot_f32_f16_from(acc, &q[vn..n], &k[vn..n])
        }

        /// `out[i] = out[i] · r + v[i]` (`ADD` false) or `out[i] += r · v[i]` (`ADD` true), `v` as
        /// f16 bits: the two update steps of the attention, each a separate multiply and add as in
        /// the scalar code.
        fn update<const ADD: bool>(out: &mut [f32], r: f32, v: &[u16]) {
            let n = out.len().min(v.len());
            if n == 0 {
                return;
            }
            // SAFETY: reads elements 0..n of `v` and reads and writes elements 0..n of `out` (vl ≤
            // elements left in every step); only vector registers, the named scalars and vl/vtype
            // change. Reached only on harts with the set's vector unit.
            unsafe {
                vec_asm!(
                    [
                        "2:",
                        "vsetvli {vl}, {n}, e16, m4, ta, ma",
                        "vle16.v v16, ({v})",
                        "vwmulu.vx v8, v16, {c8192}",
                        "vsetvli zero, {vl}, e32, m8, ta, mu",
                        f16_bits_to_f32!("v8", "v16"),
                        "vle32.v v24, ({o})",
                        "bnez {add}, 3f",
                        // out · r + v
                        "vfmul.vf v24, v24, {r}",
                        "vfadd.vv v24, v24, v16",
                        "j 4f",
                        "3:",
                        // out + r · v
                        "vfmul.vf v16, v16, {r}",
                        "vfadd.vv v24, v24, v16",
                        "4:",
                        "vse32.v v24, ({o})",
                        "slli {t}, {vl}, 2",
                        "add {o}, {o}, {t}",
                        "slli {t}, {vl}, 1",
                        "add {v}, {v}, {t}",
                        "sub {n}, {n}, {vl}",
                        "bnez {n}, 2b",
                    ],
                    [
                        o = inout(reg) out.as_mut_ptr() => _,
                        v = inout(reg) v.as_ptr() => _,
                        n = inout(reg) n => _,
                        add = in(reg) ADD as usize,
                        vl = out(reg) _,
                        t = out(reg) _,
                        r = in(freg) r,
                        // f16_bits_to_f32!'s constants
                        c8192 = in(reg) 8192usize, mag = in(reg) MAG, big = in(reg) BIG,
                        inf = in(reg) INF, k112 = in(freg) K112,
                    ],
                    [nostack]
                );
            }
        }

        /// One query head over the cached positions of `head` (twin of
        /// [`crate::ops::attend_head`]): its control flow (`ops::Head::attend`), with the `q·k`
        /// product and the two update steps in RVV.
        pub fn attend_head(out: &mut [f32], q: &[f32], head: &crate::ops::Head<'_>) {
            head.attend(out, q, dot_f32_f16, update::<false>, update::<true>);
        }
    };
}
pub(crate) use float_kernels;

float_kernels!(super::vlenb() == 16);
