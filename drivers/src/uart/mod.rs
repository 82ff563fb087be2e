//! Serial ports. [`Uart`] is what the kernel's console needs: send a byte, maybe receive one.

pub mod ns16550;
pub mod pl011;

/// A serial port.
pub trait Uart {
    /// Send one byte (waits, boundedly, for room in the transmit FIFO).
    fn write_byte(&mut self, b: u8);
    /// A received byte, if one is waiting.
    fn read_byte(&mut self) -> Option<u8>;
}
