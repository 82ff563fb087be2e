//! Reliable, in-order delivery of messages between any two boards of the ring.
//!
//! Each board runs one [`Endpoint`] over its [`Link`]. The caller queues messages with
//! [`Endpoint::try_send`], calls [`Endpoint::pump`] often with the current time, and takes
//! delivered messages with [`Endpoint::recv`]. Nothing happens between pumps, and nothing is sent
//! before the first.
//!
//! The protocol, per ordered pair of boards (a *channel* `src -> dst`):
//! - Data frames carry consecutive sequence numbers from 0. The receiver delivers only the one it
//!   expects next; anything else is a duplicate or ahead of a loss, and is dropped.
//! - Whenever Data from `src` arrives (in order or not) the receiver acknowledges, once per pump:
//!   an Ack frame `me -> src` whose `seq` is the next number it expects (cumulative). Acks are not
//!   acknowledged. Both kinds travel the ring the same way, so in a ring of 3 the acks of `1 -> 2`
//!   go `2 -> 3 -> 1`.
//! - The sender keeps at most [`Timing::window`] unacknowledged frames per destination. When the
//!   oldest has waited for its ack longer than the round trip the acks have been taking (smoothed
//!   plus four deviations, as TCP's; never less than [`Timing::rto_ns`], doubled on each timeout
//!   up to [`Timing::max_rto_ns`]), it is sent again, alone: on a ring the acks are late far more
//!   often than frames are lost (they pass through boards busy computing). If it was lost, the
//!   frames after it were dropped as out of order and are resent one by one as each becomes the
//!   oldest and overdue. After [`Timing::max_tries`] sends of the oldest frame with no progress,
//!   [`Endpoint::pump`] reports [`LinkError::PeerDead`]. An ack that advances nothing (the peer
//!   is alive but its inbox is full) starts that count again, but only up to
//!   [`STALL_FACTOR`]` * max_tries` sends with no ack advancing: an old ack sent again on a line
//!   must not keep a dead board alive.
//! - Datagrams (heartbeats) are sent once, go ahead of data like acks, and are read apart from
//!   the messages ([`Endpoint::recv_datagram`]).
//! - A frame for another board is passed on unchanged but for `hop`, which names the board that
//!   put it on the line; a frame whose `hop` is not this board's upstream neighbour means the ring
//!   is wired wrong ([`LinkError::Misordered`]).
//!
//! Bounds and flow: frames waiting for the line are held in one queue of `window * boards`
//! largest frames ([`Endpoint::queued_bytes`]). When it is full the endpoint stops reading its
//! link, so a slow downstream line slows the upstream one (back-pressure) instead of losing
//! frames. Acks go ahead of Data in the queue. Own Data may fill only half of it, keeping the
//! rest for frames passing through, so that boards busy with their own traffic do not jam the
//! ring by waiting on each other; should it jam all the same (queue full, link taking nothing for
//! a whole `rto_ns`), the endpoint drops the passing Data it has not started ([`Stats::shed`]),
//! which its senders have timed out on. Delivered messages wait in an inbox of `window * boards`
//! messages; when it is full, Data is left unacknowledged and comes again. A frame costs one
//! allocation; bytes are never handled one allocation at a time.
//!
//! Timing: an ack timer starts when the link has taken the whole frame, so a line that never
//! takes bytes (not a dead board, whose line still drains) shows as silence in
//! [`Endpoint::last_heard`], not as [`LinkError::PeerDead`]. `rto_ns` should exceed the time a
//! window takes on the busiest line plus the acks' way back round the ring.

use crate::frame::{Decoder, FrameError, MAX_PAYLOAD};
use crate::link::Link;
use crate::MAX_BOARDS;
use alloc::vec::Vec;
use core::fmt;

mod outbox;
mod state;
use state::Core;

/// Timers and limits of the protocol.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long the oldest unacknowledged frame waits for its ack before the window is resent, at
    /// least: the wait follows the acks' measured round trip (smoothed, plus four deviations, as
    /// TCP's), which on a ring includes the time busy boards on the way take to pass them on.
    pub rto_ns: u64,
    /// The longest wait: each timeout doubles it up to this, until an ack makes progress.
    pub max_rto_ns: u64,
    /// Sends of the oldest frame, with no ack advancing, before the peer is declared dead.
    pub max_tries: u32,
    /// Unacknowledged frames per destination.
    pub window: usize,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            rto_ns: 500_000_000,
            max_rto_ns: 2_000_000_000,
            max_tries: 8,
            window: 16,
        }
    }
}

/// Sends of the oldest frame with no ack advancing, in units of [`Timing::max_tries`], after which
/// a peer is dead even if acks that advance nothing keep arriving.
pub const STALL_FACTOR: u32 = 4;

impl Timing {
    /// The longest a dead peer goes unreported: `max_tries` waits, each double the one before
    /// from `rto_ns` up to `max_rto_ns`, for a round trip no longer than `rto_ns`.
    pub fn give_up_ns(&self) -> u64 {
        self.waits_ns(self.max_tries)
    }

    /// The longest a dead peer goes unreported when acks that advance nothing keep arriving (old
    /// acks replayed on a line): [`STALL_FACTOR`]` * max_tries` waits.
    pub fn give_up_stalled_ns(&self) -> u64 {
        self.waits_ns(self.max_tries.saturating_mul(STALL_FACTOR))
    }

    /// `tries + 1` waits, each double the one before from `rto_ns` up to `max_rto_ns`.
    fn waits_ns(&self, tries: u32) -> u64 {
        let mut wait = self.rto_ns;
        let mut total = 0u64;
        for _ in 0..=tries {
            total = total.saturating_add(wait);
            wait = (wait * 2).min(self.max_rto_ns.max(self.rto_ns));
        }
        total
    }
}

/// Frames that arrived broken, by what was wrong.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Corrupt {
    /// Broken byte stuffing.
    pub cobs: u64,
    /// Runs too long for a frame, discarded to the next delimiter.
    pub too_long: u64,
    /// CRC mismatches.
    pub crc: u64,
    /// Headers that did not parse.
    pub header: u64,
}

impl Corrupt {
    /// All broken frames.
    pub fn total(&self) -> u64 {
        self.cobs + self.too_long + self.crc + self.header
    }

    pub(crate) fn count(&mut self, e: FrameError) {
        match e {
            FrameError::Cobs => self.cobs += 1,
            FrameError::TooLong { .. } => self.too_long += 1,
            FrameError::Crc => self.crc += 1,
            FrameError::Header => self.header += 1,
        }
    }
}

/// What an endpoint has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames wholly handed to the link (own data, retransmissions, acks, forwarded).
    pub frames_sent: u64,
    /// Bytes the link took.
    pub bytes_sent: u64,
    /// Frames that arrived whole and checked (any address).
    pub frames_received: u64,
    /// Bytes read from the link.
    pub bytes_received: u64,
    /// Messages delivered to [`Endpoint::recv`].
    pub delivered: u64,
    /// Frames passed on to the next board.
    pub forwarded: u64,
    /// Data frames sent again.
    pub retransmitted: u64,
    /// Acks sent.
    pub acks_sent: u64,
    /// Data frames that had been delivered already.
    pub duplicates: u64,
    /// Data frames ahead of the one expected (an earlier one was lost).
    pub out_of_order: u64,
    /// Data frames in order but not taken because the inbox was full.
    pub inbox_full: u64,
    /// Frames with a board number outside the ring, or back at their source.
    pub stray: u64,
    /// Passing Data dropped because the ring had jammed (every queue full, no line moving for a
    /// whole timeout); their senders send them again.
    pub shed: u64,
    /// Frames whose `hop` was not the upstream board.
    pub misordered: u64,
    /// Frames that arrived broken.
    pub corrupt: Corrupt,
}

/// Why a message was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// `window` frames to `board` are unacknowledged: pump, then try again.
    WindowFull { board: u8, window: usize },
    /// The payload is longer than [`MAX_PAYLOAD`].
    TooLong { len: usize },
    /// `board` is not another board of this ring (or this endpoint's own position is invalid).
    BadBoard { board: u8, me: u8, boards: u8 },
    /// The outbound queue has no room for a datagram now (it is dropped; pump and try later).
    QueueFull,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::WindowFull { board, window } => write!(
                f,
                "board {board} has {window} frames unacknowledged (the window is full)"
            ),
            Self::TooLong { len } => write!(
                f,
                "message of {len} bytes is longer than the {MAX_PAYLOAD}-byte maximum"
            ),
            Self::BadBoard { board, me, boards } => write!(
                f,
                "board {board} is not another board of this ring of {boards} (this is board {me})"
            ),
            Self::QueueFull => write!(f, "the outbound queue is full"),
        }
    }
}

impl core::error::Error for SendError {}

/// A fault of the ring that the caller must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// The oldest frame to `board` was sent `tries` times with no acknowledgement.
    PeerDead { board: u8, tries: u32 },
    /// A frame came from board `got` where this board's upstream neighbour `expected` should be.
    Misordered { expected: u8, got: u8 },
    /// The endpoint was made with a position outside `1..=boards`, or more than 8 boards.
    BadPosition { me: u8, boards: u8 },
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::PeerDead { board, tries } => {
                write!(f, "board {board} did not acknowledge after {tries} tries")
            }
            Self::Misordered { expected, got } => write!(
                f,
                "a frame came from board {got} where board {expected} should be upstream: the \
                 ring is wired in the wrong order or a board has the wrong ring position"
            ),
            Self::BadPosition { me, boards } => write!(
                f,
                "board {me} of a ring of {boards}: positions are 1..=boards, at most \
                 {MAX_BOARDS} boards"
            ),
        }
    }
}

impl core::error::Error for LinkError {}

/// Bytes read from the link at a time.
const CHUNK: usize = 256;

/// Reads from the link in one pump at most (bounds a pump's work on a line that never pauses).
const MAX_READS: usize = 64;

/// One board's end of the ring.
#[derive(Debug)]
pub struct Endpoint<L: Link> {
    link: L,
    decoder: Decoder,
    core: Core,
}

impl<L: Link> Endpoint<L> {
    /// Board `me` of a ring of `boards` (`1..=8`), on `link`. An invalid position is reported by
    /// every [`Self::pump`] as [`LinkError::BadPosition`] and refuses every send.
    pub fn new(me: u8, boards: u8, link: L, timing: Timing) -> Self {
        Self {
            link,
            decoder: Decoder::new(),
            core: Core::new(me, boards, timing),
        }
    }

    /// This board's position.
    pub fn me(&self) -> u8 {
        self.core.me
    }

    /// How many boards the ring has.
    pub fn boards(&self) -> u8 {
        self.core.boards
    }

    /// The link, e.g. to kill a fake one.
    pub fn link_mut(&mut self) -> &mut L {
        &mut self.link
    }

    /// Queue a message to `dst` (not me, `1..=boards`). [`SendError::WindowFull`] when `window`
    /// frames to `dst` are unacknowledged (call [`Self::pump`] and retry).
    pub fn try_send(&mut self, dst: u8, payload: &[u8]) -> Result<(), SendError> {
        self.core.try_send(dst, payload)
    }

    /// Queue a datagram to `dst`: sent once, never acknowledged or sent again, delivered to
    /// [`Self::recv_datagram`] if it arrives (heartbeats). [`SendError::QueueFull`] when
    /// the outbound queue has no room.
    pub fn send_datagram(&mut self, dst: u8, payload: &[u8]) -> Result<(), SendError> {
        self.core.send_datagram(dst, payload)
    }

    /// New timers and window from now on (e.g. patient while boards load, brisk once they run).
    pub fn set_timing(&mut self, timing: Timing) {
        self.core.set_timing(timing);
    }

    /// Count every board as heard now: silence is measured from here (when heartbeats start).
    pub fn touch_all(&mut self, now: u64) {
        self.core.touch_all(now);
    }

    /// Move bytes both ways and do the protocol's work at time `now` (ns): transmit what is
    /// queued, decode what arrived, deliver, acknowledge, forward, retransmit. Returns the first
    /// fault found: [`LinkError::PeerDead`] (again on every pump while it lasts) or
    /// [`LinkError::Misordered`]; the rest of the pump's work is done all the same.
    pub fn pump(&mut self, now: u64) -> Result<(), LinkError> {
        if !self.core.valid() {
            return Err(LinkError::BadPosition {
                me: self.core.me,
                boards: self.core.boards,
            });
        }
        self.core.flush(&mut self.link, now);
        self.receive(now);
        self.core.queue_acks();
        self.core.check_timers(now);
        self.core.queue_data();
        self.core.flush(&mut self.link, now);
        self.core.unjam(now);
        self.core.fault.take().map_or(Ok(()), Err)
    }

    /// Read and handle what arrived, while the outbound queue has room.
    fn receive(&mut self, now: u64) {
        let mut buf = [0u8; CHUNK];
        for _ in 0..MAX_READS {
            if self.core.backlogged() {
                break;
            }
            let n = self.link.recv(&mut buf).min(CHUNK);
            if n == 0 {
                break;
            }
            self.core.stats.bytes_received += n as u64;
            let core = &mut self.core;
            self.decoder
                .push(&buf[..n], &mut |frame| core.on_frame(frame, now));
        }
    }

    /// The next datagram that arrived for this board: (source board, payload).
    pub fn recv_datagram(&mut self) -> Option<(u8, Vec<u8>)> {
        self.core.datagrams.pop_front()
    }

    /// The next delivered message: (source board, payload).
    pub fn recv(&mut self) -> Option<(u8, Vec<u8>)> {
        self.core.inbox.pop_front()
    }

    /// Every queued frame transmitted and acknowledged, and nothing waiting for the line.
    pub fn idle(&self) -> bool {
        self.core.idle()
    }

    /// When a frame originated by `board` last arrived (any kind), if ever.
    pub fn last_heard(&self, board: u8) -> Option<u64> {
        self.core
            .last_heard
            .get(usize::from(board))
            .copied()
            .flatten()
    }

    /// When any valid frame last arrived from the upstream line.
    pub fn last_upstream(&self) -> Option<u64> {
        self.core.last_upstream
    }

    /// Bytes waiting in this endpoint for the link (own frames, acks, frames passed on).
    pub fn queued_bytes(&self) -> usize {
        self.core.queued_bytes()
    }

    /// What this endpoint has done so far.
    pub fn stats(&self) -> Stats {
        self.core.stats
    }

    /// What the line under it counted ([`Link::line_stats`]).
    pub fn line_stats(&self) -> Option<crate::link::LineStats> {
        self.link.line_stats()
    }
}
