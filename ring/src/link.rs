//! A serial line as the ring sees it: a non-blocking byte pipe to the next board and from the
//! previous one. A UART driver, a fake ([`crate::fake`]) or a socket on a PC implements it.

use alloc::boxed::Box;

/// A serial line: bytes toward the next board, bytes from the previous one. Never blocks.
pub trait Link {
    /// Hand `bytes` to the transmitter; returns how many it took now (0 when it is full).
    fn send(&mut self, bytes: &[u8]) -> usize;
    /// Bytes received so far, up to `buf.len()`; returns how many.
    fn recv(&mut self, buf: &mut [u8]) -> usize;
    /// What the line under the link counted (a UART's overruns, bytes taken by its interrupt),
    /// where the platform knows; `None` by default.
    fn line_stats(&self) -> Option<LineStats> {
        None
    }
}

/// What a board's UART and its receive path counted under the link layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    /// Whether the link is received by interrupt (else polled when the ring is pumped).
    pub by_irq: bool,
    /// Bytes the interrupt handler took from the UART.
    pub irq_bytes: u64,
    /// Calls of the interrupt handler.
    pub irqs: u64,
    /// Receive overruns the UART reported: bytes lost with its receive FIFO full.
    pub overruns: u64,
    /// Bytes the interrupt handler took but found no room for in its buffer: lost.
    pub dropped: u64,
}

/// A link behind a reference or a box is the link itself.
macro_rules! forward_link {
    ($($ty:ty),*) => {$(
        impl<L: Link + ?Sized> Link for $ty {
            fn send(&mut self, bytes: &[u8]) -> usize {
                (**self).send(bytes)
            }

            fn recv(&mut self, buf: &mut [u8]) -> usize {
                (**self).recv(buf)
            }

            fn line_stats(&self) -> Option<LineStats> {
                (**self).line_stats()
            }
        }
    )*};
}

forward_link!(&mut L, Box<L>);
