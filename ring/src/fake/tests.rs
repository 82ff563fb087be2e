use super::*;

/// Fault-free lines but for what `set` changes.
fn faults(set: impl FnOnce(&mut Faults)) -> Faults {
    let mut f = Faults::default();
    set(&mut f);
    f
}

fn recv_all(link: &mut FakeLink) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        let n = link.recv(&mut buf);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn each_link_sends_to_the_next_round_the_ring() {
    let mut links = ring(3, Faults::default());
    for i in 0..3 {
        assert_eq!(links[i].send(&[i as u8 + 10, 0]), 2);
    }
    assert_eq!(recv_all(&mut links[1]), [10, 0]);
    assert_eq!(recv_all(&mut links[2]), [11, 0]);
    assert_eq!(recv_all(&mut links[0]), [12, 0]);
}

#[test]
fn capacity_bounds_what_send_takes() {
    let mut links = ring(2, faults(|f| f.capacity = 10));
    assert_eq!(links[0].send(&[1; 25]), 10);
    assert_eq!(links[0].send(&[1; 5]), 0);
    assert_eq!(links[0].queued(), 10);
    assert_eq!(recv_all(&mut links[1]).len(), 10);
    assert_eq!(links[0].send(&[1; 5]), 5);
}

#[test]
fn a_killed_board_hears_nothing_and_says_nothing() {
    let mut links = ring(3, faults(|f| f.capacity = 4));
    links[1].kill();
    // Sends to the dead board never block and never arrive.
    assert_eq!(links[0].send(&[1; 100]), 100);
    assert!(recv_all(&mut links[1]).is_empty());
    // The dead board's own sends vanish.
    assert_eq!(links[1].send(&[2; 100]), 100);
    assert!(recv_all(&mut links[2]).is_empty());
    // The rest of the ring still carries bytes.
    assert_eq!(links[2].send(&[3]), 1);
    assert_eq!(recv_all(&mut links[0]), [3]);
}

#[test]
fn faults_are_reproducible_and_near_their_rates() {
    let faults = Faults {
        seed: 42,
        drop_per_million: 10_000,
        flip_per_million: 5_000,
        ..Faults::default()
    };
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8 + 1).collect();
    let run = || {
        let mut links = ring(2, faults);
        links[0].send(&data);
        (recv_all(&mut links[1]), links[0].stats())
    };
    let (a, stats) = run();
    assert_eq!(a, run().0, "same seed, same bytes");
    assert!((1_600..2_400).contains(&stats.dropped), "{stats:?}");
    assert!((700..1_300).contains(&stats.flipped), "{stats:?}");
    assert_eq!(a.len() as u64, 200_000 - stats.dropped);
}

#[test]
fn reordering_swaps_two_consecutive_frames() {
    let mut links = ring(2, faults(|f| f.reorder_per_million = 1_000_000));
    links[0].send(&[1, 1, 0, 2, 2, 0, 3, 3, 0]);
    assert_eq!(recv_all(&mut links[1]), [1, 1, 0, 3, 3, 0, 2, 2, 0]);
    assert_eq!(links[0].stats().reordered, 1);
}

#[test]
fn links_can_move_to_other_threads() {
    fn is_send<T: Send + Sync>() {}
    is_send::<FakeLink>();
    // One board alone hears itself.
    let mut link = ring(1, Faults::default())[0].clone();
    link.send(&[5]);
    assert_eq!(recv_all(&mut link), [5]);
}

#[test]
fn rng_covers_its_range() {
    let mut rng = Rng::new(0);
    let mut seen = [false; 10];
    for _ in 0..1000 {
        seen[rng.below(10) as usize] = true;
    }
    assert!(seen.iter().all(|&s| s));
    assert_eq!(Rng::new(0).below(0), 0);
}

/// Frames of `len` non-zero bytes, each closed by its `0x00`.
fn frames(count: usize, len: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            // Unique: the index in the first two bytes (no zeros).
            let mut f: Vec<u8> = (0..len).map(|j| ((i * 7 + j) % 255) as u8 + 1).collect();
            f[0] = (i / 250 % 250) as u8 + 1;
            f[1] = (i % 250) as u8 + 1;
            f.push(0);
            f
        })
        .collect()
}

#[test]
fn garbage_truncation_and_replay_are_reproducible_and_near_their_rates() {
    let faults = faults(|f| {
        f.seed = 7;
        f.garbage_per_million = 100_000;
        f.truncate_per_million = 100_000;
        f.replay_per_million = 100_000;
    });
    let sent = frames(5000, 100);
    let run = || {
        let mut links = ring(2, faults);
        for f in &sent {
            assert_eq!(links[0].send(f), f.len());
        }
        (recv_all(&mut links[1]), links[0].stats())
    };
    let (a, s) = run();
    assert_eq!(run(), (a.clone(), s), "same seed, same faults");
    // About one frame in ten each (truncation cuts only frames longer than its cut: nearly all).
    for (what, n) in [
        ("garbage", s.garbage / 33),
        ("truncated", s.truncated),
        ("replayed", s.replayed),
    ] {
        assert!((350..=650).contains(&n), "{what}: {s:?}");
    }
    assert_eq!(s.accepted, 5000 * 101);
    // Every run up to a delimiter is a frame sent, a truncated one, or garbage; replays are
    // byte-identical copies of frames sent earlier.
    let runs: Vec<&[u8]> = a.split(|&b| b == 0).collect();
    let whole = runs.iter().filter(|r| r.len() == 100).count();
    assert!(
        whole as u64 >= 5000 - s.truncated - 2 * s.garbage / 33,
        "{whole} whole runs, {s:?}"
    );
    let mut replays = 0;
    for (i, r) in runs.iter().enumerate().filter(|(_, r)| r.len() == 100) {
        assert!(
            sent.iter().any(|f| &f[..100] == *r),
            "a whole run is a frame sent"
        );
        // A run that repeats one before it is a replay.
        if runs[..i].contains(r) {
            replays += 1;
        }
    }
    assert!(
        replays > 0 && replays <= s.replayed,
        "{replays} replays seen, {s:?}"
    );
}

#[test]
fn a_truncated_frame_keeps_its_delimiter() {
    let mut links = ring(
        2,
        faults(|f| {
            f.seed = 3;
            f.truncate_per_million = 1_000_000;
        }),
    );
    for f in frames(50, 60) {
        links[0].send(&f);
    }
    let got = recv_all(&mut links[1]);
    // Every frame's delimiter arrives; all but the first (decided after the first delimiter) are
    // cut to fewer than 48 bytes.
    assert_eq!(got.iter().filter(|&&b| b == 0).count(), 50);
    let runs: Vec<&[u8]> = got.split(|&b| b == 0).collect();
    assert_eq!(runs[0].len(), 60);
    assert!(runs[1..50].iter().all(|r| r.len() < 48), "{runs:?}");
    assert_eq!(links[0].stats().truncated, 49);
}
