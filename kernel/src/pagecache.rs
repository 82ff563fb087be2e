//! The page cache: a fixed amount of RAM standing in for mmap of the model file.
//!
//! The file's first `resident` bytes live in one contiguous, pinned buffer, filled once at load with
//! large sequential reads; [`Storage::resident`] hands out slices of it, so when the whole model fits
//! the forward pass reads weights in place with no copy. The rest of the file is streamed through a
//! window of fixed-size pages behind a lock (any core may read).
//!
//! Replacement suits the forward pass's cyclic order ([`Policy::ResidentPrefix`]): every token reads
//! the file in the same order, so a fixed resident part plus a small streaming window reads about
//! M - C bytes per token, where least-recently-used eviction ([`Policy::Lru`], kept for comparison)
//! throws out each page just before it is needed again and reads about M.
//!
//! Read-ahead: the forward pass announces the tensors it will read next ([`Storage::prefetch`]); on
//! a source that queues reads (virtio-blk) the cache starts reading their pages into free window
//! slots at once and the cores go on computing while the device fills them. The window is bounded:
//! at most `readahead` pages are in flight or read ahead and not yet used, and a read-ahead only
//! ever takes an empty slot or one whose page has already been used, so a prefetched page never
//! evicts one needed sooner (prima.cpp's "prefetch-release" is what happens otherwise). A page still
//! in flight when the forward pass reaches it is waited for, and that wait counts as I/O stall.
//!
//! Counters record hits, misses, bytes read, refills, pages read ahead, and stall time.

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use drivers::block::{BlockDevice, WriteBlocks};
use inference::storage::{check_range, Storage, StorageError};

/// A file the cache reads from: "fill this buffer from this file offset" (the FAT file over its
/// block device in the kernel, a file or byte vector in tests).
pub trait FileSource {
    type Error: fmt::Display;
    fn len(&self) -> u64;
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// Reads the source can keep in flight; 0 (the default) means reads are synchronous only, and
    /// the cache does no read-ahead (it would only move the wait, not hide it).
    fn queue_depth(&self) -> usize {
        0
    }

    /// Start filling `len` bytes at `buf` from file offset `offset` (a multiple of 512), tagged
    /// `tag`. `buf` has room for `len` rounded up to whole 512-byte blocks. Returns `true` if the
    /// data is already there, `false` if [`FileSource::poll`] will report `tag` later.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` rounded up to 512, and untouched until the read is
    /// reported (when this returns `false`).
    unsafe fn start(
        &mut self,
        tag: u32,
        offset: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<bool, Self::Error> {
        let _ = tag;
        // SAFETY: the caller guarantees `buf` is valid for `len` bytes.
        let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
        self.read(offset, b)?;
        Ok(true)
    }

    /// A started read that has finished: its tag and outcome. Never blocks.
    fn poll(&mut self) -> Option<(u32, Result<(), Self::Error>)> {
        None
    }

    /// Lend `f` the block device under the file, if there is one (the prompt cache reads and
    /// writes its own file on the card once the device has moved into the page cache). Returns
    /// whether `f` ran.
    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        let _ = f;
        false
    }
}

/// A block device as a trait object with its errors as text: how the run reaches the card once
/// the device has moved into the page cache. [`DynDev`] makes it a [`BlockDevice`] again.
pub trait DynBlock: Send {
    fn num_blocks(&self) -> u64;
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), String>;
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), String>;
    fn flush(&mut self) -> Result<(), String>;
}

impl<D: WriteBlocks + Send> DynBlock for D {
    fn num_blocks(&self) -> u64 {
        BlockDevice::num_blocks(self)
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), String> {
        self.read_blocks(lba, buf).map_err(|e| e.to_string())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), String> {
        self.write_blocks(lba, buf).map_err(|e| e.to_string())
    }
    fn flush(&mut self) -> Result<(), String> {
        WriteBlocks::flush(self).map_err(|e| e.to_string())
    }
}

/// A [`DynBlock`] as a block device (errors as text).
pub struct DynDev<'a>(pub &'a mut dyn DynBlock);

impl fmt::Debug for DynDev<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynDev")
            .field("blocks", &self.0.num_blocks())
            .finish()
    }
}

impl BlockDevice for DynDev<'_> {
    type Error = String;
    fn num_blocks(&self) -> u64 {
        self.0.num_blocks()
    }
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), String> {
        self.0.read(lba, buf)
    }
}

impl WriteBlocks for DynDev<'_> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), String> {
        self.0.write(lba, buf)
    }
    fn flush(&mut self) -> Result<(), String> {
        self.0.flush()
    }
}

impl<F: FileSource + ?Sized> FileSource for Box<F> {
    type Error = F::Error;
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), F::Error> {
        (**self).read(offset, buf)
    }
    fn queue_depth(&self) -> usize {
        (**self).queue_depth()
    }
    unsafe fn start(
        &mut self,
        tag: u32,
        offset: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<bool, F::Error> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { (**self).start(tag, offset, buf, len) }
    }
    fn poll(&mut self) -> Option<(u32, Result<(), F::Error>)> {
        (**self).poll()
    }
    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        (**self).with_device(f)
    }
}

/// Page-cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Page lookups served without reading the device (resident reads count as hits).
    pub hits: u64,
    /// Page lookups that had to read.
    pub misses: u64,
    /// Bytes read from the file source.
    pub bytes_read: u64,
    /// Window pages refilled (evicting what they held).
    pub refills: u64,
    /// Time spent waiting for the device, in the clock's units (0 without a clock).
    pub stall: u64,
    /// Pages read ahead of need (counted in `bytes_read` too).
    pub prefetched: u64,
    /// Lookups that found their page read ahead but still in flight, and waited.
    pub late: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    /// The device is filling it (read-ahead).
    Loading,
    Ready,
}

/// How many announced ranges the cache remembers.
const HINTS: usize = 4;

struct Window<F> {
    src: F,
    /// `slots * page` bytes. A raw allocation, not a `Vec`: the device writes into loading slots
    /// while the cache reads others, so no reference ever spans more than one ready slot.
    mem: *mut u8,
    mem_len: usize,
    /// Page index held by each slot.
    tag: Vec<Option<u64>>,
    state: Vec<State>,
    /// Last use of each slot (a counter), for LRU.
    used: Vec<u64>,
    /// Read at least once since it was filled (a read-ahead page is not, until it is needed).
    consumed: Vec<bool>,
    clock: u64,
    /// Announced page ranges still to read ahead, oldest first.
    hints: heapless::Deque<(u64, u64), HINTS>,
}

// SAFETY: `mem` is owned by the window (allocated in `PageCache::with_options`, freed in `Drop`) and
// only touched under the cache's lock; the source moves with it.
unsafe impl<F: Send> Send for Window<F> {}

impl<F> Window<F> {
    fn slots(&self) -> usize {
        self.tag.len()
    }
    fn find(&self, index: u64) -> Option<usize> {
        self.tag.iter().position(|t| *t == Some(index))
    }
    /// Pages in flight or read ahead and not yet used.
    fn ahead(&self) -> usize {
        (0..self.slots())
            .filter(|&s| {
                self.state[s] == State::Loading
                    || (self.state[s] == State::Ready && !self.consumed[s])
            })
            .count()
    }
    fn used_ready(&self, s: usize) -> bool {
        self.state[s] == State::Ready && self.consumed[s]
    }
    /// A slot a read-ahead may take: empty, or holding a page already used that is not among the
    /// [`MIN_WINDOW_PAGES`] most recently used (least recently used first). So read-ahead never
    /// takes a page read ahead and not yet used, never one in flight, and never the working set the
    /// cores are reading from (a window as large as the one without read-ahead).
    fn spare(&self) -> Option<usize> {
        let n = self.slots();
        let newer = |s: usize| {
            (0..n)
                .filter(|&t| self.used_ready(t) && self.used[t] > self.used[s])
                .count()
        };
        (0..n)
            .filter(|&s| {
                self.state[s] == State::Empty
                    || (self.used_ready(s) && newer(s) >= MIN_WINDOW_PAGES)
            })
            .min_by_key(|&s| (self.state[s] != State::Empty, self.used[s]))
    }
    /// A slot a demand miss may take: as [`Window::spare`], else a used page (LRU), else any ready
    /// slot (LRU).
    fn victim(&self) -> Option<usize> {
        self.spare().or_else(|| {
            (0..self.slots())
                .filter(|&s| self.state[s] == State::Ready)
                .min_by_key(|&s| (!self.consumed[s], self.used[s]))
        })
    }
    /// The bytes of slot `s`.
    ///
    /// # Safety
    /// The slot must not be loading (the device may be writing it).
    unsafe fn slot_mut(&mut self, s: usize, page: usize) -> &mut [u8] {
        // SAFETY: `s < slots`, so the range is inside the allocation; the caller rules out the
        // device, and `&mut self` rules out every other user.
        unsafe { core::slice::from_raw_parts_mut(self.mem.add(s * page), page) }
    }
}

/// A fixed-size cache over a [`FileSource`], implementing [`Storage`].
pub struct PageCache<F: FileSource> {
    len: u64,
    page: usize,
    /// File bytes `0..resident.len()`, pinned.
    resident: Box<[u8]>,
    window: spin::Mutex<Window<F>>,
    /// Read-ahead budget in pages (0: off).
    readahead: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    bytes_read: AtomicU64,
    refills: AtomicU64,
    stall: AtomicU64,
    prefetched: AtomicU64,
    late: AtomicU64,
    /// Time source for stall accounting (nanoseconds), if set.
    clock: Option<fn() -> u64>,
}

impl<F: FileSource> Drop for PageCache<F> {
    fn drop(&mut self) {
        let w = self.window.get_mut();
        // Reads in flight write into the window: let them finish before freeing it.
        while w.state.contains(&State::Loading) {
            match w.src.poll() {
                Some((tag, _)) => {
                    if let Some(st) = w.state.get_mut(tag as usize) {
                        *st = State::Empty;
                    }
                }
                None => core::hint::spin_loop(),
            }
        }
        if w.mem_len > 0 {
            // SAFETY: allocated in `with_options` as a boxed slice of exactly `mem_len` bytes.
            drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(w.mem, w.mem_len)) });
        }
    }
}

impl<F: FileSource> fmt::Debug for PageCache<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCache")
            .field("len", &self.len)
            .field("page", &self.page)
            .field("resident", &self.resident.len())
            .field("readahead", &self.readahead)
            .finish_non_exhaustive()
    }
}

/// Why a cache could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// Page size 0, not a multiple of 512, or a cache smaller than two pages for a file that does
    /// not fit.
    BadSize { what: &'static str, value: u64 },
    /// Loading the resident part failed.
    Load(StorageError),
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::BadSize { what, value } => write!(f, "page cache: bad {what} {value}"),
            CacheError::Load(e) => write!(f, "page cache: loading the model: {e}"),
        }
    }
}

/// Streamed pages to keep when the file does not fit: enough for the largest tensor chunk in flight
/// on every core, small next to the resident part.
pub const MIN_WINDOW_PAGES: usize = 8;

/// Most pages read ahead at once (they are added to the window).
pub const MAX_READAHEAD: usize = 8;

/// Pages read ahead unless configured: 1 MiB at the default page size, about half a layer of the
/// default model, enough to keep the device busy while a matrix is computed.
pub const DEFAULT_READAHEAD: usize = 4;

/// How the cache spends its capacity when the file does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Pin the file's first `capacity - window` bytes and stream the rest through a small window:
    /// the forward pass reads the file in the same order every token, so each token reads only the
    /// part that is not pinned (about M - C bytes).
    ResidentPrefix,
    /// All capacity is one least-recently-used window (what an OS page cache does under mmap). With
    /// a cyclic scan larger than the cache it evicts each page just before it is needed again, so
    /// every token reads about the whole file. Kept for comparison.
    Lru,
}

/// How to build a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub policy: Policy,
    /// Pages to read ahead of the forward pass (0 turns read-ahead off; at most
    /// [`MAX_READAHEAD`]). Only a source with a queue ([`FileSource::queue_depth`] > 0) reads ahead.
    pub readahead: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policy: Policy::ResidentPrefix,
            readahead: DEFAULT_READAHEAD,
        }
    }
}

impl<F: FileSource> PageCache<F> {
    /// A cache of at most `capacity` bytes over `src` with pages of `page` bytes. If the file fits,
    /// it is all resident; otherwise the first `capacity - window` bytes are, and the rest streams
    /// through a window of [`MIN_WINDOW_PAGES`] pages. The resident part is read now, in chunks of
    /// `page` bytes, calling `progress(done, total)` after each.
    pub fn new(
        src: F,
        capacity: u64,
        page: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, CacheError> {
        Self::with_options(src, capacity, page, Options::default(), progress)
    }

    /// [`PageCache::new`] with a choice of [`Policy`] and no read-ahead.
    pub fn with_policy(
        src: F,
        capacity: u64,
        page: usize,
        policy: Policy,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, CacheError> {
        Self::with_options(
            src,
            capacity,
            page,
            Options {
                policy,
                readahead: 0,
            },
            progress,
        )
    }

    /// [`PageCache::new`] with every choice.
    pub fn with_options(
        mut src: F,
        capacity: u64,
        page: usize,
        opts: Options,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, CacheError> {
        if page == 0 || !page.is_multiple_of(512) {
            return Err(CacheError::BadSize {
                what: "page size",
                value: page as u64,
            });
        }
        if opts.readahead > MAX_READAHEAD {
            return Err(CacheError::BadSize {
                what: "read-ahead (pages)",
                value: opts.readahead as u64,
            });
        }
        let len = src.len();
        let readahead = if src.queue_depth() == 0 {
            0
        } else {
            opts.readahead.min(src.queue_depth())
        };
        // Read-ahead pages come on top of the window the cores read from, so they never crowd it.
        let window_pages = MIN_WINDOW_PAGES + readahead;
        let window_bytes = (window_pages * page) as u64;
        let (resident_len, slots) = if len <= capacity {
            (len, 0)
        } else {
            if capacity < window_bytes + page as u64 {
                return Err(CacheError::BadSize {
                    what: "capacity (bytes)",
                    value: capacity,
                });
            }
            match opts.policy {
                Policy::ResidentPrefix => {
                    // Resident part rounded down to whole pages, so streamed pages start
                    // page-aligned.
                    let r = (capacity - window_bytes) / page as u64 * page as u64;
                    (r, window_pages)
                }
                Policy::Lru => (0, (capacity / page as u64) as usize),
            }
        };
        let mut resident = vec![0u8; resident_len as usize].into_boxed_slice();
        let mut done = 0u64;
        for chunk in resident.chunks_mut(page) {
            src.read(done, chunk).map_err(|e| {
                CacheError::Load(StorageError::Io {
                    offset: done,
                    len: chunk.len() as u64,
                    detail: e.to_string(),
                })
            })?;
            done += chunk.len() as u64;
            progress(done, resident_len);
        }
        let mem_len = slots * page;
        let mem = Box::into_raw(vec![0u8; mem_len].into_boxed_slice()) as *mut u8;
        Ok(Self {
            len,
            page,
            resident,
            window: spin::Mutex::new(Window {
                src,
                mem,
                mem_len,
                tag: vec![None; slots],
                state: vec![State::Empty; slots],
                used: vec![0; slots],
                consumed: vec![false; slots],
                clock: 0,
                hints: heapless::Deque::new(),
            }),
            readahead,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bytes_read: AtomicU64::new(resident_len),
            refills: AtomicU64::new(0),
            stall: AtomicU64::new(0),
            prefetched: AtomicU64::new(0),
            late: AtomicU64::new(0),
            clock: None,
        })
    }

    /// Account the time spent reading the device on misses with `clock` (nanoseconds).
    pub fn set_clock(&mut self, clock: fn() -> u64) {
        self.clock = Some(clock);
    }

    /// Lend `f` the block device under the file (see [`FileSource::with_device`]); false if the
    /// source has none.
    pub fn with_device(&self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        self.window.lock().src.with_device(f)
    }

    /// Bytes pinned in RAM.
    pub fn resident_bytes(&self) -> u64 {
        self.resident.len() as u64
    }

    /// Bytes of RAM the cache holds (pinned part and window).
    pub fn ram_bytes(&self) -> u64 {
        self.resident.len() as u64 + self.window.lock().mem_len as u64
    }

    pub fn page_size(&self) -> usize {
        self.page
    }

    /// Pages read ahead at most (0 when off, or when the source cannot queue reads).
    pub fn readahead(&self) -> usize {
        self.readahead
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            refills: self.refills.load(Ordering::Relaxed),
            stall: self.stall.load(Ordering::Relaxed),
            prefetched: self.prefetched.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
        }
    }

    fn now(&self) -> Option<u64> {
        self.clock.map(|c| c())
    }

    fn add_stall(&self, t0: Option<u64>) {
        if let (Some(c), Some(t0)) = (self.clock, t0) {
            self.stall
                .fetch_add(c().saturating_sub(t0), Ordering::Relaxed);
        }
    }

    /// Bytes of page `index` in the file.
    fn fill(&self, index: u64) -> usize {
        let start = index * self.page as u64;
        (self.len - start).min(self.page as u64) as usize
    }

    /// Take one finished read-ahead off the source, if any. A failed one leaves its slot empty: the
    /// demand read that wants the page reads it again synchronously (with the device's retries) and
    /// reports the error if that fails too.
    fn reap(&self, w: &mut Window<F>) -> bool {
        let Some((tag, r)) = w.src.poll() else {
            return false;
        };
        let s = tag as usize;
        if s < w.slots() && w.state[s] == State::Loading {
            if r.is_ok() {
                w.state[s] = State::Ready;
            } else {
                w.state[s] = State::Empty;
                w.tag[s] = None;
            }
        }
        true
    }

    /// Start reading ahead from the announced ranges while the budget allows.
    fn pump(&self, w: &mut Window<F>) {
        if self.readahead == 0 {
            return;
        }
        while self.reap(w) {}
        while let Some(&(first, end)) = w.hints.front() {
            if first >= end {
                w.hints.pop_front();
                continue;
            }
            if w.find(first).is_some() {
                if let Some(h) = w.hints.front_mut() {
                    h.0 += 1;
                }
                continue;
            }
            if w.ahead() >= self.readahead {
                return;
            }
            let Some(s) = w.spare() else {
                return;
            };
            if w.tag[s].is_some() {
                self.refills.fetch_add(1, Ordering::Relaxed);
            }
            let fill = self.fill(first);
            let start = first * self.page as u64;
            w.tag[s] = Some(first);
            w.consumed[s] = false;
            w.clock += 1;
            w.used[s] = w.clock;
            // SAFETY: slot `s` is inside the window allocation and has room for a whole page
            // (`fill` rounded up to 512 is at most `page`, a multiple of 512); it is marked loading
            // below, so nothing touches it until the source reports it.
            let r = unsafe { w.src.start(s as u32, start, w.mem.add(s * self.page), fill) };
            match r {
                Ok(done) => {
                    w.state[s] = if done { State::Ready } else { State::Loading };
                    self.bytes_read.fetch_add(fill as u64, Ordering::Relaxed);
                    self.prefetched.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    // The demand read will try again and report it.
                    w.state[s] = State::Empty;
                    w.tag[s] = None;
                    w.hints.clear();
                    return;
                }
            }
            if let Some(h) = w.hints.front_mut() {
                h.0 += 1;
            }
        }
    }

    /// Copy streamed bytes `offset..offset+buf.len()` (all at or past the resident part).
    fn read_streamed(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let page = self.page as u64;
        let mut w = self.window.lock();
        let w = &mut *w;
        let mut done = 0usize;
        while done < buf.len() {
            let pos = offset + done as u64;
            let index = pos / page;
            let in_page = (pos % page) as usize;
            let n = (self.page - in_page).min(buf.len() - done);
            w.clock += 1;
            let slot = loop {
                match w.find(index) {
                    Some(s) if w.state[s] == State::Ready => {
                        self.hits.fetch_add(1, Ordering::Relaxed);
                        break s;
                    }
                    Some(_) => {
                        // Read ahead, still in flight: wait for it (or for its failure).
                        self.late.fetch_add(1, Ordering::Relaxed);
                        let t0 = self.now();
                        while w.find(index).is_some_and(|s| w.state[s] == State::Loading) {
                            if !self.reap(w) {
                                core::hint::spin_loop();
                            }
                        }
                        self.add_stall(t0);
                    }
                    None => {
                        self.misses.fetch_add(1, Ordering::Relaxed);
                        let t0 = self.now();
                        let s = loop {
                            if let Some(s) = w.victim() {
                                break s;
                            }
                            // Every slot in flight: wait for one.
                            if !self.reap(w) {
                                core::hint::spin_loop();
                            }
                        };
                        if w.tag[s].is_some() {
                            self.refills.fetch_add(1, Ordering::Relaxed);
                        }
                        w.tag[s] = None;
                        w.state[s] = State::Empty;
                        let start = index * page;
                        let fill = self.fill(index);
                        // SAFETY: slot `s` is inside the allocation and empty (not loading), and
                        // the lock keeps every other user out.
                        let dst = unsafe {
                            core::slice::from_raw_parts_mut(w.mem.add(s * self.page), self.page)
                        };
                        w.src
                            .read(start, &mut dst[..fill])
                            .map_err(|e| StorageError::Io {
                                offset: start,
                                len: fill as u64,
                                detail: e.to_string(),
                            })?;
                        self.add_stall(t0);
                        self.bytes_read.fetch_add(fill as u64, Ordering::Relaxed);
                        w.tag[s] = Some(index);
                        w.state[s] = State::Ready;
                        break s;
                    }
                }
            };
            w.used[slot] = w.clock;
            w.consumed[slot] = true;
            // SAFETY: the slot is ready.
            let src = unsafe { w.slot_mut(slot, self.page) };
            buf[done..done + n].copy_from_slice(&src[in_page..in_page + n]);
            done += n;
        }
        self.pump(w);
        Ok(())
    }
}

impl<F: FileSource> Storage for PageCache<F> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        check_range(offset, buf.len() as u64, self.len)?;
        let r = self.resident.len() as u64;
        let split = if offset < r {
            ((r - offset) as usize).min(buf.len())
        } else {
            0
        };
        if split > 0 {
            let s = offset as usize;
            buf[..split].copy_from_slice(&self.resident[s..s + split]);
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        if split < buf.len() {
            self.read_streamed(offset + split as u64, &mut buf[split..])?;
        }
        Ok(())
    }

    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64)?;
        if end > self.resident.len() as u64 {
            return None;
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(&self.resident[offset as usize..end as usize])
    }

    fn prefetch(&self, offset: u64, len: u64) {
        if self.readahead == 0 || len == 0 {
            return;
        }
        let page = self.page as u64;
        let start = offset.max(self.resident.len() as u64);
        let end = offset.saturating_add(len).min(self.len);
        if start >= end {
            return;
        }
        let range = (start / page, end.div_ceil(page));
        let mut w = self.window.lock();
        let w = &mut *w;
        if w.hints.iter().any(|h| h.1 == range.1) {
            return;
        }
        if w.hints.is_full() {
            w.hints.pop_front();
        }
        let _ = w.hints.push_back(range);
        self.pump(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in memory that counts the bytes read from it.
    struct Mem {
        data: Vec<u8>,
        bytes: alloc::sync::Arc<AtomicU64>,
    }
    impl FileSource for Mem {
        type Error = &'static str;
        fn len(&self) -> u64 {
            self.data.len() as u64
        }
        fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
            let s = offset as usize;
            let src = self.data.get(s..s + buf.len()).ok_or("read past the end")?;
            buf.copy_from_slice(src);
            self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
            Ok(())
        }
    }

    fn data(n: usize) -> Vec<u8> {
        let mut x = 0x1234_5678u32;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    #[test]
    fn whole_file_resident_reads_in_place() {
        let d = data(10_000);
        let mut calls = vec![];
        let c = PageCache::new(
            Mem {
                data: d.clone(),
                bytes: Default::default(),
            },
            1 << 20,
            4096,
            &mut |a, b| calls.push((a, b)),
        )
        .unwrap();
        assert_eq!(
            calls,
            vec![(4096, 10_000), (8192, 10_000), (10_000, 10_000)]
        );
        assert_eq!(c.resident(100, 5000).unwrap(), &d[100..5100]);
        let mut b = vec![0; 3000];
        c.read_at(9000, &mut b[..1000]).unwrap();
        assert_eq!(&b[..1000], &d[9000..]);
        assert!(c.read_at(9001, &mut b[..1000]).is_err());
        assert_eq!(c.stats().bytes_read, 10_000);
        assert_eq!(c.stats().misses, 0);
    }

    /// Reads that cross page boundaries and the resident/streamed boundary equal direct reads, and
    /// the counters add up.
    #[test]
    fn streamed_reads_equal_direct_reads() {
        let page = 1024;
        let d = data(64 * page + 300);
        // Room for 20 pages: 12 resident, 8 streamed.
        let counted = alloc::sync::Arc::new(AtomicU64::new(0));
        let src = Mem {
            data: d.clone(),
            bytes: counted.clone(),
        };
        let c = PageCache::new(src, 20 * page as u64, page, &mut |_, _| {}).unwrap();
        assert_eq!(c.resident_bytes(), 12 * page as u64);
        assert!(c.resident(0, 12 * page).is_some());
        assert!(c.resident(12 * page as u64 - 1, 2).is_none());
        let mut x = 99u64;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 33) % d.len() as u64;
            let n = ((x >> 13) % 5000) as usize;
            let n = n.min(d.len() - off as usize);
            let mut b = vec![0u8; n];
            c.read_at(off, &mut b).unwrap();
            assert_eq!(
                b,
                &d[off as usize..off as usize + n],
                "offset {off} len {n}"
            );
        }
        let s = c.stats();
        assert!(s.misses > 0 && s.refills > 0 && s.hits > 0);
        // The counter is what the source saw; every miss read at most one page.
        assert_eq!(s.bytes_read, counted.load(Ordering::Relaxed));
        assert!(s.bytes_read <= 12 * page as u64 + s.misses * page as u64);
        assert_eq!(s.refills, s.misses - 8);
    }

    #[test]
    fn bad_sizes_and_failing_sources_are_errors() {
        let mk = || Mem {
            data: data(100_000),
            bytes: Default::default(),
        };
        assert!(matches!(
            PageCache::new(mk(), 1 << 20, 0, &mut |_, _| {}),
            Err(CacheError::BadSize { .. })
        ));
        assert!(matches!(
            PageCache::new(mk(), 1 << 20, 1000, &mut |_, _| {}),
            Err(CacheError::BadSize { .. })
        ));
        assert!(matches!(
            PageCache::new(mk(), 4096, 1024, &mut |_, _| {}),
            Err(CacheError::BadSize { .. })
        ));
        struct Broken;
        impl FileSource for Broken {
            type Error = &'static str;
            fn len(&self) -> u64 {
                4096
            }
            fn read(&mut self, _: u64, _: &mut [u8]) -> Result<(), &'static str> {
                Err("card removed")
            }
        }
        let e = PageCache::new(Broken, 1 << 20, 1024, &mut |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("card removed"));
    }

    /// A source with a request queue: reads start, and finish only when polled (every other poll,
    /// oldest first), so the cache really has reads in flight. Every `fail_every`-th queued read
    /// fails (the cache must then read the page again synchronously).
    struct Queued {
        mem: Mem,
        queue: alloc::collections::VecDeque<(u32, u64, usize, usize)>,
        polls: u64,
        started: u64,
        fail_every: u64,
        max_in_flight: usize,
    }
    impl FileSource for Queued {
        type Error = &'static str;
        fn len(&self) -> u64 {
            self.mem.len()
        }
        fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
            self.mem.read(offset, buf)
        }
        fn queue_depth(&self) -> usize {
            16
        }
        unsafe fn start(
            &mut self,
            tag: u32,
            offset: u64,
            buf: *mut u8,
            len: usize,
        ) -> Result<bool, &'static str> {
            assert_eq!(offset % 512, 0);
            self.queue.push_back((tag, offset, buf as usize, len));
            self.max_in_flight = self.max_in_flight.max(self.queue.len());
            Ok(false)
        }
        fn poll(&mut self) -> Option<(u32, Result<(), &'static str>)> {
            self.polls += 1;
            if self.polls % 2 == 0 {
                return None;
            }
            let (tag, offset, buf, len) = self.queue.pop_front()?;
            self.started += 1;
            if self.fail_every > 0 && self.started % self.fail_every == 0 {
                return Some((tag, Err("injected queued-read failure")));
            }
            // SAFETY: the cache keeps the slot untouched while the read is queued.
            let b = unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len) };
            Some((tag, self.mem.read(offset, b)))
        }
    }

    /// With read-ahead on a queued source: reads equal direct reads, whatever is announced (right,
    /// wrong or stale hints) and with some queued reads failing; announced pages are read ahead
    /// and found ready; nothing is left in flight.
    #[test]
    fn read_ahead_returns_the_same_bytes_and_hides_the_reads() {
        let page = 1024;
        let d = data(64 * page + 300);
        let counted = alloc::sync::Arc::new(AtomicU64::new(0));
        let src = Queued {
            mem: Mem {
                data: d.clone(),
                bytes: counted.clone(),
            },
            queue: Default::default(),
            polls: 0,
            started: 0,
            fail_every: 7,
            max_in_flight: 0,
        };
        let opts = Options {
            policy: Policy::ResidentPrefix,
            readahead: 4,
        };
        let c = PageCache::with_options(src, 24 * page as u64, page, opts, &mut |_, _| {}).unwrap();
        assert_eq!(c.readahead(), 4);
        assert_eq!(c.resident_bytes(), 12 * page as u64);
        // A sequential scan of the streamed part, announcing the next 3 pages before each read:
        // most pages are read ahead.
        let mut b = vec![0u8; page];
        for p in 12..64u64 {
            c.prefetch((p + 1) * page as u64, 3 * page as u64);
            c.read_at(p * page as u64, &mut b).unwrap();
            assert_eq!(b, &d[p as usize * page..(p as usize + 1) * page]);
        }
        let s = c.stats();
        assert!(s.prefetched >= 40, "{s:?}");
        assert!(s.misses <= 12, "{s:?}");
        // Random reads with random hints.
        let mut x = 7u64;
        for _ in 0..3000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 33) % d.len() as u64;
            let n = (((x >> 13) % 3000) as usize).min(d.len() - off as usize);
            if x % 3 == 0 {
                c.prefetch((x >> 20) % d.len() as u64, (x >> 40) % 8000);
            }
            let mut b = vec![0u8; n];
            c.read_at(off, &mut b).unwrap();
            assert_eq!(
                b,
                &d[off as usize..off as usize + n],
                "offset {off} len {n}"
            );
        }
        let w = c.window.lock();
        assert!(
            w.src.max_in_flight <= 4,
            "in flight {}",
            w.src.max_in_flight
        );
        drop(w);
        // Failed queued reads were counted when issued but never delivered.
        let s = c.stats();
        assert!(s.bytes_read >= counted.load(Ordering::Relaxed), "{s:?}");
        // Dropping the cache waits for the reads still in flight.
        drop(c);
    }

    /// A source without a queue never reads ahead, whatever is asked.
    #[test]
    fn synchronous_sources_do_not_read_ahead() {
        let page = 1024;
        let src = Mem {
            data: data(64 * page),
            bytes: Default::default(),
        };
        let c = PageCache::with_options(
            src,
            24 * page as u64,
            page,
            Options::default(),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(c.readahead(), 0);
        c.prefetch(30 * page as u64, 8 * page as u64);
        assert_eq!(c.stats().prefetched, 0);
        assert_eq!(c.stats().bytes_read, c.resident_bytes());
        assert!(matches!(
            PageCache::with_options(
                Mem {
                    data: data(100),
                    bytes: Default::default()
                },
                1 << 20,
                1024,
                Options {
                    policy: Policy::ResidentPrefix,
                    readahead: MAX_READAHEAD + 1
                },
                &mut |_, _| {}
            ),
            Err(CacheError::BadSize { .. })
        ));
    }
}
