//! The serial console: `print!`/`println!` to the board's UART, and a lock-free emergency path for
//! panics and exceptions.

use core::fmt::{self, Write};
use drivers::uart::pl011::Pl011;
use drivers::uart::Uart;

static UART: spin::Mutex<Option<Pl011>> = spin::Mutex::new(None);

struct Writer<'a>(&'a mut Pl011);

impl Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                self.0.write_byte(b'\r');
            }
            self.0.write_byte(b);
        }
        Ok(())
    }
}

/// Bring up the board's UART at 115200 baud.
pub fn init() {
    // SAFETY: UART_BASE is the board's PL011, mapped as device memory; only this module uses it.
    let mut u = unsafe { Pl011::new(crate::board::UART_BASE) };
    u.init(crate::board::UART_CLOCK_HZ, 115_200);
    *UART.lock() = Some(u);
}

pub fn print(args: fmt::Arguments<'_>) {
    if let Some(u) = UART.lock().as_mut() {
        let _ = Writer(u).write_fmt(args);
    }
}

/// Raw bytes (token text).
pub fn write_bytes(b: &[u8]) {
    if let Some(u) = UART.lock().as_mut() {
        for &c in b {
            if c == b'\n' {
                u.write_byte(b'\r');
            }
            u.write_byte(c);
        }
    }
}

/// A byte from the serial line, if one is waiting.
pub fn read_byte() -> Option<u8> {
    UART.lock().as_mut().and_then(|u| u.read_byte())
}

/// Print without taking the lock (the lock holder may be the code that faulted).
pub fn emergency(args: fmt::Arguments<'_>) {
    // SAFETY: a second handle to the same UART; used only when the kernel is about to stop, so
    // interleaving with a lock holder at worst garbles output.
    let mut u = unsafe { Pl011::new(crate::board::UART_BASE) };
    let _ = Writer(&mut u).write_fmt(args);
}

#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::print(format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! println {
    () => { $crate::console::print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::print(format_args!("{}\n", format_args!($($arg)*))) };
}
