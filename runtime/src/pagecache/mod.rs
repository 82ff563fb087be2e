//! The page cache: a fixed amount of RAM standing in for mmap of the model file.
//!
//! The pinned part: runs of the file held in RAM, filled once at load with large sequential reads;
//! [`Storage::resident`] hands out slices of them, so when the whole model fits the forward pass
//! reads weights in place with no copy. Which runs: the ranges the caller wants, most valuable
//! first ([`order`]: the tensors that save the most card bytes per byte of RAM), as far as the
//! capacity goes. The rest of the file is streamed through a window of fixed-size pages behind a
//! lock (any core may read).
//!
//! Replacement suits the forward pass's cyclic order ([`Policy::ResidentPrefix`]): every token reads
//! the same tensors in the same order, so a fixed resident part plus a small streaming window reads
//! about M - C bytes per token (less when the bytes left out are ones a token does not read), where least-recently-used eviction ([`Policy::Lru`], kept for comparison)
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

use alloc::string::ToString;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use inference::fit::{self, TooLarge};
use inference::oom::{self, OutOfMemory};
use inference::storage::{check_range, Storage, StorageError};
use pinned::Pinned;

mod aligned;
pub mod order;
mod pinned;

#[cfg(feature = "std")]
pub mod hostfile;
mod source;
pub use source::{DynBlock, DynDev, FileSource, PageRead};

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
    /// Owns the slots' memory (its start is `mem`), page-aligned for the card's DMA; freed
    /// after `Drop` has let the reads in flight end.
    _slots: aligned::AlignedBuf,
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
    /// The order the forward pass reads the file in, when known ([`PageCache::set_schedule`]).
    sched: Schedule,
}

/// One range of the read schedule: file bytes `start..end`, read at cycle position `cyc` (the
/// bytes the pass reads before it in one token).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    cyc: u64,
}

/// The forward pass's per-token read order, for eviction that knows when each page is needed
/// next (Belady's rule on a known cycle): spans sorted by file offset, the cycle's length, and
/// where in the cycle the pass is now (the position of the last read).
#[derive(Debug, Default)]
struct Schedule {
    spans: Vec<Span>,
    total: u64,
    now: u64,
    /// The cycle positions of the last reads, one per core that reads at once: each core reads
    /// its own rows of the same matrix, so a page holding one of them is in use (needed now),
    /// wherever `now` is.
    recent: [u64; MAX_READERS],
    readers: usize,
    next: usize,
}

/// Most cores reading the cache at once that the schedule tracks.
const MAX_READERS: usize = 16;

impl Schedule {
    /// How far ahead in the cycle the bytes `start..end` are needed next (`total` when the
    /// schedule does not read them, or there is no schedule).
    fn distance(&self, start: u64, end: u64) -> u64 {
        let first = self.spans.partition_point(|s| s.end <= start);
        self.spans[first..]
            .iter()
            .take_while(|s| s.start < end)
            .map(|s| {
                let at = s.cyc + start.saturating_sub(s.start);
                let to = s.cyc + (end.min(s.end) - s.start);
                if self.recent[..self.readers]
                    .iter()
                    .any(|&r| at <= r && r < to)
                {
                    return 0;
                }
                (at + self.total - self.now) % self.total.max(1)
            })
            .min()
            .unwrap_or(self.total)
    }

    /// The pass is reading at `offset`: move the cycle's position there.
    fn reading(&mut self, offset: u64) {
        let i = self.spans.partition_point(|s| s.end <= offset);
        if let Some(s) = self.spans.get(i).filter(|s| s.start <= offset) {
            self.now = s.cyc + (offset - s.start);
            self.recent[self.next] = self.now;
            self.next = (self.next + 1) % self.readers.max(1);
        }
    }
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
    /// How far ahead in the read cycle slot `s`'s page is needed next.
    fn next_use(&self, s: usize, page: u64) -> u64 {
        match self.tag[s] {
            Some(t) => self.sched.distance(t * page, (t + 1) * page),
            None => 0,
        }
    }
    /// A slot a read-ahead of page `want` may take: empty, or holding a page already used that
    /// is not among the [`MIN_WINDOW_PAGES`] most recently used (least recently used first). So
    /// read-ahead never takes a page read ahead and not yet used, never one in flight, and never
    /// the working set the cores are reading from (a window as large as the one without
    /// read-ahead). With a schedule, only a page needed later than `want` is taken, the latest
    /// first.
    fn spare(&self, want: Option<u64>, page: u64) -> Option<usize> {
        let n = self.slots();
        let newer = |s: usize| {
            (0..n)
                .filter(|&t| self.used_ready(t) && self.used[t] > self.used[s])
                .count()
        };
        let scheduled = !self.sched.spans.is_empty();
        if scheduled {
            // Only a used page needed later than `want`, the latest first, and never one the
            // cores are reading now.
            let floor = want.map_or(0, |p| self.sched.distance(p * page, (p + 1) * page));
            return (0..n)
                .filter(|&s| {
                    self.state[s] == State::Empty
                        || (self.used_ready(s) && self.next_use(s, page) > floor)
                })
                .max_by_key(|&s| {
                    let empty = self.state[s] == State::Empty;
                    (empty, self.next_use(s, page), u64::MAX - self.used[s])
                });
        }
        (0..n)
            .filter(|&s| {
                self.state[s] == State::Empty
                    || (self.used_ready(s) && newer(s) >= MIN_WINDOW_PAGES)
            })
            .min_by_key(|&s| (self.state[s] != State::Empty, self.used[s]))
    }
    /// A slot a demand miss may take: empty first; with a schedule, the ready page needed
    /// latest (Belady: on the pass's fixed cycle this keeps the pages needed soonest, such as a
    /// page two neighbouring tensors share, and lets each page read once per token go first);
    /// without one, as [`Window::spare`], else a used page (LRU), else any ready slot (LRU).
    fn victim(&self, page: u64) -> Option<usize> {
        if let Some(s) = (0..self.slots()).find(|&s| self.state[s] == State::Empty) {
            return Some(s);
        }
        if !self.sched.spans.is_empty() {
            return (0..self.slots())
                .filter(|&s| self.state[s] == State::Ready)
                .max_by_key(|&s| (self.next_use(s, page), u64::MAX - self.used[s]));
        }
        self.spare(None, page).or_else(|| {
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
    /// The runs of the file pinned in RAM.
    pinned: Pinned,
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
    }
}

impl<F: FileSource> fmt::Debug for PageCache<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCache")
            .field("len", &self.len)
            .field("page", &self.page)
            .field("resident", &self.pinned.bytes())
            .field("readahead", &self.readahead)
            .finish_non_exhaustive()
    }
}

/// Why a cache could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// Page size 0 or not a multiple of 512, or too many read-ahead pages.
    BadSize { what: &'static str, value: u64 },
    /// A capacity below the least a file that does not fit needs: its window and one page more.
    TooSmall {
        capacity: u64,
        least: u64,
        page: u64,
    },
    /// Loading the resident part failed.
    Load(StorageError),
    /// The pinned part or the window is more than the address space holds.
    TooLarge(TooLarge),
    /// The pinned part, the window or a table could not be allocated.
    OutOfMemory(OutOfMemory),
}

impl From<OutOfMemory> for CacheError {
    fn from(e: OutOfMemory) -> Self {
        CacheError::OutOfMemory(e)
    }
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::BadSize { what, value } => write!(f, "page cache: bad {what} {value}"),
            CacheError::TooSmall {
                capacity,
                least,
                page,
            } => write!(
                f,
                "page cache: cache = {} KiB is too small for a model that does not fit: it needs \
                 at least {} KiB ({} pages of {} KiB: the streamed window and one more); set a \
                 larger cache or a smaller page",
                capacity >> 10,
                least >> 10,
                least / page.max(&1),
                page >> 10
            ),
            CacheError::Load(e) => write!(f, "page cache: loading the model: {e}"),
            CacheError::TooLarge(e) => write!(f, "page cache: {e}"),
            CacheError::OutOfMemory(e) => write!(f, "page cache: {e}"),
        }
    }
}

/// Streamed pages to keep when the file does not fit, at least: enough for the largest tensor
/// chunk in flight on every core.
pub const MIN_WINDOW_PAGES: usize = 8;

/// The pinned runs and the window's slots for a cache of `capacity` bytes over a file of `len`
/// whose reader wants the `wanted` ranges (the whole file, for a board alone): everything pinned
/// and no window when the whole file fits; every wanted range pinned and a minimal window when
/// they fit; otherwise the window of [`window_pages`] and the wanted ranges pinned, most wanted
/// first, in what is left (none under [`Policy::Lru`]).
fn layout(
    len: u64,
    capacity: u64,
    page: usize,
    readahead: usize,
    policy: Policy,
    wanted: &[(u64, u64)],
) -> Result<(Vec<(u64, u64)>, usize), CacheError> {
    let pg = page as u64;
    let all = pinned::plan(wanted, len, pg, u64::MAX)?;
    let need: u64 = all.iter().map(|r| r.1).sum();
    if need == len && len <= capacity {
        return Ok((all, 0));
    }
    // Read-ahead pages come on top of the window the cores read from, so they never crowd it.
    let small = fit::bytes((MIN_WINDOW_PAGES + readahead) as u64, pg);
    if policy == Policy::ResidentPrefix && need.saturating_add(small) <= capacity {
        return Ok((all, MIN_WINDOW_PAGES + readahead));
    }
    let window_pages = window_pages(capacity, page) + readahead;
    let window_bytes = fit::bytes(window_pages as u64, pg);
    if capacity < window_bytes + pg {
        return Err(CacheError::TooSmall {
            capacity,
            least: window_bytes + pg,
            page: pg,
        });
    }
    Ok(match policy {
        Policy::ResidentPrefix => (
            pinned::plan(wanted, len, pg, capacity - window_bytes)?,
            window_pages,
        ),
        Policy::Lru => (
            Vec::new(),
            usize::try_from(capacity / pg).unwrap_or(usize::MAX),
        ),
    })
}

/// Check that the pinned `runs` and a window of `slots` pages fit the address space (`limit`
/// bytes), each and together, before any of it is allocated.
fn check_fits(runs: &[(u64, u64)], slots: usize, page: usize, limit: u64) -> Result<(), TooLarge> {
    let pinned: u64 = runs.iter().map(|r| r.1).sum();
    let window = fit::bytes(slots as u64, page as u64);
    let pieces = [
        ("its pinned part", pinned),
        ("its window", window),
        ("the whole", pinned.saturating_add(window)),
    ];
    for (what, bytes) in pieces {
        fit::fit_within(bytes, limit, || what.into())?;
    }
    Ok(())
}

/// Most streamed pages kept (16 MiB at the default page size).
pub const MAX_WINDOW_PAGES: usize = 64;

/// The window of a cache of `capacity` bytes (read-ahead pages come on top): a quarter of the
/// capacity, from [`MIN_WINDOW_PAGES`] to [`MAX_WINDOW_PAGES`] pages. With the read order known
/// ([`PageCache::set_schedule`]) the window keeps the pages needed soonest, so a larger one holds
/// the pages two tensors share (read twice a pass) and, every pass, some of the pages it streamed
/// the pass before: a token then reads M − C bytes (measured: 1.00x at 72–88 MiB for the default
/// model, against 1.06x–1.15x with 8 pages). Without the read order it is least recently used,
/// and every page of it is streamed again each pass.
pub fn window_pages(capacity: u64, page: usize) -> usize {
    let pages = capacity / page.max(1) as u64 / 4;
    (pages.min(MAX_WINDOW_PAGES as u64) as usize).max(MIN_WINDOW_PAGES)
}

/// Most pages read ahead at once (they are added to the window).
pub const MAX_READAHEAD: usize = 8;

/// Pages read ahead unless configured: 1 MiB at the default page size, about half a layer of the
/// default model, enough to keep the device busy while a matrix is computed.
pub const DEFAULT_READAHEAD: usize = 4;

/// How the cache spends its capacity when the file does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Pin `capacity - window` bytes of the wanted ranges, most valuable first, and stream the
    /// rest through a small window: the forward pass reads the same tensors in the same order every
    /// token, so each token reads only what it reads of the part that is not pinned.
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

/// What [`plan`] gives: the pinned `(start, length)` runs, the window's pages, the read-ahead.
pub type Plan = (Vec<(u64, u64)>, usize, usize);

/// The runs [`PageCache::for_ranges`] pins, its window's pages and its read-ahead, for a file of
/// `len` bytes on a source that queues `queue_depth` reads: what a caller can report before the
/// cache is filled.
pub fn plan(
    len: u64,
    queue_depth: usize,
    capacity: u64,
    page: usize,
    opts: Options,
    wanted: &[(u64, u64)],
) -> Result<Plan, CacheError> {
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
    let readahead = if queue_depth == 0 {
        0
    } else {
        opts.readahead.min(queue_depth)
    };
    let (runs, slots) = layout(len, capacity, page, readahead, opts.policy, wanted)?;
    Ok((runs, slots, readahead))
}

impl<F: FileSource> PageCache<F> {
    /// A cache of at most `capacity` bytes over `src` with pages of `page` bytes. If the file fits,
    /// it is all resident; otherwise the first `capacity - window` bytes are (a caller that knows
    /// the model uses [`PageCache::for_ranges`] with [`order`]'s ranges), and the rest streams
    /// through a window of [`window_pages`] pages. The resident part is read now, in chunks of
    /// `page` bytes, calling `progress(done, total)` after each.
    pub fn new(
        src: F,
        capacity: u64,
        page: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, CacheError> {
        Self::with_options(src, capacity, page, Options::default(), progress)
    }

    /// [`PageCache::new`] with every choice.
    pub fn with_options(
        src: F,
        capacity: u64,
        page: usize,
        opts: Options,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, CacheError> {
        let whole = [(0, src.len())];
        Self::for_ranges(src, capacity, page, opts, &whole, progress)
    }

    /// [`PageCache::with_options`] for a reader of only the `wanted` ranges of the file (a board
    /// of a ring, which runs some of the layers): they are pinned, most wanted first, as far as
    /// the capacity goes, and everything else streams. When they all fit, the window shrinks to
    /// [`MIN_WINDOW_PAGES`] (plus read-ahead) for stray reads.
    pub fn for_ranges(
        mut src: F,
        capacity: u64,
        page: usize,
        opts: Options,
        wanted: &[(u64, u64)],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, CacheError> {
        let len = src.len();
        let (runs, slots, readahead) = plan(len, src.queue_depth(), capacity, page, opts, wanted)?;
        check_fits(&runs, slots, page, fit::ADDRESS_LIMIT).map_err(CacheError::TooLarge)?;
        let mut pinned = Pinned::allocate(&runs)?;
        let resident_len = pinned.bytes();
        let mut done = 0u64;
        for (start, run) in pinned.runs_mut() {
            let mut at = start;
            for chunk in run.chunks_mut(page) {
                src.read(at, chunk).map_err(|e| {
                    CacheError::Load(StorageError::Io {
                        offset: at,
                        len: chunk.len() as u64,
                        detail: e.to_string(),
                    })
                })?;
                at += chunk.len() as u64;
                done += chunk.len() as u64;
                progress(done, resident_len);
            }
        }
        let mem_len = slots * page;
        let mut buf = aligned::AlignedBuf::zeroed(mem_len, "page cache window")?;
        let tables = "page cache slot table";
        let mem = buf.as_mut_ptr();
        Ok(Self {
            len,
            page,
            pinned,
            window: spin::Mutex::new(Window {
                src,
                _slots: buf,
                mem,
                mem_len,
                tag: oom::filled(slots, None, tables)?,
                state: oom::filled(slots, State::Empty, tables)?,
                used: oom::filled(slots, 0, tables)?,
                consumed: oom::filled(slots, false, tables)?,
                clock: 0,
                hints: heapless::Deque::new(),
                sched: Schedule::default(),
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

    /// Tell the cache the order the forward pass reads the file in, once per token: `ranges` are
    /// `(offset, length)` in read order (the model's matrices), read by `readers` cores at once
    /// (each its own rows). Eviction then keeps the streamed pages needed soonest
    /// (`Window::victim`); without it the cache uses its plain policy.
    ///
    /// The schedule is an optimisation: if its table cannot be allocated the cache keeps its plain
    /// policy (and the run goes on).
    pub fn set_schedule(&self, ranges: impl IntoIterator<Item = (u64, u64)>, readers: usize) {
        let mut spans = Vec::new();
        let mut cyc = 0u64;
        for (offset, len) in ranges {
            let end = offset.saturating_add(len).min(self.len);
            if offset < end && !spans.iter().any(|s: &Span| s.start == offset) {
                if spans.try_reserve(1).is_err() {
                    spans = Vec::new();
                    cyc = 0;
                    break;
                }
                spans.push(Span {
                    start: offset,
                    end,
                    cyc,
                });
                cyc += end - offset;
            }
        }
        spans.sort_by_key(|s| s.start);
        // Tensors never overlap; a schedule that does is not used.
        if spans.windows(2).any(|w| w[0].end > w[1].start) {
            spans.clear();
        }
        self.window.lock().sched = Schedule {
            spans,
            total: cyc,
            readers: readers.clamp(1, MAX_READERS),
            ..Schedule::default()
        };
    }

    /// Bytes pinned in RAM.
    pub fn resident_bytes(&self) -> u64 {
        self.pinned.bytes()
    }

    /// Bytes of `offset..offset + len` pinned in RAM.
    pub fn pinned_within(&self, offset: u64, len: u64) -> u64 {
        self.pinned.within(offset, len)
    }

    /// Bytes of RAM the cache holds (pinned part and window).
    pub fn ram_bytes(&self) -> u64 {
        self.pinned.bytes() + self.window.lock().mem_len as u64
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
            let Some(s) = w.spare(Some(first), self.page as u64) else {
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
            let r = unsafe {
                w.src.start(PageRead {
                    tag: s as u32,
                    offset: start,
                    buf: w.mem.add(s * self.page),
                    len: fill,
                })
            };
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

    /// Copy streamed bytes `offset..offset+buf.len()` (none of them pinned).
    fn read_streamed(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let page = self.page as u64;
        let mut w = self.window.lock();
        let w = &mut *w;
        w.sched.reading(offset);
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
                            if let Some(s) = w.victim(page) {
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
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let left = buf.len() - done;
            if let Some(run) = self.pinned.at(at) {
                let n = run.len().min(left);
                buf[done..done + n].copy_from_slice(&run[..n]);
                self.hits.fetch_add(1, Ordering::Relaxed);
                done += n;
            } else {
                let upto = self.pinned.next_start(at).unwrap_or(u64::MAX);
                let n = ((upto - at).min(left as u64)) as usize;
                self.read_streamed(at, &mut buf[done..done + n])?;
                done += n;
            }
        }
        Ok(())
    }

    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let run = self.pinned.at(offset)?.get(..len)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(run)
    }

    fn prefetch(&self, offset: u64, len: u64) {
        if self.readahead == 0 || len == 0 {
            return;
        }
        let page = self.page as u64;
        let mut start = offset;
        while let Some(run) = self.pinned.at(start) {
            start += run.len() as u64;
        }
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
pub(crate) mod tests;
