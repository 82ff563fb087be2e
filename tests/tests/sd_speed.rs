//! Bus speed modes on both SD hosts, against the register-level simulators: the High Speed switch
//! (CMD6 check, CMD6 switch, each 64-byte status block read whole, then the host's timing and a
//! clock of up to 50 MHz), and every way it can fail: a card without the switch class, one that
//! does not answer CMD6, one that does not offer or refuses High Speed, a CRC error on the status
//! block, a host whose clock cannot beat 25 MHz, a PLL that is off, and CRC errors at 50 MHz after
//! which the driver steps down to Default Speed and the read still succeeds. Each ends with a
//! working card at a lower mode (and a note saying why) or a clear error; the simulators check
//! that no command ever went above the card's mode.

mod dma_mem;
mod sd_card_sim;
mod sd_sim;
mod sunxi_sim;

use drivers::block::BlockDevice;
use drivers::sd::{BusMode, Cause, SpeedNote};
use drivers::sdhci::{Config, Sdhci};
use sd_card_sim::{read_blocks, Backing, CardSpec, Kind};

const MHZ: u32 = 1_000_000;

fn sdhc() -> CardSpec {
    CardSpec::new(Kind::Sdhc, Backing::Pattern { blocks: 64 << 20 })
}

/// CMD6's arguments in bus order, from a simulator's command names and arguments.
fn cmd6_args(log: &[(String, u32)]) -> Vec<u32> {
    log.iter()
        .filter(|(n, _)| n == "CMD6")
        .map(|&(_, a)| a)
        .collect()
}

/// Reads of one block, 64 and 512 blocks land and equal `expected(lba, blocks)`.
fn reads_land<D: BlockDevice>(sd: &mut D, expected: impl Fn(u64, u64) -> Vec<u8>)
where
    D::Error: std::fmt::Display,
{
    for (lba, n) in [(0u64, 1usize), (4_321, 64), (1 << 20, 512)] {
        let got = read_blocks(sd, lba, n).unwrap_or_else(|e| panic!("{e}"));
        assert!(got == expected(lba, n as u64), "{n} at {lba}");
    }
}

mod sdhci {
    use super::*;
    use sd_sim::{check_no_violations, Driver, Faults, HostSpec, Sim};

    fn log(sim: &Sim) -> Vec<(String, u32)> {
        sim.log().iter().map(|c| (c.name(), c.arg)).collect()
    }

    fn start(host: HostSpec, card: CardSpec, faults: Faults, config: Config) -> (Sim, Driver) {
        sd_sim::start_with(host, card, faults, config)
    }

    /// An SDHCI v3 controller on a 100 MHz base clock with an SDHC card and `faults`.
    fn start_v3(faults: Faults) -> (Sim, Driver) {
        start(
            HostSpec::v3(100 * MHZ),
            sdhc(),
            faults,
            Config::new(100 * MHZ),
        )
    }

    /// Reads land and match the card at the mode the driver ended in.
    fn reads_work(sim: &Sim, sd: &mut Driver) {
        reads_land(sd, |lba, n| sim.expected(lba, n));
        check_no_violations(sim);
    }

    #[test]
    fn high_speed_on_an_sdhci_v3_host() {
        let (sim, mut sd) = start_v3(Faults::default());
        assert_eq!(cmd6_args(&log(&sim)), [0x00FF_FFF0, 0x80FF_FFF1]);
        let info = *sd.info();
        assert_eq!(
            (info.bus_mode, info.data_clock_hz, info.speed_note),
            (BusMode::HighSpeed, 50 * MHZ, None)
        );
        assert!(sim.card_high_speed() && sim.sd_clock_hz() == 50e6);
        assert!(info.to_string().contains("High Speed"), "{info}");
        reads_work(&sim, &mut sd);
    }

    /// The Pi 3's Arasan: 250 MHz / 6 = 41.7 MHz, and never the high-speed enable bit it lacks.
    #[test]
    fn high_speed_on_the_bcm2835_arasan_without_its_missing_bit() {
        let host = HostSpec {
            no_hispd_bit: true,
            caps_base_clock: false,
            ..HostSpec::v3(250 * MHZ)
        };
        let config = Config {
            high_speed_bit: false,
            ..Config::new(250 * MHZ)
        };
        let (sim, mut sd) = start(host, sdhc(), Faults::default(), config);
        assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
        assert_eq!(sd.info().data_clock_hz, 41_666_666);
        reads_work(&sim, &mut sd);
        // The same controller driven with the bit set: the simulator flags it.
        let sim = Sim::new(host, sdhc(), Faults::default());
        Sdhci::with_config(sim.regs(), sim.clock(), Config::new(250 * MHZ)).unwrap();
        assert!(sim
            .violations()
            .iter()
            .any(|v| v.contains("high-speed enable")));
    }

    #[test]
    fn cards_and_hosts_that_stay_at_default_speed_say_why() {
        let v3 = HostSpec::v3(100 * MHZ);
        let no_class = CardSpec {
            cmd6: false,
            ccc_switch: false,
            ..sdhc()
        };
        let silent = CardSpec {
            cmd6: false,
            ..sdhc()
        };
        let no_hs = CardSpec {
            high_speed: false,
            ..sdhc()
        };
        let refuses = CardSpec {
            refuse_switch: true,
            ..sdhc()
        };
        let capped = Config {
            max_bus_mode: BusMode::DefaultSpeed,
            ..Config::new(100 * MHZ)
        };
        // (host, card, config, CMD6s sent, what the note says)
        let cases: [(HostSpec, CardSpec, Config, usize, &str); 6] = [
            (
                v3,
                no_class,
                Config::new(100 * MHZ),
                0,
                "no switch function",
            ),
            (v3, silent, Config::new(100 * MHZ), 1, "did not answer CMD6"),
            (
                v3,
                no_hs,
                Config::new(100 * MHZ),
                1,
                "does not offer High Speed",
            ),
            (v3, refuses, Config::new(100 * MHZ), 2, "refused High Speed"),
            (v3, sdhc(), capped, 0, "configured for Default Speed"),
            // 25 MHz base: nothing faster than 25 MHz to switch for.
            (
                HostSpec::v3(25 * MHZ),
                sdhc(),
                Config::new(25 * MHZ),
                0,
                "divides to no more than 25000 kHz",
            ),
        ];
        for (host, card, config, cmd6s, why) in cases {
            let (sim, mut sd) = start(host, card, Faults::default(), config);
            let info = *sd.info();
            assert_eq!(info.bus_mode, BusMode::DefaultSpeed, "{why}");
            assert!(info.data_clock_hz <= 25 * MHZ && !sim.card_high_speed());
            assert_eq!(cmd6_args(&log(&sim)).len(), cmd6s, "{why}: {:?}", log(&sim));
            let note = info.speed_note.expect("a note").to_string();
            assert!(note.contains(why), "{note}");
            reads_work(&sim, &mut sd);
        }
    }

    #[test]
    fn a_crc_error_on_the_status_block_leaves_a_working_card() {
        // Command 16 on the bus (0-based) is the first CMD6: its response has a CRC error.
        let faults = Faults {
            cmd_crc_at: vec![16],
            ..Faults::default()
        };
        let (sim, mut sd) = start_v3(faults);
        let info = *sd.info();
        assert_eq!(info.bus_mode, BusMode::DefaultSpeed, "{:?}", log(&sim));
        assert!(
            matches!(info.speed_note, Some(SpeedNote::CheckFailed { cause }) if cause.is_crc()),
            "{:?}",
            info.speed_note
        );
        reads_work(&sim, &mut sd);
    }

    /// A board that cannot carry 50 MHz: two CRC errors in a row step the bus down, the card is
    /// initialised again at Default Speed and the read completes; later reads stay there.
    #[test]
    fn crc_errors_at_50_mhz_step_down_to_default_speed() {
        let faults = Faults {
            crc_above_hz: Some(30e6),
            ..Faults::default()
        };
        let (sim, mut sd) = start_v3(faults);
        assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
        sim.clear_log();
        let got = read_blocks(&mut sd, 1_000, 8).unwrap();
        assert!(got == sim.expected(1_000, 8));
        let info = *sd.info();
        assert_eq!(
            (info.bus_mode, info.data_clock_hz),
            (BusMode::DefaultSpeed, 25 * MHZ)
        );
        assert!(
            matches!(
                info.speed_note,
                Some(SpeedNote::SteppedDown {
                    from: BusMode::HighSpeed,
                    ..
                })
            ),
            "{:?}",
            info.speed_note
        );
        let note = info.speed_note.unwrap().to_string();
        assert!(note.contains("data CRC error"), "{note}");
        let stats = sd.stats();
        assert_eq!((stats.step_downs, stats.retries), (1, 1));
        // No CMD6 in the re-initialisation: the cap is Default Speed now.
        assert!(cmd6_args(&log(&sim)).is_empty(), "{:?}", log(&sim));
        assert!(!sim.card_high_speed());
        reads_work(&sim, &mut sd);
        // A re-initialisation keeps the lower cap.
        sd.reinit().unwrap();
        assert_eq!(sd.info().bus_mode, BusMode::DefaultSpeed);
        assert_eq!(sd.stats().step_downs, 1);
    }

    /// One CRC error at High Speed is retried there: no step down for a glitch.
    #[test]
    fn one_crc_error_at_high_speed_is_retried_at_high_speed() {
        let (sim, mut sd) = start_v3(Faults::default());
        let next = sim.blocks_sent();
        sim.with(|s| s.faults_mut().data_crc_at = vec![next]);
        let got = read_blocks(&mut sd, 77, 2).unwrap();
        assert!(got == sim.expected(77, 2));
        assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
        assert_eq!((sd.stats().step_downs, sd.stats().retries), (0, 1));
        check_no_violations(&sim);
    }

    /// A bad block at High Speed: the driver first blames the bus (steps down), then fails at
    /// Default Speed with the block named.
    #[test]
    fn a_bad_block_at_high_speed_fails_clearly_after_stepping_down() {
        let faults = Faults {
            bad_lbas: vec![500],
            ..Faults::default()
        };
        let (sim, mut sd) = start_v3(faults);
        let e = read_blocks(&mut sd, 500, 1).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("LBA 500") && msg.contains("data CRC") && msg.contains("3 attempt"),
            "{msg}"
        );
        assert_eq!(sd.stats().step_downs, 1);
        assert_eq!(sd.info().bus_mode, BusMode::DefaultSpeed);
        // The card still reads elsewhere.
        reads_work(&sim, &mut sd);
    }
}

/// UHS-I on an SDHCI v3 host with a slot that switches its rail (the Pi 4's EMMC2 as the
/// simulator models it): S18R, CMD11, the voltage switch, then DDR50, SDR50 or SDR104 (tuned).
mod uhs {
    use super::*;
    use sd_sim::{check_no_violations, Faults, HostSpec, Sim, SimClock, SimRegs, SimSlot};

    type UhsDriver = Sdhci<SimRegs, SimClock, SimSlot>;

    fn uhs_card() -> CardSpec {
        CardSpec {
            uhs: true,
            ..sdhc()
        }
    }

    /// The driver over `host` and `card` in a switchable slot, allowed up to `limit`.
    fn start(host: HostSpec, card: CardSpec, faults: Faults, limit: BusMode) -> (Sim, UhsDriver) {
        let sim = Sim::new(host, card, faults);
        let config = Config {
            max_bus_mode: limit,
            ..Config::new(host.base_clock_hz)
        };
        match Sdhci::with_slot(sim.regs(), sim.clock(), config, sim.slot()) {
            Ok(sd) => (sim, sd),
            Err(e) => panic!("init: {e}\n{:?}\n{:#?}", sim.names(), sim.violations()),
        }
    }

    fn reads_work(sim: &Sim, sd: &mut UhsDriver) {
        reads_land(sd, |lba, n| sim.expected(lba, n));
        check_no_violations(sim);
    }

    fn names(sim: &Sim) -> Vec<String> {
        sim.names()
    }

    #[test]
    fn ddr50_on_the_pi_4s_emmc2() {
        let (sim, mut sd) = start(
            HostSpec::emmc2(),
            uhs_card(),
            Faults::default(),
            BusMode::Ddr50,
        );
        let n = names(&sim);
        let log = sim.log();
        // ACMD41 asked for 1.8 V (S18R) and power (XPC); CMD11 came before CMD2.
        let acmd41 = log.iter().rfind(|c| c.name() == "ACMD41").unwrap();
        assert_eq!(acmd41.arg & (1 << 24 | 1 << 28), 1 << 24 | 1 << 28);
        let at = |c: &str| n.iter().position(|x| x == c).unwrap();
        assert!(at("CMD11") < at("CMD2"), "{n:?}");
        assert_eq!(
            cmd6_args(&log.iter().map(|c| (c.name(), c.arg)).collect::<Vec<_>>()),
            [0x00FF_FFF0, 0x80FF_FFF4]
        );
        let info = *sd.info();
        assert_eq!(
            (
                info.bus_mode,
                info.data_clock_hz,
                info.signal_1v8,
                info.speed_note
            ),
            (BusMode::Ddr50, 50 * MHZ, true, None)
        );
        assert_eq!(info.bus_bytes_per_s(), 50_000_000);
        assert!(sim.card_1v8() && sim.card_access_mode() == 4);
        // The slot was power-cycled once, before the first identification.
        assert_eq!(sim.slot_power_cycles(), 1);
        reads_work(&sim, &mut sd);
    }

    /// SDR104 on a 200 MHz base clock: CMD19 tuning blocks, then data at 200 MHz.
    #[test]
    fn sdr104_with_tuning() {
        let host = HostSpec {
            base_clock_hz: 200 * MHZ,
            uhs: 0b111,
            ..HostSpec::emmc2()
        };
        let (sim, mut sd) = start(host, uhs_card(), Faults::default(), BusMode::Sdr104);
        let info = *sd.info();
        assert_eq!(
            (info.bus_mode, info.data_clock_hz),
            (BusMode::Sdr104, 200 * MHZ)
        );
        let tunings = names(&sim).iter().filter(|n| *n == "CMD19").count();
        assert_eq!(tunings, 4, "{:?}", names(&sim));
        reads_work(&sim, &mut sd);
    }

    /// A host without DDR50 whose SDR50 needs tuning: SDR50 at 100 MHz, tuned.
    #[test]
    fn sdr50_tuned_when_the_host_asks() {
        let host = HostSpec {
            uhs: 1 | 1 << 13,
            ..HostSpec::emmc2()
        };
        let (sim, mut sd) = start(host, uhs_card(), Faults::default(), BusMode::Sdr104);
        let info = *sd.info();
        assert_eq!(
            (info.bus_mode, info.data_clock_hz),
            (BusMode::Sdr50, 100 * MHZ)
        );
        assert!(names(&sim).contains(&"CMD19".to_string()));
        // SDR104 is not in the capabilities: that is why the bus runs no faster.
        assert_eq!(
            info.speed_note,
            Some(SpeedNote::HostLacks {
                mode: BusMode::Sdr104
            })
        );
        reads_work(&sim, &mut sd);
    }

    /// Tuning never converges: SDR104 is given up for DDR50, the next mode, without a hang.
    #[test]
    fn failed_tuning_falls_back_to_ddr50() {
        let host = HostSpec {
            base_clock_hz: 200 * MHZ,
            uhs: 0b111,
            ..HostSpec::emmc2()
        };
        let faults = Faults {
            tuning_fails: true,
            ..Faults::default()
        };
        let (sim, mut sd) = start(host, uhs_card(), faults, BusMode::Sdr104);
        let info = *sd.info();
        assert_eq!(info.bus_mode, BusMode::Ddr50);
        assert!(
            matches!(
                info.speed_note,
                Some(SpeedNote::TuningFailed {
                    mode: BusMode::Sdr104,
                    ..
                })
            ),
            "{:?}",
            info.speed_note
        );
        let tunings = names(&sim).iter().filter(|n| *n == "CMD19").count();
        assert_eq!(tunings, 40);
        reads_work(&sim, &mut sd);
    }

    /// The card never releases its lines after CMD11, or the board refuses the regulator: the
    /// card is power-cycled and runs High Speed at 3.3 V, and says why.
    #[test]
    fn a_failed_voltage_switch_falls_back_to_3v3_high_speed() {
        let stuck = CardSpec {
            voltage_switch_fails: true,
            ..uhs_card()
        };
        let refusing = HostSpec {
            regulator_refuses: true,
            ..HostSpec::emmc2()
        };
        for (host, card, why) in [
            (HostSpec::emmc2(), stuck, "did not release DAT"),
            (refusing, uhs_card(), "refused to switch the I/O rail"),
        ] {
            let (sim, mut sd) = start(host, card, Faults::default(), BusMode::Ddr50);
            let info = *sd.info();
            assert_eq!(
                (info.bus_mode, info.signal_1v8),
                (BusMode::HighSpeed, false),
                "{why}"
            );
            assert!(!sim.card_1v8());
            let note = info.speed_note.expect("a note").to_string();
            assert!(
                note.contains(why) && note.contains("power-cycled"),
                "{note}"
            );
            assert_eq!(sim.slot_power_cycles(), 2, "{why}");
            reads_work(&sim, &mut sd);
        }
    }

    #[test]
    fn a_card_without_uhs_runs_high_speed_and_says_why() {
        let (sim, mut sd) = start(HostSpec::emmc2(), sdhc(), Faults::default(), BusMode::Ddr50);
        let info = *sd.info();
        assert_eq!(info.bus_mode, BusMode::HighSpeed);
        assert!(matches!(info.speed_note, Some(SpeedNote::No1v8 { .. })));
        assert!(!names(&sim).contains(&"CMD11".to_string()));
        reads_work(&sim, &mut sd);
    }

    /// CRC errors at DDR50: the bus steps down to High Speed (SDR25 at 1.8 V after the card is
    /// power-cycled and identified again) and the read completes.
    #[test]
    fn crc_errors_at_ddr50_step_down() {
        let faults = Faults {
            crc_above_hz: Some(30e6),
            ..Faults::default()
        };
        let (sim, mut sd) = start(HostSpec::emmc2(), uhs_card(), faults, BusMode::Ddr50);
        assert_eq!(sd.info().bus_mode, BusMode::Ddr50);
        let got = read_blocks(&mut sd, 123, 16).unwrap();
        assert!(got == sim.expected(123, 16));
        // DDR50 -> High Speed still runs at 50 MHz: the errors come back, and it steps again.
        let info = *sd.info();
        assert_eq!(info.bus_mode, BusMode::DefaultSpeed);
        assert_eq!(sd.stats().step_downs, 2);
        reads_work(&sim, &mut sd);
    }
}

mod sunxi {
    use super::*;
    use drivers::sunxi_mmc::Config;
    use sunxi_sim::{check_no_violations, Faults, HostSpec, Sim};

    fn log(sim: &Sim) -> Vec<(String, u32)> {
        sim.log().iter().map(|c| (c.name(), c.arg)).collect()
    }

    fn reads_work<D: BlockDevice>(sim: &Sim, sd: &mut D)
    where
        D::Error: std::fmt::Display,
    {
        reads_land(sd, |lba, n| sim.expected(lba, n));
        check_no_violations(sim);
    }

    #[test]
    fn high_speed_from_pll_periph0_pio_and_dma() {
        for host in [HostSpec::qemu(), HostSpec::hardware()] {
            let (sim, mut sd) = sunxi_sim::start(host, sdhc(), Faults::default(), Config::new());
            assert_eq!(cmd6_args(&log(&sim)), [0x00FF_FFF0, 0x80FF_FFF1]);
            assert_eq!(
                (sd.info().bus_mode, sd.info().data_clock_hz),
                (BusMode::HighSpeed, 50 * MHZ)
            );
            reads_work(&sim, &mut sd);
            let (sim, mut sd) =
                sunxi_sim::start_dma(host, sdhc(), Faults::default(), Config::new());
            assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
            assert!(sd.dma_active());
            reads_work(&sim, &mut sd);
        }
    }

    #[test]
    fn without_pll_or_ccu_the_card_stays_at_24_mhz() {
        let faults = Faults {
            pll_off: true,
            ..Faults::default()
        };
        let (sim, mut sd) = sunxi_sim::start(HostSpec::hardware(), sdhc(), faults, Config::new());
        let info = *sd.info();
        assert_eq!(
            (info.bus_mode, info.data_clock_hz),
            (BusMode::DefaultSpeed, 24 * MHZ)
        );
        assert!(matches!(info.speed_note, Some(SpeedNote::PllOff { .. })));
        assert!(
            info.speed_note.unwrap().to_string().contains("PLL_PERIPH0"),
            "{:?}",
            info.speed_note
        );
        assert!(cmd6_args(&log(&sim)).is_empty());
        reads_work(&sim, &mut sd);
        // U-Boot left the controller on a 24 MHz module clock and no CCU is given: CLKCR's
        // divider cannot go faster.
        let host = HostSpec {
            left_on: true,
            ..HostSpec::qemu()
        };
        let (sim, mut sd) = sunxi_sim::start(host, sdhc(), Faults::default(), Config::new());
        assert_eq!(sd.info().bus_mode, BusMode::DefaultSpeed);
        assert!(matches!(
            sd.info().speed_note,
            Some(SpeedNote::HostClock {
                best_hz: 24_000_000,
                ..
            })
        ));
        reads_work(&sim, &mut sd);
    }

    #[test]
    fn crc_errors_at_50_mhz_step_down_on_dma_reads_too() {
        let faults = Faults {
            crc_above_hz: Some(30 * MHZ),
            ..Faults::default()
        };
        let (sim, mut sd) =
            sunxi_sim::start_dma(HostSpec::hardware(), sdhc(), faults, Config::new());
        assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
        let got = read_blocks(&mut sd, 9_000, 100).unwrap();
        assert!(got == sim.expected(9_000, 100));
        let info = *sd.info();
        assert_eq!(
            (info.bus_mode, info.data_clock_hz),
            (BusMode::DefaultSpeed, 24 * MHZ)
        );
        assert!(matches!(
            info.speed_note,
            Some(SpeedNote::SteppedDown {
                cause: Cause::Idmac { .. } | Cause::Rint { .. },
                ..
            })
        ));
        assert_eq!(sd.stats().step_downs, 1);
        reads_work(&sim, &mut sd);
    }

    #[test]
    fn a_card_refusing_cmd6_on_the_allwinner_host() {
        let card = CardSpec {
            cmd6: false,
            ..sdhc()
        };
        let (sim, mut sd) =
            sunxi_sim::start(HostSpec::qemu(), card, Faults::default(), Config::new());
        assert_eq!(sd.info().bus_mode, BusMode::DefaultSpeed);
        assert!(matches!(
            sd.info().speed_note,
            Some(SpeedNote::CheckFailed { .. })
        ));
        reads_work(&sim, &mut sd);
    }
}
