//! A link received by interrupt: the UART's interrupt handler empties its receive FIFO into a
//! software ring buffer ([`RxIrq::drain`]), and the link layer reads that buffer when it gets to
//! it ([`RxReader::read`]). Without flow control a board that reads its UART only between two
//! matrix products loses bytes: at 3 Mbaud a 32-byte FIFO fills in 107 µs, a matrix product takes
//! milliseconds. The handler runs within microseconds of the FIFO reaching its level, whatever the
//! board is computing.
//!
//! The buffer is a `heapless::spsc::Queue`: the handler is its one producer, the link's reader its
//! one consumer, and neither ever waits for the other (a lock the reader held when the interrupt
//! came would deadlock the handler on the same core). A byte that finds the buffer full is dropped
//! and counted ([`RxStats::dropped`]); the link layer's CRC and resends recover it as they recover
//! a byte the line lost.

use super::LinkUart;
use core::sync::atomic::{AtomicU32, Ordering};
use heapless::spsc::{Consumer, Producer};

/// Most bytes one [`RxIrq::drain`] reads: twice the deepest FIFO it serves (a PL011's 32 bytes),
/// so that a line delivering as fast as the handler reads cannot keep it in the handler for good.
pub const DRAIN_LIMIT: usize = 64;

/// What receiving by interrupt has done, for the link's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Calls of the handler.
    pub irqs: u32,
    /// Bytes the handler took from the UART (dropped ones included).
    pub bytes: u32,
    /// Bytes the handler took but found the software buffer full for: lost.
    pub dropped: u32,
    /// Receive overruns the UART reported to the handler: bytes lost in hardware, the FIFO full.
    pub overruns: u32,
}

/// The counters the handler bumps and the reader reads (atomics: the two run in different
/// contexts, the handler interrupting the reader).
#[derive(Debug, Default)]
pub struct RxCounters {
    irqs: AtomicU32,
    bytes: AtomicU32,
    dropped: AtomicU32,
    overruns: AtomicU32,
}

impl RxCounters {
    /// All zero.
    pub const fn new() -> Self {
        Self {
            irqs: AtomicU32::new(0),
            bytes: AtomicU32::new(0),
            dropped: AtomicU32::new(0),
            overruns: AtomicU32::new(0),
        }
    }

    /// The counts now.
    pub fn stats(&self) -> RxStats {
        RxStats {
            irqs: self.irqs.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            overruns: self.overruns.load(Ordering::Relaxed),
        }
    }
}

/// The interrupt handler's half: the buffer's producer and the counters.
pub struct RxIrq<'a> {
    producer: Producer<'a, u8>,
    counters: &'a RxCounters,
}

impl<'a> RxIrq<'a> {
    /// The handler's half over `producer`, counting into `counters`.
    pub fn new(producer: Producer<'a, u8>, counters: &'a RxCounters) -> Self {
        Self { producer, counters }
    }

    /// Handle the UART's receive interrupt: move what its FIFO holds (at most [`DRAIN_LIMIT`]
    /// bytes) into the buffer. Reading the FIFO is what clears the interrupt (below its level or
    /// empty); at the limit it stays raised and the handler runs again. Returns the bytes read.
    pub fn drain<U: LinkUart + ?Sized>(&mut self, uart: &mut U) -> usize {
        let mut n = 0;
        let mut dropped = 0u32;
        while n < DRAIN_LIMIT {
            let Some(b) = uart.read_byte() else {
                break;
            };
            if self.producer.enqueue(b).is_err() {
                dropped += 1;
            }
            n += 1;
        }
        let c = self.counters;
        c.irqs.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(n as u32, Ordering::Relaxed);
        c.dropped.fetch_add(dropped, Ordering::Relaxed);
        c.overruns.store(uart.overruns(), Ordering::Relaxed);
        n
    }
}

impl core::fmt::Debug for RxIrq<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RxIrq")
            .field("stats", &self.counters.stats())
            .finish()
    }
}

/// The link reader's half: the buffer's consumer and the counters.
pub struct RxReader<'a> {
    consumer: Consumer<'a, u8>,
    counters: &'a RxCounters,
}

impl<'a> RxReader<'a> {
    /// The reader's half over `consumer`, with the handler's `counters`.
    pub fn new(consumer: Consumer<'a, u8>, counters: &'a RxCounters) -> Self {
        Self { consumer, counters }
    }

    /// Bytes the handler has received, oldest first, up to `buf.len()`; returns how many.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let mut n = 0;
        for slot in buf.iter_mut() {
            match self.consumer.dequeue() {
                Some(b) => *slot = b,
                None => break,
            }
            n += 1;
        }
        n
    }

    /// What the handler has done so far.
    pub fn stats(&self) -> RxStats {
        self.counters.stats()
    }
}

impl core::fmt::Debug for RxReader<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RxReader")
            .field("stats", &self.counters.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests;
