//! Device registers: [`Regs`], the 32-bit register access every polled driver here is written
//! against (the SD host, the VideoCore mailbox, the GPIO block), with [`Mmio`] as the real one and
//! RAM-backed fakes in the tests; and the volatile `RegisterBlock` underneath, the one place the
//! drivers turn a register address into a pointer.
//!
//! # Barriers between peripherals
//!
//! The BCM2835 ARM Peripherals guide (section 1.3) orders accesses only within one peripheral:
//! reads from two peripherals may come back out of order, so it asks for a memory barrier before
//! the first write to a peripheral and after the last read from it. A driver calls
//! [`Regs::barrier`] at the entry and the exit of each operation (an SD init, read or write, a
//! mailbox call, a GPIO setup); [`Mmio`] runs the hook the kernel gave it ([`Mmio::with_barrier`],
//! a `dsb sy` on aarch64: drivers hold no `asm!`). The console UART has none of its own: every
//! other peripheral's driver fences its own accesses on both sides, which covers the switches to
//! and from the UART. (Circle's `PeripheralEntry` / `PeripheralExit` in `synchronize.h` are this;
//! its AArch64 build leaves them empty, relying on device memory ordering.)

use core::ptr::{read_volatile, write_volatile};

/// 32-bit access to a device's registers at byte offsets from its base.
pub trait Regs {
    fn read32(&mut self, off: usize) -> u32;
    fn write32(&mut self, off: usize, v: u32);
    /// A barrier before the first access to this device and after the last (see the module
    /// docs); nothing by default (fakes need none).
    fn barrier(&mut self) {}
}

impl<T: Regs + ?Sized> Regs for &mut T {
    fn read32(&mut self, off: usize) -> u32 {
        (**self).read32(off)
    }

    fn write32(&mut self, off: usize, v: u32) {
        (**self).write32(off, v)
    }

    fn barrier(&mut self) {
        (**self).barrier()
    }
}

/// A memory barrier for [`Mmio::with_barrier`] (on aarch64 the kernel passes a `dsb sy`).
pub type Barrier = fn();

/// The registers of a real device: volatile 32-bit accesses inside a block of `size` bytes.
#[derive(Debug)]
pub struct Mmio {
    regs: RegisterBlock,
    size: usize,
    barrier: Option<Barrier>,
}

impl Mmio {
    /// # Safety
    /// `base` must be the address of a device's register block of `size` bytes (a power of two,
    /// at least 4; `base` 4-byte aligned), mapped as device memory, and nothing else may access
    /// that device while this value (or a driver holding it) lives. Accesses are volatile 32-bit
    /// reads and writes at `base + off` with `off` masked to an aligned offset inside the block.
    pub const unsafe fn new(base: usize, size: usize) -> Mmio {
        assert!(size.is_power_of_two() && size >= 4);
        // SAFETY: the caller's contract: `base` is a register block used only through this value;
        // `offset` keeps every access an aligned word inside it.
        let regs = unsafe { RegisterBlock::new(base) };
        Mmio {
            regs,
            size,
            barrier: None,
        }
    }

    /// Run `barrier` at each [`Regs::barrier`].
    pub const fn with_barrier(mut self, barrier: Barrier) -> Mmio {
        self.barrier = Some(barrier);
        self
    }

    pub fn base(&self) -> usize {
        self.regs.base()
    }

    fn offset(&self, off: usize) -> usize {
        debug_assert!(
            off.is_multiple_of(4) && off < self.size,
            "register offset {off:#x} outside a block of {:#x} bytes",
            self.size
        );
        off & (self.size - 4)
    }
}

impl Regs for Mmio {
    fn read32(&mut self, off: usize) -> u32 {
        self.regs.read32(self.offset(off))
    }

    fn write32(&mut self, off: usize, v: u32) {
        self.regs.write32(self.offset(off), v)
    }

    fn barrier(&mut self) {
        if let Some(b) = self.barrier {
            b()
        }
    }
}

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
