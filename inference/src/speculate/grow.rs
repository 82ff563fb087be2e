//! Which guesses of a model draft go in the tree: SpecExec's rule (the rows most likely to be
//! reached, by the draft's own probabilities) over the draft's greedy chain and the runner-up at
//! each step. The runner-up costs no draft pass (its logits are those of the chain token's), and
//! it is the row that takes over where the target disagrees with the draft's first choice.

use crate::model::Tree;
use crate::quant::MAX_BATCH;

/// A draft's steps so far: the chain token and the runner-up of each, with the chance the draft
/// gives to reaching them from the root.
#[derive(Debug)]
pub struct Growth {
    room: usize,
    steps: usize,
    /// `(token, reach)` of the chain's row at each step.
    chain: [(u32, f32); MAX_BATCH],
    /// `(token, reach)` of the runner-up at each step (`reach` 0: none).
    second: [(u32, f32); MAX_BATCH],
}

impl Growth {
    /// Room for `room` guesses (at most [`MAX_BATCH`] - 1).
    pub fn new(room: usize) -> Growth {
        Growth {
            room: room.min(MAX_BATCH - 1),
            steps: 0,
            chain: [(0, 0.0); MAX_BATCH],
            second: [(0, 0.0); MAX_BATCH],
        }
    }

    /// The draft's logits after the chain so far: the chain goes on with the best token and the
    /// runner-up is noted. The token to feed the draft for another step, or `None` when no
    /// deeper row could be among the `room` most likely to be reached.
    pub fn step(&mut self, logits: &[f32]) -> Option<u32> {
        self.step_ids(logits, |i| i)
    }

    /// [`Growth::step`] over scores of some tokens only (a cut head's rows), `id` naming the
    /// token of each index.
    pub fn step_ids(&mut self, logits: &[f32], id: impl Fn(u32) -> u32) -> Option<u32> {
        if self.steps >= self.room {
            return None;
        }
        let [(t1, q1), (t2, q2)] = top_two(logits);
        let (t1, t2) = (id(t1), id(t2));
        let before = match self.steps {
            0 => 1.0,
            s => self.chain[s - 1].1,
        };
        self.chain[self.steps] = (t1, before * q1);
        self.second[self.steps] = (t2, before * q2);
        self.steps += 1;
        // Every deeper row is reached at most as often as this chain row: go on only while
        // fewer than `room` rows beat it.
        let bar = before * q1;
        let above = self.steps
            + self.second[..self.steps]
                .iter()
                .filter(|s| s.1 >= bar)
                .count();
        (above < self.room && self.steps < self.room).then_some(t1)
    }

    /// The `room` rows most likely reached, into `tree` below its root: the chain rows first at
    /// each depth, then the runner-up (the order the sampler checks them in).
    pub fn plant(&self, tree: &mut Tree) {
        let n = self.steps;
        let mut reach = [0f32; 2 * MAX_BATCH];
        for i in 0..n {
            reach[2 * i] = self.chain[i].1;
            reach[2 * i + 1] = self.second[i].1;
        }
        // The `room`-th largest reach: rows at or above it go in, ties to the shallower.
        let mut sorted = reach;
        let sorted = &mut sorted[..2 * n];
        sorted.sort_unstable_by(|a, b| b.total_cmp(a));
        let Some(&bar) = sorted.get(self.room.min(2 * n).saturating_sub(1)) else {
            return;
        };
        let mut left = self.room;
        let mut at = 0;
        for i in 0..n {
            let (chain, second) = (self.chain[i], self.second[i]);
            let row = (chain.1 >= bar && left > 0)
                .then(|| tree.child(at, chain.0))
                .flatten();
            left -= usize::from(row.is_some());
            if second.1 > 0.0 && second.1 >= bar && left > 0 && tree.child(at, second.0).is_some() {
                left -= 1;
            }
            match row {
                Some(r) => at = r,
                None => break,
            }
        }
    }
}

/// The two best tokens of `logits` and their probabilities under a softmax (ties to the lower
/// id; the runner-up's probability is 0 when there is none or it is not finite).
pub fn top_two(logits: &[f32]) -> [(u32, f32); 2] {
    let (mut b1, mut b2) = ((0u32, f32::NEG_INFINITY), (0u32, f32::NEG_INFINITY));
    for (i, &l) in logits.iter().enumerate() {
        if l > b1.1 {
            b2 = b1;
            b1 = (i as u32, l);
        } else if l > b2.1 {
            b2 = (i as u32, l);
        }
    }
    if !b1.1.is_finite() {
        return [(b1.0, 1.0), (b2.0, 0.0)];
    }
    let sum: f32 = logits
        .iter()
        .filter(|l| l.is_finite())
        .map(|&l| libm::expf(l - b1.1))
        .sum();
    let p = |l: f32| {
        if l.is_finite() {
            libm::expf(l - b1.1) / sum
        } else {
            0.0
        }
    };
    [(b1.0, p(b1.1)), (b2.0, p(b2.1))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Logits giving token `a` probability about `pa` and token `b` about `pb` of 4 tokens.
    fn logits(a: usize, pa: f32, b: usize, pb: f32) -> alloc::vec::Vec<f32> {
        let rest = (1.0 - pa - pb) / 2.0;
        let mut l = vec![libm::logf(rest); 4];
        l[a] = libm::logf(pa);
        l[b] = libm::logf(pb);
        l
    }

    #[test]
    fn a_sure_draft_grows_a_chain() {
        let mut g = Growth::new(3);
        assert_eq!(g.step(&logits(1, 0.97, 2, 0.01)), Some(1));
        assert_eq!(g.step(&logits(2, 0.97, 3, 0.01)), Some(2));
        assert_eq!(g.step(&logits(3, 0.97, 0, 0.01)), None);
        let mut t = Tree::new(9, 4);
        g.plant(&mut t);
        assert_eq!(t.tokens(), [9, 1, 2, 3]);
        assert!(t.is_chain());
    }

    #[test]
    fn an_unsure_draft_adds_its_runners_up_and_stops_early() {
        // Step 1 is a toss-up: its runner-up (0.45) beats any row past step 2.
        let mut g = Growth::new(3);
        assert_eq!(g.step(&logits(1, 0.5, 2, 0.45)), Some(1));
        // Rows: chain 1 (0.5), second 2 (0.45), chain 2 (0.4): three at or above 0.4, stop.
        assert_eq!(g.step(&logits(3, 0.8, 0, 0.1)), None);
        let mut t = Tree::new(9, 4);
        g.plant(&mut t);
        assert_eq!(t.tokens(), [9, 1, 2, 3]);
        assert_eq!(t.parents(), [0, 0, 1]);
    }

    #[test]
    fn top_two_and_its_probabilities() {
        let [(a, pa), (b, pb)] = top_two(&[0.0, 2.0, 1.0, f32::NEG_INFINITY]);
        assert_eq!((a, b), (1, 2));
        let z = 1.0 + libm::expf(-1.0) + libm::expf(-2.0);
        assert!((pa - 1.0 / z).abs() < 1e-6 && (pb - libm::expf(-1.0) / z).abs() < 1e-6);
        assert_eq!(top_two(&[f32::NEG_INFINITY; 3])[1].1, 0.0);
        assert_eq!(top_two(&[5.0])[1].1, 0.0);
    }
}
