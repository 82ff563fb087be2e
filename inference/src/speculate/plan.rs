//! How many draft tokens to check per pass, from measured costs. A checking pass of `b` tokens
//! costs about `fixed + b · per_token`: `fixed` is what a pass pays once (weights read from the
//! card and decoded), `per_token` what each token adds (the arithmetic). Drafting costs `draft`
//! per guessed token. If each guess is taken with probability `α` (while the ones before it
//! were), `k` guesses give `1 + α + … + α^k` tokens per pass, so the planner picks the `k` with
//! the most tokens per second:
//!
//! ```text
//! k* = argmax over 0 ≤ k ≤ max of (1 − α^(k+1)) / (1 − α) / (fixed + (k + 1) · per_token + k · draft)
//! ```
//!
//! With the weights in RAM on a board whose passes are arithmetic, `fixed` is small against
//! `per_token` and `k* = 0`: no speculation, the plain loop's cost. Streaming from a card makes
//! `fixed` large and long drafts cheap. The costs are fitted to the passes as they run (least
//! squares over recent passes and the prompt's batches), from a prior (e.g. the boot profile)
//! until two batch sizes have been seen; `α` is counted over recent rounds; a guess's cost from a
//! prior (a self-draft's layers and head, streamed or not) until drafting has been timed. While
//! `k* = 0` a round of one guess is still tried now and then, so a context that starts to repeat
//! itself is noticed: after [`PROBE_EVERY`] rounds, the wait doubling after each probe refused
//! (up to [`PROBE_MAX`]) and back to [`PROBE_EVERY`] when a guess is taken, and longer for a
//! dear guess (probes take at most [`PROBE_SHARE`] of the time); never when the
//! source could not pay even with most guesses taken ([`HOPE_ALPHA`]), as a self-draft that
//! streams its layers: a source that never pays costs next to nothing.
//!
//! What a source takes from the page cache (a draft model's file, rows of logits) makes every
//! pass read more from the card; [`source_pays`] weighs that before the memory is taken.

/// Costs of a checking pass in the clock's units (nanoseconds on every platform here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassCost {
    /// Paid once per pass.
    pub fixed: f64,
    /// Added per token of the pass.
    pub per_token: f64,
}

/// Rounds with guesses checked before the planner trusts its acceptance: until then a round
/// checks one guess at most, so a source whose guesses are refused from the start (lookup on
/// free chat) costs one row a round, not a tree, while `α` is measured.
pub const SLOW_START: usize = 2;

/// Rounds before a probe of one guess while the planner finds drafting a loss.
pub const PROBE_EVERY: usize = 16;

/// Most rounds between probes, after probes refused one after another.
pub const PROBE_MAX: usize = 1024;

/// Share of the time probes may take: a probe whose guess costs a share `d` of a pass waits at
/// least `d / PROBE_SHARE` rounds (a self-draft streaming half the model: a hundred).
pub const PROBE_SHARE: f64 = 0.005;

/// The acceptance a source is credited with when asking whether it could ever pay (a probe is
/// worth it only if the source would win with this many guesses taken).
pub const HOPE_ALPHA: f64 = 0.8;

/// Weight of the past against a new observation (per observation).
const DECAY: f64 = 0.95;

/// Chooses the draft length of each round.
#[derive(Debug, Clone)]
pub struct Planner {
    /// Most guesses per pass.
    max: usize,
    /// Fixed: always `max` guesses (tests, and a user who knows best).
    fixed: bool,
    prior: Option<PassCost>,
    /// Decayed sums over passes for the fit `t = fixed + b · per_token`: weight, b, b², t, b·t.
    fit: [f64; 5],
    /// Decayed drafting time and guesses.
    draft: [f64; 2],
    /// Decayed guesses taken and rounds that ended on a rejected guess.
    taken: [f64; 2],
    /// Rounds since the last one with a guess while `k* = 0`.
    idle: usize,
    /// Rounds to wait before the next probe (doubles after each probe refused).
    probe_every: usize,
    /// The last round chosen was a probe.
    probing: bool,
    /// Probes so far.
    probes: usize,
    /// Rounds with guesses checked so far (up to [`SLOW_START`]).
    counted: usize,
}

impl Planner {
    /// Always `max` guesses per pass.
    pub fn fixed(max: usize) -> Planner {
        Planner {
            fixed: true,
            ..Planner::auto(max, None)
        }
    }

    /// At most `max` guesses per pass, as many as pay for themselves; `prior` stands for the
    /// pass costs until they are measured.
    pub fn auto(max: usize, prior: Option<PassCost>) -> Planner {
        Planner {
            max,
            fixed: false,
            prior,
            fit: [0.0; 5],
            draft: [0.0; 2],
            // One guess taken and one refused: α = 1/2 before anything is seen.
            taken: [1.0, 1.0],
            idle: 0,
            probe_every: PROBE_EVERY,
            probing: false,
            probes: 0,
            counted: 0,
        }
    }

    /// Credit guesses with acceptance `a` (0 < a < 1) until rounds have been counted, in place of
    /// the even odds [`Planner::auto`] starts from (e.g. [`SELF_DRAFT_ALPHA`]).
    pub fn with_acceptance_prior(mut self, a: f64) -> Planner {
        if a > 0.0 && a < 1.0 {
            self.taken = [2.0 * a, 2.0 * (1.0 - a)];
        }
        self
    }

    /// `t` stands for the time of a guess until drafting has been timed (e.g. a self-draft's
    /// layers and head: their card time when not resident, and their arithmetic).
    pub fn with_draft_prior(mut self, t: f64) -> Planner {
        if t > 0.0 {
            self.draft = [t, 1.0];
        }
        self
    }

    /// Probes tried so far (rounds of one guess while drafting was found a loss).
    pub fn probes(&self) -> usize {
        self.probes
    }

    /// Most guesses per pass.
    pub fn max(&self) -> usize {
        self.max
    }

    /// A pass of `b` tokens took `t`.
    pub fn pass(&mut self, b: usize, t: u64) {
        self.passes(b as f64, t as f64, 1.0);
    }

    /// The prompt: `tokens` in `passes` passes took `t` (one observation of the mean pass).
    pub fn prompt(&mut self, tokens: usize, passes: usize, t: u64) {
        if passes > 0 {
            let n = passes as f64;
            self.passes(tokens as f64 / n, t as f64 / n, n);
        }
    }

    fn passes(&mut self, b: f64, t: f64, weight: f64) {
        let f = &mut self.fit;
        for s in f.iter_mut() {
            *s *= DECAY;
        }
        f[0] += weight;
        f[1] += weight * b;
        f[2] += weight * b * b;
        f[3] += weight * t;
        f[4] += weight * b * t;
    }

    /// Guessing `n` tokens took `t`.
    pub fn drafted(&mut self, n: usize, t: u64) {
        if n > 0 {
            self.draft = [
                self.draft[0] * DECAY + t as f64,
                self.draft[1] * DECAY + n as f64,
            ];
        }
    }

    /// A round with guesses took `a` of them, one after another, and then refused the next
    /// (`refused`) or ran out of guesses.
    pub fn checked(&mut self, a: usize, refused: bool) {
        self.counted = (self.counted + 1).min(SLOW_START);
        if a > 0 {
            self.probe_every = PROBE_EVERY;
        } else if self.probing && refused {
            self.probe_every = (self.probe_every * 2).min(PROBE_MAX);
        }
        self.probing = false;
        self.taken = [
            self.taken[0] * DECAY + a as f64,
            self.taken[1] * DECAY + f64::from(u8::from(refused)),
        ];
    }

    /// The chance that a guess is taken once the ones before it were.
    pub fn acceptance(&self) -> f64 {
        self.taken[0] / (self.taken[0] + self.taken[1])
    }

    /// The pass costs as fitted (the prior until two batch sizes have been seen; without a prior,
    /// no amortization: every token costs the whole mean pass).
    pub fn cost(&self) -> PassCost {
        let [n, sb, sbb, st, sbt] = self.fit;
        let spread = n * sbb - sb * sb;
        if n > 0.0 && spread > 1e-6 * n * n {
            let per_token = ((n * sbt - sb * st) / spread).max(0.0);
            let fixed = ((st - per_token * sb) / n).max(0.0);
            return PassCost { fixed, per_token };
        }
        match (self.prior, n > 0.0) {
            (Some(p), _) => p,
            (None, true) => PassCost {
                fixed: 0.0,
                per_token: st / sb.max(1e-9),
            },
            (None, false) => PassCost {
                fixed: 1.0,
                per_token: 0.0,
            },
        }
    }

    /// Drafting time per guess (0 until measured).
    pub fn draft_cost(&self) -> f64 {
        self.draft[0] / self.draft[1].max(1e-9)
    }

    /// Guesses to check in the next pass, at most `room`.
    pub fn choose(&mut self, room: usize) -> usize {
        let room = room.min(self.max);
        if self.fixed || room == 0 {
            return room;
        }
        self.probing = false;
        let (cost, draft) = (self.cost(), self.draft_cost());
        let mut k = best_length(cost, draft, self.acceptance(), room);
        if self.counted < SLOW_START {
            k = k.min(1);
        }
        if k > 0 {
            self.idle = 0;
            return k;
        }
        // A probe only where the source could pay at all.
        if best_length(cost, draft, HOPE_ALPHA, room) == 0 {
            return 0;
        }
        self.idle += 1;
        let pass = cost.fixed + 2.0 * cost.per_token;
        let dear = draft / (PROBE_SHARE * pass.max(1e-9));
        let wait = (self.probe_every as f64).max(dear.min(PROBE_MAX as f64));
        if self.idle as f64 >= wait {
            self.idle = 0;
            self.probing = true;
            self.probes += 1;
            return 1;
        }
        0
    }
}

/// Acceptance a self-draft (the model's own first layers and head, no head trained for it) is
/// credited with before its rounds are counted: five times what this project measured at most
/// (0 to 2% of guesses taken, 14 of 28 layers on Qwen2.5-Coder-1.5B, 15 of 30 on SmolLM2), so a
/// self-draft whose guess costs a fifth of a pass (its layers streamed) is not tried on hope,
/// only probed now and then, and one whose layers are resident still is.
pub const SELF_DRAFT_ALPHA: f64 = 0.1;

/// Acceptance a draft model is credited with before it has run (a draft of the target's own
/// family takes most guesses: 0.8 is on the high side of what such pairs report).
pub const DRAFT_MODEL_ALPHA: f64 = 0.8;

/// Whether a resident draft model can pay for the RAM it takes from the page cache: with it, a
/// pass streams `with` bytes from the card instead of `without`; even if each of `max_guesses`
/// guesses were taken with probability [`DRAFT_MODEL_ALPHA`], the card bytes per token must not
/// grow. (Where nothing streams either way, the planner decides from the measured arithmetic.)
pub fn draft_model_pays(without: u64, with: u64, max_guesses: usize) -> bool {
    source_pays(without, with, DRAFT_MODEL_ALPHA, max_guesses)
}

/// Whether a source that takes memory from the page cache can pay for it: a pass streams
/// `with` bytes from the card with that memory taken and `without` bytes without; even if each
/// of `max_guesses` guesses were taken with probability `alpha` in turn, the card bytes per
/// generated token must not grow. (Where nothing streams, nothing is lost.)
pub fn source_pays(without: u64, with: u64, alpha: f64, max_guesses: usize) -> bool {
    with as f64 / tokens_per_pass(alpha, max_guesses) <= without as f64
}

/// Expected tokens per pass from `k` guesses each taken with probability `alpha` in turn.
pub fn tokens_per_pass(alpha: f64, k: usize) -> f64 {
    let mut sum = 0.0;
    let mut p = 1.0;
    for _ in 0..=k {
        sum += p;
        p *= alpha;
    }
    sum
}

/// The draft length up to `max` with the most tokens per unit of time.
pub fn best_length(cost: PassCost, draft: f64, alpha: f64, max: usize) -> usize {
    let rate = |k: usize| {
        let t = cost.fixed + (k + 1) as f64 * cost.per_token + k as f64 * draft;
        tokens_per_pass(alpha, k) / t.max(1e-9)
    };
    // Ties go to the shorter draft (the plain loop first).
    (0..=max).fold(0, |best, k| if rate(k) > rate(best) { k } else { best })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn compute_bound_passes_do_not_speculate_and_streamed_ones_do() {
        // Weights in RAM: a token of arithmetic costs as much as the pass's fixed part.
        let ram = PassCost {
            fixed: 1.0,
            per_token: 1.0,
        };
        assert_eq!(best_length(ram, 0.0, 0.3, 16), 0);
        // Streamed: the card's time dwarfs the arithmetic.
        let card = PassCost {
            fixed: 100.0,
            per_token: 1.0,
        };
        let k = best_length(card, 0.0, 0.7, 16);
        assert!((8..=16).contains(&k), "{k}");
        // A draft model's cost per guess pulls the length down.
        assert!(best_length(card, 20.0, 0.7, 16) < k);
        assert_eq!(tokens_per_pass(0.5, 2), 1.75);
        // A 491 MiB draft beside a 1 GiB target on a 1 GiB board: 81 MB a pass become 572 MB.
        assert!(!draft_model_pays(81 << 20, 572 << 20, 8));
        // A small draft that leaves the card's share of a pass nearly as it was pays.
        assert!(draft_model_pays(600 << 20, 650 << 20, 8));
        assert!(draft_model_pays(0, 0, 1));
    }

    /// A planner that has seen a prompt of 64 tokens in 2 passes of 32 and 3 passes of one, at
    /// 100 + 5 per token.
    fn measured() -> Planner {
        let mut p = Planner::auto(8, None);
        p.prompt(64, 2, 2 * (100 + 32 * 5));
        for _ in 0..3 {
            p.pass(1, 105);
        }
        p
    }

    #[test]
    fn the_fit_recovers_the_costs_and_the_planner_probes() {
        let mut p = measured();
        let c = p.cost();
        assert!(
            (c.fixed - 100.0).abs() < 1e-6 && (c.per_token - 5.0).abs() < 1e-6,
            "{c:?}"
        );
        // Guesses always refused: α falls and drafting stops, but for a probe now and then.
        for _ in 0..100 {
            p.checked(0, true);
        }
        assert!(p.acceptance() < 0.05);
        let lengths: Vec<usize> = (0..2 * PROBE_EVERY).map(|_| p.choose(8)).collect();
        assert_eq!(lengths.iter().filter(|&&k| k == 1).count(), 2);
        assert!(lengths.iter().all(|&k| k <= 1));
        // Guesses taken: long drafts pay.
        for _ in 0..100 {
            p.checked(4, false);
        }
        assert!(p.choose(8) >= 6);
        assert_eq!(p.choose(3), 3);
        assert_eq!(Planner::fixed(5).choose(9), 5);
    }

    /// Probes whose guesses are never taken come less and less often: over 2000 rounds, a
    /// handful instead of one every [`PROBE_EVERY`]; a guess taken brings them back.
    #[test]
    fn probes_back_off_when_refused() {
        let mut p = measured();
        for _ in 0..100 {
            p.checked(0, true);
        }
        let rounds = 2000;
        for _ in 0..rounds {
            if p.choose(8) > 0 {
                p.checked(0, true);
            }
        }
        // Without back-off: 125 probes. Waits of 16, 32, ... 1024 rounds: 7.
        assert!(p.probes() <= 8, "{} probes", p.probes());
        assert!(p.probes() >= 5, "{} probes", p.probes());
        // A probe taken: the next comes after PROBE_EVERY rounds again.
        let before = p.probes();
        let mut waited = 0;
        while p.choose(8) == 0 {
            waited += 1;
        }
        p.checked(1, false);
        let mut again = 0;
        while p.choose(8) == 0 {
            again += 1;
        }
        assert!(
            waited > PROBE_EVERY && again < PROBE_EVERY,
            "{waited} {again}"
        );
        // (The second may be no probe: one guess taken raises α.)
        assert!((before + 1..=before + 2).contains(&p.probes()));
    }

    /// Until [`SLOW_START`] rounds with guesses have been checked, a round checks one guess,
    /// however cheap guesses look; then as many as pay.
    #[test]
    fn the_first_rounds_check_one_guess() {
        let card = PassCost {
            fixed: 100.0,
            per_token: 1.0,
        };
        let mut p = Planner::auto(8, Some(card));
        for _ in 0..SLOW_START {
            assert_eq!(p.choose(8), 1);
            p.checked(1, false);
        }
        assert!(p.choose(8) > 1);
    }

    /// A source whose guess costs most of a pass (a self-draft streaming its layers) cannot
    /// pay even when most guesses are taken: auto never tries it, not even a probe.
    #[test]
    fn a_source_that_cannot_pay_is_never_probed() {
        let card = PassCost {
            fixed: 100.0,
            per_token: 1.0,
        };
        let mut p = Planner::auto(8, Some(card)).with_draft_prior(80.0);
        let lengths: Vec<usize> = (0..500).map(|_| p.choose(8)).collect();
        assert!(lengths.iter().all(|&k| k == 0));
        assert_eq!(p.probes(), 0);
        // A cheap one (its layers resident) is tried at once.
        let mut p = Planner::auto(8, Some(card)).with_draft_prior(2.0);
        assert!(p.choose(8) > 0);
        // A self-draft's prior acceptance: one whose guess costs a fifth of a pass is not
        // tried on hope (at even odds it would be), one whose layers are resident still is.
        let even = Planner::auto(8, Some(card)).with_draft_prior(20.0);
        assert!(even.clone().choose(8) > 0);
        let mut own = even.with_acceptance_prior(SELF_DRAFT_ALPHA);
        assert_eq!(own.choose(8), 0);
        let mut own = Planner::auto(8, Some(card))
            .with_draft_prior(2.0)
            .with_acceptance_prior(SELF_DRAFT_ALPHA);
        assert!(own.choose(8) > 0);
        // Memory taken from the page cache: 5% more card bytes a pass pays back easily with
        // guesses taken, 3x more does not.
        assert!(source_pays(100, 105, 0.5, 8));
        assert!(!source_pays(100, 300, 0.5, 8));
    }
}
