//! A register-level fake BCM2835 "sdhost" SD controller and system DMA controller with the SD card
//! of `sd_card_sim` behind them, for the `sdhost` driver tests: what QEMU's models leave out.
//!
//! The controller: SDCMD (NEW runs the command at once; FAIL with SDHSTS command timeout for a
//! missing response, CRC7 for a response CRC fault), SDARG, SDCDIV (SD clock = core / (SDCDIV +
//! 2), checked: identification at 100-400 kHz, data at most the card's access mode allows),
//! SDRSP0-3, SDHSTS (write 1 to clear; busy flag after an R1b command when SDHCFG has the busy
//! interrupt enable), SDEDM (state machine, FIFO words, thresholds, FORCE_DATA_MODE), SDHCFG
//! (reads 0, as on QEMU: the driver must keep its own), SDHBCT, SDHBLC, SDDATA. Reads are timed:
//! after an access time the card's words arrive at the SD clock (4 or 1 lines) into the 16-word
//! FIFO; with the FIFO full the state machine waits in READWAIT. A block with a CRC fault raises
//! SDHSTS CRC16 and ends the transfer. A command while the state machine is not idle (IDENT or
//! DATA), other than CMD12, is a violation.
//!
//! The DMA controller (channels at n x 0x100, ENABLE at 0xFF0): CS (RESET, ACTIVE, END, ERROR),
//! CONBLK_AD, DEBUG (error bits, write 1 to clear). Setting ACTIVE loads the control block from
//! the simulated bus memory ([`SimDma`]: a control block the driver did not clean is stale);
//! the block must be a DREQ 13 peripheral read from SDDATA (bus 0x7E20_2040) with WAIT_RESP. The
//! engine moves a word only while the FIFO holds one (DREQ pacing): it runs as time passes
//! (every register access, every cache invalidate). Faults: an engine error half-way through the
//! Nth DMA transfer (CS.ERROR, DEBUG read error), a state machine stuck in READWAIT after a
//! multi-block read until FORCE_DATA_MODE (or for ever), data CRC errors.
#![allow(dead_code)]

#[allow(unused_imports)]
pub use super::dma_mem::{Buf, Forget, MemOp};
use super::dma_mem::{DmaRam, HasDmaRam, SimDmaOf};
pub use super::sd_card_sim::*;
use drivers::bcm2835::dma::DmaChannel;
use drivers::sdhost::{Clock, Config, DmaMemory, NoDma, Regs, Sdhost};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// The core clock the tests run at: QEMU's.
pub const CORE_HZ: u32 = 350_000_000;
/// Time from a read command to its first word.
pub const READ_ACCESS_NS: u64 = 50_000;
/// The DMA channel the tests use.
pub const CHANNEL: u8 = 5;
const SDDATA_BUS: u32 = 0x7E20_2040;

faults! {
    /// 0-based indices of DMA transfers that fail half-way (CS.ERROR, DEBUG read error).
    dma_error_at: Vec<u64>,
    /// Every DMA transfer fails half-way.
    dma_error_always: bool,
    /// After a multi-block read the state machine stays in READWAIT until FORCE_DATA_MODE.
    stuck_readwait: bool,
    /// ... and FORCE_DATA_MODE does not move it either.
    stuck_for_ever: bool,
    /// Every data block read above this clock has a CRC error.
    crc_above_hz: Option<u32>,
}

/// A data transfer in progress.
#[derive(Debug)]
struct Xfer {
    write: bool,
    /// Read: words still to come from the card.
    words_left: u32,
    /// Read: the current block's words not yet in the FIFO.
    block: VecDeque<u32>,
    /// When the next word arrives.
    next_at: u64,
    /// Write: the block being filled.
    buf: Vec<u8>,
}

/// A DMA transfer in progress.
#[derive(Debug, Clone, Copy)]
struct DmaRun {
    dest: u32,
    left: u32,
    index: u64,
    total: u32,
}

/// The whole simulated machine.
#[derive(Debug)]
pub struct State {
    faults: Faults,
    now_ns: u64,
    cmd: u32,
    arg: u32,
    cdiv: u32,
    rsp: [u32; 4],
    hsts: u32,
    fsm: u32,
    edm_thresholds: u32,
    hcfg: u32,
    hbct: u32,
    hblc: u32,
    fifo: VecDeque<u32>,
    card: Card,
    xfer: Option<Xfer>,
    blocks_sent: u64,
    pub log: Vec<BusCmd>,
    bus_ns: u64,
    pub violations: Vec<String>,
    accesses: u64,
    dma_run: Option<DmaRun>,
    commands_seen: u64,
    /// Virtual times (ns) at which DMA transfers ended.
    pub dma_ends_at: Vec<u64>,
    /// SDDATA words the CPU read or wrote.
    pub cpu_words: u64,
    dma: DmaRam,
    /// SDDATA words the DMA engine read.
    pub dma_words: u64,
    dma_cs: u32,
    dma_debug: u32,
    conblk: u32,
    dma_transfers: u64,
}

host_sim_handles!();

/// Which register block a [`SimRegs`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Sdhost,
    Dma,
}

/// A register block of the simulated machine, for the driver.
#[derive(Debug)]
pub struct SimRegs(Rc<RefCell<State>>, Block);

impl HasDmaRam for State {
    /// The engine's writes up to now are in memory before the CPU looks.
    fn settle(&mut self) {
        self.advance();
    }

    fn violation(&mut self, what: String) {
        self.violations.push(what);
    }

    fn ram(&mut self) -> &mut DmaRam {
        &mut self.dma
    }
}

// No helper named after `SimRegs` below these (and no closure in them): the card bench's
// callgrind run leaves the simulator out by toggling collection at every function whose name
// holds `SimRegs`, and a nested one would toggle it back on.
impl Regs for SimRegs {
    #[inline(never)]
    fn read32(&mut self, off: usize) -> u32 {
        let mut s = self.0.borrow_mut();
        s.register_access();
        match self.1 {
            Block::Sdhost => s.read(off),
            Block::Dma => s.dma_read(off),
        }
    }

    #[inline(never)]
    fn write32(&mut self, off: usize, v: u32) {
        let mut s = self.0.borrow_mut();
        s.register_access();
        match self.1 {
            Block::Sdhost => s.write(off, v),
            Block::Dma => s.dma_write(off, v),
        }
    }
}

impl Clock for SimClock {
    #[inline(never)]
    fn now_us(&mut self) -> u64 {
        self.0.borrow_mut().pass(20) / 1000
    }

    #[inline(never)]
    fn delay_us(&mut self, us: u32) {
        self.0.borrow_mut().pass(us as u64 * 1000);
    }
}

impl Sim {
    pub fn new(card: CardSpec, faults: Faults) -> Sim {
        Sim(Rc::new(RefCell::new(State {
            faults,
            now_ns: 0,
            cmd: 0,
            arg: 0,
            cdiv: 0,
            rsp: [0; 4],
            hsts: 0,
            fsm: 0xF,
            edm_thresholds: 0,
            hcfg: 0,
            hbct: 0,
            hblc: 0,
            fifo: VecDeque::new(),
            card: Card::new(card, false, false),
            xfer: None,
            blocks_sent: 0,
            log: Vec::new(),
            bus_ns: 0,
            violations: Vec::new(),
            accesses: 0,
            dma_run: None,
            commands_seen: 0,
            dma_ends_at: Vec::new(),
            cpu_words: 0,
            dma: DmaRam::new(0xC000_0000 | 0x0100_0000),
            dma_words: 0,
            dma_cs: 0,
            dma_debug: 0,
            conblk: 0,
            dma_transfers: 0,
        })))
    }

    pub fn regs(&self) -> SimRegs {
        SimRegs(self.0.clone(), Block::Sdhost)
    }

    pub fn dma_regs(&self) -> SimRegs {
        SimRegs(self.0.clone(), Block::Dma)
    }

    pub fn set_faults(&self, f: Faults) {
        self.0.borrow_mut().faults = f;
    }

    pub fn cpu_words(&self) -> u64 {
        self.0.borrow().cpu_words
    }

    pub fn dma_words(&self) -> u64 {
        self.0.borrow().dma_words
    }

    /// Virtual times (ns) at which DMA transfers ended.
    pub fn dma_ends(&self) -> Vec<u64> {
        self.0.borrow().dma_ends_at.clone()
    }

    /// The SD clock now.
    pub fn clock_hz(&self) -> u32 {
        self.0.borrow().clock_hz()
    }
}

impl State {
    /// One register access: its cost in time, the machine brought up to now.
    fn register_access(&mut self) {
        self.accesses += 1;
        self.pass(ACCESS_NS);
    }

    /// Let `ns` pass: the card's words and the engine move on. Returns the time now.
    fn pass(&mut self, ns: u64) -> u64 {
        self.now_ns += ns;
        self.advance();
        self.now_ns
    }

    fn violation(&mut self, what: String) {
        self.violations.push(what);
    }

    fn clock_hz(&self) -> u32 {
        CORE_HZ / (self.cdiv + 2)
    }

    fn lines(&self) -> u64 {
        if self.hcfg & 4 != 0 {
            4
        } else {
            1
        }
    }

    fn word_ns(&self) -> u64 {
        // A block: 4096 data bits, CRC and end bits, on the lines in use; a word: its 128th.
        (512 * 8 + 16) * 1_000_000_000 / self.clock_hz().max(1) as u64 / self.lines() / 128
    }

    fn edm(&self) -> u32 {
        self.fsm | (self.fifo.len() as u32) << 4 | self.edm_thresholds
    }

    fn read(&mut self, off: usize) -> u32 {
        match off {
            0x00 => self.cmd,
            0x04 => self.arg,
            0x10..=0x1C => self.rsp[(off - 0x10) / 4],
            0x20 => self.hsts,
            0x34 => self.edm(),
            // SDHCFG, SDCDIV, SDTOUT read back 0 (QEMU's model).
            0x08 | 0x0C | 0x38 => 0,
            0x3C => self.hbct,
            0x50 => self.hblc,
            0x40 => {
                self.cpu_words += 1;
                self.pop_fifo()
            }
            _ => 0,
        }
    }

    fn write(&mut self, off: usize, v: u32) {
        match off {
            0x00 => {
                self.cmd = v & !0x8000;
                if v & 0x8000 != 0 {
                    self.command(v);
                }
            }
            0x04 => self.arg = v,
            0x0C => self.cdiv = v & 0x7FF,
            0x20 => self.hsts &= !v,
            // Card power: on, the state machine starts in IDENT; off, the card loses its state.
            0x30 => {
                self.card.powered = v & 1 != 0;
                if v & 1 != 0 && !self.faults.stuck_for_ever {
                    self.fsm = 0;
                } else {
                    self.card.power_cycle();
                }
            }
            0x34 => {
                self.edm_thresholds = v & (0x3FF << 9);
                // QEMU's model: a write of state 0xF (power down) leaves IDENT.
                if v & 0xF == 0xF {
                    self.fsm = 0;
                }
                if v & (1 << 19) != 0 && !self.faults.stuck_for_ever {
                    self.fsm = 1;
                }
            }
            0x38 => self.hcfg = v,
            0x3C => self.hbct = v,
            0x50 => self.hblc = v,
            0x40 => {
                self.cpu_words += 1;
                self.write_data(v);
            }
            _ => {}
        }
    }

    fn command(&mut self, v: u32) {
        let index = (v & 0x3F) as u8;
        let app = self.card.app;
        if !matches!(self.fsm, 0 | 1) && index != 12 {
            self.violation(format!("CMD{index} with the state machine in {}", self.fsm));
        }
        if let Some(v) = self.card.clock_fault(index, app, self.clock_hz()) {
            self.violation(v);
        }
        if index == 12 {
            // The card stops sending: what the controller holds is dropped.
            self.xfer = None;
            self.fifo.clear();
        }
        let k = self.commands_seen;
        self.commands_seen += 1;
        let (app, answer) =
            self.card
                .command_at(self.now_ns, index, self.arg, self.faults.never_ready);
        let clock_hz = self.clock_hz();
        self.log.push(BusCmd {
            index,
            app,
            arg: self.arg,
            clock_hz,
            answered: answer.is_some(),
            auto: false,
        });
        self.now_ns += 48 * 1_000_000_000 / clock_hz.max(1) as u64;
        let Some(answer) = answer else {
            if v & 0x400 == 0 {
                self.cmd |= 0x4000;
                self.hsts |= 0x40;
            }
            return;
        };
        self.rsp = answer.words();
        if self.faults.cmd_crc_at.contains(&k) {
            self.cmd |= 0x4000;
            self.hsts |= 0x10;
        }
        if v & 0x800 != 0 {
            if self.hcfg & (1 << 10) == 0 {
                self.violation(format!("CMD{index} busy wait without SDHCFG busy enable"));
            } else {
                self.hsts |= 0x400;
            }
        }
        if v & 0xC0 != 0 && matches!(self.card.state, CardState::Data | CardState::Rcv) {
            self.start_data(v & 0x80 != 0);
        }
    }

    fn start_data(&mut self, write: bool) {
        if self.card.width4 && self.hcfg & 4 == 0 {
            self.violation("data with a 4-bit card and a 1-bit host (SDHCFG)".into());
        }
        let words = self.hbct * self.hblc / 4;
        self.fsm = if write { 3 } else { 2 };
        self.xfer = Some(Xfer {
            write,
            words_left: words,
            block: VecDeque::new(),
            next_at: self.now_ns + READ_ACCESS_NS,
            buf: Vec::new(),
        });
    }

    /// The card's next block (or CMD6's register), `None` with a CRC error (raised) or none.
    fn next_block(&mut self) -> Option<Vec<u8>> {
        if let Some(reg) = self.card.register.take() {
            self.card.state = CardState::Tran;
            return Some(reg);
        }
        let lba = self
            .card
            .stream
            .filter(|&l| !self.card.dead && l < self.card.blocks())?;
        let k = self.blocks_sent;
        self.blocks_sent += 1;
        self.card.sent(lba);
        self.bus_ns += self.word_ns() * 128;
        let too_fast = self
            .faults
            .crc_above_hz
            .is_some_and(|hz| self.clock_hz() > hz);
        if too_fast || self.faults.bad_lbas.contains(&lba) || self.faults.data_crc_at.contains(&k) {
            self.hsts |= 0x20;
            self.xfer = None;
            self.fsm = 1;
            return None;
        }
        Some(self.card.block(lba))
    }

    /// Move time on: words from the card into the FIFO, the DMA engine taking them.
    fn advance(&mut self) {
        for _ in 0..100_000 {
            let moved = self.fill_one() | self.dma_one();
            if !moved {
                break;
            }
        }
    }

    /// One word into the FIFO if it has arrived and fits.
    fn fill_one(&mut self) -> bool {
        let now = self.now_ns;
        let Some(x) = self.xfer.as_mut().filter(|x| !x.write) else {
            return false;
        };
        if x.words_left == 0 || x.next_at > now {
            return false;
        }
        if self.fifo.len() >= 16 {
            self.fsm = 4;
            return false;
        }
        if x.block.is_empty() {
            let Some(b) = self.next_block() else {
                return false;
            };
            let words = b
                .chunks(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            let x = self.xfer.as_mut().unwrap();
            x.block = words.collect();
        }
        let word_ns = self.word_ns();
        let x = self.xfer.as_mut().unwrap();
        let w = x.block.pop_front().unwrap_or(0);
        x.words_left -= 1;
        x.next_at += word_ns;
        let done = x.words_left == 0;
        self.fifo.push_back(w);
        self.fsm = 2;
        if done {
            self.xfer = None;
            let multi = self.hblc > 1;
            self.fsm = if multi && self.faults.stuck_readwait {
                4
            } else {
                1
            };
        }
        true
    }

    fn pop_fifo(&mut self) -> u32 {
        match self.fifo.pop_front() {
            Some(w) => w,
            None => {
                self.violation("read of an empty FIFO".into());
                0
            }
        }
    }

    /// A word of a write: a block is whole at 128 of them, and then the card takes it (and,
    /// the last of a single-block write, programs it).
    fn write_data(&mut self, v: u32) {
        let full = match self.xfer.as_mut() {
            Some(x) if x.write => {
                x.buf.extend(v.to_le_bytes());
                x.buf.len() == 512
            }
            _ => {
                self.violation(format!("SDDATA write {v:#x} with no write transfer"));
                return;
            }
        };
        if !full {
            return;
        }
        self.now_ns += self.word_ns() * 128;
        let x = self.xfer.as_mut().unwrap();
        let block = std::mem::take(&mut x.buf);
        x.words_left = x.words_left.saturating_sub(128);
        let rest = x.words_left;
        let card = &mut self.card;
        if let Some(lba) = card.recv.filter(|&l| l < card.blocks()) {
            card.recv = Some(lba + 1);
            card.written.insert(lba, block);
        }
        if rest > 0 {
            return;
        }
        self.xfer = None;
        self.fsm = 1;
        if self.hblc == 1 {
            self.card.recv = None;
            self.card.program(self.now_ns);
        }
    }

    // ---- the DMA controller ----

    fn dma_read(&mut self, off: usize) -> u32 {
        match off.checked_sub(CHANNEL as usize * 0x100) {
            Some(0x00) => self.dma_cs,
            Some(0x04) => self.conblk,
            Some(0x14) => self.dma_run.map_or(0, |r| r.left),
            Some(0x20) => self.dma_debug,
            _ => 0,
        }
    }

    fn dma_write(&mut self, off: usize, v: u32) {
        if off == 0xFF0 || off == 0xFE0 {
            return;
        }
        let Some(reg) = off
            .checked_sub(CHANNEL as usize * 0x100)
            .filter(|&r| r < 0x100)
        else {
            self.violation(format!("DMA register {off:#x} of another channel written"));
            return;
        };
        match reg {
            0x00 => {
                if v & (1 << 31) != 0 {
                    self.dma_cs = 0;
                    self.dma_run = None;
                }
                self.dma_cs &= !(v & 0x6);
                if v & 1 != 0 {
                    self.dma_start();
                }
            }
            0x04 => self.conblk = v,
            0x20 => self.dma_debug &= !(v & 7),
            _ => {}
        }
    }

    fn dma_start(&mut self) {
        let Some(cb) = self.dma.bus(self.conblk, 32).map(|b| b.to_vec()) else {
            self.violation(format!(
                "control block at {:#x} outside memory",
                self.conblk
            ));
            self.dma_cs |= 1 << 8;
            self.dma_debug |= 4;
            return;
        };
        let w =
            |i: usize| u32::from_le_bytes([cb[4 * i], cb[4 * i + 1], cb[4 * i + 2], cb[4 * i + 3]]);
        let (ti, src, dest, len) = (w(0), w(1), w(2), w(3));
        let want = 1 << 3 | 13 << 16 | 1 << 10 | 1 << 4;
        if ti & want != want || src != SDDATA_BUS || len == 0 {
            self.violation(format!(
                "control block TI {ti:#x} source {src:#x} len {len}"
            ));
        }
        self.dma_cs |= 1;
        let index = self.dma_transfers;
        self.dma_transfers += 1;
        self.dma_run = Some(DmaRun {
            dest,
            left: len,
            index,
            total: len,
        });
    }

    /// One word from the FIFO to memory if the engine runs and the FIFO has one (DREQ).
    fn dma_one(&mut self) -> bool {
        let Some(mut r) = self.dma_run else {
            return false;
        };
        let fail = self.faults.dma_error_always || self.faults.dma_error_at.contains(&r.index);
        if fail && r.left <= r.total / 2 {
            self.dma_cs = (self.dma_cs & !1) | 1 << 8;
            self.dma_debug |= 4;
            self.dma_run = None;
            return false;
        }
        let Some(w) = self.fifo.pop_front() else {
            return false;
        };
        self.dma_words += 1;
        match self.dma.bus(r.dest, 4) {
            Some(m) => m.copy_from_slice(&w.to_le_bytes()),
            None => self.violation(format!("DMA write to {:#x} outside memory", r.dest)),
        }
        r.dest += 4;
        r.left -= 4;
        if r.left == 0 {
            self.dma_run = None;
            self.dma_cs = (self.dma_cs & !1) | 2;
            self.dma_ends_at.push(self.now_ns);
        } else {
            self.dma_run = Some(r);
        }
        true
    }
}

// ---- Shared by the driver tests ----

pub type Driver = Sdhost<SimRegs, SimClock>;
pub type DmaDriver<D = SimDma> = Sdhost<SimRegs, SimClock, D>;

/// A 32 GiB SDHC card of pattern blocks.
pub fn sdhc() -> CardSpec {
    CardSpec::new(Kind::Sdhc, Backing::Pattern { blocks: 64 << 20 })
}

/// The driver's settings at the simulator's core clock.
pub fn config() -> Config {
    Config::new(CORE_HZ)
}

/// A simulator and the driver with DMA over the memory `mem` makes of it, or the init error.
pub fn try_start_dma<D: DmaMemory>(
    card: CardSpec,
    faults: Faults,
    config: Config,
    mem: impl FnOnce(&Sim) -> D,
) -> (Sim, Result<DmaDriver<D>, drivers::sd::SdError>) {
    let sim = Sim::new(card, faults);
    let ch = DmaChannel::new(sim.dma_regs(), CHANNEL);
    let m = mem(&sim);
    let sd = Sdhost::with_dma(sim.regs(), sim.clock(), config, Some(ch), m);
    (sim, sd)
}

/// [`try_start_dma`] over [`SimDma`], which must succeed.
pub fn start_dma(card: CardSpec, faults: Faults) -> (Sim, DmaDriver) {
    match try_start_dma(card, faults, config(), Sim::dma) {
        (sim, Ok(sd)) => (sim, sd),
        (sim, Err(e)) => panic!("init: {e}\n{:?}\n{:?}", sim.names(), sim.violations()),
    }
}

/// The driver on PIO.
pub fn start_pio(card: CardSpec, faults: Faults) -> (Sim, Driver) {
    let sim = Sim::new(card, faults);
    match Sdhost::with_dma(sim.regs(), sim.clock(), config(), None, NoDma) {
        Ok(sd) => (sim, sd),
        Err(e) => panic!("init: {e}\n{:?}\n{:?}", sim.names(), sim.violations()),
    }
}

/// The driver broke none of the simulator's rules.
pub fn check_no_violations(sim: &Sim) {
    assert_eq!(sim.violations(), Vec::<String>::new());
}
