use super::*;

fn shape(layers: usize) -> Shape {
    Shape {
        layer_bytes: vec![10 << 20; layers],
        head_compute: 30 << 20,
        kv_per_layer: 1 << 20,
        fixed: 8 << 20,
    }
}

fn board(ram_mib: u64, compute_mib: u64) -> Profile {
    Profile {
        ram: ram_mib << 20,
        cache: u64::MAX,
        compute: compute_mib << 20,
        card: 20 << 20,
        cores: 4,
    }
}

fn spans(w: &[Window]) -> Vec<Range<usize>> {
    w.iter().map(|w| w.layers.clone()).collect()
}

/// Equal boards with room for everything: the time per token is the same for every split, so the
/// slowest board decides; the head, which also runs the output head, gets fewer layers.
#[test]
fn equal_boards_balance_with_the_head_lighter() {
    let s = shape(30);
    let w = plan(&s, &[board(1024, 1000); 3]).unwrap();
    assert_eq!(spans(&w), vec![0..8, 8..19, 19..30]);
    assert!(w.iter().all(|w| w.streamed == 0));
    let most = w.iter().map(|w| w.ns).max().unwrap();
    let least = w.iter().map(|w| w.ns).min().unwrap();
    assert!(most - least <= most / 10, "{w:?}");
}

/// A slow board gets few layers; a board with little RAM gets no more than it holds, when others
/// can take the rest without streaming.
#[test]
fn slow_and_small_boards_get_less() {
    let s = shape(30);
    let w = plan(
        &s,
        &[board(1024, 1000), board(1024, 250), board(1024, 1000)],
    )
    .unwrap();
    assert!(w[1].layers.len() < w[2].layers.len(), "{w:?}");
    // Board 2 holds 8 MiB fixed + 4 layers of 11 MiB at most.
    let w = plan(&s, &[board(1024, 1000), board(60, 1000), board(1024, 1000)]).unwrap();
    assert!(w[1].layers.len() <= 4 && w[1].streamed == 0, "{w:?}");
    assert_eq!(w.iter().map(|w| w.layers.len()).sum::<usize>(), 30);
}

/// A board whose `cache =` setting bounds its page cache below its window is predicted to stream
/// the rest, as it will, and gets fewer layers than its RAM alone would give it.
#[test]
fn a_cache_setting_bounds_what_a_board_keeps() {
    let s = shape(30);
    let free = [board(1024, 1000), board(1024, 1000)];
    let w = plan(&s, &free).unwrap();
    assert!(w.iter().all(|w| w.streamed == 0), "{w:?}");
    let mut bounded = free;
    bounded[1].cache = 20 << 20;
    let b = plan(&s, &bounded).unwrap();
    // Board 2 keeps 20 MiB: two layers; past them every layer comes from its card.
    let kept = b[1].bytes - b[1].streamed;
    assert_eq!(kept, (b[1].bytes).min(20 << 20), "{b:?}");
    assert!(b[1].layers.len() < w[1].layers.len(), "{b:?} against {w:?}");
    let one = predict(&s, &bounded[1], 1, 10..30).unwrap();
    assert_eq!(one.streamed, (20 * 10 - 20) << 20);
}

/// When the model does not fit in the ring, the boards stream what their RAM cannot hold, and the
/// prediction counts the card.
#[test]
fn a_model_larger_than_the_ring_streams() {
    let s = shape(30);
    let w = plan(&s, &[board(100, 1000); 2]).unwrap();
    assert!(w.iter().any(|w| w.streamed > 0), "{w:?}");
    let one = predict(&s, &board(100, 1000), 1, w[1].layers.clone()).unwrap();
    assert_eq!(one, w[1]);
    assert!(one.ns > time_ns(one.bytes, 1000 << 20));
}

#[test]
fn impossible_rings_are_errors() {
    let s = shape(2);
    assert_eq!(
        plan(&s, &[board(1024, 1000); 3]),
        Err(PlanError::TooManyBoards {
            boards: 3,
            layers: 2
        })
    );
    assert_eq!(
        plan(&shape(30), &[board(4, 1000); 2]),
        Err(PlanError::NoRoom)
    );
}
