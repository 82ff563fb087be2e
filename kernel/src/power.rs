//! Stopping: power off with an exit status (QEMU reports it as its own exit status).

use crate::board::{Exit, EXIT};

/// Power off with `code` (0 = success). Never returns.
pub fn exit(code: u32) -> ! {
    if crate::board::QEMU && crate::board::TEST_FINISHER != 0 {
        let v: u32 = if code == 0 {
            0x5555
        } else {
            0x3333 | (code << 16)
        };
        // SAFETY: QEMU's test finisher (board description); writing it ends the emulation with
        // the status.
        unsafe { core::ptr::write_volatile(crate::board::TEST_FINISHER as *mut u32, v) };
    }
    if crate::board::QEMU && EXIT != Exit::Semihosting && crate::board::TEST_FINISHER == 0 {
        // Built for QEMU: semihosting reports the status whatever the board does on hardware.
        crate::arch::semihosting_exit(code);
    }
    match EXIT {
        Exit::Semihosting => {
            crate::arch::semihosting_exit(code);
            crate::arch::psci_system_off();
        }
        Exit::PsciHvc => crate::arch::psci_system_off(),
        Exit::SbiSrst => crate::arch::sbi_system_reset(code),
        Exit::Halt => {}
    }
    loop {
        crate::arch::wait();
    }
}
