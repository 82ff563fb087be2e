//! Work splitting across cores. The kernel's worker pool (one parked worker per core, woken by a
//! barrier) and the host's thread pool implement [`Parallel`]; the forward pass hands it row ranges
//! with [`par_chunks`], which gives every worker a disjoint part of the output and its own scratch.
//!
//! Results never depend on the number of workers: each output element is computed by exactly the
//! same code whichever worker computes it.

use core::cell::UnsafeCell;
use core::ops::Range;

/// Most workers a pool may have.
pub const MAX_WORKERS: usize = 16;

/// Runs one job on every worker and returns when all are done.
pub trait Parallel: Sync {
    /// Number of workers (at least 1, at most [`MAX_WORKERS`]).
    fn workers(&self) -> usize;
    /// Call `job(w)` once for each worker `w` in `0..workers()`, concurrently, and wait for all.
    fn run(&self, job: &(dyn Fn(usize) + Sync));
}

/// Everything on the calling core.
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleThread;

impl Parallel for SingleThread {
    fn workers(&self) -> usize {
        1
    }
    fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        job(0)
    }
}

/// The part of `0..n` (in units of `align`) that worker `w` of `workers` takes: contiguous, balanced.
pub fn split_range(n: usize, align: usize, w: usize, workers: usize) -> Range<usize> {
    let units = n.div_ceil(align.max(1));
    let per = units / workers;
    let extra = units % workers;
    let start = w * per + w.min(extra);
    let len = per + usize::from(w < extra);
    (start * align).min(n)..((start + len) * align).min(n)
}

/// A slice shared among workers that each take a disjoint part.
struct Shared<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: workers only touch disjoint ranges (see `part`), so sharing the pointer is sound for T: Send.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// # Safety
    /// No two live results of `part` may overlap, and the original slice must outlive them.
    // Handing out disjoint mutable parts through a shared handle is the point of this type; the
    // contract above makes it sound.
    #[allow(clippy::mut_from_ref)]
    unsafe fn part(&self, r: Range<usize>) -> &mut [T] {
        assert!(r.start <= r.end && r.end <= self.len);
        // SAFETY: in bounds (checked above); disjointness is the caller's promise.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(r.start), r.len()) }
    }
}

/// Split `out` into one contiguous part per worker (in units of `align` elements) and call
/// `f(range, part, scratch)` on each worker with its part and its own scratch buffer
/// (`scratch[w]`). The first error (lowest worker) is returned.
pub fn par_chunks<P, T, S, E, F>(
    pool: &P,
    out: &mut [T],
    align: usize,
    scratch: &mut [S],
    f: F,
) -> Result<(), E>
where
    P: Parallel + ?Sized,
    T: Send,
    S: Send,
    E: Send,
    F: Fn(Range<usize>, &mut [T], &mut S) -> Result<(), E> + Sync,
{
    let workers = pool.workers().clamp(1, MAX_WORKERS).min(scratch.len());
    let n = out.len();
    if workers <= 1 {
        return match scratch.first_mut() {
            Some(s) => f(0..n, out, s),
            None => Ok(()),
        };
    }
    let outs = Shared {
        ptr: out.as_mut_ptr(),
        len: n,
    };
    let scr = Shared {
        ptr: scratch.as_mut_ptr(),
        len: scratch.len(),
    };
    let errors: [UnsafeCell<Option<E>>; MAX_WORKERS] =
        core::array::from_fn(|_| UnsafeCell::new(None));
    struct Errs<'a, E>(&'a [UnsafeCell<Option<E>>]);
    // SAFETY: worker w only writes errors[w].
    unsafe impl<E: Send> Sync for Errs<'_, E> {}
    impl<E> Errs<'_, E> {
        /// # Safety
        /// Only worker `w` may call this with `w`, and nobody reads until the run is over.
        unsafe fn set(&self, w: usize, e: E) {
            // SAFETY: exclusive to worker w by the caller's promise.
            unsafe { *self.0[w].get() = Some(e) };
        }
    }
    let errs = Errs(&errors);
    let errs = &errs;
    pool.run(&|w| {
        if w >= workers {
            return;
        }
        let r = split_range(n, align, w, workers);
        // SAFETY: split_range gives disjoint ranges for distinct w, scratch index w is unique, and
        // `out`/`scratch` outlive `run`, which returns only after every worker finished.
        let (part, s) = unsafe { (outs.part(r.clone()), &mut scr.part(w..w + 1)[0]) };
        if let Err(e) = f(r, part, s) {
            // SAFETY: only worker w touches errors[w], and nobody reads until `run` returned.
            unsafe { errs.set(w, e) };
        }
    });
    for e in errors {
        if let Some(e) = e.into_inner() {
            return Err(e);
        }
    }
    Ok(())
}
