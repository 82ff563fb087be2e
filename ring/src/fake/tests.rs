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
