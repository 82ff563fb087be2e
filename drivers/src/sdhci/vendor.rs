//! The SDHCI hosts that are not the Raspberry Pi's, and what each needs beyond the SD Host
//! Controller specification ([`Variant`]): the Sophgo CV1800B / SG2002's Synopsys DesignWare
//! MSHC (Milk-V Duo, Duo 256M, LicheeRV Nano) and the SpacemiT K1's SDHCI (Banana Pi BPI-F3,
//! Milk-V Jupiter). Both run 3.3 V only here (a [`NoSlot`]): High Speed at most, never UHS-I (the
//! Duo boards' trees say `no-1-8-v`; a K1 board's slot rail is a PMIC regulator the kernel does
//! not drive).
//!
//! # DesignWare MSHC, CV18xx (`sophgo,cv1800b-dwcmshc`, `sophgo,sg2002-dwcmshc`)
//!
//! From Linux's `drivers/mmc/host/sdhci-of-dwcmshc.c` (`sdhci_dwcmshc_cv18xx_pdata`,
//! `cv18xx_sdhci_reset`, `dwcmshc_reset`, `dwcmshc_adma_write_desc`), U-Boot's
//! `drivers/mmc/cv1800b_sdhci.c` and the device trees `cv18xx.dtsi`, `cv1800b-milkv-duo.dts`,
//! `sg2002-milkv-duo256m.dts`, `sg2002-licheerv-nano-b.dts`:
//!
//! - `SDHCI_QUIRK_CAP_CLOCK_BASE_BROKEN`: the capabilities' base clock field is not used; the
//!   board gives the clock. U-Boot fixes it at 375 MHz (`MMC_MAX_CLOCK`), as Linux's first
//!   `cv18xx.dtsi` did (a fixed `sdhci_clk` of 375000000). The 10-bit divider then gives
//!   375 / 8 = 46.9 MHz at High Speed, 375 / 16 = 23.4 MHz at Default Speed and
//!   375 / 938 = 399.8 kHz for identification.
//! - `SDHCI_QUIRK2_PRESET_VALUE_BROKEN`: preset values are never enabled. After every reset of
//!   the whole controller the driver writes host control 2 as 0 (preset value enable, host
//!   version 4 enable, 1.8 V and the UHS mode all off), whatever a boot loader left there.
//! - `dwcmshc_reset`: a software reset of the CMD line does not clear command complete (against
//!   the specification); the driver clears it after one.
//! - `dwcmshc_adma_write_desc`: no ADMA2 descriptor may cross a 128 MiB boundary of the bus
//!   address space; one that would is split in two ([`Variant::adma_boundary`]). ADMA2 stays the
//!   32-bit form (host version 4 mode off): RAM is at 0x8000_0000, below 4 GiB.
//! - `cv18xx_sdhci_reset`: after a reset, in the vendor area (its offset read from
//!   P_VENDOR_AREA1 at 0xE8, bits 11:0: 0x200 on these SoCs, so U-Boot's `SDHCI_PHY_TX_RX_DLY` at
//!   0x240): MSHC_CTRL (+0x00) bit 1 `LATANCY_1T` set, PHY_CONFIG (+0x4C) bit 0 `PHY_TX_BPS`
//!   set, PHY_TX_RX_DLY (+0x40) = TX source the inverted clock (bits 9:8 = 1), RX source the
//!   inverted RX clock (bits 25:24 = 1), both delays 0. That is all High Speed needs: the tap
//!   delay search of `cv18xx_sdhci_execute_tuning` is for SDR104, which a 3.3 V slot never runs.
//! - The boards' trees say `no-1-8-v` (3.3 V only) and `disable-wp` (the write-protect line is
//!   not to be believed: a microSD slot has no switch, and this controller's line is noted as
//!   inverted): the driver never consults it ([`Variant::write_protect_line`]).
//! - The register block is 0x1000 bytes (`reg = <0x4310000 0x1000>`): the vendor area lies above
//!   the standard 0x100.
//!
//! # SpacemiT K1 (`spacemit,k1-sdhci`)
//!
//! From Linux's `drivers/mmc/host/sdhci-of-k1.c` (`spacemit_sdhci_k1_pdata`,
//! `spacemit_sdhci_reset`, `spacemit_sdhci_set_clock`), SpacemiT's vendor driver
//! (`sdhci-of-k1x.c`, `spacemit_sdhci_reset` for a host with `SDHCI_QUIRK2_BROKEN_PHY_MODULE`, as
//! the vendor trees mark the SD slot) and `k1.dtsi`:
//!
//! - `SDHCI_QUIRK_CAP_CLOCK_BASE_BROKEN`: the base clock is the `io` clock, SDH0: the vendor
//!   trees set `spacemit,sdh-freq = <204800000>` on the SD slot (PLL1 / 6 / 2). The 10-bit
//!   divider gives 204.8 / 6 = 34.1 MHz at High Speed, 204.8 / 10 = 20.5 MHz at Default Speed
//!   and 204.8 / 512 = 400 kHz for identification.
//! - `SDHCI_QUIRK2_PRESET_VALUE_BROKEN`: as above, host control 2 is written 0 after a reset.
//! - `SDHCI_QUIRK2_BROKEN_64_BIT_DMA`, `SDHCI_QUIRK_32BIT_ADMA_SIZE`: 32-bit ADMA2 descriptors
//!   with lengths in whole words (this driver's are whole blocks). `k1.dtsi` puts the SD host on
//!   the `storage-bus`, whose `dma-ranges` map bus addresses 0..2 GiB to the same physical
//!   addresses: the board's `DmaMemory` refuses anything above.
//! - `SDHCI_QUIRK_BROKEN_CARD_DETECTION`: card detect is never consulted (nor on any host here).
//! - `SDHCI_QUIRK_BROKEN_TIMEOUT_VAL`, `SDHCI_QUIRK_DATA_TIMEOUT_USES_SDCLK`: the driver always
//!   programs the largest data timeout and ends every wait with its own deadline.
//! - High Speed also sets host control 2's UHS mode to SDR25 ([`Variant::uhs_mode_at_3v3`]), as
//!   Linux's generic `sdhci_set_uhs_signaling` does for `MMC_TIMING_SD_HS`.
//! - After a reset of the whole controller, TX_CFG (0x11C) bit 30 `TX_INT_CLK_SEL` is set ("to
//!   guarantee the hold time at default speed mode or HS/SDR12/SDR25/SDR50", the vendor driver;
//!   mainline sets it before each clock change at those timings). The vendor driver leaves the
//!   PHY alone on the SD slot (`SDHCI_QUIRK2_BROKEN_PHY_MODULE`), and so does this one; eMMC's
//!   `MMC_CARD_MODE` (0x114 bit 12) stays clear (the slot is `no-mmc`).
//! - The register block is 0x200 bytes (`reg = <0x0 0xd4280000 0x0 0x200>`).

use super::*;

/// Which SDHCI host: the standard one, or one with the quirks the module docs list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// A host that follows the specification: the Pi's Arasan "EMMC" and EMMC2, QEMU's sdhci.
    #[default]
    Standard,
    /// The Sophgo CV1800B / SG2002 DesignWare MSHC (`sophgo,cv1800b-dwcmshc`).
    DwcmshcCv18xx,
    /// The SpacemiT K1's SDHCI (`spacemit,k1-sdhci`).
    SpacemitK1,
}

/// P_VENDOR_AREA1: the offset of the DesignWare MSHC's vendor area (bits 11:0).
pub const DWCMSHC_P_VENDOR_AREA1: usize = 0xE8;
/// CV18xx vendor area: MSHC_CTRL, PHY_TX_RX_DLY, PHY_CONFIG (offsets in the area).
pub const CV18XX_MSHC_CTRL: usize = 0x00;
pub const CV18XX_PHY_TX_RX_DLY: usize = 0x40;
pub const CV18XX_PHY_CONFIG: usize = 0x4C;
/// MSHC_CTRL bit 1 `LATANCY_1T` (Linux's spelling).
pub const CV18XX_LATENCY_1T: u32 = 1 << 1;
/// PHY_CONFIG bit 0 `PHY_TX_BPS`.
pub const CV18XX_PHY_TX_BPS: u32 = 1 << 0;
/// PHY_TX_RX_DLY: TX source = inverted clock (bits 9:8 = 1), RX source = inverted RX clock
/// (bits 25:24 = 1), TX and RX delay 0.
pub const CV18XX_PHY_DELAYS: u32 = (1 << 8) | (1 << 24);
/// The 128 MiB boundary no DesignWare ADMA2 descriptor may cross.
pub const DWCMSHC_ADMA_BOUNDARY: u32 = 128 << 20;
/// K1 TX_CFG and its `TX_INT_CLK_SEL` bit.
pub const K1_TX_CFG: usize = 0x11C;
pub const K1_TX_INT_CLK_SEL: u32 = 1 << 30;

impl Variant {
    /// The name the card line gives the controller.
    pub const fn name(self) -> &'static str {
        match self {
            Variant::Standard => "SDHCI",
            Variant::DwcmshcCv18xx => "DesignWare MSHC, CV18xx",
            Variant::SpacemitK1 => "SpacemiT K1 SDHCI",
        }
    }

    /// Bytes of its register block: the `size` for [`Mmio::new`].
    pub const fn register_block_size(self) -> usize {
        match self {
            Variant::Standard => REGISTER_BLOCK_SIZE,
            Variant::DwcmshcCv18xx => 0x1000,
            Variant::SpacemitK1 => 0x200,
        }
    }

    /// The capabilities' base clock field is not to be used (`SDHCI_QUIRK_CAP_CLOCK_BASE_BROKEN`):
    /// the board must give the clock.
    pub const fn caps_base_clock_broken(self) -> bool {
        !matches!(self, Variant::Standard)
    }

    /// Preset values must stay off (`SDHCI_QUIRK2_PRESET_VALUE_BROKEN`): host control 2 is
    /// written 0 after a reset of the whole controller.
    pub const fn preset_values_broken(self) -> bool {
        !matches!(self, Variant::Standard)
    }

    /// A CMD line reset leaves command complete set (`dwcmshc_reset`).
    pub const fn cmd_reset_keeps_complete(self) -> bool {
        matches!(self, Variant::DwcmshcCv18xx)
    }

    /// The boundary of the bus address space no ADMA2 descriptor may cross.
    pub const fn adma_boundary(self) -> Option<u32> {
        match self {
            Variant::DwcmshcCv18xx => Some(DWCMSHC_ADMA_BOUNDARY),
            _ => None,
        }
    }

    /// Host control 2's UHS mode select follows the timing at 3.3 V too (SDR25 in High Speed,
    /// SDR12 at Default Speed), as Linux's generic `sdhci_set_uhs_signaling`, which the K1's
    /// `spacemit_sdhci_set_uhs_signaling` calls, writes it; the specification has the host
    /// ignore it without 1.8 V. The DesignWare's `dwcmshc_set_uhs_signaling` leaves it 0 for an
    /// SD card in High Speed.
    pub const fn uhs_mode_at_3v3(self) -> bool {
        matches!(self, Variant::SpacemitK1)
    }

    /// Can the write-protect line (PRESENT_STATE bit 19) be believed at all? Not on the CV18xx
    /// boards (`disable-wp`).
    pub const fn write_protect_line(self) -> bool {
        !matches!(self, Variant::DwcmshcCv18xx)
    }
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> Sdhci<R, C, S, D> {
    /// After SRST_ALL: host control 2 cleared where preset values are broken, then the vendor
    /// registers the module docs list.
    pub(super) fn after_reset_all(&mut self) -> Result<(), Cause> {
        let variant = self.config.variant;
        if variant.preset_values_broken() {
            self.write(AUTO_CMD_ERR_HOST_CONTROL2, 0);
        }
        match variant {
            Variant::Standard => {}
            Variant::DwcmshcCv18xx => {
                let area = self.cv18xx_vendor_area()?;
                let ctrl = self.regs.read32(area + CV18XX_MSHC_CTRL);
                self.write(area + CV18XX_MSHC_CTRL, ctrl | CV18XX_LATENCY_1T);
                let phy = self.regs.read32(area + CV18XX_PHY_CONFIG);
                self.write(area + CV18XX_PHY_CONFIG, phy | CV18XX_PHY_TX_BPS);
                self.write(area + CV18XX_PHY_TX_RX_DLY, CV18XX_PHY_DELAYS);
            }
            Variant::SpacemitK1 => {
                let tx = self.regs.read32(K1_TX_CFG);
                self.write(K1_TX_CFG, tx | K1_TX_INT_CLK_SEL);
            }
        }
        Ok(())
    }

    /// The DesignWare vendor area's offset (P_VENDOR_AREA1): its registers must lie inside the
    /// register block, word-aligned, above the standard ones.
    fn cv18xx_vendor_area(&mut self) -> Result<usize, Cause> {
        let ptr = self.regs.read32(DWCMSHC_P_VENDOR_AREA1) & 0xFFF;
        let area = ptr as usize;
        let size = self.config.variant.register_block_size();
        let inside = area >= REGISTER_BLOCK_SIZE
            && area.is_multiple_of(4)
            && area + CV18XX_PHY_CONFIG < size;
        if !inside {
            return Err(Cause::VendorArea { ptr });
        }
        Ok(area)
    }
}
