//! The KV cache: keys and values of every layer and position in f16, sized from the context length
//! asked for (not the model's maximum).

use alloc::vec;
use alloc::vec::Vec;

/// Keys and values for `layers` layers of `ctx` positions of `kv_dim` values each, as f16 bits.
#[derive(Debug, Clone)]
pub struct KvCache {
    pub layers: usize,
    pub ctx: usize,
    pub kv_dim: usize,
    /// `[layer][pos][kv_dim]`
    pub k: Vec<u16>,
    /// `[layer][pos][kv_dim]`
    pub v: Vec<u16>,
}

impl KvCache {
    pub fn new(layers: usize, ctx: usize, kv_dim: usize) -> Self {
        let n = layers * ctx * kv_dim;
        Self {
            layers,
            ctx,
            kv_dim,
            k: vec![0; n],
            v: vec![0; n],
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.k.len() + self.v.len()) * 2
    }

    fn at(&self, layer: usize, pos: usize) -> core::ops::Range<usize> {
        let s = (layer * self.ctx + pos) * self.kv_dim;
        s..s + self.kv_dim
    }

    /// Keys of `layer` for positions `0..n`.
    pub fn keys(&self, layer: usize, n: usize) -> &[u16] {
        let s = layer * self.ctx * self.kv_dim;
        &self.k[s..s + n * self.kv_dim]
    }

    /// Values of `layer` for positions `0..n`.
    pub fn values(&self, layer: usize, n: usize) -> &[u16] {
        let s = layer * self.ctx * self.kv_dim;
        &self.v[s..s + n * self.kv_dim]
    }

    /// Keys of `layer` for positions `0..n`, to be written (e.g. restored from a saved prompt).
    pub fn keys_mut(&mut self, layer: usize, n: usize) -> &mut [u16] {
        let s = layer * self.ctx * self.kv_dim;
        &mut self.k[s..s + n * self.kv_dim]
    }

    /// Values of `layer` for positions `0..n`, to be written.
    pub fn values_mut(&mut self, layer: usize, n: usize) -> &mut [u16] {
        let s = layer * self.ctx * self.kv_dim;
        &mut self.v[s..s + n * self.kv_dim]
    }

    /// The key and value slots of `layer` at `pos`, to be written.
    pub fn slot_mut(&mut self, layer: usize, pos: usize) -> (&mut [u16], &mut [u16]) {
        let r = self.at(layer, pos);
        (&mut self.k[r.clone()], &mut self.v[r])
    }
}
