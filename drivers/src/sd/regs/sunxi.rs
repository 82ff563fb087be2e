//! Registers of the Allwinner SD/MMC host controller (sun4i-style "SMHC" as in the H3 / H2+) and the
//! parts of the H3 clock controller (CCU) that feed it. Offsets and bits as in U-Boot's
//! `arch-sunxi/mmc.h` and Linux's `sunxi-mmc.c` (which name them alike), and QEMU's
//! `allwinner-sdhost.c`.

/// Global control: resets, interrupt and DMA enables, FIFO access mode.
pub const GCTRL: usize = 0x00;
/// Clock control: card clock enable and the controller's own divider.
pub const CLKCR: usize = 0x04;
/// Timeouts: data (bits 31:8) and response (7:0), in card clocks.
pub const TIMEOUT: usize = 0x08;
/// Bus width: 0 = 1 bit, 1 = 4 bits, 2 = 8 bits.
pub const WIDTH: usize = 0x0C;
/// Block size in bytes.
pub const BLKSZ: usize = 0x10;
/// Bytes of the transfer.
pub const BYTECNT: usize = 0x14;
/// Command: index and flags; bit 31 (start) sends it and reads 1 until the controller took it.
pub const CMD: usize = 0x18;
/// Command argument.
pub const ARG: usize = 0x1C;
/// Response words: a short response's bits 39:8 in RESP0; a long one's bits 127:0 in RESP0..3
/// (RESP0 = bits 31:0, its low byte the CRC).
pub const RESP: [usize; 4] = [0x20, 0x24, 0x28, 0x2C];
/// Interrupt mask (kept 0: the driver polls).
pub const IMASK: usize = 0x30;
/// Masked interrupt status.
pub const MINT: usize = 0x34;
/// Raw interrupt status; write 1 to clear.
pub const RINT: usize = 0x38;
/// Status: FIFO levels, card busy.
pub const STATUS: usize = 0x3C;
/// FIFO water levels and the DMA burst size (set for DMA, else left at its reset value).
pub const FTRGLEVEL: usize = 0x40;
/// Internal DMA controller (IDMAC) control: soft reset, fixed burst, enable.
pub const DMAC: usize = 0x80;
/// The bus address of the first descriptor.
pub const DLBA: usize = 0x84;
/// IDMAC status; write 1 to clear (bits 9:0).
pub const IDST: usize = 0x88;
/// IDMAC interrupt enable (the interrupt itself stays off: GCTRL bit 4 is clear).
pub const IDIE: usize = 0x8C;
/// The data FIFO on the H3 and later (0x100 on the A10 / sun4i).
pub const FIFO: usize = 0x200;

// GCTRL.
pub const GCTRL_SOFT_RESET: u32 = 1 << 0;
pub const GCTRL_FIFO_RESET: u32 = 1 << 1;
pub const GCTRL_DMA_RESET: u32 = 1 << 2;
/// All three resets (Linux's SDXC_HARDWARE_RESET, U-Boot's SUNXI_MMC_GCTRL_RESET).
pub const GCTRL_RESET: u32 = GCTRL_SOFT_RESET | GCTRL_FIFO_RESET | GCTRL_DMA_RESET;
pub const GCTRL_INT_ENABLE: u32 = 1 << 4;
pub const GCTRL_DMA_ENABLE: u32 = 1 << 5;
/// The FIFO is read and written by the CPU over AHB (PIO), not by the internal DMA.
pub const GCTRL_ACCESS_BY_AHB: u32 = 1 << 31;

// FTRGLEVEL.
/// Burst of 8 words, receive trigger 7 words, transmit trigger 8 (Linux's value for the IDMAC).
pub const FTRGLEVEL_DMA: u32 = 0x2007_0008;

// DMAC.
/// Resets the IDMAC (clears by itself on hardware; QEMU keeps what was written).
pub const DMAC_SOFT_RESET: u32 = 1 << 0;
pub const DMAC_FIXED_BURST: u32 = 1 << 1;
pub const DMAC_IDMA_ON: u32 = 1 << 7;

// IDST.
pub const IDST_TX_INT: u32 = 1 << 0;
/// Receive interrupt: the last descriptor's buffer is written.
pub const IDST_RX_INT: u32 = 1 << 1;
pub const IDST_FATAL_BUS_ERROR: u32 = 1 << 2;
pub const IDST_DESC_UNAVAILABLE: u32 = 1 << 4;
pub const IDST_CARD_ERROR_SUM: u32 = 1 << 5;
pub const IDST_NORMAL_SUM: u32 = 1 << 8;
pub const IDST_ABNORMAL_SUM: u32 = 1 << 9;
/// The writable (write 1 to clear) status bits.
pub const IDST_ALL: u32 = 0x3FF;
/// The error bits.
pub const IDST_ERRORS: u32 =
    IDST_FATAL_BUS_ERROR | IDST_DESC_UNAVAILABLE | IDST_CARD_ERROR_SUM | IDST_ABNORMAL_SUM;
/// Names of the IDST error bits, for error messages.
pub const IDST_ERROR_NAMES: [(u32, &str); 4] = [
    (IDST_FATAL_BUS_ERROR, "fatal bus error"),
    (
        IDST_DESC_UNAVAILABLE,
        "descriptor unavailable (not owned by the IDMAC)",
    ),
    (IDST_CARD_ERROR_SUM, "card error summary"),
    (IDST_ABNORMAL_SUM, "abnormal interrupt summary"),
];

/// A descriptor of the IDMAC's chain: four little-endian words in memory.
pub mod desc {
    /// Word 0, config: the IDMAC owns the descriptor (it clears the bit when done).
    pub const OWN: u32 = 1 << 31;
    /// Error summary, set by the IDMAC.
    pub const ERROR: u32 = 1 << 30;
    /// End of ring (Linux sets it on the last descriptor).
    pub const END_OF_RING: u32 = 1 << 5;
    /// Word 3 is the next descriptor's address.
    pub const CHAIN: u32 = 1 << 4;
    pub const FIRST: u32 = 1 << 3;
    pub const LAST: u32 = 1 << 2;
    /// Disable the interrupt (the receive status) on completion of this descriptor.
    pub const DISABLE_INT: u32 = 1 << 1;
    /// Size of one descriptor in bytes.
    pub const SIZE: usize = 16;
}

// CLKCR.
pub const CLKCR_DIVIDER_MASK: u32 = 0xFF;
pub const CLKCR_ENABLE: u32 = 1 << 16;
pub const CLKCR_POWERSAVE: u32 = 1 << 17;

// CMD.
pub const CMD_RESP_EXPIRE: u32 = 1 << 6;
pub const CMD_LONG_RESPONSE: u32 = 1 << 7;
pub const CMD_CHECK_RESPONSE_CRC: u32 = 1 << 8;
pub const CMD_DATA_EXPIRE: u32 = 1 << 9;
pub const CMD_WRITE: u32 = 1 << 10;
pub const CMD_AUTO_STOP: u32 = 1 << 12;
pub const CMD_WAIT_PRE_OVER: u32 = 1 << 13;
pub const CMD_STOP_ABORT: u32 = 1 << 14;
pub const CMD_SEND_INIT_SEQ: u32 = 1 << 15;
pub const CMD_UPCLK_ONLY: u32 = 1 << 21;
pub const CMD_START: u32 = 1 << 31;

// RINT.
/// Response error; QEMU's model raises it alone for a missing response.
pub const RINT_RESP_ERROR: u32 = 1 << 1;
pub const RINT_COMMAND_DONE: u32 = 1 << 2;
pub const RINT_DATA_OVER: u32 = 1 << 3;
pub const RINT_TX_DATA_REQUEST: u32 = 1 << 4;
pub const RINT_RX_DATA_REQUEST: u32 = 1 << 5;
pub const RINT_RESP_CRC_ERROR: u32 = 1 << 6;
pub const RINT_DATA_CRC_ERROR: u32 = 1 << 7;
pub const RINT_RESP_TIMEOUT: u32 = 1 << 8;
pub const RINT_DATA_TIMEOUT: u32 = 1 << 9;
pub const RINT_VOLTAGE_CHANGE_DONE: u32 = 1 << 10;
pub const RINT_FIFO_RUN_ERROR: u32 = 1 << 11;
pub const RINT_HARDWARE_LOCKED: u32 = 1 << 12;
pub const RINT_START_BIT_ERROR: u32 = 1 << 13;
pub const RINT_AUTO_COMMAND_DONE: u32 = 1 << 14;
pub const RINT_END_BIT_ERROR: u32 = 1 << 15;
/// The error bits (Linux's SDXC_INTERRUPT_ERROR_BIT).
pub const RINT_ERRORS: u32 = RINT_RESP_ERROR
    | RINT_RESP_CRC_ERROR
    | RINT_DATA_CRC_ERROR
    | RINT_RESP_TIMEOUT
    | RINT_DATA_TIMEOUT
    | RINT_FIFO_RUN_ERROR
    | RINT_HARDWARE_LOCKED
    | RINT_START_BIT_ERROR
    | RINT_END_BIT_ERROR;
/// The bits that mean "no response": a response timeout on hardware, a response error alone in
/// QEMU.
pub const RINT_NO_RESPONSE: u32 = RINT_RESP_ERROR | RINT_RESP_TIMEOUT | RINT_DATA_TIMEOUT;

/// Names of the RINT error bits, for error messages.
pub const RINT_ERROR_NAMES: [(u32, &str); 9] = [
    (RINT_RESP_ERROR, "response error (no response, in QEMU)"),
    (RINT_RESP_CRC_ERROR, "response CRC error"),
    (RINT_DATA_CRC_ERROR, "data CRC error"),
    (RINT_RESP_TIMEOUT, "response timeout (no response)"),
    (RINT_DATA_TIMEOUT, "data timeout"),
    (RINT_FIFO_RUN_ERROR, "FIFO underrun/overrun"),
    (RINT_HARDWARE_LOCKED, "hardware locked"),
    (RINT_START_BIT_ERROR, "start bit error"),
    (RINT_END_BIT_ERROR, "end bit error"),
];

// STATUS.
pub const STATUS_FIFO_EMPTY: u32 = 1 << 2;
pub const STATUS_FIFO_FULL: u32 = 1 << 3;
/// Card present (not wired on the Orange Pi boards, whose card detect is a GPIO).
pub const STATUS_CARD_PRESENT: u32 = 1 << 8;
/// The card holds DAT0 low (busy).
pub const STATUS_CARD_BUSY: u32 = 1 << 9;
pub const STATUS_FIFO_LEVEL_SHIFT: u32 = 17;
pub const STATUS_FIFO_LEVEL_MASK: u32 = 0x3FFF;

/// The H3 clock controller (CCU, at 0x01C2_0000): what the SD/MMC controllers need of it.
pub mod ccu {
    /// Bus clock gating register 0: MMCn's AHB gate is bit 8 + n.
    pub const BUS_CLK_GATING_REG0: usize = 0x060;
    /// Bus soft reset register 0: MMCn's reset is bit 8 + n (1 = running, 0 = held in reset).
    pub const BUS_SOFT_RST_REG0: usize = 0x2C0;
    /// SDMMC0_CLK_REG; MMC1 and MMC2 follow at 0x08C and 0x090.
    pub const SDMMC0_CLK_REG: usize = 0x088;
    /// Bit of MMC0 in the gating and reset registers.
    pub const MMC0_BIT: u32 = 8;

    // SDMMCn_CLK_REG.
    pub const CLK_ENABLE: u32 = 1 << 31;
    /// Source select, bits 25:24.
    pub const CLK_SRC_SHIFT: u32 = 24;
    pub const CLK_SRC_OSC24M: u32 = 0;
    pub const CLK_SRC_PLL_PERIPH0: u32 = 1;
    /// Sample clock phase delay, bits 22:20.
    pub const CLK_SAMPLE_SHIFT: u32 = 20;
    /// Pre-divider N (divide by 2^N), bits 17:16.
    pub const CLK_N_SHIFT: u32 = 16;
    /// Output clock phase delay, bits 10:8.
    pub const CLK_OUTPUT_SHIFT: u32 = 8;
    /// Divider M - 1, bits 3:0.
    pub const CLK_M_MASK: u32 = 0xF;

    /// OSC24M, the source up to 24 MHz.
    pub const OSC24M_HZ: u32 = 24_000_000;

    /// PLL_PERIPH0_CTRL_REG: the 600 MHz peripheral PLL (U-Boot's "PLL6"), the source above 24
    /// MHz.
    pub const PLL_PERIPH0_CTRL_REG: usize = 0x028;
    pub const PLL_ENABLE: u32 = 1 << 31;
    pub const PLL_LOCK: u32 = 1 << 28;
    /// Factor N - 1, bits 12:8.
    pub const PLL_N_SHIFT: u32 = 8;
    /// Factor K - 1, bits 5:4.
    pub const PLL_K_SHIFT: u32 = 4;
}
