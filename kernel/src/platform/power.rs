//! Stopping: power off with an exit status (QEMU reports it as its own exit status).

use crate::arch::{Arch, Cpu};
use crate::board::{EXIT, QEMU, TEST_FINISHER};

/// Power off with `code` (0 = success). Never returns.
pub fn exit(code: u32) -> ! {
    if QEMU {
        if let Some(finisher) = TEST_FINISHER {
            let v: u32 = if code == 0 {
                0x5555
            } else {
                0x3333 | (code << 16)
            };
            // SAFETY: QEMU's test finisher (board description); writing it ends the emulation
            // with the status.
            unsafe { core::ptr::write_volatile(finisher as *mut u32, v) };
            // QEMU only queues the shutdown: the core runs on until its main loop takes it. A
            // power-off through the firmware now (OpenSBI's syscon-poweroff writes the finisher's
            // "pass") could replace the status before then, so this core just waits.
            loop {
                Cpu::wait();
            }
        } else {
            // Built for QEMU: report the status whatever the board does on hardware.
            Cpu::power_off(Cpu::QEMU_EXIT, code);
        }
    }
    Cpu::power_off(EXIT, code);
    loop {
        Cpu::wait();
    }
}
