//! Float operations of the forward pass, scalar references: RMSNorm, RoPE, SiLU·gate, online-softmax
//! attention over the f16 KV cache, softmax. Every float function comes from `libm`, so each target
//! computes bit-identical results with these kernels. SIMD twins (NEON, RVV) join beside them.
#![forbid(unsafe_code)]

use half::f16;

/// `out = x / rms(x) * w`, with the mean of squares summed in f64 (as ggml does) and `eps` from the file.
pub fn rmsnorm(out: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = v * scale * g;
    }
}

/// [`rmsnorm`] of `x` in place (the same bits).
pub fn rmsnorm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for (v, &g) in x.iter_mut().zip(w) {
        *v = *v * scale * g;
    }
}

/// `1 / sqrt(mean(x²) + eps)`, the mean in f64.
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let ss: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let mean = ss / x.len().max(1) as f64;
    (1.0 / libm::sqrt(mean + eps as f64)) as f32
}

/// How RoPE pairs the elements of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeLayout {
    /// Element 2i with 2i+1 (GGUF `llama`: Q and K are stored permuted for this).
    Adjacent,
    /// Element i with i + rope_dim/2 (`qwen2`, `qwen3`, `gemma3`).
    Neox,
}

/// Precomputed rotations: for each position, `cos` and `sin` of `pos * base^(-2i/rope_dim) /
/// factor_i` for `i < rope_dim / 2`, computed in f64 once, and how the head's elements are paired.
#[derive(Debug, Clone)]
pub struct RopeTable {
    pub half: usize,
    pub layout: RopeLayout,
    /// `positions * half` entries, row per position.
    pub cos: alloc::vec::Vec<f32>,
    pub sin: alloc::vec::Vec<f32>,
}

impl RopeTable {
    /// Rotations for positions `0..positions` of `rope_dim` dimensions with base `base`; positions are
    /// divided by `scale` (linear RoPE scaling; 1 for none) and frequency `i` by `factors[i]` (Llama
    /// 3's `rope_freqs`; `None` for none).
    pub fn new(
        positions: usize,
        rope_dim: usize,
        base: f32,
        scale: f32,
        factors: Option<&[f32]>,
        layout: RopeLayout,
    ) -> Result<Self, crate::oom::OutOfMemory> {
        use crate::oom;
        let half = rope_dim / 2;
        let mut cos = oom::with_capacity(positions * half, "RoPE table (cos)")?;
        let mut sin = oom::with_capacity(positions * half, "RoPE table (sin)")?;
        let freqs: alloc::vec::Vec<f64> = oom::collect(half, "RoPE frequencies", |i| {
            let f = libm::pow(base as f64, -2.0 * i as f64 / rope_dim as f64);
            f / factors.and_then(|x| x.get(i)).map_or(1.0, |&x| x as f64)
        })?;
        for p in 0..positions {
            let pos = p as f64 / scale as f64;
            for &f in &freqs {
                let (s, c) = libm::sincos(pos * f);
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        Ok(Self {
            half,
            layout,
            cos,
            sin,
        })
    }

    /// Rotate every `head_dim` head of `x` at `pos` in the table's layout.
    pub fn apply(&self, x: &mut [f32], head_dim: usize, pos: usize) {
        match self.layout {
            RopeLayout::Adjacent => self.apply_adjacent(x, head_dim, pos),
            RopeLayout::Neox => self.apply_neox(x, head_dim, pos),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.cos.len() + self.sin.len()) * 4
    }

    fn row(&self, pos: usize) -> (&[f32], &[f32]) {
        let r = pos * self.half..(pos + 1) * self.half;
        (&self.cos[r.clone()], &self.sin[r])
    }

    /// Rotate each `head_dim` head of `x` in place at `pos`, rotating element `2i` with `2i + 1`
    /// (GGUF `llama` layout: Q and K are stored permuted for this).
    pub fn apply_adjacent(&self, x: &mut [f32], head_dim: usize, pos: usize) {
        let (c, s) = self.row(pos);
        for head in x.chunks_exact_mut(head_dim) {
            for i in 0..self.half.min(head_dim / 2) {
                let (a, b) = (head[2 * i], head[2 * i + 1]);
                head[2 * i] = a * c[i] - b * s[i];
                head[2 * i + 1] = a * s[i] + b * c[i];
            }
        }
    }

    /// Rotate element `i` with `i + rope_dim/2` of each head (NEOX layout, used by `qwen2`).
    pub fn apply_neox(&self, x: &mut [f32], head_dim: usize, pos: usize) {
        let (c, s) = self.row(pos);
        let h = self.half.min(head_dim / 2);
        for head in x.chunks_exact_mut(head_dim) {
            for i in 0..h {
                let (a, b) = (head[i], head[i + h]);
                head[i] = a * c[i] - b * s[i];
                head[i + h] = a * s[i] + b * c[i];
            }
        }
    }
}

/// `gate = silu(gate) * up`.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let v = *g;
        *g = v / (1.0 + libm::expf(-v)) * u;
    }
}

/// `gate = gelu(gate) * up`, GELU in its tanh form (gemma's GeGLU).
pub fn gelu_tanh_mul(gate: &mut [f32], up: &[f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = *g;
        let inner = SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x);
        *g = 0.5 * x * (1.0 + libm::tanhf(inner)) * u;
    }
}

/// `x += y`.
pub fn add(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Store f32 values as f16 bits.
pub fn to_f16(out: &mut [u16], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f16::from_f32(v).to_bits();
    }
}

#[inline(always)]
fn h(v: u16) -> f32 {
    f16::from_bits(v).to_f32()
}

/// `q · k` with `k` as f16 bits, in eight partial sums `acc[i % 8]` combined as
/// `((acc0 + acc4) + (acc1 + acc5)) + ((acc2 + acc6) + (acc3 + acc7))`: a fixed order that SIMD
/// twins (two 4-lane vectors, e.g. `quant::neon::dot_f32_f16`) reproduce bit for bit.
pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    dot_f32_f16_from([0.0; 8], q, k)
}

/// [`dot_f32_f16`] from eight partial sums `acc` already holding the first elements (a multiple
/// of 8; the SIMD twins' vector part): the rest, `q` and `k`, go to their partial sums, then
/// [`sum8`].
#[inline(always)]
pub fn dot_f32_f16_from(mut acc: [f32; 8], q: &[f32], k: &[u16]) -> f32 {
    for (i, (a, &b)) in q.iter().zip(k).enumerate() {
        acc[i & 7] += a * h(b);
    }
    sum8(acc)
}

/// Eight partial sums combined as `((acc0 + acc4) + (acc1 + acc5)) + ((acc2 + acc6) + (acc3 +
/// acc7))`, the order of [`dot_f32_f16`].
#[inline(always)]
pub fn sum8(acc: [f32; 8]) -> f32 {
    let c = [
        acc[0] + acc[4],
        acc[1] + acc[5],
        acc[2] + acc[6],
        acc[3] + acc[7],
    ];
    (c[0] + c[1]) + (c[2] + c[3])
}

/// One query head attending over the cached positions of `head`, single pass with an online
/// softmax: `out = sum_t softmax(q·k_t * scale)_t v_t`. The model calls it through
/// `Kernels::attend_head` (SIMD twins compute the same bits).
pub fn attend_head(out: &mut [f32], q: &[f32], head: &Head<'_>) {
    head.attend(
        out,
        q,
        dot_f32_f16,
        |out, r, v| {
            for (o, &b) in out.iter_mut().zip(v) {
                *o = *o * r + h(b);
            }
        },
        |out, w, v| {
            for (o, &b) in out.iter_mut().zip(v) {
                *o += w * h(b);
            }
        },
    );
}

/// One head's view of the f16 KV cache: `keys` and `values` hold a ring of `ring` rows (slots) of
/// `stride` values each; the head attends to `n` positions in order: the first `run` of them in
/// consecutive slots from slot `first` (a cache that keeps every position has `first = 0`), the
/// rest in the slots `gathered` names (a row of a tree pass: its own path through the tree), this
/// head's slice of each row starting at `offset`; scores are scaled by `scale`.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    pub keys: &'a [u16],
    pub values: &'a [u16],
    pub n: usize,
    pub first: usize,
    pub ring: usize,
    pub stride: usize,
    pub offset: usize,
    pub scale: f32,
    /// Positions read from consecutive slots (`n` but for a tree pass's row).
    pub run: usize,
    /// The slots of the last `n - run` positions.
    pub gathered: &'a [u32],
}

impl Head<'_> {
    /// Where position `t` (0 = the first seen) starts in `keys` and `values`.
    #[inline(always)]
    pub fn row(&self, t: usize) -> usize {
        let slot = if t < self.run {
            let slot = self.first + t;
            if slot >= self.ring {
                slot - self.ring
            } else {
                slot
            }
        } else {
            self.gathered.get(t - self.run).map_or(0, |&s| s as usize)
        };
        slot * self.stride + self.offset
    }

    /// The online softmax of [`attend_head`], position by position, with its three inner steps
    /// given: `dot` (q · k), `rescale` (`out = out · r + v`) and `accumulate` (`out += w · v`).
    /// Every SIMD twin that keeps this control flow runs through here, so only the inner steps
    /// differ (and compute the scalar steps' bits).
    #[inline(always)]
    pub fn attend(
        &self,
        out: &mut [f32],
        q: &[f32],
        dot: impl Fn(&[f32], &[u16]) -> f32,
        rescale: impl Fn(&mut [f32], f32, &[u16]),
        accumulate: impl Fn(&mut [f32], f32, &[u16]),
    ) {
        let hd = q.len();
        out.fill(0.0);
        let mut max = f32::NEG_INFINITY;
        let mut sum = 0.0f32;
        for t in 0..self.n {
            let base = self.row(t);
            let s = dot(q, &self.keys[base..base + hd]) * self.scale;
            let v = &self.values[base..base + hd];
            if s > max {
                // New maximum: rescale what was accumulated so far.
                let r = libm::expf(max - s);
                sum = sum * r + 1.0;
                rescale(out, r, v);
                max = s;
            } else {
                let w = libm::expf(s - max);
                sum += w;
                accumulate(out, w, v);
            }
        }
        if sum > 0.0 {
            let inv = 1.0 / sum;
            for o in out.iter_mut() {
                *o *= inv;
            }
        }
    }
}

/// In-place softmax; returns false if the input holds NaN or is all -inf (nothing to normalise).
pub fn softmax(x: &mut [f32]) -> bool {
    let mut max = f32::NEG_INFINITY;
    for &v in x.iter() {
        if v.is_nan() {
            return false;
        }
        max = max.max(v);
    }
    if max == f32::NEG_INFINITY {
        return false;
    }
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = libm::expf(*v - max);
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
    true
}
