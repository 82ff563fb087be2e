//! Stopping: power off with an exit status (QEMU reports it as its own exit status).

use crate::board::{Exit, EXIT};

/// Power off with `code` (0 = success). Never returns.
pub fn exit(code: u32) -> ! {
    if crate::board::QEMU && EXIT != Exit::Semihosting {
        // Built for QEMU: semihosting reports the status whatever the board does on hardware.
        crate::arch::semihosting_exit(code);
    }
    match EXIT {
        Exit::Semihosting => {
            crate::arch::semihosting_exit(code);
            crate::arch::psci_system_off();
        }
        Exit::PsciHvc => crate::arch::psci_system_off(),
        Exit::SbiSrst | Exit::Halt => {}
    }
    loop {
        crate::arch::wait();
    }
}
