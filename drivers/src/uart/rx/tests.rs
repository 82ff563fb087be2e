//! A link at line rate into UARTs modelled at the register level: a PL011 (a 32-byte receive FIFO
//! as on the BCM2711, 16 bytes as in the generic r1p3; the RX interrupt at the FIFO level IFLS
//! sets, the RT interrupt after 32 quiet bit periods, OE on the next byte after an overrun) and
//! the mini UART (8 bytes; its interrupt while anything waits; LSR's overrun flag cleared by
//! reading LSR). Time runs in byte slots (10 bit periods at 8N1): one byte arrives per slot
//! while the board "computes" for long stretches and reads its link only between them.
//!
//! Polled, as the kernel read its link before, the FIFO overflows in every stretch and the
//! overrun count says so. By interrupt, the handler runs a few slots after the UART raises its
//! line, as the interrupt controller would have it taken, and every byte arrives in order.

extern crate std;

use super::*;
use crate::mmio::Regs;
use crate::uart::mini::{self as mu, MiniUart};
use crate::uart::pl011::{self as pl, Pl011};
use crate::uart::Flow;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use heapless::spsc::Queue;
use std::eprintln;

/// A UART's receive side seen from the line.
trait Line {
    /// A byte arrives from the line (lost when the FIFO is full).
    fn arrive(&mut self, b: u8);
    /// The line has been quiet for `bits` bit periods since the last byte.
    fn quiet(&mut self, bits: u32);
    /// The UART's interrupt output.
    fn irq(&self) -> bool;
    /// Bytes the line delivered to a full FIFO.
    fn lost(&self) -> usize;
}

/// A PL011's receive side (register offsets from the PL011 TRM).
struct FakePl011 {
    depth: usize,
    fifo: VecDeque<u32>,
    /// An overrun happened: the next byte into the FIFO carries OE.
    pending_oe: bool,
    rt: bool,
    imsc: u32,
    ifls: u32,
    lost: usize,
    /// ICR writes after the receive interrupts were enabled.
    clears: usize,
}

impl FakePl011 {
    fn new(depth: usize) -> Self {
        Self {
            depth,
            fifo: VecDeque::new(),
            pending_oe: false,
            rt: false,
            imsc: 0,
            ifls: 0b010 << 3,
            lost: 0,
            clears: 0,
        }
    }

    /// The receive level IFLS.RXIFLSEL sets: 1/8, 1/4, 1/2, 3/4 or 7/8 of the FIFO.
    fn level(&self) -> usize {
        let eighths = [1, 2, 4, 6, 7][((self.ifls >> 3) & 7).min(4) as usize];
        self.depth * eighths / 8
    }
}

impl Regs for FakePl011 {
    fn read32(&mut self, off: usize) -> u32 {
        match off {
            pl::DR => self.fifo.pop_front().unwrap_or(0),
            pl::FR => {
                if self.fifo.is_empty() {
                    pl::FR_RXFE
                } else {
                    0
                }
            }
            pl::IMSC => self.imsc,
            pl::IFLS => self.ifls,
            _ => 0,
        }
    }

    fn write32(&mut self, off: usize, v: u32) {
        match off {
            pl::IMSC => self.imsc = v,
            pl::IFLS => self.ifls = v,
            pl::ICR => {
                if self.imsc != 0 {
                    self.clears += 1;
                }
                if v & pl::INT_RT != 0 {
                    self.rt = false;
                }
            }
            _ => {}
        }
    }
}

impl Line for FakePl011 {
    fn arrive(&mut self, b: u8) {
        self.rt = false;
        if self.fifo.len() == self.depth {
            self.lost += 1;
            self.pending_oe = true;
            return;
        }
        let oe = if core::mem::take(&mut self.pending_oe) {
            pl::DR_OE
        } else {
            0
        };
        self.fifo.push_back(b as u32 | oe);
    }

    fn quiet(&mut self, bits: u32) {
        if bits >= 32 && !self.fifo.is_empty() {
            self.rt = true;
        }
    }

    fn irq(&self) -> bool {
        let rx = self.imsc & pl::INT_RX != 0 && self.fifo.len() >= self.level();
        let rt = self.imsc & pl::INT_RT != 0 && self.rt && !self.fifo.is_empty();
        rx || rt
    }

    fn lost(&self) -> usize {
        self.lost
    }
}

/// The mini UART's receive side: the AUX block's registers (BCM2835 ARM Peripherals, section 2).
struct FakeMini {
    fifo: VecDeque<u8>,
    overrun: bool,
    ier: u32,
    lost: usize,
}

const MINI_DEPTH: usize = 8;

impl Regs for FakeMini {
    fn read32(&mut self, off: usize) -> u32 {
        match off {
            mu::MU_IO => self.fifo.pop_front().unwrap_or(0) as u32,
            mu::MU_IER => self.ier,
            mu::MU_LSR => {
                let mut lsr = mu::LSR_TX_ROOM;
                if !self.fifo.is_empty() {
                    lsr |= mu::LSR_DATA_READY;
                }
                if self.overrun {
                    lsr |= mu::LSR_RX_OVERRUN;
                }
                self.overrun = false;
                lsr
            }
            _ => 0,
        }
    }

    fn write32(&mut self, off: usize, v: u32) {
        if off == mu::MU_IER {
            self.ier = v;
        }
    }
}

impl Line for FakeMini {
    fn arrive(&mut self, b: u8) {
        if self.fifo.len() == MINI_DEPTH {
            self.lost += 1;
            self.overrun = true;
        } else {
            self.fifo.push_back(b);
        }
    }

    fn quiet(&mut self, _bits: u32) {}

    fn irq(&self) -> bool {
        self.ier & 1 != 0 && !self.fifo.is_empty()
    }

    fn lost(&self) -> usize {
        self.lost
    }
}

/// One fake shared by the driver (through [`Regs`]) and the line.
struct Shared<F>(Rc<RefCell<F>>);

impl<F: Regs> Regs for Shared<F> {
    fn read32(&mut self, off: usize) -> u32 {
        self.0.borrow_mut().read32(off)
    }

    fn write32(&mut self, off: usize, v: u32) {
        self.0.borrow_mut().write32(off, v)
    }
}

/// Bytes a board sends: a fixed pseudo-random stream (an LCG: any byte value may come).
fn traffic(n: usize) -> Vec<u8> {
    let mut x = 0x2545_f491u32;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect()
}

/// How the board reads its link.
#[derive(Clone, Copy)]
enum Mode {
    /// Only between two stretches of computing.
    Polled,
    /// By interrupt, the handler running `latency` byte slots after the UART raises its line.
    Irq { latency: usize },
}

/// What a run delivered.
struct Outcome {
    received: Vec<u8>,
    lost_on_line: usize,
    overruns: u32,
    rx: RxStats,
}

/// `sent` arrives one byte per slot while the board computes for `compute` slots at a time and
/// then empties what it has (the UART polled, or the interrupt's buffer). After the last byte
/// the line goes quiet (the PL011's receive timeout) and the board reads what is left.
fn run<F, U>(
    line: &Rc<RefCell<F>>,
    uart: &mut U,
    mode: Mode,
    sent: &[u8],
    compute: usize,
) -> Outcome
where
    F: Line,
    U: LinkUart,
{
    let mut queue: Queue<u8, 4096> = Queue::new();
    let counters = RxCounters::new();
    let (p, c) = queue.split();
    let (mut handler, mut reader) = (RxIrq::new(p, &counters), RxReader::new(c, &counters));
    let mut received = Vec::new();
    let mut raised: Option<usize> = None;
    let poll = |uart: &mut U, reader: &mut RxReader<'_>, received: &mut Vec<u8>| match mode {
        Mode::Polled => {
            while let Some(b) = uart.read_byte() {
                received.push(b);
            }
        }
        Mode::Irq { .. } => {
            let mut buf = [0u8; 64];
            loop {
                let n = reader.read(&mut buf);
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
            }
        }
    };
    // The slots after the last byte: long enough for the receive timeout and the handler.
    let quiet_slots = 64;
    for slot in 0..sent.len() + quiet_slots {
        if let Some(&b) = sent.get(slot) {
            line.borrow_mut().arrive(b);
        } else {
            line.borrow_mut()
                .quiet(((slot + 1 - sent.len()) * 10) as u32);
        }
        if let Mode::Irq { latency } = mode {
            if line.borrow().irq() {
                let at = *raised.get_or_insert(slot);
                if slot >= at + latency {
                    handler.drain(uart);
                    raised = None;
                }
            } else {
                raised = None;
            }
        }
        if slot % compute == compute - 1 {
            poll(uart, &mut reader, &mut received);
        }
    }
    poll(uart, &mut reader, &mut received);
    Outcome {
        received,
        lost_on_line: line.borrow().lost(),
        overruns: uart.overruns(),
        rx: counters.stats(),
    }
}

/// 3 Mbaud (a Pi's PL011 from 48 MHz): 300 000 bytes a second; 3000 slots are 10 ms of
/// computing, a short matrix product on a Pi.
const STRETCH: usize = 3000;
const BYTES: usize = 60_000;

fn pl011(depth: usize) -> (Rc<RefCell<FakePl011>>, Pl011<Shared<FakePl011>>) {
    let fake = Rc::new(RefCell::new(FakePl011::new(depth)));
    let mut u = Pl011::from_regs(Shared(fake.clone()));
    u.init_link(48_000_000, 3_000_000, Flow::None).unwrap();
    (fake, u)
}

fn mini() -> (Rc<RefCell<FakeMini>>, MiniUart<Shared<FakeMini>>) {
    let fake = Rc::new(RefCell::new(FakeMini {
        fifo: VecDeque::new(),
        overrun: false,
        ier: 0,
        lost: 0,
    }));
    let mut u = MiniUart::from_regs(Shared(fake.clone()));
    u.init_link(250_000_000, 921_600, Flow::None).unwrap();
    (fake, u)
}

/// Polled: every stretch overflows the FIFO; the bytes kept are the first `depth` of each, and
/// the overrun count (one per stretch: the flag comes with the next byte the FIFO takes) matches.
fn check_polled(o: &Outcome, depth: usize) {
    let stretches = BYTES.div_ceil(STRETCH);
    eprintln!(
        "polled, {depth}-byte FIFO: {} of {BYTES} bytes received, {} lost, {} overruns counted",
        o.received.len(),
        o.lost_on_line,
        o.overruns
    );
    assert_eq!(o.received.len() + o.lost_on_line, BYTES);
    assert!(
        o.lost_on_line >= (BYTES - stretches * depth) / 2,
        "{}",
        o.lost_on_line
    );
    assert!(o.received.len() <= stretches * (depth + 1));
    assert!(
        o.overruns as usize >= stretches - 1 && o.overruns as usize <= stretches,
        "{} overruns in {stretches} stretches",
        o.overruns
    );
    assert_eq!(o.rx, RxStats::default(), "no interrupt in the polled run");
}

/// By interrupt: all of it, in order, no overrun, nothing dropped, every byte by the handler.
fn check_irq(o: &Outcome, sent: &[u8], most_per_irq: usize) {
    eprintln!(
        "by interrupt: {} of {} bytes received, {} overruns, {} interrupts",
        o.received.len(),
        sent.len(),
        o.overruns,
        o.rx.irqs
    );
    assert_eq!(o.lost_on_line, 0);
    assert!(o.received == sent, "the bytes differ");
    assert_eq!(o.overruns, 0);
    assert_eq!(o.rx.overruns, 0);
    assert_eq!(o.rx.dropped, 0);
    assert_eq!(o.rx.bytes as usize, sent.len());
    assert!(
        o.rx.irqs as usize >= sent.len() / most_per_irq,
        "{:?}",
        o.rx
    );
}

#[test]
fn a_pl011_polled_between_computations_overruns_and_counts_it() {
    for depth in [32, 16] {
        let sent = traffic(BYTES);
        let (fake, mut u) = pl011(depth);
        let o = run(&fake, &mut u, Mode::Polled, &sent, STRETCH);
        check_polled(&o, depth);
    }
}

#[test]
fn a_pl011_read_by_interrupt_loses_nothing_while_the_board_computes() {
    for depth in [32, 16] {
        let sent = traffic(BYTES);
        let (fake, mut u) = pl011(depth);
        u.enable_rx_irq();
        // Taken 4 slots (13 µs at 3 Mbaud) after the FIFO reaches half full.
        let o = run(&fake, &mut u, Mode::Irq { latency: 4 }, &sent, STRETCH);
        check_irq(&o, &sent, depth / 2 + 4 + 1);
        assert_eq!(fake.borrow().imsc, pl::INT_RX | pl::INT_RT, "RXIM and RTIM");
    }
}

#[test]
fn a_pl011_interrupt_taken_too_late_still_counts_the_overruns() {
    // The handler held off for longer than the FIFO's free half lasts (interrupts masked too
    // long): bytes are lost, and the overrun count the handler saw says so.
    let sent = traffic(BYTES);
    let (fake, mut u) = pl011(32);
    u.enable_rx_irq();
    let o = run(&fake, &mut u, Mode::Irq { latency: 40 }, &sent, STRETCH);
    assert!(o.lost_on_line > 0);
    assert_eq!(o.received.len() + o.lost_on_line, BYTES);
    assert!(o.rx.overruns > 0 && o.rx.overruns == o.overruns);
}

#[test]
fn the_mini_uart_polled_overruns_and_by_interrupt_does_not() {
    let sent = traffic(BYTES);
    let (fake, mut u) = mini();
    let o = run(&fake, &mut u, Mode::Polled, &sent, STRETCH);
    check_polled(&o, MINI_DEPTH);

    let (fake, mut u) = mini();
    u.enable_rx_irq();
    assert_eq!(fake.borrow().ier & 1, 1, "receive interrupt on");
    // Its line rises at the first byte; taken 4 slots later (43 µs at 921600 baud).
    let o = run(&fake, &mut u, Mode::Irq { latency: 4 }, &sent, STRETCH);
    check_irq(&o, &sent, MINI_DEPTH);
}

#[test]
fn a_full_software_buffer_drops_and_counts_what_does_not_fit() {
    let sent = traffic(2000);
    let (fake, mut u) = pl011(32);
    u.enable_rx_irq();
    let mut queue: Queue<u8, 256> = Queue::new();
    let counters = RxCounters::new();
    let (p, c) = queue.split();
    let (mut handler, mut reader) = (RxIrq::new(p, &counters), RxReader::new(c, &counters));
    for &b in &sent {
        fake.borrow_mut().arrive(b);
        if fake.borrow().irq() {
            handler.drain(&mut u);
        }
    }
    fake.borrow_mut().quiet(40);
    handler.drain(&mut u);
    let mut got = [0u8; 4096];
    let n = reader.read(&mut got);
    let s = reader.stats();
    assert_eq!(n, 255, "the queue holds its capacity less one");
    assert_eq!(&got[..n], &sent[..n], "the first bytes, in order");
    assert_eq!(s.dropped as usize, sent.len() - n);
    assert_eq!(s.bytes as usize, sent.len());
    assert_eq!(s.overruns, 0);
    assert_eq!(fake.borrow().lost, 0);
}

#[test]
fn drain_stops_at_its_limit_and_leaves_the_interrupt_raised() {
    let (fake, mut u) = pl011(256);
    u.enable_rx_irq();
    for b in traffic(100) {
        fake.borrow_mut().arrive(b);
    }
    fake.borrow_mut().quiet(40);
    let mut queue: Queue<u8, 4096> = Queue::new();
    let counters = RxCounters::new();
    let (p, _c) = queue.split();
    let mut handler = RxIrq::new(p, &counters);
    assert_eq!(handler.drain(&mut u), DRAIN_LIMIT);
    assert!(fake.borrow().irq(), "not acknowledged: bytes wait");
    assert_eq!(handler.drain(&mut u), 100 - DRAIN_LIMIT);
    assert!(!fake.borrow().irq());
    assert_eq!(counters.stats().irqs, 2);
}

#[test]
fn the_handler_never_clears_the_interrupt_by_hand() {
    // Reading the FIFO clears it; a write to ICR could race a byte arriving just then and leave
    // it unannounced (QEMU's PL011 raises RX only as its FIFO goes from empty to one byte).
    let sent = traffic(5000);
    let (fake, mut u) = pl011(32);
    u.enable_rx_irq();
    let o = run(&fake, &mut u, Mode::Irq { latency: 1 }, &sent, STRETCH);
    assert!(o.received == sent);
    assert_eq!(fake.borrow().clears, 0);
}
