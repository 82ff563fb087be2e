//! The SDHCI driver on the non-Pi hosts (`sdhci::Variant`): the Sophgo CV18xx DesignWare MSHC
//! (Milk-V Duo, Duo 256M, LicheeRV Nano) and the SpacemiT K1's SDHCI (BPI-F3, Milk-V Jupiter),
//! against the register-level simulator's models of them (`sd_sim`'s `HostSpec::cv18xx`,
//! `HostSpec::k1`) and its bus memory (`dma_mem`): identification on the board's clock (a
//! capabilities register with a wrong or no base clock is not read), High Speed, no 1.8 V
//! attempt on capabilities that offer it, preset values and host version 4 mode never on, the
//! vendor registers Linux sets after every reset, ADMA2 pages and queued reads landing in the
//! page, the CV18xx's 128 MiB descriptor boundary, the errors (timeouts, CRC, ADMA) named, and
//! missing cache maintenance caught.

mod dma_mem;
mod sd_card_sim;
mod sd_sim;

use dma_mem::{Buf, Forget};
use drivers::block::{BlockDevice, Submitted, WriteBlocks};
use drivers::dma::DmaMemory;
use drivers::sd::{BusMode, Cause, SdError, Step};
use drivers::sdhci::{Config, NoSlot, Sdhci, Variant, QUEUE_DEPTH};
use sd_sim::*;

const PAGE: usize = 256 << 10;

type Host<D> = Sdhci<SimRegs, SimClock, NoSlot, D>;

/// The driver's settings for `variant` on a `base_hz` clock, as the kernel gives them.
fn config(variant: Variant, base_hz: u32) -> Config {
    Config {
        variant,
        arasan_write_delay: false,
        ..Config::new(base_hz)
    }
}

/// The two hosts as the kernel runs them: (simulated host, variant, board clock).
fn hosts() -> [(HostSpec, Variant, u32); 2] {
    [
        (HostSpec::cv18xx(), Variant::DwcmshcCv18xx, 375_000_000),
        (HostSpec::k1(), Variant::SpacemitK1, 204_800_000),
    ]
}

fn start_with<D: DmaMemory>(
    host: HostSpec,
    config: Config,
    card: CardSpec,
    dma: impl FnOnce(&Sim) -> D,
) -> (Sim, Host<D>) {
    let sim = Sim::new(host, card, Faults::default());
    let mem = dma(&sim);
    match Sdhci::with_dma(sim.regs(), sim.clock(), config, NoSlot, mem) {
        Ok(sd) => (sim, sd),
        Err(e) => panic!("init: {e}\n{:?}\n{:#?}", sim.names(), sim.violations()),
    }
}

fn start(host: HostSpec, variant: Variant, hz: u32) -> (Sim, Host<SimDma>) {
    start_with(host, config(variant, hz), sdhc(), Sim::dma)
}

fn read_into<D: DmaMemory>(sd: &mut Host<D>, lba: u64, b: &mut Buf) -> Result<(), SdError> {
    sd.read_blocks(lba, b.slice())
}

#[test]
fn identification_and_high_speed_on_the_board_clock() {
    // (identification clock, Default Speed clock, High Speed clock) from the board's clock by
    // the 10-bit divider: 375 MHz / 938, / 16, / 8; 204.8 MHz / 512, / 10, / 6.
    let want = [
        (399_786, 23_437_500, 46_875_000),
        (400_000, 20_480_000, 34_133_333),
    ];
    for ((host, variant, hz), (id, _default, hs)) in hosts().into_iter().zip(want) {
        let card = CardSpec {
            uhs: true,
            ..sdhc()
        };
        let (sim, sd) = start_with(host, config(variant, hz), card, Sim::dma);
        let i = sd.info();
        assert_eq!(
            i.base_clock_hz, hz,
            "{variant:?}: the board's, not the capabilities'"
        );
        assert_eq!((i.id_clock_hz, i.data_clock_hz), (id, hs), "{variant:?}");
        assert_eq!((i.bus_mode, i.bus_width), (BusMode::HighSpeed, 4));
        assert!(!i.signal_1v8 && i.speed_note.is_none(), "{i:?}");
        assert!(sd.dma_active());
        assert!((sim.sd_clock_hz() - hs as f64).abs() < 1.0);
        // Capabilities offer 1.8 V and UHS-I and the card would take them: a 3.3 V slot asks
        // for neither (no S18R in ACMD41, no CMD11), and host control 2 stays 0.
        let log = sim.log();
        assert!(log.iter().all(|c| c.index != 11), "{:?}", sim.names());
        let acmd41 = log.iter().filter(|c| c.app && c.index == 41);
        assert!(acmd41.clone().count() > 0 && acmd41.clone().all(|c| c.arg & (1 << 24) == 0));
        // Preset values, v4 mode and 1.8 V off; the K1's UHS mode SDR25 in High Speed, as
        // Linux's generic sdhci_set_uhs_signaling writes it.
        let uhs = if variant == Variant::SpacemitK1 {
            1 << 16
        } else {
            0
        };
        assert_eq!(sim.host2(), uhs, "{variant:?}");
        assert!(!sim.card_1v8() && sim.card_high_speed());
        check_no_violations(&sim);
    }
}

#[test]
fn the_vendor_registers_are_set_after_every_reset() {
    let (sim, mut sd) = start(HostSpec::cv18xx(), Variant::DwcmshcCv18xx, 375_000_000);
    for _ in 0..2 {
        assert_eq!(sim.vendor_reg(CV18XX_AREA) & 2, 2, "MSHC_CTRL LATANCY_1T");
        assert_eq!(
            sim.vendor_reg(CV18XX_AREA + 0x4C) & 1,
            1,
            "PHY_CONFIG PHY_TX_BPS"
        );
        assert_eq!(sim.vendor_reg(CV18XX_AREA + 0x40), CV18XX_PHY_DELAYS);
        sd.reinit().unwrap();
    }
    let (sim, mut sd) = start(HostSpec::k1(), Variant::SpacemitK1, 204_800_000);
    sd.reinit().unwrap();
    assert_eq!(sim.vendor_reg(K1_TX_CFG), K1_TX_INT_CLK_SEL);
    check_no_violations(&sim);
}

#[test]
fn a_standard_host_setup_breaks_these_hosts() {
    // The same simulated hosts driven as the Pi's (Variant::Standard, the board's clock given):
    // the boot loader's host control 2 and the missing vendor setup show as violations.
    for (host, _, hz) in hosts() {
        let sim = Sim::new(host, sdhc(), Faults::default());
        let _ = Sdhci::with_dma(
            sim.regs(),
            sim.clock(),
            config(Variant::Standard, hz),
            NoSlot,
            sim.dma(),
        );
        let v = sim.violations().join("\n");
        assert!(v.contains("preset value enable"), "{v}");
        assert!(v.contains("before the vendor registers were set"), "{v}");
    }
}

#[test]
fn the_capabilities_base_clock_is_never_used() {
    for (host, variant, _) in hosts() {
        let sim = Sim::new(host, sdhc(), Faults::default());
        let e = Sdhci::with_dma(
            sim.regs(),
            sim.clock(),
            config(variant, 0),
            NoSlot,
            sim.dma(),
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                SdError::Init {
                    step: Step::Clock,
                    cause: Cause::BaseClockNotGiven { .. }
                }
            ),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("not to be trusted") && msg.contains("base_clock_hz"),
            "{msg}"
        );
        assert!(sim.log().is_empty(), "nothing sent on a guessed clock");
    }
    // A standard host with the same capabilities would have taken their 200 MHz.
    let sim = Sim::new(HostSpec::cv18xx(), sdhc(), Faults::default());
    let sd = Sdhci::with_config(sim.regs(), sim.clock(), config(Variant::Standard, 0));
    assert_eq!(sd.map(|s| s.info().base_clock_hz).ok(), Some(200_000_000));
}

#[test]
fn pages_land_by_adma2_and_queued_reads_in_order() {
    for (host, variant, hz) in hosts() {
        let (sim, mut sd) = start(host, variant, hz);
        assert_eq!(sd.queue_depth(), QUEUE_DEPTH);
        sim.clear_log();
        let mut b = Buf::new(PAGE, 0);
        read_into(&mut sd, 1_000, &mut b).unwrap();
        assert!(
            b.bytes() == sim.expected(1_000, 512).as_slice(),
            "{variant:?}"
        );
        let log = sim.log();
        assert_eq!((log[0].index, log[0].blocks), (18, 512), "one command");
        assert!(log[1].auto && log[1].index == 12);
        let mut bufs: Vec<Buf> = (0..4).map(|_| Buf::new(PAGE, 0)).collect();
        let mut tags = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            // SAFETY: `b` stays alive and untouched until its tag is reported below.
            let r = unsafe { sd.submit_read(40_000 + i as u64 * 512, b.ptr(), PAGE) }.unwrap();
            let Submitted::Queued(t) = r else {
                panic!("{r:?}")
            };
            tags.push(t);
        }
        let got = poll_until(&sim, &mut sd, 4);
        assert_eq!(got, tags);
        for (i, b) in bufs.iter().enumerate() {
            let lba = 40_000 + i as u64 * 512;
            assert!(b.bytes() == sim.expected(lba, 512).as_slice());
        }
        assert_eq!(sd.stats().dma_transfers, 5);
        check_no_violations(&sim);
    }
}

/// Read 2 pages into a fresh buffer (its window in the bus space starts 64 KiB below 0x8800_0000,
/// the descriptors 32 KiB-aligned: none crosses), then one page 16 KiB into the same buffer
/// (its second descriptor would run across 0x8800_0000).
fn read_across<D: DmaMemory>(sim: &Sim, sd: &mut Host<D>) -> Result<(), SdError> {
    let mut big = Buf::new(2 * PAGE, 0);
    read_into(sd, 2_000, &mut big)?;
    assert!(big.bytes() == sim.expected(2_000, 1024).as_slice());
    let off = 16 << 10;
    // SAFETY: `big` holds 2 * PAGE bytes from `ptr()`; the page lies inside them.
    let s = unsafe { std::slice::from_raw_parts_mut(big.ptr().add(off), PAGE) };
    sd.read_blocks(3_000, s)?;
    assert!(&big.bytes()[off..off + PAGE] == sim.expected(3_000, 512).as_slice());
    Ok(())
}

/// A page whose bus addresses cross 0x8800_0000 (a 256 MB Duo's RAM runs to 0x9000_0000): the
/// CV18xx driver splits the descriptor there; driven without the split (the K1's setup) the
/// DesignWare engine stops at the boundary with an ADMA error.
#[test]
fn a_page_across_a_128_mib_boundary_is_split() {
    // The driver's area takes the first window (0x50000 of bus space, 64 KiB-aligned), the
    // buffer the next.
    let host = HostSpec {
        bus_base: 0x8800_0000 - 0x50000 - 0x10000,
        ..HostSpec::cv18xx()
    };
    let (sim, mut sd) = start(host, Variant::DwcmshcCv18xx, 375_000_000);
    read_across(&sim, &mut sd).unwrap();
    check_no_violations(&sim);

    let (sim, mut sd) = start(host, Variant::SpacemitK1, 375_000_000);
    let e = read_across(&sim, &mut sd).unwrap_err();
    assert!(matches!(e.cause(), Some(Cause::Adma { .. })), "{e:?}");
    let v = sim.violations().join("\n");
    assert!(v.contains("crosses a 128 MiB boundary"), "{v}");
}

#[test]
fn errors_are_named() {
    for (host, variant, hz) in hosts() {
        // A permanently bad block: a data CRC error on every try, then the bus steps down.
        let (sim, mut sd) = start(host, variant, hz);
        sim.set_faults(Faults {
            bad_lbas: vec![77],
            ..Faults::default()
        });
        let mut b = Buf::new(PAGE, 0);
        let e = read_into(&mut sd, 0, &mut b).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("data CRC error"), "{variant:?}: {msg}");
        // An ADMA error on every transfer.
        sim.set_faults(Faults {
            adma_error_always: true,
            ..Faults::default()
        });
        let msg = read_into(&mut sd, 4_096, &mut b).unwrap_err().to_string();
        assert!(
            msg.contains("ADMA2 error") && msg.contains("LBA 4096"),
            "{msg}"
        );
        // A card that stops answering: the controller's data timeout, then the re-initialisation
        // fails with the identification's timeout.
        sim.set_faults(Faults {
            die_after_blocks: Some(sim.blocks_sent() + 3),
            ..Faults::default()
        });
        let e = read_into(&mut sd, 9_000, &mut b).unwrap_err();
        assert!(
            e.cause().is_some_and(|c| c.is_timeout()),
            "{variant:?}: {e}"
        );
        let msg = e.to_string();
        assert!(msg.contains("timeout") || msg.contains("no card"), "{msg}");
    }
}

#[test]
fn a_command_crc_error_is_recovered_after_the_cmd_line_reset() {
    // The DesignWare CMD line reset leaves command complete set; the driver clears it, so no
    // status read sees it (the simulator flags one that does).
    let (sim, mut sd) = start(HostSpec::cv18xx(), Variant::DwcmshcCv18xx, 375_000_000);
    sim.set_faults(Faults {
        cmd_crc_at: vec![sim.commands_seen()],
        ..Faults::default()
    });
    let resets = sim.count_resets(2);
    let mut b = Buf::new(8 * 512, 0);
    read_into(&mut sd, 123, &mut b).unwrap();
    assert!(b.bytes() == sim.expected(123, 8).as_slice());
    assert!(sim.count_resets(2) > resets, "a CMD line reset happened");
    assert_eq!(sd.stats().retries, 1);
    check_no_violations(&sim);
}

#[test]
fn missing_cache_maintenance_shows() {
    for (host, variant, hz) in hosts() {
        let (sim, mut sd) = start_with(host, config(variant, hz), sdhc(), |s| {
            Forget(s.dma(), false, true)
        });
        let mut b = Buf::new(PAGE, 0);
        read_into(&mut sd, 3, &mut b).unwrap();
        assert!(
            b.bytes() != sim.expected(3, 512).as_slice(),
            "stale data unseen"
        );
        let (_, mut sd) = start_with(host, config(variant, hz), sdhc(), |s| {
            Forget(s.dma(), true, false)
        });
        let e = read_into(&mut sd, 3, &mut b).unwrap_err();
        assert!(
            matches!(e.cause(), Some(Cause::Adma { adma_status: 1, .. })),
            "{e:?}"
        );
    }
}

#[test]
fn the_cv18xx_write_protect_line_is_not_believed() {
    // `disable-wp`: a line that reads "locked" does not stop a write asked for, even with the
    // switch check configured on.
    let host = HostSpec {
        write_protect_switch: true,
        ..HostSpec::cv18xx()
    };
    let cfg = Config {
        write_protect_switch: true,
        ..config(Variant::DwcmshcCv18xx, 375_000_000)
    };
    let (sim, mut sd) = start_with(host, cfg, sdhc(), Sim::dma);
    let data = vec![0x5Au8; 1024];
    sd.write_blocks(500, &data).unwrap();
    assert_eq!(sim.expected(500, 2), data);
    check_no_violations(&sim);
}

#[test]
fn a_vendor_area_pointer_outside_the_registers_is_named() {
    // P_VENDOR_AREA1 reads 0xFF0: the CV18xx vendor registers would lie past the 4 KiB block.
    struct BadArea(SimRegs);
    impl drivers::sdhci::Regs for BadArea {
        fn read32(&mut self, off: usize) -> u32 {
            match off {
                0xE8 => 0xFF0,
                _ => self.0.read32(off),
            }
        }
        fn write32(&mut self, off: usize, v: u32) {
            self.0.write32(off, v)
        }
    }
    let sim = Sim::new(HostSpec::cv18xx(), sdhc(), Faults::default());
    let cfg = config(Variant::DwcmshcCv18xx, 375_000_000);
    let e = Sdhci::with_config(BadArea(sim.regs()), sim.clock(), cfg).unwrap_err();
    assert!(
        matches!(
            e,
            SdError::Init {
                step: Step::Reset,
                cause: Cause::VendorArea { ptr: 0xFF0 }
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("P_VENDOR_AREA1 (0xff0)"), "{e}");
    assert!(sim.log().is_empty(), "no command before the vendor setup");
}
