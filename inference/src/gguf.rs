//! GGUF v2/v3 reader over a [`Storage`]: the file is never assumed to be in memory.
//!
//! [`Gguf::open`] walks the header, the metadata and the tensor table once through a small buffered
//! cursor, validating every count, length, type id, dimension and offset with checked arithmetic, and
//! keeps what it needs: scalar and string metadata values, arrays as (type, length, file offset) to be
//! read on demand ([`Gguf::array`]), and the tensor table with absolute data offsets.
//! Any violation is a [`GgufError`] naming the field, the bad value and its byte offset.
#![forbid(unsafe_code)]

use crate::fit::{self, TooLarge};
use crate::oom;
use crate::quant::GgmlType;
use crate::storage::{Storage, StorageError};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Longest tensor name llama.cpp accepts (GGML_MAX_NAME - 1).
pub const MAX_TENSOR_NAME: u64 = 63;
/// Longest metadata key accepted.
pub const MAX_KEY_LEN: u64 = 1024;
/// Longest string value accepted (chat templates are the longest real ones, tens of KiB).
pub const MAX_STRING_LEN: u64 = 16 << 20;
/// Most metadata entries accepted.
pub const MAX_KV: u64 = 1 << 16;
/// Most tensors accepted.
pub const MAX_TENSORS: u64 = 1 << 20;
/// Most dimensions of a tensor (GGML_MAX_DIMS).
pub const MAX_DIMS: u32 = 4;

// Smallest encodings, used to bound counts by the bytes left in the file.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1; // key length, 1-byte key, type, 1-byte value
const MIN_TENSOR_BYTES: u64 = 8 + 1 + 4 + 8 + 4 + 8; // name length, name, n_dims, one dim, type, offset

/// The type of a metadata value, as its GGUF id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// Encoded size of a fixed-size value; `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<u64> {
        Some(match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 => 8,
            ValueType::String | ValueType::Array => return None,
        })
    }

    /// Smallest encoded size (a string is at least its 8-byte length).
    fn min_size(self) -> u64 {
        self.fixed_size().unwrap_or(8)
    }

    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

/// An array value: element type, length, and where its elements start in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayInfo {
    pub elem: ValueType,
    pub len: u64,
    /// File offset of the first element.
    pub offset: u64,
}

/// A metadata value. Arrays are not loaded: read them with [`Gguf::array`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Array(ArrayInfo),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// The value as a non-negative integer, if it is an integer type holding one.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, if it is an integer type in range.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v as i64),
            Value::I16(v) => Some(v as i64),
            Value::I32(v) => Some(v as i64),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as f32, if it is a float.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// One metadata entry.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaEntry {
    pub key: String,
    pub value: Value,
    /// File offset of the entry (its key length).
    pub offset: u64,
}

/// One tensor of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub ty: GgmlType,
    /// Dimensions, innermost (row length) first; unused ones are 1.
    pub dims: [u64; 4],
    pub n_dims: u32,
    /// Absolute file offset of the tensor's data.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
    /// File offset of the tensor's entry in the tensor table.
    pub info_offset: u64,
}

impl TensorInfo {
    /// A copy, fallibly (the name is its one allocation).
    pub fn try_clone(&self) -> Result<TensorInfo, crate::oom::OutOfMemory> {
        let name = oom::copy_str(&self.name, "a tensor name")?;
        Ok(TensorInfo { name, ..*self })
    }

    /// Elements in a row (the first dimension).
    pub fn row_len(&self) -> u64 {
        self.dims[0]
    }

    /// Number of rows (product of the other dimensions).
    pub fn rows(&self) -> u64 {
        self.dims[1] * self.dims[2] * self.dims[3]
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> u64 {
        self.size / self.rows().max(1)
    }

    pub fn n_elements(&self) -> u64 {
        self.row_len() * self.rows()
    }

    /// The dimensions in use.
    pub fn shape(&self) -> &[u64] {
        &self.dims[..self.n_dims as usize]
    }
}

/// What was wrong with a GGUF file, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufError {
    /// Byte offset in the file of the field that was wrong.
    pub offset: u64,
    pub kind: GgufErrorKind,
}

/// The kinds of [`GgufError`].
#[derive(Debug, Clone, PartialEq)]
pub enum GgufErrorKind {
    /// Reading the underlying storage failed.
    Storage(StorageError),
    /// The file ends inside `field`, which needs `need` bytes.
    Truncated {
        field: &'static str,
        need: u64,
        file_len: u64,
    },
    BadMagic {
        found: [u8; 4],
    },
    /// Only versions 2 and 3 (little-endian) are read.
    BadVersion {
        version: u32,
        byte_swapped: bool,
    },
    /// A count is larger than the file (or the reader's limit) can hold.
    TooMany {
        field: &'static str,
        count: u64,
        max: u64,
    },
    /// A string's length is larger than the bytes left or the limit for its field.
    StringTooLong {
        field: &'static str,
        len: u64,
        max: u64,
    },
    EmptyString {
        field: &'static str,
    },
    BadUtf8 {
        field: &'static str,
    },
    BadValueType {
        key: String,
        type_id: u32,
    },
    NestedArray {
        key: String,
    },
    BadBool {
        key: String,
        value: u8,
    },
    DuplicateKey {
        key: String,
    },
    /// `general.alignment` is not a non-zero power of two stored as u32.
    BadAlignment {
        value: String,
    },
    DuplicateTensor {
        tensor: String,
    },
    BadDimCount {
        tensor: String,
        n_dims: u32,
    },
    ZeroDim {
        tensor: String,
        dim: usize,
    },
    DimTooLarge {
        tensor: String,
        dim: usize,
        value: u64,
    },
    /// Element count or byte size overflows.
    SizeOverflow {
        tensor: String,
    },
    UnknownType {
        tensor: String,
        type_id: u32,
    },
    /// The row length is not a whole number of the type's blocks.
    RowNotBlocks {
        tensor: String,
        ty: GgmlType,
        row_len: u64,
        block: usize,
    },
    /// The tensor's data lies (partly) outside the file.
    DataOutOfFile {
        tensor: String,
        start: u64,
        size: u64,
        file_len: u64,
    },
    Misaligned {
        tensor: String,
        rel_offset: u64,
        alignment: u64,
    },
    Overlap {
        tensor: String,
        other: String,
    },
    MissingKey {
        key: String,
    },
    WrongType {
        key: String,
        expected: &'static str,
        found: ValueType,
    },
    OutOfRange {
        key: String,
        value: i64,
        min: i64,
        max: i64,
    },
    MissingTensor {
        name: String,
    },
    /// An array element is not what the caller asked for.
    ArrayElem {
        key: String,
        index: u64,
        expected: &'static str,
        found: ValueType,
    },
    /// Something the file describes cannot be held in this board's memory.
    TooLarge(TooLarge),
    /// A buffer for the file's contents could not be allocated.
    OutOfMemory(crate::oom::OutOfMemory),
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufErrorKind::*;
        write!(f, "GGUF error at byte {}: ", self.offset)?;
        match &self.kind {
            Storage(e) => write!(f, "{e}"),
            Truncated { field, need, file_len } => {
                write!(f, "file ends inside {field} ({need} bytes needed, file is {file_len} bytes)")
            }
            BadMagic { found } => write!(f, "bad magic {found:02x?}, expected \"GGUF\""),
            BadVersion { version, byte_swapped: true } => {
                write!(f, "version {version:#x} is a big-endian (byte-swapped) file; only little-endian is read")
            }
            BadVersion { version, .. } => write!(f, "unsupported version {version} (2 and 3 are read)"),
            TooMany { field, count, max } => write!(f, "{field} = {count} exceeds the maximum {max}"),
            StringTooLong { field, len, max } => {
                write!(f, "{field} length {len} exceeds the maximum {max}")
            }
            EmptyString { field } => write!(f, "{field} is empty"),
            BadUtf8 { field } => write!(f, "{field} is not valid UTF-8"),
            BadValueType { key, type_id } => write!(f, "key {key:?} has unknown value type {type_id}"),
            NestedArray { key } => write!(f, "key {key:?} is an array of arrays (not supported)"),
            BadBool { key, value } => write!(f, "key {key:?} holds bool byte {value} (0 or 1 expected)"),
            DuplicateKey { key } => write!(f, "duplicate metadata key {key:?}"),
            BadAlignment { value } => {
                write!(f, "general.alignment = {value}: must be a non-zero power of two stored as u32")
            }
            DuplicateTensor { tensor } => write!(f, "duplicate tensor name {tensor:?}"),
            BadDimCount { tensor, n_dims } => {
                write!(f, "tensor {tensor:?} has {n_dims} dimensions (1..={MAX_DIMS} allowed)")
            }
            ZeroDim { tensor, dim } => write!(f, "tensor {tensor:?} dimension {dim} is 0"),
            DimTooLarge { tensor, dim, value } => {
                write!(f, "tensor {tensor:?} dimension {dim} = {value} is too large")
            }
            SizeOverflow { tensor } => write!(f, "tensor {tensor:?}: element count x type size overflows"),
            UnknownType { tensor, type_id } => write!(f, "tensor {tensor:?} has unknown or unsupported type id {type_id}"),
            RowNotBlocks { tensor, ty, row_len, block } => write!(
                f,
                "tensor {tensor:?}: row length {row_len} is not a multiple of the {ty} block size {block}"
            ),
            DataOutOfFile { tensor, start, size, file_len } => write!(
                f,
                "tensor {tensor:?}: data at {start} of {size} bytes extends past the end of the {file_len}-byte file"
            ),
            Misaligned { tensor, rel_offset, alignment } => {
                write!(f, "tensor {tensor:?}: data offset {rel_offset} is not a multiple of the alignment {alignment}")
            }
            Overlap { tensor, other } => write!(f, "tensor {tensor:?} overlaps tensor {other:?}"),
            MissingKey { key } => write!(f, "metadata key {key:?} is missing"),
            WrongType { key, expected, found } => {
                write!(f, "metadata key {key:?} is {}, expected {expected}", found.name())
            }
            OutOfRange { key, value, min, max } => {
                write!(f, "metadata key {key:?} = {value} is outside {min}..={max}")
            }
            MissingTensor { name } => write!(f, "tensor {name:?} is missing"),
            ArrayElem { key, index, expected, found } => write!(
                f,
                "array {key:?} element {index} is {}, expected {expected}",
                found.name()
            ),
            TooLarge(e) => write!(f, "{e}"),
            OutOfMemory(e) => write!(f, "{e}"),
        }
    }
}

impl GgufError {
    /// True when the file was fine but a buffer for it could not be allocated.
    pub fn out_of_memory(&self) -> bool {
        matches!(self.kind, GgufErrorKind::OutOfMemory(_))
    }
}

#[cfg(feature = "std")]
impl std::error::Error for GgufError {}

fn err<T>(offset: u64, kind: GgufErrorKind) -> Result<T, GgufError> {
    Err(GgufError { offset, kind })
}

/// [`GgufErrorKind::TooMany`] at `offset` if `count` exceeds `max`.
fn at_most(offset: u64, field: &'static str, count: u64, max: u64) -> Result<(), GgufError> {
    if count > max {
        return err(offset, GgufErrorKind::TooMany { field, count, max });
    }
    Ok(())
}

/// A sequential reader over a storage with a small buffer.
struct Cursor<'a, S: Storage + ?Sized> {
    src: &'a S,
    len: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
    buf_fill: usize,
}

const CURSOR_BUF: usize = 8192;

impl<'a, S: Storage + ?Sized> Cursor<'a, S> {
    fn new(src: &'a S, pos: u64) -> Result<Self, GgufError> {
        Ok(Self {
            src,
            len: src.len(),
            pos,
            buf: oom_at(pos, oom::filled(CURSOR_BUF, 0, "GGUF read buffer"))?,
            buf_start: 0,
            buf_fill: 0,
        })
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn need(&self, n: u64, field: &'static str) -> Result<(), GgufError> {
        if n > self.remaining() {
            return err(
                self.pos,
                GgufErrorKind::Truncated {
                    field,
                    need: n,
                    file_len: self.len,
                },
            );
        }
        Ok(())
    }

    fn read(&mut self, out: &mut [u8], field: &'static str) -> Result<(), GgufError> {
        self.need(out.len() as u64, field)?;
        let mut done = 0;
        while done < out.len() {
            let in_buf =
                self.pos >= self.buf_start && self.pos < self.buf_start + self.buf_fill as u64;
            if !in_buf {
                let want = out.len() - done;
                if want >= CURSOR_BUF {
                    // Large read: straight into the destination.
                    self.src
                        .read_at(self.pos, &mut out[done..])
                        .map_err(|e| GgufError {
                            offset: self.pos,
                            kind: GgufErrorKind::Storage(e),
                        })?;
                    self.pos += want as u64;
                    return Ok(());
                }
                let fill = (CURSOR_BUF as u64).min(self.remaining()) as usize;
                self.src
                    .read_at(self.pos, &mut self.buf[..fill])
                    .map_err(|e| GgufError {
                        offset: self.pos,
                        kind: GgufErrorKind::Storage(e),
                    })?;
                self.buf_start = self.pos;
                self.buf_fill = fill;
            }
            let at = (self.pos - self.buf_start) as usize;
            let n = (self.buf_fill - at).min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.buf[at..at + n]);
            done += n;
            self.pos += n as u64;
        }
        Ok(())
    }

    fn skip(&mut self, n: u64, field: &'static str) -> Result<(), GgufError> {
        self.need(n, field)?;
        self.pos += n;
        Ok(())
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], GgufError> {
        let mut b = [0u8; N];
        self.read(&mut b, field)?;
        Ok(b)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(field)?[0])
    }
    fn u16(&mut self, field: &'static str) -> Result<u16, GgufError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A length-prefixed UTF-8 string of at most `max` bytes.
    fn string(&mut self, field: &'static str, max: u64) -> Result<String, GgufError> {
        let at = self.pos;
        let len = self.u64(field)?;
        let limit = max.min(self.remaining());
        if len > limit {
            return err(
                at,
                GgufErrorKind::StringTooLong {
                    field,
                    len,
                    max: limit,
                },
            );
        }
        let mut bytes = oom_at(at, oom::filled(len as usize, 0u8, field))?;
        self.read(&mut bytes, field)?;
        String::from_utf8(bytes).map_err(|_| GgufError {
            offset: at,
            kind: GgufErrorKind::BadUtf8 { field },
        })
    }

    /// A [`Self::string`] that must not be empty (a key or a tensor name).
    fn name(&mut self, field: &'static str, max: u64) -> Result<String, GgufError> {
        let at = self.pos;
        let s = self.string(field, max)?;
        if s.is_empty() {
            return err(at, GgufErrorKind::EmptyString { field });
        }
        Ok(s)
    }

    /// Skip a length-prefixed string, checking its length.
    fn skip_string(&mut self, field: &'static str) -> Result<(), GgufError> {
        let at = self.pos;
        let len = self.u64(field)?;
        if len > self.remaining() {
            return err(
                at,
                GgufErrorKind::StringTooLong {
                    field,
                    len,
                    max: self.remaining(),
                },
            );
        }
        self.pos += len;
        Ok(())
    }

    /// A scalar or string value of type `ty` (not an array).
    fn scalar(
        &mut self,
        ty: ValueType,
        key: &str,
        field: &'static str,
    ) -> Result<Value, GgufError> {
        let at = self.pos;
        Ok(match ty {
            ValueType::U8 => Value::U8(self.u8(field)?),
            ValueType::I8 => Value::I8(self.u8(field)? as i8),
            ValueType::U16 => Value::U16(self.u16(field)?),
            ValueType::I16 => Value::I16(self.u16(field)? as i16),
            ValueType::U32 => Value::U32(self.u32(field)?),
            ValueType::I32 => Value::I32(self.u32(field)? as i32),
            ValueType::F32 => Value::F32(f32::from_bits(self.u32(field)?)),
            ValueType::U64 => Value::U64(self.u64(field)?),
            ValueType::I64 => Value::I64(self.u64(field)? as i64),
            ValueType::F64 => Value::F64(f64::from_bits(self.u64(field)?)),
            ValueType::Bool => match self.u8(field)? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                v => {
                    return err(
                        at,
                        GgufErrorKind::BadBool {
                            key: key.into(),
                            value: v,
                        },
                    )
                }
            },
            ValueType::String => Value::String(self.string(field, MAX_STRING_LEN)?),
            ValueType::Array => {
                return err(at, GgufErrorKind::NestedArray { key: key.into() });
            }
        })
    }
}

/// A parsed GGUF file: metadata and tensor table (no tensor data is read).
#[derive(Debug, Clone)]
pub struct Gguf {
    pub version: u32,
    pub file_len: u64,
    pub alignment: u64,
    /// Absolute offset of the tensor data section.
    pub data_offset: u64,
    pub metadata: Vec<MetaEntry>,
    pub tensors: Vec<TensorInfo>,
    /// Indices into `metadata`, sorted by key.
    key_index: Vec<usize>,
    /// Indices into `tensors`, sorted by name.
    tensor_index: Vec<usize>,
}

/// The steps of [`Gguf::open`], in file order.
impl<S: Storage + ?Sized> Cursor<'_, S> {
    /// Magic, version and the two counts (`(version, tensors, metadata entries)`), each count
    /// bounded by what the rest of the file could hold.
    fn header(&mut self) -> Result<(u32, u64, u64), GgufError> {
        let magic: [u8; 4] = self.array("magic")?;
        if magic != MAGIC {
            return err(0, GgufErrorKind::BadMagic { found: magic });
        }
        let version = self.u32("version")?;
        if version != 2 && version != 3 {
            let swapped = version.swap_bytes();
            let byte_swapped = (1..=3).contains(&swapped);
            return err(
                4,
                GgufErrorKind::BadVersion {
                    version,
                    byte_swapped,
                },
            );
        }
        let n_tensors = self.u64("tensor_count")?;
        let n_kv = self.u64("metadata_kv_count")?;
        let left = self.remaining();
        let max_tensors = MAX_TENSORS.min(left / MIN_TENSOR_BYTES);
        at_most(8, "tensor_count", n_tensors, max_tensors)?;
        let max_kv = MAX_KV.min(left / MIN_KV_BYTES);
        at_most(16, "metadata_kv_count", n_kv, max_kv)?;
        Ok((version, n_tensors, n_kv))
    }

    /// Metadata: `n_kv` entries (keys unique), and the index by key.
    fn metadata(&mut self, n_kv: u64) -> Result<(Vec<MetaEntry>, Vec<usize>), GgufError> {
        let mut metadata: Vec<MetaEntry> =
            oom_at(self.pos, oom::with_capacity(n_kv as usize, "metadata"))?;
        let mut key_index = oom_at(self.pos, oom::with_capacity(n_kv as usize, "metadata"))?;
        for _ in 0..n_kv {
            let offset = self.pos;
            let key = self.name("metadata key", MAX_KEY_LEN)?;
            let type_at = self.pos;
            let type_id = self.u32("metadata value type")?;
            let Some(ty) = ValueType::from_id(type_id) else {
                return err(type_at, GgufErrorKind::BadValueType { key, type_id });
            };
            let value = if ty == ValueType::Array {
                Value::Array(self.array_info(&key)?)
            } else {
                self.scalar(ty, &key, "metadata value")?
            };
            match find(&key_index, &key, |i| &metadata[i].key) {
                Ok(_) => return err(offset, GgufErrorKind::DuplicateKey { key }),
                // Both have room for `n_kv` entries: neither grows.
                Err(at) => key_index.insert(at, metadata.len()),
            }
            metadata.push(MetaEntry { key, value, offset });
        }
        Ok((metadata, key_index))
    }

    /// An array value of metadata `key`: its element type and length, skipping its elements.
    fn array_info(&mut self, key: &str) -> Result<ArrayInfo, GgufError> {
        let elem_at = self.pos;
        let elem_id = self.u32("array element type")?;
        let elem = match ValueType::from_id(elem_id) {
            Some(ValueType::Array) => {
                return err(elem_at, GgufErrorKind::NestedArray { key: key.into() })
            }
            Some(t) => t,
            None => {
                return err(
                    elem_at,
                    GgufErrorKind::BadValueType {
                        key: key.into(),
                        type_id: elem_id,
                    },
                )
            }
        };
        let len_at = self.pos;
        let len = self.u64("array length")?;
        at_most(
            len_at,
            "array length",
            len,
            self.remaining() / elem.min_size(),
        )?;
        let first = self.pos;
        match elem.fixed_size() {
            Some(sz) => self.skip(len * sz, "array data")?,
            None => {
                for _ in 0..len {
                    self.skip_string("array string")?;
                }
            }
        }
        Ok(ArrayInfo {
            elem,
            len,
            offset: first,
        })
    }

    /// The tensor table: `n_tensors` entries (names unique), the index by name, and each
    /// tensor's offset relative to the data section with where it was read.
    #[allow(clippy::type_complexity)]
    fn tensor_table(
        &mut self,
        n_tensors: u64,
        alignment: u64,
    ) -> Result<(Vec<TensorInfo>, Vec<usize>, Vec<(u64, u64)>), GgufError> {
        let n = n_tensors as usize;
        let mut tensors: Vec<TensorInfo> =
            oom_at(self.pos, oom::with_capacity(n, "the tensor table"))?;
        let mut tensor_index = oom_at(self.pos, oom::with_capacity(n, "the tensor table"))?;
        let mut rel_offsets = oom_at(self.pos, oom::with_capacity(n, "the tensor table"))?;
        for _ in 0..n_tensors {
            let (t, rel_at) = self.tensor_info(alignment)?;
            match find(&tensor_index, &t.name, |i| &tensors[i].name) {
                Ok(_) => {
                    let at = t.info_offset;
                    return err(at, GgufErrorKind::DuplicateTensor { tensor: t.name });
                }
                // All three have room for `n_tensors` entries: none grows.
                Err(at) => tensor_index.insert(at, tensors.len()),
            }
            rel_offsets.push((t.offset, rel_at));
            tensors.push(t);
        }
        Ok((tensors, tensor_index, rel_offsets))
    }

    /// One entry of the tensor table (its `offset` still relative to the data section), and
    /// where that offset was read.
    fn tensor_info(&mut self, alignment: u64) -> Result<(TensorInfo, u64), GgufError> {
        let info_offset = self.pos;
        let name = self.name("tensor name", MAX_TENSOR_NAME)?;
        let dims_at = self.pos;
        let (name, dims, n_dims, n_elements) = self.tensor_dims(name)?;
        let type_at = self.pos;
        let type_id = self.u32("tensor type")?;
        let Some(ty) = GgmlType::from_id(type_id) else {
            return err(
                type_at,
                GgufErrorKind::UnknownType {
                    tensor: name,
                    type_id,
                },
            );
        };
        let block = ty.block_elems();
        if dims[0] % block as u64 != 0 {
            return err(
                dims_at,
                GgufErrorKind::RowNotBlocks {
                    tensor: name,
                    ty,
                    row_len: dims[0],
                    block,
                },
            );
        }
        let size = match (n_elements / block as u64).checked_mul(ty.block_bytes() as u64) {
            Some(s) if s <= i64::MAX as u64 => s,
            _ => return err(dims_at, GgufErrorKind::SizeOverflow { tensor: name }),
        };
        let rel_at = self.pos;
        let rel = self.u64("tensor data offset")?;
        if rel % alignment != 0 {
            return err(
                rel_at,
                GgufErrorKind::Misaligned {
                    tensor: name,
                    rel_offset: rel,
                    alignment,
                },
            );
        }
        let t = TensorInfo {
            name,
            ty,
            dims,
            n_dims,
            offset: rel,
            size,
            info_offset,
        };
        Ok((t, rel_at))
    }

    /// A tensor's dimensions: `(name, dims, n_dims, n_elements)`, none zero, the product in `i64`.
    fn tensor_dims(&mut self, name: String) -> Result<(String, [u64; 4], u32, u64), GgufError> {
        let dims_at = self.pos;
        let n_dims = self.u32("tensor n_dims")?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return err(
                dims_at,
                GgufErrorKind::BadDimCount {
                    tensor: name,
                    n_dims,
                },
            );
        }
        let mut dims = [1u64; 4];
        let mut n_elements: u64 = 1;
        for (d, dim) in dims.iter_mut().enumerate().take(n_dims as usize) {
            let at = self.pos;
            let v = self.u64("tensor dimension")?;
            if v == 0 {
                return err(
                    at,
                    GgufErrorKind::ZeroDim {
                        tensor: name,
                        dim: d,
                    },
                );
            }
            if v > i64::MAX as u64 {
                return err(
                    at,
                    GgufErrorKind::DimTooLarge {
                        tensor: name,
                        dim: d,
                        value: v,
                    },
                );
            }
            n_elements = match n_elements.checked_mul(v) {
                Some(n) if n <= i64::MAX as u64 => n,
                _ => return err(at, GgufErrorKind::SizeOverflow { tensor: name }),
            };
            *dim = v;
        }
        Ok((name, dims, n_dims, n_elements))
    }
}

/// `general.alignment` (a power of two as u32), or the default.
fn alignment(metadata: &[MetaEntry], key_index: &[usize]) -> Result<u64, GgufError> {
    let found = find(key_index, "general.alignment", |i| &metadata[i].key);
    match found.ok().map(|p| &metadata[key_index[p]]) {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(MetaEntry {
            value: Value::U32(a),
            ..
        }) if *a != 0 && a.is_power_of_two() => Ok(*a as u64),
        Some(e) => err(
            e.offset,
            GgufErrorKind::BadAlignment {
                value: alloc::format!("{:?}", e.value),
            },
        ),
    }
}

/// Data section: aligned after the table (which ends at `table_end`); every tensor inside the
/// file. Makes the tensors' offsets absolute and returns the section's offset.
fn place_data(
    table_end: u64,
    alignment: u64,
    file_len: u64,
    tensors: &mut [TensorInfo],
    rel_offsets: &[(u64, u64)],
) -> Result<u64, GgufError> {
    let data_offset = match table_end.checked_next_multiple_of(alignment) {
        Some(d) => d,
        None => {
            return err(
                table_end,
                GgufErrorKind::Truncated {
                    field: "tensor data",
                    need: alignment,
                    file_len,
                },
            )
        }
    };
    for (t, &(rel, rel_at)) in tensors.iter_mut().zip(rel_offsets) {
        let start = data_offset.checked_add(rel);
        match start.and_then(|s| s.checked_add(t.size)) {
            Some(end) if end <= file_len => t.offset = data_offset + rel,
            _ => {
                return err(
                    rel_at,
                    GgufErrorKind::DataOutOfFile {
                        tensor: t.name.clone(),
                        start: start.unwrap_or(u64::MAX),
                        size: t.size,
                        file_len,
                    },
                )
            }
        }
    }
    Ok(data_offset)
}

/// Where `name` is in `index` (indices sorted by `name_of`), or where it would go.
fn find<'a>(
    index: &[usize],
    name: &str,
    name_of: impl Fn(usize) -> &'a String,
) -> Result<usize, usize> {
    index.binary_search_by(|&i| name_of(i).as_str().cmp(name))
}

/// No two tensors' data overlap.
fn check_overlaps(tensors: &[TensorInfo], rel_offsets: &[(u64, u64)]) -> Result<(), GgufError> {
    let mut order = oom_at(0, oom::collect(tensors.len(), "the tensor order", |i| i))?;
    // The index breaks ties, so the unstable sort (which does not allocate) orders as a stable one.
    order.sort_unstable_by_key(|&i| (tensors[i].offset, tensors[i].size, i));
    for w in order.windows(2) {
        let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
        if a.offset + a.size > b.offset && a.size > 0 && b.size > 0 {
            return err(
                rel_offsets[w[1]].1,
                GgufErrorKind::Overlap {
                    tensor: b.name.clone(),
                    other: a.name.clone(),
                },
            );
        }
    }
    Ok(())
}

impl Gguf {
    /// Read and validate the header, metadata and tensor table of the GGUF file in `src`.
    pub fn open<S: Storage + ?Sized>(src: &S) -> Result<Self, GgufError> {
        let mut c = Cursor::new(src, 0)?;
        let file_len = c.len;
        let (version, n_tensors, n_kv) = c.header()?;
        let (metadata, key_index) = c.metadata(n_kv)?;
        let alignment = alignment(&metadata, &key_index)?;
        let (mut tensors, tensor_index, rel_offsets) = c.tensor_table(n_tensors, alignment)?;
        let data_offset = place_data(c.pos, alignment, file_len, &mut tensors, &rel_offsets)?;
        check_overlaps(&tensors, &rel_offsets)?;
        Ok(Gguf {
            version,
            file_len,
            alignment,
            data_offset,
            metadata,
            tensors,
            key_index,
            tensor_index,
        })
    }

    /// The metadata entry for `key`.
    pub fn entry(&self, key: &str) -> Option<&MetaEntry> {
        let found = find(&self.key_index, key, |i| &self.metadata[i].key);
        found.ok().map(|p| &self.metadata[self.key_index[p]])
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entry(key).map(|e| &e.value)
    }

    fn require(&self, key: &str) -> Result<&MetaEntry, GgufError> {
        self.entry(key).ok_or_else(|| GgufError {
            offset: 0,
            kind: GgufErrorKind::MissingKey { key: key.into() },
        })
    }

    fn wrong(e: &MetaEntry, expected: &'static str) -> GgufError {
        GgufError {
            offset: e.offset,
            kind: GgufErrorKind::WrongType {
                key: e.key.clone(),
                expected,
                found: e.value.value_type(),
            },
        }
    }

    /// A non-negative integer value (any integer type).
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let e = self.require(key)?;
        e.value
            .as_u64()
            .ok_or_else(|| Self::wrong(e, "a non-negative integer"))
    }

    /// An integer value in `min..=max`.
    pub fn get_int_in(&self, key: &str, min: i64, max: i64) -> Result<i64, GgufError> {
        let e = self.require(key)?;
        let v = e
            .value
            .as_i64()
            .ok_or_else(|| Self::wrong(e, "an integer"))?;
        if v < min || v > max {
            return err(
                e.offset,
                GgufErrorKind::OutOfRange {
                    key: key.into(),
                    value: v,
                    min,
                    max,
                },
            );
        }
        Ok(v)
    }

    /// A float value (f32 or f64).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        let e = self.require(key)?;
        e.value.as_f32().ok_or_else(|| Self::wrong(e, "a float"))
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let e = self.require(key)?;
        e.value.as_str().ok_or_else(|| Self::wrong(e, "a string"))
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        let e = self.require(key)?;
        match e.value {
            Value::Bool(b) => Ok(b),
            _ => Err(Self::wrong(e, "a bool")),
        }
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str, GgufError> {
        self.get_str("general.architecture")
    }

    /// The key `{architecture}.{suffix}`, e.g. `arch_key("block_count")` = `llama.block_count`.
    pub fn arch_key(&self, suffix: &str) -> Result<String, GgufError> {
        let key = oom::format(
            format_args!("{}.{suffix}", self.architecture()?),
            "a metadata key",
        );
        oom_at(0, key)
    }

    /// The array value for `key`.
    pub fn array_info(&self, key: &str) -> Result<ArrayInfo, GgufError> {
        let e = self.require(key)?;
        match e.value {
            Value::Array(a) => Ok(a),
            _ => Err(Self::wrong(e, "an array")),
        }
    }

    /// Read the elements of the array `key` one by one from `src`.
    pub fn array<'a, S: Storage + ?Sized>(
        &self,
        src: &'a S,
        key: &str,
    ) -> Result<ArrayIter<'a, S>, GgufError> {
        let info = self.array_info(key)?;
        Ok(ArrayIter {
            cursor: Cursor::new(src, info.offset)?,
            info,
            key: oom_at(info.offset, oom::copy_str(key, "a metadata key"))?,
            index: 0,
        })
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        let found = find(&self.tensor_index, name, |i| &self.tensors[i].name);
        found.ok().map(|p| &self.tensors[self.tensor_index[p]])
    }

    /// The tensor called `name`, or a [`GgufErrorKind::MissingTensor`] error.
    pub fn require_tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensor(name).ok_or_else(|| GgufError {
            offset: 0,
            kind: GgufErrorKind::MissingTensor { name: name.into() },
        })
    }
}

/// Reads an array's elements on demand; strings are checked for length and UTF-8 as they come.
pub struct ArrayIter<'a, S: Storage + ?Sized> {
    cursor: Cursor<'a, S>,
    info: ArrayInfo,
    key: String,
    index: u64,
}

impl<S: Storage + ?Sized> fmt::Debug for ArrayIter<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArrayIter")
            .field("key", &self.key)
            .field("index", &self.index)
            .finish()
    }
}

impl<S: Storage + ?Sized> ArrayIter<'_, S> {
    pub fn info(&self) -> ArrayInfo {
        self.info
    }

    /// Number of elements left.
    pub fn remaining(&self) -> u64 {
        self.info.len - self.index
    }

    /// The next element as raw bytes (a string's bytes without UTF-8 check), into `buf`.
    pub fn next_bytes<'b>(&mut self, buf: &'b mut Vec<u8>) -> Option<Result<&'b [u8], GgufError>> {
        if self.index >= self.info.len {
            return None;
        }
        self.index += 1;
        let res = (|| {
            let len = match self.info.elem.fixed_size() {
                Some(sz) => sz,
                None => {
                    let at = self.cursor.pos;
                    let len = self.cursor.u64("array string")?;
                    if len > MAX_STRING_LEN.min(self.cursor.remaining()) {
                        return err(
                            at,
                            GgufErrorKind::StringTooLong {
                                field: "array string",
                                len,
                                max: MAX_STRING_LEN,
                            },
                        );
                    }
                    len
                }
            };
            let more = (len as usize).saturating_sub(buf.len());
            oom_at(self.cursor.pos, oom::reserve(buf, more, "an array element"))?;
            buf.resize(len as usize, 0);
            self.cursor.read(buf, "array element")?;
            Ok(())
        })();
        Some(res.map(|_| &buf[..]))
    }

    fn elem_err(&self, expected: &'static str) -> GgufError {
        GgufError {
            offset: self.info.offset,
            kind: GgufErrorKind::ArrayElem {
                key: self.key.clone(),
                index: self.index,
                expected,
                found: self.info.elem,
            },
        }
    }

    /// An empty vector with room for every element, if this board can hold them all.
    fn vec<T>(&self) -> Result<Vec<T>, GgufError> {
        let bytes = fit::bytes(self.info.len, core::mem::size_of::<T>() as u64);
        let n = fit::fit(bytes, || {
            alloc::format!("array {:?} of {} elements", self.key, self.info.len)
        })
        .map_err(|e| GgufError {
            offset: self.info.offset,
            kind: GgufErrorKind::TooLarge(e),
        })?;
        let n = n / core::mem::size_of::<T>().max(1);
        oom_at(self.info.offset, oom::with_capacity(n, "array elements"))
    }

    /// Read every element as a string (fails unless the array holds strings).
    pub fn strings(mut self) -> Result<Vec<String>, GgufError> {
        if self.info.elem != ValueType::String {
            return Err(self.elem_err("string"));
        }
        let mut out = self.vec()?;
        while self.index < self.info.len {
            let at = self.cursor.pos;
            out.push(
                self.cursor
                    .string("array string", MAX_STRING_LEN)
                    .map_err(|e| GgufError { offset: at, ..e })?,
            );
            self.index += 1;
        }
        Ok(out)
    }

    /// Read every element as f32 (f32 or f64 arrays).
    pub fn f32s(self) -> Result<Vec<f32>, GgufError> {
        if !matches!(self.info.elem, ValueType::F32 | ValueType::F64) {
            return Err(self.elem_err("f32"));
        }
        let mut out = self.vec()?;
        for v in self {
            out.push(v?.as_f32().unwrap_or(f32::NAN));
        }
        Ok(out)
    }

    /// Read every element as i64 (any integer array).
    pub fn ints(mut self) -> Result<Vec<i64>, GgufError> {
        if matches!(
            self.info.elem,
            ValueType::F32 | ValueType::F64 | ValueType::String | ValueType::Bool
        ) {
            return Err(self.elem_err("integer"));
        }
        let mut out = self.vec()?;
        while let Some(v) = self.next() {
            let v = v?;
            match v.as_i64() {
                Some(i) => out.push(i),
                None => return Err(self.elem_err("integer in i64 range")),
            }
        }
        Ok(out)
    }
}

impl<S: Storage + ?Sized> Iterator for ArrayIter<'_, S> {
    type Item = Result<Value, GgufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.index >= self.info.len {
            return None;
        }
        self.index += 1;
        Some(
            self.cursor
                .scalar(self.info.elem, &self.key, "array element"),
        )
    }
}

/// An allocation's result as a [`GgufError`] at `offset`.
fn oom_at<T>(offset: u64, r: Result<T, crate::oom::OutOfMemory>) -> Result<T, GgufError> {
    r.map_err(|e| GgufError {
        offset,
        kind: GgufErrorKind::OutOfMemory(e),
    })
}
