//! SDHCI register offsets and bits (SD Host Controller Simplified Specification v3.00, section 2),
//! as the 32-bit words this driver reads and writes: the BCM2835 Arasan controller accepts only
//! 32-bit accesses, so the 8- and 16-bit registers are named by the word that holds them and their
//! bits are given at their position in that word.

/// SDMA system address / argument 2 (unused: no DMA, no auto CMD23).
pub const SDMA_ARG2: usize = 0x00;
/// Block size (bits 11:0; 14:12 SDMA boundary) | block count (bits 31:16).
pub const BLOCK_SIZE_COUNT: usize = 0x04;
/// Command argument.
pub const ARGUMENT: usize = 0x08;
/// Transfer mode (bits 15:0) | command (bits 31:16); writing the command half issues it, so both
/// halves go in one 32-bit write.
pub const CMD_TRANSFER: usize = 0x0C;
/// Response words 0..3 (bits 39:8 of a 48-bit response in word 0; bits 127:8 of R2 in all four).
pub const RESPONSE: [usize; 4] = [0x10, 0x14, 0x18, 0x1C];
/// Buffer data port (PIO).
pub const DATA_PORT: usize = 0x20;
/// Present state (read-only).
pub const PRESENT_STATE: usize = 0x24;
/// Host control 1 (bits 7:0) | power control (15:8) | block gap control (23:16) | wakeup (31:24).
pub const HOST_CONTROL: usize = 0x28;
/// Clock control (bits 15:0) | timeout control (19:16) | software reset (26:24).
pub const CLOCK_CONTROL: usize = 0x2C;
/// Normal interrupt status (bits 15:0) | error interrupt status (31:16); write 1 to clear.
pub const INT_STATUS: usize = 0x30;
/// Status enables, same layout: a status bit is only ever set when enabled here.
pub const INT_STATUS_ENABLE: usize = 0x34;
/// Signal enables (interrupt lines), same layout; kept 0: the driver polls.
pub const INT_SIGNAL_ENABLE: usize = 0x38;
/// Auto CMD error status (bits 15:0) | host control 2 (31:16).
pub const AUTO_CMD_ERR_HOST_CONTROL2: usize = 0x3C;
/// Capabilities, low word.
pub const CAPABILITIES: usize = 0x40;
/// Maximum current capabilities (the driver does not read it; a simulated host answers 0).
pub const MAX_CURRENT_CAPS: usize = 0x48;
/// ADMA error status: bits 1:0 the state the engine stopped in, bit 2 length mismatch.
pub const ADMA_ERROR_STATUS: usize = 0x54;
/// ADMA system address (the descriptor table), low and high words.
pub const ADMA_ADDRESS: usize = 0x58;
pub const ADMA_ADDRESS_HI: usize = 0x5C;
/// Capabilities, high word (v3).
pub const CAPABILITIES_1: usize = 0x44;
/// Slot interrupt status (bits 15:0) | host controller version (31:16: spec version in 23:16).
pub const SLOT_STATUS_VERSION: usize = 0xFC;

// Transfer mode (CMD_TRANSFER bits 15:0).
pub const TM_DMA: u32 = 1 << 0;
pub const TM_BLOCK_COUNT_EN: u32 = 1 << 1;
pub const TM_AUTO_CMD12: u32 = 1 << 2;
pub const TM_READ: u32 = 1 << 4;
pub const TM_MULTI_BLOCK: u32 = 1 << 5;

// Command (CMD_TRANSFER bits 31:16).
pub const CMD_RESP_NONE: u32 = 0 << 16;
pub const CMD_RESP_136: u32 = 1 << 16;
pub const CMD_RESP_48: u32 = 2 << 16;
pub const CMD_RESP_48_BUSY: u32 = 3 << 16;
pub const CMD_CRC_CHECK: u32 = 1 << 19;
pub const CMD_INDEX_CHECK: u32 = 1 << 20;
pub const CMD_DATA_PRESENT: u32 = 1 << 21;
pub const CMD_TYPE_ABORT: u32 = 3 << 22;
pub const CMD_INDEX_SHIFT: u32 = 24;

// Present state.
pub const PS_CMD_INHIBIT: u32 = 1 << 0;
pub const PS_DAT_INHIBIT: u32 = 1 << 1;
pub const PS_DAT_ACTIVE: u32 = 1 << 2;
pub const PS_WRITE_ACTIVE: u32 = 1 << 8;
pub const PS_READ_ACTIVE: u32 = 1 << 9;
pub const PS_BUFFER_WRITE_ENABLE: u32 = 1 << 10;
pub const PS_BUFFER_READ_ENABLE: u32 = 1 << 11;
pub const PS_CARD_INSERTED: u32 = 1 << 16;
/// Write protect switch pin level: 1 = writes allowed, 0 = the card's switch is on "lock".
pub const PS_WRITE_ENABLED: u32 = 1 << 19;

// Host control 1 and power control (HOST_CONTROL word).
pub const HC_DATA_4BIT: u32 = 1 << 1;
pub const HC_HIGH_SPEED: u32 = 1 << 2;
/// DMA select (host control 1 bits 4:3): 0 SDMA, 0b10 ADMA2 32-bit.
pub const HC_DMA_SELECT_MASK: u32 = 0b11 << 3;
pub const HC_DMA_ADMA2_32: u32 = 0b10 << 3;
pub const PWR_ON: u32 = 1 << 8;
/// SD bus voltage select 3.3 V (0b111 in bits 11:9).
pub const PWR_3V3: u32 = 0b111 << 9;

// Clock control, timeout control, software reset (CLOCK_CONTROL word).
pub const CC_INTERNAL_EN: u32 = 1 << 0;
pub const CC_INTERNAL_STABLE: u32 = 1 << 1;
pub const CC_SD_EN: u32 = 1 << 2;
/// Frequency select bits 15:8 (v3: low 8 bits of the 10-bit divider) and 7:6 (v3: its top 2 bits).
pub const CC_DIVIDER_MASK: u32 = 0xFFC0;
pub const TIMEOUT_SHIFT: u32 = 16;
/// Data timeout counter TMCLK * 2^27, the largest the spec defines.
pub const TIMEOUT_MAX: u32 = 0xE;
pub const SRST_ALL: u32 = 1 << 24;
pub const SRST_CMD: u32 = 1 << 25;
pub const SRST_DAT: u32 = 1 << 26;

// Normal interrupt status (INT_STATUS bits 15:0).
pub const INT_CMD_COMPLETE: u32 = 1 << 0;
pub const INT_TRANSFER_COMPLETE: u32 = 1 << 1;
pub const INT_BUFFER_WRITE_READY: u32 = 1 << 4;
pub const INT_BUFFER_READ_READY: u32 = 1 << 5;
pub const INT_CARD_INSERTION: u32 = 1 << 6;
pub const INT_CARD_REMOVAL: u32 = 1 << 7;
/// Summary: some error status bit is set.
pub const INT_ERROR: u32 = 1 << 15;

// Error interrupt status (INT_STATUS bits 31:16), as bits of the 16-bit ERR_INT_STAT.
pub const ERR_CMD_TIMEOUT: u16 = 1 << 0;
pub const ERR_CMD_CRC: u16 = 1 << 1;
pub const ERR_CMD_END_BIT: u16 = 1 << 2;
pub const ERR_CMD_INDEX: u16 = 1 << 3;
pub const ERR_DATA_TIMEOUT: u16 = 1 << 4;
pub const ERR_DATA_CRC: u16 = 1 << 5;
pub const ERR_DATA_END_BIT: u16 = 1 << 6;
pub const ERR_CURRENT_LIMIT: u16 = 1 << 7;
pub const ERR_AUTO_CMD: u16 = 1 << 8;
pub const ERR_ADMA: u16 = 1 << 9;
/// Errors of the command line.
pub const ERR_CMD_LINE: u16 = ERR_CMD_TIMEOUT | ERR_CMD_CRC | ERR_CMD_END_BIT | ERR_CMD_INDEX;
/// Errors of the data lines.
pub const ERR_DAT_LINE: u16 = ERR_DATA_TIMEOUT | ERR_DATA_CRC | ERR_DATA_END_BIT;

/// The status bits the driver enables (and polls): command complete, transfer complete, buffer read
/// and write ready, and error bits 0-9. Card insertion/removal and card interrupts stay off.
pub const INT_ENABLED: u32 = INT_CMD_COMPLETE
    | INT_TRANSFER_COMPLETE
    | INT_BUFFER_WRITE_READY
    | INT_BUFFER_READ_READY
    | (0x03FF << 16);

// Host control 2 (AUTO_CMD_ERR_HOST_CONTROL2 bits 31:16).
/// UHS mode select (host control 2 bits 2:0): SDR12 0, SDR25 1, SDR50 2, SDR104 3, DDR50 4.
pub const HC2_UHS_MODE_SHIFT: u32 = 16;
pub const HC2_UHS_MODE_MASK: u32 = 0x7 << 16;
/// 1.8 V signalling enable (host control 2 bit 3).
pub const HC2_SIGNAL_1V8: u32 = 1 << 19;
/// Execute tuning (host control 2 bit 6): set to start, the host clears it when done.
pub const HC2_EXECUTE_TUNING: u32 = 1 << 22;
/// Sampling clock select (host control 2 bit 7): set by the host when tuning succeeded.
pub const HC2_SAMPLING_CLOCK: u32 = 1 << 23;

/// Present state: the DAT\[3:0\] line levels (bits 23:20).
pub const PS_DAT_LEVEL_SHIFT: u32 = 20;

// Capabilities (low word).
/// Base clock in MHz: bits 15:8 on v3, 13:8 on v1/v2 (0 = ask another way).
pub const CAPS_BASE_CLOCK_SHIFT: u32 = 8;
pub const CAPS_ADMA2: u32 = 1 << 19;
pub const CAPS_HIGH_SPEED: u32 = 1 << 21;
pub const CAPS_VOLTAGE_3V3: u32 = 1 << 24;
pub const CAPS_VOLTAGE_1V8: u32 = 1 << 26;

// Capabilities, high word (CAPABILITIES_1, v3).
pub const CAPS1_SDR50: u32 = 1 << 0;
pub const CAPS1_SDR104: u32 = 1 << 1;
pub const CAPS1_DDR50: u32 = 1 << 2;
/// SDR50 needs tuning too.
pub const CAPS1_TUNING_SDR50: u32 = 1 << 13;

/// Host controller spec version field (bits 23:16 of SLOT_STATUS_VERSION): 0 = 1.00, 1 = 2.00,
/// 2 = 3.00, 3+ = 4.x (handled as 3.00).
pub const VERSION_SHIFT: u32 = 16;
pub const SPEC_V3: u8 = 2;
