//! An SD card as a state machine, for the register-level host simulators (`sd_sim` for SDHCI,
//! `sunxi_sim` for the Allwinner controller): idle -> ready -> ident -> stby -> tran <-> data,
//! tran -> rcv -> prg -> tran, answering CMD0, 2, 3, 6, 7, 8, 9, 12, 13, 16, 17, 18, 24, 25, 55
//! and ACMD6, ACMD41 with R1/R1b/R2/R3/R6/R7 responses; SDHC (block addresses, CSD v2) or SDSC
//! (byte addresses, CSD v1; with or without CMD8). Anything else is an illegal command: no
//! response, ILLEGAL_COMMAND in the next status. Data comes from a byte vector or a pattern
//! computed from the LBA; written blocks are kept over it. The host simulator moves the data and
//! keeps time. What the two host simulators share beside the card is here too: the costs they
//! charge alike, the card-side fields of their `Faults` (`faults!`) and their handles on the
//! state (`host_sim_handles!`).
//!
//! CMD6 (SWITCH_FUNC, SD Physical Layer Simplified Specification 3.01, 4.3.10): in "tran", check
//! or switch mode; the card answers R1 and then sends a 64-byte status block ([`Card::register`])
//! with its group 1 support bits (Default, and High Speed unless [`CardSpec::high_speed`] is off),
//! the function each group would switch to (or switched to; 0xF for one it refuses) and version
//! 1 busy bits. A switch sets [`Card::access_mode`]: only then may the host clock it above 25 MHz
//! ([`Card::max_clock_hz`]; the host simulators check). A card of [`CardSpec::cmd6`] = false treats CMD6 as
//! illegal (with [`CardSpec::ccc_switch`] = false its CSD says so too, as an SD 1.0 card's does);
//! [`CardSpec::refuse_switch`] makes it answer 0xF to a switch it offered.
//!
//! UHS-I ([`CardSpec::uhs`]): ACMD41 with S18R gets S18A in the OCR (SDHC only); CMD11 in "ready"
//! makes the card hold CMD and DAT low ([`Card::switching`]) until the host restarts the clock at
//! 1.8 V, when it signals at 1.8 V ([`Card::signal_1v8`]; never, with
//! [`CardSpec::voltage_switch_fails`]: only a power cycle brings it back). At 1.8 V CMD6 offers
//! SDR50, SDR104 and DDR50 too ([`Card::access_mode`] is the group 1 function in force), and
//! CMD19 sends the 64-byte tuning block.
#![allow(dead_code)]

use drivers::block::BlockDevice;
use std::collections::BTreeMap;

// The R1 and OCR bits the driver names too are the driver's.
pub use drivers::sd::{
    OCR_CCS, OCR_POWERED_UP, OCR_S18, OCR_VDD_27_36, R1_APP_CMD, R1_READY_FOR_DATA, R1_STATE_SHIFT,
    R1_WP_VIOLATION,
};

// R1 bits the driver does not name one by one.
pub const R1_OUT_OF_RANGE: u32 = 1 << 31;
pub const R1_ADDRESS_ERROR: u32 = 1 << 30;
pub const R1_BLOCK_LEN_ERROR: u32 = 1 << 29;
pub const R1_ILLEGAL_COMMAND: u32 = 1 << 22;

/// The card programs a received block this long (busy on DAT0).
pub const PROGRAM_NS: u64 = 300_000;

// Costs both host simulators charge alike.
/// Cost of one register access.
pub const ACCESS_NS: u64 = 200;
/// A controller's reset bits read 1 this long.
pub const RESET_NS: u64 = 3_000;
/// An R1b busy signal lasts this long after the response.
pub const BUSY_NS: u64 = 20_000;

/// `pub struct Faults`: the faults on the card's side, which both host simulators inject alike,
/// and the fields given, the host's own.
macro_rules! faults {
    ($($(#[$m:meta])* $f:ident: $t:ty,)*) => {
        /// Faults to inject.
        #[derive(Debug, Clone, Default)]
        pub struct Faults {
            /// ACMD41 never reports the card powered up.
            pub never_ready: bool,
            /// 0-based indices (over all commands on the bus) of commands whose response has a
            /// CRC error (the card did execute the command).
            pub cmd_crc_at: Vec<u64>,
            /// 0-based indices (over all blocks the card sends) of blocks with a data CRC error.
            pub data_crc_at: Vec<u64>,
            /// Blocks every read of which has a data CRC error.
            pub bad_lbas: Vec<u64>,
            /// The card stops answering (commands and data) once it has sent this many blocks.
            pub die_after_blocks: Option<u64>,
            $($(#[$m])* pub $f: $t,)*
        }
    };
}
pub(crate) use faults;

/// What both host simulators have around their `State`: the handles `Sim` (the test's) and
/// `SimClock` (the driver's), `SimDma` (the memory their DMA engine sees, as the driver's
/// `DmaMemory`), and the `Sim` methods that read the card, the bus log, the virtual time and the
/// DMA memory. `State` has the fields these read.
macro_rules! host_sim_handles {
    () => {
        /// Handle on a simulated controller and card.
        #[derive(Debug, Clone)]
        pub struct Sim(Rc<RefCell<State>>);

        /// The virtual clock, for the driver.
        #[derive(Debug)]
        pub struct SimClock(Rc<RefCell<State>>);

        /// The memory the simulated DMA engine sees, as the driver's `DmaMemory` ([`DmaRam`]).
        pub type SimDma = SimDmaOf<State>;

        impl Sim {
            pub fn clock(&self) -> SimClock {
                SimClock(self.0.clone())
            }

            pub fn dma(&self) -> SimDma {
                SimDmaOf(self.0.clone())
            }

            /// What the driver asked of the DMA memory, in order.
            pub fn mem_ops(&self) -> Vec<MemOp> {
                self.0.borrow().dma.ops.clone()
            }

            /// DMA transfers the engine started.
            pub fn dma_transfers(&self) -> u64 {
                self.0.borrow().dma_transfers
            }

            /// Nanoseconds the bus has been busy so far (see `State::bus_ns`).
            pub fn bus_ns(&self) -> u64 {
                self.0.borrow().bus_ns
            }

            /// Register accesses so far.
            pub fn accesses(&self) -> u64 {
                self.0.borrow().accesses
            }

            /// Nanoseconds of virtual time so far.
            pub fn now_ns(&self) -> u64 {
                self.0.borrow().now_ns
            }

            pub fn now_us(&self) -> u64 {
                self.0.borrow().now_ns / 1000
            }

            /// Let `us` microseconds pass with no register access (the CPU computing).
            pub fn pass_us(&self, us: u64) {
                self.0.borrow_mut().now_ns += us * 1000;
            }

            pub fn log(&self) -> Vec<BusCmd> {
                self.0.borrow().log.clone()
            }

            /// Command names in bus order, e.g. `["CMD0", "CMD8", "CMD55", "ACMD41", ...]`.
            pub fn names(&self) -> Vec<String> {
                self.0.borrow().log.iter().map(BusCmd::name).collect()
            }

            pub fn clear_log(&self) {
                self.0.borrow_mut().log.clear();
            }

            pub fn violations(&self) -> Vec<String> {
                self.0.borrow().violations.clone()
            }

            /// The card's bytes of blocks `lba .. lba + n`.
            pub fn expected(&self, lba: u64, n: u64) -> Vec<u8> {
                let s = self.0.borrow();
                (lba..lba + n).flat_map(|b| s.card.block(b)).collect()
            }

            /// The whole card as bytes: the backing with the written blocks over it.
            pub fn image(&self) -> Vec<u8> {
                let s = self.0.borrow();
                (0..s.card.blocks()).flat_map(|b| s.card.block(b)).collect()
            }

            /// The LBAs written so far, in order.
            pub fn written_lbas(&self) -> Vec<u64> {
                self.0.borrow().card.written.keys().copied().collect()
            }

            /// The card runs in High Speed timing (it switched with CMD6 since its last reset).
            pub fn card_high_speed(&self) -> bool {
                self.0.borrow().card.access_mode == 1
            }

            /// CMD6 switches that changed the card's access mode.
            pub fn card_switches(&self) -> u32 {
                self.0.borrow().card.switches
            }

            pub fn card_4bit(&self) -> bool {
                self.0.borrow().card.width4
            }

            /// The card signals at 1.8 V.
            pub fn card_1v8(&self) -> bool {
                self.0.borrow().card.signal_1v8
            }

            /// The card's group 1 access mode (0 Default, 1 High Speed, 2 SDR50, 3 SDR104, 4
            /// DDR50).
            pub fn card_access_mode(&self) -> u8 {
                self.0.borrow().card.access_mode
            }

            /// Commands the host has issued so far (the index the next one gets in
            /// [`Faults::cmd_crc_at`]).
            pub fn commands_seen(&self) -> u64 {
                self.0.borrow().commands_seen
            }

            /// Blocks the card has sent so far (the index the next one gets in
            /// [`Faults::data_crc_at`]).
            pub fn blocks_sent(&self) -> u64 {
                self.0.borrow().blocks_sent
            }
        }
    };
}
pub(crate) use host_sim_handles;

/// A command seen on the bus (of `sunxi_sim` and `sdhost_sim`).
#[derive(Debug, Clone, PartialEq)]
pub struct BusCmd {
    pub index: u8,
    pub app: bool,
    pub arg: u32,
    pub clock_hz: u32,
    pub answered: bool,
    /// Sent by the controller (auto stop).
    pub auto: bool,
}

impl BusCmd {
    /// `CMDn`, or `ACMDn` after CMD55.
    pub fn name(&self) -> String {
        format!("{}{}", if self.app { "ACMD" } else { "CMD" }, self.index)
    }
}

/// What kind of card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// High capacity (CCS = 1, block addresses, CSD v2).
    Sdhc,
    /// Standard capacity, physical layer 2.00 (answers CMD8; byte addresses, CSD v1).
    SdscV2,
    /// Standard capacity, physical layer 1.x (no CMD8).
    SdscV1,
}

/// Where the card's data comes from.
#[derive(Debug, Clone)]
pub enum Backing {
    /// These bytes (a whole number of blocks).
    Bytes(Vec<u8>),
    /// `blocks` blocks of [`pattern_block`].
    Pattern { blocks: u64 },
}

/// Deterministic contents of block `lba` of a [`Backing::Pattern`] card.
pub fn pattern_block(lba: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    let mut x = lba.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    while out.len() < 512 {
        x ^= x >> 30;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 27;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        out.extend_from_slice(&x.to_le_bytes());
    }
    // The LBA itself in the first bytes, to spot misplaced blocks.
    out[..8].copy_from_slice(&lba.to_le_bytes());
    out
}

/// The card.
#[derive(Debug, Clone)]
pub struct CardSpec {
    pub kind: Kind,
    pub backing: Backing,
    /// ACMD41s answered "still powering up" before the card is ready.
    pub busy_polls: u32,
    pub rca: u16,
    /// The CSD's PERM_WRITE_PROTECT bit: writes are refused with WP_VIOLATION.
    pub perm_write_protect: bool,
    /// The card is in the slot; `false`: an empty slot, nothing answers on the bus.
    pub inserted: bool,
    /// The card takes CMD6 (SD 1.10 and later).
    pub cmd6: bool,
    /// The CSD lists command class 10 (switch); an SD 1.0 card has neither it nor CMD6.
    pub ccc_switch: bool,
    /// CMD6 lists High Speed (group 1 function 1) as supported.
    pub high_speed: bool,
    /// A switch to a supported function is answered with 0xF (refused) all the same.
    pub refuse_switch: bool,
    /// A UHS-I card: it accepts 1.8 V (S18A) and, at 1.8 V, offers SDR50, SDR104 and DDR50.
    pub uhs: bool,
    /// After CMD11 the card never releases its lines (a failed voltage switch).
    pub voltage_switch_fails: bool,
}

impl CardSpec {
    pub fn new(kind: Kind, backing: Backing) -> CardSpec {
        CardSpec {
            kind,
            backing,
            busy_polls: 3,
            rca: 0xB368,
            perm_write_protect: false,
            inserted: true,
            cmd6: true,
            ccc_switch: true,
            high_speed: true,
            refuse_switch: false,
            uhs: false,
            voltage_switch_fails: false,
        }
    }

    pub fn blocks(&self) -> u64 {
        match &self.backing {
            Backing::Bytes(b) => b.len() as u64 / 512,
            Backing::Pattern { blocks } => *blocks,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardState {
    Idle = 0,
    Ready = 1,
    Ident = 2,
    Stby = 3,
    Tran = 4,
    Data = 5,
    Rcv = 6,
    Prg = 7,
}

#[derive(Debug)]
pub struct Card {
    pub spec: CardSpec,
    pub state: CardState,
    pub powered: bool,
    /// The next command is an application command.
    pub app: bool,
    pub rca: u16,
    pub acmd41s: u32,
    pub ccs: bool,
    pub width4: bool,
    pub blocklen: u32,
    /// Status bits to report in the next R1 (ILLEGAL_COMMAND).
    pub pending: u32,
    pub dead: bool,
    /// Next block to send in the data state; `single` for CMD17 (and CMD24).
    pub stream: Option<u64>,
    pub single: bool,
    /// Next block to store in the receive state.
    pub recv: Option<u64>,
    /// End of programming in the "prg" state (`None`: never).
    pub prg_until: Option<u64>,
    /// Blocks written, over the backing.
    pub written: BTreeMap<u64, Vec<u8>>,
    pub wp_violation: bool,
    pub stuck_programming: bool,
    pub cid: [u8; 16],
    pub csd: [u8; 16],
    /// A register block to send in the data state before any data block (CMD6's status).
    pub register: Option<Vec<u8>>,
    /// The group 1 (access mode) function in force: 0 Default / SDR12, 1 High Speed / SDR25,
    /// 2 SDR50, 3 SDR104, 4 DDR50; back to 0 at CMD0 and power cycles.
    pub access_mode: u8,
    /// ACMD41 answered S18A: CMD11 may follow.
    pub s18a: bool,
    /// After CMD11, until the clock restarts at 1.8 V: CMD and DAT held low.
    pub switching: bool,
    /// The card signals at 1.8 V (until power is cut).
    pub signal_1v8: bool,
    /// CMD6 switch commands that changed the access mode.
    pub switches: u32,
}

/// What the card answered.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// A 32-bit response (R1, R3, R6, R7).
    Short(u32),
    /// R2: the 16-byte register.
    Long([u8; 16]),
}

impl Answer {
    /// The response words as a controller that keeps a long one's bits 127:0 holds them (word 0 =
    /// bits 31:0, its low byte the CRC); a short one in word 0.
    pub fn words(&self) -> [u32; 4] {
        match *self {
            Answer::Short(r) => [r, 0, 0, 0],
            Answer::Long(b) => {
                let w = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
                [w(12), w(8), w(4), w(0)]
            }
        }
    }
}

impl Card {
    /// A card in the idle state, unpowered; `wp_violation`: it refuses writes; `stuck_programming`:
    /// it never finishes programming.
    pub fn new(spec: CardSpec, wp_violation: bool, stuck_programming: bool) -> Card {
        let cid = make_cid();
        let mut csd = make_csd(spec.kind, spec.blocks());
        if spec.perm_write_protect {
            csd = (u128::from_be_bytes(csd) | 1 << 13).to_be_bytes();
        }
        if !spec.ccc_switch {
            // No command class 10 (switch): CCC bit 10 is CSD bit 94.
            csd = (u128::from_be_bytes(csd) & !(1 << 94)).to_be_bytes();
        }
        let spec_inserted = spec.inserted;
        Card {
            spec,
            state: CardState::Idle,
            powered: false,
            app: false,
            rca: 0,
            acmd41s: 0,
            ccs: false,
            width4: false,
            blocklen: 512,
            pending: 0,
            dead: !spec_inserted,
            stream: None,
            single: false,
            recv: None,
            prg_until: None,
            written: BTreeMap::new(),
            wp_violation,
            stuck_programming,
            cid,
            csd,
            register: None,
            access_mode: 0,
            s18a: false,
            switching: false,
            signal_1v8: false,
            switches: 0,
        }
    }

    pub fn blocks(&self) -> u64 {
        self.spec.blocks()
    }

    pub fn block(&self, lba: u64) -> Vec<u8> {
        if let Some(b) = self.written.get(&lba) {
            return b.clone();
        }
        match &self.spec.backing {
            Backing::Bytes(b) => b[lba as usize * 512..(lba as usize + 1) * 512].to_vec(),
            Backing::Pattern { .. } => pattern_block(lba),
        }
    }

    /// Programming ends when its time has come.
    pub fn tick(&mut self, now: u64) {
        if self.state == CardState::Prg && self.prg_until.is_some_and(|t| now >= t) {
            self.state = CardState::Tran;
            self.prg_until = None;
        }
    }

    /// Start programming: busy for [`PROGRAM_NS`] (or for ever).
    pub fn program(&mut self, now: u64) {
        self.state = CardState::Prg;
        self.prg_until = (!self.stuck_programming).then_some(now + PROGRAM_NS);
    }

    pub fn power_cycle(&mut self) {
        self.state = CardState::Idle;
        self.app = false;
        self.rca = 0;
        self.acmd41s = 0;
        self.ccs = false;
        self.width4 = false;
        self.blocklen = 512;
        self.pending = 0;
        self.stream = None;
        self.recv = None;
        self.prg_until = None;
        self.register = None;
        self.access_mode = 0;
        self.s18a = false;
        if !self.powered {
            self.switching = false;
            self.signal_1v8 = false;
        }
    }

    /// The card has sent block `lba` of its read: back to "tran" after a single block, else on
    /// to the next.
    pub fn sent(&mut self, lba: u64) {
        self.stream = if self.single { None } else { Some(lba + 1) };
        if self.single {
            self.state = CardState::Tran;
        }
    }

    /// What is wrong with command `index` (`app`: an application command) at `hz`: an
    /// identification command outside 100-400 kHz, or a clock above the access mode's.
    pub fn clock_fault(&self, index: u8, app: bool, hz: u32) -> Option<String> {
        let ident = matches!(
            (app, index),
            (_, 0) | (false, 2) | (false, 3) | (false, 8) | (true, 41) | (false, 55)
        ) && self.state as u8 <= 3;
        if ident && !(100_000..=400_000).contains(&hz) {
            return Some(format!("identification CMD{index} at {hz} Hz"));
        }
        (hz as f64 > self.max_clock_hz()).then(|| {
            format!(
                "CMD{index} at {hz} Hz, above the card's access mode {}",
                self.access_mode
            )
        })
    }

    /// The fastest clock the access mode in force allows.
    pub fn max_clock_hz(&self) -> f64 {
        match self.access_mode {
            0 => 25e6,
            1 | 4 => 50e6,
            2 => 100e6,
            _ => 208e6,
        }
    }

    /// Data on both clock edges (DDR50).
    pub fn ddr(&self) -> bool {
        self.access_mode == 4
    }

    /// Does group 1 function `f` exist on this card now?
    fn offers(&self, f: u8) -> bool {
        match f {
            0 => true,
            1 => self.spec.high_speed,
            2..=4 => self.spec.uhs && self.signal_1v8,
            _ => false,
        }
    }

    /// The clock restarted with the host's I/O at 1.8 V (`v18`): a card switching completes.
    pub fn clock_restarted(&mut self, v18: bool) {
        if self.switching && v18 && !self.spec.voltage_switch_fails {
            self.switching = false;
            self.signal_1v8 = true;
        }
    }

    /// The CMD6 status block for argument `arg` (and, in switch mode, the switch made).
    pub fn switch_function(&mut self, arg: u32) -> Vec<u8> {
        let switch = arg & (1 << 31) != 0;
        let mut b = vec![0u8; 64];
        // Bits 511:496: 100 mA.
        b[0..2].copy_from_slice(&100u16.to_be_bytes());
        // Support bits of groups 6 down to 1 (bytes 2..14): the default function (bit 0) and
        // bit 15 (reserved set by real cards) in every group; the access modes in group 1.
        for g in 0..6 {
            let mut bits = 0x8001u16;
            if g == 0 {
                bits |= (1..=4)
                    .filter(|&f| self.offers(f))
                    .map(|f| 1 << f)
                    .sum::<u16>();
            }
            let at = 12 - 2 * g;
            b[at..at + 2].copy_from_slice(&bits.to_be_bytes());
        }
        // Result nibbles: group 1 in byte 16's low nibble, group 2 its high nibble, ...
        for g in 0..6 {
            let f = ((arg >> (4 * g)) & 0xF) as u8;
            let current = if g == 0 { self.access_mode } else { 0 };
            let supported = f == 0 || (g == 0 && self.offers(f));
            let result = match f {
                0xF => current,
                _ if !supported || (switch && self.spec.refuse_switch && f != current) => 0xF,
                _ => f,
            };
            if switch && g == 0 && result != 0xF && result != current {
                self.access_mode = result;
                self.switches += 1;
            }
            b[16 - g / 2] |= result << (4 * (g % 2));
        }
        // Data structure version 1: busy bits (bytes 18..30) all clear.
        b[17] = 1;
        b
    }

    /// R1 card status for a command received in `state` (not ready for data while programming).
    pub fn status(&mut self, state: CardState, extra: u32) -> u32 {
        let ready = if state == CardState::Prg {
            0
        } else {
            R1_READY_FOR_DATA
        };
        std::mem::take(&mut self.pending) | ((state as u32) << R1_STATE_SHIFT) | ready | extra
    }

    /// The block a data command (CMD17/18/24/25) received in `state` with argument `arg` starts at:
    /// the block number on SDHC, the byte address on SDSC. Else the answer that refuses it: none
    /// outside "tran" (an illegal command), an R1 error for an SDSC address not on a block boundary
    /// or a block past the end.
    pub fn data_lba(&mut self, state: CardState, arg: u32) -> Result<u64, Option<Answer>> {
        if state != CardState::Tran {
            self.pending |= R1_ILLEGAL_COMMAND;
            return Err(None);
        }
        let lba = if self.ccs {
            arg as u64
        } else {
            if !arg.is_multiple_of(512) {
                return Err(Some(Answer::Short(self.status(state, R1_ADDRESS_ERROR))));
            }
            arg as u64 / 512
        };
        if lba >= self.blocks() {
            return Err(Some(Answer::Short(self.status(state, R1_OUT_OF_RANGE))));
        }
        Ok(lba)
    }

    /// A command reaching the card at `now` ([`Card::command`] once time has passed); a command
    /// that takes the card to "prg" (CMD12 ending a write) starts programming what it received.
    /// Returns whether it was an application command, and the answer.
    pub fn command_at(
        &mut self,
        now: u64,
        index: u8,
        arg: u32,
        never_ready: bool,
    ) -> (bool, Option<Answer>) {
        self.tick(now);
        let app = self.app;
        let before = self.state;
        let answer = self.command(index, arg, never_ready);
        if before != CardState::Prg && self.state == CardState::Prg {
            self.program(now);
        }
        (app, answer)
    }

    /// Execute a command (an application command if CMD55 came just before); `None` = no
    /// response.
    pub fn command(&mut self, index: u8, arg: u32, never_ready: bool) -> Option<Answer> {
        let app = std::mem::take(&mut self.app);
        if self.dead || !self.powered {
            return None;
        }
        use CardState::*;
        let st = self.state;
        let addressed = (arg >> 16) as u16 == self.rca;
        let illegal = |c: &mut Card| {
            c.pending |= R1_ILLEGAL_COMMAND;
            None
        };
        match (app, index) {
            (_, 0) => {
                self.power_cycle();
                None
            }
            (false, 8) => {
                if st != Idle || self.spec.kind == Kind::SdscV1 || (arg >> 8) & 0xF != 1 {
                    return illegal(self);
                }
                Some(Answer::Short(arg & 0xFFF))
            }
            (false, 11) => {
                if st != Ready || !self.s18a {
                    return illegal(self);
                }
                let s = self.status(st, 0);
                self.switching = true;
                Some(Answer::Short(s))
            }
            (false, 19) => {
                if st != Tran || !self.signal_1v8 {
                    return illegal(self);
                }
                let s = self.status(st, 0);
                self.register = Some(tuning_block());
                self.state = Data;
                self.stream = None;
                self.single = true;
                Some(Answer::Short(s))
            }
            (false, 6) => {
                if st != Tran || !self.spec.cmd6 {
                    return illegal(self);
                }
                let s = self.status(st, 0);
                self.register = Some(self.switch_function(arg));
                self.state = Data;
                self.stream = None;
                self.single = true;
                Some(Answer::Short(s))
            }
            (false, 55) => {
                if matches!(st, Stby | Tran | Data) && !addressed {
                    return None;
                }
                let s = self.status(st, R1_APP_CMD);
                self.app = true;
                Some(Answer::Short(s))
            }
            (true, 41) => {
                if st != Idle {
                    return illegal(self);
                }
                let window = arg & OCR_VDD_27_36;
                let mut ocr = OCR_VDD_27_36;
                if window != 0 {
                    self.acmd41s += 1;
                    let hcs = arg & OCR_CCS != 0;
                    let ready = !never_ready
                        && self.acmd41s > self.spec.busy_polls
                        && (self.spec.kind != Kind::Sdhc || hcs);
                    if ready {
                        self.ccs = self.spec.kind == Kind::Sdhc;
                        self.state = Ready;
                        ocr |= OCR_POWERED_UP;
                        if self.ccs {
                            ocr |= OCR_CCS;
                        }
                        // S18R asked, a UHS-I SDHC card not yet at 1.8 V: S18A.
                        self.s18a =
                            arg & OCR_S18 != 0 && self.spec.uhs && self.ccs && !self.signal_1v8;
                        if self.s18a {
                            ocr |= OCR_S18;
                        }
                    }
                }
                Some(Answer::Short(ocr))
            }
            (false, 2) => {
                if st != Ready {
                    return illegal(self);
                }
                self.state = Ident;
                Some(Answer::Long(self.cid))
            }
            (false, 3) => {
                if !matches!(st, Ident | Stby) {
                    return illegal(self);
                }
                self.state = Stby;
                self.rca = self.spec.rca;
                let s = self.status(st, 0);
                // R6: RCA, then status bits 23, 22, 19, 12:0.
                let bits = ((s >> 8) & 0xC000) | ((s >> 6) & 0x2000) | (s & 0x1FFF);
                Some(Answer::Short((self.rca as u32) << 16 | bits))
            }
            (false, 9) => {
                if st != Stby || !addressed {
                    return if st == Stby { None } else { illegal(self) };
                }
                Some(Answer::Long(self.csd))
            }
            (false, 7) => {
                if addressed {
                    match st {
                        Stby | Tran => {
                            let s = self.status(st, 0);
                            self.state = Tran;
                            Some(Answer::Short(s))
                        }
                        _ => illegal(self),
                    }
                } else {
                    if matches!(st, Tran | Data) {
                        self.state = Stby;
                        self.stream = None;
                    }
                    None
                }
            }
            (true, 6) => {
                if st != Tran {
                    return illegal(self);
                }
                self.width4 = arg & 3 == 2;
                Some(Answer::Short(self.status(st, R1_APP_CMD)))
            }
            (false, 16) => {
                if st != Tran {
                    return illegal(self);
                }
                let extra = if self.ccs || arg == 512 {
                    self.blocklen = 512;
                    0
                } else {
                    R1_BLOCK_LEN_ERROR
                };
                Some(Answer::Short(self.status(st, extra)))
            }
            (false, 17) | (false, 18) => {
                let lba = match self.data_lba(st, arg) {
                    Ok(lba) => lba,
                    Err(refused) => return refused,
                };
                let s = self.status(st, 0);
                self.state = Data;
                self.stream = Some(lba);
                self.single = index == 17;
                Some(Answer::Short(s))
            }
            (false, 24) | (false, 25) => {
                let lba = match self.data_lba(st, arg) {
                    Ok(lba) => lba,
                    Err(refused) => return refused,
                };
                if self.spec.perm_write_protect || self.wp_violation {
                    return Some(Answer::Short(self.status(st, R1_WP_VIOLATION)));
                }
                let s = self.status(st, 0);
                self.state = Rcv;
                self.recv = Some(lba);
                self.single = index == 24;
                Some(Answer::Short(s))
            }
            (false, 12) => {
                if !matches!(st, Data | Rcv) {
                    return illegal(self);
                }
                let s = self.status(st, 0);
                self.stream = None;
                self.register = None;
                if st == Rcv {
                    self.recv = None;
                    // What was received is programmed now (its time set by the controller).
                    self.state = Prg;
                    self.prg_until = None;
                } else {
                    self.state = Tran;
                }
                Some(Answer::Short(s))
            }
            (false, 13) => {
                if !matches!(st, Stby | Tran | Data | Rcv | Prg) {
                    return illegal(self);
                }
                if !addressed {
                    return None;
                }
                Some(Answer::Short(self.status(st, 0)))
            }
            _ => illegal(self),
        }
    }
}

/// The response type (bits 1:0), CRC check and index check a command needs.
pub fn expected_response(index: u8, app: bool) -> Option<(u16, bool, bool)> {
    const R1: (u16, bool, bool) = (2, true, true);
    const R1B: (u16, bool, bool) = (3, true, true);
    const R2: (u16, bool, bool) = (1, true, false);
    const R3: (u16, bool, bool) = (2, false, false);
    Some(match (app, index) {
        (_, 0) => (0, false, false),
        (true, 41) => R3,
        (true, _) => R1,
        (false, 2) | (false, 9) | (false, 10) => R2,
        (false, 7) | (false, 12) | (false, 28) | (false, 29) | (false, 38) => R1B,
        (false, 3)
        | (false, 6)
        | (false, 8)
        | (false, 11)
        | (false, 19)
        | (false, 13)
        | (false, 16)
        | (false, 17)
        | (false, 18)
        | (false, 24)
        | (false, 25)
        | (false, 55) => R1,
        _ => return None,
    })
}

/// What CMD19 sends: 64 bytes standing for the SD spec's 4-bit tuning pattern (the host compares
/// it itself; the bytes do not matter to the simulators).
pub fn tuning_block() -> Vec<u8> {
    const P: [u32; 16] = [
        0xff0f_ff00,
        0xffcc_c3cc,
        0xc33c_cff3,
        0xfefe_ffdd,
        0xffdf_fedd,
        0xbbff_ffee,
        0xfffd_ffbf,
        0xffed_efbb,
        0xdbde_ffff,
        0xddef_ddbb,
        0xfbbf_ffff,
        0xbffd_fde7,
        0xdeff_bbef,
        0x6bf7_fdcf,
        0xfbbf_dfff,
        0xbd7f_fbf7,
    ];
    P.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The CID: manufacturer 0x1B, OEM "SM", product "LMSIM", revision 1.0, serial 0x12345678,
/// made 2024-06.
pub fn make_cid() -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x1B;
    c[1..3].copy_from_slice(b"SM");
    c[3..8].copy_from_slice(b"LMSIM");
    c[8] = 0x10;
    c[9..13].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    // MDT (bits 19:8): year - 2000 = 0x18 in bits 19:12, month 6 in bits 11:8.
    c[13] = 0x01;
    c[14] = 0x86;
    c[15] = 0x01;
    c
}

pub fn set_field(reg: &mut u128, hi: u32, lo: u32, v: u128) {
    let width = hi - lo + 1;
    let mask = ((1u128 << width) - 1) << lo;
    *reg = (*reg & !mask) | ((v << lo) & mask);
}

/// The CSD for a card of `blocks` blocks: version 2.0 for SDHC, version 1.0 (the smallest
/// READ_BL_LEN and largest C_SIZE_MULT that express the size) for SDSC.
pub fn make_csd(kind: Kind, blocks: u64) -> [u8; 16] {
    let mut r = 0u128;
    set_field(&mut r, 103, 96, 0x32); // TRAN_SPEED 25 MHz
    set_field(&mut r, 46, 46, 1); // ERASE_BLK_EN
    set_field(&mut r, 45, 39, 0x7F); // SECTOR_SIZE
    set_field(&mut r, 0, 0, 1);
    match kind {
        Kind::Sdhc => {
            assert!(
                blocks.is_multiple_of(1024) && blocks > 0,
                "SDHC capacity must be whole 512 KiB units"
            );
            set_field(&mut r, 127, 126, 1);
            set_field(&mut r, 119, 112, 0x0E); // TAAC
            set_field(&mut r, 95, 84, 0x5B5); // CCC
            set_field(&mut r, 83, 80, 9);
            set_field(&mut r, 69, 48, (blocks / 1024 - 1) as u128);
            set_field(&mut r, 25, 22, 9);
        }
        Kind::SdscV1 | Kind::SdscV2 => {
            let bytes = blocks * 512;
            let (bl, mult, c_size) = (9..=11u32)
                .flat_map(|bl| (0..=7u32).rev().map(move |m| (bl, m)))
                .find_map(|(bl, m)| {
                    let unit = 1u64 << (m + 2 + bl);
                    (bytes.is_multiple_of(unit) && (1..=4096).contains(&(bytes / unit)))
                        .then(|| (bl, m, bytes / unit - 1))
                })
                .expect("SDSC capacity not expressible in a CSD 1.0");
            set_field(&mut r, 127, 126, 0);
            set_field(&mut r, 119, 112, 0x26);
            set_field(&mut r, 95, 84, 0x5F5);
            set_field(&mut r, 83, 80, bl as u128);
            set_field(&mut r, 79, 79, 1); // READ_BL_PARTIAL
            set_field(&mut r, 73, 62, c_size as u128);
            set_field(&mut r, 61, 50, 0xFFF); // VDD currents
            set_field(&mut r, 49, 47, mult as u128);
            set_field(&mut r, 25, 22, bl as u128);
        }
    }
    r.to_be_bytes()
}

/// Read `blocks` blocks at `lba` through `sd` into a fresh buffer (filled with 0xA5 first, so
/// that a block the driver leaves alone shows).
pub fn read_blocks<D: BlockDevice>(
    sd: &mut D,
    lba: u64,
    blocks: usize,
) -> Result<Vec<u8>, D::Error> {
    let mut buf = vec![0xA5u8; blocks * 512];
    sd.read_blocks(lba, &mut buf).map(|()| buf)
}
