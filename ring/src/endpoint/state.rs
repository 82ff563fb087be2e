//! The protocol's state behind an [`Endpoint`](super::Endpoint), apart from the link and the frame
//! decoder so that the decoder's callback can update it. Tables are indexed by board number
//! (slot 0 unused).

use super::outbox::{Outbox, What};
use super::{LinkError, SendError, Stats, Timing, STALL_FACTOR};
use crate::frame::{self, Frame, Header, Kind, MAX_PAYLOAD, MAX_WIRE};
use crate::link::Link;
use crate::{upstream, MAX_BOARDS};
use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Datagrams kept until taken, at most.
const DATAGRAMS: usize = 64;

/// Table size: one slot per board number, 0 unused.
const SLOTS: usize = MAX_BOARDS as usize + 1;

/// Where a frame of a send window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Waiting to be queued (new, or sent again after a timeout).
    Unsent,
    /// In the outbound queue, not yet wholly taken by the link.
    Queued,
    /// Taken by the link at `since`; the ack timer runs.
    OnLine { since: u64 },
}

/// An unacknowledged Data frame.
#[derive(Debug)]
struct Pending {
    seq: u32,
    /// The frame as it goes on the wire.
    wire: Vec<u8>,
    state: Sent,
    /// Times queued for the line.
    sends: u32,
}

/// The sending side of the channel `me -> dst`.
#[derive(Debug, Default)]
struct Channel {
    /// The sequence number of the next message queued.
    next_seq: u32,
    /// Unacknowledged frames, oldest first; their numbers run up to `next_seq - 1`.
    window: VecDeque<Pending>,
    /// Sends of the oldest frame since it became the oldest.
    tries: u32,
    /// Sends of the oldest frame since an ack last advanced the window: unlike `tries`, acks that
    /// advance nothing leave it alone.
    stalls: u32,
    /// Smoothed round trip of the acks and its mean deviation (ns; 0: none measured yet).
    srtt: u64,
    rttvar: u64,
    /// The current wait for an ack (ns; 0: the timing's least), doubled on each timeout.
    rto: u64,
}

impl Channel {
    /// How long the oldest frame waits for its ack now.
    fn wait(&self, t: &Timing) -> u64 {
        if self.rto == 0 {
            t.rto_ns
        } else {
            self.rto
        }
    }

    /// A round trip of `sample` ns measured on a frame sent once (Karn's rule): fold it in and
    /// set the wait from it.
    fn measured(&mut self, sample: u64, t: &Timing) {
        if self.srtt == 0 {
            self.srtt = sample.max(1);
            self.rttvar = sample / 2;
        } else {
            let dev = self.srtt.abs_diff(sample);
            self.rttvar = (3 * self.rttvar + dev) / 4;
            self.srtt = (7 * self.srtt + sample) / 8;
        }
        self.rto = (self.srtt + 4 * self.rttvar).clamp(t.rto_ns, t.max_rto_ns.max(t.rto_ns));
    }

    /// Progress after a resend (no sample, by Karn's rule): the wait goes back to the one the
    /// round trips measured so far give.
    fn settle(&mut self, t: &Timing) {
        self.rto = match self.srtt {
            0 => 0,
            s => (s + 4 * self.rttvar).clamp(t.rto_ns, t.max_rto_ns.max(t.rto_ns)),
        };
    }

    /// The oldest frame's wait ran out: wait twice as long next time.
    fn back_off(&mut self, t: &Timing) {
        self.rto = (self.wait(t) * 2).min(t.max_rto_ns.max(t.rto_ns));
    }

    /// The sequence number of the oldest unacknowledged frame.
    fn base(&self) -> u32 {
        self.next_seq.wrapping_sub(self.window.len() as u32)
    }

    /// Own Data `seq` is wholly on the line: start its ack timer.
    fn on_line(&mut self, seq: u32, now: u64) {
        let i = seq.wrapping_sub(self.base()) as usize;
        if let Some(p) = self.window.get_mut(i) {
            if p.seq == seq && p.state == Sent::Queued {
                p.state = Sent::OnLine { since: now };
            }
        }
    }
}

/// Everything an endpoint knows but its link and decoder.
#[derive(Debug)]
pub(super) struct Core {
    pub(super) me: u8,
    pub(super) boards: u8,
    timing: Timing,
    tx: Outbox,
    channels: [Channel; SLOTS],
    /// Per source: the sequence number expected next.
    rx_next: [u32; SLOTS],
    /// Bit `b`: board `b` sent Data since the last acks were queued.
    ack_due: u16,
    pub(super) inbox: VecDeque<(u8, Vec<u8>)>,
    /// Datagrams for me, apart from the messages (the newest [`DATAGRAMS`] kept).
    pub(super) datagrams: VecDeque<(u8, Vec<u8>)>,
    inbox_limit: usize,
    pub(super) last_heard: [Option<u64>; SLOTS],
    pub(super) last_upstream: Option<u64>,
    /// The first fault found during this pump.
    pub(super) fault: Option<LinkError>,
    pub(super) stats: Stats,
    /// Which destination queues first (`0..boards`), rotating each pump so that none starves.
    turn: usize,
}

impl Core {
    pub(super) fn new(me: u8, boards: u8, timing: Timing) -> Self {
        let frames = timing.window.max(1) * usize::from(boards.clamp(1, MAX_BOARDS));
        // Messages delivered and not yet taken: room for a few windows from every board, so a
        // board busy computing rarely makes its senders wait (they would resend meanwhile).
        Self {
            me,
            boards,
            timing,
            tx: Outbox::new(frames * MAX_WIRE),
            channels: core::array::from_fn(|_| Channel::default()),
            rx_next: [0; SLOTS],
            ack_due: 0,
            inbox: VecDeque::new(),
            datagrams: VecDeque::new(),
            inbox_limit: 4 * frames,
            last_heard: [None; SLOTS],
            last_upstream: None,
            fault: None,
            stats: Stats::default(),
            turn: 0,
        }
    }

    /// The position is inside a ring of at most [`MAX_BOARDS`].
    pub(super) fn valid(&self) -> bool {
        (1..=MAX_BOARDS).contains(&self.boards) && (1..=self.boards).contains(&self.me)
    }

    fn is_board(&self, b: u8) -> bool {
        (1..=self.boards).contains(&b)
    }

    pub(super) fn queued_bytes(&self) -> usize {
        self.tx.bytes()
    }

    /// The outbound queue is over its bound: stop reading the link.
    pub(super) fn backlogged(&self) -> bool {
        self.tx.full()
    }

    pub(super) fn idle(&self) -> bool {
        self.tx.is_empty() && self.channels.iter().all(|c| c.window.is_empty())
    }

    /// A message of `len` bytes may go to `dst`.
    fn check_send(&self, dst: u8, len: usize) -> Result<(), SendError> {
        let (me, boards) = (self.me, self.boards);
        if !self.valid() || !self.is_board(dst) || dst == me {
            return Err(SendError::BadBoard {
                board: dst,
                me,
                boards,
            });
        }
        if len > MAX_PAYLOAD {
            return Err(SendError::TooLong { len });
        }
        Ok(())
    }

    pub(super) fn try_send(&mut self, dst: u8, payload: &[u8]) -> Result<(), SendError> {
        self.check_send(dst, payload.len())?;
        let me = self.me;
        let window = self.timing.window;
        let ch = &mut self.channels[usize::from(dst)];
        if ch.window.len() >= window {
            return Err(SendError::WindowFull { board: dst, window });
        }
        let seq = ch.next_seq;
        let h = Header {
            hop: me,
            src: me,
            dst,
            kind: Kind::Data,
            seq,
        };
        let mut wire = Vec::new();
        frame::encode(&h, payload, &mut wire);
        ch.window.push_back(Pending {
            seq,
            wire,
            state: Sent::Unsent,
            sends: 0,
        });
        ch.next_seq = seq.wrapping_add(1);
        Ok(())
    }

    /// Queue a datagram to `dst` if the outbound queue has room for own frames.
    pub(super) fn send_datagram(&mut self, dst: u8, payload: &[u8]) -> Result<(), SendError> {
        self.check_send(dst, payload.len())?;
        let me = self.me;
        if self.tx.full() {
            return Err(SendError::QueueFull);
        }
        let h = Header {
            hop: me,
            src: me,
            dst,
            kind: Kind::Datagram,
            seq: 0,
        };
        self.queue_frame(&h, payload);
        Ok(())
    }

    /// New timers and window from now on (round trips measured so far are kept).
    pub(super) fn set_timing(&mut self, timing: Timing) {
        self.timing = timing;
        for ch in self.channels.iter_mut() {
            ch.rto = ch
                .rto
                .clamp(timing.rto_ns, timing.max_rto_ns.max(timing.rto_ns));
        }
    }

    /// Count every board as heard at `now` (when heartbeats start after a quiet phase).
    pub(super) fn touch_all(&mut self, now: u64) {
        for b in 1..=usize::from(self.boards) {
            self.last_heard[b] = Some(now);
        }
    }

    /// Hand queued bytes to the link until it takes no more.
    pub(super) fn flush(&mut self, link: &mut impl Link, now: u64) {
        let channels = &mut self.channels;
        self.tx.flush(link, now, &mut self.stats, |dst, seq| {
            channels[usize::from(dst)].on_line(seq, now);
        });
    }

    /// Shed passing frames if the ring has jammed (see [`Outbox::shed_if_jammed`]).
    pub(super) fn unjam(&mut self, now: u64) {
        self.stats.shed += self.tx.shed_if_jammed(now, self.timing.rto_ns);
    }

    /// Handle one frame (or broken frame) from the upstream line.
    pub(super) fn on_frame(&mut self, frame: Frame<'_>, now: u64) {
        let (h, payload) = match frame {
            Ok(f) => f,
            Err(e) => {
                self.stats.corrupt.count(e);
                return;
            }
        };
        self.stats.frames_received += 1;
        self.last_upstream = Some(now);
        let expected = upstream(self.me, self.boards);
        if h.hop != expected {
            self.stats.misordered += 1;
            self.fault.get_or_insert(LinkError::Misordered {
                expected,
                got: h.hop,
            });
            return;
        }
        if !self.is_board(h.src) || !self.is_board(h.dst) || h.src == h.dst {
            self.stats.stray += 1;
            return;
        }
        self.last_heard[usize::from(h.src)] = Some(now);
        if h.dst == self.me {
            match h.kind {
                Kind::Data => self.on_data(&h, payload),
                Kind::Ack => self.on_ack(h.src, h.seq, now),
                Kind::Datagram => self.on_datagram(h.src, payload),
            }
        } else if h.src == self.me {
            // Back round the ring: its addressee never took it.
            self.stats.stray += 1;
        } else {
            self.forward(h, payload);
        }
    }

    /// Data addressed to me: deliver it if it is the next expected; ack it in any case.
    fn on_data(&mut self, h: &Header, payload: &[u8]) {
        let src = usize::from(h.src);
        self.ack_due |= 1 << src;
        let expected = self.rx_next[src];
        if h.seq != expected {
            if (h.seq.wrapping_sub(expected) as i32) < 0 {
                self.stats.duplicates += 1;
            } else {
                self.stats.out_of_order += 1;
            }
            return;
        }
        if self.inbox.len() >= self.inbox_limit {
            self.stats.inbox_full += 1;
            return;
        }
        self.inbox.push_back((h.src, payload.to_vec()));
        self.rx_next[src] = expected.wrapping_add(1);
        self.stats.delivered += 1;
    }

    /// A datagram for me: delivered if the inbox has room, else dropped (never acknowledged).
    /// A datagram for me: kept apart from the messages (a reader takes them without touching the
    /// messages' order); the oldest goes when [`DATAGRAMS`] wait.
    fn on_datagram(&mut self, src: u8, payload: &[u8]) {
        if self.datagrams.len() >= DATAGRAMS {
            self.datagrams.pop_front();
        }
        self.datagrams.push_back((src, payload.to_vec()));
        self.stats.delivered += 1;
    }

    /// An ack from `src`: drop the frames it covers from the window to `src`. An ack that covers
    /// nothing new still shows `src` is alive (busy: its inbox was full, or a frame was lost), so
    /// the count of tries towards declaring it dead starts again; the count of stalls does not
    /// (the same ack replayed on a line would otherwise keep a dead board alive for ever).
    fn on_ack(&mut self, src: u8, next: u32, now: u64) {
        let ch = &mut self.channels[usize::from(src)];
        let n = next.wrapping_sub(ch.base()) as usize;
        if n == 0 {
            ch.tries = ch.tries.min(1);
            return;
        }
        // Past the window: an ack for frames never sent.
        if n > ch.window.len() {
            return;
        }
        let newest = &ch.window[n - 1];
        if let (1, Sent::OnLine { since }) = (newest.sends, newest.state) {
            ch.measured(now.saturating_sub(since), &self.timing);
        } else {
            ch.settle(&self.timing);
        }
        ch.window.drain(..n);
        // The frames after these keep their send times: one whose ack is overdue is resent on
        // the next check, one at a time (a lost frame costs a round trip, a late ack one frame).
        ch.tries = match ch.window.front() {
            Some(p) if p.sends > 0 => 1,
            _ => 0,
        };
        ch.stalls = ch.tries;
    }

    /// Pass a frame for another board on, as sent by me.
    fn forward(&mut self, h: Header, payload: &[u8]) {
        self.queue_frame(&Header { hop: self.me, ..h }, payload);
        self.stats.forwarded += 1;
    }

    fn queue_frame(&mut self, h: &Header, payload: &[u8]) {
        let mut wire = Vec::new();
        frame::encode(h, payload, &mut wire);
        // Datagrams (heartbeats) are small and say a board is alive: they go with the acks,
        // ahead of data, so that a board busy resending does not look dead.
        let what = match h.kind {
            Kind::Ack | Kind::Datagram => What::Ack,
            Kind::Data => What::Passing,
        };
        self.tx.push(wire, what);
    }

    /// One ack to each board that sent me Data since the last call.
    pub(super) fn queue_acks(&mut self) {
        for b in 1..=self.boards {
            if self.ack_due & (1 << b) != 0 {
                let seq = self.rx_next[usize::from(b)];
                let h = Header {
                    hop: self.me,
                    src: self.me,
                    dst: b,
                    kind: Kind::Ack,
                    seq,
                };
                self.queue_frame(&h, &[]);
                self.stats.acks_sent += 1;
            }
        }
        self.ack_due = 0;
    }

    /// Go back N where the oldest frame's ack is overdue; note dead peers.
    pub(super) fn check_timers(&mut self, now: u64) {
        for dst in 1..=usize::from(self.boards) {
            let ch = &mut self.channels[dst];
            let Some(Sent::OnLine { since }) = ch.window.front().map(|p| p.state) else {
                continue;
            };
            if now.saturating_sub(since) < ch.wait(&self.timing) {
                continue;
            }
            let max_stalls = self.timing.max_tries.saturating_mul(STALL_FACTOR);
            if ch.tries >= self.timing.max_tries || ch.stalls >= max_stalls {
                let dead = LinkError::PeerDead {
                    board: dst as u8,
                    tries: ch.stalls,
                };
                self.fault.get_or_insert(dead);
                continue;
            }
            // Resend the oldest frame only: on a lossless line whose acks are late (a busy board
            // on their way) the rest arrived; if it was lost, the frames after it were dropped as
            // out of order and follow one by one, each as it becomes the oldest and overdue.
            ch.back_off(&self.timing);
            if let Some(p) = ch.window.front_mut() {
                p.state = Sent::Unsent;
            }
        }
    }

    /// Queue own frames that are due, oldest first per destination, while the queue has room.
    pub(super) fn queue_data(&mut self) {
        let boards = usize::from(self.boards).max(1);
        self.turn = (self.turn + 1) % boards;
        for k in 0..boards {
            let dst = 1 + (self.turn + k) % boards;
            let ch = &mut self.channels[dst];
            for (i, p) in ch.window.iter_mut().enumerate() {
                if !self.tx.room_for_own() {
                    return;
                }
                if p.state != Sent::Unsent {
                    continue;
                }
                if p.sends > 0 {
                    self.stats.retransmitted += 1;
                }
                if i == 0 {
                    ch.tries = ch.tries.saturating_add(1);
                    ch.stalls = ch.stalls.saturating_add(1);
                }
                p.sends += 1;
                p.state = Sent::Queued;
                self.tx.push(
                    p.wire.clone(),
                    What::Own {
                        dst: dst as u8,
                        seq: p.seq,
                    },
                );
            }
        }
    }
}
