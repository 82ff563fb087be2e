//! Frames on a serial line.
//!
//! A frame on the wire is `COBS(body ++ crc32_le(body)) ++ 0x00` with
//! `body = postcard(Header) ++ payload`: consistent overhead byte stuffing leaves no `0x00` inside
//! a frame, so a `0x00` always ends one and a receiver that starts mid-stream, or loses bytes,
//! finds the next frame at the next `0x00`. The CRC (CRC-32/ISO-HDLC, little-endian) covers the
//! header and payload; a frame whose check fails, whose stuffing is broken or whose header does
//! not parse is reported as a [`FrameError`] and dropped. The [`Decoder`] holds at most one frame
//! ([`MAX_WIRE`] bytes): a longer run without a delimiter is discarded up to the next `0x00` and
//! reported as [`FrameError::TooLong`].

use alloc::vec::Vec;
use core::fmt;
use crc::{Crc, CRC_32_ISO_HDLC};
use serde::{Deserialize, Serialize};

#[cfg(test)]
mod tests;

/// The largest message payload a frame carries.
pub const MAX_PAYLOAD: usize = 4096;

/// The largest encoded [`Header`]: three bytes, the kind's variant index, a 5-byte varint `seq`.
pub const MAX_HEADER: usize = 9;

/// The CRC's size at the end of a frame's body.
const CRC_LEN: usize = 4;

/// The largest frame before stuffing: header, payload and CRC.
pub const MAX_FRAME: usize = MAX_HEADER + MAX_PAYLOAD + CRC_LEN;

/// The largest frame on the wire, stuffing overhead and the closing `0x00` included.
pub const MAX_WIRE: usize = cobs::max_encoding_length(MAX_FRAME) + 1;

/// The most bytes a [`Decoder`] buffers before the delimiter.
const MAX_STUFFED: usize = MAX_WIRE - 1;

const CRC: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);

/// What a frame is and where it goes.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The board that put the frame on this line (the receiver's upstream neighbour).
    pub hop: u8,
    /// The board that originated the frame.
    pub src: u8,
    /// The board the frame is addressed to.
    pub dst: u8,
    /// Data or acknowledgement.
    pub kind: Kind,
    /// Data: the frame's number in the `src -> dst` channel. Ack: see [`Kind::Ack`].
    pub seq: u32,
}

/// The two kinds of frame.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A message from `src` to `dst`.
    Data,
    /// From `src` to `dst`: `seq` is the next sequence number `src` expects on the `dst -> src`
    /// channel (every earlier one has arrived: cumulative).
    Ack,
    /// A message from `src` to `dst` sent once: not numbered, acknowledged or sent again (a
    /// heartbeat, where the next one replaces a lost one). `seq` is 0.
    Datagram,
}

/// Why the bytes up to a delimiter are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The byte stuffing is broken (a run length points past the frame's end).
    Cobs,
    /// `bytes` bytes came without a delimiter, more than any frame has, or the payload is longer
    /// than [`MAX_PAYLOAD`]; they were discarded up to the next `0x00`.
    TooLong {
        /// How many bytes were discarded (or the frame's size after unstuffing).
        bytes: usize,
    },
    /// The CRC does not match the header and payload (or the frame is shorter than a CRC).
    Crc,
    /// The CRC matches but the header does not parse (an unknown kind, a truncated varint).
    Header,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cobs => write!(f, "frame: broken byte stuffing (COBS)"),
            Self::TooLong { bytes } => write!(
                f,
                "frame: {bytes} bytes without a delimiter, more than a frame of at most \
                 {MAX_PAYLOAD} payload bytes; discarded to the next delimiter"
            ),
            Self::Crc => write!(f, "frame: CRC does not match"),
            Self::Header => write!(f, "frame: header does not parse"),
        }
    }
}

impl core::error::Error for FrameError {}

/// Append the wire form of the frame `h` + `payload` to `out`, closing `0x00` included.
///
/// Callers keep `payload` within [`MAX_PAYLOAD`]; a longer one is encoded all the same and the
/// receiving [`Decoder`] rejects it as [`FrameError::TooLong`].
pub fn encode(h: &Header, payload: &[u8], out: &mut Vec<u8>) {
    let mut head_buf = [0u8; MAX_HEADER];
    // Cannot fail: MAX_HEADER holds the largest header.
    let Ok(head) = postcard::to_slice(h, &mut head_buf) else {
        return;
    };
    let mut digest = CRC.digest();
    digest.update(head);
    digest.update(payload);
    let sum = digest.finalize().to_le_bytes();
    let start = out.len();
    out.resize(
        start + cobs::max_encoding_length(head.len() + payload.len() + CRC_LEN),
        0,
    );
    let mut enc = cobs::CobsEncoder::new(&mut out[start..]);
    let pushed = [&*head, payload, &sum]
        .iter()
        .filter(|part| !part.is_empty())
        .try_for_each(|part| enc.push(part));
    let len = enc.finalize();
    // The buffer was sized by `max_encoding_length`, so the pushes cannot run out of room; were
    // they to, the partial frame is taken back rather than sent.
    out.truncate(if pushed.is_ok() { start + len } else { start });
    if pushed.is_ok() {
        out.push(0);
    }
}

/// What the [`Decoder`] reports for each run of bytes up to a delimiter.
pub type Frame<'a> = Result<(Header, &'a [u8]), FrameError>;

/// Finds frames in a byte stream, whatever arrives between them.
#[derive(Debug)]
pub struct Decoder {
    /// The stuffed bytes of the frame being received, without its delimiter; at most
    /// [`MAX_STUFFED`].
    buf: Vec<u8>,
    /// Bytes discarded since the last delimiter because the run was too long (0: not discarding).
    skipped: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder with its buffer for one frame allocated.
    pub fn new() -> Self {
        Self {
            buf: Vec::with_capacity(MAX_STUFFED),
            skipped: 0,
        }
    }

    /// Feed received bytes; for each complete frame call `f(Ok((header, payload)))` or
    /// `f(Err(FrameError))`. Empty runs (`0x00 0x00`) are idle filler and report nothing.
    pub fn push(&mut self, mut bytes: &[u8], f: &mut dyn FnMut(Frame<'_>)) {
        while !bytes.is_empty() {
            match bytes.iter().position(|&b| b == 0) {
                Some(end) => {
                    self.take(&bytes[..end]);
                    self.finish(f);
                    bytes = &bytes[end + 1..];
                }
                None => {
                    self.take(bytes);
                    bytes = &[];
                }
            }
        }
    }

    /// Buffer a run of non-zero bytes, or count it as discarded once the frame is too long.
    fn take(&mut self, run: &[u8]) {
        if self.skipped > 0 || self.buf.len() + run.len() > MAX_STUFFED {
            self.skipped = self.skipped.saturating_add(self.buf.len() + run.len());
            self.buf.clear();
        } else {
            self.buf.extend_from_slice(run);
        }
    }

    /// A delimiter arrived: report what was before it and start afresh.
    fn finish(&mut self, f: &mut dyn FnMut(Frame<'_>)) {
        if self.skipped > 0 {
            f(Err(FrameError::TooLong {
                bytes: core::mem::take(&mut self.skipped),
            }));
            return;
        }
        if self.buf.is_empty() {
            return;
        }
        match cobs::decode_in_place(&mut self.buf) {
            Ok(len) => f(check(&self.buf[..len])),
            Err(_) => f(Err(FrameError::Cobs)),
        }
        self.buf.clear();
    }
}

/// An unstuffed frame's CRC, header and payload size.
fn check(frame: &[u8]) -> Frame<'_> {
    let split = frame.len().checked_sub(CRC_LEN).ok_or(FrameError::Crc)?;
    let (body, sum) = frame.split_at(split);
    if CRC.checksum(body).to_le_bytes() != sum {
        return Err(FrameError::Crc);
    }
    let (h, payload) = postcard::take_from_bytes::<Header>(body).map_err(|_| FrameError::Header)?;
    if payload.len() > MAX_PAYLOAD {
        return Err(FrameError::TooLong { bytes: frame.len() });
    }
    Ok((h, payload))
}
