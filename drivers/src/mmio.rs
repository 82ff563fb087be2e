//! Volatile access to memory-mapped device registers: the one place the drivers turn a register
//! address into a pointer.

use core::ptr::{read_volatile, write_volatile};

/// A device's registers from `base`, read and written by volatile accesses at byte offsets.
#[derive(Debug)]
pub(crate) struct RegisterBlock {
    base: usize,
}

impl RegisterBlock {
    /// # Safety
    /// `base` must be the address of a device's registers, mapped as device memory, and nothing
    /// else may access them while this value lives. Every offset its owner passes to the accessors
    /// must be a register of that device, aligned for the access's width.
    pub(crate) const unsafe fn new(base: usize) -> Self {
        Self { base }
    }

    pub(crate) const fn base(&self) -> usize {
        self.base
    }

    /// Volatile read of the `T` at `base + off`.
    fn read<T: Copy>(&self, off: usize) -> T {
        // SAFETY: a register of the device (constructor contract).
        unsafe { read_volatile((self.base + off) as *const T) }
    }

    /// Volatile write of the `T` at `base + off`.
    fn write<T: Copy>(&mut self, off: usize, v: T) {
        // SAFETY: as in `read`.
        unsafe { write_volatile((self.base + off) as *mut T, v) }
    }

    pub(crate) fn read32(&self, off: usize) -> u32 {
        self.read(off)
    }

    pub(crate) fn write32(&mut self, off: usize, v: u32) {
        self.write(off, v)
    }

    pub(crate) fn read8(&self, off: usize) -> u8 {
        self.read(off)
    }

    pub(crate) fn write8(&mut self, off: usize, v: u8) {
        self.write(off, v)
    }
}
