//! Zeroed heap memory aligned to a page ([`ALIGN`]): the page cache's window and pinned runs, so
//! a card read lands in whole cache lines and an SD host's DMA engine can write it directly (a
//! buffer not starting on a cache line goes through the driver's bounce buffer, several commands
//! and a copy per page).

use alloc::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use inference::OutOfMemory;

/// The alignment: a 4 KiB page, a multiple of every cache line.
pub const ALIGN: usize = 4096;

/// `len` zeroed bytes at an [`ALIGN`]-aligned address.
#[derive(Debug)]
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is owned memory, like a `Box<[u8]>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access hands out `&[u8]` only.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocate `len` zeroed bytes; running out is an error naming `what`.
    pub fn zeroed(len: usize, what: &'static str) -> Result<AlignedBuf, OutOfMemory> {
        if len == 0 {
            // No allocation: an aligned address that is never read or written (as `dangling`).
            let ptr = NonNull::new(core::ptr::without_provenance_mut::<u8>(ALIGN));
            return Ok(AlignedBuf {
                ptr: ptr.unwrap_or(NonNull::dangling()),
                len,
            });
        }
        let layout = Self::layout(len);
        // SAFETY: `layout` has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) });
        let ptr = ptr.ok_or(OutOfMemory { what, bytes: len })?;
        Ok(AlignedBuf { ptr, len })
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, ALIGN)
            .unwrap_or_else(|_| handle_alloc_error(Layout::new::<u8>()))
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialised (zeroed) bytes at `ptr`, owned by `self`.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, borrowed mutably through `self`.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with this layout, freed once.
            unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        for len in [0usize, 1, 512, 256 << 10] {
            let mut b = AlignedBuf::zeroed(len, "test").unwrap();
            assert_eq!(b.len(), len);
            assert!((b.as_mut_ptr() as usize).is_multiple_of(ALIGN));
            assert!(b.iter().all(|&x| x == 0));
            if len > 0 {
                b[len - 1] = 7;
                assert_eq!(b[len - 1], 7);
            }
        }
    }
}
