//! Bad GGUF files, at least one per validated field: each gives its own error naming the field,
//! the value and the byte offset, and nothing panics. Plus truncation at every length and random byte
//! flips over a valid file, which must only ever give `Ok` or `Err`.

use inference::gguf::{GgufErrorKind as K, ValueType};
use inference::{Gguf, GgufError, SliceStorage, Storage, StorageError};

/// Builds GGUF files field by field, so a test can put any value anywhere.
#[derive(Clone, Default)]
struct B(Vec<u8>);

impl B {
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    fn str(self, s: &str) -> Self {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        B::default()
            .bytes(b"GGUF")
            .u32(version)
            .u64(n_tensors)
            .u64(n_kv)
    }
    fn kv_u32(self, key: &str, v: u32) -> Self {
        self.str(key).u32(4).u32(v)
    }
    fn kv_str(self, key: &str, v: &str) -> Self {
        self.str(key).u32(8).str(v)
    }
    fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Self {
        let mut b = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            b = b.u64(d);
        }
        b.u32(ty).u64(offset)
    }
    /// Pad to `align`, then `n` data bytes.
    fn data(mut self, align: usize, n: usize) -> Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self.0.extend((0..n).map(|i| i as u8));
        self
    }
}

/// A valid file: two metadata entries and two F32 tensors of 4x2 and 8 elements.
fn valid() -> Vec<u8> {
    B::header(3, 2, 3)
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 2)
        .str("tokenizer.ggml.scores")
        .u32(9)
        .u32(6)
        .u64(3)
        .u32(0)
        .u32(0)
        .u32(0)
        .tensor("a", &[4, 2], 0, 0)
        .tensor("b", &[8], 0, 32)
        .data(32, 64)
        .0
}

fn open(bytes: &[u8]) -> Result<Gguf, GgufError> {
    Gguf::open(&SliceStorage::new(bytes))
}

fn expect(name: &str, bytes: &[u8], check: impl Fn(&K) -> bool) -> GgufError {
    match open(bytes) {
        Ok(_) => panic!("{name}: accepted a bad file"),
        Err(e) => {
            assert!(check(&e.kind), "{name}: wrong error {:?}", e.kind);
            let msg = e.to_string();
            assert!(
                msg.contains("at byte"),
                "{name}: message without offset: {msg}"
            );
            eprintln!("{name:<34} {msg}");
            e
        }
    }
}

#[test]
fn the_valid_file_opens() {
    let g = open(&valid()).unwrap();
    assert_eq!(g.tensors.len(), 2);
    assert_eq!(g.get_u64("llama.block_count").unwrap(), 2);
    let t = g.tensor("b").unwrap();
    assert_eq!((t.offset, t.size), (g.data_offset + 32, 32));
    let scores = g
        .array(&SliceStorage::new(&valid()), "tokenizer.ggml.scores")
        .unwrap()
        .f32s()
        .unwrap();
    assert_eq!(scores, vec![0.0; 3]);
}

#[test]
fn header_errors() {
    let mut b = valid();
    b[0] = b'X';
    let e = expect("bad magic", &b, |k| matches!(k, K::BadMagic { .. }));
    assert_eq!(e.offset, 0);

    for v in [0u32, 1, 4, 3u32.swap_bytes()] {
        let mut b = valid();
        b[4..8].copy_from_slice(&v.to_le_bytes());
        let e = expect(
            &format!("version {v:#x}"),
            &b,
            |k| matches!(k, K::BadVersion { version, .. } if *version == v),
        );
        assert_eq!(e.offset, 4);
        if v == 3u32.swap_bytes() {
            assert!(matches!(
                e.kind,
                K::BadVersion {
                    byte_swapped: true,
                    ..
                }
            ));
        }
    }
    // Version 2 is read too.
    let mut b = valid();
    b[4] = 2;
    assert!(open(&b).is_ok());

    expect("empty file", &[], |k| {
        matches!(k, K::Truncated { field: "magic", .. })
    });
    expect("truncated counts", &valid()[..12], |k| {
        matches!(
            k,
            K::Truncated {
                field: "tensor_count",
                ..
            }
        )
    });

    let b = B::header(3, u64::MAX, 0).data(32, 64).0;
    let e = expect(
        "tensor count u64::MAX",
        &b,
        |k| matches!(k, K::TooMany { field: "tensor_count", count, .. } if *count == u64::MAX),
    );
    assert_eq!(e.offset, 8);
    let b = B::header(3, 0, u64::MAX).0;
    let e = expect("kv count u64::MAX", &b, |k| {
        matches!(
            k,
            K::TooMany {
                field: "metadata_kv_count",
                ..
            }
        )
    });
    assert_eq!(e.offset, 16);
    let b = B::header(3, 0, 1000).kv_u32("a", 1).0;
    expect("kv count beyond file", &b, |k| {
        matches!(
            k,
            K::TooMany {
                field: "metadata_kv_count",
                ..
            }
        )
    });
    let b = B::header(3, 1000, 1).kv_u32("a", 1).0;
    expect("tensor count beyond file", &b, |k| {
        matches!(
            k,
            K::TooMany {
                field: "tensor_count",
                ..
            }
        )
    });
}

#[test]
fn metadata_errors() {
    let b = B::header(3, 0, 1)
        .u64(u64::MAX)
        .bytes(b"key")
        .u32(4)
        .u32(1)
        .0;
    let e = expect(
        "key length past end",
        &b,
        |k| matches!(k, K::StringTooLong { field: "metadata key", len, .. } if *len == u64::MAX),
    );
    assert_eq!(e.offset, 24);
    let b = B::header(3, 0, 1).str("").u32(4).u32(1).0;
    expect("empty key", &b, |k| {
        matches!(
            k,
            K::EmptyString {
                field: "metadata key"
            }
        )
    });
    let b = B::header(3, 0, 1)
        .u64(2)
        .bytes(&[0xff, 0xfe])
        .u32(4)
        .u32(1)
        .0;
    expect("key not UTF-8", &b, |k| {
        matches!(
            k,
            K::BadUtf8 {
                field: "metadata key"
            }
        )
    });
    let b = B::header(3, 0, 1)
        .str("a")
        .u32(8)
        .u64(1 << 40)
        .bytes(b"xx")
        .0;
    expect("string value length past end", &b, |k| {
        matches!(
            k,
            K::StringTooLong {
                field: "metadata value",
                ..
            }
        )
    });
    let b = B::header(3, 0, 1)
        .str("a")
        .u32(8)
        .u64(2)
        .bytes(&[0xc3, 0x28])
        .0;
    expect("string value not UTF-8", &b, |k| {
        matches!(
            k,
            K::BadUtf8 {
                field: "metadata value"
            }
        )
    });

    let b = B::header(3, 0, 1).str("weird").u32(13).u32(0).0;
    let e = expect(
        "value type 13",
        &b,
        |k| matches!(k, K::BadValueType { type_id: 13, key } if key == "weird"),
    );
    assert_eq!(e.offset, 24 + 8 + 5);
    let b = B::header(3, 0, 1).str("arr").u32(9).u32(99).u64(0).0;
    expect("array element type 99", &b, |k| {
        matches!(k, K::BadValueType { type_id: 99, .. })
    });
    let b = B::header(3, 0, 1)
        .str("arr")
        .u32(9)
        .u32(9)
        .u64(1)
        .u32(4)
        .u64(0)
        .0;
    expect(
        "array of arrays",
        &b,
        |k| matches!(k, K::NestedArray { key } if key == "arr"),
    );
    let b = B::header(3, 0, 1)
        .str("arr")
        .u32(9)
        .u32(4)
        .u64(u64::MAX / 2)
        .u32(1)
        .0;
    expect("array length beyond file", &b, |k| {
        matches!(
            k,
            K::TooMany {
                field: "array length",
                ..
            }
        )
    });
    let b = B::header(3, 0, 1)
        .str("arr")
        .u32(9)
        .u32(8)
        .u64(2)
        .str("ok")
        .u64(1 << 50)
        .0;
    expect("array string past end", &b, |k| {
        matches!(
            k,
            K::StringTooLong {
                field: "array string",
                ..
            }
        )
    });
    // A fixed-size array longer than the bytes left is caught by its length bound.
    let b = B::header(3, 0, 1).str("arr").u32(9).u32(4).u64(3).u32(1).0;
    expect("array data truncated", &b, |k| {
        matches!(
            k,
            K::TooMany {
                field: "array length",
                count: 3,
                max: 1
            }
        )
    });
    let b = B::header(3, 0, 1).str("flag").u32(7).bytes(&[2]).0;
    expect("bool byte 2", &b, |k| {
        matches!(k, K::BadBool { value: 2, .. })
    });
    let b = B::header(3, 0, 2).kv_u32("dup", 1).kv_u32("dup", 2).0;
    expect(
        "duplicate key",
        &b,
        |k| matches!(k, K::DuplicateKey { key } if key == "dup"),
    );
    let b = B::header(3, 0, 1).str("x").u32(10).u32(0).0;
    expect("value truncated", &b, |k| {
        matches!(
            k,
            K::Truncated {
                field: "metadata value",
                ..
            }
        )
    });

    for (name, b) in [
        (
            "alignment 0",
            B::header(3, 0, 1).kv_u32("general.alignment", 0).0,
        ),
        (
            "alignment 13",
            B::header(3, 0, 1).kv_u32("general.alignment", 13).0,
        ),
        (
            "alignment stored as u64",
            B::header(3, 0, 1)
                .str("general.alignment")
                .u32(10)
                .u64(32)
                .0,
        ),
    ] {
        let e = expect(name, &b, |k| matches!(k, K::BadAlignment { .. }));
        assert_eq!(e.offset, 24);
    }
    // A valid alignment is honoured.
    let b = B::header(3, 1, 1)
        .kv_u32("general.alignment", 64)
        .tensor("t", &[4], 0, 0)
        .data(64, 16)
        .0;
    let g = open(&b).unwrap();
    assert_eq!((g.alignment, g.data_offset % 64), (64, 0));
}

fn with_tensor(name: &str, dims: &[u64], ty: u32, offset: u64, data: usize) -> Vec<u8> {
    B::header(3, 1, 0)
        .tensor(name, dims, ty, offset)
        .data(32, data)
        .0
}

#[test]
fn tensor_table_errors() {
    let long = "t".repeat(64);
    expect(
        "tensor name too long",
        &with_tensor(&long, &[4], 0, 0, 16),
        |k| {
            matches!(
                k,
                K::StringTooLong {
                    field: "tensor name",
                    ..
                }
            )
        },
    );
    expect("empty tensor name", &with_tensor("", &[4], 0, 0, 16), |k| {
        matches!(
            k,
            K::EmptyString {
                field: "tensor name"
            }
        )
    });
    let b = B::header(3, 2, 0)
        .tensor("t", &[8], 0, 0)
        .tensor("t", &[8], 0, 32)
        .data(32, 64)
        .0;
    expect(
        "duplicate tensor name",
        &b,
        |k| matches!(k, K::DuplicateTensor { tensor } if tensor == "t"),
    );
    expect("n_dims 0", &with_tensor("t", &[], 0, 0, 16), |k| {
        matches!(k, K::BadDimCount { n_dims: 0, .. })
    });
    expect(
        "n_dims 5",
        &with_tensor("t", &[1, 1, 1, 1, 4], 0, 0, 16),
        |k| matches!(k, K::BadDimCount { n_dims: 5, .. }),
    );
    let e = expect(
        "zero dimension",
        &with_tensor("t", &[4, 0], 0, 0, 16),
        |k| matches!(k, K::ZeroDim { dim: 1, .. }),
    );
    assert_eq!(e.offset, 24 + 8 + 1 + 4 + 8);
    expect(
        "dimension over i64",
        &with_tensor("t", &[u64::MAX], 0, 0, 16),
        |k| matches!(k, K::DimTooLarge { .. }),
    );
    expect(
        "element count overflow",
        &with_tensor("t", &[1 << 32, 1 << 32], 0, 0, 16),
        |k| matches!(k, K::SizeOverflow { .. }),
    );
    expect(
        "element count x type size overflow",
        &with_tensor("t", &[1 << 62], 0, 0, 16),
        |k| matches!(k, K::SizeOverflow { .. }),
    );
    expect(
        "unknown type id 99",
        &with_tensor("t", &[32], 99, 0, 64),
        |k| matches!(k, K::UnknownType { type_id: 99, .. }),
    );
    expect(
        "removed type id 4 (Q4_2)",
        &with_tensor("t", &[32], 4, 0, 64),
        |k| matches!(k, K::UnknownType { type_id: 4, .. }),
    );
    expect(
        "row not whole Q4_0 blocks",
        &with_tensor("t", &[33, 2], 2, 0, 64),
        |k| {
            matches!(
                k,
                K::RowNotBlocks {
                    row_len: 33,
                    block: 32,
                    ..
                }
            )
        },
    );
    expect(
        "row not whole Q4_K blocks",
        &with_tensor("t", &[128], 12, 0, 256),
        |k| matches!(k, K::RowNotBlocks { block: 256, .. }),
    );
    expect(
        "misaligned data offset",
        &with_tensor("t", &[4], 0, 4, 32),
        |k| {
            matches!(
                k,
                K::Misaligned {
                    rel_offset: 4,
                    alignment: 32,
                    ..
                }
            )
        },
    );
    expect(
        "data past end of file",
        &with_tensor("t", &[16], 0, 0, 63),
        |k| matches!(k, K::DataOutOfFile { size: 64, .. }),
    );
    expect(
        "data offset huge",
        &with_tensor("t", &[4], 0, u64::MAX - 31, 16),
        |k| matches!(k, K::DataOutOfFile { .. }),
    );
    let b = B::header(3, 2, 0)
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[16], 0, 32)
        .data(32, 96)
        .0;
    expect(
        "overlapping tensors",
        &b,
        |k| matches!(k, K::Overlap { tensor, other } if tensor == "b" && other == "a"),
    );
    let b = B::header(3, 1, 0).str(&"t".repeat(40)).u32(1).u64(4).0;
    expect("tensor table truncated", &b, |k| {
        matches!(
            k,
            K::Truncated {
                field: "tensor type",
                ..
            }
        )
    });
}

#[test]
fn accessor_errors_name_the_key() {
    let g = open(&valid()).unwrap();
    let e = g.get_u64("llama.missing").unwrap_err();
    assert!(matches!(&e.kind, K::MissingKey { key } if key == "llama.missing"));
    let e = g.get_str("llama.block_count").unwrap_err();
    assert!(matches!(
        &e.kind,
        K::WrongType {
            found: ValueType::U32,
            ..
        }
    ));
    assert!(e.to_string().contains("llama.block_count"));
    let e = g.get_int_in("llama.block_count", 3, 10).unwrap_err();
    assert!(matches!(
        e.kind,
        K::OutOfRange {
            value: 2,
            min: 3,
            max: 10,
            ..
        }
    ));
    assert!(g.require_tensor("nope").is_err());
    let e = g
        .array(&SliceStorage::new(&valid()), "tokenizer.ggml.scores")
        .unwrap()
        .strings()
        .unwrap_err();
    assert!(matches!(
        e.kind,
        K::ArrayElem {
            expected: "string",
            ..
        }
    ));
}

/// A storage that fails past a given offset, as a dying card would.
struct Failing<'a>(&'a [u8], u64);
impl Storage for Failing<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        if offset + buf.len() as u64 > self.1 {
            return Err(StorageError::Io {
                offset,
                len: buf.len() as u64,
                detail: "injected read failure".into(),
            });
        }
        SliceStorage::new(self.0).read_at(offset, buf)
    }
}

#[test]
fn storage_errors_are_passed_on() {
    let b = valid();
    let e = Gguf::open(&Failing(&b, 10)).unwrap_err();
    assert!(
        matches!(e.kind, K::Storage(StorageError::Io { .. })),
        "{e:?}"
    );
    assert!(e.to_string().contains("injected read failure"));
}

/// Every truncation of a valid file, and many random corruptions, give `Ok` or an error; never a
/// panic or a hang. Deterministic (a fixed xorshift seed).
#[test]
fn truncations_and_random_corruptions_never_panic() {
    let good = valid();
    for len in 0..good.len() {
        assert!(
            open(&good[..len]).is_err(),
            "truncated to {len} bytes but accepted"
        );
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ok, mut bad) = (0, 0);
    for _ in 0..20_000 {
        let mut b = good.clone();
        for _ in 0..1 + rand() % 4 {
            let i = (rand() as usize) % b.len();
            b[i] = match rand() % 3 {
                0 => rand() as u8,
                1 => b[i] ^ (1 << (rand() % 8)),
                _ => 0xff,
            };
        }
        match open(&b) {
            Ok(_) => ok += 1,
            Err(_) => bad += 1,
        }
    }
    eprintln!("random corruptions: {ok} still valid, {bad} rejected");
    assert!(bad > 10_000);
}
