//! ADMA2 reads on the SDHCI driver against the simulator's ADMA2 engine and its bus memory
//! (`dma_mem`: the engine sees only cleaned bytes, the CPU only invalidated ones): a page in one
//! command straight into the caller's buffer, a bounce buffer for one the controller cannot
//! reach, queued reads that land while the CPU is elsewhere (the simulator's clock moves without
//! a register access), a synchronous request that drains the queue, ADMA errors once and always,
//! a descriptor pointing outside memory, and drivers that forget their cache maintenance.

mod dma_mem;
mod sd_card_sim;
mod sd_sim;

use dma_mem::{Buf, Forget, MemOp};
use drivers::block::{BlockDevice, Submitted};
use drivers::dma::DmaMemory;
use drivers::sd::{BusMode, Cause, SdError};
use drivers::sdhci::{Config, NoSlot, Sdhci, QUEUE_DEPTH};
use sd_sim::*;

const PAGE: usize = 256 << 10;

type Adma<D> = Sdhci<SimRegs, SimClock, NoSlot, D>;

/// An EMMC2-like host (SDHCI 3.00, 100 MHz base, High Speed) with the ADMA2 engine, an SDHC
/// card, `faults`, and the driver over `dma(sim)`.
fn start<D: DmaMemory>(faults: Faults, dma: impl FnOnce(&Sim) -> D) -> (Sim, Adma<D>) {
    let host = HostSpec {
        adma: true,
        ..HostSpec::v3(100_000_000)
    };
    let sim = Sim::new(host, sdhc(), faults);
    let mem = dma(&sim);
    let config = Config::new(100_000_000);
    match Sdhci::with_dma(sim.regs(), sim.clock(), config, NoSlot, mem) {
        Ok(sd) => (sim, sd),
        Err(e) => panic!("init: {e}\n{:?}", sim.violations()),
    }
}

fn read_into<D: DmaMemory>(sd: &mut Adma<D>, lba: u64, b: &mut Buf) -> Result<(), SdError> {
    sd.read_blocks(lba, b.slice())
}

#[test]
fn a_page_is_one_command_straight_into_the_buffer() {
    let (sim, mut sd) = start(Faults::default(), Sim::dma);
    assert!(sd.dma_active());
    assert_eq!(sd.queue_depth(), QUEUE_DEPTH);
    assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
    sim.clear_log();
    let mut b = Buf::new(PAGE, 0);
    let before = sim.mem_ops().len();
    read_into(&mut sd, 1_000, &mut b).unwrap();
    assert!(b.bytes() == sim.expected(1_000, 512).as_slice());
    let log = sim.log();
    assert_eq!(log.len(), 2, "{:?}", sim.names());
    assert_eq!((log[0].index, log[0].blocks), (18, 512));
    assert!(log[1].auto && log[1].index == 12);
    assert_eq!((sim.dma_transfers(), sd.stats().dma_transfers), (1, 1));
    // The table cleaned, the caller's buffer invalidated before and after: its own lines.
    let ops = &sim.mem_ops()[before..];
    let addr = b.ptr() as usize;
    let inval = MemOp::Invalidate { addr, len: PAGE };
    assert!(matches!(ops[0], MemOp::Map { .. }), "{ops:?}");
    assert!(matches!(ops[1], MemOp::Clean { len: 64, .. }), "{ops:?}");
    assert_eq!((ops[2], ops[4]), (inval, inval), "{ops:?}");
    check_no_violations(&sim);
}

#[test]
fn an_unaligned_buffer_goes_through_the_bounce_buffer() {
    let (sim, mut sd) = start(Faults::default(), Sim::dma);
    for (shift, blocks) in [(4usize, 8usize), (1, 1), (0, 3)] {
        let mut b = Buf::new(blocks * 512 + 4 * (shift % 2), shift);
        b.len = blocks * 512;
        read_into(&mut sd, 77_777, &mut b).unwrap();
        assert!(b.bytes() == sim.expected(77_777, blocks as u64).as_slice());
    }
    assert_eq!(sd.stats().dma_transfers, 3);
    check_no_violations(&sim);
}

/// Four pages queued: polls report nothing until the bus has had their time, then each tag with
/// its data; the pages took the bus's time, not the CPU's.
#[test]
fn queued_reads_land_while_the_cpu_is_elsewhere() {
    let (sim, mut sd) = start(Faults::default(), Sim::dma);
    let mut bufs: Vec<Buf> = (0..4).map(|_| Buf::new(PAGE, 0)).collect();
    let t0 = sim.now_us();
    let mut tags = Vec::new();
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: `b` stays alive and untouched until its tag is reported below.
        let r = unsafe { sd.submit_read(i as u64 * 512, b.ptr(), PAGE) }.unwrap();
        let Submitted::Queued(t) = r else {
            panic!("{r:?}")
        };
        tags.push(t);
    }
    assert_eq!(sd.poll_read(), None, "nothing has had time to arrive");
    // 512 blocks at 50 MHz on 4 lines: about 10.7 ms a page.
    let got = poll_until(&sim, &mut sd, 4);
    assert_eq!(got, tags, "reported in order");
    for (i, b) in bufs.iter().enumerate() {
        assert!(
            b.bytes() == sim.expected(i as u64 * 512, 512).as_slice(),
            "page {i}"
        );
    }
    let took = sim.now_us() - t0;
    assert!(
        (4 * 10_600..4 * 11_800).contains(&took),
        "{took} us for 4 pages"
    );
    check_no_violations(&sim);
}

#[test]
fn a_synchronous_request_drains_the_queue_first() {
    let (sim, mut sd) = start(Faults::default(), Sim::dma);
    let mut a = Buf::new(PAGE, 0);
    // SAFETY: `a` outlives the read, untouched until its tag comes back.
    let Submitted::Queued(t) = (unsafe { sd.submit_read(40, a.ptr(), PAGE) }).unwrap() else {
        panic!()
    };
    let mut b = Buf::new(4096, 0);
    read_into(&mut sd, 9_000, &mut b).unwrap();
    assert!(b.bytes() == sim.expected(9_000, 8).as_slice());
    // The queued read finished first and waits to be reported.
    assert_eq!(sd.poll_read().map(|(t, r)| (t, r.is_ok())), Some((t, true)));
    assert!(a.bytes() == sim.expected(40, 512).as_slice());
    check_no_violations(&sim);
}

/// An ADMA error on the second queued transfer: that read is done again (with the request
/// loop's retries) and reported right; an engine that always fails gives an error naming the
/// ADMA state and the LBA, reported through `poll_read`, never a hang.
#[test]
fn adma_errors_are_redone_or_reported() {
    let faults = Faults {
        adma_error_at: vec![1],
        ..Faults::default()
    };
    let (sim, mut sd) = start(faults, Sim::dma);
    let mut bufs: Vec<Buf> = (0..3).map(|_| Buf::new(PAGE, 0)).collect();
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: as above.
        unsafe { sd.submit_read(5_000 + i as u64 * 512, b.ptr(), PAGE) }.unwrap();
    }
    let mut done = 0;
    for _ in 0..1000 {
        sim.pass_us(1_000);
        while let Some((_, r)) = sd.poll_read() {
            r.unwrap();
            done += 1;
        }
        if done == 3 {
            break;
        }
    }
    assert_eq!(done, 3);
    for (i, b) in bufs.iter().enumerate() {
        assert!(b.bytes() == sim.expected(5_000 + i as u64 * 512, 512).as_slice());
    }
    assert!(sd.stats().dma_transfers >= 3);

    sim.set_faults(Faults {
        adma_error_always: true,
        ..Faults::default()
    });
    let mut b = Buf::new(PAGE, 0);
    // SAFETY: as above.
    unsafe { sd.submit_read(8_192, b.ptr(), PAGE) }.unwrap();
    let mut outcome = None;
    for _ in 0..1000 {
        sim.pass_us(1_000);
        if let Some((_, r)) = sd.poll_read() {
            outcome = Some(r);
            break;
        }
    }
    let e = outcome.expect("reported").unwrap_err();
    assert!(matches!(e.cause(), Some(Cause::Adma { .. })), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("ADMA2 error") && msg.contains("LBA 8192"),
        "{msg}"
    );
    check_no_violations(&sim);
}

/// A board whose bus addresses are wrong for page buffers (a descriptor points outside the
/// engine's memory): ADMA errors, then a clear error, never a hang.
#[test]
fn a_descriptor_outside_memory_gives_a_clear_error() {
    struct Liar(SimDma, u32);
    impl DmaMemory for Liar {
        fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
            self.1 += 1;
            // The driver's own area (the first call) is right; buffers are not.
            self.0
                .bus_address(addr, len)
                .map(|b| if self.1 > 1 { b ^ 0x2000_0000 } else { b })
        }
        fn to_device(&mut self, addr: usize, len: usize) {
            self.0.to_device(addr, len)
        }
        unsafe fn from_device(&mut self, addr: usize, len: usize) {
            // SAFETY: the driver's promise, passed on.
            unsafe { self.0.from_device(addr, len) }
        }
    }
    let (sim, mut sd) = start(Faults::default(), |s| Liar(s.dma(), 0));
    let mut b = Buf::new(PAGE, 0);
    let e = read_into(&mut sd, 600, &mut b).unwrap_err();
    assert!(
        matches!(e.cause(), Some(Cause::Adma { adma_status: 3, .. })),
        "{e:?}"
    );
    assert!(sim
        .violations()
        .iter()
        .all(|v| v.contains("outside memory")));
}

/// The memory model catches a driver without its cache maintenance: without the invalidate the
/// CPU reads stale bytes; without the clean the engine finds no valid descriptor.
#[test]
fn missing_cache_maintenance_shows() {
    let (sim, mut sd) = start(Faults::default(), |s| Forget(s.dma(), false, true));
    let mut b = Buf::new(PAGE, 0);
    read_into(&mut sd, 3, &mut b).unwrap();
    assert!(
        b.bytes() != sim.expected(3, 512).as_slice(),
        "stale data unseen"
    );
    let (_, mut sd) = start(Faults::default(), |s| Forget(s.dma(), true, false));
    let e = read_into(&mut sd, 3, &mut b).unwrap_err();
    assert!(
        matches!(e.cause(), Some(Cause::Adma { adma_status: 1, .. })),
        "{e:?}"
    );
}
