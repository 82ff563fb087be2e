//! The pinned part of the cache: runs of the file held in RAM for the whole run, wherever they lie
//! in the file: the ranges [`super::order`] ranks by card bytes saved per byte of RAM (a board
//! alone: every tensor a token reads; a board of a ring: the tensors of its own part).

use super::aligned::AlignedBuf;
use alloc::vec::Vec;
use inference::oom::{self, OutOfMemory};

/// Sorted, disjoint runs `(start, bytes)` of the file, each starting on a page boundary.
#[derive(Debug, Default)]
pub(super) struct Pinned {
    runs: Vec<(u64, AlignedBuf)>,
}

/// Which runs of a file of `len` bytes to pin with `budget` bytes: the `wanted` ranges in order
/// (most valuable first, see [`super::order`]), widened to whole pages; of each, the pages no
/// earlier range took, while the budget lasts, the first that does not fit cut to whole pages.
/// Returns sorted, merged `(start, length)` runs (the table grows fallibly).
pub(super) fn plan(
    wanted: &[(u64, u64)],
    len: u64,
    page: u64,
    budget: u64,
) -> Result<Vec<(u64, u64)>, OutOfMemory> {
    // Sorted, disjoint, merged `[start, end)` runs of whole pages.
    let mut taken: Vec<(u64, u64)> = oom::with_capacity(wanted.len(), "page cache plan")?;
    let top = len.div_ceil(page) * page;
    let mut left = budget / page * page;
    for &(offset, n) in wanted {
        let mut start = offset.min(len) / page * page;
        let end = (offset.saturating_add(n).min(len).div_ceil(page) * page).min(top);
        while start < end && left > 0 {
            let i = taken.partition_point(|r| r.1 <= start);
            match taken.get(i) {
                // Inside a run an earlier range took: go past it.
                Some(&(s, e)) if s <= start => start = e,
                next => {
                    let stop = next.map_or(end, |r| r.0.min(end));
                    let take = (stop - start).min(left);
                    insert(&mut taken, i, (start, start + take))?;
                    left -= take;
                    start += take;
                }
            }
        }
    }
    for r in taken.iter_mut() {
        *r = (r.0, r.1.min(len) - r.0);
    }
    taken.retain(|&(_, n)| n > 0);
    Ok(taken)
}

/// Put the run `r` (in a gap of `taken`, before `taken[i]`) into `taken`, merged with the runs it
/// touches.
fn insert(taken: &mut Vec<(u64, u64)>, i: usize, r: (u64, u64)) -> Result<(), OutOfMemory> {
    let joins_prev = i > 0 && taken[i - 1].1 == r.0;
    let joins_next = taken.get(i).is_some_and(|n| n.0 == r.1);
    match (joins_prev, joins_next) {
        (true, true) => {
            taken[i - 1].1 = taken[i].1;
            taken.remove(i);
        }
        (true, false) => taken[i - 1].1 = r.1,
        (false, true) => taken[i].0 = r.0,
        (false, false) => {
            oom::reserve(taken, 1, "page cache plan")?;
            taken.insert(i, r);
        }
    }
    Ok(())
}

/// Bytes of `offset..offset + len` inside the sorted, disjoint `(start, length)` runs.
pub(super) fn overlap(runs: impl IntoIterator<Item = (u64, u64)>, offset: u64, len: u64) -> u64 {
    let end = offset.saturating_add(len);
    runs.into_iter()
        .skip_while(|r| r.0.saturating_add(r.1) <= offset)
        .take_while(|r| r.0 < end)
        .map(|r| end.min(r.0.saturating_add(r.1)) - offset.max(r.0))
        .sum()
}

impl Pinned {
    /// Zeroed runs for `plan` (filled by the caller).
    pub(super) fn allocate(plan: &[(u64, u64)]) -> Result<Self, OutOfMemory> {
        let mut runs = oom::with_capacity(plan.len(), "page cache run table")?;
        for &(s, n) in plan {
            runs.push((
                s,
                AlignedBuf::zeroed(n as usize, "page cache (resident part)")?,
            ));
        }
        Ok(Self { runs })
    }

    /// The runs, to fill at load.
    pub(super) fn runs_mut(&mut self) -> impl Iterator<Item = (u64, &mut [u8])> {
        self.runs.iter_mut().map(|(s, b)| (*s, &mut b[..]))
    }

    /// Bytes pinned.
    pub(super) fn bytes(&self) -> u64 {
        self.runs.iter().map(|(_, b)| b.len() as u64).sum()
    }

    /// Bytes of `offset..offset + len` pinned.
    pub(super) fn within(&self, offset: u64, len: u64) -> u64 {
        overlap(
            self.runs.iter().map(|(s, b)| (*s, b.len() as u64)),
            offset,
            len,
        )
    }

    /// The pinned bytes from `offset` to the end of the run holding it, if a run holds it.
    pub(super) fn at(&self, offset: u64) -> Option<&[u8]> {
        let i = self
            .runs
            .partition_point(|(s, _)| *s <= offset)
            .checked_sub(1)?;
        let (s, b) = &self.runs[i];
        let within = offset - s;
        (within < b.len() as u64).then(|| &b[within as usize..])
    }

    /// Where the next run after `offset` starts (the end of a streamed stretch), if any.
    pub(super) fn next_start(&self, offset: u64) -> Option<u64> {
        let i = self.runs.partition_point(|(s, _)| *s <= offset);
        self.runs.get(i).map(|(s, _)| *s)
    }
}
