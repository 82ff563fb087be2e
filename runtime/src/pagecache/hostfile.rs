//! A model file on a PC as a page-cache source (host tests and `lmboot-host --cache-sweep`): it
//! counts the bytes read, and can queue reads the way virtio-blk does (started at once, finished
//! when polled, oldest first), so read-ahead runs on the host exactly as on a board.

use super::{FileSource, PageRead};
use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A file read with positioned reads.
#[derive(Debug)]
pub struct HostFile {
    file: std::fs::File,
    len: u64,
    bytes: Arc<AtomicU64>,
    /// Queued reads: (tag, offset, buffer address, length).
    queue: Option<VecDeque<PageRead>>,
}

impl HostFile {
    /// Open `path`; with `queued`, reads can be started and finish later (read-ahead on).
    pub fn open(path: &std::path::Path, queued: bool) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Self {
            file,
            len,
            bytes: Arc::default(),
            queue: queued.then(VecDeque::new),
        })
    }

    /// The running count of bytes read (shared: it stays readable after the file moves into a cache).
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.bytes.clone()
    }
}

impl FileSource for HostFile {
    type Error = std::io::Error;

    fn len(&self) -> u64 {
        self.len
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), std::io::Error> {
        self.file.read_exact_at(buf, offset)?;
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn queue_depth(&self) -> usize {
        if self.queue.is_some() {
            16
        } else {
            0
        }
    }

    unsafe fn start(&mut self, r: PageRead) -> Result<bool, std::io::Error> {
        match &mut self.queue {
            Some(q) => {
                q.push_back(r);
                Ok(false)
            }
            None => {
                // SAFETY: the caller passes a buffer valid for `r.len` bytes.
                self.read(r.offset, unsafe { r.buf() })?;
                Ok(true)
            }
        }
    }

    fn poll(&mut self) -> Option<(u32, Result<(), std::io::Error>)> {
        let r = self.queue.as_mut()?.pop_front()?;
        // SAFETY: the cache leaves the slot alone until this read is reported.
        Some((r.tag, self.read(r.offset, unsafe { r.buf() })))
    }
}
