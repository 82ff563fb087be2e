//! The serial console as the runtime sees it: bytes out, and a byte in when one is waiting. The
//! board's UART implements [`Console`]; tests use a capture buffer.

use core::fmt::{self, Write};

/// The serial console.
pub trait Console {
    fn write_bytes(&mut self, b: &[u8]);
    /// A received byte, if one is waiting (never blocks).
    fn read_byte(&mut self) -> Option<u8> {
        None
    }
}

/// A console as a [`core::fmt::Write`] target (`writeln!(out, ...)`).
pub struct Out<'a>(pub &'a mut dyn Console);

impl Write for Out<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write_bytes(s.as_bytes());
        Ok(())
    }
}

impl fmt::Debug for Out<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Out")
    }
}
