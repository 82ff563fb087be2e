//! In-memory serial lines for tests: a ring of [`FakeLink`]s with seeded faults.
//!
//! [`ring`] makes `n` lines and `n` links; link `i` sends on line `i` (to link `i + 1`) and
//! receives from line `i - 1`. Each line is a byte queue behind an `Arc<spin::Mutex<_>>`, so the
//! links are `Send` and a host test can give each board its own thread. Faults come from a
//! per-line xorshift generator seeded from [`Faults::seed`], so a run is reproducible:
//! - per byte sent: lost ([`Faults::drop_per_million`]) or one bit flipped
//!   ([`Faults::flip_per_million`]);
//! - per frame: after a `0x00`, the next frame is held back and delivered after the one that
//!   follows it ([`Faults::reorder_per_million`]);
//! - per frame, after its `0x00`: a burst of random bytes ([`Faults::garbage_per_million`]), some
//!   ending in a `0x00` of their own and some running into the next frame; an earlier frame of
//!   the line sent again, as it was sent ([`Faults::replay_per_million`]: one of the last
//!   [`Faults::replay_memory`], duplicated or long out of date); the next frame cut short, its
//!   delimiter kept ([`Faults::truncate_per_million`]);
//! - [`Faults::capacity`]: a line buffers at most that many bytes; `send` takes what fits;
//! - [`FakeLink::kill`]: a board's lines go dead, as if it lost power.

use crate::link::Link;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use spin::Mutex;

#[cfg(test)]
mod tests;

/// What goes wrong on every line of a fake ring.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Seeds the lines' generators (each line mixes in its index).
    pub seed: u64,
    /// Bytes lost, per million sent.
    pub drop_per_million: u32,
    /// Bytes with one bit flipped, per million sent.
    pub flip_per_million: u32,
    /// Frames delivered after the frame that followed them, per million frames.
    pub reorder_per_million: u32,
    /// Bytes a line buffers; 0 = unbounded; `send` takes only what fits.
    pub capacity: usize,
    /// Bursts of 1 to [`MAX_GARBAGE`] random bytes after a frame, per million frames.
    pub garbage_per_million: u32,
    /// Frames cut short (the rest up to the delimiter lost), per million frames.
    pub truncate_per_million: u32,
    /// Earlier frames sent again after a frame, per million frames.
    pub replay_per_million: u32,
    /// How many of the last frames a replay picks from (0: [`REPLAY_FRAMES`]); a long memory
    /// replays frames long out of date (and holds that many frames).
    pub replay_memory: usize,
}

/// The longest burst of garbage.
pub const MAX_GARBAGE: usize = 64;

/// Frames a line remembers for replays unless [`Faults::replay_memory`] says otherwise.
pub const REPLAY_FRAMES: usize = 8;

/// What happened on one line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    /// Bytes `send` took (lost ones included).
    pub accepted: u64,
    /// Bytes `recv` handed out.
    pub delivered: u64,
    /// Bytes lost.
    pub dropped: u64,
    /// Bytes with a bit flipped.
    pub flipped: u64,
    /// Frames swapped with the next one.
    pub reordered: u64,
    /// Random bytes put on the line.
    pub garbage: u64,
    /// Frames cut short (a frame shorter than the cut goes whole and is not counted).
    pub truncated: u64,
    /// Frames sent again.
    pub replayed: u64,
}

/// A small xorshift64* generator: deterministic faults and test data, no dependencies.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from any seed (0 included).
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that nearby seeds give unrelated streams; never 0.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `per_million / 1e6`.
    pub fn chance(&mut self, per_million: u32) -> bool {
        per_million > 0 && self.below(1_000_000) < u64::from(per_million)
    }
}

/// Where a line is in swapping two frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Swap {
    /// Bytes go straight to the queue.
    Off,
    /// The frame being sent is held back.
    Holding,
    /// The held frame waits for the end of this one.
    Passing,
}

/// A held frame longer than this is let go unswapped (a line of garbage without delimiters must
/// not be held without bound).
const MAX_HELD: usize = 2 * crate::frame::MAX_WIRE;

/// Where a line is in cutting a frame short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Off,
    /// This many more bytes of the frame go through, then the rest is lost.
    Keep(usize),
    /// Losing the rest of the frame, up to its delimiter.
    Dropping,
}

/// One direction of one wire.
#[derive(Debug)]
struct Line {
    queue: VecDeque<u8>,
    held: Vec<u8>,
    swap: Swap,
    rng: Rng,
    faults: Faults,
    dead: bool,
    stats: LineStats,
    /// The frame being sent, as sent (for replays); empty past [`MAX_WIRE`](crate::frame::MAX_WIRE).
    current: Vec<u8>,
    /// The last whole frames sent, for replays.
    recent: VecDeque<Vec<u8>>,
    /// Cutting the frame being sent.
    cut: Cut,
}

impl Line {
    fn new(index: usize, faults: Faults) -> Self {
        Self {
            queue: VecDeque::new(),
            held: Vec::new(),
            swap: Swap::Off,
            rng: Rng::new(faults.seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407)),
            faults,
            dead: false,
            stats: LineStats::default(),
            current: Vec::new(),
            recent: VecDeque::new(),
            cut: Cut::Off,
        }
    }

    /// How many bytes `send` may take now.
    fn room(&self) -> usize {
        match self.faults.capacity {
            0 => usize::MAX,
            cap => cap.saturating_sub(self.queue.len()),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> usize {
        if self.dead {
            return bytes.len();
        }
        let n = bytes.len().min(self.room());
        for &b in &bytes[..n] {
            self.stats.accepted += 1;
            self.remember(b);
            if self.cutting(b) {
                continue;
            }
            if self.rng.chance(self.faults.drop_per_million) {
                self.stats.dropped += 1;
            } else {
                let mut b = b;
                if self.rng.chance(self.faults.flip_per_million) {
                    self.stats.flipped += 1;
                    b ^= 1 << self.rng.below(8);
                }
                self.put(b);
            }
            if b == 0 {
                self.between_frames();
            }
        }
        n
    }

    /// Keep the frame being sent for replays; a delimiter closes it.
    fn remember(&mut self, b: u8) {
        if self.faults.replay_per_million == 0 {
            return;
        }
        if b != 0 {
            if self.current.len() < crate::frame::MAX_WIRE {
                self.current.push(b);
            }
            return;
        }
        let mut frame = core::mem::take(&mut self.current);
        if frame.is_empty() || frame.len() >= crate::frame::MAX_WIRE {
            return;
        }
        frame.push(0);
        let memory = match self.faults.replay_memory {
            0 => REPLAY_FRAMES,
            n => n,
        };
        if self.recent.len() >= memory {
            self.recent.pop_front();
        }
        self.recent.push_back(frame);
    }

    /// True if `b` falls in the cut-off end of a truncated frame (the delimiter never does).
    fn cutting(&mut self, b: u8) -> bool {
        match self.cut {
            _ if b == 0 => {
                self.cut = Cut::Off;
                false
            }
            Cut::Off => false,
            Cut::Keep(0) => {
                self.stats.truncated += 1;
                self.cut = Cut::Dropping;
                true
            }
            Cut::Keep(n) => {
                self.cut = Cut::Keep(n - 1);
                false
            }
            Cut::Dropping => true,
        }
    }

    /// After a frame's delimiter: garbage, a replay, and whether the next frame is cut.
    fn between_frames(&mut self) {
        let f = self.faults;
        if self.rng.chance(f.replay_per_million) && !self.recent.is_empty() {
            let i = self.rng.below(self.recent.len() as u64) as usize;
            let frame = core::mem::take(&mut self.recent[i]);
            for &b in &frame {
                self.put(b);
            }
            self.recent[i] = frame;
            self.stats.replayed += 1;
        }
        if self.rng.chance(f.garbage_per_million) {
            let n = 1 + self.rng.below(MAX_GARBAGE as u64);
            for _ in 0..n {
                let b = self.rng.below(256) as u8;
                self.put(b);
            }
            // Half the bursts end in a delimiter; the rest run into the next frame and spoil it.
            if self.rng.below(2) == 0 {
                self.put(0);
            }
            self.stats.garbage += n;
        }
        if self.rng.chance(f.truncate_per_million) {
            self.cut = Cut::Keep(self.rng.below(48) as usize);
        }
    }

    /// Queue one byte that survived, holding back a frame when the dice say swap.
    fn put(&mut self, b: u8) {
        match self.swap {
            Swap::Off => {
                self.queue.push_back(b);
                if b == 0 && self.rng.chance(self.faults.reorder_per_million) {
                    self.swap = Swap::Holding;
                }
            }
            Swap::Holding => {
                self.held.push(b);
                if b == 0 {
                    self.swap = Swap::Passing;
                } else if self.held.len() > MAX_HELD {
                    self.release();
                }
            }
            Swap::Passing => {
                self.queue.push_back(b);
                if b == 0 {
                    self.stats.reordered += 1;
                    self.release();
                }
            }
        }
    }

    /// Let the held frame go after what is queued.
    fn release(&mut self) {
        self.queue.extend(self.held.drain(..));
        self.swap = Swap::Off;
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        if self.dead {
            return 0;
        }
        let n = buf.len().min(self.queue.len());
        for (dst, src) in buf.iter_mut().zip(self.queue.drain(..n)) {
            *dst = src;
        }
        self.stats.delivered += n as u64;
        n
    }

    fn kill(&mut self) {
        self.dead = true;
        self.queue.clear();
        self.held.clear();
    }
}

/// One board's end of a fake ring: sends on its own line, receives on the previous board's.
#[derive(Debug, Clone)]
pub struct FakeLink {
    tx: Arc<Mutex<Line>>,
    rx: Arc<Mutex<Line>>,
}

/// `boards` links wired in a ring: link `i` sends to link `i + 1` (mod `boards`) and receives from
/// link `i - 1`; index 0 is board 1. One board gives a link that hears itself.
pub fn ring(boards: usize, faults: Faults) -> Vec<FakeLink> {
    let lines: Vec<_> = (0..boards)
        .map(|i| Arc::new(Mutex::new(Line::new(i, faults))))
        .collect();
    (0..boards)
        .map(|i| FakeLink {
            tx: lines[i].clone(),
            rx: lines[(i + boards - 1) % boards].clone(),
        })
        .collect()
}

impl FakeLink {
    /// This board's lines go dead: it accepts bytes and delivers nothing, and nothing sent to it
    /// is delivered (the previous board's bytes vanish; its sends never block).
    pub fn kill(&self) {
        self.tx.lock().kill();
        self.rx.lock().kill();
    }

    /// What happened on this board's outgoing line.
    pub fn stats(&self) -> LineStats {
        self.tx.lock().stats
    }

    /// Bytes waiting on this board's outgoing line (held frames included).
    pub fn queued(&self) -> usize {
        let line = self.tx.lock();
        line.queue.len() + line.held.len()
    }
}

impl Link for FakeLink {
    fn send(&mut self, bytes: &[u8]) -> usize {
        self.tx.lock().send(bytes)
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        self.rx.lock().recv(buf)
    }
}
