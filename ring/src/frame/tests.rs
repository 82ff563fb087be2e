use super::*;
use crate::fake::Rng;
use alloc::string::ToString;
use alloc::vec;

/// Every report a decoder gives for `bytes`, payloads copied out.
fn decode_all(dec: &mut Decoder, bytes: &[u8]) -> Vec<Result<(Header, Vec<u8>), FrameError>> {
    let mut got = Vec::new();
    dec.push(bytes, &mut |r| got.push(r.map(|(h, p)| (h, p.to_vec()))));
    got
}

fn header(rng: &mut Rng) -> Header {
    Header {
        hop: rng.below(256) as u8,
        src: rng.below(256) as u8,
        dst: rng.below(256) as u8,
        kind: if rng.below(2) == 0 {
            Kind::Data
        } else {
            Kind::Ack
        },
        seq: rng.next_u64() as u32,
    }
}

/// Random bytes with about one zero in `zero_every`.
fn bytes(rng: &mut Rng, len: usize, zero_every: u64) -> Vec<u8> {
    (0..len)
        .map(|_| match rng.below(zero_every) {
            0 => 0,
            _ => 1 + rng.below(255) as u8,
        })
        .collect()
}

fn wire(h: &Header, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(h, payload, &mut out);
    out
}

/// Lengths at the stuffing's 254-byte boundaries, the extremes, and random ones.
fn lengths(rng: &mut Rng) -> Vec<usize> {
    let mut v = vec![
        0,
        1,
        2,
        244,
        245,
        253,
        254,
        255,
        507,
        508,
        509,
        4095,
        MAX_PAYLOAD,
    ];
    v.extend((0..40).map(|_| rng.below(MAX_PAYLOAD as u64 + 1) as usize));
    v
}

#[test]
fn round_trip_random_payloads_zeros_and_boundaries() {
    let mut rng = Rng::new(1);
    for len in lengths(&mut rng) {
        for fill in [None, Some(0u8), Some(0xFF)] {
            let payload = match fill {
                None => bytes(&mut rng, len, 8),
                Some(b) => vec![b; len],
            };
            let h = header(&mut rng);
            let w = wire(&h, &payload);
            assert_eq!(w.last(), Some(&0), "len {len}: ends with the delimiter");
            assert!(!w[..w.len() - 1].contains(&0), "len {len}: no zero inside");
            assert!(w.len() <= MAX_WIRE, "len {len}: {} > MAX_WIRE", w.len());
            let got = decode_all(&mut Decoder::new(), &w);
            assert_eq!(got, vec![Ok((h, payload))], "len {len} fill {fill:?}");
        }
    }
}

#[test]
fn largest_frame_fits_the_decoder() {
    let h = Header {
        hop: 255,
        src: 255,
        dst: 255,
        kind: Kind::Ack,
        seq: u32::MAX,
    };
    let payload = vec![0xA5; MAX_PAYLOAD];
    let w = wire(&h, &payload);
    assert_eq!(w.len(), MAX_WIRE);
    assert_eq!(decode_all(&mut Decoder::new(), &w), vec![Ok((h, payload))]);
}

#[test]
fn stream_in_random_pieces_gives_every_frame_in_order() {
    let mut rng = Rng::new(2);
    let frames: Vec<_> = (0..200)
        .map(|_| {
            let len = rng.below(600) as usize;
            (header(&mut rng), bytes(&mut rng, len, 5))
        })
        .collect();
    let stream: Vec<u8> = frames.iter().flat_map(|(h, p)| wire(h, p)).collect();
    let mut dec = Decoder::new();
    let mut got = Vec::new();
    let mut rest = &stream[..];
    while !rest.is_empty() {
        let n = (1 + rng.below(300) as usize).min(rest.len());
        got.extend(decode_all(&mut dec, &rest[..n]));
        rest = &rest[n..];
    }
    let want: Vec<_> = frames.into_iter().map(Ok).collect();
    assert_eq!(got, want);
}

#[test]
fn every_single_bit_flip_is_rejected_then_resynchronised() {
    let mut rng = Rng::new(3);
    let good_h = header(&mut rng);
    let good = wire(&good_h, b"after");
    for len in [0, 300] {
        let h = header(&mut rng);
        let w = wire(&h, &bytes(&mut rng, len, 6));
        for bit in 0..w.len() * 8 {
            let mut bad = w.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let mut dec = Decoder::new();
            // A flipped delimiter leaves the frame open: the extra 0 closes it.
            let got = decode_all(&mut dec, &[&bad[..], &[0]].concat());
            assert!(!got.is_empty(), "len {len} bit {bit}: nothing reported");
            for r in &got {
                let e = r.as_ref().expect_err("a corrupted frame was delivered");
                assert!(
                    matches!(e, FrameError::Crc | FrameError::Cobs | FrameError::Header),
                    "len {len} bit {bit}: {e}"
                );
            }
            assert_eq!(
                decode_all(&mut dec, &good),
                vec![Ok((good_h, b"after".to_vec()))]
            );
        }
    }
}

#[test]
fn garbage_and_over_long_runs_resynchronise() {
    let mut rng = Rng::new(4);
    let h = header(&mut rng);
    let good = wire(&h, b"payload");
    let mut dec = Decoder::new();
    // Far more than a frame without a delimiter, fed in pieces: discarded, one TooLong.
    let long = bytes(&mut rng, 3 * MAX_WIRE, u64::MAX);
    assert!(!long.contains(&0));
    for piece in long.chunks(1000) {
        assert!(decode_all(&mut dec, piece).is_empty());
    }
    let got = decode_all(&mut dec, &[&[0][..], &good].concat());
    assert_eq!(
        got,
        vec![
            Err(FrameError::TooLong {
                bytes: 3 * MAX_WIRE
            }),
            Ok((h, b"payload".to_vec()))
        ]
    );
    // Short garbage and empty runs between good frames.
    let stream = [&[7, 9, 0, 0, 0, 1][..], &[0], &good, &[0, 0], &good].concat();
    let got = decode_all(&mut dec, &stream);
    let good_ones = got.iter().filter(|r| r.is_ok()).count();
    assert_eq!(good_ones, 2, "{got:?}");
    assert!(got.iter().take(2).all(|r| r.is_err()), "{got:?}");
}

#[test]
fn payload_over_the_maximum_is_too_long() {
    let h = Header {
        hop: 1,
        src: 1,
        dst: 2,
        kind: Kind::Data,
        seq: 0,
    };
    let w = wire(&h, &vec![1; MAX_PAYLOAD + 1]);
    let got = decode_all(&mut Decoder::new(), &w);
    assert!(
        matches!(got[..], [Err(FrameError::TooLong { .. })]),
        "{got:?}"
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(5);
    let mut dec = Decoder::new();
    let (mut reports, mut zeros) = (0usize, 0usize);
    for round in 0..20_000 {
        let len = rng.below(64) as usize;
        let mut chunk = bytes(&mut rng, len, 1 + round % 50);
        if round % 7 == 0 {
            // A real frame with a few bytes overwritten.
            let h = header(&mut rng);
            let plen = rng.below(100) as usize;
            chunk = wire(&h, &bytes(&mut rng, plen, 4));
            for _ in 0..rng.below(3) {
                let i = rng.below(chunk.len() as u64) as usize;
                chunk[i] = rng.below(256) as u8;
            }
        }
        zeros += chunk.iter().filter(|&&b| b == 0).count();
        dec.push(&chunk, &mut |r| {
            reports += 1;
            if let Ok((_, p)) = r {
                assert!(p.len() <= MAX_PAYLOAD);
            }
        });
    }
    assert!(
        reports <= zeros,
        "{reports} reports from {zeros} delimiters"
    );
    assert!(
        reports > 1000,
        "the fuzz loop should see many frames, saw {reports}"
    );
}

#[test]
fn errors_say_what_was_wrong() {
    assert!(FrameError::Crc.to_string().contains("CRC"));
    assert!(FrameError::Cobs.to_string().contains("COBS"));
    assert!(FrameError::Header.to_string().contains("header"));
    assert!(FrameError::TooLong { bytes: 9000 }
        .to_string()
        .contains("9000 bytes"));
}
