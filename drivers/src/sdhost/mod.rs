//! The BCM2835-family "sdhost" SD controller driver (Pi 3, Zero 2 W, Pi 2: ARM 0x3F20_2000, bus
//! 0x7E20_2000), the controller Linux runs the card slot on (`drivers/mmc/host/bcm2835.c`). Polled.
//! Reads and writes by programmed I/O through its 16-word FIFO, or, for reads when a system DMA
//! channel and a [`DmaMemory`] are given ([`Sdhost::with_dma`]), through the BCM2835 DMA engine
//! ([`crate::bcm2835::dma`], DREQ 13), queued ([`BlockDevice::submit_read`]) so the engine moves
//! a page while the cores compute.
//!
//! # Design
//!
//! The SD protocol (identification, the closed command set, the errors, the request loop with
//! retries, recovery and the CRC step-down) is [`crate::sd`], shared with [`crate::sdhci`] and
//! [`crate::sunxi_mmc`]; the queue of DMA reads is `crate::sd::queue`. This module is the
//! controller's side: every wait a poll loop with a deadline and an iteration cap, every failure
//! a [`Cause`] naming SDHSTS and SDEDM ([`Cause::Sdhost`], [`Cause::SdhostTimeout`]).
//!
//! - **SDHCFG is kept in the driver**: the controller's copy reads back 0 on QEMU; the driver
//!   writes its own value whenever it changes (busy interrupt flag on, so the busy end shows in
//!   SDHSTS; the internal and, after ACMD6, the external 4-bit bus; "slow card" as Linux sets it).
//! - **A command** waits for the state machine (SDEDM 3:0) to be idle (IDENT or DATA): one stuck
//!   in READWAIT or WRITESTART1 is kicked with FORCE_DATA_MODE, as Linux does after a failed
//!   command, and one that stays there is [`Cause::StuckFsm`]. Then SDHSTS cleared, SDHBCT and
//!   SDHBLC for a data command (block size first: the length is taken at the SDHBLC write), SDARG,
//!   SDCMD with NEW; NEW clears when the command is done, FAIL says it failed (SDHSTS says why:
//!   no response, CRC). R1b commands wait for SDHSTS's busy flag. CMD12 (an abort) skips the
//!   idle wait: it is what ends a multi-block read the state machine waits in.
//! - **Clock** = core clock / (SDCDIV + 2) ([`divider`]): the VPU core clock the firmware reports
//!   ([`Config::core_clock_hz`]). 400 kHz for identification, 25 MHz at Default Speed, 50 MHz
//!   after CMD6 High Speed; a core clock that cannot give 50 MHz exactly gives the best below it
//!   ([`Sdhost::high_speed_note`] says so for the card line). SDTOUT is half a second of SD clocks.
//! - **Multi-block reads and writes** are CMD18 / CMD25 followed by CMD12 (the controller has no
//!   auto-stop); a 256 KiB page is one command ([`DEFAULT_MAX_BLOCKS_PER_COMMAND`]).
//! - **CRC errors** (SDHSTS CRC7 / CRC16) are [`Cause::is_crc`]: twice in a row at High Speed
//!   steps the bus down to Default Speed (25 MHz), as on the other hosts.
//!
//! # DMA reads
//!
//! One control block in the driver's DMA area (allocated once, whole cache lines: the block, then
//! a [`DMA_BUFFER_BYTES`] bounce buffer) moves the data from SDDATA (bus address
//! [`Config::bus_base`] + 0x40) to the caller's buffer (a cache-line aligned start with a bus
//! address) or the bounce buffer: TI = WAIT_RESP | PERMAP 13 | SRC_DREQ | DEST_INC. The order:
//!
//! 1. destination invalidated, control block written and cleaned;
//! 2. the command (CMD17 / CMD18) issued, its R1 checked;
//! 3. the channel started (after the command: QEMU's engine runs the whole chain the moment it is
//!    started, ignoring DREQ, and would read an empty FIFO before the command);
//! 4. `check_read` polls CS (never waits): END, or CS.ERROR / DEBUG errors ([`Cause::Dma`]);
//! 5. the destination invalidated again; for a multi-block read the last [`PIO_TAIL_WORDS`]
//!    words read by PIO (Linux: "the block doesn't manage the FIFO DREQs properly for
//!    multi-block transfers"); SDHSTS checked; CMD12; the bounce buffer copied out.
//!
//! A DMA error resets the controller and the channel, and the request goes on through the shared
//! retries; after [`Config::dma_errors_before_pio`] of them the driver reads by PIO for good
//! ([`Sdhost::dma_active`] turns false, [`Stats::dma_errors`] counts them). A control block the
//! engine could not fetch from the driver's own memory is refused before the channel starts
//! ([`crate::bcm2835::dma::DmaError::ControlBlockOutside`]). Writes stay on PIO (they are rare:
//! the prompt cache).
//!
//! # What QEMU's model does differently from hardware
//!
//! QEMU 10's `bcm2835_sdhost` completes a command synchronously, ignores SDCDIV and SDTOUT, reads
//! back 0 from SDHCFG, never raises a CRC error, and has no DREQ output; its DMA engine ignores
//! DREQ, PERMAP and WAIT_RESP, and keeps a value written to DEBUG (write 1 to clear on the chip:
//! the channel writes only the error bits it reads set, else every transfer would read as failed
//! and reads would go to PIO after two). So QEMU proves the functional path (the control block, the bus
//! alias, the PIO tail, the order of command and DMA); DREQ pacing, the stuck state machine, CRC
//! errors and DMA errors are tested against the register-level simulator in `tests/`.
//!
//! No crate is used: `embedded-sdmmc` speaks SD over SPI only and the sdmmc crates of the HALs
//! drive other controllers; the SD protocol itself is [`crate::sd`], shared with the other hosts.
//!
//! # Not covered
//!
//! UHS-I (the slot is 3.3 V), CMD23, DMA writes, interrupts, the firmware changing the core clock
//! under the driver (raspberrypi/linux lets the firmware own the divider through the mailbox's
//! SET_SDHOST_CLOCK; this driver takes the core clock once per initialisation).

mod dma;

pub use crate::sd::regs::sdhost as regs;

use crate::bcm2835::dma::DmaChannel;
use crate::block::{BlockDevice, WriteBlocks, BLOCK_SIZE};
use crate::dma::Area;
pub use crate::dma::{DmaMemory, NoDma, DMA_ALIGN};
pub use crate::mmio::{Mmio, Regs};
pub use crate::sd::queue::{QUEUE_DEPTH, SLOTS as QUEUE_SLOTS};
use crate::sd::{self, Command, Direction, Failure, Host, Resp, SpeedCap, Xfer, READ, WRITE};
pub use crate::sd::{
    BusMode, CardInfo, Cause, Clock, Cmd, HostKind, SdError, SpeedNote, Step, Wait,
    BLOCK_TIMEOUT_US, BUSY_TIMEOUT_US, CMD_TIMEOUT_US, DATA_CLOCK_MAX_HZ, HS_CLOCK_MAX_HZ,
    ID_CLOCK_MAX_HZ, POWER_UP_US, WRITE_TIMEOUT_US,
};
pub use dma::DMA_BUFFER_BYTES;
use regs::*;

/// The controller on the BCM2836/7 (Pi 2, Pi 3, Zero 2 W).
pub const SDHOST_BASE: usize = 0x3F20_2000;
/// The controller's bus address (for the DMA engine's source).
pub const SDHOST_BUS: u32 = 0x7E20_2000;
/// Size of the register block: the `size` for [`Mmio::new`].
pub const REGISTER_BLOCK_SIZE: usize = 0x100;
/// A 256 KiB page in one command.
pub const DEFAULT_MAX_BLOCKS_PER_COMMAND: u16 = 512;
/// Power off and on at reset (Linux waits 20 ms each).
pub const POWER_SETTLE_US: u32 = 20_000;
/// Deadline for the state machine to come back to idle after FORCE_DATA_MODE.
pub const FSM_TIMEOUT_US: u64 = 10_000;

/// The driver's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The VPU core clock the divider divides (the mailbox's clock 4).
    pub core_clock_hz: u32,
    /// Identification clock (capped at 400 kHz).
    pub id_clock_hz: u32,
    /// Default Speed data clock (0 or above 25 MHz: 25 MHz).
    pub data_clock_hz: u32,
    /// The fastest mode to try (High Speed at most: a 3.3 V slot).
    pub max_bus_mode: BusMode,
    pub four_bit: bool,
    pub max_blocks_per_command: u16,
    /// Tries per read or write command.
    pub tries: u8,
    /// The controller's bus address (the DMA source is SDDATA there).
    pub bus_base: u32,
    /// DMA errors after which reads stay on PIO.
    pub dma_errors_before_pio: u32,
}

impl Config {
    pub const fn new(core_clock_hz: u32) -> Config {
        Config {
            core_clock_hz,
            id_clock_hz: ID_CLOCK_MAX_HZ,
            data_clock_hz: DATA_CLOCK_MAX_HZ,
            max_bus_mode: BusMode::HighSpeed,
            four_bit: true,
            max_blocks_per_command: DEFAULT_MAX_BLOCKS_PER_COMMAND,
            tries: 3,
            bus_base: SDHOST_BUS,
            dma_errors_before_pio: 2,
        }
    }
}

/// What the driver did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// The DMA channel reads go through (`None`: PIO, or DMA given up after errors).
    pub dma_channel: Option<u8>,
    pub commands: u64,
    pub blocks_read: u64,
    pub blocks_written: u64,
    /// The last DMA error (each one is counted in `dma_errors`).
    pub last_dma_error: Option<crate::bcm2835::dma::DmaError>,
    pub retries: u64,
    pub reinits: u64,
    pub step_downs: u64,
    /// Read or write commands that failed with a CRC (or framing) error on the bus.
    pub crc_errors: u64,
    pub controller_resets: u64,
    /// Times the state machine was kicked out of READWAIT / WRITESTART1 (FORCE_DATA_MODE).
    pub fsm_kicks: u64,
    pub dma_transfers: u64,
    pub bounce_transfers: u64,
    pub dma_errors: u64,
    /// FIFO words the CPU moved (PIO reads and writes, and the DMA reads' tails).
    pub pio_words: u64,
    pub queued_reads: u64,
}

/// SDCDIV for at most `target_hz` from `core_hz`, and the clock it gives: core / (SDCDIV + 2),
/// the fastest at or below the target (Linux's `bcm2835_set_clock`). `None` if even the largest
/// divider is too fast or an input is 0.
pub fn divider(core_hz: u32, target_hz: u32) -> Option<(u32, u32)> {
    if core_hz == 0 || target_hz == 0 {
        return None;
    }
    let total = core_hz.div_ceil(target_hz).max(2);
    let div = total - 2;
    (div <= SDCDIV_MAX).then(|| (div, core_hz / total))
}

/// The sdhost driver.
#[derive(Debug)]
pub struct Sdhost<R: Regs, C: Clock, D: DmaMemory = NoDma> {
    regs: R,
    clock: C,
    config: Config,
    info: CardInfo,
    speed: SpeedCap,
    stats: Stats,
    /// SDHCFG as the driver last wrote it.
    hcfg: u32,
    /// SDCDIV as the driver last wrote it.
    cdiv: u32,
    mem: D,
    /// The DMA channel and area, until DMA is given up after errors.
    dma: Option<(DmaChannel<R>, Area)>,
    /// Reads by PIO though the channel is there ([`BlockDevice::set_transfer`]).
    pio: bool,
    queue: sd::queue::ReadQueue,
}

impl<R: Regs, C: Clock> Sdhost<R, C> {
    /// Bring the card up, every transfer by PIO.
    pub fn init(regs: R, clock: C, config: Config) -> Result<Self, SdError> {
        Self::with_dma(regs, clock, config, None, NoDma)
    }
}

impl<R: Regs, C: Clock, D: DmaMemory> Sdhost<R, C, D> {
    /// Bring the card up; reads through the DMA `channel` (a normal channel of the controller,
    /// see [`crate::bcm2835::dma::pick_channel`]) when given and `mem` can reach the driver's
    /// DMA area, else by PIO.
    pub fn with_dma(
        regs: R,
        clock: C,
        config: Config,
        channel: Option<DmaChannel<R>>,
        mut mem: D,
    ) -> Result<Self, SdError> {
        let dma = match (D::ENABLED, channel) {
            (true, Some(ch)) => dma::new_area(&mut mem).map(|a| (ch, a)),
            _ => None,
        };
        let mut sd = Sdhost {
            regs,
            clock,
            config,
            info: CardInfo::default(),
            speed: SpeedCap::new(config.max_bus_mode.min(BusMode::HighSpeed)),
            stats: Stats::default(),
            hcfg: 0,
            cdiv: 0,
            mem,
            dma,
            pio: false,
            queue: sd::queue::ReadQueue::new(),
        };
        sd.stats.dma_channel = sd.dma_channel();
        sd.reinit()?;
        Ok(sd)
    }

    sd::driver_accessors!(Config, Stats);

    /// Reads go by DMA (a channel and an area, not given up after DMA errors, and PIO not
    /// chosen).
    pub fn dma_active(&self) -> bool {
        sd::queue::DmaReads::dma_on(self)
    }

    /// The DMA channel's number, while reads go by DMA.
    pub fn dma_channel(&self) -> Option<u8> {
        self.dma.as_ref().map(|(ch, _)| ch.channel())
    }

    /// SDCDIV as last written.
    pub fn divider(&self) -> u32 {
        self.cdiv
    }

    /// At High Speed below 50 MHz: why (the core clock's best divider), for the card line.
    pub fn high_speed_note(&self) -> Option<(u32, u32)> {
        let hs = self.info.bus_mode == BusMode::HighSpeed;
        (hs && self.info.data_clock_hz < HS_CLOCK_MAX_HZ)
            .then_some((self.config.core_clock_hz, self.cdiv))
    }

    pub fn regs_mut(&mut self) -> &mut R {
        &mut self.regs
    }

    pub fn clock_mut(&mut self) -> &mut C {
        &mut self.clock
    }

    // ---- waits ----

    /// Poll `check` on the registers until it answers, at most `timeout_us` ([`sd::poll`]).
    fn poll<T>(
        &mut self,
        (timeout_us, wait): (u64, Wait),
        mut check: impl FnMut(&mut R) -> Option<Result<T, Cause>>,
    ) -> Result<T, Cause> {
        sd::poll(self, timeout_us, wait, |h| check(&mut h.regs))
    }

    /// SDHSTS's error bits as a cause (cleared), if any.
    fn status_error(&mut self) -> Result<(), Cause> {
        let hsts = self.regs.read32(SDHSTS);
        if hsts & SDHSTS_ERRORS == 0 {
            return Ok(());
        }
        let edm = self.regs.read32(SDEDM);
        self.regs.write32(SDHSTS, SDHSTS_CLEAR);
        Err(Cause::Sdhost { hsts, edm })
    }

    /// Wait for the state machine to be idle (IDENT or DATA), kicking it out of READWAIT or
    /// WRITESTART1 with FORCE_DATA_MODE (once) as Linux does.
    fn wait_idle(&mut self) -> Result<(), Cause> {
        let mut kicked = false;
        let start = self.clock.now_us();
        for _ in 0..FSM_TIMEOUT_US.saturating_mul(100) {
            let edm = self.regs.read32(SDEDM);
            match edm & SDEDM_FSM_MASK {
                SDEDM_FSM_IDENT | SDEDM_FSM_DATA => return Ok(()),
                SDEDM_FSM_READWAIT | SDEDM_FSM_WRITESTART1 if !kicked => {
                    self.regs.write32(SDEDM, edm | SDEDM_FORCE_DATA_MODE);
                    self.stats.fsm_kicks += 1;
                    kicked = true;
                }
                _ => {}
            }
            if self.clock.now_us().saturating_sub(start) >= FSM_TIMEOUT_US {
                break;
            }
        }
        let edm = self.regs.read32(SDEDM);
        if kicked {
            return Err(Cause::StuckFsm { edm });
        }
        let waited = self.clock.now_us().saturating_sub(start);
        Err(Host::timeout(self, Wait::SdhostIdle, waited))
    }

    // ---- controller ----

    /// Linux's `bcm2835_reset_internal`: power off, every register to its idle value, the FIFO
    /// thresholds, power on, then SDHCFG and SDCDIV as the driver keeps them.
    fn reset_controller(&mut self) {
        self.stats.controller_resets += 1;
        for (off, v) in [
            (SDVDD, 0),
            (SDCMD, 0),
            (SDARG, 0),
            (SDTOUT, 0x00F0_0000),
            (SDCDIV, 0),
            (SDHSTS, SDHSTS_CLEAR),
            (SDHCFG, 0),
            (SDHBCT, 0),
            (SDHBLC, 0),
        ] {
            self.regs.write32(off, v);
        }
        let thresholds = SDEDM_THRESHOLD_MASK << SDEDM_READ_THRESHOLD_SHIFT
            | SDEDM_THRESHOLD_MASK << SDEDM_WRITE_THRESHOLD_SHIFT;
        let edm = self.regs.read32(SDEDM) & !thresholds
            | FIFO_THRESHOLD << SDEDM_READ_THRESHOLD_SHIFT
            | FIFO_THRESHOLD << SDEDM_WRITE_THRESHOLD_SHIFT;
        self.regs.write32(SDEDM, edm);
        self.clock.delay_us(POWER_SETTLE_US);
        self.regs.write32(SDVDD, 1);
        self.clock.delay_us(POWER_SETTLE_US);
        self.regs.write32(SDHCFG, self.hcfg);
        self.regs.write32(SDCDIV, self.cdiv);
    }

    /// After a failed command or transfer: the DMA channel stopped, SDHSTS cleared, a stuck state
    /// machine kicked, the FIFO drained (bounded: at most a FIFO's worth a poll).
    fn reset_after_error(&mut self) {
        self.stats.controller_resets += 1;
        if let Some((ch, area)) = self.dma.as_mut() {
            ch.stop();
            area.busy = false;
        }
        self.regs.write32(SDHSTS, SDHSTS_CLEAR);
        let edm = self.regs.read32(SDEDM);
        if matches!(
            edm & SDEDM_FSM_MASK,
            SDEDM_FSM_READWAIT | SDEDM_FSM_WRITESTART1
        ) {
            self.regs.write32(SDEDM, edm | SDEDM_FORCE_DATA_MODE);
            self.stats.fsm_kicks += 1;
        }
        for _ in 0..FIFO_WORDS * 2 {
            if (self.regs.read32(SDEDM) >> SDEDM_FIFO_SHIFT) & SDEDM_FIFO_MASK == 0 {
                break;
            }
            let _ = self.regs.read32(SDDATA);
        }
        self.regs.write32(SDHSTS, SDHSTS_CLEAR);
    }

    /// Set the SD clock to at most `target_hz`; returns it.
    fn set_clock(&mut self, target_hz: u32) -> Result<u32, Cause> {
        let core = self.config.core_clock_hz;
        let (div, hz) = divider(core, target_hz).ok_or(Cause::Divider {
            base_hz: core,
            target_hz,
            host_version: 0,
        })?;
        self.cdiv = div;
        self.regs.write32(SDCDIV, div);
        // Half a second of SD clocks for the data timeout (Linux's value).
        self.regs.write32(SDTOUT, hz / 2);
        Ok(hz)
    }

    /// `r`, the lines reset first if it failed.
    fn or_reset<T>(&mut self, r: Result<T, Cause>) -> Result<T, Cause> {
        if r.is_err() {
            self.reset_after_error();
        }
        r
    }

    fn write_hcfg(&mut self, hcfg: u32) {
        self.hcfg = hcfg;
        self.regs.write32(SDHCFG, hcfg);
    }

    fn bring_up(&mut self) -> Result<(), (Step, Cause)> {
        self.info = CardInfo {
            host: HostKind::Sdhost,
            base_clock_hz: self.config.core_clock_hz,
            bus_width: 1,
            ..CardInfo::default()
        };
        self.hcfg = SDHCFG_BUSY_IRPT_EN | SDHCFG_WIDE_INT_BUS | SDHCFG_SLOW_CARD;
        self.cdiv = SDCDIV_MAX;
        self.reset_controller();
        let id = self.config.id_clock_hz.clamp(1, ID_CLOCK_MAX_HZ);
        self.info.id_clock_hz = self.set_clock(id).map_err(|c| (Step::Clock, c))?;
        self.write_hcfg(self.hcfg);
        self.clock.delay_us(POWER_UP_US);
        let four_bit = self.config.four_bit;
        sd::bring_up_card(self, four_bit, |h, csd| {
            let target = sd::data_clock_target(h.config.data_clock_hz, csd);
            h.set_clock(target).map_err(|c| (Step::Clock, c))
        })
    }

    fn command_word(c: &Command, xfer: Option<Xfer>) -> u32 {
        let mut w = c.cmd.index as u32 & SDCMD_INDEX;
        match c.resp {
            Resp::None => w |= SDCMD_NO_RESPONSE,
            Resp::R2 => w |= SDCMD_LONG_RESPONSE,
            Resp::R1b => w |= SDCMD_BUSYWAIT,
            _ => {}
        }
        if let Some(x) = xfer {
            w |= if x.write { SDCMD_WRITE } else { SDCMD_READ };
        }
        w
    }

    /// One command: idle state machine, SDHSTS cleared, block size and count, argument, SDCMD;
    /// NEW to clear, FAIL and SDHSTS checked, the response, the busy end for R1b.
    fn send(&mut self, c: Command, arg: u32, xfer: Option<Xfer>) -> Result<[u32; 4], Cause> {
        if !c.abort {
            self.wait_idle()?;
        }
        let not_new = |r: &mut R| {
            let v = r.read32(SDCMD);
            (v & SDCMD_NEW == 0).then_some(Ok(v))
        };
        self.poll((CMD_TIMEOUT_US, Wait::SdhostCommand), not_new)?;
        self.regs.write32(SDHSTS, SDHSTS_CLEAR);
        if let Some(x) = xfer {
            self.regs.write32(SDHBCT, x.block_len as u32);
            self.regs.write32(SDHBLC, x.blocks as u32);
        }
        self.regs.write32(SDARG, arg);
        self.stats.commands += 1;
        self.regs
            .write32(SDCMD, Self::command_word(&c, xfer) | SDCMD_NEW);
        let sdcmd = self.poll((CMD_TIMEOUT_US, Wait::SdhostCommand), not_new)?;
        if sdcmd & SDCMD_FAIL != 0 {
            let hsts = self.regs.read32(SDHSTS);
            let edm = self.regs.read32(SDEDM);
            self.regs.write32(SDHSTS, SDHSTS_CLEAR);
            // ACMD41's R3 carries no CRC: the controller's CRC7 error there means nothing.
            let r3_crc = c.resp == Resp::R3 && hsts & SDHSTS_ERRORS == SDHSTS_CRC7;
            if !r3_crc {
                return Err(Cause::Sdhost { hsts, edm });
            }
        }
        let mut resp = [0u32; 4];
        match c.resp {
            Resp::None => {}
            Resp::R2 => {
                let full = SDRSP.map(|off| self.regs.read32(off));
                resp = sd::r2_from_full(&full);
            }
            _ => resp[0] = self.regs.read32(SDRSP[0]),
        }
        if c.resp == Resp::R1b {
            self.poll((BUSY_TIMEOUT_US, Wait::SdhostBusy), |r| {
                let hsts = r.read32(SDHSTS);
                (hsts & (SDHSTS_BUSY_IRPT | SDHSTS_ERRORS) != 0).then_some(Ok(()))
            })?;
            self.status_error()?;
            self.regs.write32(SDHSTS, SDHSTS_BUSY_IRPT);
        }
        Ok(resp)
    }

    // ---- programmed I/O ----

    /// FIFO words present (SDEDM 8:4).
    fn fifo_words(r: &mut R) -> u32 {
        (r.read32(SDEDM) >> SDEDM_FIFO_SHIFT) & SDEDM_FIFO_MASK
    }

    /// Read `words.len()` words of block `n` from the FIFO as it fills, each wait bounded.
    fn read_fifo(&mut self, out: &mut [u8], n: u32) -> Result<(), Cause> {
        let mut left = out.len() / 4;
        let mut words = out.chunks_exact_mut(4);
        while left > 0 {
            let have = self.poll((BLOCK_TIMEOUT_US, Wait::SdhostFifo(n)), |r| {
                let have = Self::fifo_words(r);
                if have > 0 {
                    return Some(Ok(have));
                }
                let hsts = r.read32(SDHSTS);
                let edm = r.read32(SDEDM);
                (hsts & SDHSTS_ERRORS != 0).then_some(Err(Cause::Sdhost { hsts, edm }))
            })?;
            let take = (have as usize).min(left);
            for w in words.by_ref().take(take) {
                w.copy_from_slice(&self.regs.read32(SDDATA).to_le_bytes());
            }
            self.stats.pio_words += take as u64;
            left -= take;
        }
        Ok(())
    }

    /// Write block `n` into the FIFO as it has room.
    fn write_fifo(&mut self, block: &[u8], n: u32) -> Result<(), Cause> {
        let mut words = block.chunks_exact(4);
        let mut left = block.len() / 4;
        while left > 0 {
            let room = self.poll((WRITE_TIMEOUT_US, Wait::SdhostFifoSpace(n)), |r| {
                let room = FIFO_WORDS.saturating_sub(Self::fifo_words(r));
                if room > 0 {
                    return Some(Ok(room));
                }
                let hsts = r.read32(SDHSTS);
                let edm = r.read32(SDEDM);
                (hsts & SDHSTS_ERRORS != 0).then_some(Err(Cause::Sdhost { hsts, edm }))
            })?;
            let take = (room as usize).min(left);
            for w in words.by_ref().take(take) {
                self.regs
                    .write32(SDDATA, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            }
            self.stats.pio_words += take as u64;
            left -= take;
        }
        Ok(())
    }

    /// One command's data by PIO, read or write alike: the command, `each(driver, offset, i)`
    /// for block `i` at byte `offset`, SDHSTS checked, CMD12 after several blocks, and for a write
    /// the CMD13 wait for the end of programming. A failure resets the lines and names the block.
    fn pio_once(
        &mut self,
        d: &Direction,
        start: u64,
        blocks: u32,
        mut each: impl FnMut(&mut Self, usize, u32) -> Result<(), Cause>,
    ) -> Result<(), Failure> {
        let c = sd::begin_transfer(self, d, start, blocks)?;
        let mut at = 0;
        let moved = (0..blocks)
            .try_for_each(|i| {
                at = i;
                each(self, i as usize * BLOCK_SIZE, i)
            })
            .and_then(|()| self.status_error());
        let lba = start + at as u64;
        if let Err(cause) = moved {
            self.reset_after_error();
            return Err(Failure {
                cmd: c.cmd,
                lba,
                cause,
            });
        }
        if blocks > 1 {
            sd::stop(self, lba)?;
        }
        if !d.write {
            self.stats.blocks_read += blocks as u64;
            return Ok(());
        }
        let programmed = sd::wait_programmed(self);
        programmed.map_err(|(cmd, cause)| Failure { cmd, lba, cause })?;
        self.stats.blocks_written += blocks as u64;
        Ok(())
    }

    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure> {
        if sd::queue::DmaReads::dma_on(self) {
            return sd::queue::read_once_dma(self, start, buf);
        }
        let n = (buf.len() / BLOCK_SIZE) as u32;
        self.pio_once(&READ, start, n, |h, at, i| {
            h.read_fifo(&mut buf[at..at + BLOCK_SIZE], i)
        })
    }

    fn write_once(&mut self, start: u64, buf: &[u8]) -> Result<(), Failure> {
        let n = (buf.len() / BLOCK_SIZE) as u32;
        self.pio_once(&WRITE, start, n, |h, at, i| {
            h.write_fifo(&buf[at..at + BLOCK_SIZE], i)
        })
    }

    fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
        let mut per = self.config.max_blocks_per_command;
        let dma = sd::queue::DmaReads::dma_on(self);
        if dma && !(buf.as_ptr() as usize).is_multiple_of(DMA_ALIGN) {
            per = per.min((DMA_BUFFER_BYTES / BLOCK_SIZE) as u16);
        }
        sd::read_request(self, lba, buf, per, Self::read_once)
    }
}

impl<R: Regs, C: Clock, D: DmaMemory> Host for Sdhost<R, C, D> {
    sd::host_fields!();

    fn issue(&mut self, c: Command, arg: u32, xfer: Option<Xfer>) -> Result<[u32; 4], Cause> {
        sd::check_allowed(c)?;
        let sent = self.send(c, arg, xfer);
        self.or_reset(sent)
    }

    fn set_four_bit(&mut self) {
        self.write_hcfg(self.hcfg | SDHCFG_WIDE_EXT_BUS);
    }

    fn read_register(&mut self, c: Command, arg: u32, buf: &mut [u8]) -> Result<u32, Cause> {
        let sent = self.send(c, arg, Some(Xfer::register(buf.len())));
        let read = sent.and_then(|resp| {
            self.read_fifo(buf, 0)?;
            self.status_error().map(|()| resp[0])
        });
        self.or_reset(read)
    }

    fn mode_clock(&mut self, mode: BusMode) -> Result<u32, SpeedNote> {
        let core = self.config.core_clock_hz;
        match (mode, divider(core, HS_CLOCK_MAX_HZ)) {
            (BusMode::HighSpeed, Some((_, hz))) if hz > self.info.data_clock_hz => Ok(hz),
            (BusMode::HighSpeed, d) => Err(SpeedNote::HostClock {
                base_hz: core,
                best_hz: d.map_or(0, |(_, hz)| hz),
            }),
            _ => Err(SpeedNote::HostLacks { mode }),
        }
    }

    fn timeout(&mut self, wait: Wait, waited_us: u64) -> Cause {
        let regs = [SDCMD, SDHSTS, SDEDM].map(|off| self.regs.read32(off));
        Cause::SdhostTimeout {
            sdcmd: regs[0],
            hsts: regs[1],
            edm: regs[2],
            wait,
            waited_us,
        }
    }

    fn bring_up(&mut self) -> Result<(), (Step, Cause)> {
        Sdhost::bring_up(self)
    }

    fn enter_mode(&mut self, mode: BusMode) -> Result<u32, Cause> {
        let target = match mode {
            BusMode::HighSpeed => HS_CLOCK_MAX_HZ,
            _ => sd::data_clock_target(self.config.data_clock_hz, &self.info.csd()?),
        };
        self.set_clock(target)
    }

    fn reset_lines(&mut self) {
        self.reset_after_error();
    }
}

// Reads synchronous or queued (with DMA, see `crate::sd::queue`); writes synchronous by PIO.
sd::queue::queued_block_device!(Sdhost, D: DmaMemory);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dividers_from_core_clocks() {
        // QEMU's 350 MHz, the Pi 3's 400 MHz, a 250 MHz core_freq: 50 MHz exactly.
        assert_eq!(divider(350_000_000, 50_000_000), Some((5, 50_000_000)));
        assert_eq!(divider(400_000_000, 50_000_000), Some((6, 50_000_000)));
        assert_eq!(divider(250_000_000, 50_000_000), Some((3, 50_000_000)));
        // 330 MHz cannot: the best below, 47.1 MHz.
        assert_eq!(divider(330_000_000, 50_000_000), Some((5, 47_142_857)));
        assert_eq!(divider(350_000_000, 25_000_000), Some((12, 25_000_000)));
        assert_eq!(divider(350_000_000, 400_000), Some((873, 400_000)));
        // Never above the target; the 11-bit divider's end.
        assert_eq!(divider(1_000_000_000, 400_000), None);
        assert_eq!(divider(0, 400_000), None);
        assert_eq!(divider(80_000_000, 100_000_000), Some((0, 40_000_000)));
    }
}
