//! The memory a simulated DMA engine sees, apart from the host's: windows of a bus space, one per
//! host range the driver asked a bus address for (`bus_address`), filled from the host's bytes
//! on a clean (`to_device`) and copied back to them on an invalidate (`from_device`). A driver
//! that forgets to clean its descriptors has the engine read stale ones; one that forgets to
//! invalidate reads stale data. Every call is recorded.
#![allow(dead_code)]

use drivers::dma::{DmaMemory, DMA_ALIGN};
use std::cell::RefCell;
use std::rc::Rc;

/// A simulator's state that has a [`DmaRam`] and records violations.
pub trait HasDmaRam {
    fn ram(&mut self) -> &mut DmaRam;
    fn violation(&mut self, what: String);
    /// Windows mapped from now on have no memory behind them: the engine finds nothing at
    /// their bus addresses (a board whose bus addresses are wrong).
    fn unbacked(&self) -> bool {
        false
    }
    /// Bring the engine up to now before the CPU looks at memory (a timed engine).
    fn settle(&mut self) {}
}

/// The bus memory of a simulator's state `S`, as the driver's [`DmaMemory`].
#[derive(Debug)]
pub struct SimDmaOf<S>(pub Rc<RefCell<S>>);

impl<S: HasDmaRam> DmaMemory for SimDmaOf<S> {
    #[inline(never)]
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        let mut s = self.0.borrow_mut();
        let backed = !s.unbacked();
        s.ram().map(addr, len, backed)
    }

    #[inline(never)]
    fn to_device(&mut self, addr: usize, len: usize) {
        let mut s = self.0.borrow_mut();
        if let Err(v) = s.ram().clean(addr, len) {
            s.violation(v);
        }
    }

    #[inline(never)]
    unsafe fn from_device(&mut self, addr: usize, len: usize) {
        let mut s = self.0.borrow_mut();
        s.settle();
        // SAFETY: the driver's promise, passed on.
        if let Err(v) = unsafe { s.ram().invalidate(addr, len, DMA_ALIGN) } {
            s.violation(v);
        }
    }
}

/// What the driver asked of the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOp {
    /// `bus_address(addr, len)` and its answer.
    Map { addr: usize, len: usize, bus: u32 },
    /// `to_device(addr, len)`: cleaned, the engine now sees the CPU's bytes.
    Clean { addr: usize, len: usize },
    /// `from_device(addr, len)`: invalidated, the CPU now sees the memory's bytes.
    Invalidate { addr: usize, len: usize },
    /// The engine started a transfer.
    Transfer { blocks: u32 },
}

/// A host range with a bus address, and the memory behind it.
#[derive(Debug)]
struct Window {
    host: usize,
    bus: u32,
    mem: Vec<u8>,
    /// The engine finds memory at `bus` (not so for a window mapped while
    /// [`HasDmaRam::unbacked`]).
    backed: bool,
}

/// The bus memory.
#[derive(Debug)]
pub struct DmaRam {
    windows: Vec<Window>,
    next_bus: u32,
    pub ops: Vec<MemOp>,
}

impl DmaRam {
    /// An empty bus space whose first window starts at `base`.
    pub fn new(base: u32) -> DmaRam {
        DmaRam {
            windows: Vec::new(),
            next_bus: base,
            ops: Vec::new(),
        }
    }

    /// The window and offset holding host bytes `[addr, addr + len)`.
    fn host(&mut self, addr: usize, len: usize) -> Option<(&mut Window, usize)> {
        self.windows.iter_mut().find_map(|w| {
            let off = addr.checked_sub(w.host)?;
            (off.checked_add(len)? <= w.mem.len()).then_some((w, off))
        })
    }

    /// The bus address of host address `addr`, if mapped.
    pub fn bus_of(&mut self, addr: usize) -> Option<u32> {
        self.host(addr, 0).map(|(w, off)| w.bus + off as u32)
    }

    /// The memory at bus addresses `[bus, bus + len)`.
    pub fn bus(&mut self, bus: u32, len: usize) -> Option<&mut [u8]> {
        self.windows.iter_mut().filter(|w| w.backed).find_map(|w| {
            let off = bus.checked_sub(w.bus)? as usize;
            let end = off.checked_add(len)?;
            w.mem.get_mut(off..end)
        })
    }

    /// `bus_address`: the window holding the range (of the same backing), or a new one
    /// (64 KiB-aligned in the bus space), looked up first from then on: it shadows older
    /// windows over the same bytes.
    pub fn map(&mut self, addr: usize, len: usize, backed: bool) -> Option<u32> {
        let found = self.host(addr, len).filter(|(w, _)| w.backed == backed);
        let bus = match found {
            Some((w, off)) => w.bus + off as u32,
            None => {
                let bus = self.next_bus;
                let span = u32::try_from(len.next_multiple_of(1 << 16)).ok()?;
                self.next_bus = bus.checked_add(span)?;
                let w = Window {
                    host: addr,
                    bus,
                    mem: vec![0; len],
                    backed,
                };
                self.windows.insert(0, w);
                bus
            }
        };
        self.ops.push(MemOp::Map { addr, len, bus });
        Some(bus)
    }

    /// `to_device`: the host's bytes into the window; `Err` names a range never mapped.
    pub fn clean(&mut self, addr: usize, len: usize) -> Result<(), String> {
        self.ops.push(MemOp::Clean { addr, len });
        let (w, off) = self
            .host(addr, len)
            .ok_or_else(|| format!("to_device({addr:#x}, {len}) outside mapped memory"))?;
        // SAFETY: the driver passes bytes of its own memory, inside a range it mapped.
        let src = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
        w.mem[off..off + len].copy_from_slice(src);
        Ok(())
    }

    /// `from_device`: the window's bytes back to the host; `Err` names a range not on whole
    /// `line`-byte cache lines or never mapped.
    ///
    /// # Safety
    /// As the driver's promise: memory it owns and holds no reference into.
    pub unsafe fn invalidate(
        &mut self,
        addr: usize,
        len: usize,
        line: usize,
    ) -> Result<(), String> {
        self.ops.push(MemOp::Invalidate { addr, len });
        if !addr.is_multiple_of(line) || !len.is_multiple_of(line) {
            return Err(format!(
                "from_device({addr:#x}, {len}) not on whole {line}-byte cache lines"
            ));
        }
        let (w, off) = self
            .host(addr, len)
            .ok_or_else(|| format!("from_device({addr:#x}, {len}) outside mapped memory"))?;
        if !w.backed {
            return Ok(());
        }
        // SAFETY: the caller's promise.
        let dst = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) };
        dst.copy_from_slice(&w.mem[off..off + len]);
        Ok(())
    }
}

/// A buffer of `len` bytes at a `DMA_ALIGN`-aligned address (`shift` bytes past it, for an
/// unaligned one), filled with 0xA5.
pub struct Buf {
    raw: Vec<u8>,
    at: usize,
    pub len: usize,
}

impl Buf {
    pub fn new(len: usize, shift: usize) -> Buf {
        let raw = vec![0xA5u8; len + 2 * DMA_ALIGN];
        let at =
            (raw.as_ptr() as usize).next_multiple_of(DMA_ALIGN) - raw.as_ptr() as usize + shift;
        Buf { raw, at, len }
    }

    pub fn ptr(&mut self) -> *mut u8 {
        self.raw[self.at..].as_mut_ptr()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.at..self.at + self.len]
    }

    /// The buffer's `len` bytes, to read into.
    pub fn slice(&mut self) -> &mut [u8] {
        let (at, len) = (self.at, self.len);
        &mut self.raw[at..at + len]
    }
}

/// A board's `DmaMemory` `D` that forgets its cache maintenance: the clean (`.1`), the
/// invalidate (`.2`), or both.
pub struct Forget<D>(pub D, pub bool, pub bool);

impl<D: DmaMemory> DmaMemory for Forget<D> {
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        self.0.bus_address(addr, len)
    }
    fn to_device(&mut self, addr: usize, len: usize) {
        if !self.1 {
            self.0.to_device(addr, len)
        }
    }
    unsafe fn from_device(&mut self, addr: usize, len: usize) {
        if !self.2 {
            // SAFETY: the driver's promise, passed on.
            unsafe { self.0.from_device(addr, len) }
        }
    }
}
