//! The board's check of a kernel set against the scalar one (`selftest = full`): every weight
//! type's kernels on one row, four rows and a batch of columns, the activation quantizers, the
//! query-key dot product, the attention of one head (a plain cache, a ring that wraps, and a tree
//! pass's gathered row) and the f16 stores, each result compared bit for bit with the scalar
//! set's. Linux checks its crypto and RAID SIMD code against the generic code at boot the same
//! way; the harness in `kernel_tests` does it (far more widely) on the PC and under qemu-user,
//! this does it on the CPU that runs the model, in milliseconds.
//!
//! The inputs come from the same generators as the harness (`quant::gen`), from a fixed seed:
//! extreme scales, rounding ties, zeros, huge and tiny values.

use super::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use super::gen::{self, Fill, Rng};
use super::types::{TypeInfo, TYPES};
use super::{ActFormat, Acts, ActsBatch, Kernels};
use crate::ops::Head;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// The first result of a set that differs from the scalar set's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// The set checked.
    pub set: &'static str,
    /// What was computed: a weight type and a case (`"Q4_K four rows"`), or a float operation.
    pub what: &'static str,
    pub case: &'static str,
    /// Which output.
    pub index: usize,
    /// Bits of the set's result and of the scalar one.
    pub got: u32,
    pub want: u32,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel set {}: {} {}, output {}: {:#010x} where the scalar set gives {:#010x}",
            self.set, self.what, self.case, self.index, self.got, self.want
        )
    }
}

/// Check `k` against [`Kernels::SCALAR`]: the number of results compared, or the first that
/// differs. (A kernel error, such as a length the set refuses, is a mismatch too: the scalar set
/// accepted the same call.)
pub fn check(k: &Kernels) -> Result<u32, Mismatch> {
    let mut c = Checker {
        k,
        rng: Rng(0x5e1f_7e57),
        compared: 0,
    };
    for info in &TYPES {
        c.weight_type(info)?;
    }
    c.quantizers()?;
    c.attention()?;
    c.stores()?;
    Ok(c.compared)
}

/// A checksum of work every core can do alike: `k`'s kernels on every weight type's generated
/// rows (one row, four and three), the bits of every result folded in (FNV-1a). Cores that
/// compute right give the same value; one that does not (a bad core, a clock too high for its
/// voltage) gives another.
pub fn checksum(k: &Kernels) -> u32 {
    let mut c = Checker {
        k,
        rng: Rng(0xc0_7e5),
        compared: 0,
    };
    let mut h: u32 = 0x811c_9dc5;
    for info in &TYPES {
        let nb = match info.block_elems {
            1 => 67,
            32 => 3,
            _ => 1,
        };
        let n = nb * info.block_elems;
        let w = c.weights(info, ROWS, nb);
        let a = c.activations(info.act, n, nb);
        let mut out = [0f32; ROWS];
        if k.dot_rows(info.ty, n, &w, &a.acts(), &mut out).is_err() {
            return 0;
        }
        for x in out {
            for b in x.to_bits().to_le_bytes() {
                h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
        }
    }
    h
}

struct Checker<'k> {
    k: &'k Kernels,
    rng: Rng,
    compared: u32,
}

/// Rows of each weight type's matrix: four at a time and a tail of three.
const ROWS: usize = 7;

/// Columns of the batched case.
const COLS: usize = 3;

/// The activations of `cols` columns of `nb` blocks (or `n` floats) in `f`'s format.
enum ActData {
    F32(Vec<f32>),
    Half(Vec<u16>, bool),
    Q8_0(Vec<BlockQ8_0>),
    Q8_1(Vec<BlockQ8_1>),
    Q8K(Vec<BlockQ8K>),
}

impl ActData {
    fn acts(&self) -> Acts<'_> {
        match self {
            ActData::F32(v) => Acts::F32(v),
            ActData::Half(v, false) => Acts::F16(v),
            ActData::Half(v, true) => Acts::Bf16(v),
            ActData::Q8_0(v) => Acts::Q8_0(v),
            ActData::Q8_1(v) => Acts::Q8_1(v),
            ActData::Q8K(v) => Acts::Q8K(v),
        }
    }
}

impl Checker<'_> {
    /// `got` and `want` equal bit for bit, or the mismatch naming them.
    fn same(
        &mut self,
        (what, case): (&'static str, &'static str),
        got: &[f32],
        want: &[f32],
    ) -> Result<(), Mismatch> {
        self.compared += want.len() as u32;
        match got
            .iter()
            .zip(want)
            .position(|(g, w)| g.to_bits() != w.to_bits())
        {
            None if got.len() == want.len() => Ok(()),
            i => {
                let i = i.unwrap_or(got.len().min(want.len()));
                let bits = |v: &[f32]| v.get(i).map_or(u32::MAX, |x| x.to_bits());
                Err(Mismatch {
                    set: self.k.name,
                    what,
                    case,
                    index: i,
                    got: bits(got),
                    want: bits(want),
                })
            }
        }
    }

    /// A failed call of the set's (the scalar set took the same arguments).
    fn refused(&self, what: &'static str, case: &'static str) -> Mismatch {
        Mismatch {
            set: self.k.name,
            what,
            case,
            index: 0,
            got: u32::MAX,
            want: 0,
        }
    }

    fn activations(&mut self, f: ActFormat, n: usize, nb: usize) -> ActData {
        let r = &mut self.rng;
        match f {
            ActFormat::F32 => ActData::F32((0..n).map(|_| r.wide()).collect()),
            ActFormat::F16 => ActData::Half((0..n).map(|_| gen::f16_bits(r)).collect(), false),
            ActFormat::Bf16 => ActData::Half((0..n).map(|_| gen::bf16_bits(r)).collect(), true),
            ActFormat::Q8_0 => ActData::Q8_0(gen::acts_q8_0(r, nb, Fill::Random)),
            ActFormat::Q8_1 => ActData::Q8_1(gen::acts_q8_1(r, nb, Fill::Random)),
            ActFormat::Q8K => ActData::Q8K(gen::acts_q8_k(r, nb, Fill::Random, false)),
        }
    }

    /// Weight rows of `info`'s type: `rows` of `nb` blocks.
    fn weights(&mut self, info: &TypeInfo, rows: usize, nb: usize) -> Vec<u8> {
        let r = &mut self.rng;
        let halves = |bits: fn(&mut Rng) -> u16, r: &mut Rng| {
            let v: Vec<u8> = (0..rows * nb).flat_map(|_| bits(r).to_le_bytes()).collect();
            v
        };
        match info.act {
            ActFormat::F32 => (0..rows * nb)
                .flat_map(|_| r.wide().to_le_bytes())
                .collect(),
            ActFormat::F16 => halves(gen::f16_bits, r),
            ActFormat::Bf16 => halves(gen::bf16_bits, r),
            _ => gen::weights(r, rows * nb, info.block_bytes, info.scales, None),
        }
    }

    /// One row, four rows and a tail, and a batch of columns of `info`'s type.
    fn weight_type(&mut self, info: &TypeInfo) -> Result<(), Mismatch> {
        let (s, k, what) = (Kernels::SCALAR, *self.k, info.name);
        // Three blocks of 32 (one of 256), or 67 floats.
        let nb = match info.block_elems {
            1 => 67,
            32 => 3,
            _ => 1,
        };
        let n = nb * info.block_elems;
        let rb = nb * info.block_bytes;
        let w = self.weights(info, ROWS, nb);
        let a = self.activations(info.act, n * COLS, nb * COLS);
        let all = a.acts();
        let one = ActsBatch {
            cols: COLS,
            acts: all,
        }
        .col(0);
        for (case, rows) in [("one row", 1), ("four rows and three", ROWS)] {
            let (mut got, mut want) = (vec![0f32; rows], vec![0f32; rows]);
            let w = &w[..rows * rb];
            s.dot_rows(info.ty, n, w, &one, &mut want)
                .map_err(|_| self.refused(what, case))?;
            k.dot_rows(info.ty, n, w, &one, &mut got)
                .map_err(|_| self.refused(what, case))?;
            self.same((what, case), &got, &want)?;
        }
        let batch = ActsBatch {
            cols: COLS,
            acts: all,
        };
        let case = "a batch of three columns";
        let (mut got, mut want) = (vec![0f32; ROWS * COLS], vec![0f32; ROWS * COLS]);
        s.dot_rows_batch(info.ty, n, &w, &batch, &mut want)
            .map_err(|_| self.refused(what, case))?;
        k.dot_rows_batch(info.ty, n, &w, &batch, &mut got)
            .map_err(|_| self.refused(what, case))?;
        self.same((what, case), &got, &want)
    }

    /// The three activation quantizers on vectors with every kind of block.
    fn quantizers(&mut self) -> Result<(), Mismatch> {
        let (s, k) = (Kernels::SCALAR, *self.k);
        for x in gen::activation_vectors(&mut self.rng, 512) {
            let (mut a, mut b) = (
                vec![BlockQ8_0::default(); 16],
                vec![BlockQ8_0::default(); 16],
            );
            (s.quantize_q8_0)(&x, &mut a);
            (k.quantize_q8_0)(&x, &mut b);
            let flat = |v: &[BlockQ8_0]| -> Vec<f32> {
                v.iter()
                    .flat_map(|b| core::iter::once(b.d).chain(b.qs.iter().map(|&q| q as f32)))
                    .collect()
            };
            self.same(("the Q8_0 quantizer", "512 values"), &flat(&b), &flat(&a))?;
            let (mut a, mut b) = (
                vec![BlockQ8_1::default(); 16],
                vec![BlockQ8_1::default(); 16],
            );
            (s.quantize_q8_1)(&x, &mut a);
            (k.quantize_q8_1)(&x, &mut b);
            let flat = |v: &[BlockQ8_1]| -> Vec<f32> {
                v.iter()
                    .flat_map(|b| [b.d, b.s].into_iter().chain(b.qs.iter().map(|&q| q as f32)))
                    .collect()
            };
            self.same(("the Q8_1 quantizer", "512 values"), &flat(&b), &flat(&a))?;
            let (mut a, mut b) = (vec![BlockQ8K::default(); 2], vec![BlockQ8K::default(); 2]);
            (s.quantize_q8_k)(&x, &mut a);
            (k.quantize_q8_k)(&x, &mut b);
            let flat = |v: &[BlockQ8K]| -> Vec<f32> {
                v.iter()
                    .flat_map(|b| {
                        core::iter::once(b.d)
                            .chain(b.qs.iter().map(|&q| q as f32))
                            .chain(b.bsums.iter().map(|&q| q as f32))
                    })
                    .collect()
            };
            self.same(("the Q8_K quantizer", "512 values"), &flat(&b), &flat(&a))?;
        }
        Ok(())
    }

    /// q·k and one head's attention: over a cache in order, over a ring that wraps, and over a
    /// tree pass's row (its last positions gathered from slots out of order).
    fn attention(&mut self) -> Result<(), Mismatch> {
        let (s, k) = (Kernels::SCALAR, *self.k);
        let (hd, n) = (64, 33);
        let (stride, offset, ring) = (3 * hd + 5, hd + 2, n + 3);
        let r = &mut self.rng;
        let q: Vec<f32> = (0..hd).map(|_| r.unit()).collect();
        let keys: Vec<u16> = (0..ring * stride).map(|_| gen::f16_bits(r)).collect();
        let values: Vec<u16> = (0..ring * stride).map(|_| gen::f16_bits(r)).collect();
        let key = &keys[offset..offset + hd];
        let (g, w) = ((k.dot_f32_f16)(&q, key), (s.dot_f32_f16)(&q, key));
        self.same(("q·k", "64 wide"), &[g], &[w])?;
        let gathered: Vec<u32> = (0..n / 2 + 1).map(|j| (ring - 1 - j) as u32).collect();
        let plain = Head {
            keys: &keys,
            values: &values,
            n,
            first: 0,
            ring: n,
            stride,
            offset,
            scale: 0.125,
            run: n,
            gathered: &[],
        };
        let wraps = Head {
            first: n + 1,
            ring,
            ..plain
        };
        let tree = Head {
            run: n - gathered.len(),
            gathered: &gathered,
            ..wraps
        };
        for (case, head) in [
            ("a cache in order", plain),
            ("a ring that wraps", wraps),
            ("a tree pass's row", tree),
        ] {
            let (mut got, mut want) = (vec![1f32; hd], vec![0f32; hd]);
            (s.attend_head)(&mut want, &q, &head);
            (k.attend_head)(&mut got, &q, &head);
            self.same(("attention", case), &got, &want)?;
        }
        Ok(())
    }

    /// f32 to f16 stores (the KV cache's), on values of every magnitude.
    fn stores(&mut self) -> Result<(), Mismatch> {
        let (s, k) = (Kernels::SCALAR, *self.k);
        for x in gen::activation_vectors(&mut self.rng, 67) {
            let (mut a, mut b) = (vec![0u16; 67], vec![0u16; 67]);
            (s.to_f16)(&mut a, &x);
            (k.to_f16)(&mut b, &x);
            let f =
                |v: &[u16]| -> Vec<f32> { v.iter().map(|&h| f32::from_bits(h as u32)).collect() };
            self.same(("the f16 store", "67 values"), &f(&b), &f(&a))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    /// Every set this CPU runs (under qemu-user too: the harness's `sets` records the vector
    /// extensions the emulated CPU has, which a `no_std` build cannot detect).
    #[test]
    fn every_set_this_cpu_runs_agrees_with_scalar() {
        let sets = crate::quant::kernel_tests::sets("selfcheck");
        for k in sets.into_iter().chain([Kernels::SCALAR]) {
            let n = check(&k).unwrap_or_else(|m| panic!("{m}"));
            assert!(n > 1000, "{}: {n} results compared", k.name);
            assert_eq!(checksum(&k), checksum(&Kernels::SCALAR), "{}", k.name);
        }
    }

    fn wrong_dot(q: &[f32], k: &[u16]) -> f32 {
        crate::ops::dot_f32_f16(q, k) + 1.0
    }

    fn wrong_store(out: &mut [u16], x: &[f32]) {
        crate::ops::to_f16(out, x);
        if let Some(o) = out.get_mut(5) {
            *o ^= 1;
        }
    }

    #[test]
    fn a_set_that_computes_otherwise_is_named_with_what_differs() {
        let broken = Kernels {
            name: "broken",
            dot_f32_f16: wrong_dot,
            ..Kernels::SCALAR
        };
        let m = check(&broken).unwrap_err();
        assert_eq!((m.set, m.what), ("broken", "q·k"), "{m}");
        let broken = Kernels {
            name: "broken",
            to_f16: wrong_store,
            ..Kernels::SCALAR
        };
        let m = check(&broken).unwrap_err();
        assert_eq!((m.what, m.index), ("the f16 store", 5), "{m}");
        assert!(
            m.to_string()
                .starts_with("kernel set broken: the f16 store 67 values, output 5: "),
            "{m}"
        );
    }
}
