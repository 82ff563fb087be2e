//! Structured values taken from the fuzz input a few bytes at a time (by hand rather than with
//! the `arbitrary` crate: the targets need only integers and slices, and a hand reader keeps every
//! input meaningful to the regression test without the crate's format).

/// A cursor over the input; reads past its end give zeros and empty slices.
#[derive(Debug)]
pub struct Bytes<'a>(pub &'a [u8]);

impl<'a> Bytes<'a> {
    /// Bytes left.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether every byte is taken.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    /// The next `n` bytes, or fewer at the end.
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> u64 {
        self.u32() as u64 | (self.u32() as u64) << 32
    }

    /// A slice whose length is the next byte (so at most 255 bytes).
    pub fn short(&mut self) -> &'a [u8] {
        let n = self.u8() as usize;
        self.take(n)
    }
}
