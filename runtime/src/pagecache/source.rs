//! What the page cache reads from: a file as a [`FileSource`] (synchronous reads, or queued reads
//! on a device with a request queue), and the block device under it as a [`DynBlock`] for the
//! prompt cache.

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use core::fmt;
use drivers::block::{BlockDevice, WriteBlocks};

/// A read the cache starts: `len` bytes from file offset `offset` (a multiple of 512) into `buf`,
/// which has room for `len` rounded up to whole 512-byte blocks; reported as `tag`.
#[derive(Debug, Clone, Copy)]
pub struct PageRead {
    pub tag: u32,
    pub offset: u64,
    pub buf: *mut u8,
    pub len: usize,
}

// SAFETY: the buffer is the cache's to lend to whichever core carries out the read; the contract
// of `FileSource::start` (valid and untouched until reported) holds whatever core writes it.
unsafe impl Send for PageRead {}

impl PageRead {
    /// The first `len` bytes of the buffer.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes, and nothing else may use them meanwhile.
    pub unsafe fn buf<'a>(&self) -> &'a mut [u8] {
        // SAFETY: the caller's guarantee.
        unsafe { core::slice::from_raw_parts_mut(self.buf, self.len) }
    }
}

/// A file the cache reads from: "fill this buffer from this file offset" (the FAT file over its
/// block device in the kernel, a file or byte vector in tests).
pub trait FileSource {
    type Error: fmt::Display;
    fn len(&self) -> u64;
    /// True when the file holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Reads the source can keep in flight; 0 (the default) means reads are synchronous only, and
    /// the cache does no read-ahead (it would only move the wait, not hide it).
    fn queue_depth(&self) -> usize {
        0
    }

    /// Start the read `r`. Returns `true` if the data is already there, `false` if
    /// [`FileSource::poll`] will report `r.tag` later.
    ///
    /// # Safety
    /// `r.buf` must be valid for writes of `r.len` rounded up to 512, and untouched until the read
    /// is reported (when this returns `false`).
    unsafe fn start(&mut self, r: PageRead) -> Result<bool, Self::Error> {
        // SAFETY: the caller's guarantee for `r.buf`.
        self.read(r.offset, unsafe { r.buf() })?;
        Ok(true)
    }

    /// A started read that has finished: its tag and outcome. Never blocks.
    fn poll(&mut self) -> Option<(u32, Result<(), Self::Error>)> {
        None
    }

    /// Lend `f` the block device under the file, if there is one (the prompt cache reads and
    /// writes its own file on the card once the device has moved into the page cache). Returns
    /// whether `f` ran.
    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        let _ = f;
        false
    }
}

/// A block device as a trait object with its errors as text: how the run reaches the card once
/// the device has moved into the page cache. [`DynDev`] makes it a [`BlockDevice`] again.
pub trait DynBlock: Send {
    fn num_blocks(&self) -> u64;
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), String>;
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), String>;
    fn flush(&mut self) -> Result<(), String>;
}

impl<D: WriteBlocks + Send> DynBlock for D {
    fn num_blocks(&self) -> u64 {
        BlockDevice::num_blocks(self)
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), String> {
        self.read_blocks(lba, buf).map_err(|e| e.to_string())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), String> {
        self.write_blocks(lba, buf).map_err(|e| e.to_string())
    }
    fn flush(&mut self) -> Result<(), String> {
        WriteBlocks::flush(self).map_err(|e| e.to_string())
    }
}

/// A [`DynBlock`] as a block device (errors as text).
pub struct DynDev<'a>(pub &'a mut dyn DynBlock);

impl fmt::Debug for DynDev<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynDev")
            .field("blocks", &self.0.num_blocks())
            .finish()
    }
}

impl BlockDevice for DynDev<'_> {
    type Error = String;
    fn num_blocks(&self) -> u64 {
        self.0.num_blocks()
    }
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), String> {
        self.0.read(lba, buf)
    }
}

impl WriteBlocks for DynDev<'_> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), String> {
        self.0.write(lba, buf)
    }
    fn flush(&mut self) -> Result<(), String> {
        self.0.flush()
    }
}

impl<F: FileSource + ?Sized> FileSource for Box<F> {
    type Error = F::Error;
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), F::Error> {
        (**self).read(offset, buf)
    }
    fn queue_depth(&self) -> usize {
        (**self).queue_depth()
    }
    unsafe fn start(&mut self, r: PageRead) -> Result<bool, F::Error> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { (**self).start(r) }
    }
    fn poll(&mut self) -> Option<(u32, Result<(), F::Error>)> {
        (**self).poll()
    }
    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        (**self).with_device(f)
    }
}
