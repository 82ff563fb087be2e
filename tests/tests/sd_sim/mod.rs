//! A register-level fake SD host controller with an SD card behind it, for the SDHCI driver tests.
//!
//! The controller models what the driver touches of an SDHCI v2/v3 controller as the BCM2835
//! Arasan "EMMC" and QEMU's sdhci present it: block size/count, argument, transfer mode + command
//! (a write of the word issues the command), four response words (R2 without its CRC byte, auto
//! CMD12's response in word 3), the PIO data port, present state, host control + power, clock
//! control (10-bit v3 or 8-bit power-of-two v2 dividers, an internal clock that becomes stable after
//! a while, the SD clock), timeout control, software reset (one bit per write, the reset bit reads
//! 1 for a few microseconds), interrupt status (write 1 to clear, only enabled bits ever set, error
//! summary bit 15), status and signal enables, capabilities and version.
//!
//! The card is a state machine (idle → ready → ident → stby → tran ⇄ data, tran → rcv → prg → tran)
//! answering CMD0, 2, 3, 7, 8, 9, 12, 13, 16, 17, 18, 24, 25, 55 and ACMD6, ACMD41 with
//! R1/R1b/R2/R3/R6/R7 responses; SDHC (block addresses, CSD v2) or SDSC (byte addresses, CSD v1;
//! with or without CMD8). Anything else is an illegal command: no response, ILLEGAL_COMMAND in the
//! next status. Data comes from a byte vector or a pattern computed from the LBA; written blocks
//! are kept over it.
//!
//! Writes: CMD24 / CMD25 move the card to "rcv"; the controller raises buffer write ready, takes 128
//! words through the data port, sends the block (which the card then programs for [`PROGRAM_NS`]),
//! and after the last one (and the auto CMD12 of a CMD25) the card is in "prg" until programming
//! ends; the controller raises transfer complete at that point (or at once, with
//! [`HostSpec::early_write_complete`], so that only CMD13 tells when the card is done). CMD13 in
//! "prg" reports state 7 without READY_FOR_DATA. A write to a card whose CSD says
//! PERM_WRITE_PROTECT is answered with WP_VIOLATION and nothing is stored; the write-protect switch
//! ([`HostSpec::write_protect_switch`]) clears PRESENT_STATE bit 19.
//!
//! The slot: [`CardSpec::inserted`] = false leaves it empty (nothing answers on the bus), and
//! [`HostSpec::card_detect`] = false makes PRESENT_STATE's card-detect bits read 0 even with a card
//! in it, as Linux's broken-card-detection quirk for the BCM2835 Arasan expects. The driver's
//! [`Regs::barrier`] calls are counted, and register accesses outside a pair of them too.
//!
//! High Speed: the card answers CMD6 with its 64-byte status block, which the controller hands
//! over as one block of BLOCK_SIZE 64. The SD clock may exceed 25 MHz only once the card has
//! switched to High Speed, never 50 MHz, and (on a controller that has the bit) only with host
//! control 1's high-speed enable set; [`HostSpec::no_hispd_bit`] models the BCM2835 Arasan, where
//! setting that bit is the violation (Linux's `SDHCI_QUIRK_NO_HISPD_BIT`).
//!
//! UHS-I ([`HostSpec::uhs`]: capabilities with 1.8 V and SDR50 / SDR104 / DDR50): the I/O
//! voltage is host control 2's 1.8 V enable and, with [`HostSpec::external_regulator`] (the Pi
//! 4), the slot's regulator, which the driver switches through [`SimSlot`] (the board's hook, as
//! are the card's power cycles). PRESENT_STATE bits 23:20 read the DAT lines: low while a card
//! switches after CMD11. The clock restarting with the I/O at 1.8 V, at least 5 ms after the
//! enable, completes the card's switch. A command to a card at another signalling voltage than
//! the host's, a clock above the card's access mode, a UHS clock without host control 2's
//! matching UHS mode, or data in SDR104 (SDR50 too when the capabilities ask for tuning)
//! without a tuned sampling clock are violations (the untuned data also get CRC errors). DDR50
//! moves a block in half the clocks. Tuning: with host control 2's execute tuning set, CMD19's
//! block raises buffer read ready and is consumed by the host; after [`HostSpec::tuning_blocks`]
//! blocks the host clears execute tuning and selects the tuned sampling clock (never, with
//! [`Faults::tuning_fails`]).
//!
//! Time is virtual: every register access costs 200 ns, `delay_us` adds its microseconds, and
//! commands, blocks, resets and clock stabilisation take the time they would at the current SD
//! clock. Nothing happens in wall-clock time, so the tests are deterministic.
//!
//! Recorded: every command on the bus (index, ACMD or not, argument, SD clock, time, whether the
//! card answered, whether it was the controller's auto CMD12), every software reset, and
//! violations: things a driver must not do (issue a command while inhibited or without an SD clock,
//! identification above 400 kHz or below 100 kHz, data above 25 MHz, a wrong response type, change
//! the divider with the SD clock on, enable the SD clock before the internal clock is stable, two
//! writes within two SD clocks (the Arasan may drop the second), two reset bits in one write,
//! read an empty data port, DMA, interrupt signals, a 4-bit host with a 1-bit card, a transfer whose
//! direction does not match its command, a data port write with no write transfer or a full buffer,
//! a write command to a card that is still programming, ...).
//!
//! Vendor hosts ([`HostSpec::vendor`]): the Sophgo CV18xx DesignWare MSHC ([`Vendor::Cv18xx`]:
//! P_VENDOR_AREA1 at 0xE8 pointing at its vendor area at 0x200 with MSHC_CTRL, PHY_TX_RX_DLY
//! (0x240) and PHY_CONFIG; a CMD line reset that leaves command complete set, as Linux's
//! `dwcmshc_reset` says; no ADMA2 descriptor may cross a 128 MiB boundary) and the SpacemiT K1
//! ([`Vendor::K1`]: TX_CFG at 0x11C). A reset of the whole controller clears their vendor
//! registers and leaves host control 2 at [`HostSpec::host2_after_reset`] (what a boot loader left,
//! on a controller whose reset keeps it: the pessimistic model). The simulator demands what
//! Linux's drivers set (the CV18xx vendor PHY as `cv18xx_sdhci_reset` programs it; the K1's
//! TX_INT_CLK_SEL, as the vendor driver sets it for an SD slot) before any data moves, and flags
//! preset value enable, host version 4 mode and 1.8 V on these 3.3 V hosts, and any write to the
//! K1's PHY registers (the vendor leaves the SD slot's PHY alone). The capabilities may report a
//! base clock other than the true one ([`HostSpec::caps_base_mhz`]), and the DMA windows may
//! start anywhere in the bus space ([`HostSpec::bus_base`]).
//!
//! Faults: a CRC error on the response of the Nth command or on the Nth data block (transient), a
//! permanently bad block (every read of it has a data CRC error), a card that never finishes
//! ACMD41, a card that stops answering after N blocks, and a controller that reports no timeouts
//! (so only the driver's deadlines end a wait). For writes: a CRC error on the Nth block the card
//! receives, a card that refuses writes (WP_VIOLATION), and a card that never finishes programming.
#![allow(dead_code)]

use super::dma_mem::{DmaRam, HasDmaRam, MemOp, SimDmaOf};
pub use super::sd_card_sim::*;
use drivers::sdhci::{Clock, Config, Regs, Sdhci, Slot};
use std::cell::RefCell;
use std::rc::Rc;

// The register map is the driver's: the simulator models the hardware those offsets and bits name.
use drivers::sdhci::regs::*;

// The normal interrupt status bits, as the 16-bit NORMAL_INT_STAT the simulator keeps.
/// Command complete.
const N_CC: u16 = INT_CMD_COMPLETE as u16;
/// Transfer complete.
const N_TC: u16 = INT_TRANSFER_COMPLETE as u16;
/// Buffer write ready.
const N_BWR: u16 = INT_BUFFER_WRITE_READY as u16;
/// Buffer read ready.
const N_BRR: u16 = INT_BUFFER_READ_READY as u16;
/// The first bus address [`SimDma`] hands out.
pub const BUS_BASE: u32 = 0x4000_0000;

/// Cost of one `now_us` call.
pub const NOW_NS: u64 = 20;
/// The internal clock becomes stable this long after it is enabled.
pub const CLOCK_STABLE_NS: u64 = 10_000;
/// Read access time before the first block.
pub const NAC_NS: u64 = 50_000;

/// The controller.
#[derive(Debug, Clone, Copy)]
pub struct HostSpec {
    /// Spec version field: 1 = SDHCI 2.00 (8-bit power-of-two dividers), 2 = 3.00 (10-bit).
    pub version: u8,
    /// The true base clock.
    pub base_clock_hz: u32,
    /// Report the base clock (in MHz) in the capabilities register; the BCM2835 reports none.
    pub caps_base_clock: bool,
    /// The controller raises a data timeout this long after a block fails to arrive (`None`: never).
    pub data_timeout_us: Option<u64>,
    /// The controller raises no timeout errors at all (neither command nor data): a missing
    /// response or block leaves it waiting until the driver resets it.
    pub silent: bool,
    /// Flag writes closer than two SD clocks (the Arasan's lost-write problem).
    pub arasan_write_check: bool,
    /// The card's write-protect switch is on "lock": PRESENT_STATE bit 19 reads 0.
    pub write_protect_switch: bool,
    /// Raise transfer complete of a write when the last block is sent, before the card has
    /// finished programming (only CMD13 then tells when it is done).
    pub early_write_complete: bool,
    /// PRESENT_STATE reports the card (bits 16 and 18) when there is one; `false`: they read 0
    /// whatever is in the slot (Linux's SDHCI_QUIRK_BROKEN_CARD_DETECTION on the BCM2835 Arasan).
    pub card_detect: bool,
    /// The controller has no high-speed enable bit (the BCM2835 Arasan): setting host control 1
    /// bit 2 is a violation, and High Speed runs without it.
    pub no_hispd_bit: bool,
    /// UHS-I capabilities: 1.8 V in CAPABILITIES, these CAPABILITIES_1 bits (SDR50 bit 0, SDR104
    /// bit 1, DDR50 bit 2, tuning for SDR50 bit 13); 0: none.
    pub uhs: u32,
    /// The 1.8 V I/O rail is a regulator outside the controller ([`SimSlot`]): host control 2's
    /// enable alone does not switch it (the Pi 4's EMMC2).
    pub external_regulator: bool,
    /// The board refuses to switch the regulator.
    pub regulator_refuses: bool,
    /// CMD19 blocks until tuning completes.
    pub tuning_blocks: u32,
    /// ADMA2 in the capabilities (bit 19), and the engine behind it.
    pub adma: bool,
    /// A vendor host's registers and quirks (module docs); [`Vendor::None`]: a standard host.
    pub vendor: Vendor,
    /// The capabilities report this base clock in MHz instead of the true one (0: none).
    pub caps_base_mhz: Option<u32>,
    /// Host control 2 (its 16 bits in the word's upper half) after a reset of the whole
    /// controller, on a vendor host.
    pub host2_after_reset: u32,
    /// The bus address of the first DMA window.
    pub bus_base: u32,
}

/// Which vendor host (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    None,
    Cv18xx,
    K1,
}

/// The CV18xx vendor area, and what Linux's `cv18xx_sdhci_reset` leaves in it.
pub const CV18XX_AREA: usize = 0x200;
pub const CV18XX_PHY_DELAYS: u32 = (1 << 8) | (1 << 24);
/// The K1's TX_CFG and its TX_INT_CLK_SEL.
pub const K1_TX_CFG: usize = 0x11C;
pub const K1_TX_INT_CLK_SEL: u32 = 1 << 30;
/// The DesignWare ADMA2 boundary.
pub const BOUNDARY: u32 = 128 << 20;

impl HostSpec {
    /// A BCM2835-like SDHCI 3.00 controller with the given base clock reported in the
    /// capabilities.
    pub fn v3(base_clock_hz: u32) -> HostSpec {
        HostSpec {
            version: 2,
            base_clock_hz,
            caps_base_clock: true,
            data_timeout_us: Some(100_000),
            silent: false,
            arasan_write_check: true,
            write_protect_switch: false,
            early_write_complete: false,
            card_detect: true,
            no_hispd_bit: false,
            uhs: 0,
            external_regulator: false,
            regulator_refuses: false,
            tuning_blocks: 4,
            adma: false,
            vendor: Vendor::None,
            caps_base_mhz: None,
            host2_after_reset: 0,
            bus_base: BUS_BASE,
        }
    }

    /// The Milk-V Duo's SD host as this simulator sees it: the CV18xx DesignWare MSHC (SDHCI
    /// 4.00 register set) on a 375 MHz clock, ADMA2, capabilities that report 1.8 V and the UHS
    /// modes (the IP's, not the 3.3 V-only board's) and a base clock of 200 MHz (wrong: Linux
    /// does not read it), and a host control 2 a boot loader left with preset values, host
    /// version 4 mode and 1.8 V on.
    pub fn cv18xx() -> HostSpec {
        HostSpec {
            version: 3,
            adma: true,
            arasan_write_check: false,
            card_detect: false,
            uhs: 0b111,
            vendor: Vendor::Cv18xx,
            caps_base_mhz: Some(200),
            host2_after_reset: (1 << 31) | (1 << 28) | (1 << 19),
            ..HostSpec::v3(375_000_000)
        }
    }

    /// The SpacemiT K1's SD host: SDHCI 3.00 on its 204.8 MHz `io` clock, ADMA2, capabilities
    /// with no base clock, host control 2 left with preset values on.
    pub fn k1() -> HostSpec {
        HostSpec {
            adma: true,
            arasan_write_check: false,
            card_detect: false,
            uhs: 0b111,
            vendor: Vendor::K1,
            caps_base_mhz: Some(0),
            host2_after_reset: 1 << 31,
            ..HostSpec::v3(204_800_000)
        }
    }

    /// The Pi 4's EMMC2 as this simulator sees it: SDHCI 3.00 on a 100 MHz base clock, DDR50 and
    /// SDR50 in its capabilities, the 1.8 V rail on an external regulator.
    pub fn emmc2() -> HostSpec {
        HostSpec {
            uhs: 0b101 | 1 << 1,
            external_regulator: true,
            ..HostSpec::v3(100_000_000)
        }
    }

    pub fn v2(base_clock_hz: u32) -> HostSpec {
        HostSpec {
            version: 1,
            ..HostSpec::v3(base_clock_hz)
        }
    }

    fn caps(&self) -> u32 {
        // QEMU's BCM2835 capabilities without the clock fields: max block 1024, high speed, 3.3 V
        // (1.8 V only with UHS); no DMA.
        let mut caps = 0x0121_0080;
        if self.uhs != 0 {
            caps |= 1 << 26;
        }
        if self.adma {
            caps |= 1 << 19;
        }
        if let Some(mhz) = self.caps_base_mhz {
            caps |= (mhz & 0xFF) << 8;
        } else if self.caps_base_clock {
            let mhz = self.base_clock_hz / 1_000_000;
            let mask = if self.version >= 2 { 0xFF } else { 0x3F };
            if mhz <= mask {
                caps |= mhz << 8;
            }
        }
        caps
    }
}

faults! {
    /// 0-based indices (over all blocks the card receives) of written blocks with a CRC error (the
    /// card does not store them).
    write_crc_at: Vec<u64>,
    /// The card refuses every write with WP_VIOLATION (a protected group, say), whatever its CSD.
    wp_violation: bool,
    /// The card never finishes programming a written block.
    stuck_programming: bool,
    /// Every data block sent while the SD clock is above this many Hz has a data CRC error (a
    /// board whose traces cannot carry the clock).
    crc_above_hz: Option<f64>,
    /// Tuning never completes (execute tuning stays set).
    tuning_fails: bool,
    /// 0-based indices (over all ADMA transfers) of transfers that end in an ADMA error.
    adma_error_at: Vec<u64>,
    /// Every ADMA transfer ends in an ADMA error.
    adma_error_always: bool,
}

/// A command seen on the bus.
#[derive(Debug, Clone, PartialEq)]
pub struct BusCmd {
    pub index: u8,
    /// An application command (after CMD55).
    pub app: bool,
    pub arg: u32,
    /// SD clock at the time.
    pub clock_hz: f64,
    pub at_us: u64,
    /// The card answered.
    pub answered: bool,
    /// Sent by the controller (auto CMD12).
    pub auto: bool,
    /// Blocks the controller was set up to read or write (0 for commands without data).
    pub blocks: u32,
}

impl BusCmd {
    pub fn name(&self) -> String {
        format!("{}{}", if self.app { "ACMD" } else { "CMD" }, self.index)
    }
}

/// A command in flight in the controller.
#[derive(Debug)]
struct Pending {
    at: u64,
    answer: Option<Answer>,
    crc_error: bool,
    busy: bool,
    data: bool,
}

/// What the card's next block turned out to be.
enum Fetched {
    Block(Vec<u8>),
    /// Consumed by the host's tuning engine.
    Taken,
    /// A CRC error: the transfer ended.
    Failed,
    /// No block: the transfer stalls.
    Nothing,
}

/// Where the ADMA2 engine is in its descriptor table.
#[derive(Debug, Clone, Copy)]
struct AdmaPos {
    /// Bus address of the next descriptor.
    desc: u32,
    /// Bytes left in the current descriptor, at `addr`.
    left: usize,
    addr: u32,
    /// The current descriptor has the end bit.
    ended: bool,
}

/// A data transfer in the controller.
#[derive(Debug)]
struct Xfer {
    /// Moved by the ADMA2 engine.
    adma: Option<AdmaPos>,
    /// Host to card.
    write: bool,
    multi: bool,
    auto12: bool,
    /// Blocks still to hand to the host (to take from it, for a write).
    remaining: u32,
    /// Read: a block waiting in the buffer for the host. Write: the buffer the host is filling
    /// (`None` while a full one is on its way to the card).
    buf: Option<Vec<u8>>,
    /// Write: the full block on its way to the card (arriving at `next_at`).
    data: Option<Vec<u8>>,
    pos: usize,
    /// When the next block arrives (None: nothing coming).
    next_at: Option<u64>,
    /// Since when the controller has been waiting for a block that does not come.
    stalled_since: Option<u64>,
}

/// The whole simulated machine.
#[derive(Debug)]
pub struct State {
    host: HostSpec,
    faults: Faults,
    now_ns: u64,
    // Registers.
    blksize: u16,
    blkcnt: u16,
    arg: u32,
    trnmod: u16,
    cmdreg: u16,
    resp: [u32; 4],
    hostctl: u8,
    power: u8,
    clkcon: u16,
    timeout: u8,
    norint: u16,
    errint: u16,
    norint_en: u16,
    errint_en: u16,
    sig_en: u32,
    host2: u32,
    /// The slot's external 1.8 V regulator is on.
    regulator_1v8: bool,
    /// When the host's I/O last went to 1.8 V.
    v18_since: Option<u64>,
    /// CMD19 blocks taken by the tuning engine since execute tuning was set.
    tuning_seen: u32,
    /// Power cycles through the slot.
    pub slot_power_cycles: u32,
    /// The memory the ADMA2 engine sees.
    dma: DmaRam,
    adma_addr: u32,
    /// ADMA error status (bits 1:0 state, bit 2 length mismatch).
    adma_err: u32,
    /// ADMA transfers started.
    pub dma_transfers: u64,
    /// Vendor registers written (offset, value), cleared by a reset of the whole controller.
    vendor_regs: Vec<(usize, u32)>,
    /// Command complete left set by a CMD line reset (the DesignWare quirk), not yet cleared.
    stale_cc: bool,
    /// Time the bus was busy, by the clock model: command and response bits, the card's access
    /// time before a read's first block, each block's bits (on 4 lines, both edges in DDR50),
    /// CRC and start and end bits.
    pub bus_ns: u64,
    reset_until: u64,
    reset_bits: u8,
    stable_at: Option<u64>,
    cmd_inhibit: bool,
    dat_inhibit: bool,
    pending: Option<Pending>,
    busy_until: Option<u64>,
    xfer: Option<Xfer>,
    /// A write's transfer complete is due then (the card's busy ends).
    write_done_at: Option<u64>,
    last_write_ns: Option<u64>,
    card: Card,
    // Records.
    pub log: Vec<BusCmd>,
    pub resets: Vec<u8>,
    pub violations: Vec<String>,
    pub blocks_sent: u64,
    /// Blocks the card has received from writes (stored or not).
    pub blocks_received: u64,
    commands_seen: u64,
    /// Register accesses made outside a pair of barriers (the driver's entry and exit).
    pub unfenced: u64,
    /// Register accesses (reads and writes), the CPU's share of the work.
    pub accesses: u64,
    /// Barriers seen; an odd count means inside an operation.
    pub barriers: u64,
}

host_sim_handles!();

/// The controller's registers, for the driver.
#[derive(Debug)]
pub struct SimRegs(Rc<RefCell<State>>);

impl HasDmaRam for State {
    fn ram(&mut self) -> &mut DmaRam {
        &mut self.dma
    }

    fn violation(&mut self, what: String) {
        State::violation(self, what)
    }
}

/// The board's side of the slot, for the driver: the external 1.8 V regulator and the card's
/// power.
#[derive(Debug)]
pub struct SimSlot(Rc<RefCell<State>>);

impl Slot for SimSlot {
    #[inline(never)]
    fn set_signal_1v8(&mut self, on: bool) -> bool {
        let mut s = self.0.borrow_mut();
        if on && s.host.regulator_refuses {
            return false;
        }
        let before = s.io_1v8();
        s.regulator_1v8 = on;
        s.note_io(before);
        true
    }

    #[inline(never)]
    fn power_cycle(&mut self, off_us: u32) {
        let mut s = self.0.borrow_mut();
        s.slot_power_cycles += 1;
        s.card.powered = false;
        s.card.power_cycle();
        s.now_ns += off_us as u64 * 1000;
        s.card.powered = s.power & 1 != 0;
        s.advance();
    }
}

impl Regs for SimRegs {
    #[inline(never)]
    fn read32(&mut self, off: usize) -> u32 {
        self.0.borrow_mut().read(off)
    }

    #[inline(never)]
    fn write32(&mut self, off: usize, v: u32) {
        self.0.borrow_mut().write(off, v)
    }

    #[inline(never)]
    fn barrier(&mut self) {
        self.0.borrow_mut().barriers += 1;
    }
}

impl Clock for SimClock {
    #[inline(never)]
    fn now_us(&mut self) -> u64 {
        let mut s = self.0.borrow_mut();
        s.now_ns += NOW_NS;
        s.now_ns / 1000
    }

    #[inline(never)]
    fn delay_us(&mut self, us: u32) {
        let mut s = self.0.borrow_mut();
        s.now_ns += us as u64 * 1000;
        s.advance();
    }
}

impl Sim {
    pub fn new(host: HostSpec, card: CardSpec, faults: Faults) -> Sim {
        let (wp_violation, stuck_programming) = (faults.wp_violation, faults.stuck_programming);
        let state = State {
            host,
            faults,
            now_ns: 0,
            blksize: 0,
            blkcnt: 0,
            arg: 0,
            trnmod: 0,
            cmdreg: 0,
            resp: [0; 4],
            hostctl: 0,
            power: 0,
            clkcon: 0,
            timeout: 0,
            norint: 0,
            errint: 0,
            norint_en: 0,
            errint_en: 0,
            sig_en: 0,
            host2: match host.vendor {
                Vendor::None => 0,
                _ => host.host2_after_reset,
            },
            regulator_1v8: false,
            v18_since: None,
            tuning_seen: 0,
            slot_power_cycles: 0,
            dma: DmaRam::new(host.bus_base),
            vendor_regs: Vec::new(),
            stale_cc: false,
            adma_addr: 0,
            adma_err: 0,
            dma_transfers: 0,
            bus_ns: 0,
            reset_until: 0,
            reset_bits: 0,
            stable_at: None,
            cmd_inhibit: false,
            dat_inhibit: false,
            pending: None,
            busy_until: None,
            xfer: None,
            write_done_at: None,
            last_write_ns: None,
            card: Card::new(card, wp_violation, stuck_programming),
            log: Vec::new(),
            resets: Vec::new(),
            violations: Vec::new(),
            blocks_sent: 0,
            blocks_received: 0,
            commands_seen: 0,
            unfenced: 0,
            accesses: 0,
            barriers: 0,
        };
        Sim(Rc::new(RefCell::new(state)))
    }

    pub fn regs(&self) -> SimRegs {
        SimRegs(self.0.clone())
    }

    pub fn slot(&self) -> SimSlot {
        SimSlot(self.0.clone())
    }

    /// Power cycles the driver asked of the slot.
    pub fn slot_power_cycles(&self) -> u32 {
        self.0.borrow().slot_power_cycles
    }

    /// Run `f` on the state (e.g. to change faults in the middle of a test).
    pub fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.borrow_mut())
    }

    /// Software resets written, as the reset byte (1 = all, 2 = CMD, 4 = DAT).
    pub fn resets(&self) -> Vec<u8> {
        self.0.borrow().resets.clone()
    }

    pub fn count_resets(&self, bit: u8) -> usize {
        self.0.borrow().resets.iter().filter(|&&b| b == bit).count()
    }

    pub fn set_faults(&self, faults: Faults) {
        let mut s = self.0.borrow_mut();
        s.card.wp_violation = faults.wp_violation;
        s.card.stuck_programming = faults.stuck_programming;
        s.faults = faults;
    }

    /// Blocks the card has received from writes so far (the index the next one gets in
    /// [`Faults::write_crc_at`]).
    pub fn blocks_received(&self) -> u64 {
        self.0.borrow().blocks_received
    }

    /// The card's CURRENT_STATE now (4 = tran, 6 = rcv, 7 = prg).
    pub fn card_state(&self) -> u8 {
        let mut s = self.0.borrow_mut();
        let now = s.now_ns;
        s.card.tick(now);
        s.card.state as u8
    }

    /// The SD clock now.
    pub fn sd_clock_hz(&self) -> f64 {
        self.0.borrow().sd_clock_hz()
    }

    pub fn host_4bit(&self) -> bool {
        self.0.borrow().hostctl & 2 != 0
    }

    /// Was a card ever selected into the transfer state and is it there now?
    pub fn card_in_tran(&self) -> bool {
        self.0.borrow().card.state == CardState::Tran
    }

    pub fn signal_enables(&self) -> u32 {
        self.0.borrow().sig_en
    }

    /// A vendor register's value now (0 if never written since the last reset).
    pub fn vendor_reg(&self, off: usize) -> u32 {
        self.0.borrow().vendor_reg(off)
    }

    /// Host control 2 now (in the word's upper half).
    pub fn host2(&self) -> u32 {
        self.0.borrow().host2
    }

    /// (barriers seen, register accesses outside a pair of them).
    pub fn fencing(&self) -> (u64, u64) {
        let s = self.0.borrow();
        (s.barriers, s.unfenced)
    }
}

impl State {
    /// The faults, to change in the middle of a test.
    pub fn faults_mut(&mut self) -> &mut Faults {
        &mut self.faults
    }

    fn violation(&mut self, what: String) {
        let at = self.now_ns / 1000;
        self.violations.push(format!("at {at} us: {what}"));
    }

    /// The host's I/O signals at 1.8 V: host control 2's enable and, with an external
    /// regulator, the regulator.
    fn io_1v8(&self) -> bool {
        self.host2 & (1 << 19) != 0 && (!self.host.external_regulator || self.regulator_1v8)
    }

    /// The I/O voltage may have changed (it was 1.8 V if `before`): note when it went to 1.8 V.
    fn note_io(&mut self, before: bool) {
        match (before, self.io_1v8()) {
            (false, true) => self.v18_since = Some(self.now_ns),
            (_, false) => self.v18_since = None,
            _ => {}
        }
    }

    /// Data in a mode that needs tuning, without a tuned sampling clock.
    fn untuned(&self) -> bool {
        let needs = self.card.access_mode == 3
            || (self.card.access_mode == 2 && self.host.uhs & (1 << 13) != 0);
        needs && self.host2 & (1 << 23) == 0
    }

    /// The host's tuning engine takes a CMD19 block: after enough, tuned (unless it fails).
    fn tuning_block_taken(&mut self) {
        self.tuning_seen += 1;
        if self.tuning_seen >= self.host.tuning_blocks && !self.faults.tuning_fails {
            self.host2 = (self.host2 & !(1 << 22)) | 1 << 23;
        }
    }

    fn divisor(&mut self) -> u32 {
        let c = self.clkcon as u32;
        if self.host.version >= 2 {
            let n = ((c >> 8) & 0xFF) | ((c >> 6) & 3) << 8;
            if n == 0 {
                1
            } else {
                2 * n
            }
        } else {
            let n = (c >> 8) & 0xFF;
            if n == 0 {
                1
            } else {
                2 * n
            }
        }
    }

    fn internal_stable(&self) -> bool {
        self.clkcon & 1 != 0 && self.stable_at.is_some_and(|t| self.now_ns >= t)
    }

    /// The SD clock now (0 when off).
    pub fn sd_clock_hz(&self) -> f64 {
        if self.clkcon & 4 == 0 || !self.internal_stable() || self.power & 1 == 0 {
            return 0.0;
        }
        let c = self.clkcon as u32;
        let n = if self.host.version >= 2 {
            ((c >> 8) & 0xFF) | ((c >> 6) & 3) << 8
        } else {
            (c >> 8) & 0xFF
        };
        let div = if n == 0 { 1 } else { 2 * n };
        self.host.base_clock_hz as f64 / div as f64
    }

    /// Nanoseconds for `clocks` SD clocks (a slow default when the clock is off).
    fn clocks_ns(&self, clocks: u64) -> u64 {
        let hz = self.sd_clock_hz();
        if hz <= 0.0 {
            return clocks * 10_000;
        }
        (clocks as f64 * 1e9 / hz).ceil() as u64
    }

    fn set_norm(&mut self, bits: u16) {
        self.norint |= bits & self.norint_en;
    }

    fn set_err(&mut self, bits: u16) {
        self.errint |= bits & self.errint_en;
    }

    /// Run everything due by now.
    fn advance(&mut self) {
        let now = self.now_ns;
        if let Some(p) = self.pending.as_ref() {
            if p.at <= now {
                let p = self.pending.take().unwrap();
                self.complete(p);
            }
        }
        if let Some(t) = self.busy_until {
            if t <= self.now_ns {
                self.busy_until = None;
                self.dat_inhibit = false;
                self.set_norm(N_TC);
            }
        }
        let now = self.now_ns;
        self.card.tick(now);
        if let Some(t) = self.write_done_at {
            if t <= now {
                self.write_done_at = None;
                self.xfer = None;
                self.dat_inhibit = false;
                self.set_norm(N_TC);
            }
        }
        if self.xfer.as_ref().is_some_and(|x| x.write) {
            self.advance_write();
        } else {
            self.advance_data();
        }
    }

    /// A written block reaches the card when its time has come; the last one ends in programming,
    /// then transfer complete (a data timeout if the card never finishes).
    fn advance_write(&mut self) {
        let now = self.now_ns;
        let Some(x) = self.xfer.as_mut() else { return };
        match x.next_at {
            Some(at) if at <= now => {
                x.next_at = None;
                let data = x.data.take().unwrap_or_default();
                self.deliver_block(at, data);
            }
            Some(_) => {}
            None => {
                if let (Some(since), Some(limit), false) =
                    (x.stalled_since, self.host.data_timeout_us, self.host.silent)
                {
                    if now >= since + limit * 1000 {
                        self.xfer = None;
                        self.set_err(ERR_DATA_TIMEOUT);
                    }
                }
            }
        }
    }

    /// Block `data`, sent at `at`, arrives at the card.
    fn deliver_block(&mut self, at: u64, data: Vec<u8>) {
        let now = self.now_ns;
        let card = &self.card;
        let target = card
            .recv
            .filter(|&lba| card.state == CardState::Rcv && !card.dead && lba < card.blocks());
        let Some(lba) = target else {
            // Nobody takes the block: the controller waits for a CRC status that never comes.
            if let Some(x) = self.xfer.as_mut() {
                x.stalled_since = Some(at);
            }
            return;
        };
        let k = self.blocks_received;
        self.blocks_received += 1;
        if self.faults.write_crc_at.contains(&k) {
            // CRC status "error": the card drops the block; DAT stays inhibited until SRST_DAT.
            self.set_err(ERR_DATA_CRC);
            self.xfer = None;
            return;
        }
        self.card.written.insert(lba, data);
        self.card.recv = Some(lba + 1);
        let x = self.xfer.as_mut().unwrap();
        x.remaining -= 1;
        if x.remaining > 0 {
            x.buf = Some(Vec::with_capacity(512));
            self.set_norm(N_BWR);
            return;
        }
        // The last block: a single-block write ends in programming; a multi-block one when the
        // controller's CMD12 (or the driver's) stops it.
        let (multi, auto12) = (x.multi, x.auto12);
        if multi && auto12 {
            self.bus_command(12, 0, true, 0);
        } else if !multi {
            self.card.recv = None;
            self.card.program(now);
        }
        let done = if self.host.early_write_complete || self.card.state == CardState::Rcv {
            // Early, or still receiving (the driver's CMD12 comes next).
            Some(now)
        } else if self.card.state == CardState::Prg {
            // Busy for as long as the card programs (for ever: a data timeout).
            self.card.prg_until
        } else {
            Some(now)
        };
        match done {
            Some(t) if t > now => self.write_done_at = Some(t),
            Some(_) => {
                self.xfer = None;
                self.dat_inhibit = false;
                self.set_norm(N_TC);
            }
            None => {
                let x = self.xfer.as_mut().unwrap();
                x.stalled_since = Some(now);
            }
        }
    }

    /// The host writes a word of a block to the data port.
    fn write_data(&mut self, v: u32) {
        let block_at = self.now_ns + self.block_ns();
        let Some(x) = self.xfer.as_mut().filter(|x| x.write) else {
            self.violation("data port write with no write transfer".into());
            return;
        };
        let Some(buf) = x.buf.as_mut() else {
            self.violation("data port write while the buffer is not ready for one".into());
            return;
        };
        buf.extend_from_slice(&v.to_le_bytes());
        if buf.len() == 512 {
            x.data = x.buf.take();
            x.next_at = Some(block_at);
        }
    }

    /// The response of a command arrives (or does not).
    fn complete(&mut self, p: Pending) {
        match p.answer {
            None => {
                if self.cmdreg & 3 == 0 {
                    // No response expected: done once sent.
                    self.cmd_inhibit = false;
                    self.set_norm(N_CC);
                } else if !self.host.silent {
                    self.cmd_inhibit = false;
                    self.set_err(ERR_CMD_TIMEOUT);
                }
                // Silent: the controller keeps waiting (until SRST_CMD).
            }
            Some(a) => {
                match a {
                    Answer::Short(v) => self.resp = [v, 0, 0, 0],
                    Answer::Long(b) => {
                        let w = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
                        self.resp = [
                            w(11),
                            w(7),
                            w(3),
                            (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32,
                        ];
                    }
                }
                self.cmd_inhibit = false;
                if p.crc_error {
                    self.set_err(ERR_CMD_CRC);
                    // The card did run the command: a CMD17 block went out unseen.
                    if p.data && self.card.single {
                        self.card.state = CardState::Tran;
                        self.card.stream = None;
                        self.card.register = None;
                    }
                    return;
                }
                self.set_norm(N_CC);
                if p.busy {
                    self.busy_until = Some(self.now_ns + BUSY_NS);
                }
                if p.data && self.trnmod & (1 << 4) == 0 {
                    // A write: the buffer is empty, the host may fill it.
                    let multi = self.trnmod & (1 << 5) != 0;
                    self.xfer = Some(Xfer {
                        adma: None,
                        write: true,
                        multi,
                        auto12: multi && self.trnmod & (1 << 2) != 0,
                        remaining: if multi { self.blkcnt as u32 } else { 1 },
                        buf: Some(Vec::with_capacity(512)),
                        data: None,
                        pos: 0,
                        next_at: None,
                        stalled_since: None,
                    });
                    self.set_norm(N_BWR);
                } else if p.data {
                    let multi = self.trnmod & (1 << 5) != 0;
                    let remaining = if multi { self.blkcnt as u32 } else { 1 };
                    let first = self.now_ns + NAC_NS + self.block_ns();
                    self.bus_ns += NAC_NS;
                    let adma = (self.trnmod & 1 != 0).then(|| {
                        self.dma_transfers += 1;
                        self.dma.ops.push(MemOp::Transfer { blocks: remaining });
                        AdmaPos {
                            desc: self.adma_addr,
                            left: 0,
                            addr: 0,
                            ended: false,
                        }
                    });
                    let fail = adma.is_some()
                        && (self.faults.adma_error_always
                            || self
                                .faults
                                .adma_error_at
                                .contains(&(self.dma_transfers - 1)));
                    if fail {
                        // A bus error on the first descriptor fetch.
                        self.adma_err = 1;
                        self.set_err(ERR_ADMA);
                        return;
                    }
                    self.xfer = Some(Xfer {
                        adma,
                        write: false,
                        data: None,
                        multi,
                        auto12: multi && self.trnmod & (1 << 2) != 0,
                        remaining,
                        buf: None,
                        pos: 0,
                        next_at: Some(first),
                        stalled_since: None,
                    });
                }
            }
        }
    }

    /// One block of BLOCK_SIZE bytes on the bus: its bits over the data lines, the CRC16 and the
    /// start and end bits.
    fn block_ns(&self) -> u64 {
        let width = if self.hostctl & 2 != 0 { 4 } else { 1 };
        let edges = if self.card.ddr() { 2 } else { 1 };
        let bits = (self.blksize & 0xFFF).max(4) as u64 * 8;
        self.clocks_ns(bits / width / edges + 16 + 2)
    }

    /// Blocks arrive, faults fire, the data timeout counts.
    fn advance_data(&mut self) {
        let now = self.now_ns;
        let Some(x) = self.xfer.as_mut() else { return };
        if x.adma.is_some() {
            self.advance_adma();
            return;
        }
        if x.buf.is_some() || x.remaining == 0 {
            return;
        }
        if let Some(at) = x.next_at {
            if at > now {
                return;
            }
            x.next_at = None;
            match self.fetch_block(at) {
                Fetched::Block(data) => {
                    let x = self.xfer.as_mut().unwrap();
                    x.buf = Some(data);
                    x.pos = 0;
                    self.set_norm(N_BRR);
                    return;
                }
                Fetched::Taken | Fetched::Failed => return,
                Fetched::Nothing => {}
            }
        }
        self.check_stall(now);
    }

    /// A transfer waiting for a block that never comes ends in a data timeout after the host's
    /// limit (never, on a silent host).
    fn check_stall(&mut self, now: u64) {
        let Some(x) = self.xfer.as_mut() else { return };
        if let (Some(since), Some(limit), false) =
            (x.stalled_since, self.host.data_timeout_us, self.host.silent)
        {
            if now >= since + limit * 1000 {
                self.xfer = None;
                self.set_err(ERR_DATA_TIMEOUT);
            }
        }
    }

    /// The card's next block of the read transfer, due at `at`: a register block, a data block,
    /// a CRC error (the transfer ended) or nothing (the transfer stalls from `at`).
    fn fetch_block(&mut self, at: u64) -> Fetched {
        if let Some(reg) = self.card.register.take() {
            // A register block (CMD6's status, CMD19's tuning block); the card is back in
            // "tran" after it.
            self.card.state = CardState::Tran;
            if self.host2 & (1 << 22) != 0 {
                // Tuning: the host compares the block itself; nothing to read.
                self.xfer = None;
                self.dat_inhibit = false;
                self.tuning_block_taken();
                self.set_norm(N_BRR);
                return Fetched::Taken;
            }
            self.bus_ns += self.block_ns();
            return Fetched::Block(reg);
        }
        let clock = self.sd_clock_hz();
        let card = &mut self.card;
        let deliver = match card.stream {
            Some(lba) if !card.dead && lba < card.blocks() => {
                let k = self.blocks_sent;
                if self.faults.die_after_blocks.is_some_and(|n| k >= n) {
                    card.dead = true;
                    None
                } else {
                    self.blocks_sent += 1;
                    if card.single {
                        card.state = CardState::Tran;
                        card.stream = None;
                    } else {
                        card.stream = Some(lba + 1);
                    }
                    Some((lba, k))
                }
            }
            _ => None,
        };
        let Some((lba, k)) = deliver else {
            if let Some(x) = self.xfer.as_mut() {
                x.stalled_since = Some(at);
            }
            return Fetched::Nothing;
        };
        let too_fast = self.faults.crc_above_hz.is_some_and(|hz| clock > hz);
        let untuned = self.untuned();
        if untuned {
            self.violation(format!(
                "block {lba} in access mode {} without a tuned sampling clock",
                self.card.access_mode
            ));
        }
        if too_fast
            || untuned
            || self.faults.bad_lbas.contains(&lba)
            || self.faults.data_crc_at.contains(&k)
        {
            self.set_err(ERR_DATA_CRC);
            // The transfer stops; DAT stays inhibited until SRST_DAT.
            self.xfer = None;
            return Fetched::Failed;
        }
        self.bus_ns += self.block_ns();
        Fetched::Block(self.card.block(lba))
    }

    /// The ADMA2 engine: every block due by now goes to memory through the descriptor table,
    /// one block time after the other (the CPU takes no part); the last ends the transfer.
    fn advance_adma(&mut self) {
        let now = self.now_ns;
        loop {
            let Some(x) = self.xfer.as_mut() else { return };
            let Some(at) = x.next_at.filter(|&t| t <= now) else {
                break;
            };
            x.next_at = None;
            let data = match self.fetch_block(at) {
                Fetched::Block(d) => d,
                Fetched::Taken | Fetched::Failed => return,
                Fetched::Nothing => break,
            };
            if let Err(state) = self.adma_store(&data) {
                // ADMA error: the engine stops; DAT stays inhibited until SRST_DAT.
                self.adma_err = state;
                self.set_err(ERR_ADMA);
                self.xfer = None;
                return;
            }
            let next = at + self.block_ns();
            let x = self.xfer.as_mut().unwrap();
            x.remaining -= 1;
            if x.remaining > 0 {
                x.next_at = Some(next);
                continue;
            }
            self.end_read();
            return;
        }
        self.check_stall(now);
    }

    /// The last block of a read is out: the controller's CMD12 (auto CMD12), DAT free, transfer
    /// complete.
    fn end_read(&mut self) {
        let auto12 = self.xfer.take().is_some_and(|x| x.auto12);
        if auto12 {
            self.bus_command(12, 0, true, 0);
        }
        self.dat_inhibit = false;
        self.set_norm(N_TC);
    }

    /// Store one block at the ADMA engine's place in its table; `Err` = the ADMA error status
    /// (1 = fetching a descriptor, 3 = transferring; bit 2 = length mismatch).
    fn adma_store(&mut self, data: &[u8]) -> Result<(), u32> {
        let mut done = 0;
        while done < data.len() {
            let mut st = self.xfer.as_ref().and_then(|x| x.adma).ok_or(1u32)?;
            if st.left == 0 {
                if st.ended {
                    return Err(3 | 4);
                }
                let raw = self.dma.bus(st.desc, 8).map(|d| d.to_vec()).ok_or(1u32)?;
                let attr = u32::from_le_bytes(raw[0..4].try_into().unwrap());
                let addr = u32::from_le_bytes(raw[4..8].try_into().unwrap());
                if attr & 1 == 0 || (attr >> 4) & 3 != 0b10 {
                    self.violation(format!(
                        "ADMA descriptor at {:#x}: attributes {attr:#x}",
                        st.desc
                    ));
                    return Err(1);
                }
                st.left = match attr >> 16 {
                    0 => 65536,
                    n => n as usize,
                };
                let last = addr.wrapping_add(st.left as u32 - 1);
                if self.host.vendor == Vendor::Cv18xx && addr / BOUNDARY != last / BOUNDARY {
                    self.violation(format!(
                        "ADMA descriptor at {:#x}: {addr:#x}+{} crosses a 128 MiB boundary",
                        st.desc, st.left
                    ));
                    return Err(3);
                }
                st.addr = addr;
                st.ended = attr & 2 != 0;
                st.desc += 8;
            }
            let n = (data.len() - done).min(st.left);
            let Some(mem) = self.dma.bus(st.addr, n) else {
                self.violation(format!(
                    "ADMA data at bus {:#x}+{n} outside memory",
                    st.addr
                ));
                return Err(3);
            };
            mem.copy_from_slice(&data[done..done + n]);
            st.addr += n as u32;
            st.left -= n;
            done += n;
            self.xfer.as_mut().unwrap().adma = Some(st);
        }
        Ok(())
    }

    fn present(&self) -> u32 {
        let mut p = 0x01FF_0000; // card inserted, stable, detect, write enabled, DAT/CMD lines high
        if self.card.switching && self.card.powered {
            // After CMD11 the card holds CMD and DAT[3:0] low.
            p &= !(0x1F << 20);
        }
        if !self.host.card_detect || !self.card.spec.inserted {
            p &= !((1 << 16) | (1 << 18));
        }
        if self.host.write_protect_switch {
            p &= !(1 << 19);
        }
        if self.cmd_inhibit {
            p |= 1;
        }
        if self.dat_inhibit {
            p |= 2;
        }
        match &self.xfer {
            Some(x) if x.write => {
                p |= (1 << 2) | (1 << 8);
                if x.buf.is_some() {
                    p |= 1 << 10;
                }
            }
            Some(x) => {
                p |= (1 << 2) | (1 << 9);
                if x.buf.is_some() {
                    p |= 1 << 11;
                }
            }
            None => {}
        }
        p
    }

    fn read(&mut self, off: usize) -> u32 {
        self.now_ns += ACCESS_NS;
        self.accesses += 1;
        self.advance();
        self.unfenced += u64::from(self.barriers.is_multiple_of(2));
        if !off.is_multiple_of(4) {
            self.violation(format!("unaligned read at {off:#x}"));
            return 0;
        }
        match off {
            SDMA_ARG2 => 0,
            BLOCK_SIZE_COUNT => self.blksize as u32 | (self.blkcnt as u32) << 16,
            ARGUMENT => self.arg,
            CMD_TRANSFER => self.trnmod as u32 | (self.cmdreg as u32) << 16,
            0x10..=0x1C => self.resp[(off - RESPONSE[0]) / 4],
            DATA_PORT => self.read_data(),
            PRESENT_STATE => self.present(),
            HOST_CONTROL => self.hostctl as u32 | (self.power as u32) << 8,
            CLOCK_CONTROL => {
                let mut c = self.clkcon & !2;
                if self.internal_stable() {
                    c |= 2;
                }
                let reset = if self.now_ns < self.reset_until {
                    self.reset_bits
                } else {
                    0
                };
                c as u32 | (self.timeout as u32) << 16 | (reset as u32) << 24
            }
            INT_STATUS => {
                if self.stale_cc && self.norint & N_CC != 0 {
                    self.violation(
                        "INT_STATUS read with the command complete a CMD line reset left".into(),
                    );
                }
                let mut n = self.norint;
                if self.errint != 0 {
                    n |= 1 << 15;
                }
                n as u32 | (self.errint as u32) << 16
            }
            INT_STATUS_ENABLE => self.norint_en as u32 | (self.errint_en as u32) << 16,
            INT_SIGNAL_ENABLE => self.sig_en,
            AUTO_CMD_ERR_HOST_CONTROL2 => self.host2,
            CAPABILITIES => self.host.caps(),
            CAPABILITIES_1 => self.host.uhs,
            ADMA_ERROR_STATUS => self.adma_err,
            ADMA_ADDRESS => self.adma_addr,
            ADMA_ADDRESS_HI => 0,
            MAX_CURRENT_CAPS => 0,
            SLOT_STATUS_VERSION => (0x99 << 24) | (self.host.version as u32) << 16,
            _ => match self.vendor_read(off) {
                Some(v) => v,
                None => {
                    self.violation(format!("read of unmodelled register {off:#x}"));
                    0
                }
            },
        }
    }

    fn read_data(&mut self) -> u32 {
        let next_block_at = self.now_ns + self.block_ns();
        let Some(x) = self.xfer.as_mut().filter(|x| !x.write) else {
            self.violation("data port read with no read transfer".into());
            return 0;
        };
        let Some(buf) = x.buf.as_ref() else {
            self.violation("data port read with an empty buffer".into());
            return 0;
        };
        let w = u32::from_le_bytes(buf[x.pos..x.pos + 4].try_into().unwrap());
        x.pos += 4;
        if x.pos == buf.len() {
            x.buf = None;
            x.remaining -= 1;
            if x.remaining == 0 {
                self.end_read();
            } else {
                x.next_at = Some(next_block_at);
            }
        }
        w
    }

    /// A command reaches the card (logged); returns the answer.
    fn bus_command(&mut self, index: u8, arg: u32, auto: bool, blocks: u32) -> Option<Answer> {
        let (app, answer) = self
            .card
            .command_at(self.now_ns, index, arg, self.faults.never_ready);
        if auto {
            if let Some(Answer::Short(v)) = answer {
                self.resp[3] = v;
            }
            self.bus_ns += self.clocks_ns(48 + 2 + 48);
        }
        self.log.push(BusCmd {
            index,
            app,
            arg,
            clock_hz: self.sd_clock_hz(),
            at_us: self.now_ns / 1000,
            answered: answer.is_some(),
            auto,
            blocks,
        });
        answer
    }

    fn issue(&mut self) {
        let index = ((self.cmdreg >> 8) & 0x3F) as u8;
        let rtype = self.cmdreg & 3;
        let crc = self.cmdreg & (1 << 3) != 0;
        let idx = self.cmdreg & (1 << 4) != 0;
        let data = self.cmdreg & (1 << 5) != 0;
        let abort = (self.cmdreg >> 6) & 3 == 3;
        let clock = self.sd_clock_hz();
        let name = format!("{}{index}", if self.card.app { "ACMD" } else { "CMD" });
        if clock <= 0.0 {
            self.violation(format!("{name} issued with the SD clock off"));
            return;
        }
        if self.power & 1 == 0 {
            self.violation(format!("{name} issued with bus power off"));
        }
        if self.cmd_inhibit {
            self.violation(format!("{name} issued while the CMD line is inhibited"));
            return;
        }
        if (data || (rtype == 3 && !abort)) && self.dat_inhibit {
            self.violation(format!("{name} issued while the DAT line is inhibited"));
            return;
        }
        if self.trnmod & 1 != 0 && !(self.host.adma && data && self.trnmod & (1 << 4) != 0) {
            self.violation(format!(
                "{name} with DMA enabled (only ADMA2 reads are modelled)"
            ));
        }
        if self.trnmod & 1 != 0 && (self.hostctl >> 3) & 3 != 0b10 {
            self.violation(format!(
                "{name} with DMA but host control 1 not selecting ADMA2"
            ));
        }
        if self.sig_en != 0 {
            self.violation(format!(
                "interrupt signals enabled ({:#x}) for a polled driver",
                self.sig_en
            ));
        }
        self.check_vendor(&name);
        let ident = matches!(
            self.card.state,
            CardState::Idle | CardState::Ready | CardState::Ident
        );
        if ident && !(100_000.0..=400_000.0).contains(&clock) {
            self.violation(format!("{name} in identification mode at {clock} Hz"));
        }
        if clock > self.card.max_clock_hz() {
            self.violation(format!(
                "{name} at {clock} Hz, above the card's access mode {}",
                self.card.access_mode
            ));
        }
        if self.card.switching {
            self.violation(format!("{name} while the card switches to 1.8 V"));
        } else if self.card.powered && self.card.signal_1v8 != self.io_1v8() {
            self.violation(format!(
                "{name} with the host at {} V to a card at {} V",
                if self.io_1v8() { "1.8" } else { "3.3" },
                if self.card.signal_1v8 { "1.8" } else { "3.3" }
            ));
        }
        let uhs_select = (self.host2 >> 16) & 7;
        if self.card.signal_1v8
            && clock > 25_000_000.0
            && uhs_select != self.card.access_mode as u32
        {
            self.violation(format!(
                "{name} at {clock} Hz with UHS mode {uhs_select} for access mode {}",
                self.card.access_mode
            ));
        }
        if clock > 25_000_000.0 && !self.host.no_hispd_bit && self.hostctl & 4 == 0 {
            self.violation(format!(
                "{name} at {clock} Hz without host control 1's high-speed enable"
            ));
        }
        match expected_response(index, self.card.app) {
            Some(e) if e != (rtype, crc, idx) => self.violation(format!(
                "{name} with response type {rtype}, CRC check {crc}, index check {idx}; expected {e:?}"
            )),
            _ => {}
        }
        if abort != (index == 12) {
            self.violation(format!("{name} with command type abort = {abort}"));
        }
        if data {
            let multi = self.trnmod & (1 << 5) != 0;
            let read = self.trnmod & (1 << 4) != 0;
            match index {
                24 | 25 if read => self.violation(format!("{name}: a read transfer")),
                17 | 18 if !read => self.violation(format!("{name}: a write transfer")),
                _ => {}
            }
            if matches!(index, 18 | 25) && !multi {
                self.violation(format!("{name} without multi-block transfer mode"));
            }
            if matches!(index, 24 | 25) && self.card.state == CardState::Prg {
                let now = self.now_ns;
                if self.card.prg_until.is_none_or(|t| now < t) {
                    self.violation(format!("{name} while the card is still programming"));
                }
            }
            let want = if matches!(index, 6 | 19) && !self.card.app {
                64
            } else {
                512
            };
            if self.blksize & 0xFFF != want {
                self.violation(format!("{name}: block size {}", self.blksize & 0xFFF));
            }
            if multi && (self.trnmod & 2 == 0 || self.blkcnt == 0) {
                self.violation(format!("{name}: multi-block without a block count"));
            }
            if !multi && self.trnmod & (1 << 2) != 0 {
                self.violation(format!("{name}: auto CMD12 on a single block"));
            }
            if (self.hostctl & 2 != 0) != self.card.width4 {
                self.violation(format!(
                    "{name}: host bus width {} but card bus width {}",
                    if self.hostctl & 2 != 0 { 4 } else { 1 },
                    if self.card.width4 { 4 } else { 1 }
                ));
            }
        }

        let k = self.commands_seen;
        self.commands_seen += 1;
        let arg = self.arg;
        let blocks = match (data, self.trnmod & (1 << 5) != 0) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => self.blkcnt as u32,
        };
        let answer = self.bus_command(index, arg, false, blocks);
        let crc_error = answer.is_some() && self.faults.cmd_crc_at.contains(&k);
        let clocks = match (rtype, answer) {
            (0, _) => 48 + 8,
            (_, None) => 48 + 64,
            (1, _) => 48 + 2 + 136,
            _ => 48 + 2 + 48,
        };
        self.bus_ns += self.clocks_ns(clocks);
        self.cmd_inhibit = true;
        if data || rtype == 3 {
            self.dat_inhibit = true;
        }
        self.pending = Some(Pending {
            at: self.now_ns + self.clocks_ns(clocks),
            answer,
            crc_error,
            busy: rtype == 3,
            data,
        });
    }

    fn write(&mut self, off: usize, v: u32) {
        self.now_ns += ACCESS_NS;
        self.accesses += 1;
        self.advance();
        self.unfenced += u64::from(self.barriers.is_multiple_of(2));
        if !off.is_multiple_of(4) {
            self.violation(format!("unaligned write at {off:#x}"));
            return;
        }
        // The Arasan may drop a write within two SD clocks of the previous one.
        let hz = self.sd_clock_hz();
        if self.host.arasan_write_check && hz > 0.0 && off != DATA_PORT {
            if let Some(last) = self.last_write_ns {
                let gap = self.now_ns - last;
                if (gap as f64) < 2.0 * 1e9 / hz {
                    self.violation(format!(
                        "write to {off:#x} {gap} ns after the previous one, within two SD clocks at {hz} Hz"
                    ));
                }
            }
        }
        self.last_write_ns = Some(self.now_ns);
        match off {
            SDMA_ARG2 => {}
            BLOCK_SIZE_COUNT => {
                if self.xfer.is_none() {
                    self.blksize = v as u16;
                    self.blkcnt = (v >> 16) as u16;
                }
            }
            ARGUMENT => self.arg = v,
            DATA_PORT => self.write_data(v),
            CMD_TRANSFER => {
                self.trnmod = v as u16;
                self.cmdreg = (v >> 16) as u16;
                self.issue();
            }
            HOST_CONTROL => {
                if self.host.no_hispd_bit && v & 4 != 0 {
                    self.violation("high-speed enable set on a controller without one".into());
                }
                self.hostctl = v as u8;
                let power = (v >> 8) as u8;
                if power & 1 != 0 && (power >> 1) & 7 != 7 {
                    self.violation(format!(
                        "bus power on at voltage select {}",
                        (power >> 1) & 7
                    ));
                }
                let was_on = self.power & 1 != 0;
                self.power = power;
                let on = power & 1 != 0;
                if on && !was_on {
                    self.card.powered = true;
                    self.card.power_cycle();
                } else if !on && was_on {
                    self.card.powered = false;
                    self.card.power_cycle();
                }
                if (v >> 16) & 0xFF != 0 {
                    self.violation(format!("block gap control {:#x}", (v >> 16) & 0xFF));
                }
            }
            CLOCK_CONTROL => self.write_clock(v),
            INT_STATUS => {
                if v as u16 & N_CC != 0 {
                    self.stale_cc = false;
                }
                self.norint &= !(v as u16);
                self.errint &= !((v >> 16) as u16);
            }
            INT_STATUS_ENABLE => {
                self.norint_en = v as u16 & 0x7FFF;
                self.errint_en = (v >> 16) as u16;
                self.norint &= self.norint_en;
                self.errint &= self.errint_en;
            }
            INT_SIGNAL_ENABLE => self.sig_en = v,
            ADMA_ADDRESS => self.adma_addr = v,
            ADMA_ADDRESS_HI if v != 0 => self.violation(format!("ADMA address high word {v:#x}")),
            ADMA_ADDRESS_HI => {}
            AUTO_CMD_ERR_HOST_CONTROL2 => {
                let before = self.io_1v8();
                if v & (1 << 22) != 0 && self.host2 & (1 << 22) == 0 {
                    self.tuning_seen = 0;
                }
                self.host2 = v & 0xFFFF_0000;
                self.note_io(before);
            }
            _ => self.vendor_write(off, v),
        }
    }

    /// A vendor register's value (the last written, 0 after a reset), if the host has it.
    fn vendor_read(&self, off: usize) -> Option<u32> {
        let known = match self.host.vendor {
            Vendor::None => false,
            Vendor::Cv18xx if off == 0xE8 => return Some(0x0300_0000 | CV18XX_AREA as u32),
            Vendor::Cv18xx => [0x00, 0x40, 0x4C].contains(&off.wrapping_sub(CV18XX_AREA)),
            Vendor::K1 => [0x114, K1_TX_CFG, 0x160, 0x178].contains(&off),
        };
        known.then(|| self.vendor_reg(off))
    }

    /// The value last written to vendor register `off` since the last reset (0 if none).
    pub fn vendor_reg(&self, off: usize) -> u32 {
        let last = self.vendor_regs.iter().rev().find(|(o, _)| *o == off);
        last.map_or(0, |&(_, v)| v)
    }

    /// A write to a vendor register (a violation where the host has none, or where the vendor
    /// driver leaves it alone).
    fn vendor_write(&mut self, off: usize, v: u32) {
        let known = self.vendor_read(off).is_some() && off != 0xE8;
        if !known {
            self.violation(format!("write of {v:#x} to {off:#x}"));
            return;
        }
        if self.host.vendor == Vendor::K1 && off != K1_TX_CFG {
            self.violation(format!(
                "write of {v:#x} to the K1's {off:#x}: the vendor driver leaves the SD slot's PHY and eMMC mode alone"
            ));
        }
        self.vendor_regs.push((off, v));
    }

    /// What a vendor host needs set before a command (module docs), as a violation if it is not.
    fn check_vendor(&mut self, name: &str) {
        let h2 = self.host2;
        if self.host.vendor != Vendor::None {
            for (bit, what) in [
                (31, "preset value enable"),
                (28, "host version 4 enable"),
                (19, "1.8 V signalling"),
            ] {
                if h2 & (1 << bit) != 0 {
                    self.violation(format!("{name} with host control 2's {what} set on a 3.3 V host whose preset values are broken"));
                }
            }
        }
        let ok = match self.host.vendor {
            Vendor::None => true,
            Vendor::Cv18xx => {
                self.vendor_reg(CV18XX_AREA) & 2 != 0
                    && self.vendor_reg(CV18XX_AREA + 0x4C) & 1 != 0
                    && self.vendor_reg(CV18XX_AREA + 0x40) == CV18XX_PHY_DELAYS
            }
            Vendor::K1 => self.vendor_reg(K1_TX_CFG) & K1_TX_INT_CLK_SEL != 0,
        };
        if !ok {
            self.violation(format!(
                "{name} before the vendor registers were set after the reset"
            ));
        }
    }

    fn write_clock(&mut self, v: u32) {
        let reset = (v >> 24) as u8;
        if reset != 0 {
            self.resets.push(reset);
            if reset.count_ones() > 1 {
                self.violation(format!(
                    "reset bits {reset:#x} in one write (QEMU honours one)"
                ));
            } else {
                self.reset_until = self.now_ns + RESET_NS;
                self.reset_bits = reset;
                match reset {
                    1 => self.reset_all(),
                    2 => {
                        self.cmd_inhibit = false;
                        self.pending = None;
                        if self.host.vendor == Vendor::Cv18xx {
                            // Against the spec, command complete stays (`dwcmshc_reset`).
                            self.stale_cc = self.norint & N_CC != 0;
                        } else {
                            self.norint &= !N_CC;
                        }
                    }
                    4 => {
                        self.xfer = None;
                        self.busy_until = None;
                        self.write_done_at = None;
                        self.dat_inhibit = false;
                        self.norint &= !(N_TC | N_BRR | N_BWR);
                    }
                    _ => self.violation(format!("reset bits {reset:#x}")),
                }
                if reset == 1 {
                    return;
                }
            }
        }
        let new = v as u16;
        let old = self.clkcon;
        let sd_on_before = old & 4 != 0;
        if sd_on_before && new & 4 != 0 && (new & 0xFFC0) != (old & 0xFFC0) {
            self.violation("clock divider changed with the SD clock enabled".into());
        }
        if self.host.version < 2 {
            let n = (new >> 8) & 0xFF;
            if n & n.wrapping_sub(1) != 0 || new & 0xC0 != 0 {
                self.violation(format!("divider bits {new:#06x} invalid on SDHCI 2.00"));
            }
        }
        if new & 1 == 0 {
            self.stable_at = None;
        } else if old & 1 == 0 || self.stable_at.is_none() {
            self.stable_at = Some(self.now_ns + CLOCK_STABLE_NS);
        }
        if new & 4 != 0 && !sd_on_before && self.card.switching {
            // The clock restarts after CMD11: the card switches if the I/O has been at 1.8 V for
            // the 5 ms the spec asks.
            let settled = self.v18_since.is_some_and(|t| self.now_ns >= t + 5_000_000);
            if self.io_1v8() && !settled {
                self.violation("SD clock restarted less than 5 ms after the 1.8 V switch".into());
            }
            self.card.clock_restarted(self.io_1v8() && settled);
        }
        if new & 4 != 0 && !sd_on_before && !self.internal_stable() {
            self.violation("SD clock enabled before the internal clock is stable".into());
        }
        self.clkcon = new;
        self.timeout = ((v >> 16) & 0xF) as u8;
    }

    fn reset_all(&mut self) {
        self.blksize = 0;
        self.blkcnt = 0;
        self.arg = 0;
        self.trnmod = 0;
        self.cmdreg = 0;
        self.resp = [0; 4];
        self.hostctl = 0;
        if self.power & 1 != 0 {
            self.card.powered = false;
            self.card.power_cycle();
        }
        self.power = 0;
        self.clkcon = 0;
        self.timeout = 0;
        self.norint = 0;
        self.errint = 0;
        self.norint_en = 0;
        self.errint_en = 0;
        self.sig_en = 0;
        self.host2 = match self.host.vendor {
            Vendor::None => 0,
            _ => self.host.host2_after_reset,
        };
        self.vendor_regs.clear();
        self.stale_cc = false;
        self.stable_at = None;
        self.cmd_inhibit = false;
        self.dat_inhibit = false;
        self.pending = None;
        self.busy_until = None;
        self.xfer = None;
        self.write_done_at = None;
    }
}

// ---- Shared by the driver tests (sd_driver, sd_write) ----

/// The SDHCI driver over the simulator.
pub type Driver = Sdhci<SimRegs, SimClock>;

pub const MHZ: u32 = 1_000_000;
/// The Pi 3's EMMC clock under the default firmware.
pub const PI_BASE: u32 = 250 * MHZ;

/// A 32 GiB SDHC card of pattern blocks.
pub fn sdhc() -> CardSpec {
    CardSpec::new(Kind::Sdhc, Backing::Pattern { blocks: 64 << 20 })
}

/// A simulator of `host`, `card` and `faults`, and the driver initialised over it with `config`;
/// panics with the commands seen and the violations if the initialisation fails.
pub fn start_with(host: HostSpec, card: CardSpec, faults: Faults, config: Config) -> (Sim, Driver) {
    let sim = Sim::new(host, card, faults);
    match Sdhci::with_config(sim.regs(), sim.clock(), config) {
        Ok(sd) => (sim, sd),
        Err(e) => panic!(
            "init: {e}\ncommands: {:?}\nviolations: {:#?}",
            sim.names(),
            sim.violations()
        ),
    }
}

/// [`start_with`] a v3 controller at [`PI_BASE`] and an [`sdhc`] card without faults.
pub fn start_sdhc(config: Config) -> (Sim, Driver) {
    start_with(HostSpec::v3(PI_BASE), sdhc(), Faults::default(), config)
}

/// [`start_with`] a v3 controller at [`PI_BASE`], `card` without faults and the default [`Config`].
pub fn start_card(card: CardSpec) -> (Sim, Driver) {
    start_with(
        HostSpec::v3(PI_BASE),
        card,
        Faults::default(),
        Config::new(PI_BASE),
    )
}

/// Let the simulated time pass a millisecond at a time (a second at most) until `n` queued reads
/// of `dev` have been reported; their tags in report order, each read's result unwrapped.
pub fn poll_until<B: drivers::block::BlockDevice>(sim: &Sim, dev: &mut B, n: usize) -> Vec<u16>
where
    B::Error: std::fmt::Debug,
{
    let mut got = Vec::new();
    for _ in 0..1000 {
        sim.pass_us(1_000);
        while let Some((t, r)) = dev.poll_read() {
            r.unwrap();
            got.push(t);
        }
        if got.len() >= n {
            break;
        }
    }
    got
}

/// The simulator saw no protocol violation.
pub fn check_no_violations(sim: &Sim) {
    let v = sim.violations();
    assert!(v.is_empty(), "protocol violations:\n{}", v.join("\n"));
}
