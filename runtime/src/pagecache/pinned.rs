//! The pinned part of the cache: runs of the file held in RAM for the whole run. A board alone pins
//! the file's first bytes (the forward pass reads the file front to back, so a prefix is as good as
//! any part); a board of a ring pins the tensors of its own part, wherever they lie in the file.

use super::aligned::AlignedBuf;
use alloc::vec::Vec;
use inference::oom::{self, OutOfMemory};

/// Sorted, disjoint runs `(start, bytes)` of the file, each starting on a page boundary.
#[derive(Debug, Default)]
pub(super) struct Pinned {
    runs: Vec<(u64, AlignedBuf)>,
}

/// Which runs of a file of `len` bytes to pin with `budget` bytes: the `wanted` ranges in order,
/// widened to whole pages, each taken whole while the budget lasts and the first that does not fit
/// cut to whole pages; then sorted and merged. Returns `(start, length)` runs (at most one per
/// wanted range, so the tables are reserved up front, fallibly).
pub(super) fn plan(
    wanted: &[(u64, u64)],
    len: u64,
    page: u64,
    budget: u64,
) -> Result<Vec<(u64, u64)>, OutOfMemory> {
    let mut taken: Vec<(u64, u64)> = oom::with_capacity(wanted.len(), "page cache plan")?;
    let mut left = budget / page * page;
    for &(offset, n) in wanted {
        let start = offset.min(len) / page * page;
        let end = offset.saturating_add(n).min(len).div_ceil(page) * page;
        let mut start = start;
        // Skip what an earlier range already took.
        for &(s, e) in &taken {
            if start >= s && start < e {
                start = e;
            }
        }
        let end = end.min(len.div_ceil(page) * page);
        if start >= end || left == 0 {
            continue;
        }
        let take = (end - start).min(left);
        taken.push((start, start + take));
        left -= take;
    }
    taken.sort_unstable();
    // Merged in place: the merged runs are never more than the taken ones.
    let mut merged = 0;
    for i in 0..taken.len() {
        let (s, e) = taken[i];
        match merged {
            m if m > 0 && s <= taken[m - 1].1 => taken[m - 1].1 = taken[m - 1].1.max(e),
            m => {
                taken[m] = (s, e);
                merged += 1;
            }
        }
    }
    taken.truncate(merged);
    for r in taken.iter_mut() {
        *r = (r.0, r.1.min(len) - r.0);
    }
    taken.retain(|&(_, n)| n > 0);
    Ok(taken)
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
