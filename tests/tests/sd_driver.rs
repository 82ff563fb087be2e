//! The SDHCI driver (`drivers::sdhci`) against the register-level simulator in `sd_sim`: card
//! identification in order, SDHC block addressing and SDSC byte addressing, clock dividers for the
//! Pi's base clocks on SDHCI v2 and v3, multi-block reads and request splitting, error recovery
//! (transient CRC errors, a permanently bad block, a card that never powers up, a card that stops
//! answering), bounds checks, the read-only guarantee, and the FAT reader over the simulated card.
//! Every test ends by checking that the simulator saw no protocol violation and no command outside
//! the read-only set.

mod dma_mem;
mod fat_common;
mod sd_card_sim;
mod sd_sim;

use drivers::block::{BlockDevice, RequestError};
use drivers::sdhci::{
    card_present, clock_divider, is_read_only, parse_csd, BusMode, Cause, Cmd, Config, Failed,
    SdError, Sdhci, Step, Wait, READ_ONLY_COMMANDS,
};
use fat_common::Rng;
use sd_sim::*;

/// An SDSC card of `bytes` pseudo-random bytes.
fn sdsc(kind: Kind, bytes: usize) -> CardSpec {
    CardSpec::new(kind, Backing::Bytes(fat_common::bytes(7, bytes)))
}

fn start(host: HostSpec, card: CardSpec, faults: Faults, base_clock_hz: u32) -> (Sim, Driver) {
    start_with(host, card, faults, Config::new(base_clock_hz))
}

/// No protocol violations, and nothing but read-only commands on the bus.
fn check_clean(sim: &Sim) {
    check_no_violations(sim);
    check_read_only(sim);
}

fn check_read_only(sim: &Sim) {
    const WRITES: [u8; 14] = [20, 24, 25, 26, 27, 28, 29, 32, 33, 38, 42, 49, 56, 59];
    for c in sim.log() {
        assert!(
            c.app || !WRITES.contains(&c.index),
            "write/erase command {} on the bus",
            c.name()
        );
        assert!(
            is_read_only(Cmd {
                index: c.index,
                app: c.app
            }),
            "{} is outside the read-only set",
            c.name()
        );
    }
}

fn read(sd: &mut Driver, lba: u64, blocks: usize) -> Result<Vec<u8>, SdError> {
    read_blocks(sd, lba, blocks)
}

fn read_ok(sim: &Sim, sd: &mut Driver, lba: u64, blocks: usize) {
    let got = read(sd, lba, blocks)
        .unwrap_or_else(|e| panic!("read {blocks} at {lba}: {e}\n{:?}", sim.names()));
    assert!(
        got == sim.expected(lba, blocks as u64),
        "data of {blocks} block(s) at LBA {lba} differs"
    );
}

/// The command names of an initialisation with `busy` ACMD41 polls answered "busy", ending with
/// CMD6 in check mode and CMD6 switching to High Speed.
fn init_sequence(busy: usize, four_bit: bool, sdsc: bool) -> Vec<String> {
    let mut v = vec!["CMD0", "CMD8"];
    for _ in 0..=busy {
        v.extend(["CMD55", "ACMD41"]);
    }
    v.extend(["CMD2", "CMD3", "CMD9", "CMD7"]);
    if four_bit {
        v.extend(["CMD55", "ACMD6"]);
    }
    if sdsc {
        v.push("CMD16");
    }
    v.extend(["CMD6", "CMD6"]);
    v.into_iter().map(String::from).collect()
}

#[test]
fn sdhc_init_sequence_and_block_addressing() {
    let (sim, mut sd) = start(
        HostSpec::v3(100 * MHZ),
        sdhc(),
        Faults::default(),
        100 * MHZ,
    );
    assert_eq!(sim.names(), init_sequence(3, true, false));
    let log = sim.log();
    assert_eq!(log[1].arg, 0x1AA, "CMD8 check pattern");
    let acmd41: Vec<_> = log.iter().filter(|c| c.name() == "ACMD41").collect();
    assert!(acmd41
        .iter()
        .all(|c| c.arg & (1 << 30) != 0 && c.arg & 0x00FF_8000 == 0x00FF_8000));
    let cmd55: Vec<_> = log.iter().filter(|c| c.name() == "CMD55").collect();
    assert_eq!(
        cmd55.last().unwrap().arg,
        0xB368 << 16,
        "CMD55 after select carries the RCA"
    );
    assert_eq!(
        log.iter().find(|c| c.name() == "CMD7").unwrap().arg,
        0xB368 << 16
    );
    assert_eq!(log.iter().find(|c| c.name() == "ACMD6").unwrap().arg, 2);

    let info = *sd.info();
    assert!(info.high_capacity && info.sd_v2);
    assert_eq!(info.blocks, 64 << 20);
    assert_eq!(sd.num_blocks(), 64 << 20);
    assert_eq!(info.rca, 0xB368);
    assert_eq!(info.bus_width, 4);
    assert!(sim.host_4bit() && sim.card_4bit());
    // CMD6 at the Default Speed clock, then High Speed at 100 MHz / 2.
    let cmd6: Vec<_> = log.iter().filter(|c| c.name() == "CMD6").collect();
    assert_eq!(
        cmd6.iter().map(|c| (c.arg, c.clock_hz)).collect::<Vec<_>>(),
        [(0x00FF_FFF0, 25e6), (0x80FF_FFF1, 25e6)]
    );
    assert_eq!(info.data_clock_hz, 50 * MHZ);
    assert_eq!(sim.sd_clock_hz(), 50e6);
    assert_eq!((info.bus_mode, info.speed_note), (BusMode::HighSpeed, None));
    assert_eq!(info.bus_bytes_per_s(), 25_000_000);
    assert_eq!(&info.product_name(), b"LMSIM");
    assert_eq!(info.manufacturer_id(), 0x1B);
    assert_eq!(info.serial(), 0x1234_5678);
    let shown = info.to_string();
    assert!(
        shown.contains("SDHC") && shown.contains("LMSIM") && shown.contains("32768 MiB"),
        "{shown}"
    );
    assert_eq!(sim.signal_enables(), 0, "polled: no interrupt signals");

    sim.clear_log();
    // Single blocks: the argument is the block number, also above 2^24 and near the end.
    for lba in [0u64, 1, 12_345, 40_000_000, (64 << 20) - 1] {
        read_ok(&sim, &mut sd, lba, 1);
    }
    let log = sim.log();
    assert_eq!(log.len(), 5);
    for (c, lba) in log
        .iter()
        .zip([0u32, 1, 12_345, 40_000_000, (64 << 20) - 1])
    {
        assert_eq!((c.name().as_str(), c.arg, c.blocks), ("CMD17", lba, 1));
    }

    // Several blocks: CMD18 with block count and the controller's CMD12.
    sim.clear_log();
    read_ok(&sim, &mut sd, 33_554_431, 16);
    let log = sim.log();
    assert_eq!(sim.names(), ["CMD18", "CMD12"]);
    assert_eq!((log[0].arg, log[0].blocks), (33_554_431, 16));
    assert!(log[1].auto, "auto CMD12");

    // Random reads against the backing.
    let mut rng = Rng::new(1);
    for _ in 0..60 {
        let max = if rng.below(3) == 0 { 300 } else { 8 };
        let n = 1 + rng.below(max) as usize;
        let lba = rng.below((64 << 20) - n as u64 + 1);
        read_ok(&sim, &mut sd, lba, n);
    }
    assert_eq!(sd.stats().retries, 0);
    check_clean(&sim);
}

#[test]
fn sdsc_byte_addressing() {
    let (sim, mut sd) = start_card(sdsc(Kind::SdscV2, 4 << 20));
    assert_eq!(sim.names(), init_sequence(3, true, true));
    let log = sim.log();
    let cmd16 = log.iter().find(|c| c.name() == "CMD16").unwrap();
    assert_eq!(cmd16.arg, 512, "CMD16 block length");
    let info = *sd.info();
    assert!(!info.high_capacity && info.sd_v2);
    assert_eq!(info.blocks, 8192);

    sim.clear_log();
    for lba in [0u64, 1, 7, 4095, 8191] {
        read_ok(&sim, &mut sd, lba, 1);
    }
    read_ok(&sim, &mut sd, 100, 9);
    read_ok(&sim, &mut sd, 8192 - 40, 40);
    let args: Vec<(String, u32)> = sim
        .log()
        .iter()
        .filter(|c| !c.auto)
        .map(|c| (c.name(), c.arg))
        .collect();
    let want: Vec<(String, u32)> = [
        ("CMD17", 0u32),
        ("CMD17", 512),
        ("CMD17", 7 * 512),
        ("CMD17", 4095 * 512),
        ("CMD17", 8191 * 512),
        ("CMD18", 100 * 512),
        ("CMD18", (8192 - 40) * 512),
    ]
    .into_iter()
    .map(|(n, a)| (n.to_string(), a))
    .collect();
    assert_eq!(args, want, "SDSC commands take byte addresses (LBA * 512)");

    let mut rng = Rng::new(2);
    for _ in 0..60 {
        let n = 1 + rng.below(64) as usize;
        let lba = rng.below(8192 - n as u64 + 1);
        read_ok(&sim, &mut sd, lba, n);
    }
    check_clean(&sim);
}

#[test]
fn sdsc_v1_card_without_cmd8() {
    let (sim, mut sd) = start_card(sdsc(Kind::SdscV1, 2 << 20));
    let log = sim.log();
    assert_eq!(sim.names(), init_sequence(3, true, true));
    assert!(!log[1].answered, "a v1 card does not answer CMD8");
    assert!(
        sim.count_resets(2) >= 1,
        "the CMD line is reset after CMD8's timeout"
    );
    let acmd41 = log.iter().find(|c| c.name() == "ACMD41").unwrap();
    assert_eq!(acmd41.arg & (1 << 30), 0, "no HCS for a v1 card");
    let info = *sd.info();
    assert!(!info.sd_v2 && !info.high_capacity);
    assert_eq!(info.blocks, 4096);
    read_ok(&sim, &mut sd, 4000, 96);
    read_ok(&sim, &mut sd, 17, 1);
    check_clean(&sim);
}

/// A 2 GiB SDSC card, as QEMU makes of a 2 GiB image: CSD 1.0 with 1024-byte READ_BL_LEN, byte
/// addresses up to 2^31 - 512.
#[test]
fn sdsc_2gib_card() {
    let card = CardSpec::new(Kind::SdscV2, Backing::Pattern { blocks: 4 << 20 });
    let (sim, mut sd) = start_card(card);
    assert_eq!(sd.num_blocks(), 4 << 20);
    assert_eq!(sd.info().csd_bytes()[5] & 0xF, 10, "READ_BL_LEN");
    assert!(!sd.info().high_capacity);
    sim.clear_log();
    read_ok(&sim, &mut sd, (4 << 20) - 1, 1);
    read_ok(&sim, &mut sd, (4 << 20) - 8, 8);
    let log = sim.log();
    assert_eq!(log[0].arg, 0x7FFF_FE00);
    assert_eq!(log[1].arg, 0x7FFF_F000);
    check_clean(&sim);
}

#[test]
fn csd_capacity_v1_and_v2() {
    // The simulator's CSDs, as the controller hands them over (bits 127:8 in four words).
    let words = |csd: [u8; 16]| {
        let w = |i: usize| u32::from_be_bytes([csd[i], csd[i + 1], csd[i + 2], csd[i + 3]]);
        [
            w(11),
            w(7),
            w(3),
            u32::from_be_bytes([0, csd[0], csd[1], csd[2]]),
        ]
    };
    for mib in [1u64, 4, 64, 1024, 2048, 4096] {
        let blocks = mib << 11;
        let c = parse_csd(&words(make_csd(Kind::SdscV2, blocks))).unwrap();
        assert_eq!((c.structure, c.blocks), (0, blocks), "SDSC {mib} MiB");
        assert_eq!(c.max_clock_hz, Some(25 * MHZ));
    }
    for gib in [1u64, 4, 32, 512, 2048] {
        let blocks = gib << 21;
        let c = parse_csd(&words(make_csd(Kind::Sdhc, blocks))).unwrap();
        assert_eq!((c.structure, c.blocks), (1, blocks), "SDHC {gib} GiB");
    }
    // QEMU's CSD of a 2 GiB image: version 1.0, READ_BL_LEN 10, C_SIZE 4095, C_SIZE_MULT 7.
    let qemu: [u8; 16] = [
        0x00, 0x26, 0x00, 0x32, 0x5f, 0x5a, 0xe3, 0xff, 0xff, 0xff, 0xbf, 0xff, 0x92, 0x80, 0x00,
        0x01,
    ];
    assert_eq!(parse_csd(&words(qemu)).unwrap().blocks, 4 << 20);
    // An SDUC (version 3.0) CSD and a v1 CSD with a bad block length are errors, not panics.
    let mut sduc = make_csd(Kind::Sdhc, 1 << 21);
    sduc[0] = 0x80;
    assert!(matches!(
        parse_csd(&words(sduc)),
        Err(Cause::BadCsd { structure: 2, .. })
    ));
    let mut bad = make_csd(Kind::SdscV2, 2048);
    bad[5] = (bad[5] & 0xF0) | 15;
    assert!(matches!(
        parse_csd(&words(bad)),
        Err(Cause::BadCsd {
            read_bl_len: 15,
            ..
        })
    ));
    for w in [[0u32; 4], [u32::MAX; 4]] {
        let _ = parse_csd(&w);
    }
}

#[test]
fn clock_divider_values() {
    let bases = [41_666_667u32, 100 * MHZ, 200 * MHZ, 250 * MHZ];
    for base in bases {
        for (target, limit) in [(400_000, 400_000.0), (25 * MHZ, 25e6)] {
            let d = clock_divider(base, target, 2).unwrap();
            let hz = base as f64 / d.divisor as f64;
            assert!(hz <= limit, "v3 base {base}: {hz} Hz > {limit}");
            // The fastest such divider: one step smaller would be too fast.
            if d.divisor > 2 {
                assert!(
                    base as f64 / (d.divisor - 2) as f64 > limit,
                    "v3 base {base} -> {target}: not the fastest"
                );
            }
            let n = (d.bits >> 8) & 0xFF | ((d.bits >> 6) & 3) << 8;
            assert_eq!(d.divisor, if n == 0 { 1 } else { 2 * n });
            assert_eq!(d.bits & !0xFFC0, 0);
        }
    }
    // v2: powers of two up to 256.
    for (base, ok) in [
        (41_666_667, true),
        (100 * MHZ, true),
        (200 * MHZ, false),
        (250 * MHZ, false),
    ] {
        let d = clock_divider(base, 400_000, 1);
        assert_eq!(d.is_some(), ok, "v2 base {base}");
        if let Some(d) = d {
            assert!(d.divisor.is_power_of_two() && d.divisor <= 256);
            assert!(base as f64 / d.divisor as f64 <= 400_000.0);
            assert_eq!(d.bits, (d.divisor / 2) << 8);
        }
        let d = clock_divider(base, 25 * MHZ, 1).unwrap();
        assert!(base as f64 / d.divisor as f64 <= 25e6);
    }
    assert_eq!(clock_divider(20 * MHZ, 25 * MHZ, 2).unwrap().divisor, 1);
    assert!(clock_divider(0, 400_000, 2).is_none());
    assert!(
        clock_divider(1_000 * MHZ, 400_000, 2).is_none(),
        "beyond the 10-bit divider"
    );
}

/// Identification at 100-400 kHz and data in High Speed at the fastest divider at or below 50
/// MHz, seen by the card, for the Pi's base clocks.
#[test]
fn clocks_seen_by_the_card() {
    for version in [2u8, 1] {
        for base in [41_666_667u32, 100 * MHZ, 200 * MHZ, 250 * MHZ] {
            let host = HostSpec {
                version,
                caps_base_clock: false,
                ..HostSpec::v3(base)
            };
            let sim = Sim::new(host, sdhc(), Faults::default());
            let r = Sdhci::init(sim.regs(), sim.clock(), base);
            if version == 1 && base > 128 * MHZ {
                // 8-bit power-of-two dividers cannot get below 400 kHz from 200+ MHz.
                let e = r.unwrap_err();
                assert!(
                    matches!(
                        e,
                        SdError::Init {
                            step: Step::Clock,
                            cause: Cause::Divider {
                                target_hz: 400_000,
                                ..
                            }
                        }
                    ),
                    "{e:?}"
                );
                assert!(e.to_string().contains("400000 Hz"), "{e}");
                assert!(sim.log().is_empty(), "no command without a valid clock");
                continue;
            }
            let mut sd = r.unwrap_or_else(|e| panic!("v{version} base {base}: {e}"));
            for c in sim.log().iter().filter(|c| c.name() != "CMD6") {
                assert!(
                    (100_000.0..=400_000.0).contains(&c.clock_hz),
                    "v{version} base {base}: {} at {} Hz",
                    c.name(),
                    c.clock_hz
                );
            }
            sim.clear_log();
            read_ok(&sim, &mut sd, 5, 3);
            let hz = sim.log()[0].clock_hz;
            let hs = clock_divider(base, 50 * MHZ, version).unwrap().hz;
            assert!(
                hz as u32 == hs && (25e6..=50e6).contains(&hz),
                "v{version} base {base}: data at {hz} Hz"
            );
            assert_eq!(sd.info().data_clock_hz, hz as u32);
            assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
            assert!(sd.info().id_clock_hz <= 400_000);
            check_clean(&sim);
        }
    }
}

#[test]
fn base_clock_from_capabilities() {
    // 52 MHz in the capabilities, as QEMU's raspi machines report.
    let (sim, sd) = start(HostSpec::v3(52 * MHZ), sdhc(), Faults::default(), 0);
    assert_eq!(sd.info().base_clock_hz, 52 * MHZ);
    // 52 / 2 = 26 MHz: High Speed (52 MHz is above its 50).
    assert_eq!(sd.info().data_clock_hz, 26 * MHZ);
    assert_eq!(sd.info().bus_mode, BusMode::HighSpeed);
    check_clean(&sim);
    // The BCM2835 reports none: without a clock from the caller, a clear error.
    let host = HostSpec {
        caps_base_clock: false,
        ..HostSpec::v3(PI_BASE)
    };
    let sim = Sim::new(host, sdhc(), Faults::default());
    let e = Sdhci::init(sim.regs(), sim.clock(), 0).unwrap_err();
    assert!(
        matches!(
            e,
            SdError::Init {
                step: Step::Clock,
                cause: Cause::NoBaseClock { .. }
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("base clock"), "{e}");
}

#[test]
fn transient_data_crc_error_recovers() {
    let (sim, mut sd) = start_card(sdhc());
    // A CRC error on the next block the card sends.
    let resets_before = sim.count_resets(4);
    sim.with(|s| s.faults_mut().data_crc_at = vec![s.blocks_sent]);
    sim.clear_log();
    read_ok(&sim, &mut sd, 777, 1);
    assert_eq!(
        sim.names(),
        ["CMD17", "CMD13", "CMD17"],
        "retry after a status check"
    );
    assert!(sim
        .log()
        .iter()
        .filter(|c| c.name() == "CMD17")
        .all(|c| c.arg == 777));
    assert!(
        sim.count_resets(4) > resets_before,
        "the DAT line was reset"
    );
    assert_eq!(sd.stats().retries, 1);
    assert_eq!(sd.stats().reinits, 0);

    // In the middle of a multi-block read: the card is stopped with CMD12, then the read repeats.
    let blocks_sent = sim.blocks_sent();
    sim.with(|s| s.faults_mut().data_crc_at = vec![blocks_sent + 3]);
    sim.clear_log();
    read_ok(&sim, &mut sd, 5000, 8);
    assert_eq!(sim.names(), ["CMD18", "CMD13", "CMD12", "CMD18", "CMD12"]);
    let log = sim.log();
    assert!(!log[2].auto && log[4].auto);
    assert_eq!((log[0].arg, log[3].arg), (5000, 5000));
    assert_eq!(sd.stats().retries, 2);
    check_clean(&sim);
}

#[test]
fn transient_command_crc_error_recovers() {
    let (sim, mut sd) = start_card(sdsc(Kind::SdscV2, 1 << 20));
    let next = sim.commands_seen();
    sim.with(|s| s.faults_mut().cmd_crc_at = vec![next]);
    let cmd_resets = sim.count_resets(2);
    sim.clear_log();
    read_ok(&sim, &mut sd, 3, 4);
    assert!(sim.count_resets(2) > cmd_resets, "the CMD line was reset");
    let names = sim.names();
    assert_eq!(names.first().map(String::as_str), Some("CMD18"));
    assert_eq!(
        names.iter().filter(|n| *n == "CMD18").count(),
        2,
        "{names:?}"
    );
    assert_eq!(sd.stats().retries, 1);
    check_clean(&sim);
}

#[test]
fn a_card_behind_a_card_detect_reading_0_is_initialised() {
    // Linux marks card detection broken on the BCM2835 Arasan: the driver must not gate on it.
    let host = HostSpec {
        card_detect: false,
        ..HostSpec::v3(PI_BASE)
    };
    let sim = Sim::new(host, sdhc(), Faults::default());
    assert!(!card_present(&mut sim.regs()), "the bit reads 0");
    let mut sd = Sdhci::init(sim.regs(), sim.clock(), PI_BASE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sim.names(), init_sequence(3, true, false));
    read_ok(&sim, &mut sd, 123_456, 8);
    check_clean(&sim);
}

#[test]
fn an_empty_slot_is_no_card_in_bounded_time() {
    for card_detect in [true, false] {
        let host = HostSpec {
            card_detect,
            ..HostSpec::v3(PI_BASE)
        };
        let card = CardSpec {
            inserted: false,
            ..sdhc()
        };
        let sim = Sim::new(host, card, Faults::default());
        let e = Sdhci::init(sim.regs(), sim.clock(), PI_BASE).unwrap_err();
        assert!(e.is_no_card() && e.is_timeout(), "{e:?}");
        assert!(
            matches!(e, SdError::Init { step: Step::Command(c), cause: Cause::NoCard } if c == Cmd::new(55)),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("no card answered") && msg.contains("CMD55"),
            "{msg}"
        );
        assert_eq!(sim.names(), ["CMD0", "CMD8", "CMD55"]);
        assert!(sim.now_us() < 50_000, "gave up after {} us", sim.now_us());
        check_clean(&sim);
    }
    // A card that answers and then fails is not "no card".
    let faults = Faults {
        never_ready: true,
        ..Faults::default()
    };
    let sim = Sim::new(HostSpec::v3(PI_BASE), sdhc(), faults);
    let e = Sdhci::init(sim.regs(), sim.clock(), PI_BASE).unwrap_err();
    assert!(!e.is_no_card(), "{e:?}");
}

#[test]
fn every_operation_is_fenced_by_barriers() {
    let (sim, mut sd) = start_sdhc(Config::new(PI_BASE));
    assert_eq!(sim.fencing(), (2, 0), "init: one barrier before, one after");
    read_ok(&sim, &mut sd, 7, 3);
    assert_eq!(sim.fencing(), (4, 0), "read");
    // A request refused before any register access needs none.
    assert!(read(&mut sd, u64::MAX - 1, 1).is_err());
    assert_eq!(sim.fencing(), (4, 0));
}

#[test]
fn acmd41_never_ready_fails_in_bounded_time() {
    let faults = Faults {
        never_ready: true,
        ..Faults::default()
    };
    let sim = Sim::new(HostSpec::v3(PI_BASE), sdhc(), faults);
    let e = Sdhci::init(sim.regs(), sim.clock(), PI_BASE).unwrap_err();
    match e {
        SdError::Init {
            step: Step::Command(c),
            cause: Cause::NotReady { ocr, waited_us },
        } => {
            assert_eq!(c, Cmd::acmd(41));
            assert_eq!(ocr & (1 << 31), 0);
            assert!((2_000_000..2_200_000).contains(&waited_us), "{waited_us}");
        }
        e => panic!("{e:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("ACMD41") && msg.contains("OCR 0x00ff8000"),
        "{msg}"
    );
    assert!(e.is_timeout());
    assert!(
        sim.now_us() < 3_000_000,
        "gave up after {} us",
        sim.now_us()
    );
    let polls = sim.names().iter().filter(|n| *n == "ACMD41").count();
    assert!(polls >= 100, "ACMD41 polled {polls} times");
    check_clean(&sim);
}

#[test]
fn permanently_bad_block() {
    let faults = Faults {
        bad_lbas: vec![100],
        ..Faults::default()
    };
    // At Default Speed: a CRC error at High Speed would first step the bus down
    // (`sd_speed.rs`).
    let config = Config {
        max_bus_mode: BusMode::DefaultSpeed,
        ..Config::new(PI_BASE)
    };
    let (sim, mut sd) = start_with(HostSpec::v3(PI_BASE), sdhc(), faults, config);
    sim.clear_log();
    let e = read(&mut sd, 100, 1).unwrap_err();
    match e {
        SdError::Read(Failed {
            cmd,
            lba,
            start,
            blocks,
            attempts,
            cause: Cause::Error { err_status },
        }) => {
            assert_eq!(
                (cmd, lba, start, blocks, attempts),
                (Cmd::new(17), 100, 100, 1, 3)
            );
            assert_eq!(err_status, 1 << 5, "data CRC");
        }
        e => panic!("{e:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("CMD17") && msg.contains("LBA 100") && msg.contains("data CRC"),
        "{msg}"
    );
    assert_eq!(sd.stats().reinits, 1);
    let names = sim.names();
    assert_eq!(
        names.iter().filter(|n| *n == "CMD17").count(),
        3,
        "{names:?}"
    );
    // The card was initialised again before the last try.
    let last_cmd0 = names
        .iter()
        .rposition(|n| n == "CMD0")
        .expect("re-initialisation");
    let cmd17s: Vec<usize> = names
        .iter()
        .enumerate()
        .filter(|(_, n)| *n == "CMD17")
        .map(|(i, _)| i)
        .collect();
    assert!(cmd17s[1] < last_cmd0 && last_cmd0 < cmd17s[2], "{names:?}");

    // Inside a multi-block request: CMD18, and the bad block's LBA.
    let e = read(&mut sd, 96, 8).unwrap_err();
    assert!(
        matches!(
            e,
            SdError::Read(Failed {
                cmd: Cmd {
                    index: 18,
                    app: false
                },
                lba: 100,
                start: 96,
                blocks: 8,
                ..
            })
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("CMD18") && msg.contains("LBA 100") && msg.contains("from LBA 96"),
        "{msg}"
    );

    // Everything else still reads.
    read_ok(&sim, &mut sd, 99, 1);
    read_ok(&sim, &mut sd, 101, 1);
    read_ok(&sim, &mut sd, 0, 100);
    read_ok(&sim, &mut sd, 101, 64);
    assert!(sim.card_in_tran());
    check_clean(&sim);
}

#[test]
fn card_stops_answering_mid_read() {
    for silent in [false, true] {
        let host = HostSpec {
            silent,
            ..HostSpec::v3(PI_BASE)
        };
        let (sim, mut sd) = start(host, sdhc(), Faults::default(), PI_BASE);
        read_ok(&sim, &mut sd, 0, 4);
        let sent = sim.blocks_sent();
        sim.with(|s| s.faults_mut().die_after_blocks = Some(sent + 3));
        let t0 = sim.now_us();
        let e = read(&mut sd, 1000, 8).unwrap_err();
        let took = sim.now_us() - t0;
        assert!(e.is_timeout(), "silent {silent}: {e:?}");
        let msg = e.to_string();
        assert!(msg.contains("timeout"), "{msg}");
        assert!(
            msg.contains("CMD18") && msg.contains("LBA 1003"),
            "the block that never came: {msg}"
        );
        assert!(took < 3_000_000, "silent {silent}: gave up after {took} us");
        if silent {
            // Only the driver's deadlines could end the waits.
            assert!(
                matches!(
                    e,
                    SdError::Reinit {
                        read_cause: Cause::Timeout {
                            wait: Wait::BufferReady(3),
                            ..
                        },
                        ..
                    } | SdError::Read(Failed {
                        cause: Cause::Timeout { .. },
                        ..
                    })
                ),
                "{e:?}"
            );
        }
        // Later reads fail too, each in bounded time.
        let t0 = sim.now_us();
        assert!(read(&mut sd, 0, 1).is_err());
        assert!(sim.now_us() - t0 < 3_000_000);
        check_clean(&sim);
    }
}

#[test]
fn reads_past_the_capacity_are_errors() {
    let (sim, mut sd) = start_card(sdsc(Kind::SdscV2, 1 << 20));
    let n = sd.num_blocks();
    assert_eq!(n, 2048);
    sim.clear_log();
    for (lba, blocks) in [
        (n, 1usize),
        (n - 1, 2),
        (n + 1000, 4),
        (u64::MAX, 1),
        (u64::MAX - 1, 3),
    ] {
        let e = read(&mut sd, lba, blocks).unwrap_err();
        assert!(
            matches!(e, SdError::Request(RequestError::OutOfRange { lba: l, .. }) if l == lba),
            "{e:?}"
        );
        assert!(e.to_string().contains(&format!("LBA {lba}")), "{e}");
    }
    let mut odd = vec![0u8; 100];
    let e = sd.read_blocks(0, &mut odd).unwrap_err();
    assert!(
        matches!(
            e,
            SdError::Request(RequestError::PartialBlock { lba: 0, len: 100 })
        ),
        "{e:?}"
    );
    assert!(sim.log().is_empty(), "bad requests never reach the card");
    sd.read_blocks(0, &mut []).unwrap();
    read_ok(&sim, &mut sd, n - 1, 1);
    read_ok(&sim, &mut sd, n - 8, 8);
    check_clean(&sim);
}

#[test]
fn large_requests_are_split() {
    let config = Config {
        max_blocks_per_command: 64,
        ..Config::new(PI_BASE)
    };
    let (sim, mut sd) = start_sdhc(config);
    sim.clear_log();
    read_ok(&sim, &mut sd, 1_000, 200);
    let cmds: Vec<(String, u32, u32)> = sim
        .log()
        .iter()
        .filter(|c| !c.auto)
        .map(|c| (c.name(), c.arg, c.blocks))
        .collect();
    let want: Vec<(String, u32, u32)> = [(1000, 64), (1064, 64), (1128, 64), (1192, 8)]
        .into_iter()
        .map(|(a, b)| ("CMD18".to_string(), a, b))
        .collect();
    assert_eq!(cmds, want);

    // The default limit keeps one command below the 16-bit block count.
    let (sim, mut sd) = start_card(sdhc());
    sim.clear_log();
    read_ok(&sim, &mut sd, 7, 3000);
    let log = sim.log();
    assert!(log.iter().all(|c| c.blocks <= 1024));
    assert_eq!(
        log.iter()
            .filter(|c| c.name() == "CMD18")
            .map(|c| c.blocks as u64)
            .sum::<u64>(),
        3000
    );
    check_clean(&sim);
}

#[test]
fn without_auto_cmd12_the_driver_stops_the_card() {
    let config = Config {
        auto_cmd12: false,
        ..Config::new(PI_BASE)
    };
    let (sim, mut sd) = start_sdhc(config);
    sim.clear_log();
    read_ok(&sim, &mut sd, 42, 5);
    read_ok(&sim, &mut sd, 50, 1);
    let log = sim.log();
    assert_eq!(sim.names(), ["CMD18", "CMD12", "CMD17"]);
    assert!(!log[1].auto);
    check_clean(&sim);
}

#[test]
fn one_bit_bus() {
    let config = Config {
        four_bit: false,
        ..Config::new(PI_BASE)
    };
    let (sim, mut sd) = start_sdhc(config);
    assert_eq!(sim.names(), init_sequence(3, false, false));
    assert_eq!(sd.info().bus_width, 1);
    assert!(!sim.host_4bit());
    read_ok(&sim, &mut sd, 9, 3);
    check_clean(&sim);
}

#[test]
fn reinit_and_no_write_commands_over_a_long_run() {
    let faults = Faults {
        bad_lbas: vec![2_000],
        ..Faults::default()
    };
    let (sim, mut sd) = start(
        HostSpec::v3(PI_BASE),
        sdsc(Kind::SdscV2, 8 << 20),
        faults,
        PI_BASE,
    );
    let mut rng = Rng::new(3);
    let mut failures = 0;
    for i in 0..100 {
        if i % 10 == 5 {
            let next = sim.blocks_sent() + rng.below(4);
            sim.with(|s| s.faults_mut().data_crc_at = vec![next]);
        }
        if i == 50 {
            sd.reinit().unwrap();
        }
        let n = 1 + rng.below(40) as usize;
        let lba = rng.below(16384 - n as u64 + 1);
        match read(&mut sd, lba, n) {
            Ok(got) => assert!(got == sim.expected(lba, n as u64)),
            Err(e) => {
                assert!((lba..lba + n as u64).contains(&2_000), "{e}");
                failures += 1;
            }
        }
    }
    // One last read over the bad block, which fails every time.
    assert!(read(&mut sd, 1_990, 20).is_err());
    assert!(failures <= 100);
    // Every command the driver can send is a read-only one.
    for c in READ_ONLY_COMMANDS {
        assert!(
            !matches!(
                (c.app, c.index),
                (false, 20 | 24..=29 | 32 | 33 | 38 | 42 | 49 | 56 | 59)
            ),
            "{c}"
        );
    }
    check_clean(&sim);
}

#[test]
fn error_messages_name_what_failed() {
    let e = SdError::Read(Failed {
        cmd: Cmd::new(18),
        lba: 1234,
        start: 1230,
        blocks: 8,
        attempts: 3,
        cause: Cause::Error { err_status: 0x0021 },
    });
    let s = e.to_string();
    assert!(
        s.contains("CMD18")
            && s.contains("LBA 1234")
            && s.contains("1230")
            && s.contains("command timeout")
            && s.contains("data CRC")
            && s.contains("0x0021"),
        "{s}"
    );
    let e = SdError::Init {
        step: Step::Command(Cmd::new(8)),
        cause: Cause::Timeout {
            wait: Wait::CommandComplete,
            waited_us: 100_000,
            int_status: 0,
            present: 1,
        },
    };
    let s = e.to_string();
    assert!(
        s.contains("CMD8") && s.contains("100000 us") && s.contains("command complete"),
        "{s}"
    );
    assert!(e.is_timeout());
    let e = SdError::Init {
        step: Step::Reset,
        cause: Cause::Timeout {
            wait: Wait::Reset(1 << 24),
            waited_us: 100_000,
            int_status: 0,
            present: 0,
        },
    };
    assert!(e.to_string().contains("SRST_ALL"), "{e}");
}

/// The FAT reader mounts an MBR-partitioned FAT32 volume on the simulated SDSC card and reads
/// files through the driver.
#[test]
fn fat_volume_over_the_simulated_card() {
    use drivers::fat::Volume;
    use fat_common::*;
    let dir = TempDir::new("sd");
    let img = dir.join("card.img");
    let offset = mkfs_mbr(&img, 40 << 20);
    mmd(&img, offset, "/models");
    let model = bytes(11, 300_001);
    put(&dir, &img, offset, SMALL_MODEL, &model);
    put(&dir, &img, offset, "/LMBOOT.TXT", SMALL_TEXT);
    let data = std::fs::read(&img).unwrap();
    let card = CardSpec::new(Kind::SdscV2, Backing::Bytes(data));
    let (sim, mut sd) = start_card(card);
    let vol = Volume::mount(&mut sd).unwrap_or_else(|e| panic!("mount: {e}"));
    assert_eq!(vol.start_lba(), 2048);
    check_file(&vol, &mut sd, SMALL_MODEL, &model, 5);
    check_file(&vol, &mut sd, "/LMBOOT.TXT", SMALL_TEXT, 6);
    assert!(sd.stats().blocks_read > 600);
    check_clean(&sim);
}

/// The Arasan may drop a register write that follows another within two SD clocks: the driver
/// waits four SD clocks after each write at the identification clock. Without that delay the
/// simulator flags the writes.
#[test]
fn arasan_write_delay_at_the_identification_clock() {
    let (sim, _sd) = start_card(sdhc());
    check_clean(&sim);
    let config = Config {
        arasan_write_delay: false,
        ..Config::new(PI_BASE)
    };
    let sim = Sim::new(HostSpec::v3(PI_BASE), sdhc(), Faults::default());
    let _ = Sdhci::with_config(sim.regs(), sim.clock(), config);
    let v = sim.violations();
    assert!(
        !v.is_empty() && v.iter().all(|v| v.contains("within two SD clocks")),
        "{v:#?}"
    );
}
