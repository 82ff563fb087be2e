//! Choosing the next token from the logits: repetition penalty, then greedy (temperature 0) or
//! top-k → top-p → min-p → temperature → a draw from a seeded generator, in llama.cpp's default order.
//! Buffers are allocated once; sampling does not allocate. Bad settings and bad logits (NaN, all
//! -inf) are errors, never a panic.
#![forbid(unsafe_code)]

use crate::oom::{self, OutOfMemory};
use crate::parallel::{par_chunks, split_range, Parallel, SingleThread, MAX_WORKERS};
use alloc::vec::Vec;
use core::fmt;

/// Sampling settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerConfig {
    /// 0 = greedy.
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 = all.
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches p; 1 = all.
    pub top_p: f32,
    /// Drop tokens less likely than min_p times the most likely; 0 = none.
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recent tokens by this; 1 = off.
    pub repeat_penalty: f32,
    /// How many recent tokens the penalty looks at.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    /// llama.cpp's defaults.
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    /// Greedy decoding.
    /// Temperature 0 and no repetition penalty: a draw is the highest logit as computed
    /// ([`Sampler::plain_greedy`]).
    pub fn plain_greedy(&self) -> bool {
        self.temperature <= 0.0 && (self.repeat_penalty == 1.0 || self.repeat_last_n == 0)
    }

    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            ..Self::default()
        }
    }

    /// Check every setting; the error names the setting, its value and the allowed range.
    pub fn validate(&self) -> Result<(), SamplerError> {
        let check = |name: &'static str, v: f32, lo: f32, hi: f32, range: &'static str| {
            if v.is_nan() || v < lo || v > hi {
                Err(SamplerError::BadSetting {
                    name,
                    value: v,
                    range,
                })
            } else {
                Ok(())
            }
        };
        check(
            "temperature",
            self.temperature,
            0.0,
            100.0,
            "0 (greedy) to 100",
        )?;
        check("top_p", self.top_p, 0.0, 1.0, "0 to 1")?;
        check("min_p", self.min_p, 0.0, 1.0, "0 to 1")?;
        check(
            "repeat_penalty",
            self.repeat_penalty,
            0.01,
            100.0,
            "0.01 to 100 (1 = off)",
        )?;
        if self.repeat_last_n > MAX_PENALTY_WINDOW {
            return Err(SamplerError::BadSetting {
                name: "repeat_last_n",
                value: self.repeat_last_n as f32,
                range: "0 to 4096",
            });
        }
        Ok(())
    }
}

/// Which sampling settings the user gave: those win over the model's recommendations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Given {
    pub temperature: bool,
    pub top_k: bool,
    pub top_p: bool,
    pub min_p: bool,
    pub repeat_penalty: bool,
    pub repeat_last_n: bool,
}

impl Given {
    /// Mark the setting `name` (as `lmboot.txt` spells it) as given; unknown names are ignored.
    pub fn mark(&mut self, name: &str) {
        match name {
            "temperature" => self.temperature = true,
            "top_k" => self.top_k = true,
            "top_p" => self.top_p = true,
            "min_p" => self.min_p = true,
            "repeat_penalty" => self.repeat_penalty = true,
            "repeat_last_n" => self.repeat_last_n = true,
            _ => {}
        }
    }
}

/// The GGUF keys of a model's recommended sampling (as llama.cpp reads them), each with the
/// setting it fills.
const MODEL_KEYS: [(&str, &str); 6] = [
    ("general.sampling.temp", "temperature"),
    ("general.sampling.top_k", "top_k"),
    ("general.sampling.top_p", "top_p"),
    ("general.sampling.min_p", "min_p"),
    ("general.sampling.penalty_repeat", "repeat_penalty"),
    ("general.sampling.penalty_last_n", "repeat_last_n"),
];

impl SamplerConfig {
    /// The model's recommended sampling (`general.sampling.*` in its GGUF) for every setting the
    /// user did not give. Returns the names of the settings taken from the model, or an error
    /// naming the key whose value is unreadable or out of range.
    pub fn apply_model_defaults(
        &mut self,
        g: &crate::gguf::Gguf,
        given: Given,
    ) -> Result<alloc::vec::Vec<&'static str>, alloc::string::String> {
        let mut taken = alloc::vec::Vec::new();
        for (key, name) in MODEL_KEYS {
            if g.get(key).is_none() {
                continue;
            }
            let bad = |e: &dyn fmt::Display| alloc::format!("{key}: {e}");
            let before = *self;
            match name {
                "temperature" if !given.temperature => {
                    self.temperature = g.get_f32(key).map_err(|e| bad(&e))?
                }
                "top_p" if !given.top_p => self.top_p = g.get_f32(key).map_err(|e| bad(&e))?,
                "min_p" if !given.min_p => self.min_p = g.get_f32(key).map_err(|e| bad(&e))?,
                "repeat_penalty" if !given.repeat_penalty => {
                    self.repeat_penalty = g.get_f32(key).map_err(|e| bad(&e))?
                }
                "top_k" if !given.top_k => {
                    self.top_k = g.get_int_in(key, 0, 1 << 20).map_err(|e| bad(&e))? as usize
                }
                "repeat_last_n" if !given.repeat_last_n => {
                    let max = MAX_PENALTY_WINDOW as i64;
                    self.repeat_last_n = g.get_int_in(key, 0, max).map_err(|e| bad(&e))? as usize
                }
                _ => continue,
            }
            self.validate().map_err(|e| bad(&e))?;
            if *self != before {
                taken.push(name);
            }
        }
        Ok(taken)
    }
}

/// Longest repetition-penalty window.
pub const MAX_PENALTY_WINDOW: usize = 4096;

/// Why no token could be chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SamplerError {
    /// A setting is out of range.
    BadSetting {
        name: &'static str,
        value: f32,
        range: &'static str,
    },
    /// The logits hold NaN (at `index`).
    NanLogits { index: usize },
    /// Every logit is -inf: nothing can be chosen.
    NoCandidates,
    /// A table of the sampler could not be allocated.
    OutOfMemory(OutOfMemory),
    /// The logits do not match the vocabulary the sampler was made for.
    WrongSize { expected: usize, found: usize },
}

impl fmt::Display for SamplerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SamplerError::OutOfMemory(e) => write!(f, "sampler: {e}"),
            SamplerError::BadSetting { name, value, range } => {
                write!(f, "{name} = {value} is out of range (allowed: {range})")
            }
            SamplerError::NanLogits { index } => {
                write!(f, "the model produced NaN logits (first at token {index})")
            }
            SamplerError::NoCandidates => write!(f, "every logit is -inf: no token can be chosen"),
            SamplerError::WrongSize { expected, found } => {
                write!(f, "{found} logits for a vocabulary of {expected}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SamplerError {}

/// xoshiro256** seeded through splitmix64: small, fast, the same on every target.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A sampler for one vocabulary.
#[derive(Debug, Clone)]
pub struct Sampler {
    pub config: SamplerConfig,
    rng: Rng,
    vocab: usize,
    /// Candidate token ids (a prefix is in use).
    idx: Vec<u32>,
    /// Candidate probabilities, parallel to `idx`.
    probs: Vec<f64>,
    /// Recent tokens, oldest first, at most `repeat_last_n`.
    recent: Vec<u32>,
}

impl Sampler {
    pub fn new(config: SamplerConfig, vocab: usize) -> Result<Self, SamplerError> {
        config.validate()?;
        Ok(Self {
            config,
            rng: Rng::new(config.seed),
            vocab,
            idx: oom::filled(vocab, 0, "sampler candidates")?,
            probs: oom::filled(vocab, 0.0, "sampler probabilities")?,
            recent: oom::with_capacity(config.repeat_last_n, "sampler recent tokens")?,
        })
    }

    /// Change settings mid-run. The generator keeps its state unless the seed changes (then it
    /// starts again from the new seed); a longer penalty window is allocated here (an error if
    /// the heap cannot), a shorter one keeps the most recent tokens.
    pub fn set_config(&mut self, config: SamplerConfig) -> Result<(), SamplerError> {
        config.validate()?;
        let n = config.repeat_last_n;
        if n > self.recent.capacity() {
            let more = n - self.recent.len();
            self.recent.try_reserve_exact(more).map_err(|_| {
                SamplerError::OutOfMemory(OutOfMemory {
                    what: "sampler recent tokens",
                    bytes: n * core::mem::size_of::<u32>(),
                })
            })?;
        }
        if self.recent.len() > n {
            self.recent.drain(..self.recent.len() - n);
        }
        if config.seed != self.config.seed {
            self.rng = Rng::new(config.seed);
        }
        self.config = config;
        Ok(())
    }

    /// Whether a draw is the highest logit as computed (temperature 0, no repetition penalty):
    /// then only [`greedy`]'s pick is needed, not the logits themselves ([`RunningBest`]).
    pub fn plain_greedy(&self) -> bool {
        self.config.plain_greedy()
    }

    /// Forget the recent tokens (a new conversation).
    pub fn reset(&mut self) {
        self.recent.clear();
    }

    /// Record a token as generated or fed (for the repetition penalty).
    pub fn accept(&mut self, token: u32) {
        let n = self.config.repeat_last_n;
        if n == 0 {
            return;
        }
        if self.recent.len() == n {
            self.recent.remove(0);
        }
        self.recent.push(token);
    }

    /// Choose the next token. `logits` is modified (penalties applied).
    pub fn sample(&mut self, logits: &mut [f32]) -> Result<u32, SamplerError> {
        self.sample_on(&SingleThread, logits)
    }

    /// [`Sampler::sample`], greedy picks split across `pool`'s workers (the same token).
    pub fn sample_on<P: Parallel + ?Sized>(
        &mut self,
        pool: &P,
        logits: &mut [f32],
    ) -> Result<u32, SamplerError> {
        self.check_on(pool, logits, &[]).map(|(t, _)| t)
    }

    /// Check guessed tokens `drafts` (the children of a node of a tree of guesses, best first)
    /// against these logits, keeping the sampler's distribution: `(token, which draft it is)`.
    /// Greedy takes the highest logit. A draw takes each draft in turn with its probability
    /// among what is left: speculative sampling's min(1, p/q) with a draft that is a certain
    /// guess (q = 1), the residual after a refusal being p without the refused token
    /// (SpecInfer's multi-round check). So each token comes out with exactly its probability:
    /// the first draft with p(d1), the second with (1 - p(d1)) · p(d2) / (1 - p(d1)) = p(d2),
    /// and any other token t with p(t). No drafts: a plain draw.
    pub fn check_on<P: Parallel + ?Sized>(
        &mut self,
        pool: &P,
        logits: &mut [f32],
        drafts: &[u32],
    ) -> Result<(u32, Option<usize>), SamplerError> {
        if logits.len() != self.vocab {
            return Err(SamplerError::WrongSize {
                expected: self.vocab,
                found: logits.len(),
            });
        }
        let c = self.config;
        // (Greedy finds NaN in its own scan; the penalty below cannot make one.)
        if c.temperature > 0.0 {
            if let Some(index) = logits.iter().position(|v| v.is_nan()) {
                return Err(SamplerError::NanLogits { index });
            }
        }
        self.penalize(logits);
        let which = |t: u32| drafts.iter().position(|&d| d == t);
        if c.temperature <= 0.0 {
            let t = par_greedy(pool, logits)?;
            return Ok((t, which(t)));
        }
        let (keep, total) = self.distribution(logits)?;
        let (cand, probs) = (&self.idx[..keep], &self.probs[..keep]);
        let mut rest = total;
        // The drafts refused so far that a draw could give (while others are left to draw).
        let mut refused = [0u32; MAX_REFUSED];
        let mut n = 0;
        for (i, &d) in drafts.iter().enumerate() {
            if refused[..n].contains(&d) {
                continue;
            }
            let pd = cand.iter().position(|&t| t == d).map_or(0.0, |i| probs[i]);
            if self.rng.next_f64() * rest < pd {
                return Ok((d, Some(i)));
            }
            if pd > 0.0 && n + 1 < keep && n < MAX_REFUSED {
                refused[n] = d;
                n += 1;
                rest -= pd;
            }
        }
        let t = draw(cand, probs, rest, &refused[..n], &mut self.rng);
        Ok((t, which(t)))
    }

    /// Divide positive (multiply negative) logits of each distinct recent token by the penalty.
    fn penalize(&self, logits: &mut [f32]) {
        let c = &self.config;
        if c.repeat_penalty == 1.0 {
            return;
        }
        for (i, &t) in self.recent.iter().enumerate() {
            // Penalise each distinct token once.
            if self.recent[..i].contains(&t) {
                continue;
            }
            if let Some(l) = logits.get_mut(t as usize) {
                *l = if *l > 0.0 {
                    *l / c.repeat_penalty
                } else {
                    *l * c.repeat_penalty
                };
            }
        }
    }

    /// The tokens a draw may give and their weights at the temperature: `idx[..keep]` (top-k
    /// sorted by logit, then cut by top-p and min-p), `probs[..keep]`; `(keep, total weight)`.
    fn distribution(&mut self, logits: &[f32]) -> Result<(usize, f64), SamplerError> {
        let c = self.config;
        // Candidates: the top-k (or all), sorted by logit, highest first (ties: lower id first).
        let n = logits.len();
        let k = if c.top_k == 0 || c.top_k >= n {
            n
        } else {
            c.top_k
        };
        let cand = candidates(logits, &mut self.idx, k);
        let max = logits[cand[0] as usize];
        if max == f32::NEG_INFINITY {
            return Err(SamplerError::NoCandidates);
        }

        // Probabilities at temperature 1 for top-p and min-p.
        let probs = &mut self.probs[..k];
        let mut sum = 0.0f64;
        for (p, &t) in probs.iter_mut().zip(cand.iter()) {
            *p = libm::exp(logits[t as usize] as f64 - max as f64);
            sum += *p;
        }
        let mut keep = k;
        if c.top_p < 1.0 {
            let mut cum = 0.0;
            for (i, p) in probs.iter().enumerate() {
                cum += p / sum;
                if cum >= c.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
        }
        if c.min_p > 0.0 {
            let floor = c.min_p as f64 * probs[0];
            keep = probs[..keep]
                .iter()
                .take_while(|&&p| p >= floor)
                .count()
                .max(1);
        }

        // Temperature.
        let inv_t = 1.0 / c.temperature as f64;
        let mut total = 0.0f64;
        for (p, &t) in probs[..keep].iter_mut().zip(cand.iter()) {
            *p = libm::exp((logits[t as usize] as f64 - max as f64) * inv_t);
            total += *p;
        }
        Ok((keep, total))
    }
}

/// A draw from `cand` in proportion to `probs` (summing to `total`), never `skip` (whose weight
/// `total` leaves out).
/// Most drafts [`Sampler::check_on`] checks at one node (a tree row's children).
const MAX_REFUSED: usize = crate::quant::MAX_BATCH;

fn draw(cand: &[u32], probs: &[f64], total: f64, skip: &[u32], rng: &mut Rng) -> u32 {
    let mut r = rng.next_f64() * total;
    let mut last = cand[0];
    for (p, &t) in probs.iter().zip(cand) {
        if skip.contains(&t) {
            continue;
        }
        if r < *p {
            return t;
        }
        r -= p;
        last = t;
    }
    last
}

/// `f32::total_cmp` as an integer: `key(a) < key(b)` exactly when `a.total_cmp(&b)` is `Less`.
#[inline(always)]
fn key(v: f32) -> i32 {
    let b = v.to_bits() as i32;
    b ^ (((b >> 31) as u32) >> 1) as i32
}

/// The `k` (1 ..= `logits.len()`) best tokens in `idx` (one slot per token), sorted by logit,
/// highest first, ties to the lower id: one pass ([`top_k`]) for the usual small k, else the sort
/// of a selection of all ids (no allocation either way).
fn candidates<'a>(logits: &[f32], idx: &'a mut [u32], k: usize) -> &'a [u32] {
    let n = logits.len();
    if k < n && k <= MAX_TOP_K {
        return top_k(logits, &mut idx[..k]);
    }
    for (i, v) in idx.iter_mut().enumerate() {
        *v = i as u32;
    }
    let by = |&t: &u32| (core::cmp::Reverse(key(logits[t as usize])), t);
    if k < n {
        idx.select_nth_unstable_by_key(k - 1, by);
    }
    idx[..k].sort_unstable_by_key(by);
    &idx[..k]
}

/// The `out.len()` (1 ..= [`MAX_TOP_K`], < `logits.len()`) best tokens, sorted by logit, highest first, ties to
/// the lower id: the same list as sorting all ids that way and taking a prefix. One pass over the
/// logits against the worst kept key; a token enters only when strictly better (a later id with
/// an equal logit loses the tie), so most of the vocabulary costs a load and a compare.
fn top_k<'a>(logits: &[f32], out: &'a mut [u32]) -> &'a [u32] {
    let k = out.len();
    let mut keys = [0i32; MAX_TOP_K];
    let keys = &mut keys[..k];
    let mut len = 0;
    for (i, &v) in logits.iter().enumerate() {
        let kv = key(v);
        if len == k && kv <= keys[k - 1] {
            continue;
        }
        // Insert after every kept key that is >= kv (equal keys have lower ids: they stay first).
        let at = keys[..len].partition_point(|&x| x >= kv);
        let end = len.min(k - 1);
        keys.copy_within(at..end, at + 1);
        out.copy_within(at..end, at + 1);
        keys[at] = kv;
        out[at] = i as u32;
        len = (len + 1).min(k);
    }
    out
}

/// Largest top-k kept on the stack by the one-pass selection (larger k sorts a selection).
const MAX_TOP_K: usize = 256;

/// The highest logit's token (the lowest id among equals); an error if all are -inf or any is NaN.
pub fn greedy(logits: &[f32]) -> Result<u32, SamplerError> {
    par_greedy(&SingleThread, logits)
}

/// [`greedy`] with the logits split across the pool's workers: each finds the best of its part
/// (or its first NaN), and the parts are taken in order with the same strict `>`, so the result
/// is that of one scan.
pub fn par_greedy<P: Parallel + ?Sized>(pool: &P, logits: &[f32]) -> Result<u32, SamplerError> {
    const ALIGN: usize = 1024;
    let mut parts = [Ok(None); MAX_WORKERS];
    let workers = pool
        .workers()
        .clamp(1, MAX_WORKERS)
        .min(logits.len().div_ceil(ALIGN).max(1));
    let mut scratch = [(); MAX_WORKERS];
    let n = logits.len();
    par_chunks(
        pool,
        &mut parts[..workers],
        1,
        &mut scratch[..workers],
        |r, part, _| {
            let range = split_range(n, ALIGN, r.start, workers);
            part[0] = best_of(&logits[range.clone()], range.start);
            Ok::<(), SamplerError>(())
        },
    )?;
    let mut best = (usize::MAX, f32::NEG_INFINITY);
    for part in parts[..workers].iter() {
        if let Some((i, v)) = (*part)? {
            if v > best.1 {
                best = (i, v);
            }
        }
    }
    if best.0 == usize::MAX {
        return Err(SamplerError::NoCandidates);
    }
    Ok(best.0 as u32)
}

/// [`greedy`]'s pick over logits seen a part at a time, in order (an output head computed a
/// chunk of its rows at a time, no row of logits kept whole): the first highest logit, ties to
/// the lower id, and at the first NaN the same error, as one scan of the whole row.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunningBest {
    /// The first highest logit so far and its id.
    best: Option<(usize, f32)>,
    /// The id of the first NaN seen (then nothing else counts).
    nan: Option<usize>,
}

impl RunningBest {
    /// Nothing seen yet.
    pub const NONE: RunningBest = RunningBest {
        best: None,
        nan: None,
    };

    /// The next part of the row, ids from `at` (past every part seen before).
    pub fn update(&mut self, logits: &[f32], at: usize) {
        if self.nan.is_some() {
            return;
        }
        match best_of(logits, at) {
            Ok(Some((i, v))) if self.best.is_none_or(|(_, b)| v > b) => self.best = Some((i, v)),
            Ok(_) => {}
            Err(SamplerError::NanLogits { index }) => self.nan = Some(index),
            Err(_) => self.nan = Some(at),
        }
    }

    /// [`greedy`] over every part seen: the token, or the error it would give.
    pub fn token(&self) -> Result<u32, SamplerError> {
        if let Some(index) = self.nan {
            return Err(SamplerError::NanLogits { index });
        }
        self.best
            .map(|(i, _)| i as u32)
            .ok_or(SamplerError::NoCandidates)
    }
}

/// The first highest logit of `logits` (ids from `at`) and its value, `None` if all are -inf,
/// an error at the first NaN. Sixteen logits at a time, their maximum and whether any is NaN,
/// and only a chunk that beats the best so far is searched for its first maximal logit: the
/// result of the plain scan `if v > best { best = v }`, for fewer compares and branches.
fn best_of(logits: &[f32], at: usize) -> Result<Option<(usize, f32)>, SamplerError> {
    const CHUNK: usize = 16;
    let mut best = None;
    let mut top = f32::NEG_INFINITY;
    for (c, chunk) in logits.chunks(CHUNK).enumerate() {
        let max = chunk
            .iter()
            .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        if chunk.iter().fold(false, |nan, &v| nan | v.is_nan()) {
            let i = chunk.iter().position(|v| v.is_nan()).unwrap_or(0);
            return Err(SamplerError::NanLogits {
                index: at + c * CHUNK + i,
            });
        }
        if max > top {
            let i = chunk.iter().position(|&v| v == max).unwrap_or(0);
            (best, top) = (Some((at + c * CHUNK + i, max)), max);
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn logits() -> Vec<f32> {
        (0..1000)
            .map(|i| ((i * 7919 % 1000) as f32 / 100.0) - 5.0)
            .collect()
    }

    /// The running best over a row split anywhere equals greedy over the whole row: random
    /// rows, rows of few distinct values (ties: the lower id), -inf and NaN.
    #[test]
    fn the_running_best_is_greedy_over_the_whole_row() {
        let mut seed = 0x9e37_79b9_u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        for case in 0..400 {
            let n = 1 + next() as usize % 3000;
            let levels = [1000, 3, 1][case % 3];
            let mut row: Vec<f32> = (0..n)
                .map(|_| (next() % levels) as f32 * 0.25 - 1.0)
                .collect();
            if case % 7 == 0 {
                row.iter_mut().for_each(|v| *v = f32::NEG_INFINITY);
            }
            if case % 11 == 0 {
                let i = next() as usize % n;
                row[i] = f32::NAN;
            }
            let mut best = RunningBest::NONE;
            let mut at = 0;
            while at < n {
                let len = (1 + next() as usize % 700).min(n - at);
                best.update(&row[at..at + len], at);
                at += len;
            }
            assert_eq!(best.token(), greedy(&row), "case {case}");
        }
    }

    #[test]
    fn greedy_picks_the_maximum() {
        let mut s = Sampler::new(SamplerConfig::greedy(), 1000).unwrap();
        let mut l = logits();
        let best = l
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap()
            .0;
        assert_eq!(s.sample(&mut l).unwrap() as usize, best);
    }

    /// The scan `greedy` must equal: the first logit greater than every one before it.
    fn plain_greedy(l: &[f32]) -> Result<u32, SamplerError> {
        if let Some(index) = l.iter().position(|v| v.is_nan()) {
            return Err(SamplerError::NanLogits { index });
        }
        let mut best = (usize::MAX, f32::NEG_INFINITY);
        for (i, &v) in l.iter().enumerate() {
            if v > best.1 {
                best = (i, v);
            }
        }
        match best.0 {
            usize::MAX => Err(SamplerError::NoCandidates),
            i => Ok(i as u32),
        }
    }

    /// `n` workers run one after another.
    struct InTurn(usize);
    impl Parallel for InTurn {
        fn workers(&self) -> usize {
            self.0
        }
        fn run(&self, job: &(dyn Fn(usize) + Sync)) {
            (0..self.0).for_each(job)
        }
    }

    #[test]
    fn chunked_greedy_is_the_plain_scan() {
        let mut rng = Rng::new(3);
        for n in [1, 15, 16, 17, 100, 1000, 2049, 5000] {
            for trial in 0..50 {
                let mut l: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 8) as f32 - 4.0).collect();
                match trial % 5 {
                    1 => l
                        .iter_mut()
                        .for_each(|v| *v = if *v > 0.0 { 0.0 } else { -0.0 }),
                    2 => l.iter_mut().for_each(|v| *v = f32::NEG_INFINITY),
                    3 => l[(rng.next_u64() % n as u64) as usize] = f32::NAN,
                    _ => {}
                }
                assert_eq!(greedy(&l), plain_greedy(&l), "n {n}, trial {trial}: {l:?}");
                assert_eq!(
                    par_greedy(&InTurn(3), &l),
                    plain_greedy(&l),
                    "n {n}, 3 workers"
                );
            }
        }
    }

    #[test]
    fn same_seed_same_tokens_different_seed_different() {
        let cfg = SamplerConfig {
            temperature: 1.5,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Default::default()
        };
        let run = |seed| {
            let mut s = Sampler::new(SamplerConfig { seed, ..cfg }, 1000).unwrap();
            (0..50)
                .map(|_| s.sample(&mut logits()).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    /// A sampler over the 1000 [`logits`] with these filters (the rest as by default).
    fn filtering(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> Sampler {
        let cfg = SamplerConfig {
            temperature,
            top_k,
            top_p,
            min_p,
            ..Default::default()
        };
        Sampler::new(cfg, 1000).unwrap()
    }

    #[test]
    fn top_k_one_is_greedy_and_filters_hold() {
        let mut l = logits();
        let best = greedy(&l).unwrap();
        let d = SamplerConfig::default();
        let mut s = filtering(5.0, 1, d.top_p, d.min_p);
        for _ in 0..20 {
            assert_eq!(s.sample(&mut l).unwrap(), best);
        }
        // min_p = 1 keeps only the maximum.
        let mut s = filtering(5.0, 0, 1.0, 1.0);
        assert_eq!(s.sample(&mut l).unwrap(), best);
        // top_k = 3: only the three highest ever come out.
        let mut sorted: Vec<u32> = (0..1000).collect();
        sorted.sort_by(|a, b| l[*b as usize].total_cmp(&l[*a as usize]));
        let mut s = filtering(10.0, 3, 1.0, 0.0);
        for _ in 0..200 {
            assert!(sorted[..3].contains(&s.sample(&mut l).unwrap()));
        }
    }

    #[test]
    fn one_pass_top_k_is_the_prefix_of_the_full_sort() {
        let mut rng = Rng::new(7);
        for (n, k) in [
            (1000, 1),
            (1000, 40),
            (5000, 255),
            (5000, 256),
            (3000, 300),
            (50, 49),
            (50, 50),
        ] {
            // Few distinct values (many ties), signed zeros and infinities.
            let mut l: Vec<f32> = (0..n)
                .map(|_| ((rng.next_u64() % 64) as f32 - 32.0) / 4.0)
                .collect();
            l[3] = -0.0;
            l[4] = 0.0;
            l[5] = f32::INFINITY;
            l[6] = f32::NEG_INFINITY;
            let mut all: Vec<u32> = (0..n as u32).collect();
            all.sort_by(|a, b| l[*b as usize].total_cmp(&l[*a as usize]).then(a.cmp(b)));
            let mut idx = vec![0u32; n];
            assert_eq!(candidates(&l, &mut idx, k), &all[..k], "n {n}, k {k}");
        }
    }

    #[test]
    fn repetition_penalty_lowers_recent_tokens() {
        let mut l = vec![1.0f32, 2.0, 1.9];
        let mut s = Sampler::new(
            SamplerConfig {
                repeat_penalty: 1.5,
                ..SamplerConfig::greedy()
            },
            3,
        )
        .unwrap();
        s.accept(1);
        s.accept(1);
        assert_eq!(s.sample(&mut l).unwrap(), 2);
        assert!(
            (l[1] - 2.0 / 1.5).abs() < 1e-6,
            "penalised once, not twice: {}",
            l[1]
        );
    }

    /// `/set` in a chat: a longer penalty window keeps what it had and grows without a later
    /// allocation, a shorter one keeps the most recent tokens, a new seed starts the generator
    /// again (the same draws as a sampler made with that seed).
    #[test]
    fn settings_change_mid_run() {
        let cfg = SamplerConfig {
            repeat_penalty: 2.0,
            repeat_last_n: 2,
            ..SamplerConfig::default()
        };
        let mut s = Sampler::new(cfg, 4).unwrap();
        for t in [0, 1, 2] {
            s.accept(t);
        }
        assert_eq!(s.recent, [1, 2]);
        s.set_config(SamplerConfig {
            repeat_last_n: 3,
            ..cfg
        })
        .unwrap();
        assert!(s.recent.capacity() >= 3);
        s.accept(3);
        assert_eq!(s.recent, [1, 2, 3]);
        s.set_config(SamplerConfig {
            repeat_last_n: 1,
            ..cfg
        })
        .unwrap();
        assert_eq!(s.recent, [3]);
        let seeded = SamplerConfig { seed: 9, ..cfg };
        s.set_config(seeded).unwrap();
        let mut fresh = Sampler::new(seeded, 4).unwrap();
        let logits = [0.5f32, 0.4, 0.3, 0.2];
        for _ in 0..8 {
            let (mut a, mut b) = (logits, logits);
            assert_eq!(s.sample(&mut a).unwrap(), fresh.sample(&mut b).unwrap());
            s.recent.clear();
            fresh.recent.clear();
        }
        let bad = SamplerConfig { top_p: 2.0, ..cfg };
        assert!(s.set_config(bad).is_err());
        assert_eq!(s.config, seeded, "a refused setting changes nothing");
    }

    #[test]
    fn bad_logits_and_settings_are_errors() {
        let mut s = Sampler::new(SamplerConfig::default(), 3).unwrap();
        assert_eq!(
            s.sample(&mut [0.0, f32::NAN, 1.0]),
            Err(SamplerError::NanLogits { index: 1 })
        );
        let ninf = f32::NEG_INFINITY;
        assert_eq!(s.sample(&mut [ninf; 3]), Err(SamplerError::NoCandidates));
        assert_eq!(greedy(&[ninf; 3]), Err(SamplerError::NoCandidates));
        assert_eq!(
            s.sample(&mut [0.0; 4]),
            Err(SamplerError::WrongSize {
                expected: 3,
                found: 4
            })
        );
        for bad in [
            SamplerConfig {
                temperature: f32::NAN,
                ..Default::default()
            },
            SamplerConfig {
                temperature: -1.0,
                ..Default::default()
            },
            SamplerConfig {
                top_p: 1.5,
                ..Default::default()
            },
            SamplerConfig {
                min_p: f32::NAN,
                ..Default::default()
            },
            SamplerConfig {
                repeat_penalty: 0.0,
                ..Default::default()
            },
            SamplerConfig {
                repeat_last_n: 1 << 20,
                ..Default::default()
            },
        ] {
            assert!(
                matches!(Sampler::new(bad, 3), Err(SamplerError::BadSetting { .. })),
                "{bad:?} accepted"
            );
        }
    }
}

impl From<OutOfMemory> for SamplerError {
    fn from(e: OutOfMemory) -> Self {
        SamplerError::OutOfMemory(e)
    }
}
