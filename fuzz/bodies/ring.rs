//! `ring`: bytes from the previous board on a ring link, through the frame decoder, the endpoint
//! (acks, forwarding, reordering) and the runtime's message decoding; and round trips of frames
//! and messages built from the input.

use super::bytes::Bytes;
use super::peak::bounded;
use ring::endpoint::{Endpoint, Timing};
use ring::frame::{self, Decoder, Header, Kind, MAX_PAYLOAD};
use ring::link::Link;
use runtime::ring::msg::{self, Msg};
use runtime::ring::plan::Profile;

/// The most one run may allocate: the decoder's frame buffer, the endpoint's queues (a window
/// of frames per destination) and the messages of an input of at most 4 KiB.
pub const MAX_ALLOC: usize = 2 << 20;

/// The receiving side of a link that hands out what the input put on it, and takes everything
/// sent.
#[derive(Debug, Default)]
struct Wire {
    rx: Vec<u8>,
    at: usize,
}

impl Link for Wire {
    fn send(&mut self, bytes: &[u8]) -> usize {
        bytes.len()
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.rx.len() - self.at);
        buf[..n].copy_from_slice(&self.rx[self.at..self.at + n]);
        self.at += n;
        n
    }
}

/// The input drives one board's endpoint: the first byte places it in a ring, then each step is
/// raw bytes on the line, a well-formed frame (any header), a well-formed message in a data
/// frame, or a pump some time later. The whole input also goes through a bare decoder.
pub fn run(data: &[u8]) {
    bounded("ring", MAX_ALLOC, || {
        decode_all(data);
        drive(data);
    });
}

/// Every frame in `data` has a payload within bounds; every message that decodes encodes back to
/// itself.
fn decode_all(data: &[u8]) {
    let mut d = Decoder::new();
    // In two pieces: the decoder keeps a partial frame between pushes.
    let (a, b) = data.split_at(data.len() / 2);
    for part in [a, b] {
        d.push(part, &mut |f| {
            if let Ok((_, payload)) = f {
                assert!(
                    payload.len() <= MAX_PAYLOAD,
                    "ring: an oversized payload got through"
                );
                check_msg(payload);
            }
        });
    }
}

/// If `payload` is a message, it encodes back to a message equal to it.
fn check_msg(payload: &[u8]) {
    if let Some(m) = msg::decode(payload) {
        let again = m.encode();
        assert_eq!(
            msg::decode(&again).as_ref(),
            Some(&m),
            "ring: message round trip"
        );
    }
}

fn drive(data: &[u8]) {
    let mut r = Bytes(data);
    let place = r.u8();
    let boards = 2 + place % 7;
    let me = 1 + (place >> 4) % boards;
    let timing = Timing {
        rto_ns: 1_000_000,
        max_rto_ns: 4_000_000,
        max_tries: 3,
        window: 4,
    };
    let mut ep = Endpoint::new(me, boards, Wire::default(), timing);
    let mut now = 0u64;
    let mut wire = Vec::new();
    while !r.is_empty() {
        wire.clear();
        match r.u8() % 4 {
            0 => wire.extend_from_slice(r.short()),
            1 => {
                let (h, payload) = (header(&mut r), r.short());
                frame::encode(&h, payload, &mut wire);
                round_trip(&wire, &h, payload);
            }
            2 => {
                let m = message(&mut r);
                let bytes = m.encode();
                assert_eq!(msg::decode(&bytes), Some(m), "ring: message round trip");
                let h = header(&mut r);
                frame::encode(
                    &Header {
                        kind: Kind::Data,
                        ..h
                    },
                    &bytes,
                    &mut wire,
                );
            }
            _ => {
                now += r.u8() as u64 * 250_000;
                pump(&mut ep, now);
            }
        }
        ep.link_mut().rx.extend_from_slice(&wire);
    }
    for _ in 0..4 {
        now += 1_000_000;
        pump(&mut ep, now);
    }
}

/// Pump, and check what was delivered.
fn pump(ep: &mut Endpoint<Wire>, now: u64) {
    let _ = ep.pump(now);
    while let Some((src, payload)) = ep.recv().or_else(|| ep.recv_datagram()) {
        assert!(
            src != ep.me() && (1..=ep.boards()).contains(&src),
            "ring: a message delivered from board {src}, not another board of the ring"
        );
        assert!(
            payload.len() <= MAX_PAYLOAD,
            "ring: an oversized message delivered"
        );
        check_msg(&payload);
    }
}

/// A frame header, any values (boards outside the ring included).
fn header(r: &mut Bytes) -> Header {
    let b = r.u8();
    Header {
        hop: b & 7,
        src: (b >> 3) & 7,
        dst: r.u8() & 15,
        kind: match r.u8() % 3 {
            0 => Kind::Data,
            1 => Kind::Ack,
            _ => Kind::Datagram,
        },
        // Mostly small numbers, so that frames land inside the window; sometimes any.
        seq: match r.u8() {
            0xFF => r.u32(),
            s => (s & 15) as u32,
        },
    }
}

/// The frame `h` + `payload` encoded into `wire` decodes back to itself, alone.
fn round_trip(wire: &[u8], h: &Header, payload: &[u8]) {
    let mut got = None;
    Decoder::new().push(wire, &mut |f| got = Some(f.map(|(h, p)| (h, p.to_vec()))));
    assert_eq!(
        got,
        Some(Ok((*h, payload.to_vec()))),
        "ring: frame round trip"
    );
}

/// A message of any kind with fields from the input.
fn message<'a>(r: &mut Bytes<'a>) -> Msg<'a> {
    match r.u8() % 9 {
        0 => Msg::Hello {
            board: r.u8(),
            boards: r.u8(),
            model_key: r.u64(),
            profile: Profile {
                ram: r.u64(),
                cache: r.u64(),
                compute: r.u64(),
                card: r.u64(),
                cores: r.u8(),
            },
        },
        1 => Msg::Assign {
            starts: r.short().iter().map(|&b| b as u16 * 3).collect(),
            ctx: r.u32(),
            batch: r.u16(),
            silent_ms: r.u32(),
        },
        2 => Msg::Ready {
            board: r.u8(),
            pinned: r.u64(),
            streamed: r.u64(),
        },
        3 => Msg::Acts {
            pos: r.u32(),
            rows: r.u16(),
            back: r.u16(),
            chunk: r.u16(),
            bytes: r.short(),
            parents: r.short(),
            kept_at: r.u32(),
            kept: r.short(),
        },
        4 => Msg::Last {
            pos: r.u32(),
            chunk: r.u16(),
            bytes: r.short(),
        },
        5 => Msg::Done { pos: r.u32() },
        6 => Msg::Beat {
            board: r.u8(),
            upstream_quiet_ms: r.u32(),
        },
        7 => Msg::Fault {
            board: r.u8(),
            what: std::str::from_utf8(r.short()).unwrap_or("not UTF-8"),
        },
        _ => Msg::Stop,
    }
}
