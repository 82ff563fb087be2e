//! The serial console: `print!`/`println!` to the board's UART, and a lock-free emergency path for
//! panics and exceptions.

use crate::board::{UartKind, UART, UART_BASE, UART_CLOCK_HZ, UART_STRIDE, UART_VARIANT};
use core::fmt::{self, Write};
use drivers::uart::ns16550::Ns16550;
use drivers::uart::pl011::Pl011;
use drivers::uart::Uart;

/// The board's UART.
enum Port {
    Pl011(Pl011),
    Ns16550(Ns16550),
}

impl Port {
    /// # Safety
    /// Only one `Port` may be in use at a time, except in [`emergency`].
    unsafe fn board() -> Port {
        // SAFETY: UART_BASE is the board's UART of kind UART, mapped as device memory.
        unsafe {
            match UART {
                UartKind::Pl011 => Port::Pl011(Pl011::new(UART_BASE)),
                UartKind::Ns16550 => {
                    Port::Ns16550(Ns16550::new(UART_BASE, UART_STRIDE).with_variant(UART_VARIANT))
                }
            }
        }
    }
}

impl Uart for Port {
    fn write_byte(&mut self, b: u8) {
        match self {
            Port::Pl011(u) => u.write_byte(b),
            Port::Ns16550(u) => u.write_byte(b),
        }
    }
    fn read_byte(&mut self) -> Option<u8> {
        match self {
            Port::Pl011(u) => u.read_byte(),
            Port::Ns16550(u) => u.read_byte(),
        }
    }
}

static PORT: spin::Mutex<Option<Port>> = spin::Mutex::new(None);

struct Writer<'a>(&'a mut Port);

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

/// The serial line's rate.
const BAUD: u32 = 115_200;

/// Bring up the board's UART at [`BAUD`].
pub fn init() {
    // SAFETY: the only Port besides emergency use.
    let mut u = unsafe { Port::board() };
    match &mut u {
        Port::Pl011(p) => p.init(UART_CLOCK_HZ, BAUD),
        Port::Ns16550(p) => {
            // A DesignWare UART busy throughout keeps the boot loader's line settings, which
            // are 115200 8N1 on every board here: printing goes on either way.
            let _ = p.init(UART_CLOCK_HZ, BAUD);
        }
    }
    *PORT.lock() = Some(u);
}

/// On boards whose firmware sets the UART's clock (the Pi: `init_uart_clock` in config.txt), say
/// which clock the divisor assumes: a mismatch shows as garbage or silence at 115200 baud.
pub fn describe() {
    if crate::board::GPIO_BASE.is_some() {
        let kind = match UART {
            UartKind::Pl011 => "PL011",
            UartKind::Ns16550 => "NS16550A",
        };
        crate::println!(
            "uart: {kind} at {UART_BASE:#x}, {BAUD} baud from a {} MHz clock (board file; config.txt's init_uart_clock)",
            UART_CLOCK_HZ / 1_000_000
        );
    }
}

pub fn print(args: fmt::Arguments<'_>) {
    if let Some(u) = PORT.lock().as_mut() {
        let _ = Writer(u).write_fmt(args);
    }
}

/// Raw bytes (token text).
pub fn write_bytes(b: &[u8]) {
    if let Some(u) = PORT.lock().as_mut() {
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
    PORT.lock().as_mut().and_then(|u| u.read_byte())
}

/// Print without taking the lock (the lock holder may be the code that faulted).
pub fn emergency(args: fmt::Arguments<'_>) {
    // SAFETY: a second handle to the same UART; used only when the kernel is about to stop, so
    // interleaving with a lock holder at worst garbles output.
    let mut u = unsafe { Port::board() };
    let _ = Writer(&mut u).write_fmt(args);
}

#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::platform::print(format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! println {
    () => { $crate::platform::print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::platform::print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// The console as the runtime sees it.
#[derive(Debug, Clone, Copy)]
pub struct Serial;

impl runtime::console::Console for Serial {
    fn write_bytes(&mut self, b: &[u8]) {
        write_bytes(b)
    }
    fn read_byte(&mut self) -> Option<u8> {
        read_byte()
    }
}
