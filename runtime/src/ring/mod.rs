//! A ring of boards: one model across several boards linked by serial lines, each running a
//! window of layers, as prima.cpp's piped ring.
//!
//! Board `k` of `N` (`ring = k/N` in `lmboot.txt`) sends to board `k + 1` and hears board `k - 1`
//! on its link UART (the last board sends to board 1). Board 1, the head, has the console, the
//! tokenizer and the sampler.
//!
//! - **Formation** ([`head::gather`], [`head::assign`], [`follower::join`]): each board sends the head a
//!   [`msg::Msg::Hello`] with its place, the model it holds (the prompt cache's model key) and its
//!   profile; the head checks them, splits the layers ([`plan`]) and sends every board the split;
//!   each board pins its window in its page cache (streaming what does not fit) and says it is
//!   ready.
//! - **Tokens**: the head runs the embedding and its layers and hands the hidden states (f32, so
//!   the result is bit for bit one board's) to board 2, which runs its layers and passes them on;
//!   the last board sends the last row back when logits are wanted. A prompt goes in batches, and
//!   the head computes batch `i + 1` while board 2 works on batch `i` ([`head::Head`], which is
//!   the generation loop's [`inference::generate::Remote`]).
//! - **Faults**: the link layer acknowledges and resends; followers beat a few times a second;
//!   a board that stops answering, a garbled stream, a model mismatch or a misordered ring ends
//!   the run with a message on the head's console naming the board and the cause.

pub mod follower;
pub mod head;
pub mod msg;
pub mod node;
pub mod plan;

use ::ring::endpoint::LinkError;
use alloc::string::String;
use core::fmt;

pub use node::Node;

/// Why the ring stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum RingError {
    /// The link layer gave up (a board did not acknowledge, or the ring is misordered).
    Link(LinkError),
    /// Board `board` has not been heard for `ms` (the boards after it still are).
    Silent { board: u8, ms: u64, cause: String },
    /// A message from `board` that is not one.
    Garbled { board: u8 },
    /// A message that makes no sense where it came.
    Protocol(String),
    /// A board that does not belong in this ring as configured.
    Mismatch { board: u8, what: String },
    /// A board gave up and said why.
    Fault { board: u8, what: String },
    /// Nothing came in time.
    Timeout { waiting: String, ms: u64 },
    /// No split of the layers fits the boards.
    Plan(plan::PlanError),
    /// This board's own part of the work failed.
    Local(String),
    /// The head ended the run (a follower's normal end).
    Stopped,
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::Link(e) => write!(f, "{e}"),
            RingError::Silent { board, ms, cause } => write!(
                f,
                "board {board} stopped answering (nothing from it for {ms} ms): {cause}"
            ),
            RingError::Garbled { board } => {
                write!(f, "board {board} sent a message that does not decode")
            }
            RingError::Protocol(m) => write!(f, "{m}"),
            RingError::Mismatch { board, what } => write!(f, "board {board}: {what}"),
            RingError::Fault { board, what } => write!(f, "board {board} gave up: {what}"),
            RingError::Timeout { waiting, ms } => {
                write!(f, "no answer in {ms} ms while waiting for {waiting}")
            }
            RingError::Plan(e) => write!(f, "splitting the layers: {e}"),
            RingError::Local(m) => write!(f, "{m}"),
            RingError::Stopped => write!(f, "the head ended the run"),
        }
    }
}
