//! What the page cache pins first: the tensors that save the most card bytes per byte of RAM.
//!
//! A tensor a token reads in full saves its size every token it is pinned; a lookup-only tensor
//! (an untied token embedding) saves one row, so it is pinned only after everything read in full;
//! a tensor the self-draft reads at every guess saves its size several times a round, so its
//! tensors (the draft's layers and the output head) come first. A tied embedding is the output
//! head and is read in full. Tensors of equal value go layer by layer in the order the pass reads
//! them, each layer's tensors in file order, so a budget that ends inside a layer pins one
//! contiguous stretch of it (the pages two neighbouring tensors share counted once). A board alone
//! then wants the rest of its file, so a file that fits is pinned whole.

use alloc::vec::Vec;
use core::fmt;
use inference::gguf::TensorInfo;
use inference::model::{LayerWeights, Model, Part};
use inference::oom::{self, OutOfMemory};

/// Card bytes a token saves per byte pinned, highest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    /// Read by the self-draft at every guess and by the checking pass: several times a round.
    Draft,
    /// Read in full once a token.
    Full,
    /// Looked up one row a token (an untied token embedding).
    Row,
}

impl Value {
    /// Why tensors of this value are pinned (or not), for the memory line.
    fn reason(self) -> &'static str {
        match self {
            Value::Draft => "the self-draft's: read at every guess",
            Value::Full => "read in full each token",
            Value::Row => "one row a token",
        }
    }
}

/// What a board running `part` of a model pins, and how: the part, and the self-draft's depth (0:
/// none; only a part holding the ends has one, within its layers).
#[derive(Debug, Clone, Copy)]
pub struct PinScope<'a> {
    pub model: &'a Model,
    pub part: &'a Part,
    pub self_draft: usize,
}

/// A layer's matrices in file order.
fn layer_tensors(l: &LayerWeights) -> [&TensorInfo; 7] {
    let mut t = [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down];
    t.sort_unstable_by_key(|t| t.offset);
    t
}

impl<'a> PinScope<'a> {
    pub fn new(model: &'a Model, part: &'a Part, self_draft: usize) -> Self {
        PinScope {
            model,
            part,
            self_draft,
        }
    }

    /// The part's layers, within the model's.
    fn layers(&self) -> core::ops::Range<usize> {
        let end = self.part.layers.end.min(self.model.weights.layers.len());
        self.part.layers.start.min(end)..end
    }

    /// The self-draft's layers (empty without one).
    fn own(&self) -> core::ops::Range<usize> {
        let l = self.layers();
        let depth = if self.part.ends { self.self_draft } else { 0 };
        l.start..depth.max(l.start).min(l.end)
    }

    /// Whether the token embedding is the output head.
    fn tied(&self) -> bool {
        let w = &self.model.weights;
        w.token_embd.offset == w.output.offset
    }

    /// The value of the output head (when the part holds it).
    fn head_value(&self) -> Value {
        if self.own().is_empty() {
            Value::Full
        } else {
            Value::Draft
        }
    }

    /// The matrices of `layers`, valued `v`.
    fn of(
        &self,
        layers: core::ops::Range<usize>,
        v: Value,
    ) -> impl Iterator<Item = (Value, &'a TensorInfo)> + 'a {
        let all = &self.model.weights.layers;
        all.get(layers)
            .unwrap_or(&[])
            .iter()
            .flat_map(move |l| layer_tensors(l).into_iter().map(move |t| (v, t)))
    }

    /// Every tensor the part reads a token, most valuable first (each once: a tied head is the
    /// embedding).
    pub fn ranked(&self) -> impl Iterator<Item = (Value, &'a TensorInfo)> + 'a {
        let w = &self.model.weights;
        let (own, layers) = (self.own(), self.layers());
        let head = self.part.ends.then_some((self.head_value(), &w.output));
        let embd = (self.part.ends && !self.tied()).then_some((Value::Row, &w.token_embd));
        let first = head.filter(|h| h.0 == Value::Draft);
        let later = head.filter(|h| h.0 == Value::Full);
        first
            .into_iter()
            .chain(self.of(own.clone(), Value::Draft))
            .chain(later)
            .chain(self.of(own.end..layers.end, Value::Full))
            .chain(embd)
    }

    /// The file ranges to pin, most valuable first ([`PinScope::ranked`]), then, when `file`
    /// gives the file's length (a board alone), the whole file.
    pub fn ranges(&self, file: Option<u64>) -> Result<Vec<(u64, u64)>, OutOfMemory> {
        let n = self.ranked().count() + usize::from(file.is_some());
        let mut v = oom::with_capacity(n, "the page cache's pin list")?;
        v.extend(self.ranked().map(|(_, t)| (t.offset, t.size)));
        v.extend(file.map(|len| (0, len)));
        Ok(v)
    }

    /// Card bytes a token reads of what is not pinned (`pinned(offset, len)`: the bytes of a
    /// range that are): the tensors read in full, and an embedding row unless the embedding is
    /// pinned (in part: that share of the rows).
    pub fn streamed_per_token(&self, pinned: &dyn Fn(u64, u64) -> u64) -> u64 {
        self.ranked()
            .map(|(v, t)| {
                let rest = t.size - pinned(t.offset, t.size).min(t.size);
                match v {
                    Value::Row => {
                        (rest as u128 * t.row_bytes() as u128 / t.size.max(1) as u128) as u64
                    }
                    _ => rest,
                }
            })
            .sum()
    }
}

/// [`PinScope::ranges`] of `part` of `model` with a self-draft of `self_draft` layers (0: none).
pub fn wanted(
    model: &Model,
    part: &Part,
    self_draft: usize,
    file: Option<u64>,
) -> Result<Vec<(u64, u64)>, OutOfMemory> {
    PinScope::new(model, part, self_draft).ranges(file)
}

/// Bytes of `offset..offset + len` inside the sorted `(start, length)` runs.
pub fn pinned_within(runs: &[(u64, u64)], offset: u64, len: u64) -> u64 {
    super::pinned::overlap(runs.iter().copied(), offset, len)
}

/// How much of a tensor is pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    All,
    Part,
    None,
}

/// One entry of the report: the output head, a stretch of layers alike, the token embedding.
#[derive(Debug, Clone, Copy)]
enum Item {
    Head { tied: bool },
    Layers(usize, usize),
    Embedding,
}

/// What is pinned of a part and why, as the memory line and the profile say it:
/// `pinned 454 MiB: output head, layers 0-9, part of layer 10 (read in full each token);
/// layers 11-27 streamed; token embedding streamed (one row a token)`.
pub struct PinReport<'a> {
    pub scope: PinScope<'a>,
    /// Bytes pinned in all.
    pub total: u64,
    /// The bytes of a range that are pinned.
    pub pinned: &'a dyn Fn(u64, u64) -> u64,
}

impl fmt::Debug for PinReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinReport")
            .field("scope", &self.scope)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl PinReport<'_> {
    /// How much of `tensors` is pinned: all, none (at most a sliver, such as the pages they
    /// share with pinned neighbours: under 1/64 of their bytes), or part.
    fn held(&self, tensors: &[&TensorInfo]) -> Held {
        let (size, pinned) = tensors.iter().fold((0u64, 0u64), |(s, p), t| {
            (s + t.size, p + (self.pinned)(t.offset, t.size).min(t.size))
        });
        if pinned >= size {
            Held::All
        } else if pinned.saturating_mul(64) < size {
            Held::None
        } else {
            Held::Part
        }
    }

    /// Call `f` with each item of value `v` and how much of it is pinned (stretches of layers
    /// held alike merged).
    fn each(&self, v: Value, f: &mut dyn FnMut(Item, Held) -> fmt::Result) -> fmt::Result {
        let s = &self.scope;
        let w = &s.model.weights;
        if v == Value::Row {
            return match s.part.ends && !s.tied() {
                true => f(Item::Embedding, self.held(&[&w.token_embd])),
                false => Ok(()),
            };
        }
        if s.part.ends && s.head_value() == v {
            f(Item::Head { tied: s.tied() }, self.held(&[&w.output]))?;
        }
        let range = match v {
            Value::Draft => s.own(),
            _ => s.own().end..s.layers().end,
        };
        let mut run: Option<(usize, usize, Held)> = None;
        for i in range {
            let h = self.held(&layer_tensors(&w.layers[i]));
            run = match run {
                Some((a, _, g)) if g == h => Some((a, i, h)),
                Some((a, b, g)) => {
                    f(Item::Layers(a, b), g)?;
                    Some((i, i, h))
                }
                None => Some((i, i, h)),
            };
        }
        match run {
            Some((a, b, g)) => f(Item::Layers(a, b), g),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Item::Head { tied: false } => f.write_str("output head"),
            Item::Head { tied: true } => f.write_str("output head = token embedding"),
            Item::Layers(a, b) if a == b => write!(f, "layer {a}"),
            Item::Layers(a, b) => write!(f, "layers {a}-{b}"),
            Item::Embedding => f.write_str("token embedding"),
        }
    }
}

impl fmt::Display for PinReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pinned {} MiB", self.total >> 20)?;
        let mut sep = ": ";
        // What is pinned, by value, with why.
        for v in [Value::Draft, Value::Full, Value::Row] {
            let mut any = false;
            self.each(v, &mut |item, held| {
                let part = if held == Held::Part { "part of " } else { "" };
                if held == Held::None {
                    return Ok(());
                }
                write!(f, "{}{part}{item}", if any { ", " } else { sep })?;
                any = true;
                Ok(())
            })?;
            if any {
                write!(f, " ({})", v.reason())?;
                sep = "; ";
            }
        }
        // What streams (stretches of layers that meet across values said as one).
        let (mut none, mut layers) = (true, None::<(usize, usize)>);
        let mut say = |f: &mut fmt::Formatter<'_>, item: Item| {
            let lead = if core::mem::take(&mut none) {
                sep
            } else {
                ", "
            };
            write!(f, "{lead}{item}")
        };
        for v in [Value::Draft, Value::Full] {
            self.each(v, &mut |item, held| match (held, item, layers) {
                (Held::None, Item::Layers(a, b), Some((c, d))) if d + 1 == a => {
                    layers = Some((c, b));
                    Ok(())
                }
                (Held::None, Item::Layers(a, b), last) => {
                    layers = Some((a, b));
                    last.map_or(Ok(()), |(c, d)| say(f, Item::Layers(c, d)))
                }
                (Held::None, item, _) => say(f, item),
                _ => Ok(()),
            })?;
        }
        if let Some((c, d)) = layers {
            say(f, Item::Layers(c, d))?;
        }
        if !none {
            f.write_str(" streamed")?;
            sep = "; ";
        }
        self.each(Value::Row, &mut |item, held| match held {
            Held::None => write!(f, "{sep}{item} streamed ({})", Value::Row.reason()),
            _ => Ok(()),
        })
    }
}
