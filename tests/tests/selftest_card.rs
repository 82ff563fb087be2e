//! The self-test's card check (`runtime::run::card_check`) over the SD host drivers on their
//! register-level simulators, timed by the simulators' virtual clocks: on each host with DMA
//! (sdhost with the BCM2835 DMA engine, SDHCI with ADMA2, Allwinner with the IDMAC) the same
//! blocks read by DMA and by PIO agree, both rates are reported and the driver is back on DMA;
//! with a board memory that forgets the invalidate after the engine wrote (`dma_mem::Forget`:
//! the CPU sees the bytes its cache held), the check names the first byte that differs, fails,
//! and leaves the driver on PIO, whose reads are the card's. A host on PIO alone, one that gave
//! DMA up after DMA errors, and one whose bus gives CRC errors (and steps down) are reported as
//! such.

mod dma_mem;
mod sd_card_sim;
mod sd_sim;
mod sdhost_sim;
mod sunxi_sim;

use dma_mem::{Buf, Forget};
use drivers::block::{BlockDevice, Transfer};
use drivers::fat::Extent;
use runtime::run::{card_check, CardCheck};
use std::cell::RefCell;

/// The blocks the check reads: 1 MiB in two runs, as a file in two extents.
const RUNS: [Extent; 2] = [
    Extent {
        lba: 1000,
        blocks: 1024,
    },
    Extent {
        lba: 5000,
        blocks: 1024,
    },
];

thread_local! {
    /// The virtual clock of this test's simulator, in nanoseconds.
    static NOW: RefCell<Option<Box<dyn Fn() -> u64>>> = const { RefCell::new(None) };
}

fn now_ns() -> u64 {
    NOW.with(|n| n.borrow().as_ref().map_or(0, |f| f()))
}

/// What the tests need of a simulator's handle, whichever host it simulates.
trait Sim: Clone + 'static {
    fn now(&self) -> u64;
    fn card(&self, lba: u64, n: u64) -> Vec<u8>;
    fn broken(&self) -> Vec<String>;
}

macro_rules! sims {
    ($($m:ident),*) => {$(
        impl Sim for $m::Sim {
            fn now(&self) -> u64 {
                self.now_ns()
            }
            fn card(&self, lba: u64, n: u64) -> Vec<u8> {
                self.expected(lba, n)
            }
            fn broken(&self) -> Vec<String> {
                self.violations()
            }
        }
    )*};
}
sims!(sd_sim, sdhost_sim, sunxi_sim);

/// Run the check over `dev` on `sim`'s virtual clock.
fn check<D: BlockDevice>(sim: &impl Sim, dev: &mut D) -> CardCheck {
    let s = sim.clone();
    NOW.with(|n| *n.borrow_mut() = Some(Box::new(move || s.now())));
    card_check(dev, &RUNS, now_ns).unwrap()
}

fn field<'c>(c: &'c CardCheck, k: &str) -> Option<&'c str> {
    c.fields.iter().find(|f| f.0 == k).map(|f| f.1.as_str())
}

/// On a host with DMA, `good` over memory with its cache maintenance and `bad` over one that
/// forgets the invalidate: the first passes the check with both rates, the bus `bus`, no CRC
/// error, and stays on DMA; the second fails it at its first byte (the buffer's fill: the CPU
/// never saw the engine's bytes) and is left on PIO, whose reads are the card's.
fn dma_host<S: Sim, A: BlockDevice, B: BlockDevice>(good: (S, A), bad: (S, B), bus: &str) {
    let (sim, mut dev) = good;
    let c = check(&sim, &mut dev);
    let line = c.line();
    assert_eq!(c.verdict, "ok", "{line}");
    assert!(
        line.starts_with("selftest: card ok: 1024 KiB read by DMA at ")
            && line.contains(" MB/s, the same bytes; the run reads by DMA; bus "),
        "{line}"
    );
    let rate = |k| field(&c, k).and_then(|v| v.parse::<f64>().ok()).unwrap();
    assert!(rate("dma") > 0.0 && rate("pio") > 0.0, "{:?}", c.fields);
    let counts = (field(&c, "bus"), field(&c, "crc"), field(&c, "retries"));
    assert_eq!(counts, (Some(bus), Some("0"), Some("0")));
    assert_eq!(dev.transfer(), Some(Transfer::Dma));
    assert_eq!(sim.broken(), Vec::<String>::new());

    let (sim, mut dev) = bad;
    let c = check(&sim, &mut dev);
    let line = c.line();
    assert_eq!(c.verdict, "fail", "{line}");
    let named = ", and they differ: first at byte 0 (block 0, card LBA 1000), DMA read 0xa5 where PIO read ";
    assert!(
        line.starts_with("selftest: card FAILED: 1024 KiB read by DMA at ")
            && line.contains(named)
            && line.contains("; the run reads by PIO; bus "),
        "{line}"
    );
    assert!(field(&c, "dma").is_some() && field(&c, "pio").is_some());
    assert_eq!(dev.transfer(), Some(Transfer::Pio));
    assert_eq!(dev.queue_depth(), 0, "reads on PIO are not queued");
    let mut b = Buf::new(64 * 512, 0);
    dev.read_blocks(5010, b.slice()).unwrap();
    assert!(
        b.bytes() == sim.card(5010, 64),
        "PIO reads the card's bytes"
    );
}

#[test]
fn sdhost_dma_and_pio_agree_and_a_missing_invalidate_leaves_pio() {
    use sdhost_sim::*;
    let forget = |s: &Sim| Forget(s.dma(), false, true);
    let (sim, bad) = try_start_dma(sdhc(), Faults::default(), config(), forget);
    dma_host(
        start_dma(sdhc(), Faults::default()),
        (sim, bad.unwrap()),
        "HS50x4",
    );
}

#[test]
fn sdhci_adma2_and_pio_agree_and_a_missing_invalidate_leaves_pio() {
    use drivers::sdhci::{Config, NoSlot, Sdhci};
    use sd_sim::*;
    fn adma<D: drivers::dma::DmaMemory>(
        dma: impl FnOnce(&Sim) -> D,
    ) -> (Sim, Sdhci<SimRegs, SimClock, NoSlot, D>) {
        let host = HostSpec {
            adma: true,
            ..HostSpec::v3(100_000_000)
        };
        let sim = Sim::new(host, sdhc(), Faults::default());
        let mem = dma(&sim);
        let sd = Sdhci::with_dma(
            sim.regs(),
            sim.clock(),
            Config::new(100_000_000),
            NoSlot,
            mem,
        );
        (sim, sd.unwrap())
    }
    let bad = adma(|s| Forget(s.dma(), false, true));
    dma_host(adma(Sim::dma), bad, "HS50x4");
}

#[test]
fn sunxi_idmac_and_pio_agree_and_a_missing_invalidate_leaves_pio() {
    use drivers::sunxi_mmc::Config;
    use sunxi_sim::*;
    let hw = HostSpec::hardware;
    let forget = |s: &Sim| Forget(s.dma(), false, true);
    let bad = start_with(hw(), sdhc(), Faults::default(), Config::new(), forget);
    let good = start_dma(hw(), sdhc(), Faults::default(), Config::new());
    dma_host(good, bad, "HS50x4");
}

#[test]
fn pio_alone_dma_given_up_and_crc_errors_are_reported() {
    use sdhost_sim::*;
    let (sim, mut sd) = start_pio(sdhc(), Faults::default());
    let c = check(&sim, &mut sd);
    let line = c.line();
    let pio_alone = " MB/s (no DMA on this host: nothing to compare); bus HS50x4 ";
    assert!(c.verdict == "ok" && line.contains(pio_alone), "{line}");
    assert!(field(&c, "pio").is_some() && field(&c, "dma").is_none());

    // Every DMA transfer fails: after two, the driver reads by PIO for good.
    let faults = Faults {
        dma_error_always: true,
        ..Faults::default()
    };
    let (sim, mut sd) = start_dma(sdhc(), faults);
    let mut b = Buf::new(8 * 512, 0);
    sd.read_blocks(0, b.slice()).unwrap();
    assert!(!sd.dma_active());
    let c = check(&sim, &mut sd);
    assert_eq!(c.verdict, "ok", "{}", c.line());
    assert!(
        c.text
            .contains("(DMA given up after errors: nothing to compare)")
            && c.text.ends_with(", 2 DMA error(s)"),
        "{}",
        c.text
    );

    // CRC errors on two blocks: the second lands on the retry of the first one's request, and
    // two in a row step the bus down to Default Speed: counted, and the bus says so.
    let faults = Faults {
        data_crc_at: vec![3000, 3500],
        ..Faults::default()
    };
    let (sim, mut sd) = start_dma(sdhc(), faults);
    let c = check(&sim, &mut sd);
    assert_eq!(c.verdict, "ok", "{}", c.line());
    assert_eq!(
        (field(&c, "bus"), field(&c, "crc"), field(&c, "retries")),
        (Some("DS25x4"), Some("2"), Some("1")),
        "{}",
        c.line()
    );
    assert!(
        c.text.ends_with(
            "; bus DS25x4 (Default Speed, 25000 kHz, 4 bits); 2 CRC errors, 1 retry, 1 mode(s) stepped down"
        ),
        "{}",
        c.text
    );
}
