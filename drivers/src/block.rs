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
//! Fault injection (an error or a short read at a chosen request) will be one more wrapper of the same
//! shape as [`CountingDevice`].
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
                write!(f, "read at LBA {lba}: buffer of {len} bytes is not a multiple of {BLOCK_SIZE}")
            }
            RequestError::OutOfRange { lba, blocks, num_blocks } => write!(
                f,
                "read of {blocks} block(s) at LBA {lba} goes past the end of the device ({num_blocks} blocks)"
            ),
        }
    }
}

impl core::error::Error for RequestError {}

/// Check a read of `len` bytes at `lba` on a device of `num_blocks` blocks; returns the block count.
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

/// Wraps a device and counts what passes through: requests, blocks, the largest request.
#[derive(Debug, Clone)]
pub struct CountingDevice<D> {
    inner: D,
    requests: u64,
    blocks: u64,
    largest: u64,
}

impl<D> CountingDevice<D> {
    pub fn new(inner: D) -> Self {
        CountingDevice {
            inner,
            requests: 0,
            blocks: 0,
            largest: 0,
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

    /// Blocks in the largest single request.
    pub fn largest_request(&self) -> u64 {
        self.largest
    }

    /// Zero the counters.
    pub fn reset(&mut self) {
        self.requests = 0;
        self.blocks = 0;
        self.largest = 0;
    }

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
}

/// Retries failed reads: a transient error (a CRC error, a timeout) costs a retry, not the run. A
/// read that fails `tries` times is reported with its LBA and the last cause. Bounded: at most
/// `tries` attempts per request.
#[derive(Debug, Clone)]
pub struct Retry<D> {
    inner: D,
    tries: u32,
    /// Reads that failed at least once and then succeeded.
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
    pub fn inner(&self) -> &D {
        &self.inner
    }
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }
}

/// A read that failed on every try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryError<E> {
    pub lba: u64,
    pub blocks: u64,
    pub tries: u32,
    pub last: E,
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "read of {} blocks at LBA {} failed {} times: {}",
            self.blocks, self.lba, self.tries, self.last
        )
    }
}

impl<D: BlockDevice> BlockDevice for Retry<D> {
    type Error = RetryError<D::Error>;

    fn num_blocks(&self) -> u64 {
        self.inner.num_blocks()
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        let mut last = None;
        for attempt in 0..self.tries {
            match self.inner.read_blocks(lba, buf) {
                Ok(()) => {
                    if attempt > 0 {
                        self.recovered += 1;
                    }
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(RetryError {
            lba,
            blocks: (buf.len() / BLOCK_SIZE) as u64,
            tries: self.tries,
            last: last.expect("tries >= 1"),
        })
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
                lba: 0,
                blocks: 0,
                tries: 1,
                last,
            }),
        ))
    }
}

/// A fault to inject.
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

/// Injects [`Fault`]s into a device's reads (tests and fault drills).
#[derive(Debug, Clone)]
pub struct FaultyDevice<D> {
    inner: D,
    faults: alloc::vec::Vec<Fault>,
    requests: u64,
    /// Faults injected so far.
    pub injected: u64,
}

impl<D> FaultyDevice<D> {
    pub fn new(inner: D, faults: &[Fault]) -> Self {
        Self {
            inner,
            faults: faults.to_vec(),
            requests: 0,
            injected: 0,
        }
    }
}

impl<D: BlockDevice> BlockDevice for FaultyDevice<D> {
    type Error = FaultError<D::Error>;

    fn num_blocks(&self) -> u64 {
        self.inner.num_blocks()
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.requests += 1;
        let n = self.requests;
        let blocks = (buf.len() / BLOCK_SIZE) as u64;
        for f in &self.faults {
            let hit = match *f {
                Fault::TransientCrc { every } => {
                    (every > 0 && n % every == 0).then_some((lba, "injected CRC error"))
                }
                Fault::TransientTimeout { every } => {
                    (every > 0 && n % every == 0).then_some((lba, "injected timeout"))
                }
                Fault::BadBlock { lba: bad } => {
                    (bad >= lba && bad < lba + blocks).then_some((bad, "injected bad block"))
                }
                Fault::Vanish { after } => (n > after).then_some((lba, "card removed")),
            };
            if let Some((at, what)) = hit {
                self.injected += 1;
                return Err(FaultError::Injected { lba: at, what });
            }
        }
        self.inner.read_blocks(lba, buf).map_err(FaultError::Device)
    }
}
