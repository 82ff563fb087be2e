//! Per-core instruction counts for the benchmark. QEMU's instruction counter under `-icount` counts
//! all vCPUs together, so the N-core split is measured on one core instead: [`MeasuredPool`] runs
//! each worker's share of every job in turn and counts each share. The critical path of a real
//! N-core run is then the work outside jobs plus, for every job, its largest share.

use core::sync::atomic::{AtomicU64, Ordering};
use inference::parallel::{Parallel, MAX_WORKERS};

/// A pool that reports `n` workers but runs their shares one after another, counting each.
pub struct MeasuredPool<'a> {
    n: usize,
    /// The counter and its width in bits.
    read: &'a (dyn Fn() -> u64 + Sync),
    bits: u32,
    per_worker: [AtomicU64; MAX_WORKERS],
    /// Sum over jobs of the largest share.
    critical: AtomicU64,
    /// Sum over jobs of all shares.
    in_jobs: AtomicU64,
}

impl core::fmt::Debug for MeasuredPool<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MeasuredPool")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

/// Counts of a [`MeasuredPool`] so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shares {
    pub per_worker: [u64; MAX_WORKERS],
    pub critical: u64,
    pub in_jobs: u64,
}

impl<'a> MeasuredPool<'a> {
    pub fn new(n: usize, read: &'a (dyn Fn() -> u64 + Sync), bits: u32) -> Self {
        Self {
            n: n.clamp(1, MAX_WORKERS),
            read,
            bits,
            per_worker: core::array::from_fn(|_| AtomicU64::new(0)),
            critical: AtomicU64::new(0),
            in_jobs: AtomicU64::new(0),
        }
    }

    pub fn shares(&self) -> Shares {
        Shares {
            per_worker: core::array::from_fn(|i| self.per_worker[i].load(Ordering::Relaxed)),
            critical: self.critical.load(Ordering::Relaxed),
            in_jobs: self.in_jobs.load(Ordering::Relaxed),
        }
    }

    fn delta(&self, a: u64, b: u64) -> u64 {
        let mask = if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        };
        b.wrapping_sub(a) & mask
    }
}

impl Parallel for MeasuredPool<'_> {
    fn workers(&self) -> usize {
        self.n
    }

    fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        let (mut max, mut sum) = (0, 0);
        for w in 0..self.n {
            let a = (self.read)();
            job(w);
            let d = self.delta(a, (self.read)());
            self.per_worker[w].fetch_add(d, Ordering::Relaxed);
            max = max.max(d);
            sum += d;
        }
        self.critical.fetch_add(max, Ordering::Relaxed);
        self.in_jobs.fetch_add(sum, Ordering::Relaxed);
    }
}

/// A retired-instruction count extended to 64 bits: sampled after every forward pass (well under
/// one wrap of a 32-bit counter), adding the wrapping difference each time.
pub struct InstructionCounter<'a> {
    read: Option<(&'a dyn Fn() -> u64, u32)>,
    last: core::cell::Cell<u64>,
    total: core::cell::Cell<u64>,
}

impl core::fmt::Debug for InstructionCounter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "InstructionCounter({:?})", self.total())
    }
}

impl<'a> InstructionCounter<'a> {
    pub fn new(read: Option<(&'a dyn Fn() -> u64, u32)>) -> Self {
        let last = read.map(|(f, _)| f()).unwrap_or(0);
        Self {
            read,
            last: core::cell::Cell::new(last),
            total: core::cell::Cell::new(0),
        }
    }
    pub fn sample(&self) {
        if let Some((f, bits)) = self.read {
            let now = f();
            let mask = if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            self.total
                .set(self.total.get() + (now.wrapping_sub(self.last.get()) & mask));
            self.last.set(now);
        }
    }
    /// Instructions counted so far (`None` without a counter).
    pub fn total(&self) -> Option<u64> {
        self.read.map(|_| self.total.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU64;

    #[test]
    fn shares_add_up() {
        static CLOCK: AtomicU64 = AtomicU64::new(0);
        let read = || CLOCK.load(Ordering::Relaxed);
        let p = MeasuredPool::new(3, &read, 64);
        // Worker w "executes" 10 * (w + 1) instructions per job.
        let job = |w: usize| {
            CLOCK.fetch_add(10 * (w as u64 + 1), Ordering::Relaxed);
        };
        p.run(&job);
        p.run(&job);
        let s = p.shares();
        assert_eq!(&s.per_worker[..3], &[20, 40, 60]);
        assert_eq!(s.critical, 60);
        assert_eq!(s.in_jobs, 120);
    }
}
