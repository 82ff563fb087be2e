//! The ring link: the board's second UART (`[ring_uart]` in its board file) as the link layer's
//! [`ring::link::Link`], brought up when `lmboot.txt` says `ring = K/N`.
//!
//! Sending is polled, when the ring is pumped. Receiving is by interrupt where the board file
//! gives the link's interrupt and its controller (`[ring_uart] irq`, `[irq]`: a GICv2, or the
//! Pi 3's ARMCTRL and local controller) and the
//! architecture takes interrupts ([`Arch::irqs_on`]): the handler (`on_irq`, called from the
//! vector table through `lmboot_irq`) empties the UART's FIFO into a buffer of [`RX_BUFFER`]
//! bytes whenever it fills, so a link without flow control loses nothing while the board
//! computes. Elsewhere the UART is read when the ring is pumped, between matrix products.

use crate::arch::{Arch, Cpu};
use crate::board::{self, IrqController};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use drivers::bcm2835::gpio::{link_uart_pins, LinkPins, GPIO_BLOCK_SIZE};
use drivers::bcm2835::irq::GpuIrqs;
use drivers::gic::GicV2;
use drivers::mmio::Mmio;
use drivers::uart::mini::MiniUart;
use drivers::uart::pl011::Pl011;
use drivers::uart::rx::{RxCounters, RxIrq, RxReader};
use drivers::uart::{Flow, LinkKind, LinkUart};
use ring::link::LineStats;
use runtime::config::MAX_RING_BAUD;
use runtime::platform::RingLink;

/// Bytes moved per `send`/`recv` call at most (the rest waits for the next pump), so that a pump
/// stays short on a line that never pauses.
const BURST: usize = 64;

/// The receive buffer's size (it holds one byte less): 64 KiB is 218 ms of a 3 Mbaud line, longer
/// than a Zero 2 W spends in any one matrix product of a 1.5B model between two pumps, and more
/// than the link layer has in flight towards a board (its window of frames).
const RX_BUFFER: usize = 64 * 1024;

/// A link UART as a byte stream; received through the interrupt's buffer when `rx` is set.
struct Port<U: LinkUart> {
    uart: U,
    rx: Option<RxReader<'static>>,
}

impl<U: LinkUart> ring::link::Link for Port<U> {
    fn send(&mut self, bytes: &[u8]) -> usize {
        bytes
            .iter()
            .take(BURST)
            .take_while(|&&b| self.uart.try_write_byte(b))
            .count()
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        if let Some(rx) = &mut self.rx {
            let n = buf.len().min(BURST);
            return rx.read(&mut buf[..n]);
        }
        let mut n = 0;
        for slot in buf.iter_mut().take(BURST) {
            match self.uart.read_byte() {
                Some(b) => *slot = b,
                None => break,
            }
            n += 1;
        }
        n
    }

    /// The overruns of both of the UART's drivers (this one, which sends, and the handler's,
    /// which receives: the mini UART's sender reads the flag too).
    fn line_stats(&self) -> Option<LineStats> {
        let rx = self.rx.as_ref().map(RxReader::stats).unwrap_or_default();
        Some(LineStats {
            by_irq: self.rx.is_some(),
            irq_bytes: rx.bytes as u64,
            irqs: rx.irqs as u64,
            overruns: self.uart.overruns() as u64 + rx.overruns as u64,
            dropped: rx.dropped as u64,
        })
    }
}

/// The interrupt controller the link's interrupt comes through (the board file's `[irq]`).
enum Controller {
    /// A GICv2 (QEMU virt, the Pi 4's GIC-400): acknowledge, handle, end.
    Gic(GicV2),
    /// The Pi 3's ARMCTRL and local controller: a VideoCore interrupt is its line's level, with
    /// nothing to acknowledge.
    Gpu(GpuIrqs),
}

impl Controller {
    /// Enable interrupt `id`, routed to this core.
    fn enable(c: IrqController, id: u32) -> Result<Self, String> {
        match c {
            IrqController::GicV2 { dist, cpu } => {
                // SAFETY: the board file's GIC, in its device-mapped memory; nothing else in the
                // kernel programs interrupts.
                let mut gic = unsafe { GicV2::new(dist, cpu) };
                gic.enable_spi(id).map_err(|e| format!("{e}"))?;
                Ok(Controller::Gic(gic))
            }
            IrqController::Bcm2836 { armctrl, local } => {
                // SAFETY: the board file's ARMCTRL block and local controller, device-mapped;
                // nothing else in the kernel routes or enables interrupts.
                let mut gpu = unsafe { GpuIrqs::new(armctrl, local, Cpu::core_id()) };
                gpu.enable(id).map_err(|e| format!("{e}"))?;
                Ok(Controller::Gpu(gpu))
            }
        }
    }

    /// Call `handle` for interrupt `id` if it is what interrupted (at most
    /// [`MAX_IRQS_PER_ENTRY`] times), ending every interrupt taken.
    fn serve(&mut self, id: u32, mut handle: impl FnMut()) {
        match self {
            Controller::Gic(gic) => {
                for _ in 0..MAX_IRQS_PER_ENTRY {
                    let Some((taken, iar)) = gic.acknowledge() else {
                        break;
                    };
                    if taken == id {
                        handle();
                    }
                    gic.end(iar);
                }
            }
            Controller::Gpu(gpu) => {
                if gpu.pending(id) {
                    handle();
                }
            }
        }
    }
}

/// What the interrupt handler needs: the controller, the link's interrupt id, the UART (a second
/// driver over its registers, which only reads) and the buffer's producer.
struct IrqSide {
    controller: Controller,
    id: u32,
    uart: Box<dyn LinkUart + Send>,
    rx: RxIrq<'static>,
}

/// Set once when the link opens with its interrupt; then locked only by the handler, on the one
/// core the interrupt is routed to (so never contended: `try_lock` in the handler never fails).
static IRQ: spin::Mutex<Option<IrqSide>> = spin::Mutex::new(None);
static RX_COUNTERS: RxCounters = RxCounters::new();

/// Interrupts acknowledged per call at most, so that a stuck line cannot hold the core.
const MAX_IRQS_PER_ENTRY: usize = 8;

/// The IRQ handler (`lmboot_irq`): empty the link UART's FIFO if its interrupt is what came.
pub fn on_irq() {
    let Some(mut side) = IRQ.try_lock() else {
        return;
    };
    let Some(s) = side.as_mut() else {
        return;
    };
    let (uart, rx) = (&mut s.uart, &mut s.rx);
    s.controller.serve(s.id, || {
        rx.drain(&mut **uart);
    });
}

/// Receive by interrupt if the board can: a second driver over the UART's registers for the
/// handler, the buffer, the controller routing the link's interrupt to this core, the UART's
/// receive interrupts on, and IRQs unmasked here. The reader's half, or `None` (polled), or why
/// not.
fn irq_rx(
    handler_uart: impl FnOnce() -> Box<dyn LinkUart + Send>,
) -> Result<Option<RxReader<'static>>, String> {
    let (Some(id), Some(c), true) = (board::RING_UART_IRQ, board::IRQ_CONTROLLER, Cpu::TAKES_IRQS)
    else {
        return Ok(None);
    };
    let state = Cpu::irq_save();
    let queue = Box::leak(Box::new(heapless::spsc::Queue::<u8, RX_BUFFER>::new()));
    let (producer, consumer) = queue.split();
    let mut uart = handler_uart();
    uart.enable_rx_irq();
    let controller = match Controller::enable(c, id) {
        Ok(c) => c,
        Err(e) => {
            Cpu::irq_restore(state);
            return Err(format!("the link's interrupt {id}: {e}"));
        }
    };
    *IRQ.lock() = Some(IrqSide {
        controller,
        id,
        uart,
        rx: RxIrq::new(producer, &RX_COUNTERS),
    });
    Cpu::irq_restore(state);
    Cpu::irqs_on();
    Ok(Some(RxReader::new(consumer, &RX_COUNTERS)))
}

/// Bring up the link UART for board `place` of the ring at `baud` (`None`: [`max_baud`]): its
/// pins, its clock, the line rate; the link and a line naming it, or why not.
pub fn open(place: u8, baud: Option<u32>) -> Result<(RingLink, String), String> {
    let Some(base) = board::RING_UART_BASE else {
        return Err(format!(
            "board {} has no link UART (no [ring_uart] in its board file)",
            board::NAME
        ));
    };
    if place == 1 && board::RING_UART_PINS == LinkPins::Bcm2837MiniGpio14 {
        return Err(
            "a Pi 3 / Zero 2 W has one UART on its header (GPIO 14/15), which the head \
                    needs for its console: make another board the head (a Pi 4 links on UART3)"
                .into(),
        );
    }
    route_pins();
    let clock = link_clock();
    let baud = baud.unwrap_or_else(|| max_baud(board::RING_UART_KIND, clock));
    let flow = board::RING_UART_FLOW;
    // Two drivers share the UART: the link's only sends (and reads status), the handler's only
    // receives.
    let ((link, actual, by_irq), kind) = match board::RING_UART_KIND {
        LinkKind::Pl011 => {
            // SAFETY: the board file's link UART, a PL011 mapped as device memory, used by
            // nothing else (the console is another UART: the board schema refuses the same base).
            let new = || unsafe { Pl011::new(base) };
            (port(new, |u| u.init_link(clock, baud, flow))?, "PL011")
        }
        LinkKind::Mini => {
            // SAFETY: the board file's mini UART registers, device-mapped, used by nothing else.
            let new = || unsafe { MiniUart::new(base) };
            (port(new, |u| u.init_link(clock, baud, flow))?, "mini UART")
        }
    };
    let flow = match flow {
        Flow::None => "no flow control",
        Flow::RtsCts => "RTS/CTS flow control",
    };
    let rx = match (by_irq, board::RING_UART_IRQ) {
        (true, Some(id)) => format!("received by interrupt {id}"),
        _ => "polled".into(),
    };
    Ok((
        link,
        format!("link {kind} at {base:#x}, {actual} baud ({baud} asked), {flow}, {rx}"),
    ))
}

/// The link over a UART made by `new` and set up by `init` (which gives the rate it made), with a
/// second driver from `new` receiving by interrupt where the board can ([`irq_rx`]): the link,
/// its rate, and whether it is received by interrupt.
fn port<U: LinkUart + Send + 'static>(
    new: impl Fn() -> U,
    init: impl FnOnce(&mut U) -> Result<u32, drivers::uart::BaudError>,
) -> Result<(RingLink, u32, bool), String> {
    let mut uart = new();
    let actual = init(&mut uart).map_err(|e| format!("{e}"))?;
    let rx = irq_rx(|| Box::new(new()))?;
    let by_irq = rx.is_some();
    Ok((Box::new(Port { uart, rx }), actual, by_irq))
}

/// The fastest rate the UART's divisor makes exactly from `clock`, up to [`MAX_RING_BAUD`]: a
/// PL011 divides by 16 at least, the mini UART by 8 × (register + 1).
fn max_baud(kind: LinkKind, clock: u32) -> u32 {
    match kind {
        LinkKind::Pl011 => (clock / 16).min(MAX_RING_BAUD),
        LinkKind::Mini => {
            let per = 8 * MAX_RING_BAUD as u64;
            let div = (clock as u64).div_ceil(per).max(1);
            (clock as u64 / (8 * div)) as u32
        }
    }
}

/// Route the link UART's pins (the Pi boards).
fn route_pins() {
    let Some(base) = board::GPIO_BASE.filter(|_| board::RING_UART_PINS != LinkPins::None) else {
        return;
    };
    // SAFETY: the board's GPIO block, device-mapped; the console's pins were set at bring-up and
    // this touches only the link's.
    let regs = unsafe { Mmio::new(base, GPIO_BLOCK_SIZE) };
    link_uart_pins(
        &mut regs.with_barrier(Cpu::io_barrier),
        board::RING_UART_PINS,
        board::RING_UART_FLOW,
        super::time::wait_us,
    );
}

/// The link UART's reference clock: the mini UART's is the VideoCore's core clock (asked of the
/// firmware, the board file's value if it does not say); a PL011's is the board file's.
fn link_clock() -> u32 {
    if let (LinkKind::Mini, Some(mut mb)) = (board::RING_UART_KIND, super::mailbox::open()) {
        return mb.core_clock(board::RING_UART_CLOCK_HZ).0;
    }
    board::RING_UART_CLOCK_HZ
}
