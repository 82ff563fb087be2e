//! The card check: the bus the card runs on and what the driver's request loop had to do there
//! (CRC errors, retries, modes stepped down, DMA errors), and, on a host that reads both ways,
//! the same first blocks of the model file read by DMA and by PIO, each timed, compared byte for
//! byte. DMA that reads other bytes than PIO (a cache line not invalidated after the engine
//! wrote, a bounce copy gone wrong) is named with the first byte that differs, and the card
//! stays on PIO for the run: slower, but the bytes the card holds.
//!
//! [`card_check`] is the check over any block device and the runs of blocks to read (the host
//! tests run it over the simulated SD hosts); [`check`] runs it over the model file's extents.

use super::{Findings, RunError};
use crate::card::Direct;
use crate::console::Out;
use crate::platform::Platform;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write;
use drivers::block::{BlockDevice, CardStats, Transfer, WriteBlocks, BLOCK_SIZE};
use drivers::dma::DMA_ALIGN;
use drivers::fat::Extent;

/// Most bytes read each way: the start of the model file.
pub const SPAN: usize = 4 << 20;
/// Bytes per read request (a page of the page cache).
const CHUNK: usize = 256 << 10;
/// Time the first way may take (one request at least); the second reads as many bytes.
const BUDGET_NS: u64 = 1_000_000_000;
/// What the buffers hold before the reads: bytes each way must overwrite.
const FILL_DMA: u8 = 0xA5;
const FILL_PIO: u8 = 0x5A;
/// Why a device that names no way to read has nothing to compare.
const ONE_WAY: &str = "the device reads one way, no PIO or DMA to choose, as virtio-blk";

/// What the card check found: its verdict, the text of its line, the report's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardCheck {
    /// `ok`, `fail` or `skip`.
    pub verdict: &'static str,
    /// What follows `selftest: card ok: ` (or `FAILED`, `skip`).
    pub text: String,
    /// `bus`, `pio`, `dma`, `blk`, `crc`, `retries`: those measured.
    pub fields: Vec<(&'static str, String)>,
}

impl CardCheck {
    /// The verdict line: `selftest: card ok: ...`, `selftest: card FAILED: ...`.
    pub fn line(&self) -> String {
        let v = match self.verdict {
            "fail" => "FAILED",
            v => v,
        };
        alloc::format!("selftest: card {v}: {}", self.text)
    }

    fn field(&mut self, key: &'static str, value: impl core::fmt::Display) {
        self.fields.push((key, value.to_string()));
    }
}

/// The card check over the model file's card ([`card_check`] over its first whole blocks). A
/// read that fails or bytes that differ are a failed verdict and the run goes on (the model
/// check has read the file already); only buffers the heap cannot give are an error.
pub(super) fn check<D: WriteBlocks + Send, P: Platform + ?Sized>(
    direct: &Direct<D>,
    (platform, found): (&P, &mut Findings),
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let mut card = direct.0.lock();
    let mut left = card.file.size() / BLOCK_SIZE as u64;
    let mut runs = Vec::new();
    for e in card.file.extents() {
        if left == 0 {
            break;
        }
        let blocks = e.blocks.min(left);
        runs.push(Extent { lba: e.lba, blocks });
        left -= blocks;
    }
    let c = card_check(&mut card.dev, &runs, platform.clock())?;
    drop(card);
    let _ = writeln!(out, "{}", c.line());
    for (k, v) in c.fields {
        found.field(k, v);
    }
    found.verdicts.push(("card", c.verdict));
    Ok(())
}

/// The card check over `dev`: up to `SPAN` (4 MiB) bytes of the blocks in `runs` (in order), timed by
/// `now_ns` (nanoseconds). A device that names no way to read ([`BlockDevice::transfer`]) has its
/// rate measured; a host without DMA, its PIO rate; one with both reads the blocks by DMA (for
/// at most a second) and the same by PIO, compares them and goes back to the way it was on,
/// unless DMA read other bytes: then it stays on PIO. Errors are verdicts; only buffers the heap
/// cannot give are an error.
pub fn card_check<D: BlockDevice + ?Sized>(
    dev: &mut D,
    runs: &[Extent],
    now_ns: fn() -> u64,
) -> Result<CardCheck, RunError> {
    let blocks: u64 = runs.iter().map(|r| r.blocks).sum();
    let span = (blocks as usize).min(SPAN / BLOCK_SIZE) * BLOCK_SIZE;
    let mut c = CardCheck {
        verdict: "ok",
        text: String::new(),
        fields: Vec::new(),
    };
    if span == 0 {
        c.verdict = "skip";
        c.text = "no whole block to read".into();
        return Ok(c);
    }
    let mut a = Aligned::new(span, FILL_DMA)?;
    let mut b = Aligned::new(span, FILL_PIO)?;
    let reader = Reader { runs, now_ns };
    let ok = match dev.transfer() {
        None => single((dev, a.bytes()), reader, &mut c, ("blk", None, ONE_WAY)),
        Some(was) => both_ways(dev, (a.bytes(), b.bytes()), was, reader, &mut c),
    };
    if !ok {
        c.verdict = "fail";
    }
    if let Some(s) = dev.card_stats() {
        c.field("bus", s.bus);
        c.field("crc", s.crc_errors);
        c.field("retries", s.retries);
        c.text.push_str(&counts(&s));
    }
    Ok(c)
}

/// The bus and the counters, for the verdict line.
fn counts(s: &CardStats) -> String {
    let plural = |n: u64, one: &'static str, more: &'static str| if n == 1 { one } else { more };
    let mut t = alloc::format!(
        "; bus {} ({}, {} kHz, {} bit{}); {} CRC error{}, {} retr{}",
        s.bus,
        s.bus.mode,
        s.bus.clock_hz / 1000,
        s.bus.width,
        plural(s.bus.width as u64, "", "s"),
        s.crc_errors,
        plural(s.crc_errors, "", "s"),
        s.retries,
        plural(s.retries, "y", "ies"),
    );
    if s.step_downs > 0 {
        let _ = write!(t, ", {} mode(s) stepped down", s.step_downs);
    }
    if s.reinits > 0 {
        let _ = write!(t, ", {} re-initialisation(s)", s.reinits);
    }
    if s.dma_errors > 0 {
        let _ = write!(t, ", {} DMA error(s)", s.dma_errors);
    }
    t
}

/// A device with one way to read ([`Transfer`] `way`, or none named): its rate in `key`, and
/// `why` there is nothing to compare.
fn single<D: BlockDevice + ?Sized>(
    (dev, buf): (&mut D, &mut [u8]),
    r: Reader<'_>,
    c: &mut CardCheck,
    (key, way, why): (&'static str, Option<Transfer>, &str),
) -> bool {
    let by = way.map(|w| alloc::format!(" by {w}")).unwrap_or_default();
    match r.read(dev, buf, BUDGET_NS) {
        Ok((n, ns)) => {
            let mb = mbs(n, ns);
            c.field(key, &mb);
            c.text = alloc::format!(
                "{} KiB read{by} at {mb} MB/s ({why}: nothing to compare)",
                n >> 10
            );
            true
        }
        Err(e) => {
            c.text = alloc::format!("read{by}: {e}");
            false
        }
    }
}

/// An SD host: by PIO only when it has no DMA, else the same bytes by DMA then by PIO,
/// compared; reads go back to `was`, unless DMA read wrong.
fn both_ways<D: BlockDevice + ?Sized>(
    dev: &mut D,
    (a, b): (&mut [u8], &mut [u8]),
    was: Transfer,
    r: Reader<'_>,
    c: &mut CardCheck,
) -> bool {
    if !dev.set_transfer(Transfer::Dma) {
        let why = match dev.card_stats() {
            Some(s) if s.dma_errors > 0 => "DMA given up after errors",
            _ => "no DMA on this host",
        };
        return single((dev, b), r, c, ("pio", Some(Transfer::Pio), why));
    }
    let (n, dma_ns) = match r.read(dev, a, BUDGET_NS) {
        Ok(got) => got,
        Err(e) => {
            dev.set_transfer(Transfer::Pio);
            c.text = alloc::format!("DMA read: {e}; the run reads by PIO");
            return false;
        }
    };
    dev.set_transfer(Transfer::Pio);
    let pio_ns = match r.read(dev, &mut b[..n], u64::MAX) {
        Ok((_, ns)) => ns,
        Err(e) => {
            dev.set_transfer(was);
            c.text = alloc::format!("PIO read: {e}; the run reads by {was}");
            return false;
        }
    };
    let (pio, dma) = (mbs(n, pio_ns), mbs(n, dma_ns));
    c.field("pio", &pio);
    c.field("dma", &dma);
    let rates = alloc::format!(
        "{} KiB read by DMA at {dma} MB/s and by PIO at {pio} MB/s",
        n >> 10
    );
    let Some(at) = a[..n].iter().zip(&b[..n]).position(|(x, y)| x != y) else {
        dev.set_transfer(was);
        c.text = alloc::format!("{rates}, the same bytes; the run reads by {was}");
        return true;
    };
    let lba = r.lba(at / BLOCK_SIZE);
    c.text = alloc::format!("{rates}, and they differ: first at byte {at} (block {}, card LBA {lba}), DMA read {:#04x} where PIO read {:#04x} (a cache line not invalidated after the DMA engine wrote?); the run reads by PIO", at / BLOCK_SIZE, a[at], b[at]);
    false
}

/// MB/s of `bytes` read in `ns`, to a tenth (a card in QEMU or at Default Speed can read below
/// 1 MB/s).
fn mbs(bytes: usize, ns: u64) -> String {
    let tenths = bytes as u64 * 10_000 / ns.max(1);
    alloc::format!("{}.{}", tenths / 10, tenths % 10)
}

/// Reads the runs' blocks, timed.
#[derive(Clone, Copy)]
struct Reader<'r> {
    runs: &'r [Extent],
    now_ns: fn() -> u64,
}

impl Reader<'_> {
    /// Fill `buf` from the runs' first blocks, [`CHUNK`] at most per request, until it is full
    /// or `budget_ns` has passed (one request at least): the bytes read and the time taken.
    fn read<D: BlockDevice + ?Sized>(
        &self,
        dev: &mut D,
        buf: &mut [u8],
        budget_ns: u64,
    ) -> Result<(usize, u64), String> {
        let t0 = (self.now_ns)();
        let mut at = 0;
        'runs: for run in self.runs {
            let mut lba = run.lba;
            let end = run.lba + run.blocks;
            while lba < end && at < buf.len() {
                let blocks = ((end - lba) as usize).min(CHUNK / BLOCK_SIZE);
                let n = (blocks * BLOCK_SIZE).min(buf.len() - at);
                dev.read_blocks(lba, &mut buf[at..at + n])
                    .map_err(|e| e.to_string())?;
                at += n;
                lba += (n / BLOCK_SIZE) as u64;
                if (self.now_ns)().saturating_sub(t0) >= budget_ns {
                    break 'runs;
                }
            }
        }
        Ok((at, (self.now_ns)().saturating_sub(t0).max(1)))
    }

    /// The card LBA of block `i` of the runs.
    fn lba(&self, mut i: usize) -> u64 {
        for run in self.runs {
            if (i as u64) < run.blocks {
                return run.lba + i as u64;
            }
            i -= run.blocks as usize;
        }
        u64::MAX
    }
}

/// A heap buffer whose bytes start on a cache line ([`DMA_ALIGN`]): the DMA engine writes it
/// directly, as it does the page cache's pages.
struct Aligned {
    raw: Vec<u8>,
    at: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize, fill: u8) -> Result<Aligned, RunError> {
        let raw = inference::oom::filled(len + DMA_ALIGN, fill, "the card check's buffers")
            .map_err(RunError::OutOfMemory)?;
        let at = raw.as_ptr().align_offset(DMA_ALIGN).min(DMA_ALIGN);
        Ok(Aligned { raw, at, len })
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.raw[self.at..self.at + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use drivers::block::{RamDisk, RequestError};

    /// A clock that moves 1 ms each time it is read.
    fn clock() -> u64 {
        static T: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
        T.fetch_add(1_000_000, core::sync::atomic::Ordering::Relaxed)
    }

    /// A RAM disk read two ways: by "DMA", which with `stale` leaves the first 64 bytes of block
    /// `stale_block` as they were in the buffer (a cache line not invalidated), or by "PIO".
    struct TwoWays {
        disk: RamDisk<Vec<u8>>,
        way: Transfer,
        has_dma: bool,
        stale_block: Option<u64>,
        dma_fails: bool,
    }

    impl TwoWays {
        fn new(blocks: usize) -> TwoWays {
            let data = (0..blocks * BLOCK_SIZE)
                .map(|i| (i * 7 / 3) as u8)
                .collect();
            TwoWays {
                disk: RamDisk::new(data),
                way: Transfer::Dma,
                has_dma: true,
                stale_block: None,
                dma_fails: false,
            }
        }
    }

    impl BlockDevice for TwoWays {
        type Error = RequestError;
        fn num_blocks(&self) -> u64 {
            self.disk.num_blocks()
        }
        fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), RequestError> {
            if self.way == Transfer::Pio {
                return self.disk.read_blocks(lba, buf);
            }
            if self.dma_fails {
                return Err(RequestError::PartialBlock { lba, len: 0 });
            }
            let old = buf.to_vec();
            self.disk.read_blocks(lba, buf)?;
            if let Some(s) = self.stale_block {
                let blocks = (buf.len() / BLOCK_SIZE) as u64;
                if (lba..lba + blocks).contains(&s) {
                    let at = (s - lba) as usize * BLOCK_SIZE;
                    buf[at..at + 64].copy_from_slice(&old[at..at + 64]);
                }
            }
            Ok(())
        }
        fn transfer(&self) -> Option<Transfer> {
            Some(self.way)
        }
        fn set_transfer(&mut self, t: Transfer) -> bool {
            if t == Transfer::Dma && !self.has_dma {
                return false;
            }
            self.way = t;
            true
        }
    }

    fn field<'c>(c: &'c CardCheck, k: &str) -> Option<&'c str> {
        c.fields.iter().find(|f| f.0 == k).map(|f| f.1.as_str())
    }

    #[test]
    fn both_ways_agree_and_dma_stays() {
        let mut d = TwoWays::new(64);
        let runs = [Extent { lba: 8, blocks: 40 }];
        let c = card_check(&mut d, &runs, clock).unwrap();
        assert_eq!(c.verdict, "ok", "{}", c.line());
        assert!(c
            .line()
            .starts_with("selftest: card ok: 20 KiB read by DMA at "));
        assert!(
            c.text.contains(", the same bytes; the run reads by DMA"),
            "{}",
            c.text
        );
        assert!(field(&c, "pio").is_some() && field(&c, "dma").is_some());
        assert_eq!(d.way, Transfer::Dma);
    }

    #[test]
    fn a_stale_line_by_dma_is_named_and_pio_stays() {
        let mut d = TwoWays::new(64);
        d.stale_block = Some(13);
        let runs = [
            Extent { lba: 2, blocks: 4 },
            Extent {
                lba: 10,
                blocks: 30,
            },
        ];
        let c = card_check(&mut d, &runs, clock).unwrap();
        assert_eq!(c.verdict, "fail");
        // Block 13 is the runs' block 4 + 3 = 7: byte 3584.
        assert!(
            c.line().starts_with("selftest: card FAILED: 17 KiB read by DMA at ")
                && c.text.contains("they differ: first at byte 3584 (block 7, card LBA 13), DMA read 0xa5 where PIO read ")
                && c.text.ends_with("the run reads by PIO"),
            "{}",
            c.line()
        );
        assert_eq!(d.way, Transfer::Pio);
        let mut buf = vec![0u8; 4 * BLOCK_SIZE];
        d.read_blocks(12, &mut buf).unwrap();
        assert_eq!(buf[..], d.disk.data()[12 * BLOCK_SIZE..16 * BLOCK_SIZE]);
    }

    #[test]
    fn one_way_and_pio_only_and_a_failed_dma_read() {
        let mut ram = RamDisk::new(vec![1u8; 16 * BLOCK_SIZE]);
        let runs = [Extent { lba: 0, blocks: 16 }];
        let c = card_check(&mut ram, &runs, clock).unwrap();
        assert_eq!(c.verdict, "ok");
        assert!(
            c.text.ends_with("(the device reads one way, no PIO or DMA to choose, as virtio-blk: nothing to compare)"),
            "{}",
            c.text
        );
        assert_eq!(c.fields.len(), 1);
        assert!(field(&c, "blk").is_some());

        let mut d = TwoWays::new(16);
        (d.has_dma, d.way) = (false, Transfer::Pio);
        let c = card_check(&mut d, &runs, clock).unwrap();
        assert_eq!(c.verdict, "ok");
        assert!(
            c.text
                .ends_with("(no DMA on this host: nothing to compare)"),
            "{}",
            c.text
        );
        assert!(field(&c, "pio").is_some() && field(&c, "dma").is_none());

        let mut d = TwoWays::new(16);
        d.dma_fails = true;
        let c = card_check(&mut d, &runs, clock).unwrap();
        assert_eq!(c.verdict, "fail");
        assert!(c.text.starts_with("DMA read: ") && c.text.ends_with("the run reads by PIO"));
        assert_eq!(d.way, Transfer::Pio);

        let c = card_check(&mut d, &[], clock).unwrap();
        assert_eq!(
            (c.verdict, c.line().as_str()),
            ("skip", "selftest: card skip: no whole block to read")
        );
    }
}
