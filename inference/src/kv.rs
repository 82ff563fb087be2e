//! The KV cache: keys and values of every layer and position in f16, sized from the context length
//! asked for (not the model's maximum).
//!
//! A layer that attends over a sliding window (gemma3's local layers) keeps only the positions it
//! can still see, in a ring: position `p` lives in slot `p % slots`. The ring holds the window
//! plus one batch less one position, so that writing a whole prompt batch never overwrites a
//! position the batch's first token still attends to.

use crate::oom::{self, OutOfMemory};
use alloc::vec;
use alloc::vec::Vec;

/// Keys and values for `layers` layers of up to `ctx` positions of `kv_dim` values each, as f16
/// bits.
#[derive(Debug, Clone)]
pub struct KvCache {
    pub layers: usize,
    pub ctx: usize,
    pub kv_dim: usize,
    /// Positions each layer keeps (`ctx`, or a ring for a windowed layer).
    slots: Vec<usize>,
    /// Where each layer's rows start, in values.
    starts: Vec<usize>,
    /// `[layer][slot][kv_dim]`
    pub k: Vec<u16>,
    /// `[layer][slot][kv_dim]`
    pub v: Vec<u16>,
}

/// The cached rows a query at some position sees: `n` positions in order, the first in slot
/// `first` of a ring of `ring` slots (`keys` and `values` hold the whole ring, `kv_dim` values a
/// slot).
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub keys: &'a [u16],
    pub values: &'a [u16],
    pub n: usize,
    pub first: usize,
    pub ring: usize,
}

impl KvCache {
    /// Every layer keeps all `ctx` positions.
    pub fn new(layers: usize, ctx: usize, kv_dim: usize) -> Self {
        // As `vec!` does, a failed allocation stops here; the run uses `with_slots`.
        match Self::with_slots(ctx, kv_dim, &vec![ctx; layers]) {
            Ok(kv) => kv,
            Err(e) => panic!("{e}"),
        }
    }

    /// Layer `l` keeps `slots[l]` positions (at most `ctx`, at least 1).
    /// Allocates fallibly: running out is an error naming the KV cache.
    pub fn with_slots(ctx: usize, kv_dim: usize, slots: &[usize]) -> Result<Self, OutOfMemory> {
        let given = slots;
        let slots = oom::collect(given.len(), "KV cache slot table", |l| {
            given[l].clamp(1, ctx.max(1))
        })?;
        let mut starts = oom::with_capacity(slots.len(), "KV cache layer table")?;
        let mut n = 0;
        for &s in &slots {
            starts.push(n);
            n += s * kv_dim;
        }
        Ok(Self {
            layers: slots.len(),
            ctx,
            kv_dim,
            slots,
            starts,
            k: oom::filled(n, 0, "KV cache keys")?,
            v: oom::filled(n, 0, "KV cache values")?,
        })
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.k.len() + self.v.len()) * 2
    }

    /// Positions layer `layer` keeps.
    pub fn slots(&self, layer: usize) -> usize {
        self.slots[layer]
    }

    /// Whether every layer still holds positions `0..n` in slots `0..n` (no ring has wrapped).
    pub fn holds_prefix(&self, n: usize) -> bool {
        n <= self.ctx && self.slots.iter().all(|&s| n <= s)
    }

    fn layer(&self, layer: usize) -> core::ops::Range<usize> {
        let s = self.starts[layer];
        s..s + self.slots[layer] * self.kv_dim
    }

    fn at(&self, layer: usize, pos: usize) -> core::ops::Range<usize> {
        let s = self.starts[layer] + (pos % self.slots[layer]) * self.kv_dim;
        s..s + self.kv_dim
    }

    /// Keys of `layer` for positions `0..n` (`n` at most the layer's slots: see
    /// [`KvCache::holds_prefix`]).
    pub fn keys(&self, layer: usize, n: usize) -> &[u16] {
        let s = self.starts[layer];
        &self.k[s..s + n * self.kv_dim]
    }

    /// Values of `layer` for positions `0..n`.
    pub fn values(&self, layer: usize, n: usize) -> &[u16] {
        let s = self.starts[layer];
        &self.v[s..s + n * self.kv_dim]
    }

    /// Keys of `layer` for positions `0..n`, to be written (e.g. restored from a saved prompt).
    pub fn keys_mut(&mut self, layer: usize, n: usize) -> &mut [u16] {
        let s = self.starts[layer];
        &mut self.k[s..s + n * self.kv_dim]
    }

    /// Values of `layer` for positions `0..n`, to be written.
    pub fn values_mut(&mut self, layer: usize, n: usize) -> &mut [u16] {
        let s = self.starts[layer];
        &mut self.v[s..s + n * self.kv_dim]
    }

    /// The key and value slots of `layer` at `pos`, to be written.
    pub fn slot_mut(&mut self, layer: usize, pos: usize) -> (&mut [u16], &mut [u16]) {
        let r = self.at(layer, pos);
        (&mut self.k[r.clone()], &mut self.v[r])
    }

    /// Copy the keys and values of `layer` at position `from` to position `to` (a tree pass's
    /// accepted row to its place on the path).
    pub fn copy(&mut self, layer: usize, from: usize, to: usize) {
        let (a, b) = (self.at(layer, from), self.at(layer, to));
        if a != b {
            self.k.copy_within(a.clone(), b.start);
            self.v.copy_within(a, b.start);
        }
    }

    /// The slot of `layer` that holds position `pos`.
    pub fn slot(&self, layer: usize, pos: usize) -> usize {
        pos % self.slots[layer]
    }

    /// What a query at position `pos` of `layer` attends to: positions `pos + 1 - n ..= pos`, with
    /// `n` the whole history or, with a `window`, at most `window` positions. The ring must still
    /// hold them (`window` at most the layer's slots, or no wrap yet).
    pub fn seen(&self, layer: usize, pos: usize, window: Option<usize>) -> Seen<'_> {
        let n = window.map_or(pos + 1, |w| w.min(pos + 1));
        let r = self.layer(layer);
        let ring = self.slots[layer];
        Seen {
            keys: &self.k[r.clone()],
            values: &self.v[r],
            n,
            first: (pos + 1 - n) % ring,
            ring,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_the_last_positions_in_order() {
        // Layer 0 keeps all 10 positions, layer 1 a ring of 4.
        let mut kv = KvCache::with_slots(10, 2, &[10, 4]).unwrap();
        for p in 0..7 {
            for l in 0..2 {
                let (k, v) = kv.slot_mut(l, p);
                k.fill(p as u16);
                v.fill(100 + p as u16);
            }
        }
        assert!(kv.holds_prefix(4) && !kv.holds_prefix(5));
        let s = kv.seen(1, 6, Some(3));
        let got: Vec<u16> = (0..s.n)
            .map(|t| s.keys[((s.first + t) % s.ring) * 2])
            .collect();
        assert_eq!(got, [4, 5, 6]);
        let s = kv.seen(0, 6, None);
        assert_eq!((s.n, s.first, s.ring), (7, 0, 10));
        assert_eq!(kv.bytes(), (10 + 4) * 2 * 2 * 2);
    }
}
