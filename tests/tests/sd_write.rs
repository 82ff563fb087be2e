//! Writes through the SDHCI driver (`drivers::sdhci`, [`WriteBlocks`]) against the register-level
//! simulator in `sd_sim`: CMD24 / CMD25 with block addresses (SDHC) and byte addresses (SDSC), the
//! CMD13 wait for the end of programming (also when the controller raises transfer complete early),
//! CMD12 from the driver when auto CMD12 is off, splitting, a transient CRC error retried, the
//! write-protect bit ignored by default (undocumented on the BCM2835; microSD has no switch), the
//! three kinds of write protection refused with a clear error when they apply (nothing sent when the
//! switch, if asked for, or the CSD says so), a card that never finishes programming failing in bounded time, range checks, and a
//! FAT file written in place over the simulated card. Every test ends by checking that the
//! simulator saw no protocol violation and only commands of the driver's set.

mod dma_mem;
mod fat_common;
mod sd_card_sim;
mod sd_sim;

use drivers::block::{BlockDevice, RequestError, WriteBlocks};
use drivers::sdhci::{is_allowed, Cause, Cmd, Config, Failed, SdError, Wait, WriteProtect};
use fat_common::{bytes, Rng};
use sd_sim::*;

fn start(host: HostSpec, card: CardSpec, faults: Faults) -> (Sim, Driver) {
    start_with(host, card, faults, Config::new(PI_BASE))
}

/// No protocol violations, and only commands of the driver's set on the bus.
fn check_clean(sim: &Sim) {
    check_no_violations(sim);
    for c in sim.log() {
        assert!(
            is_allowed(Cmd {
                index: c.index,
                app: c.app
            }),
            "{} is outside the driver's command set",
            c.name()
        );
    }
}

fn writes_on_bus(sim: &Sim) -> usize {
    sim.log()
        .iter()
        .filter(|c| !c.app && matches!(c.index, 24 | 25))
        .count()
}

fn read(sd: &mut Driver, lba: u64, blocks: usize) -> Vec<u8> {
    let mut buf = vec![0xA5u8; blocks * 512];
    sd.read_blocks(lba, &mut buf)
        .unwrap_or_else(|e| panic!("read {blocks} at {lba}: {e}"));
    buf
}

/// Write `data` at `lba` and check it reads back, through the driver and in the card.
fn write_ok(sim: &Sim, sd: &mut Driver, lba: u64, data: &[u8]) {
    sd.write_blocks(lba, data).unwrap_or_else(|e| {
        panic!(
            "write {} at {lba}: {e}\n{:?}\n{:#?}",
            data.len() / 512,
            sim.names(),
            sim.violations()
        )
    });
    let n = data.len() / 512;
    assert!(sim.expected(lba, n as u64) == data, "card holds other data");
    assert!(read(sd, lba, n) == data, "read back differs");
    assert_eq!(sim.card_state(), 4, "card back in tran after the write");
}

#[test]
fn sdhc_single_and_multi_block_writes() {
    let (sim, mut sd) = start_card(sdhc());
    sim.clear_log();
    let one = bytes(1, 512);
    write_ok(&sim, &mut sd, 40_000_000, &one);
    let log = sim.log();
    assert_eq!(log[0].name(), "CMD24");
    assert_eq!((log[0].arg, log[0].blocks), (40_000_000, 1));
    assert_eq!(log[1].name(), "CMD13", "{:?}", sim.names());
    assert_eq!(log[1].arg, 0xB368 << 16);

    sim.clear_log();
    let many = bytes(2, 16 * 512);
    write_ok(&sim, &mut sd, 1000, &many);
    let log = sim.log();
    assert_eq!(
        (log[0].name().as_str(), log[0].arg, log[0].blocks),
        ("CMD25", 1000, 16)
    );
    assert!(
        log[1].name() == "CMD12" && log[1].auto,
        "auto CMD12: {:?}",
        sim.names()
    );
    assert_eq!(log[2].name(), "CMD13");
    // Neighbours untouched.
    assert!(read(&mut sd, 999, 1) == pattern_block(999));
    assert!(read(&mut sd, 1016, 1) == pattern_block(1016));

    // A large request is split into commands of at most 1024 blocks.
    sim.clear_log();
    let big = bytes(3, 2500 * 512);
    write_ok(&sim, &mut sd, 77_777, &big);
    let cmds: Vec<_> = sim
        .log()
        .into_iter()
        .filter(|c| c.index == 25)
        .map(|c| (c.arg, c.blocks))
        .collect();
    assert_eq!(cmds, [(77_777, 1024), (78_801, 1024), (79_825, 452)]);

    // Random writes against the model of the card.
    let mut rng = Rng::new(4);
    for i in 0..30 {
        let n = 1 + rng.below(40) as usize;
        let lba = rng.below((64 << 20) - n as u64);
        write_ok(&sim, &mut sd, lba, &bytes(100 + i, n * 512));
    }
    assert_eq!(sd.stats().retries, 0);
    assert_eq!(
        sd.stats().blocks_written,
        1 + 16 + 2500 + {
            let mut rng = Rng::new(4);
            (0..30)
                .map(|_| {
                    let n = 1 + rng.below(40);
                    rng.below(1);
                    n
                })
                .sum::<u64>()
        }
    );
    check_clean(&sim);
}

#[test]
fn sdsc_writes_use_byte_addresses_and_touch_nothing_else() {
    let card = CardSpec::new(Kind::SdscV2, Backing::Bytes(bytes(7, 4 << 20)));
    let (sim, mut sd) = start_card(card);
    let before = sim.image();
    sim.clear_log();
    let data = bytes(8, 3 * 512);
    write_ok(&sim, &mut sd, 7, &data);
    assert_eq!(sim.log()[0].arg, 7 * 512, "SDSC: byte address");
    let after = sim.image();
    assert!(after[7 * 512..10 * 512] == data[..]);
    assert!(after[..7 * 512] == before[..7 * 512]);
    assert!(after[10 * 512..] == before[10 * 512..]);
    assert_eq!(sim.written_lbas(), [7, 8, 9]);
    check_clean(&sim);
}

/// A controller that raises transfer complete before the card has finished programming: only the
/// CMD13 polls keep the driver from returning (and from sending the next write) too early.
#[test]
fn early_transfer_complete_waits_for_programming_with_cmd13() {
    for blocks in [1usize, 5] {
        let host = HostSpec {
            early_write_complete: true,
            ..HostSpec::v3(PI_BASE)
        };
        let (sim, mut sd) = start(host, sdhc(), Faults::default());
        sim.clear_log();
        let t0 = sim.now_us();
        let data = bytes(9, blocks * 512);
        sd.write_blocks(123, &data).unwrap();
        assert!(
            sim.now_us() - t0 >= PROGRAM_NS / 1000,
            "returned before programming ended"
        );
        let polls = sim.names().iter().filter(|n| *n == "CMD13").count();
        assert!(
            polls >= 2,
            "expected CMD13 polls while programming: {:?}",
            sim.names()
        );
        assert_eq!(sim.card_state(), 4);
        // Back-to-back writes: the simulator flags a write command sent while programming.
        for i in 0..5u64 {
            write_ok(&sim, &mut sd, 200 + i * 3, &bytes(10 + i, 2 * 512));
        }
        check_clean(&sim);
    }
}

#[test]
fn without_auto_cmd12_the_driver_stops_the_write() {
    let config = Config {
        auto_cmd12: false,
        ..Config::new(PI_BASE)
    };
    let (sim, mut sd) = start_sdhc(config);
    sim.clear_log();
    let data = bytes(11, 4 * 512);
    sd.write_blocks(50, &data).unwrap();
    let log = sim.log();
    assert_eq!(log[0].name(), "CMD25");
    assert!(
        log[1].name() == "CMD12" && !log[1].auto,
        "{:?}",
        sim.names()
    );
    assert!(
        log.len() > 2 && log[2..].iter().all(|c| c.name() == "CMD13"),
        "{:?}",
        sim.names()
    );
    assert!(read(&mut sd, 50, 4) == data);
    check_clean(&sim);
}

#[test]
fn transient_write_crc_error_is_retried() {
    for (kind, blocks) in [(Kind::Sdhc, 1usize), (Kind::Sdhc, 8), (Kind::SdscV2, 8)] {
        let card = match kind {
            Kind::Sdhc => sdhc(),
            _ => CardSpec::new(kind, Backing::Bytes(bytes(5, 4 << 20))),
        };
        let (sim, mut sd) = start_card(card);
        let next = sim.blocks_received() + (blocks as u64 - 1).min(2);
        sim.with(|s| s.faults_mut().write_crc_at = vec![next]);
        write_ok(&sim, &mut sd, 300, &bytes(12, blocks * 512));
        assert_eq!(sd.stats().retries, 1, "{kind:?} {blocks}");
        assert!(
            sim.count_resets(4) >= 1,
            "DAT line reset after the CRC error"
        );
        check_clean(&sim);
    }
}

#[test]
fn the_write_protect_bit_does_not_stop_writes_unless_asked() {
    // The bit is undocumented on the BCM2835 and microSD has no switch: by default a write goes
    // through whatever it reads (the prompt cache's writes need this).
    let host = HostSpec {
        write_protect_switch: true,
        ..HostSpec::v3(PI_BASE)
    };
    let (sim, mut sd) = start(host, sdhc(), Faults::default());
    assert!(!sd.config().write_protect_switch);
    write_ok(&sim, &mut sd, 10, &bytes(13, 1024));
    assert_eq!(
        sim.fencing().1,
        0,
        "every access inside the write's barriers"
    );
    check_clean(&sim);

    // A board with a real switch line can ask for the check: then nothing is sent.
    let config = Config {
        write_protect_switch: true,
        ..Config::new(PI_BASE)
    };
    let (sim, mut sd) = start_with(host, sdhc(), Faults::default(), config);
    let e = sd.write_blocks(10, &[1u8; 1024]).unwrap_err();
    assert!(
        matches!(
            e,
            SdError::WriteProtected {
                start: 10,
                blocks: 2,
                by: WriteProtect::Switch { .. }
            }
        ),
        "{e:?}"
    );
    let s = e.to_string();
    assert!(
        s.contains("write-protect switch") && s.contains("LBA 10"),
        "{s}"
    );
    assert_eq!(writes_on_bus(&sim), 0);
    assert!(sim.written_lbas().is_empty());
    // Reads still work.
    assert!(read(&mut sd, 10, 2) == sim.expected(10, 2));
    check_clean(&sim);
}

#[test]
fn csd_permanent_write_protect_is_refused() {
    let card = CardSpec {
        perm_write_protect: true,
        ..sdhc()
    };
    let (sim, mut sd) = start_card(card);
    let e = sd.write_blocks(0, &[0u8; 512]).unwrap_err();
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
    assert!(e.to_string().contains("PERM_WRITE_PROTECT"), "{e}");
    assert_eq!(writes_on_bus(&sim), 0);
    check_clean(&sim);
}

#[test]
fn a_write_protect_violation_is_reported_at_once() {
    let faults = Faults {
        wp_violation: true,
        ..Faults::default()
    };
    let (sim, mut sd) = start(HostSpec::v3(PI_BASE), sdhc(), faults);
    sim.clear_log();
    let e = sd.write_blocks(5, &[7u8; 3 * 512]).unwrap_err();
    assert!(
        matches!(e, SdError::WriteProtected { start: 5, blocks: 3, by: WriteProtect::Violation { r1 } } if r1 & (1 << 26) != 0),
        "{e:?}"
    );
    assert!(e.to_string().contains("write protect violation"), "{e}");
    assert_eq!(writes_on_bus(&sim), 1, "not retried: {:?}", sim.names());
    assert!(sim.written_lbas().is_empty());
    // The card is usable afterwards.
    assert!(read(&mut sd, 5, 3) == sim.expected(5, 3));
    check_clean(&sim);
}

#[test]
fn a_card_that_never_finishes_programming_fails_in_bounded_time() {
    for early in [false, true] {
        let host = HostSpec {
            early_write_complete: early,
            ..HostSpec::v3(PI_BASE)
        };
        let faults = Faults {
            stuck_programming: true,
            ..Faults::default()
        };
        let (sim, mut sd) = start(host, sdhc(), faults);
        let t0 = sim.now_us();
        let e = sd.write_blocks(64, &[3u8; 2 * 512]).unwrap_err();
        let waited = sim.now_us() - t0;
        eprintln!("early TC {early}: {e} (after {waited} us)");
        assert!(waited < 20_000_000, "took {waited} us");
        match e {
            SdError::Write(Failed {
                cause, attempts, ..
            }) => {
                assert_eq!(attempts, 3);
                assert!(cause.is_timeout(), "{cause}");
                if early {
                    assert!(
                        matches!(
                            cause,
                            Cause::Timeout {
                                wait: Wait::Programmed { state: 7 },
                                ..
                            }
                        ),
                        "{cause:?}"
                    );
                    assert!(e.to_string().contains("finish programming"), "{e}");
                }
            }
            SdError::WriteReinit { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
        // The data was received (the card is just slow to program it).
        assert!(sim.written_lbas().contains(&64));
        check_clean(&sim);
    }
}

#[test]
fn writes_past_the_capacity_are_errors() {
    let (sim, mut sd) = start_card(sdhc());
    sim.clear_log();
    let end = 64u64 << 20;
    let e = sd.write_blocks(end - 1, &[0u8; 1024]).unwrap_err();
    assert_eq!(
        e,
        SdError::Request(RequestError::OutOfRange {
            lba: end - 1,
            blocks: 2,
            num_blocks: end
        })
    );
    let e = sd.write_blocks(3, &[0u8; 100]).unwrap_err();
    assert_eq!(
        e,
        SdError::Request(RequestError::PartialBlock { lba: 3, len: 100 })
    );
    sd.write_blocks(3, &[]).unwrap();
    assert!(sim.log().is_empty(), "nothing sent: {:?}", sim.names());
    write_ok(&sim, &mut sd, end - 2, &bytes(14, 1024));
    check_clean(&sim);
}

/// A FAT32 volume made by the `fatfs` crate on the simulated SDHC card: a preallocated file is
/// written in place through the driver, read back with our reader and with `fatfs`, and only its
/// blocks were written.
#[test]
fn fat_file_written_in_place_over_the_simulated_card() {
    use drivers::fat::Volume;
    use std::io::{Cursor, Read, Write};
    let img = fat_common::fatfs_image(36 << 20, |root| {
        let mut f = root.create_file("lmboot.kv").unwrap();
        f.write_all(&vec![0u8; 100_000]).unwrap();
        f.flush().unwrap();
    });
    let card = CardSpec::new(Kind::Sdhc, Backing::Bytes(img.clone()));
    let (sim, mut sd) = start_card(card);
    let vol = Volume::mount(&mut sd).unwrap();
    let file = vol.open(&mut sd, "/lmboot.kv").unwrap();
    let data = bytes(15, 60_001);
    file.write_at(&mut sd, 1234, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    file.read_at(&mut sd, 1234, &mut back).unwrap();
    assert!(back == data);

    // Only blocks of the file were written.
    let in_file = |lba: u64| {
        file.extents()
            .iter()
            .any(|e| (e.lba..e.lba + e.blocks).contains(&lba))
    };
    let written = sim.written_lbas();
    assert!(!written.is_empty());
    assert!(written.iter().all(|&l| in_file(l)), "{written:?}");

    let mut after = sim.image();
    let fs = fatfs::FileSystem::new(Cursor::new(&mut after[..]), fatfs::FsOptions::new()).unwrap();
    let mut all = Vec::new();
    fs.root_dir()
        .open_file("lmboot.kv")
        .unwrap()
        .read_to_end(&mut all)
        .unwrap();
    assert_eq!(all.len(), 100_000);
    assert!(all[1234..1234 + data.len()] == data[..]);
    assert!(all[..1234].iter().all(|&b| b == 0));
    assert!(all[1234 + data.len()..].iter().all(|&b| b == 0));
    check_clean(&sim);
}
