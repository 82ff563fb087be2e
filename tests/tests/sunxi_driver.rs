//! The Allwinner SD/MMC driver (`drivers::sunxi_mmc`) against the register-level simulator in
//! `sunxi_sim`: the CCU programming (gate, reset, module clock), identification of SDHC and SDSC
//! cards in order, the clocks the card sees, single and multi-block reads compared with the card,
//! reads past the end refused, writes only when asked and on the right blocks, a write-protected
//! card refused, an empty slot reported as "no card" (the QEMU model's and hardware's ways of
//! reporting no response), CRC errors retried and, when they persist, reported with the LBA and
//! RINT bits, a controller that never takes a command or a clock update, a FIFO that never fills,
//! and garbage status registers: an error or success, never a panic or a hang. The DMA read path
//! (IDMAC) the same way: reads of one and many blocks and descriptors compared with the card, the
//! descriptors cleaned and the data invalidated on whole cache lines, IDMAC and CRC errors retried
//! and then named, a transfer that never ends, writes still through the FIFO, PIO when DMA is off
//! or the memory out of reach, and garbage in IDST. Page-sized and queued DMA reads are in
//! `sunxi_queue.rs`.

mod dma_mem;
mod sd_card_sim;
mod sunxi_sim;

use drivers::block::{BlockDevice, RequestError, WriteBlocks};
use drivers::sd::{
    is_read_only, BusMode, Cause, Cmd, Failed, HostKind, SdError, Step, Wait, WriteProtect,
};
use drivers::sunxi_mmc::{
    Config, DmaMemory, SunxiMmc, DMA_ALIGN, DMA_BUFFER_BYTES, DMA_DESC_BYTES,
};
use sunxi_sim::*;

type Over<D> = SunxiMmc<SimRegs, SimClock, D>;

fn read<D: DmaMemory>(sd: &mut Over<D>, lba: u64, blocks: usize) -> Result<Vec<u8>, SdError> {
    read_blocks(sd, lba, blocks)
}

fn read_ok<D: DmaMemory>(sim: &Sim, sd: &mut Over<D>, lba: u64, blocks: usize) {
    match read(sd, lba, blocks) {
        Ok(got) => assert!(
            got == sim.expected(lba, blocks as u64),
            "{blocks} block(s) from LBA {lba} differ from the card's"
        ),
        Err(e) => panic!(
            "read of {blocks} from {lba} failed: {e}\n{:?}\n{:?}",
            sim.names(),
            sim.violations()
        ),
    }
}

/// Only read-only commands on the bus, and no protocol violation.
fn check_clean_read_only(sim: &Sim) {
    check_no_violations(sim);
    for c in sim.log() {
        let cmd = Cmd {
            index: c.index,
            app: c.app,
        };
        assert!(is_read_only(cmd), "{} on the bus", c.name());
    }
}

fn sdsc(kind: Kind, blocks: usize) -> CardSpec {
    let bytes: Vec<u8> = (0..blocks * 512)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8)
        .collect();
    CardSpec::new(kind, Backing::Bytes(bytes))
}

#[test]
fn sdhc_init_programs_the_ccu_and_identifies_in_order() {
    let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    let mut want = vec!["CMD0", "CMD8"];
    for _ in 0..4 {
        want.extend(["CMD55", "ACMD41"]);
    }
    want.extend([
        "CMD2", "CMD3", "CMD9", "CMD7", "CMD55", "ACMD6", "CMD6", "CMD6",
    ]);
    assert_eq!(sim.names(), want);
    // The CCU: MMC0's gate and reset on; the module clock 50 MHz from PLL_PERIPH0 (600 MHz / 12)
    // with U-Boot's phase delays for it (output 3, sample 4).
    assert_eq!(sim.ccu(ccu::BUS_CLK_GATING_REG0) & MMC0_MASK, MMC0_MASK);
    assert_eq!(sim.ccu(ccu::BUS_SOFT_RST_REG0) & MMC0_MASK, MMC0_MASK);
    assert_eq!(sim.ccu(ccu::SDMMC0_CLK_REG), 0x8140_030B);
    // Identification at 400 kHz (24 MHz / 4 / 15); CMD6 at 24 MHz (OSC24M undivided), then
    // High Speed at 50 MHz on 4 bits.
    assert!(sim.log().iter().take(12).all(|c| c.clock_hz == 400_000));
    let cmd6: Vec<_> = sim
        .log()
        .into_iter()
        .filter(|c| c.name() == "CMD6")
        .collect();
    assert_eq!(
        cmd6.iter().map(|c| (c.arg, c.clock_hz)).collect::<Vec<_>>(),
        [(0x00FF_FFF0, 24_000_000), (0x80FF_FFF1, 24_000_000)]
    );
    assert_eq!(sim.card_clock_hz(), 50_000_000);
    assert!(sim.card_4bit() && sim.host_4bit());
    let info = *sd.info();
    assert_eq!(info.host, HostKind::Sunxi);
    assert!(info.high_capacity && info.sd_v2);
    assert_eq!(
        (info.id_clock_hz, info.data_clock_hz, info.bus_mode),
        (400_000, 50_000_000, BusMode::HighSpeed)
    );
    assert_eq!(sd.num_blocks(), 64 << 20);
    assert_eq!(sd.queue_depth(), 0);
    assert_eq!(&info.cid().product_name, b"LMSIM");
    let s = info.to_string();
    assert!(
        s.contains("SDHC") && s.contains("LMSIM") && s.contains("Allwinner"),
        "{s}"
    );

    sim.clear_log();
    read_ok(&sim, &mut sd, 0, 1);
    read_ok(&sim, &mut sd, 12_345, 37);
    read_ok(&sim, &mut sd, (64 << 20) - 3, 3);
    // SDHC: block addresses; one block is CMD17, more CMD18 with auto stop.
    let log = sim.log();
    assert_eq!((log[0].index, log[0].arg), (17, 0));
    assert_eq!((log[1].index, log[1].arg), (18, 12_345));
    assert!(log[2].auto && log[2].index == 12);
    check_clean_read_only(&sim);
}

#[test]
fn sdsc_cards_use_byte_addresses() {
    for kind in [Kind::SdscV2, Kind::SdscV1] {
        for host in [HostSpec::qemu(), HostSpec::hardware()] {
            let (sim, mut sd) = start(host, sdsc(kind, 4096), Faults::default(), Config::new());
            let names = sim.names();
            assert_eq!(names[names.len() - 3], "CMD16", "{names:?}");
            assert!(!sd.info().high_capacity);
            assert_eq!(sd.info().sd_v2, kind == Kind::SdscV2);
            sim.clear_log();
            read_ok(&sim, &mut sd, 100, 4);
            assert_eq!(sim.log()[0].arg, 100 * 512);
            read_ok(&sim, &mut sd, 4095, 1);
            check_clean_read_only(&sim);
        }
    }
}

#[test]
fn without_the_ccu_the_controller_divider_makes_the_clocks() {
    let host = HostSpec {
        left_on: true,
        ..HostSpec::hardware()
    };
    let (sim, mut sd) = start(host, sdhc(), Faults::default(), Config::new());
    // Nothing written to the CCU; CLKCR divider 30 gives 24 MHz / 60.
    assert_eq!(sim.ccu(ccu::SDMMC0_CLK_REG), 0x8000_0000);
    assert!(sim.log().iter().take(3).all(|c| c.clock_hz == 400_000));
    assert_eq!(sd.info().data_clock_hz, 24_000_000);
    read_ok(&sim, &mut sd, 7, 9);
    check_clean_read_only(&sim);
}

#[test]
fn reads_past_the_end_are_refused_before_the_bus() {
    let (sim, mut sd) = start(
        HostSpec::qemu(),
        sdsc(Kind::SdscV2, 64),
        Faults::default(),
        Config::new(),
    );
    sim.clear_log();
    for (lba, n) in [(64, 1), (63, 2), (u64::MAX, 1)] {
        let e = read(&mut sd, lba, n).unwrap_err();
        assert!(matches!(e, SdError::Request(_)), "{e:?}");
        assert!(e.to_string().contains("LBA"), "{e}");
    }
    let mut odd = vec![0u8; 100];
    assert!(matches!(
        sd.read_blocks(0, &mut odd),
        Err(SdError::Request(RequestError::PartialBlock { .. }))
    ));
    assert!(sim.log().is_empty(), "{:?}", sim.names());
}

#[test]
fn writes_go_only_where_asked() {
    let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    read_ok(&sim, &mut sd, 0, 8);
    check_clean_read_only(&sim);
    assert!(sim.written_lbas().is_empty());

    let data: Vec<u8> = (0..3 * 512).map(|i| (i * 7 + 3) as u8).collect();
    sd.write_blocks(1000, &data).unwrap();
    assert_eq!(sim.written_lbas(), vec![1000, 1001, 1002]);
    assert!(sim.expected(1000, 3) == data);
    assert!(sim.expected(999, 1) == pattern_block(999));
    assert!(sim.expected(1003, 1) == pattern_block(1003));
    sd.write_blocks(5, &data[..512]).unwrap();
    assert!(sim.expected(5, 1) == data[..512]);
    // Read back through the driver.
    assert!(read(&mut sd, 1000, 3).unwrap() == data);
    let names = sim.names();
    assert!(names.contains(&"CMD25".into()) && names.contains(&"CMD24".into()));
    assert_eq!(sd.stats().blocks_written, 4);
    check_no_violations(&sim);
    // Past the end: refused, nothing written.
    assert!(sd.write_blocks((64 << 20) - 1, &data).is_err());
    assert_eq!(sim.written_lbas().len(), 4);
}

#[test]
fn without_auto_stop_the_driver_sends_cmd12() {
    let config = Config {
        auto_stop: false,
        ..Config::new()
    };
    let (sim, mut sd) = start(HostSpec::hardware(), sdhc(), Faults::default(), config);
    sim.clear_log();
    read_ok(&sim, &mut sd, 50, 5);
    let log = sim.log();
    assert_eq!(log.len(), 2);
    assert!(log[1].index == 12 && !log[1].auto);
    // The same after a DMA read.
    let (dsim, mut dsd) = start_dma(HostSpec::hardware(), sdhc(), Faults::default(), config);
    dsim.clear_log();
    read_ok(&dsim, &mut dsd, 50, 5);
    assert_eq!(dsim.names(), ["CMD18", "CMD12"]);
    assert!(dsim.log().iter().all(|c| !c.auto));
    assert_eq!(dsim.dma_transfers(), 1);
    check_no_violations(&dsim);
    let data = vec![0x5Au8; 1024];
    sd.write_blocks(60, &data).unwrap();
    assert!(sim.expected(60, 2) == data);
    check_no_violations(&sim);
}

#[test]
fn a_write_protected_card_is_refused_and_nothing_is_sent() {
    let card = CardSpec {
        perm_write_protect: true,
        ..sdhc()
    };
    let (sim, mut sd) = start(HostSpec::qemu(), card, Faults::default(), Config::new());
    sim.clear_log();
    let e = sd.write_blocks(10, &[1u8; 512]).unwrap_err();
    assert!(
        matches!(
            e,
            SdError::WriteProtected {
                by: WriteProtect::CsdPermanent,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("permanently write-protected"), "{e}");
    assert!(sim.log().is_empty());
    assert!(sim.written_lbas().is_empty());
}

#[test]
fn an_empty_slot_is_no_card_in_bounded_time() {
    for host in [HostSpec::qemu(), HostSpec::hardware()] {
        let card = CardSpec {
            inserted: false,
            ..sdhc()
        };
        let (sim, r) = try_start(host, card, Faults::default(), Config::new());
        let e = r.unwrap_err();
        assert!(e.is_no_card(), "{e:?}");
        assert!(e.to_string().contains("no card answered"), "{e}");
        assert!(sim.now_us() < 100_000, "took {} us", sim.now_us());
        check_no_violations(&sim);
    }
}

#[test]
fn transient_crc_errors_are_retried_and_recover() {
    let (sim, mut sd) = start(
        HostSpec::hardware(),
        sdhc(),
        Faults::default(),
        Config::new(),
    );
    // A data CRC error on the third block the card sends next.
    let at = sim.blocks_sent() + 2;
    sim.set_faults(Faults {
        data_crc_at: vec![at],
        ..Faults::default()
    });
    read_ok(&sim, &mut sd, 300, 6);
    assert_eq!(sd.stats().retries, 1);
    // A response CRC error on the next command.
    let at = sim.commands_seen();
    sim.set_faults(Faults {
        cmd_crc_at: vec![at],
        ..Faults::default()
    });
    read_ok(&sim, &mut sd, 900, 2);
    assert_eq!(sd.stats().retries, 2);
    assert!(sd.stats().controller_resets >= 2);
    check_no_violations(&sim);
}

#[test]
fn a_persistent_crc_error_names_the_lba_and_the_bits() {
    let faults = Faults {
        bad_lbas: vec![77],
        ..Faults::default()
    };
    let (sim, mut sd) = start(HostSpec::hardware(), sdhc(), faults, Config::new());
    let e = read(&mut sd, 75, 4).unwrap_err();
    match e {
        SdError::Read(Failed {
            cmd,
            lba,
            attempts,
            cause: Cause::Rint { rint },
            ..
        }) => {
            assert_eq!((cmd, lba, attempts), (Cmd::new(18), 77, 3));
            assert!(rint & (1 << 7) != 0, "{rint:#x}");
        }
        other => panic!("{other:?}"),
    }
    let s = e.to_string();
    assert!(
        s.contains("CMD18 at LBA 77") && s.contains("data CRC error") && s.contains("RINT"),
        "{s}"
    );
    assert_eq!(sd.stats().reinits, 1);
    // The blocks around it still read.
    read_ok(&sim, &mut sd, 70, 7);
    read_ok(&sim, &mut sd, 78, 3);
}

#[test]
fn a_controller_that_never_takes_a_command_times_out() {
    let faults = Faults {
        stuck_start: true,
        ..Faults::default()
    };
    let (sim, r) = try_start(HostSpec::qemu(), sdhc(), faults, Config::new());
    let e = r.unwrap_err();
    assert!(e.is_timeout(), "{e:?}");
    assert!(
        matches!(
            e,
            SdError::Init {
                step: Step::Command(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("start bit"), "{e}");
    assert!(sim.now_us() < 2_000_000, "took {} us", sim.now_us());

    // Mid-run: reads fail in bounded time, then work again once the controller does.
    let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    sim.set_faults(Faults {
        stuck_start: true,
        ..Faults::default()
    });
    let t0 = sim.now_us();
    let e = read(&mut sd, 5, 2).unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(sim.now_us() - t0 < 5_000_000);
    sim.set_faults(Faults::default());
    sd.reinit().unwrap();
    read_ok(&sim, &mut sd, 5, 2);
}

#[test]
fn a_clock_update_that_never_finishes_is_a_clock_error() {
    let faults = Faults {
        stuck_clock_update: true,
        ..Faults::default()
    };
    let (sim, r) = try_start(HostSpec::hardware(), sdhc(), faults, Config::new());
    let e = r.unwrap_err();
    match e {
        SdError::Init {
            step: Step::Clock,
            cause:
                Cause::SunxiTimeout {
                    wait: Wait::ClockUpdate,
                    ..
                },
        } => {}
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("clock update"), "{e}");
    assert!(sim.now_us() < 1_000_000);
    assert!(sim.log().is_empty());
}

/// Read data that never comes: a timeout for `want` in bounded time, said with `text`, and reads
/// work again afterwards.
fn data_never_comes<D: DmaMemory>(sim: &Sim, sd: &mut Over<D>, want: Wait, text: &str) {
    sim.set_faults(Faults {
        fifo_never_fills: true,
        ..Faults::default()
    });
    let t0 = sim.now_us();
    let e = read(sd, 40, 3).unwrap_err();
    let took = sim.now_us() - t0;
    assert!(took < 10_000_000, "took {took} us");
    match e {
        SdError::Read(Failed {
            lba,
            cause: Cause::SunxiTimeout { wait, .. },
            ..
        }) => assert_eq!((lba, wait), (40, want)),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains(text), "{e}");
    sim.set_faults(Faults::default());
    read_ok(sim, sd, 40, 3);
}

#[test]
fn a_fifo_that_never_fills_times_out() {
    let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    data_never_comes(&sim, &mut sd, Wait::FifoData(0), "FIFO data for block 0");
}

#[test]
fn a_card_that_never_powers_up_fails_in_bounded_time() {
    let faults = Faults {
        never_ready: true,
        ..Faults::default()
    };
    let (sim, r) = try_start(HostSpec::qemu(), sdhc(), faults, Config::new());
    let e = r.unwrap_err();
    assert!(matches!(
        e,
        SdError::Init {
            cause: Cause::NotReady { .. },
            ..
        }
    ));
    assert!(sim.now_us() < 3_000_000);
}

#[test]
fn garbage_status_registers_give_errors_not_panics() {
    for seed in 1..40u64 {
        let faults = Faults {
            garbage: Some(seed * 0x9E37_79B9),
            ..Faults::default()
        };
        let (sim, r) = try_start(HostSpec::qemu(), sdhc(), faults, Config::new());
        assert!(
            sim.now_us() < 10_000_000,
            "seed {seed}: {} us",
            sim.now_us()
        );
        if let Ok(mut sd) = r {
            let _ = read(&mut sd, 3, 2);
        }
        // After a good start, garbage in the middle of reads and writes.
        let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
        sim.set_faults(Faults {
            garbage: Some(seed),
            ..Faults::default()
        });
        let t0 = sim.now_us();
        let _ = read(&mut sd, 10, 3);
        let _ = sd.write_blocks(10, &[0u8; 1024]);
        assert!(sim.now_us() - t0 < 30_000_000, "seed {seed}");
        // And the driver recovers once the registers make sense again.
        sim.set_faults(Faults::default());
        sd.reinit().unwrap();
        read_ok(&sim, &mut sd, 10, 1);
    }
}

#[test]
fn every_operation_is_fenced_by_barriers() {
    let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    assert_eq!(sim.barriers(), 2);
    read_ok(&sim, &mut sd, 1, 1);
    sd.write_blocks(1, &[9u8; 512]).unwrap();
    assert_eq!(sim.barriers(), 6);
}

// ---- The DMA read path (IDMAC) ----

#[test]
fn dma_reads_match_the_card() {
    let per_command = DMA_BUFFER_BYTES / 512;
    for host in [HostSpec::qemu(), HostSpec::hardware()] {
        let (sim, mut sd) = start_dma(host, sdhc(), Faults::default(), Config::new());
        assert!(sd.dma_active());
        // Identification moves no data.
        assert_eq!(sim.dma_transfers(), 0);
        sim.clear_log();
        read_ok(&sim, &mut sd, 0, 1);
        read_ok(&sim, &mut sd, 12_345, 37);
        read_ok(&sim, &mut sd, (64 << 20) - 3, 3);
        // One whole bounce buffer; then more than one: straight into a cache-aligned buffer in
        // one command, through the bounce buffer a command per bounce buffer.
        read_ok(&sim, &mut sd, 1_000, per_command);
        let bounced_small = sd.stats().bounce_transfers;
        let before = sim.dma_transfers();
        read_into(&sim, &mut sd, 5_000, 2 * per_command + 5, 0);
        assert_eq!(sim.dma_transfers() - before, 1);
        read_into(&sim, &mut sd, 5_000, 2 * per_command + 5, 8);
        assert_eq!(sim.dma_transfers() - before, 4);
        // Every data command went through the IDMAC, none through the FIFO.
        assert_eq!(sim.dma_transfers(), 8);
        let log = sim.log();
        assert_eq!((log[0].index, log[0].arg), (17, 0));
        assert_eq!((log[1].index, log[1].arg), (18, 12_345));
        assert!(log[2].auto && log[2].index == 12);
        check_clean_read_only(&sim);
        assert_eq!(sd.stats().retries, 0);
        assert_eq!(sd.stats().dma_transfers, 8);
        assert_eq!(sd.stats().bounce_transfers - bounced_small, 3);
        assert_eq!(
            sd.stats().blocks_read,
            1 + 37 + 3 + 5 * per_command as u64 + 10
        );
    }
    // SDSC: byte addresses through the same path.
    let (sim, mut sd) = start_dma(
        HostSpec::qemu(),
        sdsc(Kind::SdscV2, 4096),
        Faults::default(),
        Config::new(),
    );
    sim.clear_log();
    read_ok(&sim, &mut sd, 100, 20);
    assert_eq!(sim.log()[0].arg, 100 * 512);
    check_clean_read_only(&sim);
}

#[test]
fn dma_reads_span_several_descriptors_into_any_buffer() {
    let (sim, mut sd) = start_dma(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    let per_desc = DMA_DESC_BYTES / 512;
    // Exactly one descriptor, one block more, several and a part.
    for blocks in [per_desc, per_desc + 1, 3 * per_desc + 2] {
        read_ok(&sim, &mut sd, 777, blocks);
    }
    // The caller's buffer at an odd address: the bounce buffer takes the alignment.
    let mut buf = vec![0u8; 9 * 512 + 1];
    sd.read_blocks(4242, &mut buf[1..]).unwrap();
    assert!(buf[1..] == sim.expected(4242, 9)[..]);
    check_no_violations(&sim);
}

#[test]
fn dma_cleans_the_descriptors_and_invalidates_the_data() {
    let (sim, mut sd) = start_dma(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    for blocks in [1usize, 8, 9, 100] {
        sim.clear_mem_ops();
        read_ok(&sim, &mut sd, 50, blocks);
        let ops = sim.mem_ops();
        let at = ops
            .iter()
            .position(|o| matches!(o, MemOp::Transfer { .. }))
            .unwrap_or_else(|| panic!("no transfer: {ops:?}"));
        assert_eq!(
            ops[at],
            MemOp::Transfer {
                blocks: blocks as u32
            }
        );
        // Before the command: the descriptors cleaned (all of those the transfer uses).
        let descs = (blocks * 512).div_ceil(DMA_DESC_BYTES);
        let cleans: Vec<_> = ops[..at]
            .iter()
            .filter_map(|o| match *o {
                MemOp::Clean { addr, len } => Some((addr, len)),
                _ => None,
            })
            .collect();
        assert_eq!(cleans.len(), 1, "{ops:?}");
        let (desc_addr, desc_len) = cleans[0];
        assert!(desc_len >= 16 * descs && desc_len <= 16 * descs.next_multiple_of(4));
        assert!(sim.bus_of(desc_addr).is_some());
        // After it: the data invalidated, whole cache lines, apart from the descriptors; nothing
        // cleaned after the controller wrote.
        let data = blocks * 512;
        let invalidated: Vec<_> = ops[at..]
            .iter()
            .filter_map(|o| match *o {
                MemOp::Invalidate { addr, len } => Some((addr, len)),
                MemOp::Clean { .. } => panic!("clean after the transfer: {ops:?}"),
                _ => None,
            })
            .collect();
        assert_eq!(invalidated.len(), 1, "{ops:?}");
        let (buf_addr, buf_len) = invalidated[0];
        assert_eq!(buf_len, data.next_multiple_of(DMA_ALIGN));
        assert_eq!(buf_addr % DMA_ALIGN, 0);
        assert!(buf_addr >= desc_addr + desc_len || buf_addr + buf_len <= desc_addr);
        // ... and before it too, so no dirty line is written back over what the IDMAC wrote.
        assert!(ops[..at].contains(&MemOp::Invalidate {
            addr: buf_addr,
            len: buf_len
        }));
    }
    check_no_violations(&sim);
}

/// With `faults` for the next transfer only, a read of `blocks` from `lba` succeeds on its retry.
fn retried_once<D: DmaMemory>(
    sim: &Sim,
    sd: &mut Over<D>,
    faults: Faults,
    lba: u64,
    blocks: usize,
) {
    let retries = sd.stats().retries;
    sim.set_faults(faults);
    read_ok(sim, sd, lba, blocks);
    assert_eq!(sd.stats().retries, retries + 1);
    sim.set_faults(Faults::default());
}

/// With `faults` on every try, a read of 4 blocks from `lba` fails: its command, failing LBA,
/// tries, cause and message. Reads work again once the faults are gone.
fn fails_every_try<D: DmaMemory>(
    sim: &Sim,
    sd: &mut Over<D>,
    faults: Faults,
    lba: u64,
) -> (Cmd, u64, u8, Cause, String) {
    sim.set_faults(faults);
    let e = read(sd, lba, 4).unwrap_err();
    sim.set_faults(Faults::default());
    read_ok(sim, sd, lba, 4);
    match e {
        SdError::Read(Failed {
            cmd,
            lba,
            attempts,
            cause,
            ..
        }) => (cmd, lba, attempts, cause, e.to_string()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn dma_errors_are_retried_then_reported_clearly() {
    let (sim, mut sd) = start_dma(
        HostSpec::hardware(),
        sdhc(),
        Faults::default(),
        Config::new(),
    );
    // One IDMAC fatal bus error, one data CRC error: each retried, and the data is right.
    let once = Faults {
        dma_error_at: vec![sim.dma_transfers()],
        ..Faults::default()
    };
    retried_once(&sim, &mut sd, once, 300, 12);
    assert!(sd.stats().controller_resets >= 1);
    let once = Faults {
        data_crc_at: vec![sim.blocks_sent() + 2],
        ..Faults::default()
    };
    retried_once(&sim, &mut sd, once, 300, 6);
    // Every transfer fails: a clear error naming the command, LBA and IDST bits.
    let always = Faults {
        dma_error_always: true,
        ..Faults::default()
    };
    let (cmd, lba, attempts, cause, s) = fails_every_try(&sim, &mut sd, always, 640);
    assert_eq!((cmd, lba, attempts), (Cmd::new(18), 640, 3));
    assert!(
        matches!(cause, Cause::Idmac { idst, .. } if idst & IDST_FATAL_BUS_ERROR != 0),
        "{cause:?}"
    );
    assert!(
        s.contains("CMD18 at LBA 640") && s.contains("fatal bus error") && s.contains("IDST"),
        "{s}"
    );
    // A block that never reads: the RINT bits.
    let bad = Faults {
        bad_lbas: vec![77],
        ..Faults::default()
    };
    let (cmd, lba, attempts, cause, s) = fails_every_try(&sim, &mut sd, bad, 75);
    assert_eq!((cmd, lba, attempts), (Cmd::new(18), 75, 3));
    assert!(
        matches!(cause, Cause::Rint { rint } if rint & (1 << 7) != 0),
        "{cause:?}"
    );
    assert!(s.contains("data CRC error"), "{s}");
    check_no_violations(&sim);
}

#[test]
fn a_dma_transfer_that_never_ends_times_out() {
    let (sim, mut sd) = start_dma(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    data_never_comes(
        &sim,
        &mut sd,
        Wait::DmaDone,
        "internal DMA controller to finish",
    );
    let e = {
        sim.set_faults(Faults {
            fifo_never_fills: true,
            ..Faults::default()
        });
        read(&mut sd, 1, 1).unwrap_err()
    };
    assert!(e.to_string().contains("IDST 0x"), "{e}");
}

#[test]
fn writes_stay_pio_with_dma_on() {
    let (sim, mut sd) = start_dma(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    let data: Vec<u8> = (0..5 * 512).map(|i| (i * 7 + 3) as u8).collect();
    let before = sim.dma_transfers();
    sd.write_blocks(2_000, &data).unwrap();
    assert_eq!(sim.dma_transfers(), before);
    assert_eq!(sim.written_lbas(), (2_000..2_005).collect::<Vec<_>>());
    // Read back through the IDMAC.
    assert_eq!(read(&mut sd, 2_000, 5).unwrap(), data);
    assert_eq!(sim.dma_transfers(), before + 1);
    check_no_violations(&sim);
}

#[test]
fn without_dma_the_fifo_moves_the_data() {
    let (sim, mut sd) = start(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
    assert!(!sd.dma_active());
    read_ok(&sim, &mut sd, 9, 40);
    assert_eq!(sim.dma_transfers(), 0);
    assert!(sim.mem_ops().is_empty());
    assert_eq!(sd.stats().dma_transfers, 0);
    check_no_violations(&sim);
}

/// Memory the controller cannot reach (above 4 GiB, say).
struct Unreachable;

impl DmaMemory for Unreachable {
    fn bus_address(&mut self, _addr: usize, _len: usize) -> Option<u32> {
        None
    }
    fn to_device(&mut self, _addr: usize, _len: usize) {
        panic!("to_device on unreachable memory");
    }
    unsafe fn from_device(&mut self, _addr: usize, _len: usize) {
        panic!("from_device on unreachable memory");
    }
}

#[test]
fn memory_the_controller_cannot_reach_means_pio() {
    let sim = Sim::new(HostSpec::qemu(), sdhc(), Faults::default());
    let mut sd =
        SunxiMmc::init_dma(sim.regs(), Some(sim.ccu_regs()), sim.clock(), Unreachable).unwrap();
    assert!(!sd.dma_active());
    let got = read_blocks(&mut sd, 33, 20).unwrap();
    assert!(got == sim.expected(33, 20));
    assert_eq!(sim.dma_transfers(), 0);
    check_no_violations(&sim);
}

#[test]
fn garbage_idst_gives_errors_not_panics() {
    for seed in 1..30u64 {
        let (sim, mut sd) = start_dma(HostSpec::qemu(), sdhc(), Faults::default(), Config::new());
        sim.set_faults(Faults {
            garbage: Some(seed * 0x9E37_79B9),
            ..Faults::default()
        });
        let t0 = sim.now_us();
        let _ = read(&mut sd, 10, 3);
        let _ = read(&mut sd, 10, 40);
        let _ = sd.write_blocks(10, &[0u8; 1024]);
        assert!(sim.now_us() - t0 < 60_000_000, "seed {seed}");
        sim.set_faults(Faults::default());
        sd.reinit().unwrap();
        read_ok(&sim, &mut sd, 10, 20);
    }
}
