//! Registers of the BCM2835-family "sdhost" SD controller (Pi 3, Zero 2 W, Pi 2: bus 0x7E20_2000),
//! as Linux's `drivers/mmc/host/bcm2835.c` and QEMU's `bcm2835_sdhost.c` name them.

/// Command: index 5:0 and flags; NEW starts it and reads 1 until the controller has finished it.
pub const SDCMD: usize = 0x00;
/// Command argument.
pub const SDARG: usize = 0x04;
/// Data timeout, in SD clocks.
pub const SDTOUT: usize = 0x08;
/// Clock divider (11 bits): SD clock = core clock / (SDCDIV + 2).
pub const SDCDIV: usize = 0x0C;
/// Response words: a short response in SDRSP0, a long one's bits 127:0 in SDRSP0..3 (SDRSP0 =
/// bits 31:0, its low byte the CRC).
pub const SDRSP: [usize; 4] = [0x10, 0x14, 0x18, 0x1C];
/// Host status; write 1 to clear.
pub const SDHSTS: usize = 0x20;
/// Card power: 1 = on.
pub const SDVDD: usize = 0x30;
/// "Emergency debug mode": the state machine (3:0), FIFO words (8:4), FIFO thresholds, force data
/// mode.
pub const SDEDM: usize = 0x34;
/// Host configuration (reads back 0 on QEMU: the driver keeps its own copy).
pub const SDHCFG: usize = 0x38;
/// Block size in bytes.
pub const SDHBCT: usize = 0x3C;
/// The data FIFO.
pub const SDDATA: usize = 0x40;
/// Block count.
pub const SDHBLC: usize = 0x50;

pub const SDCMD_NEW: u32 = 0x8000;
pub const SDCMD_FAIL: u32 = 0x4000;
pub const SDCMD_BUSYWAIT: u32 = 0x0800;
pub const SDCMD_NO_RESPONSE: u32 = 0x0400;
pub const SDCMD_LONG_RESPONSE: u32 = 0x0200;
pub const SDCMD_WRITE: u32 = 0x0080;
pub const SDCMD_READ: u32 = 0x0040;
pub const SDCMD_INDEX: u32 = 0x3F;

pub const SDCDIV_MAX: u32 = 0x7FF;

pub const SDHSTS_BUSY_IRPT: u32 = 0x400;
pub const SDHSTS_BLOCK_IRPT: u32 = 0x200;
pub const SDHSTS_SDIO_IRPT: u32 = 0x100;
pub const SDHSTS_REW_TIMEOUT: u32 = 0x80;
pub const SDHSTS_CMD_TIMEOUT: u32 = 0x40;
pub const SDHSTS_CRC16: u32 = 0x20;
pub const SDHSTS_CRC7: u32 = 0x10;
pub const SDHSTS_FIFO_ERROR: u32 = 0x08;
pub const SDHSTS_DATA_FLAG: u32 = 0x01;
/// The error bits.
pub const SDHSTS_ERRORS: u32 =
    SDHSTS_REW_TIMEOUT | SDHSTS_CMD_TIMEOUT | SDHSTS_CRC16 | SDHSTS_CRC7 | SDHSTS_FIFO_ERROR;
/// Everything a write clears (Linux's SDHSTS_CLEAR_MASK).
pub const SDHSTS_CLEAR: u32 = 0x7F8;
/// Names of the error bits, for messages.
pub const SDHSTS_NAMES: [(u32, &str); 5] = [
    (SDHSTS_CMD_TIMEOUT, "command timeout"),
    (SDHSTS_REW_TIMEOUT, "data timeout"),
    (SDHSTS_CRC7, "command CRC"),
    (SDHSTS_CRC16, "data CRC"),
    (SDHSTS_FIFO_ERROR, "FIFO error"),
];

pub const SDHCFG_BUSY_IRPT_EN: u32 = 1 << 10;
pub const SDHCFG_SLOW_CARD: u32 = 1 << 3;
pub const SDHCFG_WIDE_EXT_BUS: u32 = 1 << 2;
pub const SDHCFG_WIDE_INT_BUS: u32 = 1 << 1;

pub const SDEDM_FSM_MASK: u32 = 0xF;
pub const SDEDM_FSM_IDENT: u32 = 0x0;
pub const SDEDM_FSM_DATA: u32 = 0x1;
pub const SDEDM_FSM_READDATA: u32 = 0x2;
pub const SDEDM_FSM_READWAIT: u32 = 0x4;
pub const SDEDM_FSM_READCRC: u32 = 0x5;
pub const SDEDM_FSM_WRITESTART1: u32 = 0xA;
pub const SDEDM_FIFO_SHIFT: u32 = 4;
pub const SDEDM_FIFO_MASK: u32 = 0x1F;
pub const SDEDM_WRITE_THRESHOLD_SHIFT: u32 = 9;
pub const SDEDM_READ_THRESHOLD_SHIFT: u32 = 14;
pub const SDEDM_THRESHOLD_MASK: u32 = 0x1F;
pub const SDEDM_FORCE_DATA_MODE: u32 = 1 << 19;
/// Both FIFO thresholds: 4 words (Linux: "a silicon bug" makes other values unreliable).
pub const FIFO_THRESHOLD: u32 = 4;
/// Words of the FIFO.
pub const FIFO_WORDS: u32 = 16;
/// Words of a multi-block DMA read left to programmed I/O (Linux: "the block doesn't manage the
/// FIFO DREQs properly for multi-block transfers").
pub const PIO_TAIL_WORDS: usize = 3;
