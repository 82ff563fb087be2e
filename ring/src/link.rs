//! A serial line as the ring sees it: a non-blocking byte pipe to the next board and from the
//! previous one. A UART driver, a fake ([`crate::fake`]) or a socket on a PC implements it.

use alloc::boxed::Box;

/// A serial line: bytes toward the next board, bytes from the previous one. Never blocks.
pub trait Link {
    /// Hand `bytes` to the transmitter; returns how many it took now (0 when it is full).
    fn send(&mut self, bytes: &[u8]) -> usize;
    /// Bytes received so far, up to `buf.len()`; returns how many.
    fn recv(&mut self, buf: &mut [u8]) -> usize;
}

impl<L: Link + ?Sized> Link for &mut L {
    fn send(&mut self, bytes: &[u8]) -> usize {
        (**self).send(bytes)
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        (**self).recv(buf)
    }
}

impl<L: Link + ?Sized> Link for Box<L> {
    fn send(&mut self, bytes: &[u8]) -> usize {
        (**self).send(bytes)
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        (**self).recv(buf)
    }
}
