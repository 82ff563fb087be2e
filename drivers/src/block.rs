//! Block devices: the [`BlockDevice`] trait every storage driver implements (virtio-blk, the SD host
//! controller, SPI-SD) and the fakes the host tests use.
//!
//! A block is 512 bytes ([`BLOCK_SIZE`]), the unit SD cards and virtio-blk address in. A driver gets
//! one call per request: [`BlockDevice::read_blocks`] with a buffer of several blocks should become one
//! multi-block command (CMD18, one virtio descriptor chain), because that is where the bandwidth is;
//! the FAT reader and the page cache above ask for whole extents at once.
//!
//! Fakes, small enough to compile always:
//! - [`RamDisk`] serves blocks from memory (`Vec<u8>`, `&[u8]`, anything `AsRef<[u8]>`); a request past
//!   the end or with a length that is not whole blocks is an error naming the LBA, never a panic.
//! - [`CountingDevice`] wraps any device and counts requests and blocks, for I/O measurements.
//!
//! - [`Retry`] retries failed requests; [`FaultyDevice`] injects faults into reads and writes (a
//!   CRC error, a timeout, a bad block, a vanishing card, a write-protected card, a power cut in the
//!   middle of a write).
//!
//! # Writes
//!
//! Writing is a separate trait, [`WriteBlocks`], on top of [`BlockDevice`]: a read-only device (a
//! `RamDisk<&[u8]>`, a test fake) needs no write method and cannot be handed to code that writes,
//! and a default `write_blocks` in [`BlockDevice`] could not build the device's own error type to
//! refuse. The kernel writes only the preallocated prompt-cache file, and only when its
//! configuration allows it ([`crate::fat::File::write_at`]); nothing writes file-system metadata.
//! Writes are synchronous in every driver: when `write_blocks` returns Ok the data has left the
//! host (and, on an SD card, the card has finished programming it), so the order of two writes is
//! the order they reach the medium, which is what makes "payload first, valid flag last" safe.
//!
//! [`check_request`] is the range check every driver does before touching hardware.

use core::fmt;

/// Bytes in one block: every LBA counts 512-byte blocks.
pub const BLOCK_SIZE: usize = 512;

/// A device that reads 512-byte blocks.
pub trait BlockDevice {
    /// What a failed request reports; printed on the UART by the kernel.
    type Error: fmt::Debug + fmt::Display;

    /// Number of 512-byte blocks.
    fn num_blocks(&self) -> u64;

    /// Read `buf.len() / 512` consecutive blocks starting at `lba` (`buf.len()` a multiple of 512); a
    /// driver issues this as one multi-block request where it can.
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Read requests the device can keep in flight at once ([`BlockDevice::submit_read`] returning
    /// [`Submitted::Queued`]); 0 for a device that only reads synchronously.
    fn queue_depth(&self) -> usize {
        0
    }

    /// Start reading `len / 512` blocks at `lba` into the `len` bytes at `buf`. A synchronous device
    /// (the default) reads them now and answers [`Submitted::Done`]; a queued one (virtio-blk)
    /// answers [`Submitted::Queued`] with a tag that [`BlockDevice::poll_read`] reports when the
    /// data is there, and the caller goes on computing meanwhile.
    ///
    /// # Safety
    /// `buf .. buf + len` must be valid for writes, and, when the answer is `Queued`, neither read nor
    /// written nor freed until `poll_read` has reported the tag (the device writes it meanwhile).
    unsafe fn submit_read(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<Submitted, Self::Error> {
        // SAFETY: the caller guarantees `buf` is valid for `len` bytes of writes.
        let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
        self.read_blocks(lba, b)?;
        Ok(Submitted::Done)
    }

    /// A queued read that has finished, if any: its tag and outcome. Never blocks.
    fn poll_read(&mut self) -> Option<(u16, Result<(), Self::Error>)> {
        None
    }

    /// How reads move their data now, on a host that can say ([`Transfer`]); `None` for a
    /// device with one way it does not name (virtio-blk, the fakes).
    fn transfer(&self) -> Option<Transfer> {
        None
    }

    /// Move reads to `t` from now on (queued reads finish first); false, and nothing changed,
    /// when the device cannot (no DMA engine, or one given up after errors). The default can
    /// only keep what it has.
    fn set_transfer(&mut self, t: Transfer) -> bool {
        self.transfer() == Some(t)
    }

    /// The SD bus and what the driver's request loop had to do on it, on an SD host; `None`
    /// elsewhere.
    fn card_stats(&self) -> Option<CardStats> {
        None
    }
}

/// How an SD host's reads move the data ([`BlockDevice::transfer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Programmed I/O: the CPU moves every word through the controller's data port or FIFO.
    Pio,
    /// The host's DMA engine writes memory; the CPU sees it after the cache invalidate.
    Dma,
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transfer::Pio => "PIO",
            Transfer::Dma => "DMA",
        })
    }
}

/// An SD host's bus and counters ([`BlockDevice::card_stats`]), since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CardStats {
    pub bus: SdBus,
    /// The request loop's counters: commands that failed with a CRC (or framing) error on the
    /// bus, commands tried again, re-initialisations of the card, bus modes given up after CRC
    /// errors, and DMA errors that count towards reading by PIO for good (the sdhost's).
    pub crc_errors: u64,
    pub retries: u64,
    pub reinits: u64,
    pub step_downs: u64,
    pub dma_errors: u64,
}

/// The SD bus a card runs on. Shown in a few characters: the mode's family, the clock in MHz and
/// the data lines (`HS50x4`, `DS25x1`, `DDR50x4`, `SDR208x4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SdBus {
    /// The mode's name (`High Speed`) and family in two or three letters (`DS`, `HS`, `DDR`,
    /// `SDR`): [`crate::sd::BusMode::name`] and `short`.
    pub mode: &'static str,
    pub family: &'static str,
    pub clock_hz: u32,
    pub width: u8,
}

impl fmt::Display for SdBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mhz = self.clock_hz / 1_000_000;
        write!(f, "{}{mhz}x{}", self.family, self.width)
    }
}

/// A block device that can also write 512-byte blocks.
///
/// Implemented by the drivers that can write (SDHCI, virtio-blk in the kernel), the writable fakes
/// (`RamDisk<Vec<u8>>`, `RamDisk<&mut [u8]>`, ...) and the wrappers ([`CountingDevice`], [`Retry`],
/// [`FaultyDevice`], `&mut D`) when what they wrap can write.
pub trait WriteBlocks: BlockDevice {
    /// Write the `buf.len() / 512` blocks in `buf` (a multiple of 512 bytes) to consecutive blocks
    /// from `lba`, as one multi-block request where the device can. Synchronous: when this returns
    /// Ok the device has the data (an SD card has finished programming it); a later write reaches
    /// the medium after it.
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), Self::Error>;

    /// Ask the device to make every completed write durable (a virtio-blk flush with a host write
    /// cache). The default does nothing: for a device whose writes are durable when they complete.
    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// What [`BlockDevice::submit_read`] did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// The data is in the buffer already.
    Done,
    /// In flight; [`BlockDevice::poll_read`] reports this tag when it finishes.
    Queued(u16),
}

impl<D: BlockDevice + ?Sized> BlockDevice for &mut D {
    type Error = D::Error;

    fn num_blocks(&self) -> u64 {
        (**self).num_blocks()
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        (**self).read_blocks(lba, buf)
    }

    fn queue_depth(&self) -> usize {
        (**self).queue_depth()
    }

    unsafe fn submit_read(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<Submitted, Self::Error> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { (**self).submit_read(lba, buf, len) }
    }

    fn poll_read(&mut self) -> Option<(u16, Result<(), Self::Error>)> {
        (**self).poll_read()
    }

    fn transfer(&self) -> Option<Transfer> {
        (**self).transfer()
    }

    fn set_transfer(&mut self, t: Transfer) -> bool {
        (**self).set_transfer(t)
    }

    fn card_stats(&self) -> Option<CardStats> {
        (**self).card_stats()
    }
}

impl<D: WriteBlocks + ?Sized> WriteBlocks for &mut D {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), Self::Error> {
        (**self).write_blocks(lba, buf)
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        (**self).flush()
    }
}

/// A request a device cannot serve, found before any I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// The buffer is not a whole number of blocks.
    PartialBlock { lba: u64, len: usize },
    /// Blocks `lba .. lba + blocks` are not all below `num_blocks`.
    OutOfRange {
        lba: u64,
        blocks: u64,
        num_blocks: u64,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RequestError::PartialBlock { lba, len } => {
                write!(f, "request at LBA {lba}: buffer of {len} bytes is not a multiple of {BLOCK_SIZE}")
            }
            RequestError::OutOfRange { lba, blocks, num_blocks } => write!(
                f,
                "request of {blocks} block(s) at LBA {lba} goes past the end of the device ({num_blocks} blocks)"
            ),
        }
    }
}

impl core::error::Error for RequestError {}

/// Check a read or write of `len` bytes at `lba` on a device of `num_blocks` blocks; returns the
/// block count.
pub fn check_request(lba: u64, len: usize, num_blocks: u64) -> Result<u64, RequestError> {
    let blocks = (len / BLOCK_SIZE) as u64;
    if blocks as usize * BLOCK_SIZE != len {
        return Err(RequestError::PartialBlock { lba, len });
    }
    match lba.checked_add(blocks) {
        Some(end) if end <= num_blocks => Ok(blocks),
        _ => Err(RequestError::OutOfRange {
            lba,
            blocks,
            num_blocks,
        }),
    }
}

/// A block device in memory: block `n` is bytes `n * 512 .. (n + 1) * 512` of the data. A trailing
/// partial block is not addressable.
#[derive(Debug, Clone)]
pub struct RamDisk<T> {
    data: T,
}

impl<T: AsRef<[u8]>> RamDisk<T> {
    pub fn new(data: T) -> Self {
        RamDisk { data }
    }

    /// The bytes behind the disk.
    pub fn data(&self) -> &T {
        &self.data
    }

    pub fn into_inner(self) -> T {
        self.data
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RamDisk<T> {
    /// The bytes behind the disk, to change (e.g. to corrupt a block in a test).
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.data.as_mut()
    }
}

impl<T: AsRef<[u8]>> BlockDevice for RamDisk<T> {
    type Error = RequestError;

    fn num_blocks(&self) -> u64 {
        (self.data.as_ref().len() / BLOCK_SIZE) as u64
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), RequestError> {
        check_request(lba, buf.len(), self.num_blocks())?;
        // In range of a `usize`-indexed slice: lba + blocks <= num_blocks = len / 512.
        let start = lba as usize * BLOCK_SIZE;
        buf.copy_from_slice(&self.data.as_ref()[start..start + buf.len()]);
        Ok(())
    }
}

/// A disk in writable memory (`Vec<u8>`, `&mut [u8]`, `Box<[u8]>`) takes writes; one over `&[u8]`
/// stays read-only.
impl<T: AsRef<[u8]> + AsMut<[u8]>> WriteBlocks for RamDisk<T> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), RequestError> {
        check_request(lba, buf.len(), self.num_blocks())?;
        let start = lba as usize * BLOCK_SIZE;
        self.data.as_mut()[start..start + buf.len()].copy_from_slice(buf);
        Ok(())
    }
}

/// [`BlockDevice::transfer`], `set_transfer` and `card_stats` of the device a wrapper holds in
/// `inner`: used inside the wrapper's `impl BlockDevice`.
macro_rules! forward_transfer {
    () => {
        fn transfer(&self) -> Option<Transfer> {
            self.inner.transfer()
        }

        fn set_transfer(&mut self, t: Transfer) -> bool {
            self.inner.set_transfer(t)
        }

        fn card_stats(&self) -> Option<CardStats> {
            self.inner.card_stats()
        }
    };
}

/// `inner`, `inner_mut` and `into_inner` for a wrapper that holds its device `D` in `inner`.
macro_rules! inner_accessors {
    ($($wrapper:ident),*) => {$(
        impl<D> $wrapper<D> {
            /// The wrapped device.
            pub fn inner(&self) -> &D {
                &self.inner
            }

            pub fn inner_mut(&mut self) -> &mut D {
                &mut self.inner
            }

            pub fn into_inner(self) -> D {
                self.inner
            }
        }
    )*};
}

inner_accessors!(CountingDevice, Retry, FaultyDevice);

/// Wraps a device and counts what passes through: requests, blocks, the largest request; writes
/// apart from reads.
#[derive(Debug, Clone)]
pub struct CountingDevice<D> {
    inner: D,
    requests: u64,
    blocks: u64,
    largest: u64,
    write_requests: u64,
    blocks_written: u64,
    flushes: u64,
}

impl<D> CountingDevice<D> {
    pub fn new(inner: D) -> Self {
        CountingDevice {
            inner,
            requests: 0,
            blocks: 0,
            largest: 0,
            write_requests: 0,
            blocks_written: 0,
            flushes: 0,
        }
    }

    /// Read requests issued (failed ones included).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Blocks asked for over all requests.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Bytes asked for over all requests.
    pub fn bytes(&self) -> u64 {
        self.blocks * BLOCK_SIZE as u64
    }

    /// Blocks in the largest single read request.
    pub fn largest_request(&self) -> u64 {
        self.largest
    }

    /// Write requests issued (failed ones included).
    pub fn write_requests(&self) -> u64 {
        self.write_requests
    }

    /// Blocks written over all write requests.
    pub fn blocks_written(&self) -> u64 {
        self.blocks_written
    }

    /// Flushes asked for.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// Zero the counters.
    pub fn reset(&mut self) {
        self.requests = 0;
        self.blocks = 0;
        self.largest = 0;
        self.write_requests = 0;
        self.blocks_written = 0;
        self.flushes = 0;
    }
}

impl<D: BlockDevice> BlockDevice for CountingDevice<D> {
    type Error = D::Error;

    fn num_blocks(&self) -> u64 {
        self.inner.num_blocks()
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        let blocks = (buf.len() / BLOCK_SIZE) as u64;
        self.requests += 1;
        self.blocks += blocks;
        self.largest = self.largest.max(blocks);
        self.inner.read_blocks(lba, buf)
    }
    forward_transfer!();
}

impl<D: WriteBlocks> WriteBlocks for CountingDevice<D> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), D::Error> {
        self.write_requests += 1;
        self.blocks_written += (buf.len() / BLOCK_SIZE) as u64;
        self.inner.write_blocks(lba, buf)
    }

    fn flush(&mut self) -> Result<(), D::Error> {
        self.flushes += 1;
        self.inner.flush()
    }
}

/// Retries failed reads and writes: a transient error (a CRC error, a timeout) costs a retry, not
/// the run. A request that fails `tries` times is reported with its LBA and the last cause.
/// Bounded: at most `tries` attempts per request. Writing the same blocks again is harmless, so a
/// write is retried like a read.
#[derive(Debug, Clone)]
pub struct Retry<D> {
    inner: D,
    tries: u32,
    /// Requests that failed at least once and then succeeded.
    pub recovered: u64,
}

impl<D> Retry<D> {
    pub fn new(inner: D, tries: u32) -> Self {
        Self {
            inner,
            tries: tries.max(1),
            recovered: 0,
        }
    }
}

/// What a request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Flush,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
        })
    }
}

/// A request that failed on every try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryError<E> {
    pub op: Op,
    pub lba: u64,
    pub blocks: u64,
    pub tries: u32,
    pub last: E,
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op == Op::Flush {
            return write!(f, "flush failed {} times: {}", self.tries, self.last);
        }
        write!(
            f,
            "{} of {} blocks at LBA {} failed {} times: {}",
            self.op, self.blocks, self.lba, self.tries, self.last
        )
    }
}

impl<D> Retry<D> {
    /// Run `attempt` up to `tries` times.
    fn retry<E>(
        &mut self,
        op: Op,
        lba: u64,
        blocks: u64,
        mut attempt: impl FnMut(&mut D) -> Result<(), E>,
    ) -> Result<(), RetryError<E>> {
        let mut last = None;
        for n in 0..self.tries {
            match attempt(&mut self.inner) {
                Ok(()) => {
                    if n > 0 {
                        self.recovered += 1;
                    }
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(last) => Err(RetryError {
                op,
                lba,
                blocks,
                tries: self.tries,
                last,
            }),
            // `tries >= 1`, so some attempt failed to get here.
            None => Ok(()),
        }
    }
}

impl<D: BlockDevice> BlockDevice for Retry<D> {
    type Error = RetryError<D::Error>;

    fn num_blocks(&self) -> u64 {
        self.inner.num_blocks()
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        let blocks = (buf.len() / BLOCK_SIZE) as u64;
        self.retry(Op::Read, lba, blocks, |d| d.read_blocks(lba, buf))
    }

    // Queued reads pass straight through: a failed one is reported once (`tries: 1`), and its
    // caller (the page cache) reads it again synchronously, which retries.
    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }

    unsafe fn submit_read(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<Submitted, Self::Error> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.inner.submit_read(lba, buf, len) }.map_err(|last| RetryError {
            op: Op::Read,
            lba,
            blocks: (len / BLOCK_SIZE) as u64,
            tries: 1,
            last,
        })
    }

    fn poll_read(&mut self) -> Option<(u16, Result<(), Self::Error>)> {
        let (tag, r) = self.inner.poll_read()?;
        Some((
            tag,
            r.map_err(|last| RetryError {
                op: Op::Read,
                lba: 0,
                blocks: 0,
                tries: 1,
                last,
            }),
        ))
    }
    forward_transfer!();
}

impl<D: WriteBlocks> WriteBlocks for Retry<D> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), Self::Error> {
        let blocks = (buf.len() / BLOCK_SIZE) as u64;
        self.retry(Op::Write, lba, blocks, |d| d.write_blocks(lba, buf))
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.retry(Op::Flush, 0, 0, |d| d.flush())
    }
}

/// A fault to inject. Reads and writes count as requests alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every `every`-th request fails once with a CRC error (the retry succeeds).
    TransientCrc { every: u64 },
    /// Every `every`-th request fails once with a timeout.
    TransientTimeout { every: u64 },
    /// Any request touching this block fails, always.
    BadBlock { lba: u64 },
    /// After this many requests the card is gone: everything fails.
    Vanish { after: u64 },
    /// Every write fails (a write-protected card); reads work.
    ReadOnly,
    /// The power goes after this many blocks have been written: the write that crosses the mark
    /// stores only the blocks before it, then it and every later request fail.
    PowerCut { after_blocks: u64 },
}

/// What a [`FaultyDevice`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultError<E> {
    Injected { lba: u64, what: &'static str },
    Device(E),
}

impl<E: fmt::Display> fmt::Display for FaultError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultError::Injected { lba, what } => write!(f, "{what} at LBA {lba}"),
            FaultError::Device(e) => write!(f, "{e}"),
        }
    }
}

/// Injects [`Fault`]s into a device's reads and writes (tests and fault drills).
#[derive(Debug, Clone)]
pub struct FaultyDevice<D> {
    inner: D,
    faults: alloc::vec::Vec<Fault>,
    requests: u64,
    /// Blocks written so far (for [`Fault::PowerCut`]).
    written: u64,
    /// The power is gone ([`Fault::PowerCut`]).
    dead: bool,
    /// Faults injected so far.
    pub injected: u64,
}

impl<D> FaultyDevice<D> {
    pub fn new(inner: D, faults: &[Fault]) -> Self {
        Self {
            inner,
            faults: faults.to_vec(),
            requests: 0,
            written: 0,
            dead: false,
            injected: 0,
        }
    }

    /// Count a request of `len` bytes at `lba` and fail it if a fault hits it; else its block count.
    fn request<E>(&mut self, lba: u64, len: usize, write: bool) -> Result<u64, FaultError<E>> {
        self.requests += 1;
        let blocks = (len / BLOCK_SIZE) as u64;
        if let Some((at, what)) = self.hit(self.requests, lba, blocks, write) {
            self.injected += 1;
            return Err(FaultError::Injected { lba: at, what });
        }
        Ok(blocks)
    }

    /// The fault that hits request number `n` of `blocks` blocks at `lba`, if any: where and what.
    fn hit(&self, n: u64, lba: u64, blocks: u64, write: bool) -> Option<(u64, &'static str)> {
        if self.dead {
            return Some((lba, "power cut"));
        }
        self.faults.iter().find_map(|f| match *f {
            Fault::TransientCrc { every } => {
                (every > 0 && n.is_multiple_of(every)).then_some((lba, "injected CRC error"))
            }
            Fault::TransientTimeout { every } => {
                (every > 0 && n.is_multiple_of(every)).then_some((lba, "injected timeout"))
            }
            Fault::BadBlock { lba: bad } => {
                (bad >= lba && bad < lba + blocks).then_some((bad, "injected bad block"))
            }
            Fault::Vanish { after } => (n > after).then_some((lba, "card removed")),
            Fault::ReadOnly => write.then_some((lba, "card is write-protected")),
            Fault::PowerCut { .. } => None,
        })
    }
}

impl<D: BlockDevice> BlockDevice for FaultyDevice<D> {
    type Error = FaultError<D::Error>;

    fn num_blocks(&self) -> u64 {
        self.inner.num_blocks()
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.request(lba, buf.len(), false)?;
        self.inner.read_blocks(lba, buf).map_err(FaultError::Device)
    }
    forward_transfer!();
}

impl<D: WriteBlocks> WriteBlocks for FaultyDevice<D> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), Self::Error> {
        let blocks = self.request(lba, buf.len(), true)?;
        let cut = self.faults.iter().find_map(|f| match *f {
            Fault::PowerCut { after_blocks } => Some(after_blocks),
            _ => None,
        });
        if let Some(limit) = cut {
            if self.written + blocks > limit {
                // Store what fits before the cut, then lose the power.
                let keep = limit.saturating_sub(self.written);
                self.written = limit;
                self.dead = true;
                self.injected += 1;
                if keep > 0 {
                    let n = keep as usize * BLOCK_SIZE;
                    self.inner
                        .write_blocks(lba, &buf[..n])
                        .map_err(FaultError::Device)?;
                }
                return Err(FaultError::Injected {
                    lba: lba + keep,
                    what: "power cut",
                });
            }
        }
        self.inner
            .write_blocks(lba, buf)
            .map_err(FaultError::Device)?;
        self.written += blocks;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        if self.dead {
            return Err(FaultError::Injected {
                lba: 0,
                what: "power cut",
            });
        }
        self.inner.flush().map_err(FaultError::Device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn disk(blocks: usize) -> RamDisk<Vec<u8>> {
        RamDisk::new((0..blocks * BLOCK_SIZE).map(|i| (i / 7) as u8).collect())
    }

    #[test]
    fn ram_disk_writes_whole_blocks_in_range() {
        let mut d = disk(8);
        let before = d.data().clone();
        d.write_blocks(2, &[0xAB; 2 * BLOCK_SIZE]).unwrap();
        let mut back = [0u8; 2 * BLOCK_SIZE];
        d.read_blocks(2, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0xAB));
        assert_eq!(d.data()[..2 * BLOCK_SIZE], before[..2 * BLOCK_SIZE]);
        assert_eq!(d.data()[4 * BLOCK_SIZE..], before[4 * BLOCK_SIZE..]);
        assert_eq!(
            d.write_blocks(7, &[0; 2 * BLOCK_SIZE]),
            Err(RequestError::OutOfRange {
                lba: 7,
                blocks: 2,
                num_blocks: 8
            })
        );
        assert_eq!(
            d.write_blocks(1, &[0; 100]),
            Err(RequestError::PartialBlock { lba: 1, len: 100 })
        );
        // A disk over a mutable slice writes through to it.
        let mut mem = vec![0u8; 4 * BLOCK_SIZE];
        RamDisk::new(&mut mem[..])
            .write_blocks(3, &[9; BLOCK_SIZE])
            .unwrap();
        assert!(mem[3 * BLOCK_SIZE..].iter().all(|&b| b == 9));
        assert!(mem[..3 * BLOCK_SIZE].iter().all(|&b| b == 0));
    }

    #[test]
    fn counting_device_counts_writes_apart() {
        let mut d = CountingDevice::new(disk(8));
        let mut buf = [0u8; BLOCK_SIZE];
        d.read_blocks(0, &mut buf).unwrap();
        d.write_blocks(1, &[1; 3 * BLOCK_SIZE]).unwrap();
        // Through the `&mut D` forwarding impl.
        fn write_via<W: WriteBlocks>(mut w: W) {
            w.write_blocks(5, &[1; BLOCK_SIZE]).unwrap();
        }
        write_via(&mut d);
        d.flush().unwrap();
        assert_eq!((d.requests(), d.blocks()), (1, 1));
        assert_eq!(
            (d.write_requests(), d.blocks_written(), d.flushes()),
            (2, 4, 1)
        );
        d.reset();
        assert_eq!(
            (d.write_requests(), d.blocks_written(), d.flushes()),
            (0, 0, 0)
        );
    }

    #[test]
    fn retry_recovers_transient_write_faults() {
        let faulty = FaultyDevice::new(disk(16), &[Fault::TransientCrc { every: 2 }]);
        let mut d = Retry::new(faulty, 3);
        for lba in 0..8 {
            d.write_blocks(lba * 2, &[lba as u8; 2 * BLOCK_SIZE])
                .unwrap();
        }
        assert!(d.recovered > 0);
        let data = d.inner().inner().data();
        for lba in 0..8usize {
            let s = lba * 2 * BLOCK_SIZE;
            assert!(data[s..s + 2 * BLOCK_SIZE].iter().all(|&b| b == lba as u8));
        }
    }

    #[test]
    fn write_faults_name_the_block() {
        let mut d = Retry::new(
            FaultyDevice::new(disk(16), &[Fault::BadBlock { lba: 5 }]),
            2,
        );
        let e = d.write_blocks(4, &[0; 4 * BLOCK_SIZE]).unwrap_err();
        assert_eq!((e.op, e.lba, e.blocks, e.tries), (Op::Write, 4, 4, 2));
        let s = alloc::format!("{e}");
        assert!(
            s.contains("write of 4 blocks at LBA 4") && s.contains("bad block at LBA 5"),
            "{s}"
        );

        let mut ro = FaultyDevice::new(disk(4), &[Fault::ReadOnly]);
        let mut buf = [0u8; BLOCK_SIZE];
        ro.read_blocks(0, &mut buf).unwrap();
        let e = ro.write_blocks(0, &buf).unwrap_err();
        assert_eq!(
            e,
            FaultError::Injected {
                lba: 0,
                what: "card is write-protected"
            }
        );
        assert_eq!(ro.inner().data()[..BLOCK_SIZE], buf[..]);
    }

    #[test]
    fn power_cut_keeps_the_blocks_before_it() {
        let before = disk(16).into_inner();
        let mut d = FaultyDevice::new(disk(16), &[Fault::PowerCut { after_blocks: 5 }]);
        d.write_blocks(0, &[1; 3 * BLOCK_SIZE]).unwrap();
        let e = d.write_blocks(8, &[2; 4 * BLOCK_SIZE]).unwrap_err();
        assert_eq!(
            e,
            FaultError::Injected {
                lba: 10,
                what: "power cut"
            }
        );
        let data = d.inner().data();
        assert!(data[8 * BLOCK_SIZE..10 * BLOCK_SIZE]
            .iter()
            .all(|&b| b == 2));
        assert_eq!(data[10 * BLOCK_SIZE..], before[10 * BLOCK_SIZE..]);
        let mut buf = [0u8; BLOCK_SIZE];
        assert!(
            d.read_blocks(0, &mut buf).is_err(),
            "everything fails after the cut"
        );
        assert!(d.flush().is_err());
    }
}
