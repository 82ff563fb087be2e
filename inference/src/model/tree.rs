//! A batch checked as a tree of candidates (SpecExec's, SpecInfer's token trees): row 0 is the
//! root, the token just taken; every other row is a guess that follows its parent row, an earlier
//! one. Rows of the same depth stand for the same position. The pass writes row `i`'s K/V to the
//! cache slot of position `base + i` (rotated for position `base + depth(i)`), and row `i` attends
//! to the positions before `base`, then to the rows on its own path, root first: the values and
//! the order of a one-token pass over that path, so each row's logits are bit for bit those of
//! feeding its path one token at a time. [`super::RunState::keep_path`] then moves the accepted
//! path's K/V to consecutive positions.

use crate::quant::MAX_BATCH;

/// Rows of a tree pass: tokens, each row's parent and depth (row 0, the root, has depth 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    n: usize,
    cap: usize,
    tokens: [u32; MAX_BATCH],
    parent: [u8; MAX_BATCH],
    depth: [u8; MAX_BATCH],
}

impl Tree {
    /// A tree of `root` alone, with room for `cap` rows in all (1 to [`MAX_BATCH`]).
    pub fn new(root: u32, cap: usize) -> Tree {
        let mut t = Tree {
            n: 1,
            cap: cap.clamp(1, MAX_BATCH),
            tokens: [0; MAX_BATCH],
            parent: [0; MAX_BATCH],
            depth: [0; MAX_BATCH],
        };
        t.tokens[0] = root;
        t
    }

    /// A tree of `parents.len() + 1` rows where row `i + 1` follows row `parents[i]` (tokens all
    /// 0: the shape of a batch whose hidden states a ring's board gets). `None` unless every
    /// parent is an earlier row and the rows fit a batch.
    pub fn from_parents(parents: &[u8]) -> Option<Tree> {
        let mut t = Tree::new(0, parents.len() + 1);
        if parents.len() + 1 > MAX_BATCH {
            return None;
        }
        for &p in parents {
            let p = p as usize;
            if p >= t.n {
                return None;
            }
            t.add(p, 0);
        }
        Some(t)
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether only the root is there (never: a tree has its root; for clippy's sake).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Rows that can still be added.
    pub fn room(&self) -> usize {
        self.cap - self.n
    }

    /// The token of every row.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens[..self.n]
    }

    /// The parent of every row but the root (row `i + 1`'s at `i`).
    pub fn parents(&self) -> &[u8] {
        &self.parent[1..self.n.max(1)]
    }

    /// Row `i`'s depth: its position less the root's.
    pub fn depth(&self, i: usize) -> usize {
        self.depth[i] as usize
    }

    /// Whether row `i` follows row `i - 1` for every `i`: a plain batch of consecutive tokens.
    pub fn is_chain(&self) -> bool {
        (1..self.n).all(|i| self.parent[i] as usize == i - 1)
    }

    /// Row `parent`'s child of `token`: the row there already, else a new one (`None` when the
    /// tree is full or `parent` is not a row).
    pub fn child(&mut self, parent: usize, token: u32) -> Option<usize> {
        if parent >= self.n {
            return None;
        }
        if let Some(c) = self.find(parent, token) {
            return Some(c);
        }
        (self.n < self.cap).then(|| self.add(parent, token))
    }

    /// Row `parent`'s child of `token`, if there is one.
    pub fn find(&self, parent: usize, token: u32) -> Option<usize> {
        (parent + 1..self.n).find(|&c| self.parent[c] as usize == parent && self.tokens[c] == token)
    }

    fn add(&mut self, parent: usize, token: u32) -> usize {
        let i = self.n;
        self.tokens[i] = token;
        self.parent[i] = parent as u8;
        self.depth[i] = self.depth[parent] + 1;
        self.n += 1;
        i
    }

    /// Follow `tokens` from row `from`, adding the rows not there yet while there is room; the
    /// row reached (the last one of `tokens` that fit).
    pub fn extend(&mut self, from: usize, tokens: &[u32]) -> usize {
        let mut at = from;
        for &t in tokens {
            match self.child(at, t) {
                Some(c) => at = c,
                None => break,
            }
        }
        at
    }

    /// The children of row `i`, in the order they were added (the drafts' order of preference).
    pub fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        (i + 1..self.n).filter(move |&c| self.parent[c] as usize == i)
    }

    /// The rows from the root to row `i`, root first, into `out`.
    pub fn path<'o>(&self, i: usize, out: &'o mut [u8; MAX_BATCH]) -> &'o [u8] {
        let d = self.depth(i);
        let mut r = i;
        for k in (0..=d).rev() {
            out[k] = r as u8;
            r = self.parent[r] as usize;
        }
        &out[..=d]
    }

    /// Keep only the rows whose guesses from the root on (the root's token left out) `keep`
    /// accepts, and their ancestors' (a refused row's descendants go with it).
    pub fn retain(&mut self, mut keep: impl FnMut(&[u32]) -> bool) {
        let mut new = Tree::new(self.tokens[0], self.cap);
        let mut at = [0u8; MAX_BATCH];
        let mut toks = [0u32; MAX_BATCH];
        let mut path = [0u8; MAX_BATCH];
        let mut alive = [false; MAX_BATCH];
        alive[0] = true;
        for i in 1..self.n {
            let p = self.parent[i] as usize;
            if !alive[p] {
                continue;
            }
            let rows = self.path(i, &mut path);
            for (t, &r) in toks.iter_mut().zip(&rows[1..]) {
                *t = self.tokens[r as usize];
            }
            if keep(&toks[..rows.len() - 1]) {
                alive[i] = true;
                at[i] = new.add(at[p] as usize, self.tokens[i]) as u8;
            }
        }
        *self = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_share_their_prefixes() {
        let mut t = Tree::new(7, 8);
        assert_eq!(t.extend(0, &[1, 2, 3]), 3);
        assert_eq!(t.extend(0, &[1, 2, 4]), 4);
        assert_eq!(t.extend(0, &[5]), 5);
        assert_eq!(t.tokens(), [7, 1, 2, 3, 4, 5]);
        assert_eq!(t.parents(), [0, 1, 2, 2, 0]);
        assert_eq!((t.depth(4), t.depth(5)), (3, 1));
        let mut p = [0u8; MAX_BATCH];
        assert_eq!(t.path(4, &mut p), [0, 1, 2, 4]);
        assert_eq!(t.children(2).collect::<alloc::vec::Vec<_>>(), [3, 4]);
        assert!(!t.is_chain());
        // Full: what does not fit is left out.
        assert_eq!(t.extend(5, &[6, 6, 6]), 7);
        assert_eq!((t.len(), t.room()), (8, 0));
        assert_eq!(t.child(0, 99), None);
        assert_eq!(t.child(0, 5), Some(5));
    }

    #[test]
    fn retain_drops_refused_rows_and_their_descendants() {
        let mut t = Tree::new(7, 16);
        t.extend(0, &[1, 2, 3]);
        t.extend(0, &[1, 9, 3]);
        t.extend(0, &[4]);
        t.retain(|g| !g.contains(&9));
        assert_eq!(t.tokens(), [7, 1, 2, 3, 4]);
        assert_eq!(t.parents(), [0, 1, 2, 0]);
        let mut c = Tree::new(7, 4);
        c.extend(0, &[1, 2, 3]);
        assert!(c.is_chain());
    }

    #[test]
    fn shapes_from_the_wire_are_checked() {
        let t = Tree::from_parents(&[0, 1, 0]).expect("a tree");
        assert_eq!((t.len(), t.depth(2), t.depth(3)), (4, 2, 1));
        assert!(Tree::from_parents(&[0, 3]).is_none());
        assert!(Tree::from_parents(&[1]).is_none());
        assert!(Tree::from_parents(&[0; MAX_BATCH]).is_none());
        assert!(Tree::from_parents(&[]).is_some_and(|t| t.len() == 1));
    }
}
