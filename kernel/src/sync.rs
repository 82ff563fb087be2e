//! `critical-section` for this kernel: interrupts masked on this core, plus a global spin lock
//! (re-entrant per core) so that sections on different cores exclude each other.

use crate::arch::{Arch, Cpu};
use core::sync::atomic::{AtomicUsize, Ordering};

struct KernelCs;
critical_section::set_impl!(KernelCs);

const FREE: usize = usize::MAX;
/// Set in the restore state when the section was already held by this core.
const NESTED: u64 = 1 << 63;
static OWNER: AtomicUsize = AtomicUsize::new(FREE);

// SAFETY: acquire masks interrupts and takes the lock (or notes re-entry); release undoes exactly
// that, in order.
unsafe impl critical_section::Impl for KernelCs {
    unsafe fn acquire() -> u64 {
        let state = Cpu::irq_save();
        let me = Cpu::core_id();
        if OWNER.load(Ordering::Relaxed) == me {
            return state | NESTED;
        }
        while OWNER
            .compare_exchange_weak(FREE, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        state
    }

    unsafe fn release(state: u64) {
        if state & NESTED == 0 {
            OWNER.store(FREE, Ordering::Release);
        }
        Cpu::irq_restore(state & !NESTED);
    }
}
