//! Stopping: power off with an exit status (QEMU reports it as its own exit status).

use crate::board::{Exit, EXIT};

/// Power off with `code` (0 = success). Never returns.
pub fn exit(code: u32) -> ! {
    match EXIT {
        Exit::Semihosting => {
            crate::arch::semihosting_exit(code);
            crate::arch::psci_system_off();
        }
        Exit::PsciHvc => crate::arch::psci_system_off(),
        Exit::SbiSrst => {}
    }
    loop {
        crate::arch::wait();
    }
}
