//! The heap: embedded-alloc's linked-list allocator over all RAM after the kernel image, with a
//! high-water mark, and the size of the last request it could not satisfy (so that a failed
//! infallible allocation, which panics, is reported with what was asked and the heap's figures).

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};
use embedded_alloc::LlffHeap;

struct Tracking {
    heap: LlffHeap,
    high: AtomicUsize,
    /// Bytes of the last request that failed (0: none has).
    failed: AtomicUsize,
}

// SAFETY: forwards to LlffHeap (a correct allocator, locked by critical-section) and only adds a
// counter.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { self.heap.alloc(layout) };
        if p.is_null() {
            self.failed.store(layout.size().max(1), Ordering::Relaxed);
        } else {
            self.high.fetch_max(self.heap.used(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { self.heap.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static HEAP: Tracking = Tracking {
    heap: LlffHeap::empty(),
    high: AtomicUsize::new(0),
    failed: AtomicUsize::new(0),
};

/// Give the allocator `[start, start + size)`.
///
/// # Safety
/// Once, before any allocation; the range must be RAM used by nothing else.
pub unsafe fn init(start: usize, size: usize) {
    // SAFETY: the caller's promise.
    unsafe { HEAP.heap.init(start, size) }
}

pub fn free() -> usize {
    HEAP.heap.free()
}

pub fn high_water() -> usize {
    HEAP.high.load(Ordering::Relaxed)
}

pub fn used() -> usize {
    HEAP.heap.used()
}

/// Bytes of the last allocation the heap refused, if one was.
pub fn failed_request() -> Option<usize> {
    match HEAP.failed.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

/// The heap's figures for a message: `heap: U used, F free, high-water H (bytes)`.
pub fn figures() -> Figures {
    Figures
}

/// See [`figures`].
#[derive(Debug)]
pub struct Figures;

impl core::fmt::Display for Figures {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "heap: {} used, {} free, high-water {} (bytes)",
            used(),
            free(),
            high_water()
        )
    }
}
