//! The model file on the card: a FAT file over the block device as the page cache's
//! [`FileSource`] ([`CardFile`]), and uncached reads of it for the header and tokenizer before the
//! cache is sized ([`Direct`]).
//!
//! Reads can be queued when the device has a request queue (virtio-blk): a page becomes one device
//! request per extent piece, and the page is reported when its last piece is.

use crate::pagecache::{DynBlock, FileSource, PageRead};
use alloc::string::ToString;
use alloc::vec::Vec;
use drivers::block::{BlockDevice, Submitted, WriteBlocks};
use drivers::fat::{FatError, File, FormatError};
use inference::storage::{Storage, StorageError};

/// The model file on the card, read through the FAT extents.
#[derive(Debug)]
pub struct CardFile<D: BlockDevice> {
    pub file: File,
    pub dev: D,
    /// Device requests in flight: (device tag, page tag).
    pieces: Vec<(u16, u32)>,
    /// Pages in flight: (page tag, pieces left, first error).
    pages: Vec<InFlight<D::Error>>,
}

/// A page read in flight: its tag, the device requests left, and the first error.
type InFlight<E> = (u32, u32, Option<FatError<E>>);

/// Largest device request a queued page read makes (virtio-blk's per-request limit).
const MAX_PIECE: u64 = 1 << 20;

impl<D: BlockDevice> CardFile<D> {
    pub fn new(file: File, dev: D) -> Self {
        let q = dev.queue_depth();
        Self {
            file,
            dev,
            pieces: Vec::with_capacity(q),
            pages: Vec::with_capacity(q),
        }
    }

    /// Queue the device requests for `[offset, end)` into `buf`; returns how many were queued and
    /// the first error (requests already queued keep writing into `buf`).
    ///
    /// # Safety
    /// `buf` must be valid for writes of `end - offset` rounded up to 512 bytes, untouched until the
    /// page `tag` is reported.
    unsafe fn queue_pieces(
        &mut self,
        tag: u32,
        offset: u64,
        end: u64,
        buf: *mut u8,
    ) -> (u32, Option<FatError<D::Error>>) {
        let mut pos = offset;
        let mut queued = 0u32;
        while pos < end {
            let Some(run) = self.file.map_block(pos / 512) else {
                let (len, size) = (end - offset, self.file.size());
                return (
                    queued,
                    Some(FatError::Format(FormatError::ReadPastEnd {
                        offset,
                        len,
                        size,
                    })),
                );
            };
            // Whole blocks: the last may run past the file's end into its last block (the buffer
            // has room, and the extents cover that block).
            let blocks = (end - pos)
                .div_ceil(512)
                .min(run.blocks)
                .min(MAX_PIECE / 512);
            let n = (blocks * 512) as usize;
            // SAFETY: `pos - offset + n` is at most `end - offset` rounded up to 512, which the
            // caller guarantees `buf` can hold, untouched until this page is reported.
            let at = unsafe { buf.add((pos - offset) as usize) };
            // SAFETY: as above.
            match unsafe { self.dev.submit_read(run.lba, at, n) } {
                Ok(Submitted::Done) => {}
                Ok(Submitted::Queued(t)) => {
                    self.pieces.push((t, tag));
                    queued += 1;
                }
                Err(error) => {
                    let lba = run.lba;
                    return (queued, Some(FatError::Device { lba, blocks, error }));
                }
            }
            pos += n as u64;
        }
        (queued, None)
    }
}

impl<D: WriteBlocks + Send> FileSource for CardFile<D> {
    type Error = FatError<D::Error>;
    fn len(&self) -> u64 {
        self.file.size()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.file.read_at(&mut self.dev, offset, buf)
    }
    fn queue_depth(&self) -> usize {
        self.dev.queue_depth()
    }
    unsafe fn start(&mut self, r: PageRead) -> Result<bool, Self::Error> {
        let PageRead {
            tag,
            offset,
            buf,
            len,
        } = r;
        let size = self.file.size();
        let end = offset.checked_add(len as u64).filter(|&e| e <= size);
        let (Some(end), true, true) = (end, offset.is_multiple_of(512), self.dev.queue_depth() > 0)
        else {
            // SAFETY: the caller guarantees `buf` is valid for `len` bytes.
            let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
            self.read(offset, b)?;
            return Ok(true);
        };
        // SAFETY: the caller's guarantee for `buf`, passed on.
        match unsafe { self.queue_pieces(tag, offset, end, buf) } {
            (0, Some(e)) => Err(e),
            (0, None) => Ok(true),
            // Pieces already queued are writing into the buffer: report the page (and any error)
            // only once they are done.
            (n, e) => {
                self.pages.push((tag, n, e));
                Ok(false)
            }
        }
    }
    fn poll(&mut self) -> Option<(u32, Result<(), Self::Error>)> {
        while let Some((t, r)) = self.dev.poll_read() {
            let Some(i) = self.pieces.iter().position(|p| p.0 == t) else {
                continue;
            };
            let (_, tag) = self.pieces.swap_remove(i);
            let Some(j) = self.pages.iter().position(|p| p.0 == tag) else {
                continue;
            };
            let page = &mut self.pages[j];
            page.1 -= 1;
            if let Err(error) = r {
                page.2.get_or_insert(FatError::Device {
                    lba: 0,
                    blocks: 0,
                    error,
                });
            }
            if page.1 == 0 {
                let (tag, _, e) = self.pages.swap_remove(j);
                return Some((tag, e.map_or(Ok(()), Err)));
            }
        }
        None
    }
    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        f(&mut self.dev);
        true
    }
}

/// Uncached reads of the card file (the header and tokenizer, before the cache is sized).
#[derive(Debug)]
pub struct Direct<D: WriteBlocks + Send>(pub spin::Mutex<CardFile<D>>);

impl<D: WriteBlocks + Send> Direct<D> {
    pub fn new(file: File, dev: D) -> Self {
        Self(spin::Mutex::new(CardFile::new(file, dev)))
    }
    pub fn into_inner(self) -> CardFile<D> {
        self.0.into_inner()
    }
}

impl<D: WriteBlocks + Send> Storage for Direct<D> {
    fn len(&self) -> u64 {
        self.0.lock().file.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        inference::storage::check_range(offset, buf.len() as u64, self.len())?;
        self.0
            .lock()
            .read(offset, buf)
            .map_err(|e| StorageError::Io {
                offset,
                len: buf.len() as u64,
                detail: e.to_string(),
            })
    }
}
