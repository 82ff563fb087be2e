//! The page cache's source as [`reader`](super::reader) chose it — a serving core's queue or the
//! card read directly — held by value, so choosing it allocates nothing (a `Box<dyn FileSource>`
//! would).

use crate::iocore::{Served, Texted};
use crate::pagecache::{DynBlock, FileSource, PageRead};
use alloc::string::String;

/// One of the two sources, with their errors as text.
pub(super) enum Source<'s, F> {
    Served(Served<'s, F>),
    Texted(Texted<F>),
}

/// `$e` with `$s` bound to whichever source `$self` holds.
macro_rules! either {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            Source::Served($s) => $e,
            Source::Texted($s) => $e,
        }
    };
}

impl<F: FileSource> FileSource for Source<'_, F> {
    type Error = String;

    fn len(&self) -> u64 {
        either!(self, s => s.len())
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        either!(self, s => s.read(offset, buf))
    }

    fn queue_depth(&self) -> usize {
        either!(self, s => s.queue_depth())
    }

    unsafe fn start(&mut self, r: PageRead) -> Result<bool, String> {
        // SAFETY: the caller's guarantee for `r.buf`, passed on.
        either!(self, s => unsafe { s.start(r) })
    }

    fn poll(&mut self) -> Option<(u32, Result<(), String>)> {
        either!(self, s => s.poll())
    }

    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        either!(self, s => s.with_device(f))
    }
}
