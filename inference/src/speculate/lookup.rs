//! Prompt-lookup decoding: the draft is what followed an earlier occurrence of the context's last
//! tokens; as a tree, what followed each of the latest occurrences, the continuations most of
//! them share first.

use super::Draft;
use crate::generate::GenError;
use crate::model::Tree;
use alloc::vec::Vec;

/// Prompt-lookup decoding: the tokens that followed the latest earlier occurrence of the
/// context's last `n` tokens, `n` from `max_n` down to 1. Costs no memory; suits replies that
/// quote the prompt (code edits, extraction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    /// Longest tail searched for.
    pub max_n: usize,
    /// Most tokens proposed at once.
    pub max_draft: usize,
}

impl Draft for Lookup {
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        let k = out.len().min(self.max_draft);
        Ok(lookup(context, self.max_n, &mut out[..k]))
    }

    fn propose_tree(&mut self, context: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        let room = tree.room().min(self.max_draft);
        lookup_tree(context, self.max_n, room, tree);
        Ok(0)
    }
}

/// Occurrences of the tail [`lookup_tree`] follows at most (the latest).
pub const MAX_OCCURRENCES: usize = 16;

/// [`lookup`] as a tree of up to `room` rows below `tree`'s root: the continuations of the
/// latest `MAX_OCCURRENCES` occurrences of the longest tail that occurs, merged where they
/// agree; the rows most of them pass through go in (ties to the shallower row, then to the
/// latest occurrence), so one occurrence gives [`lookup`]'s chain.
pub fn lookup_tree(context: &[u32], max_n: usize, room: usize, tree: &mut Tree) {
    let len = context.len();
    let room = room.min(tree.room());
    for n in (1..=max_n.min(len.saturating_sub(1))).rev() {
        let tail = &context[len - n..];
        let starts = (0..len - n)
            .rev()
            .filter(|&i| &context[i..i + n] == tail)
            .take(MAX_OCCURRENCES);
        // A trie of the continuations: (parent, token, occurrences through it, depth).
        let mut trie: Vec<(usize, u32, u32, usize)> = Vec::new();
        let mut cont = [0u32; crate::quant::MAX_BATCH];
        for i in starts {
            let mut at = usize::MAX;
            for j in 0..room {
                let p = i + n + j;
                cont[j] = if p < len { context[p] } else { cont[p - len] };
                let found = trie.iter().position(|e| e.0 == at && e.1 == cont[j]);
                at = match found {
                    Some(f) => f,
                    None => {
                        trie.push((at, cont[j], 0, j));
                        trie.len() - 1
                    }
                };
                trie[at].2 += 1;
            }
        }
        if trie.is_empty() {
            continue;
        }
        // The `room` rows most occurrences pass through (a parent has at least its children's
        // count and is shallower, so a parent always goes in before its children).
        let mut order: Vec<usize> = (0..trie.len()).collect();
        order.sort_by_key(|&e| (core::cmp::Reverse(trie[e].2), trie[e].3, e));
        let mut row = alloc::vec![usize::MAX; trie.len()];
        for &e in order.iter().take(room) {
            let (parent, token, _, _) = trie[e];
            let from = if parent == usize::MAX { 0 } else { row[parent] };
            if let Some(r) = tree.child(from, token) {
                row[e] = r;
            }
        }
        return;
    }
}

/// The continuation of the latest earlier occurrence of `context`'s last `n` tokens (longest `n`
/// up to `max_n` first) into `out`, filling it; how many tokens (0: no match). Where the
/// continuation reaches the end of the context it goes on over what it proposed, as an LZ77 copy
/// does: a context that repeats with some period is proposed to go on repeating.
pub fn lookup(context: &[u32], max_n: usize, out: &mut [u32]) -> usize {
    let len = context.len();
    for n in (1..=max_n.min(len.saturating_sub(1))).rev() {
        let tail = &context[len - n..];
        // Starts before the tail's own: at least one token follows.
        if let Some(i) = (0..len - n).rev().find(|&i| &context[i..i + n] == tail) {
            for j in 0..out.len() {
                // Token j follows at i + n + j of the context and then of the proposal.
                let at = i + n + j;
                out[j] = if at < len { context[at] } else { out[at - len] };
            }
            return out.len();
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// `lookup` on `context` with room for `k` tokens: what it proposes.
    fn proposed(context: &[u32], max_n: usize, k: usize) -> Vec<u32> {
        let mut out = [0u32; 16];
        let m = lookup(context, max_n, &mut out[..k]);
        out[..m].to_vec()
    }

    #[test]
    fn lookup_takes_the_latest_match() {
        // "1 2" occurs twice before the tail; the later one is followed by 7 8.
        let c = [1, 2, 3, 4, 1, 2, 7, 8, 9, 1, 2];
        assert_eq!(proposed(&c, 2, 3), [7, 8, 9]);
    }

    #[test]
    fn lookup_tries_the_longest_tail_first() {
        // The tail "5 1 2" matches only the first occurrence; "1 2" alone the later one.
        let c = [5, 1, 2, 3, 1, 2, 4, 5, 1, 2];
        assert_eq!(proposed(&c, 3, 2), [3, 1]);
        assert_eq!(proposed(&c, 2, 2), [4, 5]);
        // n falls to 1 when no longer tail matches.
        assert_eq!(proposed(&[9, 4, 6, 4], 3, 1), [6]);
    }

    #[test]
    fn lookup_proposes_at_most_k_and_what_follows() {
        let c = [1, 2, 3, 4, 5, 6, 1];
        assert_eq!(proposed(&c, 2, 4), [2, 3, 4, 5]);
        assert_eq!(proposed(&c, 2, 0), [] as [u32; 0]);
        // Past the end of the context the continuation copies itself: the period repeats.
        assert_eq!(proposed(&[7, 7, 7], 2, 5), [7, 7, 7, 7, 7]);
        assert_eq!(proposed(&[1, 2, 3, 1, 2], 2, 5), [3, 1, 2, 3, 1]);
        let mut l = Lookup {
            max_n: 2,
            max_draft: 3,
        };
        let mut out = [0u32; 8];
        assert_eq!(l.propose(&c, &mut out), Ok(3));
        assert_eq!(out[..3], [2, 3, 4]);
    }

    /// [`lookup_tree`] on `context` with room for `room` rows: its tokens and parents.
    fn tree_of(context: &[u32], max_n: usize, room: usize) -> (Vec<u32>, Vec<u8>) {
        let mut t = Tree::new(99, 1 + room);
        lookup_tree(context, max_n, room, &mut t);
        (t.tokens().to_vec(), t.parents().to_vec())
    }

    #[test]
    fn lookup_trees_merge_the_occurrences() {
        // "1 2" was followed by 3 4, 3 5 and 7 8 (latest last): 3 twice, so first; then the
        // rows each occurrence passes through once, shallower first, the latest first.
        let c = [1, 2, 3, 4, 0, 1, 2, 3, 5, 0, 1, 2, 7, 8, 0, 1, 2];
        let (tokens, parents) = tree_of(&c, 2, 4);
        assert_eq!(tokens, [99, 3, 7, 8, 5]);
        assert_eq!(parents, [0, 0, 2, 1]);
        // One occurrence: lookup's chain.
        let c = [1, 2, 3, 4, 5, 6, 1];
        let mut out = [0u32; 4];
        lookup(&c, 2, &mut out);
        let (tokens, parents) = tree_of(&c, 2, 4);
        assert_eq!(tokens[1..], out);
        assert_eq!(parents, [0, 1, 2, 3]);
        // No room, no match: the root alone.
        assert_eq!(tree_of(&c, 2, 0).0, [99]);
        assert_eq!(tree_of(&[1, 2, 3], 2, 4).0, [99]);
    }

    #[test]
    fn lookup_handles_empty_and_short_contexts() {
        assert!(proposed(&[], 3, 4).is_empty());
        assert!(proposed(&[5], 3, 4).is_empty());
        assert!(proposed(&[5, 6], 3, 4).is_empty());
        assert!(proposed(&[1, 2, 3], 0, 4).is_empty());
        assert_eq!(proposed(&[5, 5], 3, 4), [5, 5, 5, 5]);
    }
}
