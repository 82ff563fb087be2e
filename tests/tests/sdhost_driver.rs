//! The sdhost driver and the BCM2835 DMA engine against `sdhost_sim`, for what QEMU's models do not
//! show: High Speed at 50 MHz from the core clock (and the best below it), DREQ pacing (the
//! engine moves words only as the FIFO has them, so a page's DMA ends no sooner than its bus
//! time), the state machine stuck in READWAIT (kicked with FORCE_DATA_MODE, or a named error),
//! CRC errors stepping the bus down, a DMA error named and retried (then PIO for good), a control
//! block outside the driver's memory refused, a missing cache invalidate caught by the memory
//! model, PIO reads and writes, and queued reads.

mod dma_mem;
mod sd_card_sim;
mod sdhost_sim;

use drivers::bcm2835::dma::{DmaChannel, DmaError, DMA_BLOCK_SIZE};
use drivers::block::{BlockDevice, Submitted, WriteBlocks};
use drivers::dma::DmaMemory;
use drivers::sd::{BusMode, Cause, SdError};
use sdhost_sim::*;

/// A 256 KiB page, in blocks.
const PAGE_BLOCKS: usize = 512;

/// Read `blocks` from `lba` into an aligned buffer; the data must be the card's.
fn read_page<D: DmaMemory>(sim: &Sim, sd: &mut DmaDriver<D>, lba: u64, blocks: usize) -> Buf {
    let mut buf = Buf::new(blocks * 512, 0);
    if let Err(e) = sd.read_blocks(lba, buf.slice()) {
        panic!("read {blocks} from {lba}: {e}\n{:?}", sim.violations());
    }
    buf
}

#[test]
fn high_speed_at_50_mhz_and_a_page_by_dma_with_the_pio_tail() {
    let (sim, mut sd) = start_dma(sdhc(), Faults::default());
    let i = *sd.info();
    assert_eq!(i.bus_mode, BusMode::HighSpeed);
    assert_eq!(i.data_clock_hz, 50_000_000);
    assert_eq!(sd.divider(), 5, "350 MHz / (5 + 2)");
    assert_eq!(sim.clock_hz(), 50_000_000);
    assert_eq!(i.bus_width, 4);
    assert!(sd.high_speed_note().is_none());
    assert_eq!(sd.dma_channel(), Some(CHANNEL));
    sim.clear_log();
    let cpu_before = sim.cpu_words();
    let buf = read_page(&sim, &mut sd, 1000, PAGE_BLOCKS);
    assert!(buf.bytes() == sim.expected(1000, PAGE_BLOCKS as u64));
    assert_eq!(sim.names(), ["CMD18", "CMD12"], "one command for the page");
    // All but the last three words by DMA, those by PIO.
    assert_eq!(sim.dma_words(), (PAGE_BLOCKS * 128 - 3) as u64);
    assert_eq!(sim.cpu_words() - cpu_before, 3);
    assert_eq!(sd.stats().dma_transfers, 1);
    assert_eq!(sd.stats().bounce_transfers, 0);
    check_no_violations(&sim);
}

#[test]
fn a_core_clock_without_50_mhz_gives_the_best_below_and_says_so() {
    // 330 MHz: 330 / (5 + 2) = 47.1 MHz. The simulator runs at 350 MHz, so the driver's own
    // view of its clock is what is checked here, and that it never exceeds 50 MHz.
    let (sim, sd) = match try_start_dma(
        sdhc(),
        Faults::default(),
        drivers::sdhost::Config::new(330_000_000),
        Sim::dma,
    ) {
        (sim, Ok(sd)) => (sim, sd),
        (_, Err(e)) => panic!("{e}"),
    };
    assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
    assert_eq!(sd.info().data_clock_hz, 47_142_857);
    assert_eq!(sd.high_speed_note(), Some((330_000_000, 5)));
    drop(sim);
}

#[test]
fn dma_is_paced_by_the_fifo_not_faster_than_the_bus() {
    let (sim, mut sd) = start_dma(sdhc(), Faults::default());
    let start = sim.now_ns();
    let _ = read_page(&sim, &mut sd, 0, PAGE_BLOCKS);
    let ends = sim.dma_ends();
    let end = *ends.last().expect("a DMA transfer ended");
    // 512 blocks of 4112 bits on 4 lines at 50 MHz: 10.5 ms; the engine cannot finish sooner.
    let bus_ns = 512 * 4112 * 20 / 4;
    assert!(
        end - start >= bus_ns,
        "DMA ended after {} ns, the bus needs {bus_ns}",
        end - start
    );
    // Nor much later: it follows the FIFO.
    assert!(end - start < bus_ns + 2_000_000, "{} ns", end - start);
    check_no_violations(&sim);
}

#[test]
fn queued_reads_land_only_when_the_engine_has_moved_them() {
    let (sim, mut sd) = start_dma(sdhc(), Faults::default());
    assert_eq!(sd.queue_depth(), drivers::sdhost::QUEUE_DEPTH);
    let mut bufs: Vec<Buf> = (0..3).map(|_| Buf::new(PAGE_BLOCKS * 512, 0)).collect();
    let mut tags = vec![];
    for (k, b) in bufs.iter_mut().enumerate() {
        // SAFETY: the buffer outlives the request and is not touched until it is reported.
        let s = unsafe { sd.submit_read((k * PAGE_BLOCKS) as u64, b.ptr(), b.len) }.unwrap();
        match s {
            Submitted::Queued(t) => tags.push(t),
            Submitted::Done => panic!("not queued"),
        }
    }
    assert!(
        sd.poll_read().is_none(),
        "nothing can have landed without time passing"
    );
    let mut done = vec![];
    for _ in 0..10_000 {
        sim.pass_us(500);
        if let Some((t, r)) = sd.poll_read() {
            r.unwrap();
            done.push(t);
        }
        if done.len() == 3 {
            break;
        }
    }
    assert_eq!(done, tags);
    for (k, b) in bufs.iter().enumerate() {
        assert!(b.bytes() == sim.expected((k * PAGE_BLOCKS) as u64, PAGE_BLOCKS as u64));
    }
    assert_eq!(sd.stats().queued_reads, 3);
    check_no_violations(&sim);
}

#[test]
fn a_stuck_readwait_is_kicked_with_force_data_mode() {
    let faults = Faults {
        stuck_readwait: true,
        ..Faults::default()
    };
    let (sim, mut sd) = start_dma(sdhc(), faults);
    let a = read_page(&sim, &mut sd, 10, 8);
    assert!(a.bytes() == sim.expected(10, 8));
    let b = read_page(&sim, &mut sd, 20, 8);
    assert!(b.bytes() == sim.expected(20, 8));
    // The second read's CMD18 found READWAIT (CMD12, an abort, goes without waiting).
    assert_eq!(sd.stats().fsm_kicks, 1, "{:?}", sd.stats());
    let _ = read_page(&sim, &mut sd, 30, 8);
    assert_eq!(sd.stats().fsm_kicks, 2);
    assert_eq!(sd.stats().retries, 0, "kicked, not retried");
    check_no_violations(&sim);
}

#[test]
fn a_state_machine_stuck_for_ever_is_a_named_error() {
    let (sim, mut sd) = start_dma(sdhc(), Faults::default());
    sim.set_faults(Faults {
        stuck_readwait: true,
        stuck_for_ever: true,
        ..Faults::default()
    });
    let _ = read_page(&sim, &mut sd, 0, 4);
    let mut buf = Buf::new(4 * 512, 0);
    let e = sd.read_blocks(8, buf.slice()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("state machine stayed in state 4 after FORCE_DATA_MODE"),
        "{text}"
    );
}

#[test]
fn crc_errors_at_high_speed_step_down_to_25_mhz() {
    let faults = Faults {
        crc_above_hz: Some(30_000_000),
        ..Faults::default()
    };
    let (sim, mut sd) = start_dma(sdhc(), faults);
    assert_eq!(sd.info().data_clock_hz, 50_000_000);
    let buf = read_page(&sim, &mut sd, 0, 16);
    assert!(buf.bytes() == sim.expected(0, 16));
    assert_eq!(sd.info().bus_mode, BusMode::DefaultSpeed);
    assert_eq!(sd.info().data_clock_hz, 25_000_000);
    assert_eq!(sd.stats().step_downs, 1);
    let note = sd.info().speed_note.expect("a note").to_string();
    assert!(note.contains("data CRC"), "{note}");
}

#[test]
fn a_dma_error_is_named_retried_and_then_pio_for_good() {
    let (sim, mut sd) = start_dma(sdhc(), Faults::default());
    let first = sim.dma_transfers();
    sim.set_faults(Faults {
        dma_error_at: vec![first],
        ..Faults::default()
    });
    let buf = read_page(&sim, &mut sd, 100, 32);
    assert!(buf.bytes() == sim.expected(100, 32));
    let st = sd.stats();
    assert_eq!((st.dma_errors, st.retries), (1, 1));
    match st.last_dma_error {
        Some(DmaError::Engine {
            channel: 5, debug, ..
        }) => assert_eq!(debug & 4, 4),
        other => panic!("{other:?}"),
    }
    assert!(sd.dma_active(), "one error keeps DMA");
    // Every transfer fails: after two errors the driver reads by PIO, and the read succeeds.
    sim.set_faults(Faults {
        dma_error_always: true,
        ..Faults::default()
    });
    let buf = read_page(&sim, &mut sd, 200, 32);
    assert!(buf.bytes() == sim.expected(200, 32));
    assert!(!sd.dma_active());
    assert_eq!(sd.stats().dma_errors, 2);
    assert_eq!(sd.stats().dma_channel, None);
    let text = Cause::Dma(st.last_dma_error.unwrap()).to_string();
    assert!(text.contains("DMA channel 5 error: read error"), "{text}");
}

#[test]
fn a_control_block_outside_the_drivers_memory_is_refused() {
    let sim = Sim::new(sdhc(), Faults::default());
    let mut ch = DmaChannel::new(sim.dma_regs(), CHANNEL);
    let e = ch.start(0x2000_0000, 0xC100_0000, 0xC101_0000).unwrap_err();
    assert_eq!(
        e,
        DmaError::ControlBlockOutside {
            bus: 0x2000_0000,
            lo: 0xC100_0000,
            hi: 0xC101_0000
        }
    );
    assert!(e.to_string().contains("not started"));
    // Misaligned inside the range: refused too.
    assert!(ch.start(0xC100_0010, 0xC100_0000, 0xC101_0000).is_err());
    assert_eq!(sim.dma_transfers(), 0, "the engine never started");
    assert_eq!(DMA_BLOCK_SIZE, 0x1000);
}

/// Memory the engine cannot reach at all: the driver keeps to PIO and still reads.
struct NoBus;
impl DmaMemory for NoBus {
    fn bus_address(&mut self, _: usize, _: usize) -> Option<u32> {
        None
    }
    fn to_device(&mut self, _: usize, _: usize) {}
    unsafe fn from_device(&mut self, _: usize, _: usize) {}
}

#[test]
fn memory_the_engine_cannot_reach_means_pio() {
    let (sim, sd) = try_start_dma(sdhc(), Faults::default(), config(), |_| NoBus);
    let mut sd = sd.unwrap();
    assert!(!sd.dma_active());
    let buf = read_page(&sim, &mut sd, 5, 8);
    assert!(buf.bytes() == sim.expected(5, 8));
    assert_eq!(sim.dma_transfers(), 0);
}

#[test]
fn a_missing_invalidate_is_caught_by_the_memory_model() {
    let (sim, sd) = try_start_dma(sdhc(), Faults::default(), config(), |s| {
        Forget(s.dma(), false, true)
    });
    let mut sd = sd.unwrap();
    let mut buf = Buf::new(8 * 512, 0);
    sd.read_blocks(0, buf.slice()).unwrap();
    // The engine wrote memory; the CPU, never told to invalidate, still sees its 0xA5 bytes but
    // for the PIO tail.
    assert!(buf.bytes() != sim.expected(0, 8));
    assert!(buf.bytes()[..64].iter().all(|&b| b == 0xA5));
    assert_eq!(
        &buf.bytes()[8 * 512 - 12..],
        &sim.expected(0, 8)[8 * 512 - 12..]
    );
}

#[test]
fn pio_reads_and_writes() {
    let (sim, mut sd) = start_pio(sdhc(), Faults::default());
    assert!(!sd.dma_active());
    assert_eq!(sd.info().data_clock_hz, 50_000_000);
    let mut buf = vec![0u8; 64 * 512];
    sd.read_blocks(300, &mut buf).unwrap();
    assert!(buf == sim.expected(300, 64));
    let data: Vec<u8> = (0..4 * 512).map(|i| (i * 7) as u8).collect();
    sd.write_blocks(77, &data).unwrap();
    sd.write_blocks(90, &data[..512]).unwrap();
    assert_eq!(sim.written_lbas(), [77, 78, 79, 80, 90]);
    assert!(sim.expected(77, 4) == data);
    check_no_violations(&sim);
}

#[test]
fn a_card_that_is_not_there_is_no_card() {
    let mut card = sdhc();
    card.inserted = false;
    let (_, sd) = try_start_dma(card, Faults::default(), config(), Sim::dma);
    let e = sd.unwrap_err();
    assert!(e.is_no_card(), "{e}");
    assert!(matches!(e, SdError::Init { .. }));
}

/// The simulator's memory with every bus address moved 4 bytes on: the driver's control block
/// then sits at a bus address the engine cannot take (not 32-byte aligned).
struct Shifted(SimDma);
impl DmaMemory for Shifted {
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        self.0.bus_address(addr, len).map(|b| b + 4)
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
fn a_misplaced_control_block_never_starts_the_engine_and_reads_fall_back_to_pio() {
    let (sim, sd) = try_start_dma(sdhc(), Faults::default(), config(), |s| Shifted(s.dma()));
    let mut sd = sd.unwrap();
    assert!(sd.dma_active());
    let buf = read_page(&sim, &mut sd, 40, 16);
    assert!(buf.bytes() == sim.expected(40, 16));
    assert_eq!(sim.dma_transfers(), 0, "the engine never started");
    let st = sd.stats();
    assert!(
        matches!(
            st.last_dma_error,
            Some(DmaError::ControlBlockOutside { .. })
        ),
        "{st:?}"
    );
    assert!(!sd.dma_active(), "refused twice: PIO for good");
    check_no_violations(&sim);
}
