//! Prompt-lookup decoding: the draft is what followed an earlier occurrence of the context's last
//! tokens.

use super::Draft;
use crate::generate::GenError;

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

    #[test]
    fn lookup_handles_empty_and_short_contexts() {
        assert!(proposed(&[], 3, 4).is_empty());
        assert!(proposed(&[5], 3, 4).is_empty());
        assert!(proposed(&[5, 6], 3, 4).is_empty());
        assert!(proposed(&[1, 2, 3], 0, 4).is_empty());
        assert_eq!(proposed(&[5, 5], 3, 4), [5, 5, 5, 5]);
    }
}
