use super::*;
use alloc::vec;

/// A line that takes `room` more bytes, then nothing.
struct Tap {
    room: usize,
    got: Vec<u8>,
}

impl Link for Tap {
    fn send(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.room);
        self.room -= n;
        self.got.extend_from_slice(&bytes[..n]);
        n
    }

    fn recv(&mut self, _: &mut [u8]) -> usize {
        0
    }
}

fn flush(q: &mut Outbox, tap: &mut Tap, now: u64) -> Vec<(u8, u32)> {
    let mut on_line = Vec::new();
    q.flush(tap, now, &mut Stats::default(), |d, s| on_line.push((d, s)));
    on_line
}

#[test]
fn acks_go_ahead_of_data_but_not_of_a_frame_half_sent() {
    let mut q = Outbox::new(1000);
    q.push(vec![1; 4], What::Passing);
    q.push(vec![2; 4], What::Own { dst: 2, seq: 0 });
    let mut tap = Tap {
        room: 2,
        got: Vec::new(),
    };
    assert!(flush(&mut q, &mut tap, 0).is_empty());
    q.push(vec![3; 2], What::Ack);
    q.push(vec![4; 2], What::Ack);
    tap.room = 100;
    assert_eq!(flush(&mut q, &mut tap, 1), [(2, 0)]);
    assert_eq!(tap.got, [1, 1, 1, 1, 3, 3, 4, 4, 2, 2, 2, 2]);
    assert_eq!(q.bytes(), 0);
    assert!(q.is_empty());
}

#[test]
fn own_data_gets_half_the_bound_and_reading_stops_at_it() {
    let mut q = Outbox::new(100);
    q.push(vec![1; 49], What::Own { dst: 2, seq: 0 });
    assert!(q.room_for_own() && !q.full());
    q.push(vec![1; 1], What::Own { dst: 2, seq: 1 });
    assert!(!q.room_for_own() && !q.full());
    q.push(vec![1; 50], What::Passing);
    assert!(q.full());
}

#[test]
fn a_jammed_queue_sheds_passing_data_after_the_timeout_only() {
    let mut q = Outbox::new(20);
    let mut tap = Tap {
        room: 3,
        got: Vec::new(),
    };
    q.push(vec![1; 8], What::Passing);
    q.push(vec![2; 8], What::Own { dst: 3, seq: 0 });
    q.push(vec![3; 8], What::Passing);
    q.push(vec![4; 2], What::Ack);
    flush(&mut q, &mut tap, 100);
    assert!(q.full());
    assert_eq!(q.shed_if_jammed(100 + 49, 50), 0, "not yet a whole timeout");
    assert_eq!(q.shed_if_jammed(100 + 50, 50), 1);
    // The Ack went first and whole; the half-sent frame and own Data stay.
    assert_eq!(q.bytes(), 7 + 8);
    tap.room = 100;
    assert_eq!(flush(&mut q, &mut tap, 200), [(3, 0)]);
    assert_eq!(tap.got, [[4; 2].as_slice(), &[1; 8], &[2; 8]].concat());
}
