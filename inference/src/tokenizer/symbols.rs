//! The symbol list both merging tokenizers work on ([`super::bpe`] and [`super::spm`]): the text
//! cut into symbols linked in order, where merging a pair leaves one symbol in place of two.

use crate::oom::{self, OutOfMemory};
use alloc::vec::Vec;

/// A span of the text, linked to its neighbours; `data` is what the tokenizer keeps per symbol.
#[derive(Debug, Clone, Copy)]
pub struct Symbol<T> {
    pub start: usize,
    /// Bytes; 0 once merged into its left neighbour.
    pub len: usize,
    pub prev: usize,
    pub next: usize,
    pub data: T,
}

/// Symbols for consecutive spans `(len, data)` from byte 0, linked in order; there are at most
/// `n` spans (room for them is reserved at once, fallibly).
pub fn chain<T>(
    n: usize,
    spans: impl Iterator<Item = (usize, T)>,
) -> Result<Vec<Symbol<T>>, OutOfMemory> {
    let mut syms = oom::with_capacity(n, "the tokenizer's symbols")?;
    let mut start = 0;
    for (i, (len, data)) in spans.enumerate() {
        oom::push(
            &mut syms,
            Symbol {
                start,
                len,
                prev: i.wrapping_sub(1),
                next: i + 1,
                data,
            },
            "the tokenizer's symbols",
        )?;
        start += len;
    }
    if let Some(last) = syms.last_mut() {
        last.next = usize::MAX;
    }
    Ok(syms)
}

/// Merge symbol `right` into its left neighbour `left`; returns the merged symbol's neighbours
/// `(prev, next)`, whose pairs with it are the ones to queue next.
pub fn merge<T: Copy>(syms: &mut [Symbol<T>], left: usize, right: usize) -> (usize, usize) {
    let r = syms[right];
    let l = &mut syms[left];
    l.len += r.len;
    l.next = r.next;
    let prev = l.prev;
    syms[right].len = 0;
    if let Some(n) = syms.get_mut(r.next) {
        n.prev = left;
    }
    (prev, r.next)
}

/// The symbols left after merging, in text order.
pub fn in_order<T>(syms: &[Symbol<T>]) -> impl Iterator<Item = &Symbol<T>> {
    let mut i = 0;
    core::iter::from_fn(move || {
        let s = syms.get(i)?;
        i = s.next;
        Some(s)
    })
}
