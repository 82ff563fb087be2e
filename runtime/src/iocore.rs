//! One core serves the card while the others compute: read-ahead for a device without a request
//! queue (the Raspberry Pi's SD host, driven by PIO through its data port, so a read occupies the
//! core that runs it).
//!
//! [`IoShared`] holds the file source and two small fixed queues (requests and completions);
//! [`Served`] is the page cache's view of it, a [`FileSource`] that queues reads: `start` adds a
//! request and wakes the serving core, `poll` takes a finished one. The serving core runs
//! [`IoShared::serve_one`] in a loop (the board's worker pool takes it out of the compute jobs).
//! Demand reads (`read`) run on the asking core under the source's lock, so they never wait behind
//! the queue, only behind the one read in progress.

use crate::pagecache::{DynBlock, FileSource, PageRead};
use alloc::string::{String, ToString};
use core::sync::atomic::{AtomicU64, Ordering};

/// Reads queued at most (the cache reads ahead at most this many pages).
pub const DEPTH: usize = 8;

/// A file source shared between the computing cores and the serving core.
pub struct IoShared<F> {
    src: spin::Mutex<F>,
    len: u64,
    requests: spin::Mutex<heapless::Deque<PageRead, DEPTH>>,
    done: spin::Mutex<heapless::Deque<(u32, Result<(), String>), DEPTH>>,
    /// Wakes the serving core (`sev` / an IPI).
    wake: fn(),
    /// Reads the serving core has carried out.
    pub served: AtomicU64,
}

impl<F: FileSource> IoShared<F> {
    pub fn new(src: F, wake: fn()) -> Self {
        let len = src.len();
        Self {
            src: spin::Mutex::new(src),
            len,
            requests: spin::Mutex::new(heapless::Deque::new()),
            done: spin::Mutex::new(heapless::Deque::new()),
            wake,
            served: AtomicU64::new(0),
        }
    }

    /// One step of the serving core's loop: carry out the oldest queued read; `false` if none was
    /// queued (the caller may then sleep until woken).
    pub fn serve_one(&self) -> bool {
        let Some(r) = self.requests.lock().pop_front() else {
            return false;
        };
        // SAFETY: `Served::start`'s caller keeps `buf` valid for `len` bytes and untouched until
        // this read is reported through `done`.
        let buf = unsafe { r.buf() };
        let res = self
            .src
            .lock()
            .read(r.offset, buf)
            .map_err(|e| e.to_string());
        self.served.fetch_add(1, Ordering::Relaxed);
        // Never full: at most DEPTH reads are outstanding (queued, in progress or done).
        let _ = self.done.lock().push_back((r.tag, res));
        (self.wake)();
        true
    }

    pub fn into_inner(self) -> F {
        self.src.into_inner()
    }
}

impl<F> core::fmt::Debug for IoShared<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IoShared")
            .field("len", &self.len)
            .field("served", &self.served)
            .finish_non_exhaustive()
    }
}

/// The page cache's handle on an [`IoShared`].
#[derive(Debug)]
pub struct Served<'a, F> {
    shared: &'a IoShared<F>,
    /// Reads started and not yet reported.
    outstanding: usize,
}

impl<'a, F> Served<'a, F> {
    pub fn new(shared: &'a IoShared<F>) -> Self {
        Self {
            shared,
            outstanding: 0,
        }
    }
}

impl<F: FileSource> FileSource for Served<'_, F> {
    type Error = String;

    fn len(&self) -> u64 {
        self.shared.len
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        self.shared
            .src
            .lock()
            .read(offset, buf)
            .map_err(|e| e.to_string())
    }

    fn queue_depth(&self) -> usize {
        DEPTH
    }

    unsafe fn start(&mut self, r: PageRead) -> Result<bool, String> {
        if self.outstanding >= DEPTH {
            // SAFETY: the caller guarantees `r.buf` is valid for `r.len` bytes.
            self.read(r.offset, unsafe { r.buf() })?;
            return Ok(true);
        }
        if self.shared.requests.lock().push_back(r).is_err() {
            // SAFETY: as above.
            self.read(r.offset, unsafe { r.buf() })?;
            return Ok(true);
        }
        self.outstanding += 1;
        (self.shared.wake)();
        Ok(false)
    }

    fn poll(&mut self) -> Option<(u32, Result<(), String>)> {
        let r = self.shared.done.lock().pop_front()?;
        self.outstanding -= 1;
        Some(r)
    }

    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        self.shared.src.lock().with_device(f)
    }
}

/// Any source with its errors as text, so the run can choose its source at run time.
#[derive(Debug)]
pub struct Texted<F>(pub F);

impl<F: FileSource> FileSource for Texted<F> {
    type Error = String;
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        self.0.read(offset, buf).map_err(|e| e.to_string())
    }
    fn queue_depth(&self) -> usize {
        self.0.queue_depth()
    }
    unsafe fn start(&mut self, r: PageRead) -> Result<bool, String> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.0.start(r) }.map_err(|e| e.to_string())
    }
    fn poll(&mut self) -> Option<(u32, Result<(), String>)> {
        self.0
            .poll()
            .map(|(t, r)| (t, r.map_err(|e| e.to_string())))
    }
    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        self.0.with_device(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pagecache::{Options, PageCache, Policy};
    use alloc::vec::Vec;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    struct Mem(Vec<u8>);
    impl FileSource for Mem {
        type Error = &'static str;
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
            let s = offset as usize;
            buf.copy_from_slice(self.0.get(s..s + buf.len()).ok_or("past the end")?);
            Ok(())
        }
    }

    /// A thread stands in for the serving core: the cache reads ahead through it, every read
    /// returns the file's bytes, and the thread served the announced pages.
    #[test]
    fn a_serving_thread_reads_ahead_for_the_cache() {
        let page = 1024;
        let data: Vec<u8> = (0..64 * page + 100).map(|i| (i * 7 % 251) as u8).collect();
        let shared = Arc::new(IoShared::new(Mem(data.clone()), || {}));
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    if !shared.serve_one() {
                        std::thread::yield_now();
                    }
                }
            })
        };
        {
            let opts = Options {
                policy: Policy::ResidentPrefix,
                readahead: 4,
            };
            let c = PageCache::with_options(
                Served::new(&shared),
                24 * page as u64,
                page,
                opts,
                &mut |_, _| {},
            )
            .unwrap();
            assert_eq!(c.readahead(), 4);
            crate::testutil::scan_with_hints(&c, &data, page, 12);
            crate::testutil::random_reads(&c, &data, 5, 2000, 1);
            assert!(c.stats().prefetched > 40, "{:?}", c.stats());
            // The cache waits for reads in flight when dropped, while the thread still serves.
        }
        stop.store(true, Ordering::Release);
        server.join().unwrap();
        assert!(shared.served.load(Ordering::Relaxed) > 40);
    }
}
