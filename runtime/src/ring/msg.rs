//! The ring's messages, as postcard encodes them (serde), one per link-layer message.

use super::plan::Profile;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Bytes of hidden-state values per message (a whole number of f32, within the link layer's
/// payload with the message's own fields).
pub const CHUNK_BYTES: usize = 4000;

/// What boards say to each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Msg<'a> {
    /// A board to the head at formation: its place as its `lmboot.txt` says, the model it holds
    /// (the prompt cache's model key) and its profile.
    Hello {
        board: u8,
        boards: u8,
        model_key: u64,
        profile: Profile,
    },
    /// The head to every board: where each board's window starts (`starts[i]` for board i + 1;
    /// the last runs to the model's end), the context and the prompt batch.
    Assign {
        starts: Vec<u16>,
        ctx: u32,
        batch: u16,
        /// The silence (ms) after which a board counts as stopped.
        silent_ms: u32,
    },
    /// A board to the head: its window is loaded and checked.
    Ready {
        board: u8,
        pinned: u64,
        streamed: u64,
    },
    /// Hidden states after the sender's layers for positions `pos .. pos + rows`: chunk `chunk`
    /// of the `[rows][dim]` f32 values (little-endian). The last board sends the last `back` rows
    /// back ([`Msg::Last`]: one for the next token's logits, every row for a speculative check);
    /// with `back` 0 it says [`Msg::Done`]. In chunk 0 only (empty in the others): `parents`,
    /// when the rows are a tree of guesses (row `i + 1`'s parent at `i`), and `kept`, the path
    /// the head kept of the tree batch at `kept_at` before this one (`RunState::keep_path`).
    Acts {
        pos: u32,
        rows: u16,
        back: u16,
        chunk: u16,
        #[serde(borrow)]
        bytes: &'a [u8],
        #[serde(borrow)]
        parents: &'a [u8],
        kept_at: u32,
        #[serde(borrow)]
        kept: &'a [u8],
    },
    /// The last board to the head: chunk `chunk` of the last rows asked for, after every layer.
    Last {
        pos: u32,
        chunk: u16,
        #[serde(borrow)]
        bytes: &'a [u8],
    },
    /// The last board to the head: the batch at `pos` went through every layer.
    Done { pos: u32 },
    /// A board to the head, a few times a second: it is alive, and how long its upstream line has
    /// been quiet.
    Beat { board: u8, upstream_quiet_ms: u32 },
    /// A board gives up, and why.
    Fault {
        board: u8,
        #[serde(borrow)]
        what: &'a str,
    },
    /// The head ends the run.
    Stop,
}

impl Msg<'_> {
    /// The message as bytes.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing into a Vec only fails when the allocator does, which aborts anyway.
        postcard::to_allocvec(self).unwrap_or_default()
    }
}

/// A message from bytes, or `None` if they are not one.
pub fn decode(bytes: &[u8]) -> Option<Msg<'_>> {
    postcard::from_bytes(bytes).ok()
}

/// Little-endian bytes of f32 values.
pub fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Copy a chunk of little-endian f32 bytes into `out` at chunk `chunk`; false if it does not fit
/// or is not whole values.
pub fn put_chunk(out: &mut [f32], chunk: u16, bytes: &[u8]) -> bool {
    let at = chunk as usize * (CHUNK_BYTES / 4);
    let n = bytes.len() / 4;
    if !bytes.len().is_multiple_of(4) || at + n > out.len() {
        return false;
    }
    for (o, b) in out[at..at + n].iter_mut().zip(bytes.chunks_exact(4)) {
        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    true
}

/// Bytes on the line for a batch of `rows` hidden states of `dim` values handed to the next
/// board: every chunk's message in its frame (header, CRC, byte stuffing, delimiter), as sent.
pub fn wire_bytes(rows: usize, dim: usize) -> u64 {
    let values = alloc::vec![0x3f80_0001u32 as f32; rows * dim];
    let bytes = f32_bytes(&values);
    let h = ::ring::frame::Header {
        hop: 1,
        src: 1,
        dst: 2,
        kind: ::ring::frame::Kind::Data,
        seq: u32::MAX / 3,
    };
    let mut wire = Vec::new();
    for (c, chunk) in bytes.chunks(CHUNK_BYTES).enumerate() {
        let m = Msg::Acts {
            pos: 1000,
            rows: rows as u16,
            back: 0,
            chunk: c as u16,
            bytes: chunk,
            parents: &[],
            kept_at: 0,
            kept: &[],
        };
        ::ring::frame::encode(&h, &m.encode(), &mut wire);
    }
    wire.len() as u64
}

/// Chunks `[rows][dim]` f32 values take.
pub fn chunks_for(values: usize) -> usize {
    (values * 4).div_ceil(CHUNK_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_none() {
        let xs: Vec<f32> = (0..2000).map(|i| i as f32 * 0.37 - 100.0).collect();
        let bytes = f32_bytes(&xs);
        let msgs = [
            Msg::Hello {
                board: 2,
                boards: 3,
                model_key: 0xdead_beef_0123_4567,
                profile: Profile {
                    ram: 400 << 20,
                    cache: u64::MAX,
                    compute: 3 << 30,
                    card: 20 << 20,
                    cores: 4,
                },
            },
            Msg::Assign {
                starts: alloc::vec![0, 9, 20],
                ctx: 512,
                batch: 32,
                silent_ms: 6000,
            },
            Msg::Acts {
                pos: 7,
                rows: 1,
                back: 1,
                chunk: 1,
                bytes: &bytes[CHUNK_BYTES..],
                parents: &[0, 1, 1],
                kept_at: 9,
                kept: &[0, 2],
            },
            Msg::Fault {
                board: 3,
                what: "board 4 did not acknowledge",
            },
            Msg::Stop,
        ];
        for m in &msgs {
            let e = m.encode();
            assert!(e.len() <= CHUNK_BYTES + 32);
            assert_eq!(decode(&e).as_ref(), Some(m));
        }
        let mut out = alloc::vec![0f32; 2000];
        for c in 0..chunks_for(2000) {
            let s = c * CHUNK_BYTES;
            let e = (s + CHUNK_BYTES).min(bytes.len());
            assert!(put_chunk(&mut out, c as u16, &bytes[s..e]));
        }
        assert_eq!(out, xs);
        assert!(!put_chunk(&mut out, 2, &bytes[..CHUNK_BYTES]));
        // On the line: the values, a few bytes of message and frame a chunk, and COBS's byte in
        // 254.
        for (rows, dim) in [(1, 576), (32, 576), (1, 1536)] {
            let values = (rows * dim * 4) as u64;
            let chunks = chunks_for(rows * dim) as u64;
            let wire = wire_bytes(rows, dim);
            assert!(wire > values + 8 * chunks, "{rows}x{dim}: {wire}");
            assert!(
                wire < values + values / 200 + 40 * chunks,
                "{rows}x{dim}: {wire}"
            );
        }
        assert!(!put_chunk(&mut out, 0, &bytes[..3]));
        for junk in [&[][..], &[0xff; 9][..], &[9, 1, 2][..]] {
            assert!(decode(junk).is_none(), "{junk:?}");
        }
    }
}
