//! Endpoints in rings of fake lines: delivery under faults, dead boards, wrong wiring,
//! back-pressure, statistics.

mod sim;

use ring::endpoint::{Endpoint, LinkError, SendError, Timing};
use ring::fake::{self, FakeLink, Faults, Rng};
use ring::frame::{MAX_PAYLOAD, MAX_WIRE};
use sim::{assert_delivered, Flow, Sim, MS};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// For lines that lose frames often: a short timeout, and patience. At 1% byte loss a frame
/// crossing two lines and its ack crossing one arrive together about one time in three, less
/// across five boards; a timeout resends the oldest frame alone, so a frame may take many tries.
const LOSSY: Timing = sim::patient(16);

/// What goes wrong, how long the messages may be, the protocol's timing, the clock's step.
struct Case {
    faults: Faults,
    max_len: usize,
    timing: Timing,
    step_ns: u64,
}

fn clean() -> Case {
    let faults = Faults {
        seed: 11,
        ..Faults::default()
    };
    Case {
        faults,
        max_len: MAX_PAYLOAD,
        timing: Timing::default(),
        step_ns: MS,
    }
}

/// Lines that lose bytes, flip bits or swap frames (`[drop, flip, reorder]` per million), with
/// the lossy timing. With 1% of bytes lost a frame of a few hundred bytes almost never arrives
/// whole, so those cases use short messages.
fn lossy(seed: u64, max_len: usize, [drop, flip, reorder]: [u32; 3]) -> Case {
    let faults = Faults {
        seed,
        drop_per_million: drop,
        flip_per_million: flip,
        reorder_per_million: reorder,
        capacity: 0,
        ..Faults::default()
    };
    Case {
        faults,
        max_len,
        timing: LOSSY,
        step_ns: MS,
    }
}

fn byte_loss() -> Case {
    lossy(12, 32, [10_000, 0, 0])
}

fn bit_flips() -> Case {
    lossy(13, 64, [0, 5_000, 0])
}

fn reordering() -> Case {
    lossy(14, 1024, [0, 0, 50_000])
}

fn all_faults() -> Case {
    lossy(15, 32, [10_000, 5_000, 50_000])
}

/// Lines that buffer 64 bytes: `send` takes part of a frame at a time. The fake moves at most a
/// line's capacity per step, so the step is short for the default timeout.
fn small_capacity() -> Case {
    let faults = Faults {
        seed: 16,
        capacity: 64,
        ..Faults::default()
    };
    Case {
        faults,
        max_len: MAX_PAYLOAD,
        timing: Timing::default(),
        step_ns: 10_000,
    }
}

/// 200 messages each way between boards 1 and 2 in a ring of `boards`; all must arrive exactly
/// once, in order.
fn exchange(boards: u8, case: Case) -> Sim {
    let mut rng = Rng::new(case.faults.seed);
    let mut flows = [
        Flow::random(1, 2, 200, case.max_len, &mut rng),
        Flow::random(2, 1, 200, case.max_len, &mut rng),
    ];
    let mut sim = Sim::new(boards, case.faults, case.timing, case.step_ns);
    let steps = sim.run(&mut flows, 400_000);
    assert_delivered(&flows);
    // Shown with --nocapture: how hard the protocol worked.
    eprintln!(
        "ring of {boards}: {steps} steps, {} ms simulated",
        sim.now / MS
    );
    for ep in &sim.eps {
        eprintln!("  board {}: {:?}", ep.me(), ep.stats());
    }
    let f = case.faults;
    let faultless = (f.drop_per_million | f.flip_per_million | f.reorder_per_million) == 0;
    for ep in sim.eps.iter().filter(|_| faultless) {
        let s = ep.stats();
        assert_eq!((s.retransmitted, s.corrupt.total()), (0, 0), "{s:?}");
    }
    if boards == 3 {
        // 2 -> 1 data and acks go 2 -> 3 -> 1: board 3 passed them on.
        let third = sim.eps[2].stats();
        assert!(third.forwarded >= 200, "{third:?}");
        assert_eq!(third.delivered, 0);
    }
    sim
}

/// The same cases in a ring of 2 and a ring of 3.
macro_rules! cases {
    ($($name:ident),*) => {
        mod two_boards {
            $(#[test] fn $name() { super::exchange(2, super::$name()); })*
        }
        mod three_boards {
            $(#[test] fn $name() { super::exchange(3, super::$name()); })*
        }
    };
}

cases!(
    clean,
    byte_loss,
    bit_flips,
    reordering,
    all_faults,
    small_capacity
);

/// Every board sends to every other in a ring of 5, with every fault at once.
#[test]
fn five_boards_all_pairs_all_faults() {
    let case = all_faults();
    let mut rng = Rng::new(21);
    let mut flows = Vec::new();
    for src in 1..=5 {
        for dst in (1..=5).filter(|&d| d != src) {
            flows.push(Flow::random(src, dst, 40, case.max_len, &mut rng));
        }
    }
    let mut sim = Sim::new(5, case.faults, case.timing, case.step_ns);
    sim.run(&mut flows, 400_000);
    assert_delivered(&flows);
}

#[test]
fn stats_count_retransmissions_and_corrupt_frames() {
    let sim = exchange(3, all_faults());
    let sum = |f: fn(&ring::endpoint::Stats) -> u64| -> u64 {
        sim.eps.iter().map(|e| f(&e.stats())).sum()
    };
    assert_eq!(sum(|s| s.delivered), 400);
    assert!(sum(|s| s.retransmitted) > 0);
    assert!(sum(|s| s.corrupt.crc + s.corrupt.cobs) > 0);
    assert!(sum(|s| s.duplicates + s.out_of_order) > 0);
    let lines: Vec<_> = sim.links.iter().map(|l| l.stats()).collect();
    assert!(
        lines.iter().all(|l| l.dropped > 0 && l.flipped > 0),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.reordered > 0), "{lines:?}");
}

/// Board 2 of 3 loses power mid-transfer: board 1 reports it within (max_tries + 1) timeouts.
#[test]
fn dead_peer_is_reported_within_max_tries_timeouts() {
    let timing = Timing::default();
    let mut rng = Rng::new(31);
    let mut flows = [Flow::random(1, 2, 200, 256, &mut rng)];
    let mut sim = Sim::new(3, Faults::default(), timing, MS);
    let mut killed_at = None;
    let limit = timing.give_up_ns() / MS + 3 * timing.rto_ns / MS;
    for _ in 0..10_000 + limit {
        if killed_at.is_none() && flows[0].got.len() >= 50 {
            sim.links[1].kill();
            killed_at = Some(sim.now);
        }
        let now = sim.now;
        let errors = sim.step(&mut flows, &[]);
        if let Some(&(board, e)) = errors.iter().find(|(b, _)| *b == 1) {
            let killed = killed_at.expect("no error before the kill");
            assert_eq!((board, e), (1, LinkError::PeerDead { board: 2, tries: 8 }));
            let bound = timing.give_up_ns();
            eprintln!(
                "board 2 reported dead {} ms after the kill",
                (now - killed) / MS
            );
            assert!(
                now - killed <= bound,
                "reported {} ms after the kill",
                (now - killed) / MS
            );
            assert!(sim.eps[0].last_heard(2).is_some_and(|t| t <= killed));
            assert!(e
                .to_string()
                .contains("board 2 did not acknowledge after 8 tries"));
            // It stays reported while it lasts.
            assert_eq!(sim.eps[0].pump(sim.now), Err(e));
            return;
        }
        assert!(errors.is_empty(), "{errors:?}");
    }
    panic!("board 1 never reported board 2 dead");
}

/// Boards configured 1, 3, 2 around the wire: the board in the second place hears from board 1
/// where board 2 should be.
#[test]
fn misordered_ring_is_reported() {
    let mut sim = Sim::with_order(&[1, 3, 2], Faults::default(), Timing::default(), MS);
    let mut rng = Rng::new(41);
    let mut flows = [Flow::random(1, 2, 5, 100, &mut rng)];
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen.extend(sim.step(&mut flows, &[]));
    }
    let want = (
        3,
        LinkError::Misordered {
            expected: 2,
            got: 1,
        },
    );
    assert!(seen.contains(&want), "{seen:?}");
    assert!(flows[0].got.is_empty());
    let text = want.1.to_string();
    assert!(
        text.contains("board 1") && text.contains("board 2"),
        "{text}"
    );
}

/// Board 3 stops pumping for 50 timeouts; board 2, which passes 1 -> 3 traffic on, fills its
/// outbound queue to its bound with board 1's frames and resends and then stops reading (board
/// 1's line holds the rest, never more than its capacity), so board 2's memory stays bounded.
/// Once board 2 has been stuck for a whole timeout it sheds the copies it was passing on. When
/// board 3 comes back, everything arrives once, in order.
#[test]
fn back_pressure_bounds_a_forwarding_queue() {
    let timing = Timing {
        rto_ns: 20 * MS,
        max_rto_ns: 80 * MS,
        max_tries: 200,
        window: 2,
    };
    let faults = Faults {
        capacity: 1024,
        ..Faults::default()
    };
    let mut flows = [Flow {
        src: 1,
        dst: 3,
        msgs: (0..40u8).map(|i| vec![i; MAX_PAYLOAD]).collect(),
        sent: 0,
        got: Vec::new(),
    }];
    let mut sim = Sim::new(3, faults, timing, MS);
    let bound = timing.window * 3 * MAX_WIRE;
    let (mut most, mut line) = (0, 0);
    for _ in 0..1000 {
        assert!(sim.step(&mut flows, &[3]).is_empty());
        most = most.max(sim.eps[1].queued_bytes());
        line = line.max(sim.links[0].queued());
    }
    assert!(
        most >= bound,
        "board 2 never filled its queue: {most} < {bound}"
    );
    assert!(
        most < bound + 2 * MAX_WIRE,
        "board 2 queued {most} bytes, bound {bound}"
    );
    assert!(
        line <= 1024,
        "board 1's line holds {line} bytes, more than its capacity"
    );
    assert!(sim.eps[1].stats().shed > 0);
    sim.run(&mut flows, 100_000);
    assert_delivered(&flows);
}

#[test]
fn nothing_is_sent_before_the_first_pump() {
    let links = fake::ring(2, Faults::default());
    let mut ep = Endpoint::new(1, 2, links[0].clone(), Timing::default());
    ep.try_send(2, b"hello").unwrap();
    assert_eq!(links[0].queued(), 0);
    assert!(!ep.idle());
    ep.pump(0).unwrap();
    assert!(links[0].queued() > 0);
}

#[test]
fn bad_sends_are_refused_with_the_reason() {
    let links = fake::ring(3, Faults::default());
    let timing = Timing {
        window: 2,
        ..Timing::default()
    };
    let mut ep = Endpoint::new(2, 3, links[1].clone(), timing);
    let bad = |board| SendError::BadBoard {
        board,
        me: 2,
        boards: 3,
    };
    assert_eq!(ep.try_send(2, b"x"), Err(bad(2)));
    assert_eq!(ep.try_send(0, b"x"), Err(bad(0)));
    assert_eq!(ep.try_send(4, b"x"), Err(bad(4)));
    let long = vec![0; MAX_PAYLOAD + 1];
    assert_eq!(
        ep.try_send(1, &long),
        Err(SendError::TooLong {
            len: MAX_PAYLOAD + 1
        })
    );
    assert_eq!(ep.try_send(1, &long[..MAX_PAYLOAD]), Ok(()));
    assert_eq!(ep.try_send(1, b""), Ok(()));
    assert_eq!(
        ep.try_send(1, b"x"),
        Err(SendError::WindowFull {
            board: 1,
            window: 2
        })
    );
    assert_eq!(ep.try_send(3, b"x"), Ok(()), "windows are per destination");
    assert!(bad(4).to_string().contains("board 4"));
}

#[test]
fn a_position_outside_the_ring_is_an_error() {
    for (me, boards) in [(0, 3), (4, 3), (1, 9), (1, 0)] {
        let links = fake::ring(1, Faults::default());
        let mut ep = Endpoint::new(me, boards, links[0].clone(), Timing::default());
        assert_eq!(ep.pump(0), Err(LinkError::BadPosition { me, boards }));
        assert!(ep.try_send(1, b"x").is_err());
    }
}

/// One board's thread: send 100 messages to `dst`, count what arrives, keep pumping (passing
/// frames on) until all three boards are done. Bounded by a minute of real time.
fn board_thread(me: u8, dst: u8, link: FakeLink, done: &AtomicUsize, start: Instant) -> u32 {
    let mut ep = Endpoint::new(me, 3, link, Timing::default());
    let (mut sent, mut got, mut finished) = (0u32, 0u32, false);
    while start.elapsed() < Duration::from_secs(60) {
        while sent < 100 && ep.try_send(dst, &sent.to_le_bytes()).is_ok() {
            sent += 1;
        }
        ep.pump(start.elapsed().as_nanos() as u64).expect("pump");
        while ep.recv().is_some() {
            got += 1;
        }
        if !finished && sent == 100 && ep.idle() {
            finished = true;
            done.fetch_add(1, Ordering::SeqCst);
        }
        if done.load(Ordering::SeqCst) == 3 {
            return got;
        }
        std::thread::yield_now();
    }
    panic!("board {me} timed out");
}

/// Each board in its own thread on the real clock: the links are `Send` and the endpoint needs
/// no lock of its own. 1 -> 2 crosses one line; 2 -> 1 and 3 -> 1 pass board 3 and board 1.
#[test]
fn boards_on_threads() {
    let links = fake::ring(
        3,
        Faults {
            seed: 51,
            capacity: 256,
            ..Faults::default()
        },
    );
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let threads: Vec<_> = (1..=3u8)
        .zip(links)
        .map(|(me, link)| {
            let done = done.clone();
            let dst = if me == 1 { 2 } else { 1 };
            std::thread::spawn(move || board_thread(me, dst, link, &done, start))
        })
        .collect();
    let got: Vec<u32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(got, [200, 100, 0]);
}

/// A line that plays back bytes it was given and swallows what is sent.
struct Playback(Vec<u8>);

impl ring::link::Link for Playback {
    fn send(&mut self, bytes: &[u8]) -> usize {
        bytes.len()
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0.drain(..n);
        n
    }
}

/// Frames with valid CRCs but any header (boards 0 and past the ring, acks for frames never sent,
/// sequence numbers anywhere), mixed with garbage: an endpoint drops what is wrong, never panics.
#[test]
fn hostile_frames_never_panic() {
    use ring::frame::{encode, Header, Kind};
    let mut rng = Rng::new(61);
    let mut ep = Endpoint::new(2, 4, Playback(Vec::new()), Timing::default());
    for round in 0..2_000u64 {
        let mut bytes = Vec::new();
        for _ in 0..rng.below(8) {
            // Mostly from the right neighbour (board 1), to reach the checks behind that one.
            let hop = [1, rng.below(256) as u8][usize::from(rng.below(10) == 0)];
            let (src, dst) = (rng.below(11) as u8, rng.below(11) as u8);
            let kind = [Kind::Data, Kind::Ack][rng.below(2) as usize];
            // Near the numbers in use, or anywhere.
            let seq = [rng.below(4), rng.next_u64()][rng.below(2) as usize] as u32;
            let h = Header {
                hop,
                src,
                dst,
                kind,
                seq,
            };
            let payload: Vec<u8> = (0..rng.below(300)).map(|_| rng.below(256) as u8).collect();
            encode(&h, &payload, &mut bytes);
            bytes.extend((0..rng.below(20)).map(|_| rng.below(256) as u8));
            // The noise ends at a delimiter so that the next frame arrives whole.
            bytes.push(0);
        }
        let _ = ep.try_send(1 + rng.below(4) as u8, b"out");
        ep.link_mut().0 = bytes;
        match ep.pump(round * 100 * MS) {
            Ok(()) | Err(LinkError::Misordered { expected: 1, .. }) => {}
            Err(LinkError::PeerDead { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        while let Some((src, _)) = ep.recv() {
            assert!((1..=4).contains(&src) && src != 2);
        }
    }
    let s = ep.stats();
    assert!(
        s.stray > 0 && s.misordered > 0 && s.corrupt.total() > 0,
        "{s:?}"
    );
    assert!(s.forwarded > 0 && s.delivered > 0, "{s:?}");
}

/// A board on the acks' way that serves its line only every 1.2 s (busy computing, as a ring
/// board is between two matrix products of a slow model): the wait for acks follows the measured
/// round trip, so nothing is declared dead, everything arrives, and the senders resend little
/// once the round trip is known.
#[test]
fn a_slow_board_on_the_ack_path_is_waited_for() {
    let timing = Timing::default();
    let mut rng = Rng::new(5);
    let mut flows = [Flow::random(1, 2, 120, 1024, &mut rng)];
    let mut sim = Sim::new(3, Faults::default(), timing, MS);
    let mut steps = 0u64;
    while !(flows[0].got.len() == flows[0].msgs.len() && sim.eps.iter().all(Endpoint::idle)) {
        let busy = if steps.is_multiple_of(1200) {
            &[][..]
        } else {
            &[3u8][..]
        };
        let errors = sim.step(&mut flows, busy);
        assert!(errors.is_empty(), "{errors:?} at {} ms", sim.now / MS);
        steps += 1;
        assert!(
            steps < 600_000,
            "not done after {} s",
            sim.now / 1_000_000_000
        );
    }
    assert_delivered(&flows);
    let resent = sim.eps[0].stats().retransmitted;
    eprintln!(
        "delivered in {} s with {resent} frames resent",
        sim.now / 1_000_000_000
    );
    assert!(resent <= 12, "{resent} frames resent for 120 messages");
}
