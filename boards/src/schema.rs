//! The board description schema (with `std`): `boards/<name>.toml` as types, read by
//! `kernel/build.rs` (the kernel's constants and linker script) and by `xtask` (QEMU arguments,
//! card contents).
//!
//! Every table refuses keys it does not know and every required key must be there, so a misspelt
//! or missing key is an error naming the file, the key and its line, never a silent zero. Rules
//! across keys (the block device's addresses, each architecture's firmware methods, the memory
//! map's order) are checked by [`Board::check`]. `boards/README.md` documents every key.

use serde::Deserialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::kinds::*;

/// One board.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Board {
    /// The board's name, the same as the file's.
    pub name: String,
    /// The CPU architecture (must match the target).
    pub arch: Arch,
    /// The Rust target the kernel is built for.
    pub target: String,
    /// Where the image is loaded and linked.
    pub load_address: u64,
    /// Start of RAM (and where QEMU may put the device tree).
    pub ram_base: u64,
    /// RAM assumed when neither the device tree nor the firmware says.
    pub ram_size_fallback: u64,
    /// Where the RAM size comes from.
    pub ram_from: RamFrom,
    /// Cores to start.
    pub max_cores: u32,
    /// How the other cores start (a method of `arch`).
    pub core_start: CoreStart,
    /// How the board powers off with a status (a method of `arch`).
    pub exit: Exit,
    /// QEMU's "sifive,test" finisher (QEMU builds report their status through it).
    pub test_finisher: Option<u64>,
    /// The VideoCore mailbox (Raspberry Pi).
    pub mailbox_base: Option<u64>,
    /// The SoC's free-running 1 MHz system timer (the Pi's, counter low word at +0x04): a clock
    /// apart from the CPU's, which the self-test measures the counter against.
    pub systimer_base: Option<u64>,
    /// The GPIO block, to route the UART (and on the Pi 3 the SD) pins.
    pub gpio_base: Option<u64>,
    pub gpio_kind: Option<GpioKind>,
    /// The mailbox clock id of the SD host when `block.clock_ids` is not given.
    pub sd_clock_id: Option<u32>,
    /// riscv64: how the data cache is kept coherent with DMA (default: coherent).
    #[serde(default)]
    pub cache_maintenance: CacheMaintenance,
    /// riscv64: which vector unit the harts have (default: as the device tree says).
    #[serde(default)]
    pub vector: Vector,
    pub uart: Uart,
    /// The ring link's UART, apart from the console (optional).
    pub ring_uart: Option<RingUart>,
    /// The interrupt controller, for the ring link's receive interrupt (optional).
    pub irq: Option<Irq>,
    pub block: Block,
    pub memory: Vec<Region>,
    /// How QEMU runs the board; a board QEMU has no machine for names its stand-in instead.
    pub qemu: Option<Qemu>,
    /// The QEMU board that stands in for this one (for a board QEMU cannot run).
    pub qemu_stand_in: Option<String>,
    pub card: Option<Card>,
}

/// The serial console.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uart {
    pub kind: UartKind,
    pub base: u64,
    /// The reference clock the baud-rate divisor comes from (`ns16550`: 0 keeps the boot
    /// loader's divisor).
    pub clock_hz: u32,
    /// Bytes between registers (`ns16550`): 1 (byte registers), or 4 (32-bit registers read and
    /// written as words, as the DesignWare APB UART of Allwinner SoCs needs).
    #[serde(default = "one")]
    pub stride: u32,
    /// `ns16550`: which 16550 (default `plain`).
    #[serde(default)]
    pub variant: UartVariant,
}

fn one() -> u32 {
    1
}

/// The ring link's UART: board k's TX goes to board k+1's RX.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingUart {
    pub kind: LinkKind,
    pub base: u64,
    /// The clock the baud-rate divisor comes from (`mini`: the VPU core clock, used when the
    /// mailbox does not give it).
    pub clock_hz: u32,
    /// How it reaches its pins.
    pub pins: LinkPins,
    /// The board's flow control unless the kernel is told otherwise.
    pub flow: Flow,
    /// Its interrupt's id at the board's `[irq]` controller: the link is received by interrupt
    /// (absent: polled between computations).
    pub irq: Option<u32>,
}

/// The interrupt controller.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Irq {
    pub kind: IrqKind,
    /// `gicv2`: the distributor.
    pub dist_base: Option<u64>,
    /// `gicv2`: the CPU interface.
    pub cpu_base: Option<u64>,
    /// `bcm2836`: the ARMCTRL block's IRQ basic pending register.
    pub armctrl_base: Option<u64>,
    /// `bcm2836`: the BCM2836 local interrupt controller.
    pub local_base: Option<u64>,
}

impl Irq {
    /// The two register blocks the kind needs, or an error naming the keys.
    fn blocks(&self) -> Result<(u64, u64), String> {
        let (a, b, names, others) = match self.kind {
            IrqKind::Gicv2 => (
                self.dist_base,
                self.cpu_base,
                "dist_base and cpu_base",
                [self.armctrl_base, self.local_base],
            ),
            IrqKind::Bcm2836 => (
                self.armctrl_base,
                self.local_base,
                "armctrl_base and local_base",
                [self.dist_base, self.cpu_base],
            ),
        };
        let kind = kebab(&format!("{:?}", self.kind));
        match (a, b) {
            (Some(a), Some(b)) if a != 0 && b != 0 && a != b && others == [None, None] => {
                Ok((a, b))
            }
            _ => Err(format!(
                "[irq] kind = \"{kind}\" needs {names} (two different blocks, neither 0) and no other base"
            )),
        }
    }

    /// As the kernel's `IRQ_CONTROLLER` names it.
    fn constant(&self) -> String {
        match (self.kind, self.blocks()) {
            (IrqKind::Gicv2, Ok((d, c))) => {
                format!("Some(boards::IrqController::GicV2 {{ dist: {d:#x}, cpu: {c:#x} }})")
            }
            (IrqKind::Bcm2836, Ok((a, l))) => {
                format!("Some(boards::IrqController::Bcm2836 {{ armctrl: {a:#x}, local: {l:#x} }})")
            }
            (_, Err(_)) => "None".into(),
        }
    }
}

/// The card's block device.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    pub kind: BlockKind,
    /// One controller or the first virtio-mmio slot.
    pub base: Option<u64>,
    /// SD host controllers to try in order.
    pub bases: Option<Vec<u64>>,
    /// Mailbox clock ids, one per entry of `bases`.
    pub clock_ids: Option<Vec<u32>>,
    /// Bytes between virtio-mmio slots.
    pub stride: Option<u64>,
    /// Virtio-mmio slots.
    pub count: Option<u32>,
    /// `sunxi-mmc`: the clock controller (CCU) that gates, resets and clocks the host.
    pub ccu: Option<u64>,
    /// `sdhci`: a host other than the Raspberry Pi's (its quirks), clocked as the board says.
    pub host: Option<SdhciHost>,
    /// `sdhci` with `host`: the controller's base clock in Hz (its capabilities register is not
    /// trusted for it).
    pub base_clock_hz: Option<u32>,
    /// `sdhost`: the BCM2835 system DMA controller's registers (ARM address); reads go through
    /// one of its channels. Absent: reads by PIO.
    pub dma: Option<u64>,
}

/// How QEMU runs the board.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Qemu {
    /// The system emulator.
    pub binary: String,
    /// Machine, CPU and options.
    pub args: Vec<String>,
    /// `-m` (empty: the machine's fixed size).
    pub memory: String,
    /// `-smp`, for machines that take it.
    pub smp: Option<u32>,
    /// Arguments attaching the card; `{image}` stands for the image's path.
    pub drive: Vec<String>,
    #[serde(default)]
    pub kernel: KernelFormat,
}

/// What the card needs besides `lmboot.txt` and the model (Raspberry Pi firmware).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Card {
    /// Where the firmware files are installed (Raspberry Pi: Debian's raspi-firmware).
    pub firmware_dir: Option<PathBuf>,
    #[serde(default)]
    pub firmware: Vec<String>,
    /// Device trees for the FAT root, from xtask's cache (fetched and checked by `cargo xtask
    /// setup`): the firmware passes the one matching the board to the kernel.
    #[serde(default)]
    pub dtbs: Vec<String>,
    /// The Raspberry Pi firmware's config.txt.
    pub config_txt: Option<String>,
    /// The kernel image's name on the card (the flat image of `kernel = "raw"` or `"u-boot"`).
    #[serde(default = "kernel8")]
    pub kernel: String,
    /// U-Boot for the board, written at 8 KiB into the card (the Allwinner boot ROM loads its SPL
    /// from there): the board's directory in Debian's u-boot-sunxi (armhf) package, fetched and
    /// checked by `cargo xtask setup` (xtask's `uboot.rs` pins it).
    pub u_boot: Option<String>,
    /// The U-Boot script (`boot.scr` on the card, wrapped in U-Boot's script image header) that
    /// loads and starts the kernel.
    pub boot_script: Option<String>,
    /// The kernel goes on the card as a U-Boot FIT image (named `kernel`) that the board's own
    /// U-Boot starts with `bootm`, with a device tree made from this table.
    pub fit: Option<Fit>,
}

/// A FIT image for a vendor U-Boot's `bootm`: its configurations and the device tree it hands the
/// kernel.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fit {
    /// The configuration names the board's U-Boot may ask for (`bootm ADDR#config-NAME`); the
    /// first is the default.
    pub configs: Vec<String>,
    /// The device tree's `model` and `compatible`.
    pub model: String,
    pub compatible: Vec<String>,
    /// RAM blocks as `[start, size]` pairs: the memory nodes (U-Boot may fix them up).
    pub ram: Vec<[u64; 2]>,
    /// `/cpus/timebase-frequency`: the `time` CSR's rate.
    pub timebase_hz: u32,
    /// Harts to list (the kernel starts at most `max_cores`).
    pub harts: u32,
    /// Each hart's `riscv,isa`.
    pub isa: String,
    /// `riscv,cbom-block-size`, for harts with Zicbom.
    pub cbom_block: Option<u32>,
}

fn kernel8() -> String {
    "kernel8.img".into()
}

/// Read and check `path`.
pub fn load(path: &Path) -> Result<Board, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parse and check a board description.
pub fn parse(text: &str) -> Result<Board, String> {
    let b: Board = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
    b.check()?;
    Ok(b)
}

impl Board {
    /// The rules across keys.
    pub fn check(&self) -> Result<(), String> {
        self.arch.check_methods(self.core_start, self.exit)?;
        if !(1..=64).contains(&self.max_cores) {
            return Err(format!("max_cores = {}: must be 1 to 64", self.max_cores));
        }
        if self.ram_from == RamFrom::DtbThenMailbox && self.mailbox_base.is_none() {
            return Err("ram_from = \"dtb-then-mailbox\" needs mailbox_base".into());
        }
        if self.gpio_kind.is_some() && self.gpio_base.is_none() {
            return Err("gpio_kind without gpio_base".into());
        }
        if ![1, 4].contains(&self.uart.stride) {
            return Err(format!(
                "[uart] stride = {}: must be 1 or 4",
                self.uart.stride
            ));
        }
        if self.arch != Arch::Riscv64
            && (self.cache_maintenance != CacheMaintenance::None || self.vector != Vector::Isa)
        {
            return Err(
                "cache_maintenance and vector are riscv64 keys (the Arm boards' come with the architecture)"
                    .into(),
            );
        }
        if self.qemu.is_some() == self.qemu_stand_in.is_some() {
            return Err("a board has either a [qemu] table or a qemu_stand_in (the QEMU board that stands in for it), not both".into());
        }
        self.check_uart_variant()?;
        self.check_ring_uart()?;
        self.check_block()?;
        self.check_memory()?;
        self.check_boot_window()?;
        self.check_card()
    }

    /// The boot window `[ram_base, ram_base + ram_size_fallback)` is all the kernel maps as RAM
    /// until it knows more: whole 2 MiB blocks inside one normal region, holding the image.
    fn check_boot_window(&self) -> Result<(), String> {
        let (start, size) = (self.ram_base, self.ram_size_fallback);
        let end = start.saturating_add(size);
        let inside = self
            .memory
            .iter()
            .any(|r| r.kind == MemKind::Normal && r.start <= start && end <= r.end);
        if size == 0 || size % (2 << 20) != 0 || start % (2 << 20) != 0 || !inside {
            return Err(format!(
                "ram_base + ram_size_fallback ({start:#x}..{end:#x}): must be whole 2 MiB blocks inside one normal [[memory]] region"
            ));
        }
        if !(start..end).contains(&self.load_address) {
            return Err(format!(
                "load_address = {:#x} lies outside ram_base + ram_size_fallback ({start:#x}..{end:#x})",
                self.load_address
            ));
        }
        Ok(())
    }

    /// The card's config.txt keeps the Pi 4's peripherals low, where the memory map has them.
    fn check_card(&self) -> Result<(), String> {
        let Some(c) = &self.card else { return Ok(()) };
        if let Some(f) = &c.fit {
            if self.arch != Arch::Riscv64 {
                return Err("[card.fit] is for riscv64 boards (their U-Boot's bootm)".into());
            }
            if f.configs.is_empty() || f.ram.is_empty() || f.harts == 0 || f.timebase_hz == 0 {
                return Err(
                    "[card.fit] needs configs, ram, harts and timebase_hz (none empty or 0)".into(),
                );
            }
            let inside = |a: u64| {
                f.ram
                    .iter()
                    .any(|[s, n]| (*s..s.saturating_add(*n)).contains(&a))
            };
            if !inside(self.load_address) {
                return Err(format!(
                    "[card.fit] ram does not hold load_address = {:#x}",
                    self.load_address
                ));
            }
        }
        if c.config_txt
            .iter()
            .flat_map(|t| t.lines())
            .any(|l| l.trim().replace(' ', "") == "arm_peri_high=1")
        {
            return Err(
                "[card] config_txt sets arm_peri_high=1: the memory map has the peripherals low"
                    .into(),
            );
        }
        Ok(())
    }

    /// The ring link's UART is not the console, and its pin routing fits its kind and the GPIO
    /// block the board has.
    fn check_ring_uart(&self) -> Result<(), String> {
        let Some(r) = &self.ring_uart else {
            return Ok(());
        };
        if r.base == 0 || r.base == self.uart.base {
            return Err(format!(
                "[ring_uart] base = {:#x}: must be a UART other than the console ([uart] base)",
                r.base
            ));
        }
        if r.clock_hz == 0 {
            return Err("[ring_uart] clock_hz = 0: must be the UART's clock".into());
        }
        self.check_irq(r)?;
        let (pins, kind, gpio) = match r.pins {
            LinkPins::None => return Ok(()),
            LinkPins::Bcm2711Uart3 => ("bcm2711-uart3", LinkKind::Pl011, GpioKind::Bcm2711),
            LinkPins::Bcm2837MiniGpio14 => {
                ("bcm2837-mini-14-15", LinkKind::Mini, GpioKind::Bcm2835)
            }
        };
        if r.kind != kind
            || self.gpio_base.is_none()
            || self.gpio_kind.unwrap_or(GpioKind::Bcm2835) != gpio
        {
            let (kind, gpio) = (kebab(&format!("{kind:?}")), kebab(&format!("{gpio:?}")));
            return Err(format!(
                "[ring_uart] pins = \"{pins}\" needs kind = \"{kind}\", gpio_base and gpio_kind = \"{gpio}\""
            ));
        }
        Ok(())
    }

    /// The link's interrupt names a shared peripheral interrupt of a controller the board has.
    fn check_irq(&self, r: &RingUart) -> Result<(), String> {
        if let Some(c) = &self.irq {
            c.blocks()?;
        }
        let Some(id) = r.irq else {
            return Ok(());
        };
        match &self.irq {
            None => Err(format!(
                "[ring_uart] irq = {id} needs an [irq] table (the interrupt controller)"
            )),
            Some(Irq {
                kind: IrqKind::Gicv2,
                ..
            }) if !(32..1020).contains(&id) => Err(format!(
                "[ring_uart] irq = {id}: a GICv2 shared peripheral interrupt is 32 to 1019 (SPI n is n + 32)"
            )),
            Some(Irq {
                kind: IrqKind::Bcm2836,
                ..
            }) if id >= 64 => Err(format!(
                "[ring_uart] irq = {id}: a BCM2835 GPU interrupt is 0 to 63 (the AUX block's is 29)"
            )),
            Some(_) => Ok(()),
        }
    }

    /// `sdhost`: one controller, its clock from the mailbox, its pins on the GPIO block.
    fn check_sdhost(&self) -> Result<(), String> {
        let b = &self.block;
        if b.base.is_none() || b.bases.is_some() || b.clock_ids.is_some() || b.ccu.is_some() {
            return Err(
                "[block] kind = \"sdhost\" needs base (and no bases, clock_ids or ccu)".into(),
            );
        }
        if self.mailbox_base.is_none() || self.gpio_base.is_none() {
            return Err("[block] kind = \"sdhost\" needs mailbox_base (the core clock, the DMA channel mask) and gpio_base (its pins)".into());
        }
        Ok(())
    }

    fn check_block(&self) -> Result<(), String> {
        let b = &self.block;
        if b.kind != BlockKind::Sdhost && b.dma.is_some() {
            return Err("[block] dma is for kind = \"sdhost\"".into());
        }
        if b.kind != BlockKind::Sdhci && (b.host.is_some() || b.base_clock_hz.is_some()) {
            return Err("[block] host and base_clock_hz are for kind = \"sdhci\"".into());
        }
        match b.kind {
            BlockKind::VirtioMmio => {
                let (Some(_), Some(_), Some(_)) = (b.base, b.stride, b.count) else {
                    return Err(
                        "[block] kind = \"virtio-mmio\" needs base, stride and count".into(),
                    );
                };
                if b.bases.is_some() || b.clock_ids.is_some() {
                    return Err("[block] bases and clock_ids are for kind = \"sdhci\"".into());
                }
            }
            BlockKind::Sdhci if b.host.is_some() => self.check_sdhci_host()?,
            BlockKind::Sdhci => {
                if b.base_clock_hz.is_some() {
                    return Err("[block] base_clock_hz is for an sdhci host other than the Raspberry Pi's (set host): the Pi's clock comes from the mailbox".into());
                }
                let n = self.block_bases().len();
                if n == 0 {
                    return Err("[block] kind = \"sdhci\" needs base or bases".into());
                }
                if b.clock_ids.as_ref().is_some_and(|c| c.len() != n) {
                    return Err(format!("[block] clock_ids must have one id per base ({n})"));
                }
                if b.clock_ids.is_none() && self.sd_clock_id.is_none() {
                    return Err("[block] kind = \"sdhci\" needs clock_ids or sd_clock_id".into());
                }
                if self.mailbox_base.is_none() {
                    return Err("[block] kind = \"sdhci\" needs mailbox_base (its clock)".into());
                }
            }
            BlockKind::Sdhost => self.check_sdhost()?,
            BlockKind::SunxiMmc => {
                if b.base.is_none() || b.bases.is_some() || b.clock_ids.is_some() {
                    return Err(
                        "[block] kind = \"sunxi-mmc\" needs base (and no bases or clock_ids)"
                            .into(),
                    );
                }
                if b.ccu.is_none() {
                    return Err(
                        "[block] kind = \"sunxi-mmc\" needs ccu (the clock controller)".into(),
                    );
                }
            }
        }
        Ok(())
    }

    /// A `variant` is a 16550's, on 32-bit registers.
    fn check_uart_variant(&self) -> Result<(), String> {
        let u = &self.uart;
        if u.clock_hz == 0 && u.kind != UartKind::Ns16550 {
            return Err(
                "[uart] clock_hz = 0 (keep the boot loader's divisor) is for kind = \"ns16550\""
                    .into(),
            );
        }
        if u.variant == UartVariant::Plain {
            return Ok(());
        }
        let v = kebab(&format!("{:?}", u.variant));
        if u.kind != UartKind::Ns16550 || u.stride != 4 {
            return Err(format!(
                "[uart] variant = \"{v}\" needs kind = \"ns16550\" and stride = 4 (32-bit registers)"
            ));
        }
        Ok(())
    }

    /// An `sdhci` host other than the Pi's: one controller at `base`, its clock from
    /// `base_clock_hz`, nothing of the mailbox's, on its SoC's architecture.
    fn check_sdhci_host(&self) -> Result<(), String> {
        let b = &self.block;
        let Some(host) = b.host else { return Ok(()) };
        let name = kebab(&format!("{host:?}"));
        if host.arch() != self.arch {
            let arch = kebab(&format!("{:?}", self.arch));
            return Err(format!(
                "[block] host = \"{name}\" is a {} SoC's, not {arch}'s",
                kebab(&format!("{:?}", host.arch()))
            ));
        }
        if b.base.is_none() || b.bases.is_some() {
            return Err(format!(
                "[block] host = \"{name}\" needs base (one controller; no bases)"
            ));
        }
        if b.clock_ids.is_some() || self.sd_clock_id.is_some() {
            return Err(format!(
                "[block] host = \"{name}\" takes its clock from base_clock_hz, not clock_ids or sd_clock_id (the mailbox's)"
            ));
        }
        match b.base_clock_hz {
            Some(hz) if (400_000..=1_000_000_000).contains(&hz) => Ok(()),
            Some(hz) => Err(format!(
                "[block] base_clock_hz = {hz}: must be the controller's clock, 400 kHz to 1 GHz"
            )),
            None => Err(format!(
                "[block] host = \"{name}\" needs base_clock_hz (its capabilities register is not trusted for the clock)"
            )),
        }
    }

    fn check_memory(&self) -> Result<(), String> {
        if self.memory.is_empty() {
            return Err("no [[memory]] regions".into());
        }
        let mut last = 0;
        for (i, r) in self.memory.iter().enumerate() {
            if r.start >= r.end || r.start < last {
                return Err(format!(
                    "[[memory]] region {} ({:#x}..{:#x}): regions must be non-empty, in order and apart",
                    i + 1,
                    r.start,
                    r.end
                ));
            }
            last = r.end;
        }
        Ok(())
    }

    /// The SD host controllers (or the first virtio-mmio slot).
    pub fn block_bases(&self) -> Vec<u64> {
        match (&self.block.bases, self.block.base) {
            (Some(b), _) => b.clone(),
            (None, Some(b)) => vec![b],
            (None, None) => vec![],
        }
    }

    /// The kernel's constants (`board.rs` in the build's output), for a build that runs on
    /// hardware or under QEMU (`qemu`), with `stack_size` bytes of stack per core.
    pub fn kernel_constants(&self, qemu: bool, stack_size: u64) -> String {
        let mut o = String::new();
        let bases = self.block_bases();
        let ids = match &self.block.clock_ids {
            Some(ids) => ids.clone(),
            None => vec![self.sd_clock_id.unwrap_or(0); bases.len()],
        };
        let gpio = self.gpio_kind.unwrap_or(GpioKind::Bcm2835);
        let ring = self.ring_uart.as_ref();
        let lines = [
            format!("// Generated by kernel/build.rs from boards/{}.toml.", self.name),
            format!("pub const NAME: &str = {:?};", self.name),
            format!("pub const LOAD_ADDRESS: usize = {:#x};", self.load_address),
            format!("pub const RAM_BASE: usize = {:#x};", self.ram_base),
            format!("pub const RAM_SIZE_FALLBACK: usize = {:#x};", self.ram_size_fallback),
            format!("pub const RAM_FROM: RamFrom = RamFrom::{:?};", self.ram_from),
            format!("pub const MAX_CORES: usize = {};", self.max_cores),
            format!("pub const CORE_START: CoreStart = CoreStart::{:?};", self.core_start),
            format!("pub const EXIT: Exit = Exit::{:?};", self.exit),
            format!("pub const UART: UartKind = UartKind::{:?};", self.uart.kind),
            format!("pub const UART_BASE: usize = {:#x};", self.uart.base),
            format!("pub const UART_CLOCK_HZ: u32 = {};", self.uart.clock_hz),
            format!("pub const UART_STRIDE: usize = {};", self.uart.stride),
            format!("pub const UART_VARIANT: drivers::uart::ns16550::Variant = drivers::uart::ns16550::Variant::{:?};", self.uart.variant),
            format!("pub const BLOCK: BlockKind = BlockKind::{:?};", self.block.kind),
            format!("pub const BLOCK_BASES: &[usize] = &{bases:#x?};"),
            format!("pub const BLOCK_CLOCK_IDS: &[u32] = &{ids:?};"),
            format!("pub const BLOCK_STRIDE: usize = {:#x};", self.block.stride.unwrap_or(0)),
            format!("pub const BLOCK_COUNT: usize = {};", self.block.count.unwrap_or(1)),
            format!("pub const BLOCK_CCU: Option<usize> = {};", opt(self.block.ccu)),
            format!("pub const BLOCK_DMA: Option<usize> = {};", opt(self.block.dma)),
            "// A non-Pi SDHCI host and its base clock; None: the Pi's (or another kind).".into(),
            format!("pub const BLOCK_HOST: Option<boards::SdhciHost> = {};", self.block.host.map_or("None".into(), |h| format!("Some(boards::SdhciHost::{h:?})"))),
            format!("pub const BLOCK_BASE_CLOCK_HZ: u32 = {};", self.block.base_clock_hz.unwrap_or(0)),
            format!("pub const MAILBOX_BASE: Option<usize> = {};", opt(self.mailbox_base)),
            format!("pub const SYSTIMER_BASE: Option<usize> = {};", opt(self.systimer_base)),
            format!("pub const GPIO_BASE: Option<usize> = {};", opt(self.gpio_base)),
            format!("pub const GPIO_KIND: drivers::bcm2835::gpio::GpioKind = drivers::bcm2835::gpio::GpioKind::{gpio:?};"),
            "// The ring link's UART; RING_UART_BASE = None: the board has none.".into(),
            format!("pub const RING_UART_BASE: Option<usize> = {};", opt(ring.map(|r| r.base))),
            format!("pub const RING_UART_KIND: drivers::uart::LinkKind = drivers::uart::LinkKind::{:?};", ring.map_or(LinkKind::Pl011, |r| r.kind)),
            format!("pub const RING_UART_CLOCK_HZ: u32 = {};", ring.map_or(0, |r| r.clock_hz)),
            format!("pub const RING_UART_PINS: drivers::bcm2835::gpio::LinkPins = drivers::bcm2835::gpio::LinkPins::{:?};", ring.map_or(LinkPins::None, |r| r.pins)),
            format!("pub const RING_UART_FLOW: drivers::uart::Flow = drivers::uart::Flow::{:?};", ring.map_or(Flow::None, |r| r.flow)),
            format!("pub const RING_UART_IRQ: Option<u32> = {:?};", ring.and_then(|r| r.irq)),
            "// The interrupt controller; None: none.".into(),
            format!("pub const IRQ_CONTROLLER: Option<boards::IrqController> = {};", self.irq.as_ref().map_or("None".into(), Irq::constant)),
            format!("pub const CACHE_MAINTENANCE: boards::CacheMaintenance = boards::CacheMaintenance::{:?};", self.cache_maintenance),
            format!("pub const VECTOR: boards::Vector = boards::Vector::{:?};", self.vector),
            format!("pub const QEMU: bool = {qemu};"),
            "pub const MEMORY: &[Region] = &[".into(),
        ];
        for l in lines {
            let _ = writeln!(o, "{l}");
        }
        for m in &self.memory {
            let _ = writeln!(
                o,
                "    Region {{ start: {:#x}, end: {:#x}, kind: MemKind::{:?} }},",
                m.start, m.end, m.kind
            );
        }
        let _ = writeln!(o, "];");
        let _ = writeln!(o, "pub const STACK_SIZE: usize = {stack_size:#x};");
        let _ = writeln!(
            o,
            "pub const TEST_FINISHER: Option<usize> = {};",
            opt(self.test_finisher)
        );
        o
    }

    /// The lines the architecture's linker script starts with.
    pub fn linker_symbols(&self, stack_size: u64) -> String {
        format!(
            "LOAD_ADDRESS = {:#x};\nSTACK_SIZE = {stack_size:#x};\nMAX_CORES = {};\n",
            self.load_address, self.max_cores
        )
    }
}

/// An optional address as a constant's value: `Some(0x...)` or `None` (the board has no such
/// device).
fn opt(addr: Option<u64>) -> String {
    addr.map_or("None".into(), |a| format!("Some({a:#x})"))
}

#[cfg(test)]
mod tests;
