//! The weight-storage trait: "read these bytes at this offset".
//!
//! Nothing in `inference` assumes the model file is in memory. The GGUF reader and the matrix-vector
//! product read through [`Storage`]; the runtime's page cache implements it over a block device, the PC
//! runner over a file, tests over a byte slice. Implementations take `&self` so several cores can read
//! at once (interior mutability is the implementation's business).

use alloc::string::String;
use core::fmt;

/// What went wrong reading from a [`Storage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageError {
    /// The range `offset .. offset + len` is not inside the source of `size` bytes.
    OutOfRange { offset: u64, len: u64, size: u64 },
    /// The device or file failed; `detail` names the device-level cause (command, LBA, ...).
    Io {
        offset: u64,
        len: u64,
        detail: String,
    },
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::OutOfRange { offset, len, size } => write!(
                f,
                "read of {len} bytes at offset {offset} is past the end of the {size}-byte file"
            ),
            StorageError::Io {
                offset,
                len,
                detail,
            } => {
                write!(f, "read of {len} bytes at offset {offset} failed: {detail}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for StorageError {}

/// A random-access byte source holding a GGUF file.
pub trait Storage {
    /// Total length in bytes.
    fn len(&self) -> u64;

    /// True when the source holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fill `buf` with the bytes at `offset .. offset + buf.len()`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError>;

    /// The bytes at `offset .. offset + len` borrowed in place, when they are resident and stay so for
    /// the lifetime of the borrow (a memory-backed source, a pinned page-cache region). `None` means
    /// "use [`Storage::read_at`] into a scratch buffer"; callers must handle both.
    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let _ = (offset, len);
        None
    }

    /// A hint: the bytes at `offset .. offset + len` will be read soon (the forward pass announces
    /// the next tensors). A source that can read in the background (the runtime's page cache over
    /// virtio-blk) starts reading them; the default ignores it. Never an error: a wrong hint costs
    /// only the read-ahead it caused.
    fn prefetch(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
}

/// Check that `offset .. offset + len` lies within `size`, as every implementation must.
pub fn check_range(offset: u64, len: u64, size: u64) -> Result<(), StorageError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(StorageError::OutOfRange { offset, len, size }),
    }
}

/// A file image held in memory (tests, and boards that copy a small model to RAM).
#[derive(Debug, Clone, Copy)]
pub struct SliceStorage<'a> {
    bytes: &'a [u8],
}

impl<'a> SliceStorage<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }
}

impl Storage for SliceStorage<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        check_range(offset, buf.len() as u64, self.len())?;
        let start = offset as usize;
        buf.copy_from_slice(&self.bytes[start..start + buf.len()]);
        Ok(())
    }

    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        check_range(offset, len as u64, self.len()).ok()?;
        let start = offset as usize;
        Some(&self.bytes[start..start + len])
    }
}

/// A file read whole into memory (e.g. a draft model kept resident beside a streamed target).
impl Storage for alloc::vec::Vec<u8> {
    fn len(&self) -> u64 {
        self.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        SliceStorage::new(self).read_at(offset, buf)
    }
    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        check_range(offset, len as u64, self.len() as u64).ok()?;
        Some(&self[offset as usize..offset as usize + len])
    }
}

impl<T: Storage + ?Sized> Storage for &T {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        (**self).read_at(offset, buf)
    }
    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        (**self).resident(offset, len)
    }
    fn prefetch(&self, offset: u64, len: u64) {
        (**self).prefetch(offset, len)
    }
}

/// A file on the host read with positioned reads (`pread`), never loaded whole.
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct FileStorage {
    file: std::fs::File,
    len: u64,
}

#[cfg(feature = "std")]
impl FileStorage {
    pub fn open(path: &std::path::Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Self { file, len })
    }
}

#[cfg(feature = "std")]
impl Storage for FileStorage {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        use std::os::unix::fs::FileExt;
        check_range(offset, buf.len() as u64, self.len)?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| StorageError::Io {
                offset,
                len: buf.len() as u64,
                detail: alloc::format!("{e}"),
            })
    }
}
