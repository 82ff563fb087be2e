//! Time from the architecture's timer: nanoseconds since boot, and busy waits for drivers.

use crate::arch::{Arch, Cpu};
use core::sync::atomic::{AtomicU64, Ordering};

/// Timer frequency when the CPU does not report it (the device tree's, else QEMU virt's 10 MHz).
static TIMEBASE: AtomicU64 = AtomicU64::new(10_000_000);

/// The device tree's figure, 0 if it gave none (the self-test's clocks check compares it).
static STATED: AtomicU64 = AtomicU64::new(0);

/// Take the device tree's timer frequency, for CPUs that do not report theirs.
pub fn set_timebase(hz: u64) {
    if hz > 0 {
        TIMEBASE.store(hz, Ordering::Relaxed);
        STATED.store(hz, Ordering::Relaxed);
    }
}

/// The timer frequency the device tree states, if it stated one.
pub fn stated_hz() -> Option<u64> {
    Some(STATED.load(Ordering::Relaxed)).filter(|&h| h > 0)
}

/// The timer frequency time is counted with: the CPU's, else the device tree's, else 10 MHz.
pub fn hz() -> u64 {
    Cpu::counter_hz().unwrap_or_else(|| TIMEBASE.load(Ordering::Relaxed))
}

/// Nanoseconds since boot.
pub fn now_ns() -> u64 {
    (Cpu::counter() as u128 * 1_000_000_000 / hz() as u128) as u64
}

/// Microseconds since boot.
pub fn micros() -> u64 {
    now_ns() / 1000
}

/// Busy-wait `us` microseconds.
pub fn wait_us(us: u32) {
    let end = now_ns() + us as u64 * 1000;
    while now_ns() < end {
        core::hint::spin_loop();
    }
}
