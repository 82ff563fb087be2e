//! Rings whose lines carry garbage between the frames, cut frames short and send old frames
//! again, on a simulated clock: every message arrives exactly once and in order, and a board
//! that dies is named by the boards waiting on it, within a bounded time; nothing hangs.

mod sim;

use ring::endpoint::{LinkError, Timing};
use ring::fake::{Faults, Rng};
use ring::link::Link;
use sim::{assert_delivered, Flow, Sim, MS};

/// Patient timing for lines that spoil many frames (as the lossy cases of `ring.rs`).
const PATIENT: Timing = sim::patient(8);

/// Seeds per test: each picks its ring size, its traffic and the fault rates. `LMBOOT_RING_SEEDS`
/// runs more (`LMBOOT_RING_SEEDS=2000 cargo test -p ring --test garbage`).
fn seeds() -> u64 {
    std::env::var("LMBOOT_RING_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

/// Garbage, truncation and replay at rates drawn from `rng` (per million frames: 1% to 15%),
/// with a little byte loss and reordering on some seeds.
fn hostile(seed: u64, rng: &mut Rng) -> Faults {
    let mut rate = |lo: u64, hi: u64| (lo + rng.below(hi - lo + 1)) as u32;
    Faults {
        seed,
        garbage_per_million: rate(10_000, 150_000),
        truncate_per_million: rate(10_000, 100_000),
        replay_per_million: rate(10_000, 150_000),
        reorder_per_million: if seed.is_multiple_of(3) {
            rate(0, 30_000)
        } else {
            0
        },
        drop_per_million: if seed.is_multiple_of(4) {
            rate(0, 500)
        } else {
            0
        },
        capacity: if seed.is_multiple_of(5) { 256 } else { 0 },
        // Half the seeds replay frames long out of date (acks included).
        replay_memory: if seed.is_multiple_of(2) { 0 } else { 100_000 },
        ..Faults::default()
    }
}

/// Random flows between random pairs of a ring of `boards`.
fn flows(boards: u8, rng: &mut Rng) -> Vec<Flow> {
    let mut flows: Vec<Flow> = Vec::new();
    let n = 1 + rng.below(4);
    for _ in 0..n {
        let src = 1 + rng.below(u64::from(boards)) as u8;
        let offset = 1 + rng.below(u64::from(boards) - 1) as u8;
        let dst = (src - 1 + offset) % boards + 1;
        if flows.iter().any(|f| f.src == src && f.dst == dst) {
            continue;
        }
        let count = 20 + rng.below(40) as usize;
        let max_len = [16, 64, 300][rng.below(3) as usize];
        flows.push(Flow::random(src, dst, count, max_len, rng));
    }
    flows
}

#[test]
fn messages_arrive_once_and_in_order_through_garbage_truncation_and_replays() {
    let mut totals = [0u64; 5];
    for seed in 0..seeds() {
        let mut rng = Rng::new(1000 + seed);
        let boards = 2 + (seed % 4) as u8;
        let faults = hostile(seed, &mut rng);
        let mut flows = flows(boards, &mut rng);
        let mut sim = Sim::new(boards, faults, PATIENT, MS);
        // Bounded: a hang fails here, naming the seed.
        let steps = sim.run(&mut flows, 300_000);
        assert_delivered(&flows);
        for (ep, link) in sim.eps.iter().zip(&sim.links) {
            let (s, l) = (ep.stats(), link.stats());
            totals[0] += l.garbage;
            totals[1] += l.truncated;
            totals[2] += l.replayed;
            totals[3] += s.duplicates;
            totals[4] += s.corrupt.total();
            assert_eq!(s.misordered, 0, "seed {seed}: board {}: {s:?}", ep.me());
        }
        eprintln!(
            "seed {seed}: ring of {boards}, {} flows, {steps} steps ({} ms simulated), {faults:?}",
            flows.len(),
            sim.now / MS
        );
    }
    let [garbage, truncated, replayed, duplicates, corrupt] = totals;
    eprintln!(
        "{} seeds: {garbage} garbage bytes, {truncated} frames cut, {replayed} replayed; the \
         endpoints dropped {duplicates} duplicates and {corrupt} broken frames",
        seeds()
    );
    // The faults happened, and the endpoints saw them.
    assert!(garbage > 0 && truncated > 0 && replayed > 0, "{totals:?}");
    assert!(duplicates > 0 && corrupt > 0, "{totals:?}");
}

#[test]
fn a_board_dying_under_garbage_is_named_in_bounded_time() {
    for seed in 0..seeds() / 2 {
        let mut rng = Rng::new(2000 + seed);
        let boards = 2 + (seed % 3) as u8;
        let victim = 1 + rng.below(u64::from(boards)) as u8;
        let faults = hostile(seed, &mut rng);
        // Every other board sends to the victim, which dies after a few steps.
        let mut flows: Vec<Flow> = (1..=boards)
            .filter(|&b| b != victim)
            .map(|b| Flow::random(b, victim, 200, 64, &mut rng))
            .collect();
        let mut sim = Sim::new(boards, faults, PATIENT, MS);
        let die_at = 5 + rng.below(50);
        // Acks from before the death replayed on the lines do not keep it alive past the give-up
        // time with stalls.
        let bound = die_at + PATIENT.give_up_stalled_ns() / MS + 1000;
        let mut named = Vec::new();
        let mut step = 0;
        while named.len() < flows.len() {
            assert!(
                step < bound,
                "seed {seed}: board {victim} died at step {die_at} and only {named:?} named it after {step} steps"
            );
            if step == die_at {
                sim.links[usize::from(victim) - 1].kill();
            }
            let dead: &[u8] = if step >= die_at { &[victim] } else { &[] };
            for (board, e) in sim.step(&mut flows, dead) {
                match e {
                    LinkError::PeerDead { board: b, .. } if b == victim => {
                        if !named.contains(&board) {
                            named.push(board);
                        }
                    }
                    other => panic!("seed {seed}: board {board}: {other} (board {victim} died)"),
                }
            }
            step += 1;
        }
        // What arrived before the end arrived once, in order.
        for f in &flows {
            assert!(f.got.len() <= f.msgs.len());
            assert!(
                f.got.iter().zip(&f.msgs).all(|(a, b)| a == b),
                "seed {seed}"
            );
        }
        eprintln!(
            "seed {seed}: ring of {boards}, board {victim} died at {die_at} ms, named by {named:?} at {step} ms"
        );
    }
}

/// The worst replay: the last ack of a board that died, sent again and again. It advances
/// nothing, so it must not keep the board alive: the board is named within the give-up time with
/// stalls.
#[test]
fn an_old_ack_replayed_for_ever_does_not_keep_a_dead_board_alive() {
    let timing = Timing {
        max_tries: 8,
        ..PATIENT
    };
    let mut links = ring::fake::ring(2, Faults::default());
    let mut me = ring::endpoint::Endpoint::new(1, 2, links[0].clone(), timing);
    me.try_send(2, b"anyone there?").unwrap();
    // Board 2's ack saying it expects frame 0 next: alive, but nothing taken.
    let mut ack = Vec::new();
    let h = ring::frame::Header {
        hop: 2,
        src: 2,
        dst: 1,
        kind: ring::frame::Kind::Ack,
        seq: 0,
    };
    ring::frame::encode(&h, &[], &mut ack);
    let bound = timing.give_up_stalled_ns() / MS + 100;
    let mut now = 0;
    let named = loop {
        assert!(now < bound, "board 2 not named after {now} ms");
        if now % 5 == 0 {
            assert_eq!(links[1].send(&ack), ack.len());
        }
        if let Err(e) = me.pump(now * MS) {
            break e;
        }
        now += 1;
    };
    assert_eq!(
        named,
        LinkError::PeerDead {
            board: 2,
            tries: timing.max_tries * ring::endpoint::STALL_FACTOR
        }
    );
    // Named later than a silent board would be (the acks counted as signs of life for a while).
    assert!(now * MS > timing.give_up_ns(), "{now} ms");
    eprintln!(
        "named after {now} ms (silent: {} ms, bound {} ms)",
        timing.give_up_ns() / MS,
        bound
    );
}
