//! The Raspberry Pi card slot: prepare it (pins on the Pi 3, 3.3 V select on the Pi 4, power from
//! the firmware), take each SD host controller's base clock from the VideoCore, and bring the card
//! up with the polled SDHCI driver on the first controller where a card answers. The other SDHCI
//! hosts ([`open_host`]: the CV18xx DesignWare MSHC, the SpacemiT K1's) and the Allwinner SD/MMC
//! host ([`open_sunxi`]) take their clock from the board file and need no slot preparation.
//!
//! Card detect is not consulted (Linux's sdhci-iproc.c marks it broken on the Arasan EMMC): each
//! controller in the board's list is initialised, and "no card" is a card that does not answer.
//! Only "no card" moves on to the next controller; a card that answers and then fails is the
//! error. On the Pi 4 the list is EMMC2 (the slot) then the legacy EMMC controller, which only
//! QEMU's raspi4b connects to the card (see boards/rpi4.toml).
//!
//! On the Pi 3, Zero 2 W and Pi 2 the board file's `[block] kind = "sdhost"` puts the slot on the
//! sdhost controller instead ([`open_sdhost`]): clocked from the VPU core clock the mailbox
//! reports, reading through a system DMA channel from the firmware's mask.

use crate::arch::{Arch, Cpu};
use crate::board::{self, SdhciHost};
use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicU64, Ordering};
use drivers::bcm2835::dma::{self, DmaChannel};
use drivers::bcm2835::gpio::{self, GpioKind, GPIO_BLOCK_SIZE};
use drivers::bcm2835::mailbox::{Mailbox, SD_POWER_DEVICE};
use drivers::dma::DmaMemory;
use drivers::fdt::DmaRange;
use drivers::mmio::Mmio;
use drivers::sd::BusMode;
use drivers::sdhci::{self, NoSlot, Sdhci, Slot, Variant, REGISTER_BLOCK_SIZE};
use drivers::sdhost::{self, Sdhost};
use drivers::sunxi_mmc::{self, SunxiMmc};

/// The Pi 4's firmware GPIO that selects 1.8 V signalling for the card slot (expander GPIO 4,
/// Linux's `sd_io_1v8_reg`): 0 = 3.3 V (Circle's emmc.cpp, RASPPI 4), 1 = 1.8 V.
const SD_VOLTAGE_SELECT_GPIO: u32 = 128 + 4;
/// The Pi 4's firmware GPIO that powers the card (expander GPIO 6, Linux's `sd_vcc_reg`).
const SD_POWER_GPIO: u32 = 128 + 6;
/// Time for the regulator to settle after the select (Circle waits 5 ms).
const SD_VOLTAGE_SETTLE_US: u32 = 5_000;

/// The ARM generic timer as the driver's clock.
pub struct TimerClock;

impl drivers::sdhci::Clock for TimerClock {
    fn now_us(&mut self) -> u64 {
        super::time::micros()
    }
    fn delay_us(&mut self, us: u32) {
        super::time::wait_us(us)
    }
}

pub type Card = Sdhci<Mmio, TimerClock, PiSlot, PiDma>;

/// The Pi 4's EMMC2 DMA window as the device tree gives it (`emmc2bus`'s `dma-ranges`): bus
/// base, physical base, size; the BCM2711 B0 stepping's (bus 0xc0000000 for the first GiB,
/// bcm2711.dtsi) until a tree says otherwise.
static EMMC2_DMA: [AtomicU64; 3] = [
    AtomicU64::new(0xc000_0000),
    AtomicU64::new(0),
    AtomicU64::new(0x4000_0000),
];

/// Take the device tree's EMMC2 DMA window (the firmware edits it for the C0 stepping).
pub fn set_emmc2_dma(w: DmaRange) {
    for (a, v) in EMMC2_DMA.iter().zip([w.bus, w.phys, w.size]) {
        a.store(v, Ordering::Relaxed);
    }
}

/// RAM as the EMMC2's ADMA2 engine sees it: bus addresses through the `emmc2bus` window (memory
/// outside it: no DMA, the driver reads by PIO or through its bounce buffer), and a data cache
/// not coherent with the controller (clean by address before it reads, invalidate before and
/// after it writes).
#[derive(Debug)]
pub struct PiDma;

impl DmaMemory for PiDma {
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        let [bus, phys, size] = EMMC2_DMA.each_ref().map(|a| a.load(Ordering::Relaxed));
        let w = DmaRange { bus, phys, size };
        u32::try_from(w.bus_address(addr as u64, len as u64)?).ok()
    }

    fn to_device(&mut self, addr: usize, len: usize) {
        Cpu::dcache_clean(addr, len);
    }

    unsafe fn from_device(&mut self, addr: usize, len: usize) {
        // SAFETY: the driver's promise (DmaMemory::from_device): whole cache lines of memory
        // the transfer owns, which nothing references.
        unsafe { Cpu::dcache_invalidate(addr, len) }
    }
}

/// The Pi's card slot as the SDHCI driver's [`Slot`]: on the Pi 4 the I/O rail's 1.8 V select
/// and the card's power are lines of the firmware's GPIO expander (set through the mailbox). The
/// driver asks for them only on a controller configured for UHS-I (EMMC2).
pub struct PiSlot(Mailbox);

impl Slot for PiSlot {
    fn set_signal_1v8(&mut self, on: bool) -> bool {
        self.0
            .set_firmware_gpio(SD_VOLTAGE_SELECT_GPIO, on as u32)
            .is_ok()
    }

    /// The firmware's power tag for the SD card (as Circle powers it) and the expander's card
    /// power line (as Linux's `sd_vcc_reg` switches it), off, then on.
    fn power_cycle(&mut self, off_us: u32) {
        // A firmware that refuses leaves the power as it was; the identification that follows
        // says whether the card answers.
        let _ = self.0.power_off(SD_POWER_DEVICE);
        let _ = self.0.set_firmware_gpio(SD_POWER_GPIO, 0);
        super::time::wait_us(off_us);
        let _ = self.0.set_firmware_gpio(SD_POWER_GPIO, 1);
        let _ = self.0.power_on(SD_POWER_DEVICE);
        super::time::wait_us(SD_VOLTAGE_SETTLE_US);
    }
}
/// The sdhost controller's card, read through the system DMA engine.
pub type SdhostCard = Sdhost<Mmio, TimerClock, VcDma>;

/// The VPU core clock assumed when the mailbox gives none: the Pi 3 / Zero 2 W default
/// (`core_freq` 400 MHz). Assuming more than the real clock only slows the card.
const DEFAULT_CORE_CLOCK_HZ: u32 = 400_000_000;

/// The BCM2836/7's RAM as the system DMA engine sees it: bus address = ARM physical |
/// 0xC000_0000 (the uncached alias, as Linux's `dma-ranges` for the Pi 2/3 map it), for RAM below
/// the peripherals (0x3F00_0000); the data cache is not coherent with the engine (clean before it
/// reads, invalidate before and after it writes).
#[derive(Debug)]
pub struct VcDma;

/// The top of the RAM the engine reaches through the alias.
const VC_RAM_END: usize = 0x3F00_0000;
/// The alias of RAM for the DMA engine on the BCM2836/7.
const VC_BUS_ALIAS: u32 = 0xC000_0000;

impl DmaMemory for VcDma {
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        let end = addr.checked_add(len)?;
        (end <= VC_RAM_END).then_some(addr as u32 | VC_BUS_ALIAS)
    }

    fn to_device(&mut self, addr: usize, len: usize) {
        Cpu::dcache_clean(addr, len);
    }

    unsafe fn from_device(&mut self, addr: usize, len: usize) {
        // SAFETY: the driver's promise (DmaMemory::from_device): whole cache lines of memory the
        // transfer owns, which nothing references.
        unsafe { Cpu::dcache_invalidate(addr, len) }
    }
}

/// Bring up the sdhost controller at the board's base: the slot's pins to it (GPIO 48-53 ALT0)
/// and the card's power, its clock from the VPU core clock the mailbox reports, reads through a
/// DMA channel from the firmware's mask when the board gives the DMA controller (`[block] dma`).
pub fn open_sdhost() -> Result<SdhostCard, String> {
    let base = board::BLOCK_BASES[0];
    let mut mb =
        super::mailbox::open().ok_or("sdhost needs the firmware's mailbox (mailbox_base)")?;
    if let Some(gpio) = board::GPIO_BASE {
        // SAFETY: the board's GPIO block, device-mapped; nothing else touches it during bring-up.
        let regs = unsafe { Mmio::new(gpio, GPIO_BLOCK_SIZE) };
        gpio::sd_on_sdhost(
            &mut regs.with_barrier(Cpu::io_barrier),
            super::time::wait_us,
        );
    }
    if let Err(e) = mb.power_on(SD_POWER_DEVICE) {
        crate::println!("warning: card: power on: {e}; going on");
    }
    let (core_hz, source) = mb.core_clock(DEFAULT_CORE_CLOCK_HZ);
    let (channel, why) = match board::BLOCK_DMA {
        Some(dma_base) => {
            let (n, why) = dma::pick_channel(mb.dma_channels().ok());
            // SAFETY: the board's system DMA controller, device-mapped; this driver uses only
            // channel `n`, which the firmware left to the ARM (or the fixed fallback).
            let regs =
                unsafe { Mmio::new(dma_base, dma::DMA_BLOCK_SIZE) }.with_barrier(Cpu::io_barrier);
            (Some(DmaChannel::new(regs, n)), Some(why))
        }
        None => (None, None),
    };
    // SAFETY: the board's sdhost controller, device-mapped, used only by this driver.
    let regs =
        unsafe { Mmio::new(base, sdhost::REGISTER_BLOCK_SIZE) }.with_barrier(Cpu::io_barrier);
    let config = sdhost::Config::new(core_hz);
    let card = Sdhost::with_dma(regs, TimerClock, config, channel, VcDma)
        .map_err(|e| format!("sdhost at {base:#x}: {e}"))?;
    let mode = match card.dma_channel() {
        Some(n) => format!("DMA (channel {n}), reads queued"),
        None => "PIO".into(),
    };
    print_info(
        card.info(),
        "sdhost",
        base,
        format_args!("core clock, {source}"),
        &mode,
    );
    if let Some((core, div)) = card.high_speed_note() {
        crate::println!(
            "card: High Speed below 50 MHz: the best the {} core clock gives (core / (SDCDIV {div} + 2))",
            Mhz(core)
        );
    }
    let fixed = !matches!(why, None | Some(dma::ChannelSource::Firmware { .. }));
    if let (Some(why), Some(n), true) = (why, card.dma_channel(), fixed) {
        crate::println!("card: DMA channel {n} {why}");
    }
    Ok(card)
}

/// The Allwinner SD/MMC host's card, read through its IDMAC.
pub type SunxiCard = SunxiMmc<Mmio, TimerClock, CpuDma>;

/// The card behind a non-Pi SDHCI host: a 3.3 V slot, ADMA2 on physical addresses.
pub type HostCard = Sdhci<Mmio, TimerClock, NoSlot, CpuDma>;

/// RAM as a DMA engine that uses physical addresses sees it (the Allwinner SD/MMC host's IDMAC,
/// the CV18xx and K1 SDHCI hosts' ADMA2): bus addresses are physical ones, which the identity
/// map (or, on RISC-V, no paging) makes the CPU's, up to the engine's reach (`limit`: 4 GiB for
/// 32-bit addresses, less where the bus has a smaller window); the data cache is not coherent
/// with the controller (none of these SoCs is: `dma-noncoherent` in `cv18xx.dtsi`'s boards and
/// `k1.dtsi`), so the driver's descriptors are cleaned, and the destination of each read (its
/// bounce buffer, or the caller's cache-aligned buffer the engine fills directly: a page of the
/// page cache) is invalidated by address before and after the transfer.
#[derive(Debug)]
pub struct CpuDma {
    /// The first physical address the engine cannot reach.
    pub limit: u64,
}

impl CpuDma {
    /// An engine with 32-bit addresses.
    pub const BELOW_4G: CpuDma = CpuDma { limit: 1 << 32 };
}

impl sunxi_mmc::DmaMemory for CpuDma {
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32> {
        let last = addr.checked_add(len.max(1) - 1)?;
        if last as u64 >= self.limit.min(1 << 32) {
            return None;
        }
        u32::try_from(addr).ok()
    }

    fn to_device(&mut self, addr: usize, len: usize) {
        Cpu::dcache_clean(addr, len);
    }

    unsafe fn from_device(&mut self, addr: usize, len: usize) {
        // SAFETY: the driver's promise (DmaMemory::from_device): whole cache lines of its own DMA
        // area or of a read's destination it holds exclusively, which nothing reads or writes
        // meanwhile; discarding their lines loses no one's data.
        unsafe { Cpu::dcache_invalidate(addr, len) }
    }
}

/// The VideoCore clock id of the BCM2835 Arasan "EMMC" controller.
const EMMC_CLOCK_ID: u32 = 1;

/// The controller's name by its VideoCore clock id.
fn controller_name(clock_id: u32) -> &'static str {
    match clock_id {
        EMMC_CLOCK_ID => "EMMC",
        12 => "EMMC2",
        _ => "SDHCI",
    }
}

/// The driver's settings for the controller with VideoCore clock id `clock_id` and base clock
/// `rate`: up to the slot's best mode ([`best_mode`]: UHS-I DDR50 on EMMC2, as Linux runs it;
/// High Speed on the Arasan "EMMC", without the high-speed enable bit it lacks, Linux's
/// `SDHCI_QUIRK_NO_HISPD_BIT`).
fn config(clock_id: u32, rate: u32) -> sdhci::Config {
    sdhci::Config {
        high_speed_bit: clock_id != EMMC_CLOCK_ID,
        max_bus_mode: best_mode(clock_id),
        ..sdhci::Config::new(rate)
    }
}

/// Route, select the voltage of and power the card slot. A firmware that refuses a step gets a
/// warning: the card may still come up (QEMU implements neither the GPIO nor the measured clock).
fn prepare_slot(mb: &mut Mailbox) {
    match board::GPIO_KIND {
        GpioKind::Bcm2835 => {
            let Some(base) = board::GPIO_BASE else { return };
            // SAFETY: the board's GPIO block, device-mapped; nothing else touches it during
            // bring-up.
            let regs = unsafe { Mmio::new(base, GPIO_BLOCK_SIZE) };
            gpio::sd_on_emmc(
                &mut regs.with_barrier(Cpu::io_barrier),
                super::time::wait_us,
            );
        }
        GpioKind::Bcm2711 => {
            if let Err(e) = mb.set_firmware_gpio(SD_VOLTAGE_SELECT_GPIO, 0) {
                crate::println!("warning: card: 3.3 V select (firmware GPIO 132): {e}; going on");
            }
            super::time::wait_us(SD_VOLTAGE_SETTLE_US);
        }
    }
    if let Err(e) = mb.power_on(SD_POWER_DEVICE) {
        crate::println!("warning: card: power on: {e}; going on");
    }
}

/// The fastest mode the controller with VideoCore clock id `clock_id` could run: UHS-I DDR50 on
/// the Pi 4's EMMC2 (Linux runs it there), High Speed on the Arasan "EMMC" (3.3 V only).
fn best_mode(clock_id: u32) -> BusMode {
    match clock_id {
        EMMC_CLOCK_ID => BusMode::HighSpeed,
        _ => BusMode::Ddr50,
    }
}

/// Bring up the first controller where a card answers; the card and the fastest mode its slot
/// could run.
pub fn open() -> Result<(Card, BusMode), String> {
    let mailbox = || {
        super::mailbox::open()
            .ok_or("the SD host's clock needs the firmware's mailbox (mailbox_base)")
    };
    let mb = &mut mailbox()?;
    prepare_slot(mb);
    let mut empty = String::new();
    for (&base, &id) in board::BLOCK_BASES.iter().zip(board::BLOCK_CLOCK_IDS) {
        let name = controller_name(id);
        let (rate, source) = mb.sd_base_clock(id);
        // SAFETY: `base` is an SD host controller of this board, device-mapped, used only here.
        let regs = unsafe { Mmio::new(base, REGISTER_BLOCK_SIZE) }.with_barrier(Cpu::io_barrier);
        let slot = PiSlot(mailbox()?);
        match Sdhci::with_dma(regs, TimerClock, config(id, rate), slot, PiDma) {
            Ok(card) => {
                print_card(&card, name, base, source);
                return Ok((card, best_mode(id)));
            }
            Err(e) if e.is_no_card() => {
                crate::println!("card: {name} at {base:#x}: {e}");
                empty.push_str(&format!(" {name} at {base:#x};"));
            }
            Err(e) => return Err(format!("{name} at {base:#x}: {e}")),
        }
    }
    Err(format!("no SD card answered on:{empty}"))
}

/// Bring up the Allwinner SD/MMC host at the board's base (the card slot), clocked from the 24 MHz
/// oscillator through the board's clock controller; reads through its IDMAC, queued (the card
/// line says "IDMA", or "PIO" if the driver could not use it), writes through its FIFO.
pub fn open_sunxi() -> Result<SunxiCard, String> {
    let base = board::BLOCK_BASES[0];
    let ccu = board::BLOCK_CCU.ok_or("the SD host needs its clock controller (block.ccu)")?;
    // SAFETY: the board's SD/MMC host and clock controller, device-mapped, used only by this
    // driver.
    let (regs, ccu) = unsafe {
        (
            Mmio::new(base, sunxi_mmc::REGISTER_BLOCK_SIZE).with_barrier(Cpu::io_barrier),
            Mmio::new(ccu, sunxi_mmc::CCU_BLOCK_SIZE).with_barrier(Cpu::io_barrier),
        )
    };
    let card = SunxiMmc::init_dma(regs, Some(ccu), TimerClock, CpuDma::BELOW_4G)
        .map_err(|e| format!("SD/MMC at {base:#x}: {e}"))?;
    let mode = if card.dma_active() { "IDMA" } else { "PIO" };
    print_info(card.info(), "SD/MMC", base, "its clock controller", mode);
    Ok(card)
}

/// The driver's variant for a board's non-Pi host, and the reach of its DMA: 4 GiB (32-bit
/// ADMA2) on the CV18xx; 2 GiB on the K1, whose SD host sits on `k1.dtsi`'s `storage-bus` with
/// `dma-ranges` mapping bus 0..0x8000_0000 to the same physical addresses.
fn host_variant(host: SdhciHost) -> (Variant, CpuDma) {
    match host {
        SdhciHost::DwcmshcCv18xx => (Variant::DwcmshcCv18xx, CpuDma::BELOW_4G),
        SdhciHost::SpacemitK1 => (Variant::SpacemitK1, CpuDma { limit: 0x8000_0000 }),
    }
}

/// Bring up the board's non-Pi SDHCI host (`[block] host`) at its base, clocked at the board
/// file's `base_clock_hz`, in a 3.3 V slot (High Speed at most: the Duo boards' trees say
/// `no-1-8-v`, and a K1 board switches its slot's I/O rail through a PMIC this kernel does not
/// drive); reads by ADMA2, queued (the card line says "ADMA2, reads queued", or "PIO" if
/// the driver could not use it).
pub fn open_host(host: SdhciHost) -> Result<HostCard, String> {
    let base = board::BLOCK_BASES[0];
    let (variant, dma) = host_variant(host);
    let config = sdhci::Config {
        variant,
        max_bus_mode: BusMode::HighSpeed,
        // The BCM2835 Arasan's lost-write workaround: not these hosts' (Linux has it for none).
        arasan_write_delay: false,
        ..sdhci::Config::new(board::BLOCK_BASE_CLOCK_HZ)
    };
    // SAFETY: the board's SD host controller, device-mapped, used only by this driver.
    let regs =
        unsafe { Mmio::new(base, variant.register_block_size()) }.with_barrier(Cpu::io_barrier);
    let card = Sdhci::with_dma(regs, TimerClock, config, NoSlot, dma)
        .map_err(|e| format!("{} at {base:#x}: {e}", variant.name()))?;
    print_card(&card, variant.name(), base, "board file");
    Ok(card)
}

/// The card lines: controller, capacity, clocks, bus mode and width and how data moves (PIO: the
/// polled data port; ADMA2: the controller's DMA engine, reads queued), then the CID and CSD.
fn print_card<S: Slot, D: DmaMemory>(
    card: &Sdhci<Mmio, TimerClock, S, D>,
    name: &str,
    base: usize,
    source: impl core::fmt::Display,
) {
    let mode = if card.dma_active() {
        "ADMA2, reads queued"
    } else {
        "PIO"
    };
    print_info(card.info(), name, base, source, mode);
}

/// `hz` as MHz with one decimal when it has one ("50 MHz", "41.6 MHz").
struct Mhz(u32);

impl core::fmt::Display for Mhz {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (whole, tenth) = (self.0 / 1_000_000, self.0 % 1_000_000 / 100_000);
        if tenth == 0 {
            write!(f, "{whole} MHz")
        } else {
            write!(f, "{whole}.{tenth} MHz")
        }
    }
}

fn print_info(
    i: &drivers::sdhci::CardInfo,
    name: &str,
    base: usize,
    source: impl core::fmt::Display,
    mode: &str,
) {
    crate::println!(
        "card: SD at {base:#x} ({name}), {} MiB, {}, base clock {} ({source}); {}, {}, {}-bit, {mode}",
        (i.blocks * 512) >> 20,
        if i.high_capacity { "SDHC/SDXC (block addressed)" } else { "SDSC (byte addressed)" },
        Mhz(i.base_clock_hz),
        i.bus_mode,
        Mhz(i.data_clock_hz),
        i.bus_width
    );
    if let Some(why) = i.speed_note {
        crate::println!("card: {} only: {why}", i.bus_mode);
    }
    match i.csd() {
        Ok(csd) => crate::println!("card: {}; {csd}", i.cid()),
        Err(e) => crate::println!("card: {}; CSD: {e}", i.cid()),
    }
}
