//! The kinds a board file names by string (`"psci-hvc"`, `"pl011"`, ...) and the memory map's
//! region, `no_std`: the kernel uses these types as they are, and its constants (made from the
//! board file at build time) name each kind by its variant.

#[cfg(feature = "std")]
use alloc::{format, string::String};
#[cfg(feature = "std")]
use serde::Deserialize;

/// The CPU architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum Arch {
    Aarch64,
    Riscv64,
    /// 32-bit Arm (ARMv7-A with VFPv4 and NEON: Cortex-A7), Rust `target_arch = "arm"`.
    Armv7a,
}

/// Where the RAM size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum RamFrom {
    /// The device tree passed at entry (or found at the start of RAM).
    Dtb,
    /// The device tree passed at entry if the firmware passes one, else the VideoCore mailbox.
    DtbThenMailbox,
    /// The Allwinner H3's DRAM controller, as U-Boot's SPL configured it (no device tree comes
    /// with U-Boot's `go`).
    SunxiDramc,
}

/// How the other cores are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum CoreStart {
    PsciHvc,
    SpinTable,
    SbiHsm,
    /// armv7a: the BCM2836 local controller's per-core mailbox 3 (Raspberry Pi 2).
    Bcm2836Mailbox,
    /// armv7a: the Allwinner H3 CPU configuration block (entry address, per-core reset).
    SunxiCpucfg,
    /// armv7a: PSCI CPU_ON over SMC (QEMU virt with virtualization on).
    PsciSmc,
}

/// How the board powers off with a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum Exit {
    Semihosting,
    PsciHvc,
    SbiSrst,
    Halt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum UartKind {
    Pl011,
    Ns16550,
}

/// Which 16550 an `ns16550` console is (`[uart] variant`; the drivers' `ns16550::Variant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum UartVariant {
    /// A plain 16550A (QEMU's).
    #[default]
    Plain,
    /// The DesignWare APB UART (`snps,dw-apb-uart`): LCR writes wait for USR.BUSY to clear.
    DwApb,
    /// The XScale / PXA UART (`intel,xscale-uart`): IER's unit enable stays set.
    Xscale,
}

/// A non-Raspberry-Pi SDHCI host (`[block] host` with `kind = "sdhci"`; the drivers'
/// `sdhci::Variant`): its clock comes from the board file, not the VideoCore mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum SdhciHost {
    /// The Sophgo CV1800B / SG2002 DesignWare MSHC (Milk-V Duo, Duo 256M, LicheeRV Nano).
    DwcmshcCv18xx,
    /// The SpacemiT K1's SDHCI (Banana Pi BPI-F3, Milk-V Jupiter).
    SpacemitK1,
}

impl SdhciHost {
    /// The architecture of the SoCs that have it.
    pub fn arch(self) -> Arch {
        match self {
            SdhciHost::DwcmshcCv18xx | SdhciHost::SpacemitK1 => Arch::Riscv64,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum BlockKind {
    VirtioMmio,
    Sdhci,
    /// The Allwinner SD/MMC host (H3 and kin).
    SunxiMmc,
    /// The BCM2835-family "sdhost" SD controller (Pi 3, Zero 2 W, Pi 2), clocked from the VPU
    /// core clock the mailbox reports, reading through the system DMA engine (`dma`).
    Sdhost,
}

/// How the data cache is kept coherent with DMA masters (riscv64; the Arm boards' is the
/// architecture's own, by address to the point of coherency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum CacheMaintenance {
    /// DMA is coherent with the caches (QEMU's virt, virtio): nothing to do.
    #[default]
    None,
    /// T-Head's XTheadCmo (`th.dcache.cva`, `.iva`, `.civa` by virtual address, then
    /// `th.sync.s`): the C906 of the Milk-V Duo family. M-mode must have set
    /// `mxstatus.THEADISAEE` (the vendor OpenSBI does); the kernel checks `sxstatus` first.
    Xtheadcmo,
    /// The standard Zicbom (`cbo.clean`, `cbo.inval`, `cbo.flush` per cache block, the block size
    /// from the device tree's `riscv,cbom-block-size`): the SpacemiT K1's X60.
    Zicbom,
}

/// Which vector unit the harts have (riscv64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum Vector {
    /// As the device tree's `riscv,isa` says: V is RVV 1.0 (the `rvv` kernels), else none.
    #[default]
    Isa,
    /// T-Head's XTheadVector (RVV 0.7.1, the `xtheadvector` kernels), whatever the device tree
    /// says (the vendor trees of the CV18xx name it `v`, which RVV 1.0 code would trap on).
    Xtheadvector,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum MemKind {
    Normal,
    Device,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum GpioKind {
    Bcm2835,
    Bcm2711,
}

/// The ring link's UART (the drivers' `uart::LinkKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum LinkKind {
    Pl011,
    Mini,
}

/// Where the ring link's UART reaches its pins (the drivers' `bcm2835::gpio::LinkPins`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize))]
pub enum LinkPins {
    #[cfg_attr(feature = "std", serde(rename = "none"))]
    None,
    #[cfg_attr(feature = "std", serde(rename = "bcm2711-uart3"))]
    Bcm2711Uart3,
    #[cfg_attr(feature = "std", serde(rename = "bcm2837-mini-14-15"))]
    Bcm2837MiniGpio14,
}

/// The interrupt controller that takes the ring link's receive interrupt (`[irq] kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "lowercase"))]
pub enum IrqKind {
    /// An ARM GICv2 (QEMU virt, the BCM2711's GIC-400): the drivers' `gic::GicV2`.
    Gicv2,
    /// The BCM2836/BCM2837 path for a VideoCore interrupt (Pi 3, Zero 2 W): the ARMCTRL block
    /// and the per-core local interrupt controller, the drivers' `bcm2835::irq::GpuIrqs`.
    Bcm2836,
}

/// The interrupt controller as the kernel gets it (`IRQ_CONTROLLER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrqController {
    /// A GICv2's distributor and CPU interface.
    GicV2 { dist: usize, cpu: usize },
    /// The ARMCTRL block (its IRQ basic pending register) and the BCM2836 local controller.
    Bcm2836 { armctrl: usize, local: usize },
}

/// Hardware flow control on the ring link (the drivers' `uart::Flow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "lowercase"))]
pub enum Flow {
    None,
    RtsCts,
}

/// How QEMU loads the kernel: the ELF, or a flat image (`kernel8.img`, as the Pi firmware wants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(rename_all = "kebab-case"))]
pub enum KernelFormat {
    #[default]
    Elf,
    Raw,
    /// No `-kernel`: the machine boots the card as the board does (its boot ROM starts U-Boot,
    /// whose `boot.scr` loads the flat image).
    UBoot,
}

/// `[start, end)` of the physical address space and how to map it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Deserialize), serde(deny_unknown_fields))]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub kind: MemKind,
}

impl Arch {
    /// The Rust `target_arch` name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64",
            Arch::Riscv64 => "riscv64",
            Arch::Armv7a => "arm",
        }
    }

    /// Refuse another architecture's firmware methods.
    #[cfg(feature = "std")]
    pub fn check_methods(self, start: CoreStart, exit: Exit) -> Result<(), String> {
        let (starts, exits): (&[CoreStart], &[Exit]) = match self {
            Arch::Aarch64 => (
                &[CoreStart::PsciHvc, CoreStart::SpinTable],
                &[Exit::Semihosting, Exit::PsciHvc, Exit::Halt],
            ),
            Arch::Riscv64 => (&[CoreStart::SbiHsm], &[Exit::SbiSrst, Exit::Halt]),
            Arch::Armv7a => (
                &[
                    CoreStart::Bcm2836Mailbox,
                    CoreStart::SunxiCpucfg,
                    CoreStart::PsciSmc,
                ],
                &[Exit::Semihosting, Exit::Halt],
            ),
        };
        // The architecture as the board file spells it.
        let arch = kebab(&format!("{self:?}"));
        if !starts.contains(&start) {
            let name = kebab(&format!("{start:?}"));
            return Err(format!("core_start = \"{name}\" is not a method of {arch}"));
        }
        if !exits.contains(&exit) {
            let name = kebab(&format!("{exit:?}"));
            return Err(format!("exit = \"{name}\" is not a method of {arch}"));
        }
        Ok(())
    }
}

/// A variant's name as the board file writes it (`SpinTable` -> `spin-table`).
#[cfg(feature = "std")]
pub(crate) fn kebab(camel: &str) -> String {
    let mut s = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            s.push('-');
        }
        s.push(c.to_ascii_lowercase());
    }
    s
}
