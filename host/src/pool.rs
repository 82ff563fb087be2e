//! A persistent worker pool for the PC runner: `threads - 1` threads and the calling thread as
//! worker 0. No thread is created per matrix product. A token runs a few hundred short jobs, so
//! a job is published with an atomic epoch that the workers watch for a short while (spinning)
//! before they park on a condition variable; the caller likewise spins briefly for the last worker
//! before it sleeps. A futex wake and sleep per job would cost more than many of the jobs.

use inference::parallel::Parallel;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

type Job = *const (dyn Fn(usize) + Sync);

/// A job pointer handed to the workers. Valid only between publication and the last worker's
/// completion, which `Pool::run` waits for.
#[derive(Clone, Copy)]
struct JobPtr(Job);
// SAFETY: the pointee is `Sync`; the pointer is only dereferenced while `Pool::run` keeps it alive.
unsafe impl Send for JobPtr {}

/// Spins (with the CPU's spin-wait hint) before parking: a few microseconds.
const SPINS: u32 = 2_000;

struct Slot {
    job: Option<JobPtr>,
    quit: bool,
}

struct Shared {
    /// Bumped once per job (after the job is in `slot`).
    epoch: AtomicU64,
    /// Workers still running the current job.
    remaining: AtomicUsize,
    slot: Mutex<Slot>,
    start: Condvar,
    done: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Spin until `ready()`; false if it did not become true in [`SPINS`] tries.
fn spin(ready: impl Fn() -> bool) -> bool {
    for _ in 0..SPINS {
        if ready() {
            return true;
        }
        std::hint::spin_loop();
    }
    ready()
}

pub struct Pool {
    workers: usize,
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn new(workers: usize) -> Pool {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            remaining: AtomicUsize::new(0),
            slot: Mutex::new(Slot {
                job: None,
                quit: false,
            }),
            start: Condvar::new(),
            done: Condvar::new(),
        });
        let handles = (1..workers)
            .map(|w| {
                let sh = Arc::clone(&shared);
                std::thread::spawn(move || worker(w, &sh))
            })
            .collect();
        Pool {
            workers: workers.max(1),
            shared,
            handles,
        }
    }
}

fn worker(w: usize, sh: &Shared) {
    let mut seen = 0u64;
    loop {
        let moved = || sh.epoch.load(Ordering::Acquire) != seen;
        let job = {
            let quick = spin(moved);
            let mut slot = sh.lock();
            if !quick {
                // Checked under the lock the publisher takes to notify: no wake-up is lost.
                while !moved() && !slot.quit {
                    slot = sh.start.wait(slot).unwrap_or_else(|e| e.into_inner());
                }
            }
            if slot.quit {
                return;
            }
            seen = sh.epoch.load(Ordering::Acquire);
            slot.job
        };
        if let Some(JobPtr(p)) = job {
            // SAFETY: `Pool::run` keeps the job alive until every worker has finished it.
            unsafe { (*p)(w) };
        }
        if sh.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The caller may be parked: notify under the lock it checks `remaining` with.
            let _slot = sh.lock();
            sh.done.notify_one();
        }
    }
}

impl Parallel for Pool {
    fn workers(&self) -> usize {
        self.workers
    }

    fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        if self.workers == 1 {
            return job(0);
        }
        // SAFETY: only the lifetime is erased; this function does not return before every worker
        // has finished with the pointer (`remaining` reaches 0 below).
        let ptr: Job = unsafe {
            std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(job)
        };
        let sh = &self.shared;
        {
            let mut slot = sh.lock();
            slot.job = Some(JobPtr(ptr));
            sh.remaining.store(self.workers - 1, Ordering::Release);
            sh.epoch.fetch_add(1, Ordering::AcqRel);
            sh.start.notify_all();
        }
        job(0);
        let finished = || sh.remaining.load(Ordering::Acquire) == 0;
        if !spin(finished) {
            let mut slot = sh.lock();
            while !finished() {
                slot = sh.done.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
        }
        sh.lock().job = None;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.lock().quit = true;
        self.shared.start.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
