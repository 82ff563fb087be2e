//! A register-level fake Allwinner SD/MMC controller (H3 "SMHC" at 0x01C0_F000) and H3 clock
//! controller (CCU) with the SD card of `sd_card_sim` behind them, for the `sunxi_mmc` driver tests.
//!
//! The controller models what the driver touches: GCTRL (soft/FIFO/DMA reset bits that read 1 for
//! a few microseconds, DMA and interrupt enables, access by AHB), CLKCR (enable, divider), TIMEOUT,
//! WIDTH, BLKSZ, BYTECNT, CMD (start bit 31 sends a command or, with bit 21, takes CLKCR: the card
//! clock changes only then), ARG, RESP0-3 (a long response as bits 127:0, RESP0 = bits 31:0), IMASK,
//! RINT (write 1 to clear), STATUS (FIFO empty / full, FIFO level in bits 30:17, card present, card
//! busy while the card programs or after an R1b command) and the FIFO at 0x200. The controller
//! answers only while its bus clock gate and bus reset in the CCU are on; its card clock is the
//! CCU's SDMMC0_CLK (OSC24M / 2^N / M) divided by CLKCR's divider (0 = by one).
//!
//! A missing response raises RINT response error alone ([`HostSpec::qemu`], as QEMU's model does)
//! or response timeout with command done (hardware). A read moves each block into the FIFO when
//! the previous one is out of it; a write takes 128 words through the FIFO per block, then the card
//! programs it (card busy). Data over after the last block, auto stop (CMD12 from the controller,
//! then auto command done) when asked.
//!
//! The module clock's source is OSC24M or PLL_PERIPH0, whose rate comes from the CCU's
//! PLL_PERIPH0_CTRL (600 MHz, enabled and locked, as U-Boot's SPL leaves it; off with
//! [`Faults::pll_off`]). High Speed: CMD6's 64-byte status block comes through the FIFO (BLKSZ
//! and BYTECNT 64); the card clock may exceed 25 MHz only once the card has switched to High
//! Speed, and never 50 MHz.
//!
//! Time is virtual: every register access costs 200 ns, `delay_us` adds its microseconds,
//! commands and blocks take their bits at the card clock.
//!
//! Recorded: every command on the bus, and violations: a command with the card clock off or the
//! controller not taking it (a CLKCR change not yet updated), identification above 400 kHz or below
//! 100 kHz, data above 25 MHz, a PIO transfer with DMA on or FIFO access not by AHB, a DMA transfer
//! with access by AHB, the IDMAC off or for a write, a bad descriptor chain, a BYTECNT that
//! is not the blocks of the command, a 4-bit host with a 1-bit card, reading an empty FIFO,
//! writing the FIFO with no write transfer, a command sent while the previous one is not taken,
//! a command or DLBA write while the IDMAC moves a read, a descriptor or buffer outside memory, a
//! cache invalidate not on whole cache lines.
//!
//! The internal DMA controller (IDMAC): GCTRL's DMA enable with "access by AHB" clear and DMAC's
//! IDMAC enable make a read command move its data through the descriptor chain from DLBA (config
//! with OWN, CHAIN, FIRST, LAST; buffer size; buffer address; next descriptor): each block of the
//! card written to the buffers, each descriptor handed back (OWN cleared) when its buffer is
//! full, then RINT data over (and auto stop) and IDST receive interrupt + normal summary. Two
//! modes ([`HostSpec::timed_dma`]): QEMU's, where the whole transfer moves the moment CMD is
//! written, and hardware-timed, where the blocks arrive over virtual time at the card clock
//! ([`READ_ACCESS_NS`], then 512 * 8 / 4 + 16 + 2 clocks per block on 4 lines), so IDST and data
//! over appear only once that time has passed; a GCTRL soft or DMA reset, a DMAC soft reset or
//! the IDMAC turned off stop a transfer in progress, and a command or a DLBA write while one is
//! in progress is a violation. The IDMAC sees a simulated memory, not the host's: [`SimDma`], the
//! driver's [`DmaMemory`], gives bus addresses to the host ranges the driver asks for (windows of
//! a bus space the simulator owns: the driver's DMA area, or a caller's buffer the IDMAC writes
//! directly), copies a host range into that memory on `to_device` (a cache clean) and back on
//! `from_device` (an invalidate: the CPU then sees what the controller wrote by then), and
//! records every call. A driver that forgets to clean its descriptors has the IDMAC find them not
//! owned (IDST descriptor unavailable); one that forgets to invalidate, the bounce buffer or the
//! caller's buffer, reads stale data.
//!
//! Faults: a CRC error on the response of the Nth command or on the Nth data block, a permanently
//! bad block, a card that never finishes ACMD41 or stops answering after N blocks, a controller
//! whose start bit never clears (for commands or for clock updates), a FIFO that never fills (and
//! an IDMAC that never gets data), an IDMAC fatal bus error half-way through the Nth DMA transfer
//! or through every one, bus addresses for the caller's buffers that no memory answers (the
//! descriptors point outside memory: a fatal bus error), and garbage: RINT, STATUS and IDST read
//! as pseudo-random values.
#![allow(dead_code)]

pub use super::dma_mem::MemOp;
use super::dma_mem::{DmaRam, HasDmaRam, SimDmaOf};
pub use super::sd_card_sim::*;
use drivers::sunxi_mmc::{Clock, Config, DmaMemory, NoDma, Regs, SunxiMmc};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

// The register map is the driver's: the simulator models the hardware those offsets and bits name.
use drivers::sunxi_mmc::regs::*;
pub use drivers::sunxi_mmc::regs::{ccu, desc, IDST_FATAL_BUS_ERROR};

/// The first bus address [`SimDma`] hands out.
pub const BUS_BASE: u32 = 0x4000_0000;
/// Largest buffer of one descriptor (QEMU's sun5i model: 64 KiB; size 0 means this much).
pub const MAX_DESC_BYTES: u32 = 64 << 10;
/// MMC0's bit in the CCU's gating and reset registers.
pub const MMC0_MASK: u32 = 1 << ccu::MMC0_BIT;

/// Hardware-timed IDMAC: the card's access time before the first block of a read.
pub const READ_ACCESS_NS: u64 = 100_000;

/// The controller.
#[derive(Debug, Clone, Copy)]
pub struct HostSpec {
    /// QEMU's way of reporting a missing response: RINT response error alone.
    pub qemu: bool,
    /// U-Boot left the controller gated, out of reset and on a 24 MHz module clock.
    pub left_on: bool,
    /// The IDMAC moves a read's blocks over virtual time at the card clock (hardware), not all at
    /// once when CMD is written (QEMU).
    pub timed_dma: bool,
}

impl HostSpec {
    /// Hardware: response timeouts, the IDMAC's data over time.
    pub fn hardware() -> HostSpec {
        HostSpec {
            qemu: false,
            left_on: false,
            timed_dma: true,
        }
    }

    /// QEMU's model: a missing response is RINT response error, the IDMAC moves a whole read
    /// when CMD is written.
    pub fn qemu() -> HostSpec {
        HostSpec {
            qemu: true,
            left_on: false,
            timed_dma: false,
        }
    }
}

faults! {
    /// The start bit of a command never clears (the controller takes nothing).
    stuck_start: bool,
    /// The start bit of a clock update never clears.
    stuck_clock_update: bool,
    /// Read data never reaches the FIFO, and no data timeout is raised.
    fifo_never_fills: bool,
    /// RINT, STATUS and IDST read as pseudo-random values from this seed on.
    garbage: Option<u64>,
    /// 0-based indices (over all DMA transfers) of transfers that end in an IDMAC fatal bus error.
    dma_error_at: Vec<u64>,
    /// Every DMA transfer ends in a fatal bus error.
    dma_error_always: bool,
    /// Every data block sent while the card clock is above this many Hz has a data CRC error.
    crc_above_hz: Option<u32>,
    /// PLL_PERIPH0 is off (its control register reads 0).
    pll_off: bool,
    /// The bus addresses [`SimDma`] gives from now on (the caller's buffers) point at no memory:
    /// the IDMAC's writes there end in a fatal bus error (a platform whose bus addresses are
    /// wrong). Cleared with the next [`Sim::set_faults`] without it.
    unbacked_buffers: bool,
}

#[derive(Debug)]
struct Xfer {
    write: bool,
    blocks_left: u32,
    multi: bool,
    auto_stop: bool,
    /// Write: the block being filled.
    buf: Vec<u8>,
}

/// The whole simulated machine.
#[derive(Debug)]
pub struct State {
    host: HostSpec,
    faults: Faults,
    now_ns: u64,
    gctrl: u32,
    reset_until: u64,
    clkcr: u32,
    /// CLKCR as the controller took it at the last clock update.
    clkcr_live: u32,
    ccu_clk_live: u32,
    width: u32,
    blksz: u32,
    bytecnt: u32,
    cmd: u32,
    arg: u32,
    resp: [u32; 4],
    imask: u32,
    rint: u32,
    busy_until: u64,
    fifo: VecDeque<u32>,
    xfer: Option<Xfer>,
    rng: u64,
    pub ccu: BTreeMap<usize, u32>,
    card: Card,
    pub log: Vec<BusCmd>,
    pub violations: Vec<String>,
    blocks_sent: u64,
    /// Time the bus was busy, by the clock model: command bits, the access time before an IDMAC
    /// read's first block, each block's bits on the lines in use with CRC, start and end bits.
    bus_ns: u64,
    /// Register accesses (controller and CCU), the CPU's share of the work.
    accesses: u64,
    commands_seen: u64,
    pub barriers: u64,
    ftrglevel: u32,
    dmac: u32,
    dlba: u32,
    idst: u32,
    idie: u32,
    dma: DmaRam,
    dma_transfers: u64,
    /// The IDMAC's read in progress (hardware-timed mode).
    dma_run: Option<DmaRun>,
}

/// A read the IDMAC is moving: where it is in the descriptor chain and, timed, when the next
/// block is in.
#[derive(Debug, Clone, Copy)]
struct DmaRun {
    /// Bus address of the current descriptor.
    desc: u32,
    /// Bytes of its buffer written.
    in_desc: usize,
    /// Bytes of the transfer still to come.
    left: usize,
    blocks: u32,
    moved: u32,
    /// Index over all DMA transfers (for the faults).
    index: u64,
    /// Timed: when the next block is in, and a block's time on the bus.
    next_at: u64,
    block_ns: u64,
}

host_sim_handles!();

/// The controller's registers (or the CCU's, `ccu`), for the driver.
#[derive(Debug)]
pub struct SimRegs {
    state: Rc<RefCell<State>>,
    ccu: bool,
}

impl HasDmaRam for State {
    fn ram(&mut self) -> &mut DmaRam {
        &mut self.dma
    }

    fn violation(&mut self, what: String) {
        State::violation(self, what)
    }

    fn unbacked(&self) -> bool {
        self.faults.unbacked_buffers
    }

    /// What the IDMAC has written by now is in memory before the CPU looks.
    fn settle(&mut self) {
        self.advance_dma();
    }
}

impl Regs for SimRegs {
    #[inline(never)]
    fn read32(&mut self, off: usize) -> u32 {
        let mut s = self.state.borrow_mut();
        s.now_ns += ACCESS_NS;
        s.accesses += 1;
        if self.ccu {
            return s.ccu.get(&off).copied().unwrap_or(0);
        }
        s.read(off)
    }

    #[inline(never)]
    fn write32(&mut self, off: usize, v: u32) {
        let mut s = self.state.borrow_mut();
        s.now_ns += ACCESS_NS;
        s.accesses += 1;
        if self.ccu {
            s.ccu.insert(off, v);
            return;
        }
        s.write(off, v)
    }

    #[inline(never)]
    fn barrier(&mut self) {
        self.state.borrow_mut().barriers += 1;
    }
}

impl Clock for SimClock {
    #[inline(never)]
    fn now_us(&mut self) -> u64 {
        let mut s = self.0.borrow_mut();
        s.now_ns += 20;
        s.now_ns / 1000
    }

    #[inline(never)]
    fn delay_us(&mut self, us: u32) {
        self.0.borrow_mut().now_ns += us as u64 * 1000;
    }
}

impl Sim {
    pub fn new(host: HostSpec, card: CardSpec, faults: Faults) -> Sim {
        let mut ccu = BTreeMap::new();
        if !faults.pll_off {
            // Enabled, locked, N = 25, K = 2: 24 MHz * 25 * 2 / 2 = 600 MHz.
            ccu.insert(ccu::PLL_PERIPH0_CTRL_REG, 0x9004_1811 | 1 << 28);
        }
        if host.left_on {
            ccu.insert(ccu::BUS_CLK_GATING_REG0, MMC0_MASK);
            ccu.insert(ccu::BUS_SOFT_RST_REG0, MMC0_MASK);
            ccu.insert(ccu::SDMMC0_CLK_REG, 0x8000_0000);
        }
        let mut card = Card::new(card, false, false);
        card.powered = true;
        let rng = faults.garbage.unwrap_or(1) | 1;
        Sim(Rc::new(RefCell::new(State {
            host,
            faults,
            now_ns: 0,
            gctrl: 0x300,
            reset_until: 0,
            clkcr: 0,
            clkcr_live: 0,
            ccu_clk_live: 0,
            width: 0,
            blksz: 0x200,
            bytecnt: 0x200,
            cmd: 0,
            arg: 0,
            resp: [0; 4],
            imask: 0,
            rint: 0,
            busy_until: 0,
            fifo: VecDeque::new(),
            xfer: None,
            rng,
            ccu,
            card,
            log: Vec::new(),
            violations: Vec::new(),
            blocks_sent: 0,
            bus_ns: 0,
            accesses: 0,
            commands_seen: 0,
            barriers: 0,
            ftrglevel: 0x000F_0000,
            dmac: 0,
            dlba: 0,
            idst: 0,
            idie: 0,
            dma: DmaRam::new(BUS_BASE),
            dma_transfers: 0,
            dma_run: None,
        })))
    }

    pub fn regs(&self) -> SimRegs {
        SimRegs {
            state: self.0.clone(),
            ccu: false,
        }
    }

    pub fn ccu_regs(&self) -> SimRegs {
        SimRegs {
            state: self.0.clone(),
            ccu: true,
        }
    }

    pub fn clear_mem_ops(&self) {
        self.0.borrow_mut().dma.ops.clear();
    }

    /// Hardware-timed: when the IDMAC's read in progress will have its last block in (virtual
    /// ns), if one is in progress.
    pub fn dma_ends_at_ns(&self) -> Option<u64> {
        let s = self.0.borrow();
        let r = s.dma_run?;
        Some(r.next_at + (r.blocks - r.moved - 1) as u64 * r.block_ns)
    }

    /// The bus address of host address `addr`, if mapped.
    pub fn bus_of(&self, addr: usize) -> Option<u32> {
        self.0.borrow_mut().dma.bus_of(addr)
    }

    /// The card clock the controller runs now.
    pub fn card_clock_hz(&self) -> u32 {
        self.0.borrow().card_clock_hz()
    }

    /// The CCU register at `off`.
    pub fn ccu(&self, off: usize) -> u32 {
        self.0.borrow().ccu.get(&off).copied().unwrap_or(0)
    }

    pub fn host_4bit(&self) -> bool {
        self.0.borrow().width == 1
    }

    pub fn set_faults(&self, faults: Faults) {
        let mut s = self.0.borrow_mut();
        if let Some(seed) = faults.garbage {
            s.rng = seed | 1;
        }
        s.faults = faults;
    }

    pub fn barriers(&self) -> u64 {
        self.0.borrow().barriers
    }
}

impl State {
    fn violation(&mut self, what: String) {
        self.violations.push(what);
    }

    /// Is the controller clocked and out of reset in the CCU?
    fn powered(&self) -> bool {
        let on = |off| self.ccu.get(&off).copied().unwrap_or(0) & MMC0_MASK != 0;
        on(ccu::BUS_CLK_GATING_REG0) && on(ccu::BUS_SOFT_RST_REG0)
    }

    /// The card clock: the module clock (as the CCU had it at the last update) / CLKCR's divider.
    fn card_clock_hz(&self) -> u32 {
        let m = self.ccu_clk_live;
        if m & (1 << 31) == 0 || self.clkcr_live & (1 << 16) == 0 {
            return 0;
        }
        let parent = match (m >> 24) & 3 {
            0 => 24_000_000,
            1 => {
                let pll = self
                    .ccu
                    .get(&ccu::PLL_PERIPH0_CTRL_REG)
                    .copied()
                    .unwrap_or(0);
                if pll & (1 << 31) == 0 || pll & (1 << 28) == 0 {
                    return 0;
                }
                12_000_000 * (((pll >> 8) & 0x1F) + 1) * (((pll >> 4) & 3) + 1)
            }
            _ => return 0,
        };
        let module = (parent >> ((m >> 16) & 3)) / ((m & 0xF) + 1);
        match self.clkcr_live & 0xFF {
            0 => module,
            n => module / (2 * n),
        }
    }

    fn garbage(&mut self) -> Option<u32> {
        self.faults.garbage?;
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        Some(x as u32)
    }

    fn status(&mut self) -> u32 {
        let now = self.now_ns;
        self.card.tick(now);
        let mut st = (self.fifo.len().min(0x3FFF) as u32) << 17;
        if self.fifo.is_empty() {
            st |= 1 << 2;
        }
        if !self.card.dead {
            st |= 1 << 8;
        }
        if now < self.busy_until || self.card.state == CardState::Prg {
            st |= 1 << 9;
        }
        st
    }

    fn read(&mut self, off: usize) -> u32 {
        if !self.powered() {
            return 0;
        }
        self.advance_dma();
        match off {
            GCTRL => {
                let resetting = if self.now_ns < self.reset_until { 7 } else { 0 };
                self.gctrl | resetting
            }
            CLKCR => self.clkcr,
            TIMEOUT | BLKSZ | IMASK => 0,
            WIDTH => self.width,
            BYTECNT => self.bytecnt,
            CMD => self.cmd,
            ARG => self.arg,
            0x20 | 0x24 | 0x28 | 0x2C => self.resp[(off - RESP[0]) / 4],
            RINT => self.garbage().unwrap_or(self.rint),
            STATUS => {
                let st = self.status();
                self.garbage().unwrap_or(st)
            }
            FIFO => self.read_fifo(),
            FTRGLEVEL => self.ftrglevel,
            DMAC => self.dmac,
            DLBA => self.dlba,
            IDST => self.garbage().unwrap_or(self.idst),
            IDIE => self.idie,
            _ => 0,
        }
    }

    fn write(&mut self, off: usize, v: u32) {
        if !self.powered() {
            self.violation(format!(
                "write {v:#x} at {off:#x} to a controller without bus clock or out of reset"
            ));
            return;
        }
        self.advance_dma();
        match off {
            GCTRL => {
                self.gctrl = v & !7;
                if v & 7 != 0 {
                    self.reset_until = self.now_ns + RESET_NS;
                }
                if v & 5 != 0 {
                    // A soft or DMA reset stops the IDMAC.
                    self.dma_run = None;
                }
                if v & 2 != 0 {
                    self.fifo.clear();
                }
                if v & 1 != 0 {
                    self.rint = 0;
                    self.fifo.clear();
                    self.xfer = None;
                    if !self.faults.stuck_start && !self.faults.stuck_clock_update {
                        self.cmd &= !(1 << 31);
                    }
                }
            }
            FTRGLEVEL => self.ftrglevel = v,
            DMAC => {
                if v & DMAC_SOFT_RESET != 0 {
                    self.idst = 0;
                }
                if v & DMAC_SOFT_RESET != 0 || v & DMAC_IDMA_ON == 0 {
                    self.dma_run = None;
                }
                self.dmac = v & !DMAC_SOFT_RESET;
            }
            DLBA => {
                if self.dma_run.is_some() {
                    self.violation(format!("DLBA {v:#x} written while the IDMAC moves a read"));
                }
                self.dlba = v;
            }
            IDST => self.idst &= !(v & 0x3FF),
            IDIE => self.idie = v,
            CLKCR => self.clkcr = v,
            WIDTH => self.width = v,
            BLKSZ => self.blksz = v,
            BYTECNT => self.bytecnt = v,
            ARG => self.arg = v,
            IMASK => self.imask = v,
            RINT => self.rint &= !v,
            CMD => self.write_cmd(v),
            FIFO => self.write_fifo(v),
            _ => {}
        }
    }

    fn write_cmd(&mut self, v: u32) {
        if self.cmd & (1 << 31) != 0 {
            self.violation(format!(
                "CMD {v:#x} written before the previous command was taken"
            ));
            return;
        }
        self.cmd = v;
        if v & (1 << 31) == 0 {
            return;
        }
        if v & (1 << 21) != 0 {
            if !self.faults.stuck_clock_update {
                self.clkcr_live = self.clkcr;
                self.ccu_clk_live = self.ccu.get(&ccu::SDMMC0_CLK_REG).copied().unwrap_or(0);
                self.cmd &= !(1 << 31);
                self.rint |= RINT_COMMAND_DONE;
            }
            return;
        }
        if self.faults.stuck_start {
            return;
        }
        self.cmd &= !(1 << 31);
        self.command(v);
    }

    /// Check the clock for command `index` (`app`: an application command).
    fn check_clock(&mut self, index: u8, app: bool) {
        if self.clkcr != self.clkcr_live {
            self.violation(format!(
                "CMD{index} with a CLKCR change not taken (no clock update)"
            ));
        }
        let hz = self.card_clock_hz();
        if hz == 0 {
            self.violation(format!("CMD{index} with the card clock off"));
        } else if let Some(v) = self.card.clock_fault(index, app, hz) {
            self.violation(v);
        }
    }

    fn bus_command(&mut self, index: u8, arg: u32, auto: bool) -> Option<Answer> {
        let (app, answer) = self
            .card
            .command_at(self.now_ns, index, arg, self.faults.never_ready);
        let clock_hz = self.card_clock_hz();
        self.log.push(BusCmd {
            index,
            app,
            arg,
            clock_hz,
            answered: answer.is_some(),
            auto,
        });
        answer
    }

    /// Time for `bits` bits at the card clock on `lines` lines.
    fn bits_ns(&self, bits: u64, lines: u64) -> u64 {
        let hz = self.card_clock_hz().max(1) as u64;
        bits * 1_000_000_000 / hz / lines
    }

    fn command(&mut self, v: u32) {
        let index = (v & 0x3F) as u8;
        let app = self.card.app;
        if self.dma_run.is_some() {
            self.violation(format!("CMD{index} sent while the IDMAC moves a read"));
        }
        self.check_clock(index, app);
        let k = self.commands_seen;
        self.commands_seen += 1;
        let data = v & (1 << 9) != 0;
        let arg = self.arg;
        let answer = self.bus_command(index, arg, false);
        let cmd_ns = self.bits_ns(if v & (1 << 7) != 0 { 184 } else { 96 }, 1);
        self.now_ns += cmd_ns;
        self.bus_ns += cmd_ns;
        let Some(answer) = answer else {
            if v & (1 << 6) == 0 {
                self.rint |= RINT_COMMAND_DONE;
            } else if self.host.qemu {
                self.rint |= RINT_RESP_ERROR;
            } else {
                self.rint |= RINT_RESP_TIMEOUT | RINT_COMMAND_DONE;
            }
            return;
        };
        match answer {
            Answer::Short(r) => self.resp = [r, 0, 0, 0],
            Answer::Long(b) => {
                let w = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
                self.resp = [w(12), w(8), w(4), w(0)];
            }
        }
        self.rint |= RINT_COMMAND_DONE;
        if self.faults.cmd_crc_at.contains(&k) {
            self.rint |= RINT_RESP_CRC_ERROR;
        }
        if matches!(index, 7 | 12) && !app {
            self.busy_until = self.now_ns + BUSY_NS;
        }
        if data && matches!(self.card.state, CardState::Data | CardState::Rcv) {
            self.start_data(v);
        }
    }

    fn start_data(&mut self, v: u32) {
        let multi = !self.card.single;
        let size = if self.card.register.is_some() {
            64
        } else {
            512
        };
        let blocks = if multi { self.bytecnt / size } else { 1 };
        if self.bytecnt != blocks * size || self.blksz != size || self.bytecnt == 0 {
            self.violation(format!(
                "BYTECNT {} / BLKSZ {} for CMD{}",
                self.bytecnt,
                self.blksz,
                v & 0x3F
            ));
        }
        let write = v & (1 << 10) != 0;
        let dma = self.gctrl & GCTRL_DMA_ENABLE != 0;
        if dma {
            if self.gctrl & GCTRL_ACCESS_BY_AHB != 0 || self.dmac & DMAC_IDMA_ON == 0 || write {
                self.violation(format!(
                    "DMA transfer with GCTRL {:#x}, DMAC {:#x}, write {write}",
                    self.gctrl, self.dmac
                ));
            }
        } else if self.gctrl & GCTRL_ACCESS_BY_AHB == 0 {
            self.violation(format!(
                "PIO transfer with GCTRL {:#x} (FIFO not by AHB)",
                self.gctrl
            ));
        }
        if (self.width == 1) != self.card.width4 {
            self.violation(format!(
                "host width {} with a card at 4 bits = {}",
                self.width, self.card.width4
            ));
        }
        if write != (self.card.state == CardState::Rcv) {
            self.violation(format!("CMD{} data direction", v & 0x3F));
        }
        self.xfer = Some(Xfer {
            write,
            blocks_left: blocks.max(1),
            multi,
            auto_stop: v & (1 << 12) != 0,
            buf: Vec::new(),
        });
        if dma && !write {
            self.start_dma(blocks.max(1));
        } else if !write {
            self.fill_fifo();
        }
    }

    /// The IDMAC starts moving the `blocks` blocks of the transfer just started to the
    /// descriptors' buffers: all at once (QEMU's model), or a block each time the card has sent
    /// one (hardware-timed, [`State::advance_dma`]).
    fn start_dma(&mut self, blocks: u32) {
        let index = self.dma_transfers;
        self.dma_transfers += 1;
        self.dma.ops.push(MemOp::Transfer { blocks });
        if self.dmac & DMAC_IDMA_ON == 0 {
            return;
        }
        if !self.dlba.is_multiple_of(4) {
            self.violation(format!("DLBA {:#x} not word aligned", self.dlba));
        }
        // A block on the bus: 4096 data bits on the lines, CRC16 on each, start and end bits.
        let clocks = if self.width == 1 {
            1024 + 16 + 2
        } else {
            4096 + 16 + 2
        };
        let block_ns = clocks * 1_000_000_000 / self.card_clock_hz().max(1) as u64;
        self.bus_ns += READ_ACCESS_NS;
        self.dma_run = Some(DmaRun {
            desc: self.dlba,
            in_desc: 0,
            left: blocks as usize * 512,
            blocks,
            moved: 0,
            index,
            next_at: self.now_ns + READ_ACCESS_NS + block_ns,
            block_ns,
        });
        if !self.host.timed_dma {
            // Each step moves a block or ends the run.
            while self.dma_run.is_some() {
                self.dma_step();
            }
        }
    }

    /// Hardware-timed: the IDMAC moves every block whose time has come.
    fn advance_dma(&mut self) {
        if !self.host.timed_dma {
            return;
        }
        while let Some(run) = self.dma_run {
            if self.now_ns < run.next_at {
                break;
            }
            self.dma_step();
            if let Some(r) = self.dma_run.as_mut() {
                r.next_at += r.block_ns;
            }
        }
    }

    /// The IDMAC fails to reach `what` on the bus: a fatal bus error (a violation unless the
    /// memory was made unreachable on purpose).
    fn bus_error(&mut self, what: String) {
        if !self.faults.unbacked_buffers {
            self.violation(what);
        }
        self.idst |= IDST_FATAL_BUS_ERROR | IDST_ABNORMAL_SUM;
        self.xfer = None;
    }

    /// The IDMAC's next block: the descriptor read (owned, its flags and size checked), the
    /// card's block written to its buffer, the descriptor handed back when full, the transfer
    /// ended (RINT data over, IDST receive interrupt) with the last block. Any error ends the run.
    fn dma_step(&mut self) {
        let Some(mut run) = self.dma_run.take() else {
            return;
        };
        let failing = self.faults.dma_error_always || self.faults.dma_error_at.contains(&run.index);
        if failing && run.moved >= run.blocks / 2 {
            self.idst |= IDST_FATAL_BUS_ERROR | IDST_ABNORMAL_SUM;
            self.xfer = None;
            return;
        }
        let at = run.desc;
        let Some(raw) = self.dma.bus(at, 16).map(|d| d.to_vec()) else {
            return self.bus_error(format!("descriptor at bus {at:#x} outside memory"));
        };
        let word = |i: usize| u32::from_le_bytes(raw[4 * i..4 * i + 4].try_into().unwrap());
        let (config, size, buf, next) = (word(0), word(1), word(2), word(3));
        if config & desc::OWN == 0 {
            self.idst |= IDST_DESC_UNAVAILABLE | IDST_ABNORMAL_SUM;
            self.xfer = None;
            return;
        }
        let size = match size & 0xFFFF_FFFC {
            0 => MAX_DESC_BYTES,
            n => n,
        } as usize;
        if run.in_desc == 0 {
            if (run.moved == 0) != (config & desc::FIRST != 0) {
                self.violation(format!("descriptor at {at:#x}: FIRST {config:#x}"));
            }
            if size > MAX_DESC_BYTES as usize || !size.is_multiple_of(512) {
                self.violation(format!("descriptor at {at:#x}: size {size}"));
            }
        }
        let Some(block) = self.next_block(self.host.timed_dma) else {
            // No data, or a CRC error (RINT has it): the transfer stops here.
            if self.rint & RINT_DATA_CRC_ERROR != 0 {
                self.idst |= IDST_CARD_ERROR_SUM | IDST_ABNORMAL_SUM;
            }
            return;
        };
        let to = buf.wrapping_add(run.in_desc as u32);
        match self.dma.bus(to, 512) {
            Some(m) => m.copy_from_slice(&block),
            None => return self.bus_error(format!("buffer at bus {to:#x} outside memory")),
        }
        if let Some(x) = self.xfer.as_mut() {
            x.blocks_left -= 1;
        }
        run.in_desc += 512;
        run.left -= 512;
        run.moved += 1;
        if run.in_desc < size && run.left > 0 {
            self.dma_run = Some(run);
            return;
        }
        if let Some(d) = self.dma.bus(at, 4) {
            d.copy_from_slice(&(config & !desc::OWN).to_le_bytes());
        }
        if run.left == 0 {
            if config & desc::LAST == 0 {
                self.violation(format!("descriptor at {at:#x}: the data ends, no LAST"));
            }
            self.end_transfer();
            self.idst |= IDST_RX_INT | IDST_NORMAL_SUM;
            return;
        }
        if config & desc::LAST != 0 {
            self.violation(format!(
                "descriptor chain ends with {} bytes to go",
                run.left
            ));
            self.idst |= IDST_DESC_UNAVAILABLE | IDST_ABNORMAL_SUM;
            self.xfer = None;
            return;
        }
        if config & desc::CHAIN == 0 {
            self.violation(format!("descriptor at {at:#x} without CHAIN"));
        }
        run.desc = next;
        run.in_desc = 0;
        self.dma_run = Some(run);
    }

    /// The card sends the next block into the FIFO.
    fn fill_fifo(&mut self) {
        if let Some(block) = self.next_block(false) {
            self.fifo.extend(
                block
                    .chunks(4)
                    .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])),
            );
        }
    }

    /// The card's next block of the read transfer; `None` if none comes (no transfer, the FIFO
    /// fault, a dead card) or it has a CRC error (RINT data CRC error, the transfer ended).
    /// `timed`: its time on the bus has passed already (the hardware-timed IDMAC), else it is
    /// added now.
    fn next_block(&mut self, timed: bool) -> Option<Vec<u8>> {
        let x = self.xfer.as_ref()?;
        if x.write || x.blocks_left == 0 || self.faults.fifo_never_fills {
            return None;
        }
        let lines = if self.width == 1 { 4 } else { 1 };
        if let Some(reg) = self.card.register.take() {
            // CMD6's status block; the card is back in "tran" after it.
            self.card.state = CardState::Tran;
            if !timed {
                self.now_ns += self.bits_ns(reg.len() as u64 * 8 + 16, lines);
            }
            return Some(reg);
        }
        let lba = match self.card.stream {
            Some(lba) if !self.card.dead && lba < self.card.blocks() => lba,
            _ => return None,
        };
        let k = self.blocks_sent;
        if self.faults.die_after_blocks.is_some_and(|n| k >= n) {
            self.card.dead = true;
            return None;
        }
        self.blocks_sent += 1;
        if self.card.single {
            self.card.state = CardState::Tran;
            self.card.stream = None;
        } else {
            self.card.stream = Some(lba + 1);
        }
        let block_ns = self.bits_ns(512 * 8 + 16, lines);
        self.bus_ns += block_ns;
        if !timed {
            self.now_ns += block_ns;
        }
        let too_fast = self
            .faults
            .crc_above_hz
            .is_some_and(|hz| self.card_clock_hz() > hz);
        if too_fast || self.faults.bad_lbas.contains(&lba) || self.faults.data_crc_at.contains(&k) {
            self.rint |= RINT_DATA_CRC_ERROR;
            self.xfer = None;
            return None;
        }
        Some(self.card.block(lba))
    }

    fn end_transfer(&mut self) {
        let Some(x) = self.xfer.take() else { return };
        self.rint |= RINT_DATA_OVER;
        if x.multi && x.auto_stop {
            self.bus_command(12, 0, true);
            self.rint |= RINT_AUTO_COMMAND_DONE;
        } else if x.write && !x.multi {
            self.card.recv = None;
            let now = self.now_ns;
            self.card.program(now);
        }
    }

    fn read_fifo(&mut self) -> u32 {
        let Some(w) = self.fifo.pop_front() else {
            self.violation("read of an empty FIFO".into());
            return 0;
        };
        if self.fifo.is_empty() {
            if let Some(x) = self.xfer.as_mut() {
                x.blocks_left -= 1;
                if x.blocks_left == 0 {
                    self.end_transfer();
                } else {
                    self.fill_fifo();
                }
            }
        }
        w
    }

    fn write_fifo(&mut self, v: u32) {
        let Some(x) = self.xfer.as_mut().filter(|x| x.write) else {
            self.violation(format!("FIFO write {v:#x} with no write transfer"));
            return;
        };
        x.buf.extend_from_slice(&v.to_le_bytes());
        if x.buf.len() < 512 {
            return;
        }
        let data = std::mem::take(&mut x.buf);
        x.blocks_left -= 1;
        let last = x.blocks_left == 0;
        let lines = if self.width == 1 { 4 } else { 1 };
        self.now_ns += self.bits_ns(512 * 8 + 16, lines);
        match self.card.recv {
            Some(lba) if self.card.state == CardState::Rcv && lba < self.card.blocks() => {
                self.card.written.insert(lba, data);
                self.card.recv = Some(lba + 1);
            }
            _ => return,
        }
        if last {
            self.end_transfer();
        }
    }
}

// ---- Shared by the driver tests ----

/// The driver over the simulator.
pub type Driver = SunxiMmc<SimRegs, SimClock>;
/// The driver with its DMA read path over the simulated memory.
pub type DmaDriver = SunxiMmc<SimRegs, SimClock, SimDma>;

/// A 32 GiB SDHC card of pattern blocks.
pub fn sdhc() -> CardSpec {
    CardSpec::new(Kind::Sdhc, Backing::Pattern { blocks: 64 << 20 })
}

/// A simulator and the driver over it (with the CCU unless `host.left_on`, with the memory `dma`
/// makes of the simulator), or the init error.
pub fn try_start_with<D: DmaMemory>(
    host: HostSpec,
    card: CardSpec,
    faults: Faults,
    config: Config,
    dma: impl FnOnce(&Sim) -> D,
) -> (
    Sim,
    Result<SunxiMmc<SimRegs, SimClock, D>, drivers::sd::SdError>,
) {
    let sim = Sim::new(host, card, faults);
    let ccu = (!host.left_on).then(|| sim.ccu_regs());
    let mem = dma(&sim);
    let sd = SunxiMmc::with_config_dma(sim.regs(), ccu, sim.clock(), config, mem);
    (sim, sd)
}

/// [`try_start_with`] that must succeed.
pub fn start_with<D: DmaMemory>(
    host: HostSpec,
    card: CardSpec,
    faults: Faults,
    config: Config,
    dma: impl FnOnce(&Sim) -> D,
) -> (Sim, SunxiMmc<SimRegs, SimClock, D>) {
    let (sim, sd) = try_start_with(host, card, faults, config, dma);
    match sd {
        Ok(sd) => (sim, sd),
        Err(e) => panic!("init: {e}\n{:?}\n{:?}", sim.names(), sim.violations()),
    }
}

/// The driver on PIO, or the init error.
pub fn try_start(
    host: HostSpec,
    card: CardSpec,
    faults: Faults,
    config: Config,
) -> (Sim, Result<Driver, drivers::sd::SdError>) {
    try_start_with(host, card, faults, config, |_| NoDma)
}

/// The driver on PIO.
pub fn start(host: HostSpec, card: CardSpec, faults: Faults, config: Config) -> (Sim, Driver) {
    start_with(host, card, faults, config, |_| NoDma)
}

/// The driver with its DMA read path over [`SimDma`].
pub fn start_dma(
    host: HostSpec,
    card: CardSpec,
    faults: Faults,
    config: Config,
) -> (Sim, DmaDriver) {
    start_with(host, card, faults, config, Sim::dma)
}

pub fn check_no_violations(sim: &Sim) {
    let v = sim.violations();
    assert!(v.is_empty(), "violations: {v:#?}");
}

/// A buffer of `len` bytes (0xA5 at first) starting `misalign` bytes past a 4 KiB boundary, so a
/// test decides whether the driver can DMA into it directly.
#[derive(Debug)]
pub struct TestBuf {
    mem: Vec<u8>,
    at: usize,
    len: usize,
}

impl TestBuf {
    pub fn new(len: usize, misalign: usize) -> TestBuf {
        let mem = vec![0xA5u8; len + misalign + 4096];
        let at = (4096 - mem.as_ptr() as usize % 4096) % 4096 + misalign;
        TestBuf { mem, at, len }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.mem[self.at..self.at + self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.mem[self.at..self.at + self.len]
    }

    /// The start, for `submit_read`.
    pub fn ptr(&mut self) -> *mut u8 {
        self.bytes_mut().as_mut_ptr()
    }

    pub fn addr(&self) -> usize {
        self.bytes().as_ptr() as usize
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

/// Read `blocks` from `lba` into a [`TestBuf`] `misalign` bytes past a 4 KiB boundary; the data
/// must be the card's.
pub fn read_into<D: DmaMemory>(
    sim: &Sim,
    sd: &mut SunxiMmc<SimRegs, SimClock, D>,
    lba: u64,
    blocks: usize,
    misalign: usize,
) -> TestBuf {
    use drivers::block::BlockDevice;
    let mut buf = TestBuf::new(blocks * 512, misalign);
    if let Err(e) = sd.read_blocks(lba, buf.bytes_mut()) {
        panic!("read of {blocks} from {lba}: {e}\n{:?}", sim.violations());
    }
    assert!(
        buf.bytes() == sim.expected(lba, blocks as u64),
        "{blocks} block(s) from LBA {lba} (buffer {misalign} past 4 KiB) differ from the card's"
    );
    buf
}
