//! The page cache: a fixed amount of RAM standing in for mmap of the model file.
//!
//! The file's first `resident` bytes live in one contiguous, pinned buffer, filled once at load with
//! large sequential reads; [`Storage::resident`] hands out slices of it, so when the whole model fits
//! the forward pass reads weights in place with no copy. The rest of the file is streamed through a
//! window of fixed-size pages behind a lock (any core may read): a miss evicts a page and refills it
//! with one large read of the file's blocks. Counters record hits, misses, bytes read and refills.
//!
//! The replacement policy for the window is least-recently-used here; issue 8 replaces it with one
//! suited to the forward pass's cyclic order, with read-ahead.

use alloc::boxed::Box;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use inference::storage::{check_range, Storage, StorageError};

/// A file the cache reads from: "fill this buffer from this file offset" (the FAT file over its
/// block device in the kernel, a byte vector in tests).
pub trait FileSource {
    type Error: fmt::Display;
    fn len(&self) -> u64;
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error>;
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
    /// Time spent waiting for the device on misses, in the clock's units (0 without a clock).
    pub stall: u64,
}

struct Window<F> {
    src: F,
    /// `slots * page` bytes.
    mem: Vec<u8>,
    /// Page index held by each slot.
    tag: Vec<Option<u64>>,
    /// Last use of each slot (a counter), for LRU.
    used: Vec<u64>,
    clock: u64,
}

/// A fixed-size cache over a [`FileSource`], implementing [`Storage`].
pub struct PageCache<F: FileSource> {
    len: u64,
    page: usize,
    /// File bytes `0..resident.len()`, pinned.
    resident: Box<[u8]>,
    window: spin::Mutex<Window<F>>,
    hits: AtomicU64,
    misses: AtomicU64,
    bytes_read: AtomicU64,
    refills: AtomicU64,
    stall: AtomicU64,
    /// Time source for stall accounting (nanoseconds), if set.
    clock: Option<fn() -> u64>,
}

impl<F: FileSource> fmt::Debug for PageCache<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCache")
            .field("len", &self.len)
            .field("page", &self.page)
            .field("resident", &self.resident.len())
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

impl<F: FileSource> PageCache<F> {
    /// A cache of at most `capacity` bytes over `src` with pages of `page` bytes. If the file fits,
    /// it is all resident; otherwise the first `capacity - window` bytes are, and the rest streams
    /// through a window of [`MIN_WINDOW_PAGES`] pages. The resident part is read now, in chunks of
    /// `page` bytes, calling `progress(done, total)` after each.
    pub fn new(src: F, capacity: u64, page: usize, progress: &mut dyn FnMut(u64, u64)) -> Result<Self, CacheError> {
        Self::with_policy(src, capacity, page, Policy::ResidentPrefix, progress)
    }

    /// [`PageCache::new`] with a choice of [`Policy`].
    pub fn with_policy(
        mut src: F,
        capacity: u64,
        page: usize,
        policy: Policy,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, CacheError> {
        if page == 0 || !page.is_multiple_of(512) {
            return Err(CacheError::BadSize {
                what: "page size",
                value: page as u64,
            });
        }
        let len = src.len();
        let window_bytes = (MIN_WINDOW_PAGES * page) as u64;
        let (resident_len, slots) = if len <= capacity {
            (len, 0)
        } else {
            if capacity < window_bytes + page as u64 {
                return Err(CacheError::BadSize {
                    what: "capacity (bytes)",
                    value: capacity,
                });
            }
            match policy {
                Policy::ResidentPrefix => {
                    // Resident part rounded down to whole pages, so streamed pages start
                    // page-aligned.
                    let r = (capacity - window_bytes) / page as u64 * page as u64;
                    (r, MIN_WINDOW_PAGES)
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
        Ok(Self {
            len,
            page,
            resident,
            window: spin::Mutex::new(Window {
                src,
                mem: vec![0u8; slots * page],
                tag: vec![None; slots],
                used: vec![0; slots],
                clock: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bytes_read: AtomicU64::new(resident_len),
            refills: AtomicU64::new(0),
            stall: AtomicU64::new(0),
            clock: None,
        })
    }

    /// Account the time spent reading the device on misses with `clock` (nanoseconds).
    pub fn set_clock(&mut self, clock: fn() -> u64) {
        self.clock = Some(clock);
    }

    /// Bytes pinned in RAM.
    pub fn resident_bytes(&self) -> u64 {
        self.resident.len() as u64
    }

    /// Bytes of RAM the cache holds (pinned part and window).
    pub fn ram_bytes(&self) -> u64 {
        self.resident.len() as u64 + self.window.lock().mem.len() as u64
    }

    pub fn page_size(&self) -> usize {
        self.page
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            refills: self.refills.load(Ordering::Relaxed),
            stall: self.stall.load(Ordering::Relaxed),
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
            let slot = match w.tag.iter().position(|t| *t == Some(index)) {
                Some(s) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    s
                }
                None => {
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    // Least recently used slot (empty slots first).
                    let s = (0..w.tag.len())
                        .min_by_key(|&s| (w.tag[s].is_some(), w.used[s]))
                        .unwrap_or(0);
                    if w.tag[s].is_some() {
                        self.refills.fetch_add(1, Ordering::Relaxed);
                    }
                    w.tag[s] = None;
                    let start = index * page;
                    let fill = (self.len - start).min(page) as usize;
                    let dst = &mut w.mem[s * self.page..s * self.page + fill];
                    let t0 = self.clock.map(|c| c());
                    w.src.read(start, dst).map_err(|e| StorageError::Io {
                        offset: start,
                        len: fill as u64,
                        detail: e.to_string(),
                    })?;
                    if let (Some(c), Some(t0)) = (self.clock, t0) {
                        self.stall.fetch_add(c().saturating_sub(t0), Ordering::Relaxed);
                    }
                    self.bytes_read.fetch_add(fill as u64, Ordering::Relaxed);
                    w.tag[s] = Some(index);
                    s
                }
            };
            w.used[slot] = w.clock;
            let src = &w.mem[slot * self.page + in_page..slot * self.page + in_page + n];
            buf[done..done + n].copy_from_slice(src);
            done += n;
        }
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
}
