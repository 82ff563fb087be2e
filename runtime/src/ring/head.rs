//! The head board (board 1): it forms the ring, splits the layers, and during the run hands the
//! hidden states round the ring as the generation loop's [`Remote`].

use super::msg::{chunks_for, f32_bytes, put_chunk, Msg, CHUNK_BYTES};
use super::plan::{self, Profile, Shape, Window};
use super::{Node, RingError};
use ::ring::link::Link;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use inference::generate::Remote;
use inference::model::Part;

/// How long the head waits for every board to boot and say hello.
pub const HELLO_NS: u64 = 600_000_000_000;
/// How long it waits for the boards to load their windows.
pub const LOAD_NS: u64 = 1_800_000_000_000;
/// How long it waits for a batch to come round the ring (the boards' beats show they are alive;
/// this only bounds a ring that is alive but never answers).
pub const ROUND_NS: u64 = 600_000_000_000;

/// Formation, first step: every board's hello, checked against this board's ring size and
/// model. Returns the profiles in ring order, the head's first.
pub fn gather<L: Link>(
    node: &mut Node<L>,
    model_key: u64,
    mine: Profile,
) -> Result<Vec<Profile>, RingError> {
    let n = node.boards();
    let mut got: Vec<Option<Profile>> = vec![None; n as usize];
    got[0] = Some(mine);
    let mut left = n - 1;
    node.wait("every board's hello", HELLO_NS, &mut |_, src, m| {
        let Msg::Hello {
            board,
            boards,
            model_key: key,
            profile,
        } = m
        else {
            return Err(unexpected(src, "a hello"));
        };
        if boards != n || board != src {
            return Err(RingError::Mismatch {
                board: src,
                what: format!(
                    "its lmboot.txt says ring = {board}/{boards}, but it sits at place {src} of a ring of {n}"
                ),
            });
        }
        if key != model_key {
            return Err(RingError::Mismatch {
                board: src,
                what: format!(
                    "it holds a different model (key {key:016x}, the head's is {model_key:016x})"
                ),
            });
        }
        let slot = &mut got[src as usize - 1];
        if slot.replace(profile).is_none() {
            left -= 1;
        }
        Ok(left == 0)
    })?;
    Ok(got.into_iter().flatten().collect())
}

/// Formation, second step: split the layers and tell every board its window.
pub fn assign<L: Link>(
    node: &mut Node<L>,
    shape: &Shape,
    profiles: &[Profile],
    ctx: usize,
    batch: usize,
) -> Result<Vec<Window>, RingError> {
    let windows = plan::plan(shape, profiles).map_err(RingError::Plan)?;
    let starts: Vec<u16> = windows.iter().map(|w| w.layers.start as u16).collect();
    let slowest = windows.iter().map(|w| w.ns).max().unwrap_or(0);
    let silent = super::node::silence_for(slowest);
    node.set_silence(silent);
    let msg = Msg::Assign {
        starts,
        ctx: ctx as u32,
        batch: batch as u16,
        silent_ms: (silent / 1_000_000).min(u32::MAX as u64) as u32,
    };
    for b in 2..=node.boards() {
        node.send(b, &msg)?;
    }
    Ok(windows)
}

/// Formation, last step: every board loaded its window. Returns each follower's (pinned,
/// streamed) bytes.
pub fn await_ready<L: Link>(node: &mut Node<L>) -> Result<Vec<(u64, u64)>, RingError> {
    let n = node.boards() as usize;
    let mut got = vec![None; n - 1];
    let mut left = n - 1;
    node.wait(
        "every board to load its layers",
        LOAD_NS,
        &mut |_, src, m| {
            let Msg::Ready {
                pinned, streamed, ..
            } = m
            else {
                return Err(unexpected(src, "ready"));
            };
            if got[src as usize - 2].replace((pinned, streamed)).is_none() {
                left -= 1;
            }
            Ok(left == 0)
        },
    )?;
    node.running();
    Ok(got.into_iter().flatten().collect())
}

fn unexpected(src: u8, wanted: &str) -> RingError {
    RingError::Protocol(format!(
        "board {src} sent a message out of turn (expected {wanted})"
    ))
}

/// The rest of the ring as the head's generation loop sees it.
pub struct Head<'n, L: Link> {
    node: &'n RefCell<Node<L>>,
    part: Part,
    /// Batches handed on and not yet through the last board.
    in_flight: Cell<usize>,
    /// At most this many batches in flight (each board works on one, the next is on its way).
    depth: usize,
    /// The path kept of the last tree batch, and where it was, to go with the next batch.
    kept: RefCell<(u32, Vec<u8>)>,
}

impl<L: Link> core::fmt::Debug for Head<'_, L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Head")
            .field("part", &self.part)
            .finish_non_exhaustive()
    }
}

impl<'n, L: Link> Head<'n, L> {
    /// The head of the ring `node` is in, running `part` itself.
    pub fn new(node: &'n RefCell<Node<L>>, part: Part) -> Self {
        let depth = node.borrow().boards() as usize;
        Self {
            node,
            part,
            in_flight: Cell::new(0),
            depth,
            kept: RefCell::new((0, Vec::new())),
        }
    }

    /// Take messages until the rows asked back fill `out` (`None`: until one batch is done).
    fn collect(&self, node: &mut Node<L>, mut out: Option<&mut [f32]>) -> Result<(), RingError> {
        let chunks = out.as_deref().map_or(0, |o| chunks_for(o.len()));
        let mut seen = 0usize;
        let in_flight = &self.in_flight;
        node.wait("the ring's answer", ROUND_NS, &mut |_, src, m| match m {
            Msg::Done { .. } => {
                in_flight.set(in_flight.get().saturating_sub(1));
                Ok(out.is_none())
            }
            Msg::Last { chunk, bytes, .. } => {
                let Some(o) = out.as_deref_mut() else {
                    return Err(unexpected(src, "done"));
                };
                if chunk as usize != seen || !put_chunk(o, chunk, bytes) {
                    return Err(RingError::Protocol(format!(
                        "board {src} sent chunk {chunk} of the last rows out of order"
                    )));
                }
                seen += 1;
                if seen == chunks {
                    in_flight.set(in_flight.get().saturating_sub(1));
                }
                Ok(seen == chunks)
            }
            _ => Err(unexpected(src, "the last row or done")),
        })
    }
}

impl<L: Link> Remote for Head<'_, L> {
    fn part(&self) -> &Part {
        &self.part
    }

    fn send(
        &self,
        x: &[f32],
        (pos, b, back): (usize, usize, usize),
        parents: &[u8],
    ) -> Result<(), String> {
        let mut node = self.node.borrow_mut();
        let (kept_at, kept) = core::mem::take(&mut *self.kept.borrow_mut());
        let mut run = || -> Result<(), RingError> {
            while self.in_flight.get() >= self.depth {
                self.collect(&mut node, None)?;
            }
            let bytes = f32_bytes(x);
            for (c, chunk) in bytes.chunks(CHUNK_BYTES).enumerate() {
                let m = Msg::Acts {
                    pos: pos as u32,
                    rows: b as u16,
                    back: back as u16,
                    chunk: c as u16,
                    bytes: chunk,
                    parents: if c == 0 { parents } else { &[] },
                    kept_at,
                    kept: if c == 0 { &kept } else { &[] },
                };
                node.send(2, &m).map_err(|e| node.verdict(e))?;
            }
            self.in_flight.set(self.in_flight.get() + 1);
            Ok(())
        };
        run().map_err(|e| e.to_string())
    }

    fn keep(&self, base: usize, rows: &[u8]) {
        *self.kept.borrow_mut() = (base as u32, rows.to_vec());
    }

    fn receive(&self, out: &mut [f32]) -> Result<(), String> {
        let mut node = self.node.borrow_mut();
        self.collect(&mut node, Some(out))
            .map_err(|e| e.to_string())
    }

    fn tick(&self) {
        if let Ok(mut node) = self.node.try_borrow_mut() {
            node.tick();
        }
    }
}
