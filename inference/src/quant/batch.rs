//! Matrix × several activation columns (prompt tokens in a batch): every weight block is decoded
//! once and multiplied with each column, so a batch of B tokens reads and decodes the weights once.
//!
//! Bit-identity with the one-row kernels is the contract: output `(r, c)` is, operation for
//! operation, the dot product the one-row kernel computes for row `r` and column `c` (the same
//! exact integer sum per block, then the same float expression, blocks added in the same order).
//! Only the order of the loops changes: block, then column, instead of column, then block.
//!
//! Layouts: the activations of column `c` are blocks `c * nb .. (c + 1) * nb` of one slice (the
//! B vectors quantized in one call: blocks never straddle a column, so quantizing the whole
//! `[B][n]` slice gives each column exactly its own blocks); the output is `[rows][cols]`.
//!
//! This file holds the loop of the scalar twins (the reference every architecture's batched kernel
//! is tested against, and the kernels of sets that have none of their own) and the block decoders
//! they share; `scalar.rs` names each type's batched kernel (`mat_q4_0_q8_0`, ...). They decode a
//! block to exact integers once (weights as int8, the K-quants' sub-block scales and mins as
//! integers), then per column sum products and apply the type's float expression.
#![forbid(unsafe_code)]

use super::act::{Act32, Acts, BlockQ8K};
use super::block::{QK32, QK_K};
use half::{bf16, f16};

/// Most columns one batched kernel call takes (the forward pass's batch is at most this).
pub const MAX_BATCH: usize = 64;

/// `cols` activation vectors of one format, column `c` in the `c`-th equal part of `acts`.
#[derive(Debug, Clone, Copy)]
pub struct ActsBatch<'a> {
    pub cols: usize,
    pub acts: Acts<'a>,
}

impl<'a> ActsBatch<'a> {
    /// One column (a single vector).
    pub fn one(acts: Acts<'a>) -> Self {
        Self { cols: 1, acts }
    }

    /// Values per column (0 when there are no columns).
    pub fn n(&self) -> usize {
        self.acts.len().checked_div(self.cols).unwrap_or(0)
    }

    /// Column `c` (`c < cols`).
    pub fn col(&self, c: usize) -> Acts<'a> {
        fn part<T>(v: &[T], cols: usize, c: usize) -> &[T] {
            let per = v.len() / cols.max(1);
            &v[c * per..(c + 1) * per]
        }
        let k = self.cols;
        match self.acts {
            Acts::F32(v) => Acts::F32(part(v, k, c)),
            Acts::F16(v) => Acts::F16(part(v, k, c)),
            Acts::Bf16(v) => Acts::Bf16(part(v, k, c)),
            Acts::Q8_0(v) => Acts::Q8_0(part(v, k, c)),
            Acts::Q8_1(v) => Acts::Q8_1(part(v, k, c)),
            Acts::Q8K(v) => Acts::Q8K(part(v, k, c)),
        }
    }
}

/// Rows of `rb` bytes (`w` holds whole rows) · `cols` columns of activations (`a`, column-major
/// blocks), into `out` as `[rows][cols]`.
pub type Mat<A> = fn(w: &[u8], rb: usize, a: &[A], cols: usize, out: &mut [f32]);

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

#[inline(always)]
fn dot_i8(w: &[i8], a: &[i8]) -> i32 {
    w.iter().zip(a).map(|(&x, &y)| x as i32 * y as i32).sum()
}

/// The rows and columns of a call: (rows, blocks per column), 0 rows when the shapes disagree.
fn shape(w: &[u8], rb: usize, a_len: usize, cols: usize, out: &[f32]) -> (usize, usize) {
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let nb = a_len.checked_div(cols).unwrap_or(0);
    if rows.checked_mul(cols) != Some(out.len()) {
        return (0, nb);
    }
    (rows, nb)
}

// ---------------------------------------------------------------------------------------------
// The loop order SIMD sets share.

/// A batched kernel from a SIMD set's four-row tile: rows in groups of four, their blocks decoded
/// once per `T` columns (`tile`: four rows · the given columns, lane `r` of result `t` for row `r`
/// and column `t`; `tile1` for one column), columns left over one by one, the rows left over one
/// by one (`one`: the one-row kernel). Output `[rows][cols]`. `T` is what the set's registers
/// hold: accumulators for `T` columns beside the decoded weights.
#[cfg(any(
    all(target_arch = "aarch64", target_feature = "neon"),
    target_arch = "x86_64"
))]
#[inline(always)]
pub(crate) fn by_tiles<A, const T: usize>(
    w: &[u8],
    rb: usize,
    a: &[A],
    cols: usize,
    out: &mut [f32],
    tile: impl Fn(&[u8], [&[A]; T]) -> [[f32; 4]; T],
    tile1: impl Fn(&[u8], &[A]) -> [f32; 4],
    one: impl Fn(&[u8], &[A]) -> f32,
) {
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let nb = a.len().checked_div(cols).unwrap_or(0);
    if rb == 0 || rows * cols != out.len() {
        return;
    }
    let col = |c: usize| &a[c * nb..(c + 1) * nb];
    let mut r = 0;
    while r + 4 <= rows {
        let w4 = &w[r * rb..(r + 4) * rb];
        let mut put = |c: usize, lanes: [f32; 4]| {
            for (k, x) in lanes.into_iter().enumerate() {
                out[(r + k) * cols + c] = x;
            }
        };
        let mut c = 0;
        while c + T <= cols {
            let t = tile(w4, core::array::from_fn(|t| col(c + t)));
            for (k, v) in t.into_iter().enumerate() {
                put(c + k, v);
            }
            c += T;
        }
        for c in c..cols {
            put(c, tile1(w4, col(c)));
        }
        r += 4;
    }
    for r in r..rows {
        for c in 0..cols {
            out[r * cols + c] = one(&w[r * rb..(r + 1) * rb], col(c));
        }
    }
}

/// A batched kernel from a SIMD set's block decoder: each row's blocks (`bytes` each) decoded
/// once (`decode`), then each column's term (`term`) added to its sum in block order. Output
/// `[rows][cols]`; nothing is written when the shapes disagree.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn by_blocks<A, D>(
    w: &[u8],
    rb: usize,
    bytes: usize,
    a: &[A],
    cols: usize,
    out: &mut [f32],
    decode: impl Fn(&[u8]) -> D,
    term: impl Fn(&D, &A) -> f32,
) {
    let (rows, nb) = shape(w, rb, a.len(), cols, out);
    if rows == 0 || bytes == 0 {
        return;
    }
    for (row, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(cols)) {
        o.fill(0.0);
        for (i, b) in row.chunks_exact(bytes).take(nb).enumerate() {
            let x = decode(b);
            for (c, sumf) in o.iter_mut().enumerate() {
                *sumf += term(&x, &a[c * nb + i]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 32-wide formats.

/// A 32-element block decoded: scale `d`, min `m` (the formats with a min), the weights as int8.
pub(super) struct Dec32 {
    pub d: f32,
    pub m: f32,
    pub q: [i8; QK32],
}

/// A 32-wide weight format.
pub(super) trait Q32 {
    const BYTES: usize;
    /// The block stores a min (paired with Q8_1 activations).
    const MIN: bool;
    fn decode(b: &[u8]) -> Dec32;
}

/// The low and high nibbles of 16 bytes as elements 0..16 and 16..32, with bit `j` of `qh` as the
/// fifth bit of element `j` when `qh` is given, minus `sub`.
pub(super) fn nibbles32(qs: &[u8], qh: Option<u32>, sub: i32) -> [i8; QK32] {
    let mut q = [0i8; QK32];
    for j in 0..16 {
        let (h0, h1) = match qh {
            Some(h) => (
                (((h >> j) << 4) & 0x10) as i32,
                ((h >> (j + 12)) & 0x10) as i32,
            ),
            None => (0, 0),
        };
        q[j] = (((qs[j] & 0x0f) as i32 | h0) - sub) as i8;
        q[j + 16] = (((qs[j] >> 4) as i32 | h1) - sub) as i8;
    }
    q
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The 4- and 5-bit formats: `d` (f16), then `m` (f16) when `MIN`, then the fifth bits `qh`
/// (u32) when `HIGH`, then 16 bytes of nibbles; weight = (nibble | fifth bit << 4) - `SUB`.
pub(super) struct Nibbles<const BYTES: usize, const MIN: bool, const HIGH: bool, const SUB: i32>;
impl<const BYTES: usize, const MIN: bool, const HIGH: bool, const SUB: i32> Q32
    for Nibbles<BYTES, MIN, HIGH, SUB>
{
    const BYTES: usize = BYTES;
    const MIN: bool = MIN;
    #[inline(always)]
    fn decode(b: &[u8]) -> Dec32 {
        let at = if MIN { 4 } else { 2 };
        let qh = HIGH.then(|| u32_at(b, at));
        let qs = at + if HIGH { 4 } else { 0 };
        Dec32 {
            d: f16_at(b, 0),
            m: if MIN { f16_at(b, 2) } else { 0.0 },
            q: nibbles32(&b[qs..qs + 16], qh, SUB),
        }
    }
}
/// Q8_0: `d` (f16), 32 int8 weights.
pub(super) struct Q8_0;
impl Q32 for Q8_0 {
    const BYTES: usize = 34;
    const MIN: bool = false;
    #[inline(always)]
    fn decode(b: &[u8]) -> Dec32 {
        let mut q = [0i8; QK32];
        for (o, &v) in q.iter_mut().zip(&b[2..34]) {
            *o = v as i8;
        }
        Dec32 {
            d: f16_at(b, 0),
            m: 0.0,
            q,
        }
    }
}

/// A weight block format with its activation block: how a block decodes once, and what one
/// (decoded block, activation block) pair adds to the dot product.
pub(super) trait Pair {
    type Act;
    type Dec;
    const BYTES: usize;
    fn decode(b: &[u8]) -> Self::Dec;
    /// The block's term, exactly as the scalar twin computes it (scalar.rs).
    fn term(x: &Self::Dec, y: &Self::Act) -> f32;
}

/// A 32-wide format `F` with its activations `A`.
pub(super) struct With<F, A>(core::marker::PhantomData<(F, A)>);

impl<F: Q32, A: Act32> Pair for With<F, A> {
    type Act = A;
    type Dec = Dec32;
    const BYTES: usize = F::BYTES;
    #[inline(always)]
    fn decode(b: &[u8]) -> Dec32 {
        F::decode(b)
    }
    #[inline(always)]
    fn term(x: &Dec32, y: &A) -> f32 {
        let sumi = dot_i8(&x.q, y.qs());
        if F::MIN {
            (x.d * y.d()) * sumi as f32 + x.m * y.s()
        } else {
            sumi as f32 * (x.d * y.d())
        }
    }
}

/// Rows · columns for any block format: per row, per block, decode once, then each column.
pub(super) fn mat<F: Pair>(w: &[u8], rb: usize, a: &[F::Act], cols: usize, out: &mut [f32]) {
    let (rows, nb) = shape(w, rb, a.len(), cols, out);
    for r in 0..rows {
        let o = &mut out[r * cols..(r + 1) * cols];
        o.fill(0.0);
        let row = &w[r * rb..(r + 1) * rb];
        for (i, b) in row.chunks_exact(F::BYTES).take(nb).enumerate() {
            let x = F::decode(b);
            for (c, sumf) in o.iter_mut().enumerate() {
                *sumf += F::term(&x, &a[c * nb + i]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// K-quants.

/// A 256-element super-block decoded: `d`, `dmin`, the weights as int8, and per 16-element group
/// its integer scale and min (a 32-element sub-block's scale repeated for both of its groups:
/// `s · (x + y) = s · x + s · y` in exact integers).
pub(super) struct DecK {
    pub d: f32,
    pub dmin: f32,
    pub q: [i8; QK_K],
    pub sc: [i32; 16],
    pub mn: [i32; 16],
}

impl DecK {
    fn new(d: f32, dmin: f32) -> Self {
        Self {
            d,
            dmin,
            q: [0; QK_K],
            sc: [0; 16],
            mn: [0; 16],
        }
    }
}

pub(super) trait KQuant {
    const BYTES: usize;
    /// The block has mins, subtracted against the activations' 16-element sums.
    const MIN: bool;
    fn decode(b: &[u8]) -> DecK;
}

/// Q2_K and Q3_K share their element order: for each half of 128, four 2-bit planes of 32.
fn planes2(qs: &[u8], q: &mut [i8; QK_K], high: impl Fn(usize, usize) -> i8) {
    for half in 0..2 {
        for si in 0..4 {
            for l in 0..32 {
                let e = half * 128 + si * 32 + l;
                let low = (qs[half * 32 + l] >> (2 * si)) & 3;
                q[e] = low as i8 - high(half * 4 + si, l);
            }
        }
    }
}

pub(super) struct Q2K;
impl KQuant for Q2K {
    const BYTES: usize = 84;
    const MIN: bool = true;
    #[inline(always)]
    fn decode(b: &[u8]) -> DecK {
        let mut x = DecK::new(f16_at(b, 80), f16_at(b, 82));
        planes2(&b[16..80], &mut x.q, |_, _| 0);
        for g in 0..16 {
            x.sc[g] = (b[g] & 0x0f) as i32;
            x.mn[g] = (b[g] >> 4) as i32;
        }
        x
    }
}

pub(super) struct Q3K;
impl KQuant for Q3K {
    const BYTES: usize = 110;
    const MIN: bool = false;
    #[inline(always)]
    fn decode(b: &[u8]) -> DecK {
        let mut x = DecK::new(f16_at(b, 108), 0.0);
        let hm = &b[0..32];
        planes2(&b[32..96], &mut x.q, |plane, l| {
            if hm[l] & (1 << plane) != 0 {
                0
            } else {
                4
            }
        });
        for (s, v) in x.sc.iter_mut().zip(q3k_scales(&b[96..108])) {
            *s = v as i32;
        }
        x
    }
}

/// Q4_K / Q5_K: four chunks of 64, low nibbles then high nibbles (plus the fifth bits of Q5_K),
/// with 6-bit scales and mins per 32.
#[inline(always)]
fn decode_q45k(b: &[u8], qh: Option<&[u8]>, qs: &[u8]) -> DecK {
    let mut x = DecK::new(f16_at(b, 0), f16_at(b, 2));
    for j in 0..4 {
        let (s1, m1) = scale_min_k4(2 * j, &b[4..16]);
        let (s2, m2) = scale_min_k4(2 * j + 1, &b[4..16]);
        x.sc[4 * j..4 * j + 2].fill(s1 as i32);
        x.sc[4 * j + 2..4 * j + 4].fill(s2 as i32);
        x.mn[4 * j..4 * j + 2].fill(m1 as i32);
        x.mn[4 * j + 2..4 * j + 4].fill(m2 as i32);
        let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
        for l in 0..32 {
            let (h1, h2) = match qh {
                Some(h) => ((h[l] & u1 != 0) as u8 * 16, (h[l] & u2 != 0) as u8 * 16),
                None => (0, 0),
            };
            let v = qs[j * 32 + l];
            x.q[j * 64 + l] = ((v & 0x0f) + h1) as i8;
            x.q[j * 64 + 32 + l] = ((v >> 4) + h2) as i8;
        }
    }
    x
}

pub(super) struct Q4K;
impl KQuant for Q4K {
    const BYTES: usize = 144;
    const MIN: bool = true;
    #[inline(always)]
    fn decode(b: &[u8]) -> DecK {
        decode_q45k(b, None, &b[16..144])
    }
}

pub(super) struct Q5K;
impl KQuant for Q5K {
    const BYTES: usize = 176;
    const MIN: bool = true;
    #[inline(always)]
    fn decode(b: &[u8]) -> DecK {
        decode_q45k(b, Some(&b[16..48]), &b[48..176])
    }
}

pub(super) struct Q6K;
impl KQuant for Q6K {
    const BYTES: usize = 210;
    const MIN: bool = false;
    #[inline(always)]
    fn decode(b: &[u8]) -> DecK {
        let mut x = DecK::new(f16_at(b, 208), 0.0);
        let (ql, qh) = (&b[0..128], &b[128..192]);
        for n in 0..2 {
            let (ql, qh) = (&ql[n * 64..n * 64 + 64], &qh[n * 32..n * 32 + 32]);
            let q = &mut x.q[n * 128..n * 128 + 128];
            for l in 0..32 {
                q[l] = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i8 - 32;
                q[l + 32] = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                q[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                q[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        for g in 0..16 {
            x.sc[g] = (b[192 + g] as i8) as i32;
        }
        x
    }
}

/// A K-quant with its Q8_K activations.
pub(super) struct K<F>(core::marker::PhantomData<F>);

impl<F: KQuant> Pair for K<F> {
    type Act = BlockQ8K;
    type Dec = DecK;
    const BYTES: usize = F::BYTES;
    #[inline(always)]
    fn decode(b: &[u8]) -> DecK {
        F::decode(b)
    }
    #[inline(always)]
    fn term(x: &DecK, y: &BlockQ8K) -> f32 {
        let mut isum = 0i32;
        for g in 0..16 {
            let r = g * 16..g * 16 + 16;
            isum += x.sc[g] * dot_i8(&x.q[r.clone()], &y.qs[r]);
        }
        // (d · y.d) · isum [- (dmin · y.d) · summs]
        let d = x.d * y.d;
        if F::MIN {
            let summs: i32 = (0..16).map(|g| x.mn[g] * y.bsums[g] as i32).sum();
            d * isum as f32 - (x.dmin * y.d) * summs as f32
        } else {
            d * isum as f32
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Float weights: each element converted once, then accumulated per column in the scalar twins'
// four running sums (`acc[i & 3]`), added as (acc0 + acc1) + (acc2 + acc3).

/// Elements converted at a time.
const CHUNK: usize = 64;

fn mat_float<A: Copy>(
    w: &[u8],
    rb: usize,
    a: &[A],
    cols: usize,
    out: &mut [f32],
    esize: usize,
    wval: fn(&[u8]) -> f32,
    aval: fn(A) -> f32,
) {
    let (rows, n) = shape(w, rb, a.len(), cols, out);
    let n = n.min(rb / esize);
    let mut acc = [[0.0f32; 4]; MAX_BATCH];
    let cols = cols.min(MAX_BATCH);
    for r in 0..rows {
        let row = &w[r * rb..(r + 1) * rb];
        acc[..cols].fill([0.0; 4]);
        let mut wf = [0.0f32; CHUNK];
        for start in (0..n).step_by(CHUNK) {
            let len = CHUNK.min(n - start);
            for (k, v) in wf[..len].iter_mut().enumerate() {
                let at = (start + k) * esize;
                *v = wval(&row[at..at + esize]);
            }
            for (c, s) in acc[..cols].iter_mut().enumerate() {
                let x = &a[c * (a.len() / cols) + start..];
                for k in 0..len {
                    s[(start + k) & 3] += wf[k] * aval(x[k]);
                }
            }
        }
        for (o, s) in out[r * cols..(r + 1) * cols].iter_mut().zip(&acc) {
            *o = (s[0] + s[1]) + (s[2] + s[3]);
        }
    }
}

fn f16_of(b: &[u8]) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}
fn bf16_of(b: &[u8]) -> f32 {
    bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}

/// F32 weights · f32 activations, batched.
pub fn mat_f32_f32(w: &[u8], rb: usize, a: &[f32], cols: usize, out: &mut [f32]) {
    let wv = |b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    mat_float(w, rb, a, cols, out, 4, wv, |x| x);
}
/// F16 weights · f16 activations, batched.
pub fn mat_f16_f16(w: &[u8], rb: usize, a: &[u16], cols: usize, out: &mut [f32]) {
    mat_float(w, rb, a, cols, out, 2, f16_of, |x| {
        f16::from_bits(x).to_f32()
    });
}
/// BF16 weights · bf16 activations, batched.
pub fn mat_bf16_bf16(w: &[u8], rb: usize, a: &[u16], cols: usize, out: &mut [f32]) {
    mat_float(w, rb, a, cols, out, 2, bf16_of, |x| {
        bf16::from_bits(x).to_f32()
    });
}

/// The sixteen 6-bit scales of a Q3_K block, minus 32 (signed, -32..31).
#[inline(always)]
pub fn q3k_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for j in 0..16 {
        let low = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
        let high = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        out[j] = ((low | (high << 4)) as i8) - 32;
    }
    out
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K / Q5_K block (ggml's `get_scale_min_k4`).
#[inline(always)]
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}
