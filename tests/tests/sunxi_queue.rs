//! The Allwinner SD/MMC driver's page-sized and queued IDMAC reads against `sunxi_sim`: a page
//! is one CMD18 straight into a cache-aligned buffer (an unaligned one, or one the controller
//! cannot reach, goes through the bounce buffer and still lands right), queued reads land with
//! their tags and data only once the hardware-timed IDMAC has had the time to move them, a
//! synchronous read or write first drains the queue, a full queue falls back to a synchronous
//! read, an IDMAC error in the middle of the queue is retried (or reported naming the LBA), a
//! descriptor pointing outside memory is a clear error, and the memory model shows a missing
//! invalidate as stale data.

mod dma_mem;
mod sd_card_sim;
mod sunxi_sim;

use drivers::block::{BlockDevice, Submitted, WriteBlocks};
use drivers::sd::{Cause, Cmd, Failed, SdError};
use drivers::sunxi_mmc::{
    Config, DmaMemory, SunxiMmc, DMA_BUFFER_BYTES, DMA_MAX_BYTES, QUEUE_DEPTH, QUEUE_SLOTS,
};
use sunxi_sim::*;

type Over<D> = SunxiMmc<SimRegs, SimClock, D>;

/// A 256 KiB page, in blocks.
const PAGE_BLOCKS: usize = 512;

/// The (index, argument, auto) of the commands on the bus.
fn bus(sim: &Sim) -> Vec<(u8, u32, bool)> {
    sim.log().iter().map(|c| (c.index, c.arg, c.auto)).collect()
}

/// Submit a read of `blocks` from `lba` into a fresh buffer `misalign` bytes past 4 KiB; the
/// buffer and the answer.
fn submit<D: DmaMemory>(
    sd: &mut Over<D>,
    lba: u64,
    blocks: usize,
    misalign: usize,
) -> (TestBuf, Submitted) {
    let mut buf = TestBuf::new(blocks * 512, misalign);
    // SAFETY: the buffer lives (and is left alone) until the tests have polled its tag.
    let r = unsafe { sd.submit_read(lba, buf.ptr(), buf.len()) };
    (buf, r.unwrap_or_else(|e| panic!("submit at {lba}: {e}")))
}

fn tag(s: Submitted) -> u16 {
    match s {
        Submitted::Queued(t) => t,
        Submitted::Done => panic!("answered Done, expected Queued"),
    }
}

/// A queued read: where from, its tag, its buffer.
struct Queued {
    lba: u64,
    tag: u16,
    buf: TestBuf,
}

/// Queue reads of (lba, blocks, misalign); each must be answered `Queued`.
fn queue_reads<D: DmaMemory>(
    sd: &mut Over<D>,
    reads: impl IntoIterator<Item = (u64, usize, usize)>,
) -> Vec<Queued> {
    reads
        .into_iter()
        .map(|(lba, blocks, misalign)| {
            let (buf, s) = submit(sd, lba, blocks, misalign);
            Queued {
                lba,
                tag: tag(s),
                buf,
            }
        })
        .collect()
}

/// Poll `reads` to their end: reported in order, each with its tag, Ok, and the card's data.
fn all_land<D: DmaMemory>(sim: &Sim, sd: &mut Over<D>, reads: &[Queued]) {
    let got = poll_all(sd, reads.len());
    for (r, g) in reads.iter().zip(got) {
        assert_eq!(g, (r.tag, Ok(())), "read at {}", r.lba);
        let blocks = (r.buf.len() / 512) as u64;
        assert!(
            r.buf.bytes() == sim.expected(r.lba, blocks),
            "read at {}",
            r.lba
        );
    }
}

/// The driver over the hardware-timed simulator, with DMA.
fn hardware() -> (Sim, DmaDriver) {
    start_dma(
        HostSpec::hardware(),
        sdhc(),
        Faults::default(),
        Config::new(),
    )
}

/// Poll until `n` requests are reported (bounded), in the order reported.
fn poll_all<D: DmaMemory>(sd: &mut Over<D>, n: usize) -> Vec<(u16, Result<(), SdError>)> {
    let mut got = Vec::new();
    for _ in 0..10_000_000 {
        if got.len() == n {
            break;
        }
        got.extend(sd.poll_read());
    }
    assert_eq!(got.len(), n, "reported {got:?}");
    got
}

#[test]
fn a_page_is_one_command_straight_into_an_aligned_buffer() {
    for host in [HostSpec::qemu(), HostSpec::hardware()] {
        let (sim, mut sd) = start_dma(host, sdhc(), Faults::default(), Config::new());
        sim.clear_log();
        sim.clear_mem_ops();
        let buf = read_into(&sim, &mut sd, 4_096, PAGE_BLOCKS, 0);
        assert_eq!(bus(&sim), [(18, 4_096, false), (12, 0, true)]);
        assert_eq!(sd.stats().bounce_transfers, 0);
        // Mapped, invalidated before and after the transfer: the caller's buffer itself.
        let (addr, len) = (buf.addr(), buf.len());
        let ops = sim.mem_ops();
        let at = ops
            .iter()
            .position(|o| *o == MemOp::Transfer { blocks: 512 })
            .unwrap_or_else(|| panic!("{ops:?}"));
        let inval = MemOp::Invalidate { addr, len };
        assert!(
            ops[..at].contains(&inval) && ops[at..].contains(&inval),
            "{ops:?}"
        );
        assert!(ops[..at]
            .iter()
            .any(|o| matches!(*o, MemOp::Map { addr: a, len: l, .. } if a == addr && l == len)));
        // 1 MiB, the largest piece the page cache asks for, is one command too; more is two.
        sim.clear_log();
        read_into(&sim, &mut sd, 100_000, DMA_MAX_BYTES / 512, 0);
        read_into(&sim, &mut sd, 200_000, DMA_MAX_BYTES / 512 + 1, 0);
        let cmds: Vec<_> = bus(&sim).into_iter().filter(|c| !c.2).collect();
        assert_eq!(
            cmds,
            [
                (18, 100_000, false),
                (18, 200_000, false),
                (17, 202_048, false)
            ]
        );
        assert_eq!(sd.stats().bounce_transfers, 0);
        check_no_violations(&sim);
    }
}

/// [`SimDma`] that gives a bus address to the driver's DMA area only (the first mapping): the
/// caller's buffers are out of the controller's reach.
struct AreaOnly(SimDma, bool);

impl DmaMemory for AreaOnly {
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        let first = !std::mem::replace(&mut self.1, true);
        first.then(|| self.0.bus_address(addr, len)).flatten()
    }
    fn to_device(&mut self, addr: usize, len: usize) {
        self.0.to_device(addr, len)
    }
    unsafe fn from_device(&mut self, addr: usize, len: usize) {
        // SAFETY: the driver's promise, passed on.
        unsafe { self.0.from_device(addr, len) }
    }
}

#[test]
fn an_unaligned_or_unreachable_buffer_goes_through_the_bounce_buffer() {
    let per_bounce = (DMA_BUFFER_BYTES / 512) as u32;
    for host in [HostSpec::qemu(), HostSpec::hardware()] {
        let (sim, mut sd) = start_dma(host, sdhc(), Faults::default(), Config::new());
        sim.clear_log();
        read_into(&sim, &mut sd, 7_000, PAGE_BLOCKS, 8);
        let starts: Vec<_> = bus(&sim).iter().filter(|c| !c.2).map(|c| c.1).collect();
        assert_eq!(
            starts,
            (0..4).map(|i| 7_000 + i * per_bounce).collect::<Vec<_>>()
        );
        assert_eq!(sd.stats().bounce_transfers, 4);
        // Queued, the same: four commands, then the page is reported.
        sim.clear_log();
        let reads = queue_reads(&mut sd, [(9_000, PAGE_BLOCKS, 24)]);
        all_land(&sim, &mut sd, &reads);
        assert_eq!(bus(&sim).iter().filter(|c| c.0 == 18).count(), 4);
        check_no_violations(&sim);
    }
    // Aligned, but the controller cannot reach it: bounced too.
    let (sim, mut sd) = start_with(
        HostSpec::hardware(),
        sdhc(),
        Faults::default(),
        Config::new(),
        |sim| AreaOnly(sim.dma(), false),
    );
    assert!(sd.dma_active());
    read_into(&sim, &mut sd, 3_000, PAGE_BLOCKS, 0);
    assert_eq!(sd.stats().bounce_transfers, 4);
    check_no_violations(&sim);
}

#[test]
fn four_queued_reads_land_in_time_with_their_tags() {
    let (sim, mut sd) = hardware();
    assert_eq!(sd.queue_depth(), QUEUE_DEPTH);
    sim.clear_log();
    let lbas = [10_000u64, 50_000, 20_000, 90_000];
    let reads = queue_reads(&mut sd, lbas.map(|l| (l, PAGE_BLOCKS, 0)));
    let mut tags: Vec<_> = reads.iter().map(|r| r.tag).collect();
    tags.dedup();
    assert_eq!(tags.len(), 4, "{tags:?}");
    // One command runs, the others wait for it.
    assert_eq!(bus(&sim), [(18, 10_000, false)]);
    assert_eq!(sd.stats().queued_reads, 4);
    for r in &reads {
        // Nothing until the IDMAC has had the time to move the page.
        let end = sim.dma_ends_at_ns().expect("a transfer in progress");
        let mut nothing = 0;
        let got = loop {
            match sd.poll_read() {
                Some(r) => break r,
                None => nothing += 1,
            }
            assert!(
                sim.now_ns() < end + 5_000_000,
                "no report long after {end} ns"
            );
        };
        assert!(
            sim.now_ns() >= end,
            "reported at {} ns, before {end}",
            sim.now_ns()
        );
        assert!(nothing > 0);
        assert_eq!(got, (r.tag, Ok(())));
        assert!(r.buf.bytes() == sim.expected(r.lba, PAGE_BLOCKS as u64));
    }
    assert_eq!(sd.poll_read(), None);
    let expect: Vec<_> = lbas
        .iter()
        .flat_map(|&l| [(18, l as u32, false), (12, 0, true)])
        .collect();
    assert_eq!(bus(&sim), expect);
    assert_eq!(sd.stats().bounce_transfers, 0);
    check_no_violations(&sim);
}

#[test]
fn queued_reads_in_qemu_mode_land_too() {
    let (sim, mut sd) = start_dma(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    let reads = queue_reads(&mut sd, [(300, 64, 0), (700, 164, 4), (1_100, 264, 8)]);
    all_land(&sim, &mut sd, &reads);
    check_no_violations(&sim);
}

#[test]
fn a_synchronous_read_or_write_drains_the_queue_first() {
    let (sim, mut sd) = hardware();
    sim.clear_log();
    let reads = queue_reads(&mut sd, [1_000, 2_000, 3_000].map(|l| (l, PAGE_BLOCKS, 0)));
    read_into(&sim, &mut sd, 5_000, 8, 0);
    let cmds: Vec<_> = bus(&sim).iter().filter(|c| !c.2).map(|c| c.1).collect();
    assert_eq!(cmds, [1_000, 2_000, 3_000, 5_000]);
    // Their outcomes wait for poll_read.
    all_land(&sim, &mut sd, &reads);
    // A write too.
    let reads = queue_reads(&mut sd, [(6_000, 64, 0)]);
    sd.write_blocks(8_000, &[0x3C; 1024]).unwrap();
    all_land(&sim, &mut sd, &reads);
    assert!(sim.expected(8_000, 2) == [0x3C; 1024]);
    check_no_violations(&sim);
}

#[test]
fn a_full_queue_reads_synchronously() {
    let (sim, mut sd) = hardware();
    sim.clear_log();
    let reads = queue_reads(
        &mut sd,
        (0..QUEUE_SLOTS as u64).map(|i| (100 + i * 64, 64, 0)),
    );
    // No slot left: done now, after the queue.
    let (buf, s) = submit(&mut sd, 40_000, 16, 0);
    assert_eq!(s, Submitted::Done);
    assert!(buf.bytes() == sim.expected(40_000, 16));
    let cmds: Vec<_> = sim
        .log()
        .iter()
        .filter(|c| !c.auto)
        .map(|c| c.arg)
        .collect();
    assert_eq!(cmds.len(), QUEUE_SLOTS + 1);
    assert_eq!(cmds.last(), Some(&40_000));
    all_land(&sim, &mut sd, &reads);
    check_no_violations(&sim);
}

#[test]
fn an_idmac_error_in_the_middle_of_the_queue_is_retried_or_named() {
    let (sim, mut sd) = hardware();
    // A fatal bus error half-way through the second queued read: retried, right.
    sim.set_faults(Faults {
        dma_error_at: vec![sim.dma_transfers() + 1],
        ..Faults::default()
    });
    let pages = |lbas: [u64; 4]| lbas.map(|l| (l, PAGE_BLOCKS, 0));
    let reads = queue_reads(&mut sd, pages([10_000, 11_000, 12_000, 13_000]));
    all_land(&sim, &mut sd, &reads);
    assert_eq!(sd.stats().retries, 1);
    assert!(sd.stats().controller_resets >= 1);
    check_no_violations(&sim);

    // A block of the second read that never reads: that read fails, naming the block; the
    // others land.
    sim.set_faults(Faults {
        bad_lbas: vec![21_100],
        ..Faults::default()
    });
    let reads = queue_reads(&mut sd, pages([20_000, 21_000, 22_000, 23_000]));
    let got = poll_all(&mut sd, 4);
    for (i, (q, (t, r))) in reads.iter().zip(got).enumerate() {
        assert_eq!(t, q.tag);
        if i != 1 {
            assert_eq!(r, Ok(()));
            assert!(q.buf.bytes() == sim.expected(q.lba, PAGE_BLOCKS as u64));
            continue;
        }
        let e = r.unwrap_err();
        match e {
            SdError::Read(Failed {
                cmd, start, cause, ..
            }) => {
                assert_eq!((cmd, start), (Cmd::new(18), 21_000));
                assert!(
                    matches!(cause, Cause::Rint { .. } | Cause::Idmac { .. }),
                    "{cause:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("LBA 21000"), "{e}");
    }
    sim.set_faults(Faults::default());
    read_into(&sim, &mut sd, 21_000, PAGE_BLOCKS, 0);
    check_no_violations(&sim);
}

#[test]
fn a_descriptor_outside_memory_is_a_clear_error() {
    let (sim, mut sd) = hardware();
    sim.set_faults(Faults {
        unbacked_buffers: true,
        ..Faults::default()
    });
    let t0 = sim.now_us();
    let mut buf = TestBuf::new(PAGE_BLOCKS * 512, 0);
    let e = sd.read_blocks(4_000, buf.bytes_mut()).unwrap_err();
    assert!(
        sim.now_us() - t0 < 5_000_000,
        "took {} us",
        sim.now_us() - t0
    );
    let check = |e: SdError| {
        match e {
            SdError::Read(Failed {
                lba,
                cause: Cause::Idmac { idst, .. },
                ..
            }) => assert!(lba == 4_000 && idst & IDST_FATAL_BUS_ERROR != 0, "{e:?}"),
            other => panic!("{other:?}"),
        }
        let s = e.to_string();
        assert!(
            s.contains("LBA 4000") && s.contains("fatal bus error"),
            "{s}"
        );
    };
    check(e);
    // Queued: the same error, reported for its tag.
    let (_buf, s) = submit(&mut sd, 4_000, PAGE_BLOCKS, 0);
    let t = tag(s);
    let got = poll_all(&mut sd, 1);
    assert_eq!(got[0].0, t);
    check(got[0].1.unwrap_err());
    // Memory the controller reaches again: reads work.
    sim.set_faults(Faults::default());
    read_into(&sim, &mut sd, 4_000, PAGE_BLOCKS, 0);
    check_no_violations(&sim);
}

/// [`SimDma`] that forgets to invalidate anything but the driver's own area (the first range
/// mapped).
struct NoInvalidate(SimDma, Option<(usize, usize)>);

impl DmaMemory for NoInvalidate {
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        self.1.get_or_insert((addr, len));
        self.0.bus_address(addr, len)
    }
    fn to_device(&mut self, addr: usize, len: usize) {
        self.0.to_device(addr, len)
    }
    unsafe fn from_device(&mut self, addr: usize, len: usize) {
        let (area, size) = self.1.unwrap_or((0, 0));
        if (area..area + size).contains(&addr) {
            // SAFETY: the driver's promise, passed on.
            unsafe { self.0.from_device(addr, len) }
        }
    }
}

#[test]
fn a_missing_invalidate_shows_as_stale_data() {
    let (sim, mut sd) = start_with(
        HostSpec::hardware(),
        sdhc(),
        Faults::default(),
        Config::new(),
        |sim| NoInvalidate(sim.dma(), None),
    );
    // Through the bounce buffer (invalidated): right.
    read_into(&sim, &mut sd, 500, 16, 8);
    // Straight into the caller's buffer, never invalidated: the CPU sees what it had.
    let mut buf = TestBuf::new(16 * 512, 0);
    sd.read_blocks(500, buf.bytes_mut()).unwrap();
    assert!(buf.bytes().iter().all(|&b| b == 0xA5));
    check_no_violations(&sim);
}

#[test]
fn garbage_status_during_queued_reads_gives_errors_not_hangs() {
    for seed in 1..20u64 {
        let (sim, mut sd) = hardware();
        sim.set_faults(Faults {
            garbage: Some(seed * 0x9E37_79B9),
            ..Faults::default()
        });
        let t0 = sim.now_us();
        // Each submit is queued, done or refused (a failed re-initialisation leaves a card of no
        // blocks); every queued one is reported.
        let mut bufs = Vec::new();
        let mut want = Vec::new();
        for (lba, blocks, misalign) in [(10, 64, 0), (500, 200, 8), (900, 8, 0)] {
            let mut buf = TestBuf::new(blocks * 512, misalign);
            // SAFETY: the buffer lives (in `bufs`) until every queued tag is polled.
            if let Ok(Submitted::Queued(t)) = unsafe { sd.submit_read(lba, buf.ptr(), buf.len()) } {
                want.push(t);
            }
            bufs.push(buf);
        }
        let mut tags: Vec<_> = poll_all(&mut sd, want.len()).iter().map(|g| g.0).collect();
        tags.sort();
        want.sort();
        assert_eq!(tags, want, "seed {seed}");
        assert!(sim.now_us() - t0 < 120_000_000, "seed {seed}");
        // And the driver recovers once the registers make sense again.
        sim.set_faults(Faults::default());
        sd.reinit().unwrap();
        let reads = queue_reads(&mut sd, [(10, 64, 0), (500, 200, 8)]);
        all_land(&sim, &mut sd, &reads);
        check_no_violations(&sim);
    }
}

#[test]
fn without_dma_reads_are_synchronous() {
    let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    assert_eq!(sd.queue_depth(), 0);
    let (buf, s) = submit(&mut sd, 77, 9, 0);
    assert_eq!(s, Submitted::Done);
    assert!(buf.bytes() == sim.expected(77, 9));
    assert_eq!(sd.poll_read(), None);
    check_no_violations(&sim);
}
