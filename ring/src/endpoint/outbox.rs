//! Frames waiting for the link, and the rules that keep a ring of them moving.
//!
//! One queue per endpoint, bounded in bytes. Acks go ahead of Data (they are small, and a late
//! one costs a window sent again). Own Data may fill only half the bound, so that the other half
//! is always free for frames passing through: a ring whose boards all filled their queues with
//! their own frames would wait on itself forever. Should it jam all the same (every board full,
//! no line taking bytes for a whole timeout), the endpoint sheds the frames it was passing on
//! that have not started: their senders have timed out and will send them again.

use super::Stats;
use crate::link::Link;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

#[cfg(test)]
mod tests;

/// What a queued frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum What {
    /// Own Data `seq` to `dst`: its ack timer starts when the link has taken all of it.
    Own { dst: u8, seq: u32 },
    /// An Ack, own or passed on.
    Ack,
    /// Data from another board, passed on.
    Passing,
}

/// A frame waiting for the link.
#[derive(Debug)]
struct Out {
    wire: Vec<u8>,
    /// Bytes the link has taken.
    done: usize,
    what: What,
}

/// Frames waiting for the link, in order of sending.
#[derive(Debug)]
pub(super) struct Outbox {
    frames: VecDeque<Out>,
    /// Bytes not yet taken by the link.
    bytes: usize,
    /// At this many bytes the endpoint stops reading its link.
    limit: usize,
    /// When the link last took a byte, or the queue was last below its bound.
    moved_at: u64,
}

impl Outbox {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            frames: VecDeque::new(),
            bytes: 0,
            limit,
            moved_at: 0,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Full: stop reading the link until the line takes some.
    pub(super) fn full(&self) -> bool {
        self.bytes >= self.limit
    }

    /// Own Data may be queued: the queue is under half its bound.
    pub(super) fn room_for_own(&self) -> bool {
        self.bytes < self.limit / 2
    }

    /// Queue a frame: Acks ahead of all Data not yet started, the rest at the end.
    pub(super) fn push(&mut self, wire: Vec<u8>, what: What) {
        let at = match what {
            What::Ack => self
                .frames
                .iter()
                .position(|o| o.done == 0 && o.what != What::Ack),
            _ => None,
        };
        self.bytes += wire.len();
        let out = Out {
            wire,
            done: 0,
            what,
        };
        self.frames.insert(at.unwrap_or(self.frames.len()), out);
    }

    /// Hand bytes to the link until it takes no more; `on_line(dst, seq)` for each own Data frame
    /// the link has wholly taken.
    pub(super) fn flush(
        &mut self,
        link: &mut impl Link,
        now: u64,
        stats: &mut Stats,
        mut on_line: impl FnMut(u8, u32),
    ) {
        while let Some(out) = self.frames.front_mut() {
            let rest = &out.wire[out.done..];
            let n = link.send(rest).min(rest.len());
            if n > 0 {
                self.moved_at = now;
            }
            out.done += n;
            self.bytes = self.bytes.saturating_sub(n);
            stats.bytes_sent += n as u64;
            if out.done < out.wire.len() {
                break;
            }
            let what = out.what;
            self.frames.pop_front();
            stats.frames_sent += 1;
            if let What::Own { dst, seq } = what {
                on_line(dst, seq);
            }
        }
        if !self.full() {
            self.moved_at = now;
        }
    }

    /// When the queue has been full with the link taking nothing for `after` ns, drop the
    /// passing Data not yet started. Returns how many frames went.
    pub(super) fn shed_if_jammed(&mut self, now: u64, after: u64) -> u64 {
        if !self.full() || now.saturating_sub(self.moved_at) < after {
            return 0;
        }
        let before = self.frames.len();
        let mut freed = 0;
        self.frames.retain(|o| {
            let shed = o.done == 0 && o.what == What::Passing;
            freed += if shed { o.wire.len() } else { 0 };
            !shed
        });
        self.bytes -= freed;
        self.moved_at = now;
        (before - self.frames.len()) as u64
    }
}
