//! The link layer for a ring of boards joined by serial lines.
//!
//! Boards are wired TX to RX in a ring: board `k` sends only to board `k + 1` and receives only
//! from board `k - 1` (board `N` sends to board 1). Boards are numbered `1..=N`, `N <= 8`; board 1
//! is the head. Any board can send a message to any other: a frame goes round the ring, each board
//! on the way passing it on, until it reaches its addressee.
//!
//! The layers, bottom up:
//! - [`link`]: a serial line as a [`link::Link`], bytes out to the next board and bytes in from
//!   the previous one, never blocking;
//! - [`frame`]: a frame on the wire is
//!   `COBS(postcard(Header) ++ payload ++ crc32_le(postcard(Header) ++ payload)) ++ 0x00`; the
//!   [`frame::Decoder`] finds frames in any byte stream, rejects corrupt ones as typed
//!   [`frame::FrameError`]s and resynchronises at the next `0x00`, with a bounded buffer;
//! - [`endpoint`]: reliable, in-order, exactly-once delivery of messages between any two boards,
//!   end to end: sequence numbers per (source, destination), cumulative acknowledgements that
//!   travel round the ring like data, retransmission when an ack is overdue, forwarding of frames
//!   addressed to other boards, back-pressure instead of loss when a line is slow;
//! - [`fake`]: in-memory lines with seeded faults (lost bytes, flipped bits, swapped frames, small
//!   buffers, dead boards) for tests of this crate and of the code built on it.
//!
//! Design rules: no `unsafe`; nothing blocks or waits (the caller drives [`endpoint::Endpoint::pump`]
//! with the time, so tests run on a simulated clock); bad bytes from a line are counted and
//! dropped, never a panic; every buffer has a bound; problems of the ring itself (a board that
//! stopped answering, boards wired in the wrong order) are typed errors naming the board.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod endpoint;
pub mod fake;
pub mod frame;
pub mod link;

/// The most boards a ring can have.
pub const MAX_BOARDS: u8 = 8;

/// The board that sends to `me` in a ring of `boards`: `me - 1`, or `boards` for board 1.
pub fn upstream(me: u8, boards: u8) -> u8 {
    if me <= 1 {
        boards
    } else {
        me - 1
    }
}

/// The board that `me` sends to in a ring of `boards`: `me + 1`, or 1 for the last board.
pub fn downstream(me: u8, boards: u8) -> u8 {
    if me >= boards {
        1
    } else {
        me + 1
    }
}
