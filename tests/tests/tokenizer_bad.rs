//! Bad tokenizer metadata in small hand-made GGUF files: each problem gives its own
//! `TokenizerError` naming the key and the value, and nothing panics, also under random byte flips
//! and truncation of a valid file and on random text. Plus invalid UTF-8 given to `encode_bytes`.

mod common;

use common::XorShift as Rng;
use inference::gguf::ValueType;
use inference::tokenizer::{keys, Tokenizer, TokenizerError as E};
use inference::{Gguf, SliceStorage};

/// A metadata value to write.
#[derive(Clone)]
enum V {
    Str(&'static str),
    U32(u32),
    I32(i32),
    Bool(bool),
    Strs(Vec<&'static str>),
    I32s(Vec<i32>),
    F32s(Vec<f32>),
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A GGUF v3 file with these metadata entries and no tensors.
fn gguf(kvs: &[(&str, V)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (k, v) in kvs {
        put_str(&mut b, k);
        match v {
            V::Str(s) => {
                b.extend_from_slice(&8u32.to_le_bytes());
                put_str(&mut b, s);
            }
            V::U32(x) => {
                b.extend_from_slice(&4u32.to_le_bytes());
                b.extend_from_slice(&x.to_le_bytes());
            }
            V::I32(x) => {
                b.extend_from_slice(&5u32.to_le_bytes());
                b.extend_from_slice(&x.to_le_bytes());
            }
            V::Bool(x) => {
                b.extend_from_slice(&7u32.to_le_bytes());
                b.push(*x as u8);
            }
            V::Strs(xs) => {
                b.extend_from_slice(&9u32.to_le_bytes());
                b.extend_from_slice(&8u32.to_le_bytes());
                b.extend_from_slice(&(xs.len() as u64).to_le_bytes());
                for s in xs {
                    put_str(&mut b, s);
                }
            }
            V::I32s(xs) => {
                b.extend_from_slice(&9u32.to_le_bytes());
                b.extend_from_slice(&5u32.to_le_bytes());
                b.extend_from_slice(&(xs.len() as u64).to_le_bytes());
                for x in xs {
                    b.extend_from_slice(&x.to_le_bytes());
                }
            }
            V::F32s(xs) => {
                b.extend_from_slice(&9u32.to_le_bytes());
                b.extend_from_slice(&6u32.to_le_bytes());
                b.extend_from_slice(&(xs.len() as u64).to_le_bytes());
                for x in xs {
                    b.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
    }
    b
}

/// A small valid byte-level BPE vocabulary: 7 tokens, 3 merges.
fn bpe_kvs() -> Vec<(&'static str, V)> {
    vec![
        (keys::MODEL, V::Str("gpt2")),
        (keys::PRE, V::Str("gpt2")),
        (
            keys::TOKENS,
            V::Strs(vec!["a", "b", "c", "Ġ", "ab", "abc", "<|end|>"]),
        ),
        (keys::TOKEN_TYPE, V::I32s(vec![1, 1, 1, 1, 1, 1, 3])),
        (keys::MERGES, V::Strs(vec!["a b", "ab c", "Ġ a"])),
        (keys::BOS_ID, V::U32(6)),
        (keys::EOS_ID, V::U32(6)),
    ]
}

/// A small valid SentencePiece vocabulary.
fn spm_kvs() -> Vec<(&'static str, V)> {
    vec![
        (keys::MODEL, V::Str("llama")),
        (
            keys::TOKENS,
            V::Strs(vec![
                "<unk>", "<s>", "</s>", "<0x61>", "▁", "a", "▁a", "<0xE2>", "<0x82>", "<0xAC>",
            ]),
        ),
        (
            keys::SCORES,
            V::F32s(vec![0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -0.5, 0.0, 0.0, 0.0]),
        ),
        (
            keys::TOKEN_TYPE,
            V::I32s(vec![2, 3, 3, 6, 1, 1, 1, 6, 6, 6]),
        ),
    ]
}

fn with(
    mut kvs: Vec<(&'static str, V)>,
    key: &'static str,
    v: Option<V>,
) -> Vec<(&'static str, V)> {
    kvs.retain(|(k, _)| *k != key);
    if let Some(v) = v {
        kvs.push((key, v));
    }
    kvs
}

fn build(bytes: &[u8]) -> Result<Tokenizer, E> {
    let src = SliceStorage::new(bytes);
    let g = Gguf::open(&src).expect("the hand-made GGUF itself is valid");
    Tokenizer::from_gguf(&g, &src)
}

fn expect(name: &str, kvs: Vec<(&'static str, V)>, check: impl Fn(&E) -> bool, shows: &[&str]) {
    match build(&gguf(&kvs)) {
        Ok(_) => panic!("{name}: accepted bad metadata"),
        Err(e) => {
            assert!(check(&e), "{name}: wrong error {e:?}");
            let msg = e.to_string();
            for s in shows {
                assert!(
                    msg.contains(s),
                    "{name}: message {msg:?} does not mention {s:?}"
                );
            }
        }
    }
}

#[test]
fn valid_small_vocabularies() {
    let tok = build(&gguf(&bpe_kvs())).unwrap();
    assert_eq!(tok.vocab_size(), 7);
    assert_eq!(tok.encode("abc", false, false).unwrap(), vec![5]);
    assert_eq!(tok.encode(" ab", false, false).unwrap(), vec![3, 4]);
    // gpt2 adds no BOS unless add_bos_token says so.
    assert_eq!(tok.encode("abc<|end|>", true, true).unwrap(), vec![5, 6]);
    let with_bos = build(&gguf(&with(bpe_kvs(), keys::ADD_BOS, Some(V::Bool(true))))).unwrap();
    assert_eq!(
        with_bos.encode("abc<|end|>", true, true).unwrap(),
        vec![6, 5, 6]
    );
    // Not parsed, "<|end|>" is text, and its characters have no tokens here: llama.cpp drops them.
    assert_eq!(
        with_bos.encode("abc<|end|>", true, false).unwrap(),
        vec![6, 5]
    );
    assert!(tok.is_eog(6));
    assert_eq!(tok.decode(&[3, 5]), b" abc");

    let spm = build(&gguf(&spm_kvs())).unwrap();
    assert_eq!(spm.encode("a", false, false).unwrap(), vec![6]);
    assert_eq!(spm.encode("a", true, false).unwrap(), vec![1, 6]);
    // "€" is not a token: byte fallback.
    assert_eq!(spm.encode("€", false, false).unwrap(), vec![4, 7, 8, 9]);
    // "b" has no token and no byte token: the unknown token stands in.
    assert_eq!(spm.encode("b", false, false).unwrap(), vec![4, 0]);
    assert_eq!(spm.decode(&[6, 3]), b"aa");
}

#[test]
fn token_type_wrong_element_type() {
    expect(
        "token_type f32",
        with(bpe_kvs(), keys::TOKEN_TYPE, Some(V::F32s(vec![1.0; 7]))),
        |e| {
            matches!(
                e,
                E::WrongElemType {
                    key: keys::TOKEN_TYPE,
                    found: ValueType::F32,
                    ..
                }
            )
        },
        &[keys::TOKEN_TYPE, "f32"],
    );
    expect(
        "token_type strings",
        with(bpe_kvs(), keys::TOKEN_TYPE, Some(V::Strs(vec!["1"; 7]))),
        |e| {
            matches!(
                e,
                E::WrongElemType {
                    key: keys::TOKEN_TYPE,
                    found: ValueType::String,
                    ..
                }
            )
        },
        &[keys::TOKEN_TYPE],
    );
    expect(
        "token_type scalar",
        with(bpe_kvs(), keys::TOKEN_TYPE, Some(V::U32(1))),
        |e| {
            matches!(
                e,
                E::WrongType {
                    key: keys::TOKEN_TYPE,
                    found: ValueType::U32,
                    ..
                }
            )
        },
        &[keys::TOKEN_TYPE],
    );
}

#[test]
fn per_token_arrays_of_the_wrong_length() {
    expect(
        "token_type short",
        with(bpe_kvs(), keys::TOKEN_TYPE, Some(V::I32s(vec![1; 6]))),
        |e| {
            matches!(
                e,
                E::LengthMismatch {
                    key: keys::TOKEN_TYPE,
                    len: 6,
                    n_tokens: 7
                }
            )
        },
        &[keys::TOKEN_TYPE, "6", "7"],
    );
    expect(
        "token_type long",
        with(bpe_kvs(), keys::TOKEN_TYPE, Some(V::I32s(vec![1; 8]))),
        |e| {
            matches!(
                e,
                E::LengthMismatch {
                    key: keys::TOKEN_TYPE,
                    len: 8,
                    n_tokens: 7
                }
            )
        },
        &[keys::TOKEN_TYPE],
    );
    expect(
        "scores short",
        with(spm_kvs(), keys::SCORES, Some(V::F32s(vec![0.0; 3]))),
        |e| {
            matches!(
                e,
                E::LengthMismatch {
                    key: keys::SCORES,
                    len: 3,
                    n_tokens: 10
                }
            )
        },
        &[keys::SCORES],
    );
    expect(
        "scores strings",
        with(spm_kvs(), keys::SCORES, Some(V::Strs(vec!["0"; 10]))),
        |e| {
            matches!(
                e,
                E::WrongElemType {
                    key: keys::SCORES,
                    ..
                }
            )
        },
        &[keys::SCORES],
    );
}

#[test]
fn special_ids_out_of_range() {
    expect(
        "bos = n_tokens",
        with(bpe_kvs(), keys::BOS_ID, Some(V::U32(7))),
        |e| {
            matches!(
                e,
                E::IdOutOfRange {
                    key: keys::BOS_ID,
                    value: 7,
                    n_tokens: 7
                }
            )
        },
        &[keys::BOS_ID, "7"],
    );
    expect(
        "eos negative",
        with(spm_kvs(), keys::EOS_ID, Some(V::I32(-1))),
        |e| {
            matches!(
                e,
                E::IdOutOfRange {
                    key: keys::EOS_ID,
                    value: -1,
                    ..
                }
            )
        },
        &[keys::EOS_ID, "-1"],
    );
    expect(
        "pad huge",
        with(spm_kvs(), keys::PAD_ID, Some(V::U32(u32::MAX))),
        |e| {
            matches!(
                e,
                E::IdOutOfRange {
                    key: keys::PAD_ID,
                    value: 4294967295,
                    ..
                }
            )
        },
        &[keys::PAD_ID],
    );
    expect(
        "eot as a string",
        with(spm_kvs(), keys::EOT_ID, Some(V::Str("2"))),
        |e| {
            matches!(
                e,
                E::WrongType {
                    key: keys::EOT_ID,
                    found: ValueType::String,
                    ..
                }
            )
        },
        &[keys::EOT_ID],
    );
    // gpt2's default BOS is id 11, outside this vocabulary: asking to add it is an error.
    expect(
        "add_bos without bos",
        with(
            with(bpe_kvs(), keys::BOS_ID, None),
            keys::ADD_BOS,
            Some(V::Bool(true)),
        ),
        |e| {
            matches!(
                e,
                E::MissingSpecialToken {
                    flag: keys::ADD_BOS,
                    id_key: keys::BOS_ID
                }
            )
        },
        &[keys::ADD_BOS, keys::BOS_ID],
    );
    expect(
        "add_bos not a bool",
        with(bpe_kvs(), keys::ADD_BOS, Some(V::U32(1))),
        |e| {
            matches!(
                e,
                E::WrongType {
                    key: keys::ADD_BOS,
                    ..
                }
            )
        },
        &[keys::ADD_BOS],
    );
}

#[test]
fn bad_merges() {
    expect(
        "merge without a space",
        with(bpe_kvs(), keys::MERGES, Some(V::Strs(vec!["a b", "abc"]))),
        |e| matches!(e, E::MalformedMerge { index: 1, merge } if merge == "abc"),
        &[keys::MERGES, "[1]", "abc"],
    );
    expect(
        "merge of an unknown token",
        with(bpe_kvs(), keys::MERGES, Some(V::Strs(vec!["a b", "ab zz"]))),
        |e| matches!(e, E::MergeUnknownToken { index: 1, part, .. } if part == "zz"),
        &[keys::MERGES, "zz"],
    );
    expect(
        "merge with an empty part",
        with(bpe_kvs(), keys::MERGES, Some(V::Strs(vec!["a "]))),
        |e| matches!(e, E::MergeUnknownToken { index: 0, part, .. } if part.is_empty()),
        &[keys::MERGES],
    );
    expect(
        "merges missing",
        with(bpe_kvs(), keys::MERGES, None),
        |e| matches!(e, E::MissingKey { key: keys::MERGES }),
        &[keys::MERGES],
    );
    expect(
        "merges not strings",
        with(bpe_kvs(), keys::MERGES, Some(V::I32s(vec![1]))),
        |e| {
            matches!(
                e,
                E::WrongElemType {
                    key: keys::MERGES,
                    found: ValueType::I32,
                    ..
                }
            )
        },
        &[keys::MERGES],
    );
}

#[test]
fn unsupported_and_missing() {
    expect(
        "model bert",
        with(bpe_kvs(), keys::MODEL, Some(V::Str("bert"))),
        |e| matches!(e, E::UnsupportedModel { model } if model == "bert"),
        &[keys::MODEL, "bert"],
    );
    expect(
        "pre unknown",
        with(bpe_kvs(), keys::PRE, Some(V::Str("klingon"))),
        |e| matches!(e, E::UnsupportedPre { pre } if pre == "klingon"),
        &[keys::PRE, "klingon"],
    );
    expect(
        "no model",
        with(bpe_kvs(), keys::MODEL, None),
        |e| matches!(e, E::MissingKey { key: keys::MODEL }),
        &[keys::MODEL],
    );
    expect(
        "no tokens",
        with(bpe_kvs(), keys::TOKENS, None),
        |e| matches!(e, E::MissingKey { key: keys::TOKENS }),
        &[keys::TOKENS],
    );
    expect(
        "empty vocabulary",
        with(
            with(
                with(spm_kvs(), keys::TOKENS, Some(V::Strs(vec![]))),
                keys::SCORES,
                None,
            ),
            keys::TOKEN_TYPE,
            None,
        ),
        |e| matches!(e, E::BadTokenCount { n_tokens: 0 }),
        &[keys::TOKENS],
    );
    expect(
        "duplicate token",
        with(
            bpe_kvs(),
            keys::TOKENS,
            Some(V::Strs(vec!["a", "b", "c", "Ġ", "ab", "abc", "ab"])),
        ),
        |e| matches!(e, E::DuplicateToken { first: 4, second: 6, text } if text == "ab"),
        &["ab", "4", "6"],
    );
    // A missing `pre` is llama.cpp's "default" pre-tokenizer, not an error.
    let tok = build(&gguf(&with(bpe_kvs(), keys::PRE, None))).unwrap();
    assert_eq!(tok.encode("abc", false, false).unwrap(), vec![5]);
}

#[test]
fn invalid_utf8_is_an_error_with_its_offset() {
    let tok = build(&gguf(&bpe_kvs())).unwrap();
    let e = tok.encode_bytes(b"ab\xffc", false, false).unwrap_err();
    assert_eq!(e, E::InvalidUtf8 { offset: 2 });
    assert!(e.to_string().contains("byte 2"));
    let e = tok
        .encode_bytes("é€".as_bytes().split_at(4).0, false, false)
        .unwrap_err();
    assert_eq!(e, E::InvalidUtf8 { offset: 2 });
    assert_eq!(tok.encode_bytes(b"abc", false, false).unwrap(), vec![5]);
}

/// Encode and decode a few texts; must not panic whatever the tokenizer holds.
fn exercise(tok: &Tokenizer, rng: &mut Rng) {
    let alphabet = [
        "a", "b", "c", " ", "ab", "€", "<|end|>", "<s>", "\n", "1", "é", "'s", "  ", "中",
    ];
    for _ in 0..4 {
        let mut s = String::new();
        for _ in 0..(rng.next() % 12) {
            s.push_str(alphabet[(rng.next() % alphabet.len() as u64) as usize]);
        }
        for (add, parse) in [(false, false), (true, true)] {
            if let Ok(ids) = tok.encode(&s, add, parse) {
                let _ = tok.decode(&ids);
                let _ = tok.detokenize(&ids, add, parse);
            }
        }
    }
    let _ = tok.decode(&[0, 1, 2, u32::MAX, 123456]);
}

#[test]
fn byte_flips_and_truncation_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (name, kvs) in [("bpe", bpe_kvs()), ("spm", spm_kvs())] {
        let good = gguf(&kvs);
        let mut accepted = 0;
        for len in 0..good.len() {
            let src = SliceStorage::new(&good[..len]);
            if let Ok(g) = Gguf::open(&src) {
                if let Ok(tok) = Tokenizer::from_gguf(&g, &src) {
                    exercise(&tok, &mut rng);
                }
            }
        }
        for _ in 0..3000 {
            let mut bad = good.clone();
            for _ in 0..1 + rng.next() % 3 {
                let i = (rng.next() % bad.len() as u64) as usize;
                bad[i] ^= 1 << (rng.next() % 8);
            }
            let src = SliceStorage::new(&bad);
            if let Ok(g) = Gguf::open(&src) {
                if let Ok(tok) = Tokenizer::from_gguf(&g, &src) {
                    accepted += 1;
                    exercise(&tok, &mut rng);
                }
            }
        }
        eprintln!("{name}: {accepted} of 3000 flipped files still made a tokenizer");
    }
}
