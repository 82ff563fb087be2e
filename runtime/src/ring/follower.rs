//! A board after the head: it says hello, takes its window, and then runs its layers on every
//! batch of hidden states that comes round, passing them on, until the head says stop.

use super::msg::{chunks_for, f32_bytes, put_chunk, Msg, CHUNK_BYTES};
use super::plan::Profile;
use super::{Node, RingError};
use ::ring::link::Link;
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::ops::Range;
use inference::model::{Input, Model, Part, RunState, Tree};
use inference::parallel::Parallel;
use inference::{Kernels, Storage};

/// How long, at most, a board that was told to stop keeps passing on what it has queued and what
/// still comes (the head's stop for the boards after it, sent again if it was lost).
const STOP_FLUSH_NS: u64 = super::node::STOP_NS;

/// What the head told this board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// This board's layers.
    pub layers: Range<usize>,
    pub ctx: usize,
    pub batch: usize,
}

/// Say hello to the head and wait for this board's window (as long as the head takes to come up).
pub fn join<L: Link>(
    node: &mut Node<L>,
    model_key: u64,
    profile: Profile,
    n_layer: usize,
) -> Result<Assignment, RingError> {
    let hello = Msg::Hello {
        board: node.me(),
        boards: node.boards(),
        model_key,
        profile,
    };
    node.send(1, &hello)?;
    let me = node.me() as usize;
    let mut got = None;
    let waited = node.wait(
        "the head's split of the layers",
        u64::MAX,
        &mut |n, src, m| match m {
            Msg::Assign {
                starts,
                ctx,
                batch,
                silent_ms,
            } if starts.len() >= me => {
                let start = starts[me - 1] as usize;
                let end = starts.get(me).map_or(n_layer, |&s| s as usize);
                if start >= end || end > n_layer {
                    return Err(RingError::Protocol(format!(
                        "the head assigned layers {start}..{end} of {n_layer}"
                    )));
                }
                n.set_silence(silent_ms as u64 * 1_000_000);
                got = Some(Assignment {
                    layers: start..end,
                    ctx: ctx as usize,
                    batch: batch as usize,
                });
                Ok(true)
            }
            Msg::Stop => Err(RingError::Stopped),
            _ => Err(RingError::Protocol(format!(
                "board {src} sent a message out of turn (expected the split)"
            ))),
        },
    );
    if let Err(RingError::Stopped) = &waited {
        node.linger(STOP_FLUSH_NS);
    }
    waited?;
    got.ok_or(RingError::Stopped)
}

/// Tell the head this board is loaded.
pub fn ready<L: Link>(node: &mut Node<L>, pinned: u64, streamed: u64) -> Result<(), RingError> {
    let m = Msg::Ready {
        board: node.me(),
        pinned,
        streamed,
    };
    node.send(1, &m)?;
    node.running();
    Ok(())
}

/// A batch coming in.
#[derive(Debug, Default)]
struct Batch {
    pos: usize,
    rows: usize,
    /// Rows the last board sends back (the last ones).
    back: usize,
    /// The tree the rows form (`None`: consecutive tokens).
    tree: Option<Tree>,
    /// The path the head kept of the tree batch at `.0` before this one.
    kept: Option<(usize, Vec<u8>)>,
    chunks: usize,
    seen: usize,
}

/// What a follower did: batches served, bytes of hidden states taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    pub batches: u64,
    pub bytes: u64,
}

impl Served {
    fn add(&mut self, b: &Batch, dim: usize) {
        self.batches += 1;
        self.bytes += (b.rows * dim * 4) as u64;
    }
}

/// Run this board's layers on every batch that comes until the head says stop. Returns what it
/// served.
pub fn serve<L, S, P>(
    node: &RefCell<Node<L>>,
    model: &Model,
    st: &mut RunState,
    run: (&S, &P, &Kernels),
    part: &Part,
) -> Result<Served, RingError>
where
    L: Link,
    S: Storage + Sync + ?Sized,
    P: Parallel + ?Sized,
{
    let dim = model.config.dim;
    let mut served = Served::default();
    loop {
        let batch = take_batch(&mut node.borrow_mut(), st, dim)?;
        let Some(b) = batch else {
            // Pass on what is queued (the head's stop for the boards after this one).
            node.borrow_mut().linger(STOP_FLUSH_NS);
            return Ok(served);
        };
        if let Some((at, rows)) = &b.kept {
            if let Err(e) = st.keep_path(*at, rows) {
                let e = RingError::Protocol(format!("the path kept at {at}: {e}"));
                return Err(report(&mut node.borrow_mut(), e));
            }
        }
        if b.pos > st.pos {
            let e = format!(
                "a batch at position {} but this board is at {}",
                b.pos, st.pos
            );
            return Err(report(&mut node.borrow_mut(), RingError::Protocol(e)));
        }
        st.pos = b.pos;
        let tick = || node.borrow_mut().tick();
        st.set_tree(b.tree.as_ref());
        let r = model.forward_part(st, run, Input::Hidden(b.rows), part, false, Some(&tick));
        st.set_tree(None);
        let mut n = node.borrow_mut();
        if let Err(e) = r {
            return Err(report(&mut n, RingError::Local(e.to_string())));
        }
        pass_on(&mut n, st, dim, &b).map_err(|e| report(&mut n, e))?;
        served.add(&b, dim);
    }
}

/// Receive the next batch's hidden states into `st.x`; `None` when the head says stop.
fn take_batch<L: Link>(
    node: &mut Node<L>,
    st: &mut RunState,
    dim: usize,
) -> Result<Option<Batch>, RingError> {
    let mut b = Batch::default();
    let max_rows = st.batch();
    let mut stop = false;
    node.wait("hidden states", u64::MAX, &mut |_, src, m| match m {
        Msg::Acts {
            pos,
            rows,
            back,
            chunk,
            bytes,
            parents,
            kept_at,
            kept,
        } => {
            if b.seen == 0 {
                let rows = rows as usize;
                if rows == 0 || rows > max_rows || back as usize > rows {
                    return Err(RingError::Protocol(format!(
                        "board {src} sent a batch of {rows} rows, {back} wanted back (this board takes 1 to {max_rows})"
                    )));
                }
                let tree = match parents {
                    [] => None,
                    p => match Tree::from_parents(p).filter(|t| t.len() == rows) {
                        Some(t) => Some(t),
                        None => {
                            return Err(RingError::Protocol(format!(
                                "board {src} sent a tree of {} parents for {rows} rows that is not one",
                                p.len()
                            )))
                        }
                    },
                };
                b = Batch {
                    pos: pos as usize,
                    rows,
                    back: back as usize,
                    chunks: chunks_for(rows * dim),
                    seen: 0,
                    tree,
                    kept: (!kept.is_empty()).then(|| (kept_at as usize, kept.to_vec())),
                };
            }
            let x = &mut st.x[..b.rows * dim];
            if chunk as usize != b.seen || pos as usize != b.pos || !put_chunk(x, chunk, bytes) {
                return Err(RingError::Protocol(format!(
                    "board {src} sent chunk {chunk} of the batch at {pos} out of order"
                )));
            }
            b.seen += 1;
            Ok(b.seen == b.chunks)
        }
        Msg::Stop => {
            stop = true;
            Ok(true)
        }
        _ => Err(RingError::Protocol(format!(
            "board {src} sent a message out of turn (expected hidden states)"
        ))),
    })?;
    Ok((!stop).then_some(b))
}

/// Hand the batch on: to the next board, or from the last board back to the head (the last rows
/// asked for, else word that it is done).
fn pass_on<L: Link>(
    node: &mut Node<L>,
    st: &RunState,
    dim: usize,
    b: &Batch,
) -> Result<(), RingError> {
    let (me, n) = (node.me(), node.boards());
    if me < n {
        let bytes = f32_bytes(&st.x[..b.rows * dim]);
        for (c, chunk) in bytes.chunks(CHUNK_BYTES).enumerate() {
            let m = Msg::Acts {
                pos: b.pos as u32,
                rows: b.rows as u16,
                back: b.back as u16,
                chunk: c as u16,
                bytes: chunk,
                parents: match (&b.tree, c) {
                    (Some(t), 0) => t.parents(),
                    _ => &[],
                },
                kept_at: b.kept.as_ref().map_or(0, |k| k.0 as u32),
                kept: match (&b.kept, c) {
                    (Some(k), 0) => &k.1,
                    _ => &[],
                },
            };
            node.send(me + 1, &m)?;
        }
        return Ok(());
    }
    if b.back == 0 {
        return node.send(1, &Msg::Done { pos: b.pos as u32 });
    }
    let last: Vec<u8> = f32_bytes(&st.x[(b.rows - b.back) * dim..b.rows * dim]);
    for (c, chunk) in last.chunks(CHUNK_BYTES).enumerate() {
        let m = Msg::Last {
            pos: b.pos as u32,
            chunk: c as u16,
            bytes: chunk,
        };
        node.send(1, &m)?;
    }
    Ok(())
}

/// Tell the head why this board gives up (best effort), and return the error.
fn report<L: Link>(node: &mut Node<L>, e: RingError) -> RingError {
    give_up(node, &e);
    e
}

/// Tell the head this board gives up because of `why` (best effort; its first 300 bytes).
pub fn give_up<L: Link>(node: &mut Node<L>, why: &dyn core::fmt::Display) {
    let what = super::node::fault_text(why);
    let m = Msg::Fault {
        board: node.me(),
        what: &what,
    };
    if node.send(1, &m).is_ok() {
        node.flush(STOP_FLUSH_NS);
    }
}
