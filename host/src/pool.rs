//! A persistent worker pool for the PC runner: `threads - 1` threads parked on a condition variable,
//! woken per job; the calling thread is worker 0. No thread is created per matrix product.

use inference::parallel::Parallel;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

type Job = *const (dyn Fn(usize) + Sync);

/// A job pointer handed to the workers. Valid only between publication and the last worker's
/// completion, which `Pool::run` waits for.
#[derive(Clone, Copy)]
struct JobPtr(Job);
// SAFETY: the pointee is `Sync`, and `run` keeps it alive until every worker is done with it.
unsafe impl Send for JobPtr {}

struct State {
    epoch: u64,
    job: Option<JobPtr>,
    remaining: usize,
    quit: bool,
}

struct Shared {
    state: Mutex<State>,
    start: Condvar,
    done: Condvar,
}

pub struct Pool {
    workers: usize,
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn new(workers: usize) -> Pool {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                epoch: 0,
                job: None,
                remaining: 0,
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
        let job = {
            let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
            while st.epoch == seen && !st.quit {
                st = sh.start.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.quit {
                return;
            }
            seen = st.epoch;
            st.job
        };
        if let Some(JobPtr(p)) = job {
            // SAFETY: `run` published this pointer for the current epoch and waits for `remaining`
            // to reach zero before returning, so the closure is alive here.
            unsafe { (*p)(w) };
        }
        let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        st.remaining -= 1;
        if st.remaining == 0 {
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
        // SAFETY: only the lifetime is erased; the pointer is withdrawn before this function returns
        // and every worker has finished with it by then (see the wait below).
        let ptr: Job = unsafe {
            std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(job)
        };
        {
            let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            st.job = Some(JobPtr(ptr));
            st.remaining = self.workers - 1;
            st.epoch += 1;
            self.shared.start.notify_all();
        }
        job(0);
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.remaining > 0 {
            st = self.shared.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.job = None;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .quit = true;
        self.shared.start.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
