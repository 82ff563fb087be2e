//! A global allocator that counts: the bytes live now and the most live since [`bounded`] began,
//! so each fuzz body can check that one run never allocates more than its target's stated bound
//! (arbitrary input must not make a parser reserve what a header claims).
//!
//! Hand-written rather than taken from a crate (e.g. `stats_alloc`) because it is twenty lines
//! and the bound check needs the peak, which those report only as totals.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting.
#[derive(Debug)]
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is passed on to `System` unchanged; only counters are updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `layout` is `System::alloc`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by `System`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Run `f` and panic (a crash the fuzzer keeps) if the bytes it allocated at its peak, above what
/// was live when it began, exceed `bound`. `what` names the target in the message.
pub fn bounded<R>(what: &str, bound: usize, f: impl FnOnce() -> R) -> R {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let r = f();
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    assert!(
        peak <= bound,
        "{what}: one run allocated {peak} bytes at its peak, over the stated bound of {bound}"
    );
    r
}

/// The peak bytes allocated by `f` above what was live when it began (for tests of the bounds).
pub fn peak_of(f: impl FnOnce()) -> usize {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    f();
    PEAK.load(Relaxed).saturating_sub(base)
}
