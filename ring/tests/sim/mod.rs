//! A ring of endpoints over fake lines on a simulated clock.

use ring::endpoint::{Endpoint, LinkError, Timing};
use ring::fake::{self, FakeLink, Faults, Rng};

/// Nanoseconds in a millisecond (the simulated clock counts nanoseconds).
pub const MS: u64 = 1_000_000;

/// Timing for lines that spoil or lose many frames: a short timeout, and patience (a frame may
/// take many tries); `window` frames in flight.
pub const fn patient(window: usize) -> Timing {
    Timing {
        rto_ns: 20 * MS,
        max_rto_ns: 80 * MS,
        max_tries: 256,
        window,
    }
}

/// Messages from one board to another and what has arrived of them.
#[derive(Debug)]
pub struct Flow {
    pub src: u8,
    pub dst: u8,
    pub msgs: Vec<Vec<u8>>,
    /// How many have been queued.
    pub sent: usize,
    pub got: Vec<Vec<u8>>,
}

impl Flow {
    /// `count` messages of random lengths `0..=max_len`, zeros included.
    pub fn random(src: u8, dst: u8, count: usize, max_len: usize, rng: &mut Rng) -> Self {
        let msgs = (0..count)
            .map(|_| {
                let len = rng.below(max_len as u64 + 1) as usize;
                (0..len).map(|_| rng.below(256) as u8).collect()
            })
            .collect();
        Self {
            src,
            dst,
            msgs,
            sent: 0,
            got: Vec::new(),
        }
    }

    fn done(&self) -> bool {
        self.got.len() == self.msgs.len()
    }
}

/// Endpoints, their links (for faults and stats) and the clock.
pub struct Sim {
    pub eps: Vec<Endpoint<FakeLink>>,
    pub links: Vec<FakeLink>,
    pub now: u64,
    pub step_ns: u64,
}

impl Sim {
    /// A ring of `boards` with board numbers in wire order `order` (normally 1..=boards).
    pub fn with_order(order: &[u8], faults: Faults, timing: Timing, step_ns: u64) -> Self {
        let links = fake::ring(order.len(), faults);
        let boards = order.len() as u8;
        let eps = order
            .iter()
            .zip(&links)
            .map(|(&me, link)| Endpoint::new(me, boards, link.clone(), timing))
            .collect();
        Self {
            eps,
            links,
            now: 0,
            step_ns,
        }
    }

    pub fn new(boards: u8, faults: Faults, timing: Timing, step_ns: u64) -> Self {
        let order: Vec<u8> = (1..=boards).collect();
        Self::with_order(&order, faults, timing, step_ns)
    }

    fn ep(&mut self, board: u8) -> &mut Endpoint<FakeLink> {
        let i = self
            .eps
            .iter()
            .position(|e| e.me() == board)
            .expect("board in ring");
        &mut self.eps[i]
    }

    /// One step: queue what fits, pump every live board, collect deliveries, advance the clock.
    /// Returns the pump errors as (board, error).
    pub fn step(&mut self, flows: &mut [Flow], skip: &[u8]) -> Vec<(u8, LinkError)> {
        for f in flows.iter_mut() {
            while f.sent < f.msgs.len() && self.ep(f.src).try_send(f.dst, &f.msgs[f.sent]).is_ok() {
                f.sent += 1;
            }
        }
        let mut errors = Vec::new();
        for ep in self.eps.iter_mut().filter(|e| !skip.contains(&e.me())) {
            if let Err(e) = ep.pump(self.now) {
                errors.push((ep.me(), e));
            }
            while let Some((src, msg)) = ep.recv() {
                let f = flows.iter_mut().find(|f| f.src == src && f.dst == ep.me());
                f.expect("a message on a flow of the test").got.push(msg);
            }
        }
        self.now += self.step_ns;
        errors
    }

    /// Step until every flow is delivered and every board idle; panics on a pump error or after
    /// `max_steps`. Returns the steps taken.
    pub fn run(&mut self, flows: &mut [Flow], max_steps: usize) -> usize {
        for steps in 0..max_steps {
            let errors = self.step(flows, &[]);
            assert!(errors.is_empty(), "step {steps}: {errors:?}");
            if flows.iter().all(Flow::done) && self.eps.iter().all(Endpoint::idle) {
                return steps;
            }
        }
        let progress: Vec<_> = flows.iter().map(|f| (f.src, f.dst, f.got.len())).collect();
        panic!("not done after {max_steps} steps: {progress:?}");
    }
}

/// Every message arrived exactly once and in order.
pub fn assert_delivered(flows: &[Flow]) {
    for f in flows {
        assert_eq!(f.got.len(), f.msgs.len(), "{} -> {}: count", f.src, f.dst);
        for (i, (got, want)) in f.got.iter().zip(&f.msgs).enumerate() {
            assert!(got == want, "{} -> {}: message {i} differs", f.src, f.dst);
        }
    }
}
