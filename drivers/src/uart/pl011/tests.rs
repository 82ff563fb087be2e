//! The PL011 against a fake register file: a transmit FIFO of [`TX_DEPTH`] bytes, a receive FIFO
//! of DR values (a byte and its error flags), FR computed from them, every other register plain
//! storage, and a log of the writes in order.

use super::*;
use crate::uart::MAX_BAUD_ERROR_PER_MILLE;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// The BCM2835 PL011's FIFO depth.
const TX_DEPTH: usize = 16;

#[derive(Debug)]
struct FakePl011 {
    regs: [u32; PL011_BLOCK_SIZE / 4],
    tx: Vec<u8>,
    rx: VecDeque<u32>,
    /// FR reports BUSY for this many more polls.
    busy_polls: u32,
    writes: Vec<(usize, u32)>,
    fr_reads: usize,
    barriers: usize,
    /// DR written while the transmit FIFO was full.
    overflowed: bool,
}

impl Default for FakePl011 {
    fn default() -> Self {
        Self {
            regs: [0; PL011_BLOCK_SIZE / 4],
            tx: Vec::new(),
            rx: VecDeque::new(),
            busy_polls: 0,
            writes: Vec::new(),
            fr_reads: 0,
            barriers: 0,
            overflowed: false,
        }
    }
}

impl Regs for FakePl011 {
    fn read32(&mut self, off: usize) -> u32 {
        assert!(
            off.is_multiple_of(4) && off < PL011_BLOCK_SIZE,
            "read {off:#x}"
        );
        match off {
            FR => {
                self.fr_reads += 1;
                let mut fr = 0;
                if self.tx.len() >= TX_DEPTH {
                    fr |= FR_TXFF;
                }
                if self.rx.is_empty() {
                    fr |= FR_RXFE;
                }
                if self.busy_polls > 0 {
                    self.busy_polls -= 1;
                    fr |= FR_BUSY;
                }
                fr
            }
            DR => self.rx.pop_front().unwrap_or(0),
            _ => self.regs[off / 4],
        }
    }

    fn write32(&mut self, off: usize, v: u32) {
        assert!(
            off.is_multiple_of(4) && off < PL011_BLOCK_SIZE,
            "write {off:#x}"
        );
        self.writes.push((off, v));
        if off == DR {
            self.overflowed |= self.tx.len() >= TX_DEPTH;
            self.tx.push(v as u8);
        } else {
            self.regs[off / 4] = v;
        }
    }

    fn barrier(&mut self) {
        self.barriers += 1;
    }
}

fn uart() -> Pl011<FakePl011> {
    Pl011::from_regs(FakePl011::default())
}

/// Where in the write log `off` was last written.
fn last_write(u: &Pl011<FakePl011>, off: usize) -> usize {
    u.regs.writes.iter().rposition(|&(o, _)| o == off).unwrap()
}

#[test]
fn divisors_at_48_mhz() {
    // (baud, IBRD, FBRD, the rate they make)
    for (baud, ibrd, fbrd, actual) in [
        (115_200, 26, 3, 115_177),
        (921_600, 3, 16, 923_077),
        (3_000_000, 1, 0, 3_000_000),
    ] {
        assert_eq!(achievable_baud(48_000_000, baud), Ok(actual), "{baud}");
        let mut u = uart();
        assert_eq!(u.init_link(48_000_000, baud, Flow::None), Ok(actual));
        let r = &u.regs.regs;
        assert_eq!((r[IBRD / 4], r[FBRD / 4]), (ibrd, fbrd), "{baud}");
        // The divisor is latched by the LCR_H write after it, and the UART is enabled last.
        assert!(last_write(&u, FBRD) < last_write(&u, LCRH));
        assert_eq!(last_write(&u, CR), u.regs.writes.len() - 1);
        assert_eq!(r[LCRH / 4], LCRH_8N1_FIFO);
        assert_eq!(r[IFLS / 4], IFLS_HALF);
        assert_eq!((r[IMSC / 4], r[ICR / 4]), (0, 0x7ff));
        assert_eq!(u.regs.barriers, 2);
    }
}

#[test]
fn rates_the_divisor_cannot_make_are_refused_untouched() {
    let (clock_hz, max, min) = (48_000_000, 3_000_000, 46);
    for baud in [3_100_000, 40] {
        let e = BaudError::OutOfRange {
            clock_hz,
            baud,
            min,
            max,
        };
        assert_eq!(achievable_baud(clock_hz, baud), Err(e));
        let mut u = uart();
        assert_eq!(u.init_link(clock_hz, baud, Flow::RtsCts), Err(e));
        assert!(u.regs.writes.is_empty() && u.regs.barriers == 0);
    }
    // The extremes are made exactly.
    assert_eq!(achievable_baud(clock_hz, min), Ok(min));
    assert_eq!(achievable_baud(clock_hz, max), Ok(max));
    assert_eq!(
        achievable_baud(0, 115_200),
        Err(BaudError::Zero {
            clock_hz: 0,
            baud: 115_200
        })
    );
    assert!(matches!(
        achievable_baud(clock_hz, 0),
        Err(BaudError::Zero { .. })
    ));
    // In range, 64ths of the divisor keep every rate within 1/128 of the one asked for: the
    // PL011 is never more than the tolerance off.
    for baud in (46..=3_000_000).step_by(997) {
        let actual = achievable_baud(clock_hz, baud).unwrap();
        let off = (actual as u64).abs_diff(baud as u64) * 1000;
        assert!(
            off <= baud as u64 * MAX_BAUD_ERROR_PER_MILLE as u64,
            "{baud}"
        );
    }
}

#[test]
fn flow_control_sets_rtsen_and_ctsen() {
    for (flow, cr) in [
        (Flow::None, 0x0301),
        (Flow::RtsCts, 0x0301 | CR_RTSEN | CR_CTSEN),
    ] {
        let mut u = uart();
        u.init_link(48_000_000, 921_600, flow).unwrap();
        assert_eq!(u.regs.regs[CR / 4], cr, "{flow:?}");
        assert_eq!(cr & 0xc000 != 0, flow == Flow::RtsCts);
    }
}

#[test]
fn the_link_starts_clean() {
    let mut u = uart();
    u.regs.rx.extend([b'x' as u32, DR_OE | b'y' as u32]);
    u.regs.busy_polls = 3;
    u.init_link(48_000_000, 115_200, Flow::None).unwrap();
    assert!(u.regs.rx.is_empty(), "stale bytes drained");
    assert_eq!(u.regs.busy_polls, 0, "waited for the character under way");
    // UART off first; FIFOs off (flushing the transmitter) before the new settings; errors cleared.
    assert_eq!(u.regs.writes[0], (CR, 0));
    assert_eq!(u.regs.writes[1], (LCRH, 0));
    assert!(u.regs.writes.contains(&(RSR_ECR, 0)));
    assert_eq!(LinkUart::read_byte(&mut u), None);
    assert_eq!((u.overruns(), u.errors()), (0, LineErrors::default()));
}

#[test]
fn receive_errors_are_counted_and_the_bytes_kept() {
    let mut u = uart();
    u.init_link(48_000_000, 921_600, Flow::RtsCts).unwrap();
    u.regs.rx.extend([
        b'a' as u32,
        DR_OE | b'b' as u32,
        DR_FE | b'c' as u32,
        DR_OE | DR_PE | b'd' as u32,
        DR_BE | DR_FE,
    ]);
    let got: Vec<u8> = core::iter::from_fn(|| LinkUart::read_byte(&mut u)).collect();
    assert_eq!(got, b"abcd\0");
    assert_eq!(u.overruns(), 2);
    let e = LineErrors {
        overruns: 2,
        framing: 2,
        parity: 1,
        breaks: 1,
    };
    assert_eq!(u.errors(), e);
}

#[test]
fn try_write_byte_never_waits() {
    let mut u = uart();
    u.init_link(48_000_000, 3_000_000, Flow::RtsCts).unwrap();
    for i in 0..TX_DEPTH as u8 {
        assert!(u.try_write_byte(i));
    }
    let polls = u.regs.fr_reads;
    assert!(!u.try_write_byte(0xff), "a full FIFO refuses the byte");
    assert_eq!(u.regs.fr_reads, polls + 1, "one FR poll, no wait");
    assert_eq!(u.regs.tx.len(), TX_DEPTH);
    assert!(!u.regs.overflowed);
    u.regs.tx.clear(); // the line took them
    assert!(u.try_write_byte(0xff));
}

#[test]
fn the_console_init_is_unchanged() {
    let mut u = uart();
    u.regs.rx.extend([b'h' as u32, b'i' as u32]);
    u.regs.busy_polls = 2;
    u.init(48_000_000, 115_200);
    // The write sequence the console has always used, and bytes received before it kept.
    let want = [
        (LCRH, 0x70),
        (CR, 0),
        (IBRD, 26),
        (FBRD, 3),
        (LCRH, 0x70),
        (IMSC, 0),
        (ICR, 0x7ff),
        (CR, 0x301),
    ];
    assert_eq!(u.regs.writes, want);
    assert_eq!(u.regs.barriers, 0, "the console has no barriers of its own");
    assert_eq!(Uart::read_byte(&mut u), Some(b'h'));
    assert_eq!(Uart::read_byte(&mut u), Some(b'i'));
    assert_eq!(Uart::read_byte(&mut u), None);
    u.write_byte(b'!');
    assert_eq!(u.regs.tx, b"!");
}
