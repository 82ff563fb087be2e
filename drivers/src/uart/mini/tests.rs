//! The mini UART against a fake AUX block: 8-byte FIFOs, LSR computed from them with an overrun
//! flag that the next LSR read clears (as the guide says), IIR writes that clear the FIFOs, every
//! other register plain storage, and a log of the writes in order.

use super::*;
use crate::uart::LinkKind;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

const FIFO_DEPTH: usize = 8;
const CORE_250_MHZ: u32 = 250_000_000;

#[derive(Debug, Default)]
struct FakeAux {
    regs: [u32; AUX_BLOCK_SIZE / 4],
    tx: Vec<u8>,
    rx: VecDeque<u8>,
    /// Bytes were lost since the last LSR read.
    overrun: bool,
    writes: Vec<(usize, u32)>,
    lsr_reads: usize,
    barriers: usize,
    overflowed: bool,
}

impl Regs for FakeAux {
    fn read32(&mut self, off: usize) -> u32 {
        assert!(
            off.is_multiple_of(4) && off < AUX_BLOCK_SIZE,
            "read {off:#x}"
        );
        match off {
            MU_LSR => {
                self.lsr_reads += 1;
                let mut lsr = 0;
                if !self.rx.is_empty() {
                    lsr |= LSR_DATA_READY;
                }
                if core::mem::take(&mut self.overrun) {
                    lsr |= LSR_RX_OVERRUN;
                }
                if self.tx.len() < FIFO_DEPTH {
                    lsr |= LSR_TX_ROOM;
                }
                lsr
            }
            MU_IO => self.rx.pop_front().unwrap_or(0) as u32,
            _ => self.regs[off / 4],
        }
    }

    fn write32(&mut self, off: usize, v: u32) {
        assert!(
            off.is_multiple_of(4) && off < AUX_BLOCK_SIZE,
            "write {off:#x}"
        );
        self.writes.push((off, v));
        match off {
            MU_IO => {
                self.overflowed |= self.tx.len() >= FIFO_DEPTH;
                self.tx.push(v as u8);
            }
            MU_IIR => {
                if v & 0b010 != 0 {
                    self.rx.clear();
                }
                if v & 0b100 != 0 {
                    self.tx.clear();
                }
            }
            _ => self.regs[off / 4] = v,
        }
    }

    fn barrier(&mut self) {
        self.barriers += 1;
    }
}

/// A mini UART whose AUX block has SPI1 and SPI2 enabled (by someone else) and stale state.
fn uart() -> MiniUart<FakeAux> {
    let mut aux = FakeAux::default();
    aux.regs[AUX_ENABLES / 4] = 0b110;
    aux.rx.extend(b"old");
    aux.tx.extend(b"old");
    aux.overrun = true;
    MiniUart::from_regs(aux)
}

fn position(u: &MiniUart<FakeAux>, w: (usize, u32)) -> usize {
    u.regs.writes.iter().position(|&x| x == w).unwrap()
}

#[test]
fn init_sequence() {
    let mut u = uart();
    assert_eq!(u.init_link(CORE_250_MHZ, 115_200, Flow::None), Ok(115_314));
    let w = &u.regs.writes;
    // The UART is enabled in AUX_ENABLES first, the SPI bits kept.
    assert_eq!(w[0], (AUX_ENABLES, 0b111));
    // Transmitter and receiver off before anything else is set, and on (alone) last.
    assert_eq!(w[1], (MU_CNTL, 0));
    assert_eq!(*w.last().unwrap(), (MU_CNTL, CNTL_RX | CNTL_TX));
    for set in [
        (MU_IER, 0),
        (MU_LCR, 3),
        (MU_MCR, 0),
        (MU_IIR, 0b110),
        (MU_BAUD, 270),
    ] {
        let at = position(&u, set);
        assert!(1 < at && at < w.len() - 1, "{set:x?} at {at}");
    }
    assert!(
        u.regs.rx.is_empty() && u.regs.tx.is_empty(),
        "FIFOs cleared"
    );
    assert_eq!(u.overruns(), 0, "a stale overrun flag is not counted");
    assert_eq!(u.regs.barriers, 2);
    assert_eq!(LinkUart::read_byte(&mut u), None);
}

#[test]
fn baud_register_and_refusals() {
    // (clock, baud, register, the rate it makes)
    for (clock, baud, reg, actual) in [
        (CORE_250_MHZ, 115_200, 270, 115_314),
        (CORE_250_MHZ, 921_600, 33, 919_118),
        // The Pi 4's default core clock, 500 MHz.
        (500_000_000, 3_000_000, 20, 2_976_190),
    ] {
        assert_eq!(achievable_baud(clock, baud), Ok(actual), "{baud}");
        assert_eq!(LinkKind::Mini.achievable_baud(clock, baud), Ok(actual));
        let mut u = uart();
        assert_eq!(u.init_link(clock, baud, Flow::None), Ok(actual));
        assert_eq!(u.regs.regs[MU_BAUD / 4], reg, "{baud}");
    }
    // 3 Mbaud from 250 MHz: register 9 gives 3.125 Mbaud, 4% off.
    let inexact = BaudError::Inexact {
        clock_hz: CORE_250_MHZ,
        baud: 3_000_000,
        actual: 3_125_000,
    };
    assert_eq!(achievable_baud(CORE_250_MHZ, 3_000_000), Err(inexact));
    // From 48 MHz the PL011 makes it exactly.
    assert_eq!(
        LinkKind::Pl011.achievable_baud(48_000_000, 3_000_000),
        Ok(3_000_000)
    );
    for baud in [100_000_000, 300] {
        let e = BaudError::OutOfRange {
            clock_hz: CORE_250_MHZ,
            baud,
            min: 477,
            max: 31_250_000,
        };
        assert_eq!(achievable_baud(CORE_250_MHZ, baud), Err(e));
    }
    assert_eq!(
        alloc::format!("{inexact}"),
        "3000000 baud from a 250000000 Hz clock: the nearest divisor gives 3125000 baud, more than 2.0% off"
    );
    let mut u = uart();
    assert_eq!(
        u.init_link(CORE_250_MHZ, 3_000_000, Flow::RtsCts),
        Err(inexact)
    );
    assert!(u.regs.writes.is_empty() && u.regs.barriers == 0);
}

#[test]
fn flow_control_sets_auto_rts_and_cts() {
    let mut u = uart();
    u.init_link(CORE_250_MHZ, 921_600, Flow::RtsCts).unwrap();
    // Auto RTS and CTS, RTS dropping with 3 places left (bits 5:4 = 0), polarity not inverted.
    assert_eq!(u.regs.regs[MU_CNTL / 4], 0b0000_1111);
}

#[test]
fn overruns_are_counted_whichever_call_reads_lsr() {
    let mut u = uart();
    u.init_link(CORE_250_MHZ, 115_200, Flow::None).unwrap();
    u.regs.rx.extend(b"ab");
    u.regs.overrun = true;
    // A write reads LSR, which clears the flag: it must still count.
    assert!(u.try_write_byte(b'x'));
    assert_eq!(u.overruns(), 1);
    assert_eq!(LinkUart::read_byte(&mut u), Some(b'a'));
    u.regs.overrun = true;
    assert_eq!(LinkUart::read_byte(&mut u), Some(b'b'));
    assert_eq!(LinkUart::read_byte(&mut u), None);
    assert_eq!(u.overruns(), 2);
    assert_eq!(u.regs.tx, b"x");
}

#[test]
fn try_write_byte_is_false_on_a_full_fifo() {
    let mut u = uart();
    u.init_link(CORE_250_MHZ, 921_600, Flow::RtsCts).unwrap();
    for i in 0..FIFO_DEPTH as u8 {
        assert!(u.try_write_byte(i));
    }
    let reads = u.regs.lsr_reads;
    assert!(!u.try_write_byte(0xff));
    assert_eq!(u.regs.lsr_reads, reads + 1, "one LSR read, no wait");
    assert!(!u.regs.overflowed);
    assert_eq!(u.regs.tx, [0, 1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn new_maps_the_aux_block_below_the_uart() {
    // SAFETY: the address is only stored, never accessed.
    let u = unsafe { MiniUart::new(0x3f21_5040) };
    assert_eq!(u.regs.base(), 0x3f21_5000);
}
