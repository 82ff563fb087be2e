//! The token table: texts in one byte arena, a hash index for lookup by text, attributes and scores.

use super::NONE;
use crate::oom::{self, OutOfMemory};
use alloc::vec::Vec;

/// Token attributes, as bit flags (llama.cpp's `llama_token_attr`; a token can gain CONTROL when
/// its text marks it as an end or FIM token).
pub mod attr {
    pub const UNKNOWN: u8 = 1 << 0;
    pub const UNUSED: u8 = 1 << 1;
    pub const NORMAL: u8 = 1 << 2;
    pub const CONTROL: u8 = 1 << 3;
    pub const USER_DEFINED: u8 = 1 << 4;
    pub const BYTE: u8 = 1 << 5;

    /// The attribute of a GGUF `tokenizer.ggml.token_type` value (0 and unknown values: none).
    pub fn from_type(t: i64) -> u8 {
        match t {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => 0,
        }
    }
}

/// Byte strings stored back to back, addressed by index.
#[derive(Debug, Clone, Default)]
pub struct Arena {
    bytes: Vec<u8>,
    /// `ends[i]` is where string `i` ends; it starts where `i - 1` ends.
    ends: Vec<u32>,
}

impl Arena {
    pub fn with_capacity(n: usize) -> Result<Self, OutOfMemory> {
        Ok(Arena {
            bytes: Vec::new(),
            ends: oom::with_capacity(n, "token table")?,
        })
    }

    /// Append a string; `Ok(false)` if the arena would pass 4 GiB. Grows fallibly (amortized, as
    /// `Vec` does): running out is an error naming the token texts.
    pub fn push(&mut self, s: &[u8]) -> Result<bool, OutOfMemory> {
        let Some(end) = self
            .bytes
            .len()
            .checked_add(s.len())
            .and_then(|e| u32::try_from(e).ok())
        else {
            return Ok(false);
        };
        // The size reported is what amortized growth asks for: twice the room, or what is needed.
        let oom = |len: usize, cap: usize, more: usize, size: usize| OutOfMemory {
            what: "token texts",
            bytes: (cap * 2).max(len + more) * size,
        };
        let (len, cap) = (self.bytes.len(), self.bytes.capacity());
        let more = s.len();
        self.bytes
            .try_reserve(more)
            .map_err(|_| oom(len, cap, more, 1))?;
        let (len, cap) = (self.ends.len(), self.ends.capacity());
        self.ends.try_reserve(1).map_err(|_| oom(len, cap, 1, 4))?;
        self.bytes.extend_from_slice(s);
        self.ends.push(end);
        Ok(true)
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// String `i`, empty if there is none.
    pub fn get(&self, i: usize) -> &[u8] {
        let Some(&end) = self.ends.get(i) else {
            return &[];
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.bytes.get(start as usize..end as usize).unwrap_or(&[])
    }

    /// Give back the room growth left, if a copy of the exact size can be allocated (`Vec`'s
    /// `shrink_to_fit` reallocates infallibly); otherwise keep the room.
    pub fn shrink_to_fit(&mut self) {
        fn shrink<T: Copy>(v: &mut Vec<T>) {
            let mut exact = Vec::new();
            if v.capacity() > v.len() && exact.try_reserve_exact(v.len()).is_ok() {
                exact.extend_from_slice(v);
                *v = exact;
            }
        }
        shrink(&mut self.bytes);
        shrink(&mut self.ends);
    }
}

/// The vocabulary: token texts, attributes and scores, with lookup by text.
#[derive(Debug, Clone, Default)]
pub struct Vocab {
    pub texts: Arena,
    /// Open-addressing hash table of token ids by text (linear probing, [`NONE`] = empty slot,
    /// at most half full), so a lookup is a hash and one or two comparisons.
    index: Vec<u32>,
    pub attrs: Vec<u8>,
    pub scores: Vec<f32>,
}

/// FNV-1a, 64-bit.
fn hash(s: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in s {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Vocab {
    pub fn new(texts: Arena, attrs: Vec<u8>, scores: Vec<f32>) -> Self {
        Vocab {
            texts,
            index: Vec::new(),
            attrs,
            scores,
        }
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn text(&self, id: u32) -> &[u8] {
        self.texts.get(id as usize)
    }

    pub fn attr(&self, id: u32) -> u8 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }

    pub fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    /// Build the lookup table; returns the first pair of ids with the same text, if any.
    pub fn build_index(&mut self) -> Result<Option<(u32, u32)>, OutOfMemory> {
        let n = self.len();
        let slots = n.saturating_mul(2).next_power_of_two().max(16);
        let mask = slots - 1;
        let mut index = oom::filled(slots, NONE, "token index")?;
        for id in 0..n as u32 {
            let text = self.text(id);
            let mut h = hash(text) as usize & mask;
            loop {
                match index[h] {
                    NONE => {
                        index[h] = id;
                        break;
                    }
                    other if self.text(other) == text => return Ok(Some((other, id))),
                    _ => h = (h + 1) & mask,
                }
            }
        }
        self.index = index;
        Ok(None)
    }

    /// The id of the token whose text is `s`.
    pub fn find(&self, s: &[u8]) -> Option<u32> {
        if self.index.is_empty() {
            return None;
        }
        let mask = self.index.len() - 1;
        let mut h = hash(s) as usize & mask;
        // The table is at most half full, so an empty slot ends every probe sequence.
        loop {
            match self.index[h] {
                NONE => return None,
                id if self.text(id) == s => return Some(id),
                _ => h = (h + 1) & mask,
            }
        }
    }
}
