//! Activation blocks and their quantization (the right-hand side of every dot product).
//!
//! Layouts follow llama.cpp's `block_q8_0`, `block_q8_1` and `block_q8_K`, except that the f16 scales
//! are kept as the f32 value of the rounded f16 (same numbers, no conversion in the inner loop).
//! Rounding is to nearest, ties to even, as ggml's `nearest_int` and NEON's `vcvtnq_s32_f32` do,
//! so every target quantizes identically.

use super::block::{ActFormat, QK32, QK_K};
use crate::parallel::{par_chunks, Parallel, SingleThread, MAX_WORKERS};
use alloc::vec::Vec;
use half::{bf16, f16};

/// 32 int8 activations with one scale (pairs with Q4_0, Q5_0, Q8_0 weights).
///
/// Every `qs` lies in -127..=127, never -128: the quantizers scale the block's largest magnitude
/// to 127 (as ggml's do, whose AVX2 kernels rely on it too). The NEON Q8_0 kernels rely on it:
/// they add two products of an int8 weight and an activation in one i16 lane, and 2 · 128 · 127
/// fits where 2 · 128 · 128 would not. The same holds for [`BlockQ8_1`].
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct BlockQ8_0 {
    /// Scale, rounded through f16.
    pub d: f32,
    pub qs: [i8; QK32],
}

/// 32 int8 activations with a scale and `s = d * sum(qs)` (for the weight types with a min).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct BlockQ8_1 {
    /// Scale, rounded through f16.
    pub d: f32,
    /// `d * sum(qs)`, rounded through f16.
    pub s: f32,
    pub qs: [i8; QK32],
}

/// 256 int8 activations with an f32 scale and sums of each 16 (pairs with K-quant weights).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

impl Default for BlockQ8_0 {
    fn default() -> Self {
        Self {
            d: 0.0,
            qs: [0; QK32],
        }
    }
}
impl Default for BlockQ8_1 {
    fn default() -> Self {
        Self {
            d: 0.0,
            s: 0.0,
            qs: [0; QK32],
        }
    }
}
impl Default for BlockQ8K {
    fn default() -> Self {
        Self {
            d: 0.0,
            qs: [0; QK_K],
            bsums: [0; QK_K / 16],
        }
    }
}

/// The 32-element activation blocks (Q8_0, Q8_1) as the kernels read them: the values, the
/// scale, and the scaled sum (Q8_1; 0 for Q8_0, whose weights have no min to pair it with).
pub trait Act32 {
    /// Where `qs` lies in the block, in bytes.
    const QS_AT: usize;
    /// Where `d` lies in the block, in bytes (Q8_1's `s` follows it: see below).
    const D_AT: usize;
    fn qs(&self) -> &[i8; QK32];
    fn d(&self) -> f32;
    fn s(&self) -> f32;
}

/// [`Act32`] for the block type `$block`, whose scaled sum is `$s` (of the block `$b`).
macro_rules! act32 {
    ($block:ty, |$b:pat_param| $s:expr) => {
        impl Act32 for $block {
            const QS_AT: usize = core::mem::offset_of!($block, qs);
            const D_AT: usize = core::mem::offset_of!($block, d);
            #[inline(always)]
            fn qs(&self) -> &[i8; QK32] {
                &self.qs
            }
            #[inline(always)]
            fn d(&self) -> f32 {
                self.d
            }
            #[inline(always)]
            fn s(&self) -> f32 {
                let $b = self;
                $s
            }
        }
    };
}
act32!(BlockQ8_0, |_| 0.0);
act32!(BlockQ8_1, |b| b.s);
// Q8_1's `d` and `s` are one 8-byte field pair (the NEON kernels load both at once).
const _: () =
    assert!(core::mem::offset_of!(BlockQ8_1, s) == core::mem::offset_of!(BlockQ8_1, d) + 4);

/// Round to the nearest integer, ties to even (ggml's `nearest_int`); valid for |x| < 2^22.
#[inline(always)]
pub fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

#[inline(always)]
fn f16_round(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Quantize `x` (length a multiple of 32) to Q8_0 blocks.
pub fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(libm::fabsf(*v)));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f16_round(d);
        for (q, v) in y.qs.iter_mut().zip(xb) {
            *q = nearest_int(v * id) as i8;
        }
    }
}

/// Quantize `x` (length a multiple of 32) to Q8_1 blocks.
pub fn quantize_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(libm::fabsf(*v)));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = f16_round(d);
        let mut sum = 0i32;
        for (q, v) in y.qs.iter_mut().zip(xb) {
            *q = nearest_int(v * id) as i8;
            sum += *q as i32;
        }
        y.s = f16_round(sum as f32 * d);
    }
}

/// Quantize `x` (length a multiple of 256) to Q8_K blocks.
pub fn quantize_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in xb {
            let av = libm::fabsf(v);
            if av > amax {
                amax = av;
                max = v;
            }
        }
        if amax == 0.0 {
            *y = BlockQ8K::default();
            continue;
        }
        let iscale = -127.0 / max;
        for (q, v) in y.qs.iter_mut().zip(xb) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, qs) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = qs.iter().map(|&q| q as i16).sum();
        }
        y.d = 1.0 / iscale;
    }
}

/// The three activation quantizers of a kernel set: Q8_0, Q8_1, Q8_K.
pub type Quantizers = (
    fn(&[f32], &mut [BlockQ8_0]),
    fn(&[f32], &mut [BlockQ8_1]),
    fn(&[f32], &mut [BlockQ8K]),
);

/// Activations in the format a weight type's dot product takes; borrowed from an [`ActBuf`].
#[derive(Debug, Clone, Copy)]
pub enum Acts<'a> {
    F32(&'a [f32]),
    F16(&'a [u16]),
    Bf16(&'a [u16]),
    Q8_0(&'a [BlockQ8_0]),
    Q8_1(&'a [BlockQ8_1]),
    Q8K(&'a [BlockQ8K]),
}

impl Acts<'_> {
    pub fn format(&self) -> ActFormat {
        match self {
            Acts::F32(_) => ActFormat::F32,
            Acts::F16(_) => ActFormat::F16,
            Acts::Bf16(_) => ActFormat::Bf16,
            Acts::Q8_0(_) => ActFormat::Q8_0,
            Acts::Q8_1(_) => ActFormat::Q8_1,
            Acts::Q8K(_) => ActFormat::Q8K,
        }
    }

    /// Number of activation values held.
    pub fn len(&self) -> usize {
        match self {
            Acts::F32(v) => v.len(),
            Acts::F16(v) | Acts::Bf16(v) => v.len(),
            Acts::Q8_0(v) => v.len() * QK32,
            Acts::Q8_1(v) => v.len() * QK32,
            Acts::Q8K(v) => v.len() * QK_K,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A reusable buffer for quantized activations: sized once for the longest vector, then quantizing
/// into it never allocates.
#[derive(Debug, Default)]
pub struct ActBuf {
    format: Option<ActFormat>,
    n: usize,
    f32s: Vec<f32>,
    halves: Vec<u16>,
    q8_0: Vec<BlockQ8_0>,
    q8_1: Vec<BlockQ8_1>,
    q8k: Vec<BlockQ8K>,
}

/// Why activations could not be quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActLenError {
    pub format: ActFormat,
    pub len: usize,
}

impl ActBuf {
    /// A buffer able to hold up to `max_n` activations in any format.
    pub fn with_capacity(max_n: usize) -> Self {
        Self {
            format: None,
            n: 0,
            f32s: Vec::with_capacity(max_n),
            halves: Vec::with_capacity(max_n),
            q8_0: Vec::with_capacity(max_n / QK32),
            q8_1: Vec::with_capacity(max_n / QK32),
            q8k: Vec::with_capacity(max_n / QK_K),
        }
    }

    /// A buffer able to hold up to `max_n` activations in `format` only (quantizing to another
    /// format allocates).
    pub fn for_format(format: ActFormat, max_n: usize) -> Result<Self, crate::oom::OutOfMemory> {
        use crate::oom::reserve;
        let mut b = Self::default();
        let what = "activation buffer";
        match format {
            ActFormat::F32 => reserve(&mut b.f32s, max_n, what)?,
            ActFormat::F16 | ActFormat::Bf16 => reserve(&mut b.halves, max_n, what)?,
            ActFormat::Q8_0 => reserve(&mut b.q8_0, max_n / QK32, what)?,
            ActFormat::Q8_1 => reserve(&mut b.q8_1, max_n / QK32, what)?,
            ActFormat::Q8K => reserve(&mut b.q8k, max_n / QK_K, what)?,
        }
        Ok(b)
    }

    /// Bytes [`ActBuf::for_format`] reserves for `max_n` activations in `format`.
    pub fn bytes_for(format: ActFormat, max_n: usize) -> usize {
        match format {
            ActFormat::F32 => max_n * 4,
            ActFormat::F16 | ActFormat::Bf16 => max_n * 2,
            ActFormat::Q8_0 => max_n / QK32 * core::mem::size_of::<BlockQ8_0>(),
            ActFormat::Q8_1 => max_n / QK32 * core::mem::size_of::<BlockQ8_1>(),
            ActFormat::Q8K => max_n / QK_K * core::mem::size_of::<BlockQ8K>(),
        }
    }

    /// Bytes reserved by this buffer.
    pub fn reserved_bytes(&self) -> usize {
        self.f32s.capacity() * 4
            + self.halves.capacity() * 2
            + self.q8_0.capacity() * core::mem::size_of::<BlockQ8_0>()
            + self.q8_1.capacity() * core::mem::size_of::<BlockQ8_1>()
            + self.q8k.capacity() * core::mem::size_of::<BlockQ8K>()
    }

    /// Quantize `x` into `format` with the scalar quantizers. The length must be a multiple of the
    /// format's block size.
    pub fn quantize(&mut self, format: ActFormat, x: &[f32]) -> Result<(), ActLenError> {
        self.quantize_with(
            format,
            x,
            (quantize_q8_0, quantize_q8_1, quantize_q8_k),
            &SingleThread,
        )
    }

    /// [`ActBuf::quantize`] with the given Q8_0, Q8_1 and Q8_K quantizers (SIMD twins that produce
    /// the same bytes, from a kernel set), the blocks split across `pool`'s workers (each block
    /// is quantized on its own, so the bytes are the same).
    pub fn quantize_with<P: Parallel + ?Sized>(
        &mut self,
        format: ActFormat,
        x: &[f32],
        q: Quantizers,
        pool: &P,
    ) -> Result<(), ActLenError> {
        let be = format.block_elems();
        if !x.len().is_multiple_of(be) {
            return Err(ActLenError {
                format,
                len: x.len(),
            });
        }
        let nb = x.len() / be;
        match format {
            ActFormat::F32 => {
                self.f32s.clear();
                self.f32s.extend_from_slice(x);
            }
            ActFormat::F16 => {
                self.halves.clear();
                self.halves
                    .extend(x.iter().map(|&v| f16::from_f32(v).to_bits()));
            }
            ActFormat::Bf16 => {
                self.halves.clear();
                self.halves
                    .extend(x.iter().map(|&v| bf16::from_f32(v).to_bits()));
            }
            ActFormat::Q8_0 => {
                self.q8_0.resize(nb, BlockQ8_0::default());
                par_blocks(pool, x, &mut self.q8_0, q.0);
            }
            ActFormat::Q8_1 => {
                self.q8_1.resize(nb, BlockQ8_1::default());
                par_blocks(pool, x, &mut self.q8_1, q.1);
            }
            ActFormat::Q8K => {
                self.q8k.resize(nb, BlockQ8K::default());
                par_blocks(pool, x, &mut self.q8k, q.2);
            }
        }
        self.format = Some(format);
        self.n = x.len();
        Ok(())
    }

    /// The activations last quantized, or `None` before the first [`ActBuf::quantize`].
    pub fn acts(&self) -> Option<Acts<'_>> {
        Some(match self.format? {
            ActFormat::F32 => Acts::F32(&self.f32s),
            ActFormat::F16 => Acts::F16(&self.halves),
            ActFormat::Bf16 => Acts::Bf16(&self.halves),
            ActFormat::Q8_0 => Acts::Q8_0(&self.q8_0),
            ActFormat::Q8_1 => Acts::Q8_1(&self.q8_1),
            ActFormat::Q8K => Acts::Q8K(&self.q8k),
        })
    }
}

/// `quantize(x, out)` with `out`'s blocks (and their values of `x`) split across the workers;
/// inputs shorter than [`PAR_BLOCKS_MIN`] values stay on one core.
fn par_blocks<P: Parallel + ?Sized, B: Send>(
    pool: &P,
    x: &[f32],
    out: &mut [B],
    quantize: fn(&[f32], &mut [B]),
) {
    let per = x.len().checked_div(out.len()).unwrap_or(0);
    if x.len() < PAR_BLOCKS_MIN || per == 0 {
        quantize(x, out);
        return;
    }
    let mut scratch = [(); MAX_WORKERS];
    let _ = par_chunks(pool, out, 1, &mut scratch, |r, part, _| {
        quantize(&x[r.start * per..r.end * per], part);
        Ok::<(), ()>(())
    });
}

/// Fewest values [`par_blocks`] splits (below, a job costs more than it saves).
const PAR_BLOCKS_MIN: usize = 512;
