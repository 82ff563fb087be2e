//! `cargo xtask bench --only card` (ignored by `cargo test`): for each SD host and bus mode, the
//! time one 256 KiB page takes, from the register-level simulators' clock model (SD clock cycles
//! per block on 4 lines, both edges in DDR50; command and response bits; the card's access time
//! before the first block), beside the simulated time of the whole read (which adds the CPU's
//! register accesses at the model's 200 ns each: with programmed I/O it drains every word), and
//! the register accesses per MB (the CPU's share: programmed I/O against DMA). The rows marked
//! "today" are the drivers as they were before the bus modes (Default Speed); a host that came
//! after them (the RISC-V boards') has a "reference" row at Default Speed instead. Writes the
//! table to `$LMBOOT_CARD_BENCH` (a file) or prints it.
//!
//! What this shows and what it cannot: the bus time follows from the clock, the bus width and
//! the command overheads the model charges; a real card's access time, a real controller's
//! FIFO depth and a real CPU's cost per register access differ, and no simulator or QEMU run
//! shows whether a given board's traces carry 50 MHz. The time per page on hardware can only be
//! measured on hardware.

mod dma_mem;
mod sd_card_sim;
mod sd_sim;
mod sdhost_sim;
mod sunxi_sim;

use drivers::block::BlockDevice;
use drivers::sd::BusMode;
use drivers::sdhci::{Config, Sdhci};
use sd_card_sim::read_blocks;
use sd_sim::{HostSpec, Sim};
use std::fmt::Write;

const PAGE_BLOCKS: usize = 512;

/// One row: what it is, and the figures of one page read.
struct Row {
    host: &'static str,
    what: String,
    bus_ms: f64,
    sim_ms: f64,
    commands: usize,
    accesses_per_mb: f64,
    mode: BusMode,
}

impl Row {
    fn new(host: &'static str, what: &str, f: (f64, f64, usize, f64), mode: BusMode) -> Row {
        let (bus_ms, sim_ms, commands, accesses_per_mb) = f;
        Row {
            host,
            what: what.to_string(),
            bus_ms,
            sim_ms,
            commands,
            accesses_per_mb,
            mode,
        }
    }
}

/// What the bench reads of a simulator.
trait Counters {
    /// (bus ns, virtual ns, register accesses) so far.
    fn counters(&self) -> (u64, u64, u64);
    fn pass_us(&self, us: u64);
    fn expected(&self, lba: u64, n: u64) -> Vec<u8>;
    /// Read commands on the bus since `clear`, and clear.
    fn commands(&self) -> usize;
    fn clear(&self);
    fn clean(&self);
}

/// [`Counters`] for a simulator module's `Sim` (both have the same methods).
macro_rules! counters_for {
    ($sim:ident) => {
        impl Counters for $sim::Sim {
            #[inline(never)]
            fn counters(&self) -> (u64, u64, u64) {
                (self.bus_ns(), self.now_ns(), self.accesses())
            }
            #[inline(never)]
            fn pass_us(&self, us: u64) {
                $sim::Sim::pass_us(self, us)
            }
            #[inline(never)]
            fn expected(&self, lba: u64, n: u64) -> Vec<u8> {
                $sim::Sim::expected(self, lba, n)
            }
            #[inline(never)]
            fn commands(&self) -> usize {
                self.log().iter().filter(|c| !c.auto).count()
            }
            #[inline(never)]
            fn clear(&self) {
                self.clear_log()
            }
            #[inline(never)]
            fn clean(&self) {
                $sim::check_no_violations(self)
            }
        }
    };
}
counters_for!(sd_sim);
counters_for!(sunxi_sim);
counters_for!(sdhost_sim);

/// Read one page (after one read to warm up) and take its figures: synchronously, or queued
/// (`submit_read`, then `poll_read` every 100 us of computing) when the device queues.
fn page<D: BlockDevice>(sim: &dyn Counters, sd: &mut D) -> (f64, f64, usize, f64)
where
    D::Error: std::fmt::Debug,
{
    read_blocks(sd, 7, 8).unwrap();
    sim.clear();
    let (bus0, t0, a0) = sim.counters();
    let mut got = vec![0u8; PAGE_BLOCKS * 512 + 64];
    let at = got.as_ptr().align_offset(64);
    let buf = &mut got[at..at + PAGE_BLOCKS * 512];
    if sd.queue_depth() > 0 {
        // SAFETY: `buf` lives and is untouched until the read is reported below.
        unsafe { sd.submit_read(4096, buf.as_mut_ptr(), buf.len()) }.unwrap();
        let done = loop {
            // The CPU computes for 100 us at a time between polls.
            sim.pass_us(100);
            if let Some((_, r)) = sd.poll_read() {
                break r;
            }
        };
        done.unwrap();
    } else {
        sd.read_blocks(4096, buf).unwrap();
    }
    assert!(*buf == sim.expected(4096, PAGE_BLOCKS as u64), "page data");
    sim.clean();
    let cmds = sim.commands();
    let (bus1, t1, a1) = sim.counters();
    let mb = (PAGE_BLOCKS * 512) as f64 / 1e6;
    (
        (bus1 - bus0) as f64 / 1e6,
        (t1 - t0) as f64 / 1e6,
        cmds,
        (a1 - a0) as f64 / mb,
    )
}

/// The SDHCI rows: the Arasan of the Pi 2 / 3 / Zero 2 W, the Pi 4's EMMC2.
fn sdhci_rows() -> Vec<Row> {
    let arasan = HostSpec {
        no_hispd_bit: true,
        caps_base_clock: false,
        ..HostSpec::v3(250_000_000)
    };
    let emmc2 = HostSpec {
        adma: true,
        ..HostSpec::emmc2()
    };
    let uhs_card = sd_card_sim::CardSpec {
        uhs: true,
        ..sd_sim::sdhc()
    };
    // (host name, host, limit, high-speed bit, ADMA2, label)
    let cases = [
        (
            "Pi 2 / 3 / Zero 2 W (Arasan EMMC, 250 MHz)",
            arasan,
            BusMode::DefaultSpeed,
            false,
            false,
            "today: Default Speed, PIO",
        ),
        (
            "Pi 2 / 3 / Zero 2 W (Arasan EMMC, 250 MHz)",
            arasan,
            BusMode::HighSpeed,
            false,
            false,
            "High Speed, PIO",
        ),
        (
            "Pi 4 (EMMC2, 100 MHz)",
            emmc2,
            BusMode::DefaultSpeed,
            true,
            false,
            "today: Default Speed, PIO",
        ),
        (
            "Pi 4 (EMMC2, 100 MHz)",
            emmc2,
            BusMode::HighSpeed,
            true,
            false,
            "High Speed, PIO",
        ),
        (
            "Pi 4 (EMMC2, 100 MHz)",
            emmc2,
            BusMode::Ddr50,
            true,
            false,
            "DDR50, PIO",
        ),
        (
            "Pi 4 (EMMC2, 100 MHz)",
            emmc2,
            BusMode::HighSpeed,
            true,
            true,
            "High Speed, ADMA2",
        ),
        (
            "Pi 4 (EMMC2, 100 MHz)",
            emmc2,
            BusMode::Ddr50,
            true,
            true,
            "DDR50, ADMA2",
        ),
    ];
    let mut rows = Vec::new();
    for (name, host, limit, hs_bit, adma, label) in cases {
        let sim = Sim::new(host, uhs_card.clone(), sd_sim::Faults::default());
        let config = Config {
            max_bus_mode: limit,
            high_speed_bit: hs_bit,
            ..Config::new(host.base_clock_hz)
        };
        let figures = if adma {
            let mut sd =
                Sdhci::with_dma(sim.regs(), sim.clock(), config, sim.slot(), sim.dma()).unwrap();
            assert!(sd.dma_active());
            (page(&sim, &mut sd), sd.info().bus_mode)
        } else {
            let mut sd = Sdhci::with_slot(sim.regs(), sim.clock(), config, sim.slot()).unwrap();
            (page(&sim, &mut sd), sd.info().bus_mode)
        };
        let (f, mode) = figures;
        assert_eq!(mode, limit, "{name}: {label}");
        rows.push(Row::new(name, label, f, mode));
    }
    rows
}

/// The sdhost rows (the Pi 2 / 3 / Zero 2 W's other controller, QEMU's 350 MHz core clock: High
/// Speed at 350 / (5 + 2) = 50 MHz): by PIO, and by the system DMA engine straight into the
/// page, queued (the last three words by PIO).
fn sdhost_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for dma in [false, true] {
        let label = if dma {
            "High Speed 50 MHz, DMA into the page, queued"
        } else {
            "High Speed 50 MHz, PIO"
        };
        let card = sdhost_sim::sdhc();
        let faults = sdhost_sim::Faults::default();
        let (figures, mode) = if dma {
            let (sim, mut sd) = sdhost_sim::start_dma(card, faults);
            assert!(sd.dma_active());
            (page(&sim, &mut sd), sd.info().bus_mode)
        } else {
            let (sim, mut sd) = sdhost_sim::start_pio(card, faults);
            (page(&sim, &mut sd), sd.info().bus_mode)
        };
        assert_eq!(mode, BusMode::HighSpeed);
        rows.push(Row::new(SDHOST, label, figures, mode));
    }
    rows
}

/// The sdhost rows' host.
const SDHOST: &str = "Pi 2 / 3 / Zero 2 W (sdhost, 350 MHz core clock)";

/// The Allwinner rows: today's (Default Speed, the IDMAC in commands of its old 64 KiB bounce
/// buffer, four a page), High Speed by PIO, and High Speed with the IDMAC straight into the page,
/// queued. (Its simulator charges the card's access time to IDMAC reads only.)
fn sunxi_rows() -> Vec<Row> {
    use drivers::sunxi_mmc::{Config, DMA_BUFFER_BLOCKS};
    let host = sunxi_sim::HostSpec::hardware();
    let today = Config {
        max_bus_mode: BusMode::DefaultSpeed,
        max_blocks_per_command: DMA_BUFFER_BLOCKS,
        ..Config::new()
    };
    let cases = [
        (today, true, "today: Default Speed, IDMA in 64 KiB commands"),
        (Config::new(), false, "High Speed, PIO"),
        (
            Config::new(),
            true,
            "High Speed, IDMA into the page, queued",
        ),
    ];
    let mut rows = Vec::new();
    for (config, dma, label) in cases {
        let card = sunxi_sim::sdhc();
        let faults = sunxi_sim::Faults::default();
        let (sim, figures, mode) = if dma {
            let (sim, mut sd) = sunxi_sim::start_dma(host, card, faults, config);
            let f = page(&sim, &mut sd);
            (sim, f, sd.info().bus_mode)
        } else {
            let (sim, mut sd) = sunxi_sim::start(host, card, faults, config);
            let f = page(&sim, &mut sd);
            (sim, f, sd.info().bus_mode)
        };
        drop(sim);
        rows.push(Row::new(
            "Orange Pi (Allwinner H3 SD/MMC)",
            label,
            figures,
            mode,
        ));
    }
    rows
}

/// The RISC-V boards' hosts, 3.3 V slots reading by ADMA2 (queued): the Milk-V Duo's CV18xx
/// DesignWare MSHC on 375 MHz (High Speed at 46.9 MHz) and the SpacemiT K1's SDHCI on 204.8 MHz
/// (High Speed at 34.1 MHz), each against Default Speed on the same host.
fn riscv_rows() -> Vec<Row> {
    use drivers::sdhci::Variant;
    let cases = [
        (
            "Milk-V Duo (CV18xx DesignWare MSHC, 375 MHz)",
            HostSpec::cv18xx(),
            Variant::DwcmshcCv18xx,
        ),
        (
            "BPI-F3 / Jupiter (SpacemiT K1 SDHCI, 204.8 MHz)",
            HostSpec::k1(),
            Variant::SpacemitK1,
        ),
    ];
    let mut rows = Vec::new();
    for (name, host, variant) in cases {
        for (limit, label) in [
            (BusMode::DefaultSpeed, "reference: Default Speed, ADMA2"),
            (BusMode::HighSpeed, "High Speed, ADMA2"),
        ] {
            let sim = Sim::new(host, sd_sim::sdhc(), sd_sim::Faults::default());
            let config = Config {
                variant,
                max_bus_mode: limit,
                arasan_write_delay: false,
                ..Config::new(host.base_clock_hz)
            };
            let mut sd = Sdhci::with_dma(
                sim.regs(),
                sim.clock(),
                config,
                drivers::sdhci::NoSlot,
                sim.dma(),
            )
            .unwrap();
            assert!(sd.dma_active());
            let f = page(&sim, &mut sd);
            rows.push(Row::new(name, label, f, sd.info().bus_mode));
        }
    }
    rows
}

fn table(rows: &[Row]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# The card bus: one 256 KiB page per host and mode (register-level simulators)\n"
    );
    let _ = writeln!(md, "| host | mode, data path | bus time / page (ms) | vs today | simulated read (ms) | read commands / page | register accesses / MB |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let mut today = 0.0;
    for r in rows {
        if r.what.starts_with("today") || r.what.starts_with("reference") {
            today = r.bus_ms;
        }
        let _ = writeln!(
            md,
            "| {} | {} ({}) | {:.2} | {:.3}x | {:.2} | {} | {:.0} |",
            r.host,
            r.what,
            r.mode,
            r.bus_ms,
            r.bus_ms / today,
            r.sim_ms,
            r.commands,
            r.accesses_per_mb
        );
    }
    md
}

#[test]
#[ignore = "a benchmark: cargo xtask bench --only card"]
fn card_bus_time_per_page() {
    let mut rows = sdhci_rows();
    // The sdhost rows after the Arasan's (the same boards), measured against its "today".
    let after_arasan = rows
        .iter()
        .take_while(|r| r.host.contains("Arasan"))
        .count();
    rows.splice(after_arasan..after_arasan, sdhost_rows());
    rows.extend(sunxi_rows());
    rows.extend(riscv_rows());
    let md = table(&rows);
    match std::env::var_os("LMBOOT_CARD_BENCH") {
        Some(path) => std::fs::write(path, &md).unwrap(),
        None => println!("{md}"),
    }
}

/// Pages each CPU-cost run reads.
const CPU_PAGES: u64 = 64;

/// Read [`CPU_PAGES`] pages through `sd` (queued when it queues, the CPU away 100 us between
/// polls), in a function of its own so that `cargo xtask bench --only card` can count, with
/// valgrind's callgrind (`--toggle-collect=*cpu_reads*`), the instructions spent in here and
/// below it, and attribute them by source file: the driver's against the simulator's.
#[inline(never)]
fn cpu_reads<D: BlockDevice>(sim: &dyn Counters, sd: &mut D)
where
    D::Error: std::fmt::Debug,
{
    let mut raw = vec![0u8; PAGE_BLOCKS * 512 + 4096];
    let at = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[at..at + PAGE_BLOCKS * 512];
    for p in 0..CPU_PAGES {
        let lba = 8192 + p * PAGE_BLOCKS as u64;
        if sd.queue_depth() > 0 {
            // SAFETY: `buf` lives and is untouched until the read is reported.
            unsafe { sd.submit_read(lba, buf.as_mut_ptr(), buf.len()) }.unwrap();
            while sd.poll_read().is_none() {
                sim.pass_us(100);
            }
        } else {
            sd.read_blocks(lba, buf).unwrap();
        }
    }
    assert!(
        *buf == sim.expected(
            8192 + (CPU_PAGES - 1) * PAGE_BLOCKS as u64,
            PAGE_BLOCKS as u64
        )
    );
}

/// The Pi 4's EMMC2 in DDR50, by PIO (`adma` false) or ADMA2.
fn cpu_emmc2(adma: bool) {
    let host = HostSpec {
        adma: true,
        ..HostSpec::emmc2()
    };
    let card = sd_card_sim::CardSpec {
        uhs: true,
        ..sd_sim::sdhc()
    };
    let sim = Sim::new(host, card, sd_sim::Faults::default());
    let config = Config {
        max_bus_mode: BusMode::Ddr50,
        ..Config::new(host.base_clock_hz)
    };
    if adma {
        let mut sd =
            Sdhci::with_dma(sim.regs(), sim.clock(), config, sim.slot(), sim.dma()).unwrap();
        cpu_reads(&sim, &mut sd);
    } else {
        let mut sd = Sdhci::with_slot(sim.regs(), sim.clock(), config, sim.slot()).unwrap();
        cpu_reads(&sim, &mut sd);
    }
}

/// The Allwinner host in High Speed, by PIO or the IDMAC.
fn cpu_sunxi(dma: bool) {
    let host = sunxi_sim::HostSpec::hardware();
    let (card, faults, config) = (
        sunxi_sim::sdhc(),
        sunxi_sim::Faults::default(),
        drivers::sunxi_mmc::Config::new(),
    );
    if dma {
        let (sim, mut sd) = sunxi_sim::start_dma(host, card, faults, config);
        cpu_reads(&sim, &mut sd);
    } else {
        let (sim, mut sd) = sunxi_sim::start(host, card, faults, config);
        cpu_reads(&sim, &mut sd);
    }
}

/// The Pi 2 / 3 / Zero 2 W's Arasan in High Speed by PIO (its only data path).
fn cpu_arasan_pio() {
    let host = HostSpec {
        no_hispd_bit: true,
        caps_base_clock: false,
        ..HostSpec::v3(250_000_000)
    };
    let sim = Sim::new(host, sd_sim::sdhc(), sd_sim::Faults::default());
    let config = Config {
        max_bus_mode: BusMode::HighSpeed,
        high_speed_bit: false,
        ..Config::new(host.base_clock_hz)
    };
    let mut sd = Sdhci::with_slot(sim.regs(), sim.clock(), config, sim.slot()).unwrap();
    cpu_reads(&sim, &mut sd);
}

/// The sdhost in High Speed, by PIO or the system DMA engine.
fn cpu_sdhost(dma: bool) {
    let (card, faults) = (sdhost_sim::sdhc(), sdhost_sim::Faults::default());
    if dma {
        let (sim, mut sd) = sdhost_sim::start_dma(card, faults);
        cpu_reads(&sim, &mut sd);
    } else {
        let (sim, mut sd) = sdhost_sim::start_pio(card, faults);
        cpu_reads(&sim, &mut sd);
    }
}

#[test]
#[ignore = "a benchmark under callgrind: cargo xtask bench --only card"]
fn cpu_arasan_high_speed_pio() {
    cpu_arasan_pio()
}

#[test]
#[ignore = "a benchmark under callgrind: cargo xtask bench --only card"]
fn cpu_sdhost_pio() {
    cpu_sdhost(false)
}

#[test]
#[ignore = "a benchmark under callgrind: cargo xtask bench --only card"]
fn cpu_sdhost_dma() {
    cpu_sdhost(true)
}

#[test]
#[ignore = "a benchmark under callgrind: cargo xtask bench --only card"]
fn cpu_emmc2_pio() {
    cpu_emmc2(false)
}

#[test]
#[ignore = "a benchmark under callgrind: cargo xtask bench --only card"]
fn cpu_emmc2_adma2() {
    cpu_emmc2(true)
}

#[test]
#[ignore = "a benchmark under callgrind: cargo xtask bench --only card"]
fn cpu_sunxi_pio() {
    cpu_sunxi(false)
}

#[test]
#[ignore = "a benchmark under callgrind: cargo xtask bench --only card"]
fn cpu_sunxi_idma() {
    cpu_sunxi(true)
}
