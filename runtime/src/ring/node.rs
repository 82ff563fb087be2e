//! One board's place in the ring: the link-layer endpoint, the clock, the heartbeats, and what
//! the head makes of silence (which board stopped answering).

use super::msg::{decode, Msg};
use super::RingError;
use ::ring::endpoint::{Endpoint, SendError, Timing};
use ::ring::link::Link;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// How long a board that ends the run waits for its last messages (the stop) to be taken.
pub const STOP_NS: u64 = 10_000_000_000;

/// The quiet on the line in after which a stopped board stops passing frames on (longer than the
/// head's first resend timeout, so a Stop sent again for the boards after it gets through).
const LINGER_QUIET_NS: u64 = 3_000_000_000;

/// A follower gives the head this many times the head's silence limit before it gives up.
pub const FOLLOWER_PATIENCE: u64 = 10;

/// The pause between two pumps of a waiting board that found nothing to move.
pub const IDLE_NS: u64 = 50_000;

/// How often a board tells the head it is alive.
pub const BEAT_NS: u64 = 250_000_000;

/// A board the head has not heard from for this long (and whose downstream boards it still hears)
/// has stopped, at least. Beats come between matrix products, so this is far above a product's
/// time; the head raises it for slow boards ([`silence_for`]).
pub const SILENT_NS: u64 = 6_000_000_000;

/// The silence that means a board stopped, for boards whose slowest takes `slowest_token_ns` for
/// its window of one token: four such tokens, at least [`SILENT_NS`].
pub fn silence_for(slowest_token_ns: u64) -> u64 {
    (4 * slowest_token_ns).max(SILENT_NS)
}

/// The link's timers while boards boot and load (a board is not served while it loads its
/// window), and once the ring runs.
pub const FORMING: Timing = Timing {
    rto_ns: 1_000_000_000,
    max_rto_ns: 4_000_000_000,
    max_tries: 600,
    window: 16,
};
pub const RUNNING: Timing = Timing {
    rto_ns: 500_000_000,
    max_rto_ns: 16_000_000_000,
    // Far longer than the silence: when a board gives up on a peer, the silence has shown which
    // board it is (an unacknowledged frame to board 2 may be board 3's fault, which carries the
    // acks).
    max_tries: 16,
    // Frames in flight to a board: enough to keep a line busy while acks come round, few enough
    // that a heartbeat queued behind them on a slow line still arrives in time (a frame is up to
    // 4 KiB: 24 KiB is 80 ms at 3 Mbaud, and about a second over QEMU's socket-backed UARTs).
    window: 6,
};

/// A board of the ring.
pub struct Node<L: Link> {
    ep: Endpoint<L>,
    clock: fn() -> u64,
    /// When the next beat is due (once the ring runs): followers beat to the head, the head to
    /// the last board (through every other).
    next_beat: Option<u64>,
    /// A fault seen while pumping from a tick (reported by the next call that can fail).
    fault: Option<RingError>,
    /// The head watches the followers' beats (once the ring runs).
    watching: bool,
    /// The silence that means a board stopped.
    silent_ns: u64,
    /// Per board, what its last beat said: how long its upstream line had been quiet (ns), and
    /// when the beat came.
    reports: [Option<(u64, u64)>; 9],
}

impl<L: Link> core::fmt::Debug for Node<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Node")
            .field("me", &self.ep.me())
            .field("boards", &self.ep.boards())
            .finish_non_exhaustive()
    }
}

impl<L: Link> Node<L> {
    pub fn new(me: u8, boards: u8, link: L, clock: fn() -> u64) -> Self {
        Self {
            ep: Endpoint::new(me, boards, link, FORMING),
            clock,
            next_beat: None,
            fault: None,
            watching: false,
            silent_ns: SILENT_NS,
            reports: [None; 9],
        }
    }

    pub fn me(&self) -> u8 {
        self.ep.me()
    }

    pub fn boards(&self) -> u8 {
        self.ep.boards()
    }

    pub fn now(&self) -> u64 {
        (self.clock)()
    }

    /// The silence that means a board stopped, from now on.
    pub fn set_silence(&mut self, ns: u64) {
        self.silent_ns = ns.max(SILENT_NS);
    }

    /// The ring runs: short timers, and (on a follower) beats to the head.
    pub fn running(&mut self) {
        self.ep.set_timing(RUNNING);
        self.next_beat = Some(self.now());
        self.watching = true;
        // Every board counts as heard from now: formation and loading had no beats.
        self.ep.touch_all(self.now());
    }

    pub fn stats(&self) -> ring::endpoint::Stats {
        self.ep.stats()
    }

    /// What the line under the link counted, where the platform knows.
    pub fn line_stats(&self) -> Option<ring::link::LineStats> {
        self.ep.line_stats()
    }

    /// The link's and its line's counters as one line ([`stats_line`]).
    pub fn stats_text(&self) -> String {
        stats_line(&self.stats(), self.line_stats())
    }

    /// Move bytes, and beat when due.
    pub fn pump(&mut self) -> Result<(), RingError> {
        if let Some(f) = self.fault.take() {
            return Err(f);
        }
        let now = self.now();
        self.ep.pump(now).map_err(RingError::Link)?;
        while let Some((src, bytes)) = self.ep.recv_datagram() {
            if let Some(Msg::Beat {
                upstream_quiet_ms, ..
            }) = decode(&bytes)
            {
                let slot = self.reports.get_mut(src as usize);
                if let Some(slot) = slot {
                    *slot = Some((upstream_quiet_ms as u64 * 1_000_000, now));
                }
            }
        }
        if let Some(due) = self.next_beat.filter(|&d| now >= d) {
            self.next_beat = Some(due.max(now) + BEAT_NS);
            let quiet = self.ep.last_upstream().map_or(0, |t| now.saturating_sub(t));
            let beat = Msg::Beat {
                board: self.me(),
                upstream_quiet_ms: (quiet / 1_000_000).min(u32::MAX as u64) as u32,
            };
            // A beat that finds no room is skipped: the next one follows.
            let to = if self.me() == 1 { self.boards() } else { 1 };
            let _ = self.ep.send_datagram(to, &beat.encode());
        }
        // The head watches on every pump (while it sends, waits, or computes between products).
        if self.me() == 1 && self.watching {
            if let Some((board, quiet)) = self.silent_board() {
                return Err(RingError::Silent {
                    board,
                    ms: quiet / 1_000_000,
                    cause: "no heartbeat".into(),
                });
            }
        }
        Ok(())
    }

    /// [`Node::pump`] from between two matrix products: a fault is kept for the next call.
    pub fn tick(&mut self) {
        if self.fault.is_none() {
            if let Err(e) = self.pump() {
                self.fault = Some(e);
            }
        }
    }

    /// Queue `msg` for `dst`, pumping while the window to it is full (bounded: the link layer
    /// gives up on a board that does not acknowledge).
    pub fn send(&mut self, dst: u8, msg: &Msg<'_>) -> Result<(), RingError> {
        let bytes = msg.encode();
        loop {
            match self.ep.try_send(dst, &bytes) {
                Ok(()) => return Ok(()),
                Err(SendError::WindowFull { .. }) => self.pump_waiting()?,
                Err(e) => return Err(RingError::Protocol(e.to_string())),
            }
        }
    }

    /// The next message: its sender and bytes.
    pub fn recv(&mut self) -> Option<(u8, Vec<u8>)> {
        self.ep.recv()
    }

    /// Tell every other board the run is over (best effort: a board that cannot take it is
    /// skipped), and wait up to [`STOP_NS`] for it to be acknowledged.
    ///
    /// The furthest board's Stop (round the ring from this one) goes first: every Stop passes
    /// through the boards before its own, and a board stops as soon as it reads its own. Sent nearest first, board 2 could read
    /// its Stop, find nothing left to pass on (board 3's not yet off the line) and end, leaving
    /// the boards after it running. A line delivers in order, so furthest first means each board
    /// has every later board's Stop queued to pass on before it reads its own.
    pub fn stop_all(&mut self) {
        let stop = Msg::Stop.encode();
        let (n, me) = (self.boards(), self.me());
        // Board `me + d` round the ring, furthest (d = n - 1) first.
        for d in (1..n).rev() {
            let b = ((me - 1 + d) % n) + 1;
            let _ = self.ep.try_send(b, &stop);
        }
        self.flush(STOP_NS);
    }

    /// Send whatever is queued before the board stops (bounded by `ns`).
    pub fn flush(&mut self, ns: u64) {
        let end = self.now() + ns;
        while !self.ep.idle() && self.now() < end {
            let before = self.ep.stats();
            if self.ep.pump(self.now()).is_err() {
                break;
            }
            self.rest_if_idle(&before);
        }
    }

    /// After this board's own Stop: keep passing frames on until everything queued is sent and
    /// the line in has been quiet for `LINGER_QUIET_NS` (bounded by `ns`). A Stop for a later
    /// board that was corrupt on the way in is sent again by the head after its timeout, and only
    /// this board can pass the copy on: ending as soon as its own queue is empty would leave the
    /// later boards running.
    pub fn linger(&mut self, ns: u64) {
        let end = self.now() + ns;
        loop {
            let now = self.now();
            let heard = self
                .ep
                .last_upstream()
                .map_or(u64::MAX, |t| now.saturating_sub(t));
            if now >= end || (self.ep.idle() && heard >= LINGER_QUIET_NS) {
                return;
            }
            let before = self.ep.stats();
            if self.ep.pump(now).is_err() {
                return;
            }
            self.rest_if_idle(&before);
        }
    }

    /// The verdict on a ring that went quiet, at the head: the board furthest round the ring
    /// that has shown no sign of life for the silence limit: nothing from it arrived, and the
    /// board after it (or, for the last board, the head's own line) saw nothing on its line
    /// either. Its beats may sit behind data on a slow line, but a board that sends anything is
    /// alive. At a follower: the head, if nothing came from it for ten times as long (when a
    /// board dies the boards after it lose the head's beats too, and the head must name the dead
    /// board first). `None` if every board shows life.
    pub fn silent_board(&self) -> Option<(u8, u64)> {
        let now = self.now();
        let since = |t: Option<u64>| t.map_or(u64::MAX, |t| now.saturating_sub(t));
        if self.me() != 1 {
            let q = since(self.ep.last_heard(1));
            return (q >= FOLLOWER_PATIENCE * self.silent_ns).then_some((1, q));
        }
        let n = self.boards();
        (2..=n).rev().find_map(|b| {
            let heard = since(self.ep.last_heard(b));
            // How long the line out of board b has been quiet, as its downstream saw it.
            let line = match b == n {
                true => since(self.ep.last_upstream()),
                false => self.reports[b as usize + 1]
                    .map_or(u64::MAX, |(q, at)| q.saturating_add(now.saturating_sub(at))),
            };
            (heard.min(line) >= self.silent_ns).then_some((b, heard))
        })
    }

    /// What a failure at the head means, with the silent board named when there is one.
    pub fn diagnose(&self, cause: RingError) -> RingError {
        match self.silent_board() {
            Some((board, quiet)) => RingError::Silent {
                board,
                ms: quiet / 1_000_000,
                cause: cause.to_string(),
            },
            None => cause,
        }
    }

    /// A decoded message from `bytes`, or a protocol error naming the sender.
    pub fn decode<'b>(src: u8, bytes: &'b [u8]) -> Result<Msg<'b>, RingError> {
        decode(bytes).ok_or(RingError::Garbled { board: src })
    }
}

/// The link's counters as one line, with what its line counted when the platform knows
/// (`line`: how it was received, the UART's overruns, bytes dropped with the buffer full).
pub fn stats_line(s: &::ring::endpoint::Stats, line: Option<::ring::link::LineStats>) -> String {
    let line =
        match line {
            Some(l) if l.by_irq => alloc::format!(
            "; line: {} bytes received by interrupt ({} interrupts), {} overruns, {} dropped with the buffer full",
            l.irq_bytes, l.irqs, l.overruns, l.dropped
        ),
            Some(l) => alloc::format!("; line: polled, {} overruns", l.overruns),
            None => String::new(),
        };
    alloc::format!(
        "ring: link sent {} frames ({} KiB), received {} ({} KiB); {} resent, {} corrupt, {} passed on, {} duplicates, {} out of order, {} refused with a full inbox, {} shed{line}",
        s.frames_sent,
        s.bytes_sent >> 10,
        s.frames_received,
        s.bytes_received >> 10,
        s.retransmitted,
        s.corrupt.total(),
        s.forwarded,
        s.duplicates,
        s.out_of_order,
        s.inbox_full,
        s.shed
    )
}

/// Text of a fault message for the head.
pub fn fault_text(e: &dyn core::fmt::Display) -> String {
    let mut s = alloc::format!("{e}");
    // At most 300 bytes, cut at a character's start.
    let mut end = s.len().min(300);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

impl<L: Link> Node<L> {
    /// Pump and take messages until `f` says done (true), a board reports a fault, the head
    /// finds a board silent, or `timeout_ns` passes. Beats are taken here.
    pub fn wait(
        &mut self,
        waiting: &str,
        timeout_ns: u64,
        f: &mut dyn FnMut(&mut Self, u8, Msg<'_>) -> Result<bool, RingError>,
    ) -> Result<(), RingError> {
        let start = self.now();
        loop {
            if let Err(e) = self.pump_waiting() {
                return Err(self.verdict(e));
            }
            while let Some((src, bytes)) = self.recv() {
                match Self::decode(src, &bytes)? {
                    Msg::Beat { .. } => {}
                    Msg::Fault { board, what } => {
                        return Err(RingError::Fault {
                            board,
                            what: what.into(),
                        })
                    }
                    m => {
                        if f(self, src, m)? {
                            return Ok(());
                        }
                    }
                }
            }
            let waited = self.now().saturating_sub(start);
            if let Some((board, quiet)) = self.silent_board().filter(|_| self.watching) {
                return Err(RingError::Silent {
                    board,
                    ms: quiet / 1_000_000,
                    cause: alloc::format!("waiting for {waiting}"),
                });
            }
            if waited >= timeout_ns {
                let e = RingError::Timeout {
                    waiting: waiting.into(),
                    ms: waited / 1_000_000,
                };
                return Err(self.verdict(e));
            }
        }
    }

    /// [`Node::pump`] from a loop that waits for the line: pause when nothing moved.
    fn pump_waiting(&mut self) -> Result<(), RingError> {
        let before = self.ep.stats();
        self.pump()?;
        self.rest_if_idle(&before);
        Ok(())
    }

    /// After a pump that moved nothing, wait [`IDLE_NS`] before the next: a core polling its
    /// UART without pause gains nothing on a board, and under QEMU it starves the thread that
    /// feeds the emulated UART from its socket (each register read takes QEMU's global lock).
    fn rest_if_idle(&self, before: &::ring::endpoint::Stats) {
        let after = self.ep.stats();
        if after.bytes_received == before.bytes_received && after.bytes_sent == before.bytes_sent {
            let until = self.now() + IDLE_NS;
            while self.now() < until {
                core::hint::spin_loop();
            }
        }
    }

    /// The error with the silent board named, when there is one.
    pub fn verdict(&self, e: RingError) -> RingError {
        if self.watching {
            self.diagnose(e)
        } else {
            e
        }
    }
}

#[cfg(test)]
mod tests;
