//! The ring link: the board's second UART (`[ring_uart]` in its board file) as the link layer's
//! [`ring::link::Link`], brought up when `lmboot.txt` says `ring = K/N`.

use crate::arch::{Arch, Cpu};
use crate::board;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use drivers::bcm2835::gpio::{link_uart_pins, LinkPins, GPIO_BLOCK_SIZE};
use drivers::mmio::Mmio;
use drivers::uart::mini::MiniUart;
use drivers::uart::pl011::Pl011;
use drivers::uart::{Flow, LinkKind, LinkUart};
use runtime::config::MAX_RING_BAUD;
use runtime::platform::RingLink;

/// Bytes moved per `send`/`recv` call at most (the rest waits for the next pump), so that a pump
/// stays short on a line that never pauses.
const BURST: usize = 64;

/// A link UART as a byte stream.
struct Port<U: LinkUart>(U);

impl<U: LinkUart> ring::link::Link for Port<U> {
    fn send(&mut self, bytes: &[u8]) -> usize {
        bytes
            .iter()
            .take(BURST)
            .take_while(|&&b| self.0.try_write_byte(b))
            .count()
    }

    fn recv(&mut self, buf: &mut [u8]) -> usize {
        let mut n = 0;
        for slot in buf.iter_mut().take(BURST) {
            match self.0.read_byte() {
                Some(b) => *slot = b,
                None => break,
            }
            n += 1;
        }
        n
    }
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
    let (link, actual, kind): (RingLink, u32, &str) = match board::RING_UART_KIND {
        LinkKind::Pl011 => {
            // SAFETY: the board file's link UART, a PL011 mapped as device memory, used by
            // nothing else (the console is another UART: the board schema refuses the same base).
            let mut u = unsafe { Pl011::new(base) };
            let actual = u.init_link(clock, baud, flow).map_err(|e| format!("{e}"))?;
            (Box::new(Port(u)), actual, "PL011")
        }
        LinkKind::Mini => {
            // SAFETY: the board file's mini UART registers, device-mapped, used by nothing else.
            let mut u = unsafe { MiniUart::new(base) };
            let actual = u.init_link(clock, baud, flow).map_err(|e| format!("{e}"))?;
            (Box::new(Port(u)), actual, "mini UART")
        }
    };
    let flow = match flow {
        Flow::None => "no flow control",
        Flow::RtsCts => "RTS/CTS flow control",
    };
    Ok((
        link,
        format!("link {kind} at {base:#x}, {actual} baud ({baud} asked), {flow}"),
    ))
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
