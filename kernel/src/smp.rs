//! The worker pool on all cores. Secondary cores enter through `_start` (PSCI CPU_ON on `virt`, the
//! spin table on the Raspberry Pi), set up their stack and MMU, and wait in [`worker_loop`] for a
//! job: core 0 publishes it and bumps an epoch (`sev`), each worker runs it for its index and counts
//! itself done (`sev`), and core 0 waits for all before returning. No thread is created per job and
//! nothing is allocated.

use crate::arch::{Arch, Cpu};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use inference::parallel::{Parallel, MAX_WORKERS};

type Job = *const (dyn Fn(usize) + Sync);

struct Slot(UnsafeCell<Option<Job>>);
// SAFETY: written only by core 0 while no job is running (all workers done), read by workers only
// after the epoch's Acquire load that follows the write's Release store.
unsafe impl Sync for Slot {}

static JOB: Slot = Slot(UnsafeCell::new(None));
static EPOCH: AtomicUsize = AtomicUsize::new(0);
static DONE: AtomicUsize = AtomicUsize::new(0);
/// Cores that have reached the worker loop.
static ONLINE: AtomicUsize = AtomicUsize::new(1);
/// Workers taking part in jobs (core 0 included).
static ACTIVE: AtomicUsize = AtomicUsize::new(1);
/// One bit per core id as each core reads it once in Rust ([`Arch::core_id`]).
static IDS: AtomicU64 = AtomicU64::new(0);
/// Set if a core's id in Rust differs from the one it read at entry.
static ID_MOVED: AtomicBool = AtomicBool::new(false);

type Service = *const (dyn Fn() -> bool + Sync);
struct ServiceSlot(UnsafeCell<Option<Service>>);
// SAFETY: written by core 0 only while no core serves (SERVING is NONE and IN_SERVICE false), read
// by the serving core only between its SeqCst check of SERVING and its clearing of IN_SERVICE.
unsafe impl Sync for ServiceSlot {}
static SERVICE: ServiceSlot = ServiceSlot(UnsafeCell::new(None));
/// Worker index running the service loop (`NONE`: none).
static SERVING: AtomicUsize = AtomicUsize::new(NONE);
const NONE: usize = usize::MAX;
/// The serving core is inside a call of the service.
static IN_SERVICE: AtomicBool = AtomicBool::new(false);
/// ACTIVE before the service took its core.
static ACTIVE_BEFORE: AtomicUsize = AtomicUsize::new(0);

/// The pool (a handle to the statics above).
#[derive(Debug, Clone, Copy)]
pub struct CorePool;

impl CorePool {
    /// Cores online (core 0 plus those that reached the loop).
    pub fn online() -> usize {
        ONLINE.load(Ordering::Acquire)
    }

    /// Use `n` cores (at most those online); returns how many will work.
    pub fn set_active(n: usize) -> usize {
        let n = n.clamp(1, Self::online().min(MAX_WORKERS));
        ACTIVE.store(n, Ordering::Release);
        n
    }

    /// Take the last working core out of the jobs and have it call `serve` in a loop (sleeping when
    /// it returns `false`, until woken by `sev`/an IPI), e.g. to serve the card while the others
    /// compute. Returns that core's worker index, or `None` with fewer than two working cores or a
    /// service already running.
    ///
    /// # Safety
    /// [`CorePool::stop_service`] must be called before `serve` is dropped; call both from core 0
    /// between jobs.
    pub unsafe fn start_service(serve: &(dyn Fn() -> bool + Sync)) -> Option<usize> {
        let n = ACTIVE.load(Ordering::Acquire);
        if n < 2 || SERVING.load(Ordering::SeqCst) != NONE {
            return None;
        }
        // SAFETY: only the lifetime is erased; the caller promises stop_service before the
        // closure goes, and stop_service waits until no core is inside it.
        let ptr: Service = unsafe {
            core::mem::transmute::<&(dyn Fn() -> bool + Sync), &'static (dyn Fn() -> bool + Sync)>(
                serve,
            )
        };
        // SAFETY: no core serves now (SERVING is NONE), so nobody reads the slot.
        unsafe { *SERVICE.0.get() = Some(ptr) };
        ACTIVE_BEFORE.store(n, Ordering::Release);
        ACTIVE.store(n - 1, Ordering::Release);
        SERVING.store(n - 1, Ordering::SeqCst);
        Cpu::wake();
        Some(n - 1)
    }

    /// Stop the service started by [`CorePool::start_service`] and give its core back to the jobs.
    pub fn stop_service() {
        if SERVING.swap(NONE, Ordering::SeqCst) == NONE {
            return;
        }
        Cpu::wake();
        while IN_SERVICE.load(Ordering::SeqCst) {
            core::hint::spin_loop();
        }
        // SAFETY: no core serves any more (SERVING is NONE and the serving core is out).
        unsafe { *SERVICE.0.get() = None };
        ACTIVE.store(ACTIVE_BEFORE.load(Ordering::Acquire), Ordering::Release);
    }

    /// Record this core's id as it reads it now, against `at_entry`, the one `boot.s` read before
    /// leaving EL2 (at EL1, MPIDR_EL1 reads return VMPIDR_EL2).
    pub fn note_id(at_entry: usize) {
        let id = Cpu::core_id();
        if id != at_entry {
            ID_MOVED.store(true, Ordering::Release);
        }
        IDS.fetch_or(1u64.checked_shl(id as u32).unwrap_or(0), Ordering::AcqRel);
    }

    /// Whether the `online` cores read the ids 0 to `online - 1`, each its own, the same as at
    /// entry: the spin lock's owner and the workers' indices rest on that.
    pub fn ids_ok(online: usize) -> bool {
        let want = 1u64.checked_shl(online as u32).map_or(u64::MAX, |b| b - 1);
        IDS.load(Ordering::Acquire) == want && !ID_MOVED.load(Ordering::Acquire)
    }

    /// Wait (boundedly) until `expected` cores are online; returns how many are.
    pub fn wait_online(expected: usize, spins: usize) -> usize {
        for _ in 0..spins {
            if Self::online() >= expected {
                break;
            }
            core::hint::spin_loop();
        }
        Self::online()
    }
}

/// A secondary core's life: announce itself, then run jobs forever.
pub fn worker_loop(core: usize) -> ! {
    // Counters and wake-ups first: core 0 may publish a job as soon as this core is counted.
    Cpu::core_init();
    CorePool::note_id(core);
    let index = ONLINE.fetch_add(1, Ordering::AcqRel);
    let mut seen = EPOCH.load(Ordering::Acquire);
    loop {
        if SERVING.load(Ordering::SeqCst) == index {
            IN_SERVICE.store(true, Ordering::SeqCst);
            // Checked again after announcing: stop_service clears SERVING, then waits for
            // IN_SERVICE to drop, so the closure is never called after it returns.
            if SERVING.load(Ordering::SeqCst) == index {
                // SAFETY: set before SERVING named this core, cleared only after it stops.
                if let Some(f) = unsafe { *SERVICE.0.get() } {
                    // SAFETY: as above; the closure outlives the service.
                    if !unsafe { (*f)() } {
                        Cpu::wait();
                    }
                }
            }
            IN_SERVICE.store(false, Ordering::SeqCst);
            // Jobs published while serving were not this core's: do not run them afterwards.
            seen = EPOCH.load(Ordering::Acquire);
            continue;
        }
        let e = EPOCH.load(Ordering::Acquire);
        if e == seen {
            Cpu::wait();
            continue;
        }
        seen = e;
        if index < ACTIVE.load(Ordering::Acquire) {
            // SAFETY: core 0 stored the job before bumping the epoch (Release/Acquire) and keeps it
            // alive until DONE counts this worker.
            if let Some(job) = unsafe { *JOB.0.get() } {
                // SAFETY: as above.
                unsafe { (*job)(index) };
            }
            DONE.fetch_add(1, Ordering::AcqRel);
            Cpu::wake();
        }
    }
}

impl Parallel for CorePool {
    fn workers(&self) -> usize {
        ACTIVE.load(Ordering::Acquire)
    }

    fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        let n = self.workers();
        if n <= 1 {
            return job(0);
        }
        // SAFETY: only the lifetime is erased; the pointer is used by workers only until DONE
        // reaches n - 1, which this function waits for before returning.
        let ptr: Job = unsafe {
            core::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(job)
        };
        DONE.store(0, Ordering::Release);
        // SAFETY: no job is running (the previous run waited for all workers).
        unsafe { *JOB.0.get() = Some(ptr) };
        EPOCH.fetch_add(1, Ordering::AcqRel);
        Cpu::wake();
        job(0);
        while DONE.load(Ordering::Acquire) < n - 1 {
            Cpu::wait();
        }
    }
}
