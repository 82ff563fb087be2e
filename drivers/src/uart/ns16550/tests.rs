//! The NS16550 driver against a fake UART with 32-bit registers 4 bytes apart: DLAB switching
//! THR/IER to DLL/DLM, a transmitter that is busy for a number of polls, the DesignWare UART's
//! USR.BUSY that makes LCR writes vanish, and the XScale unit enable (a byte written while IER's
//! UUE is clear goes nowhere).

use super::*;
use alloc::vec::Vec;

#[derive(Debug, Default)]
struct FakeUart {
    variant: Variant,
    lcr: u8,
    ier: u8,
    dll: u8,
    dlm: u8,
    fcr_clears: u32,
    mcr: u8,
    /// USR.BUSY reads 1 for this many more USR reads (the DesignWare UART mid-character).
    busy_reads: u32,
    /// USR.BUSY never clears (a line that keeps receiving).
    always_busy: bool,
    /// USR.BUSY clears only when the FIFOs are cleared (a receiver holding a byte).
    busy_until_fifo_clear: bool,
    /// LCR writes ignored while busy.
    ignored_lcr: u32,
    usr_reads: u32,
    sent: Vec<u8>,
    /// Bytes written to THR while the XScale unit was off.
    lost: Vec<u8>,
    /// Accesses outside the 8 standard registers and USR.
    stray: Vec<usize>,
}

impl FakeUart {
    fn new(variant: Variant) -> FakeUart {
        FakeUart {
            variant,
            // What a boot loader leaves: 8N1, unit on.
            lcr: 0x03,
            ier: IER_UUE,
            ..FakeUart::default()
        }
    }

    fn busy(&self) -> bool {
        self.variant == Variant::DwApb
            && (self.always_busy || self.busy_reads > 0 || self.busy_until_fifo_clear)
    }

    fn dlab(&self) -> bool {
        self.lcr & LCR_DLAB != 0
    }
}

impl Regs for FakeUart {
    fn read32(&mut self, off: usize) -> u32 {
        let v = match off / 4 {
            RBR_THR_DLL if self.dlab() => self.dll,
            IER_DLM if self.dlab() => self.dlm,
            IER_DLM => self.ier,
            LCR => self.lcr,
            MCR => self.mcr,
            LSR => LSR_THRE | LSR_TEMT,
            USR if self.variant == Variant::DwApb => {
                self.usr_reads += 1;
                let b = self.busy();
                self.busy_reads = self.busy_reads.saturating_sub(1);
                b as u8
            }
            _ => {
                self.stray.push(off);
                0
            }
        };
        v as u32
    }

    fn write32(&mut self, off: usize, v: u32) {
        let v = v as u8;
        match off / 4 {
            RBR_THR_DLL if self.dlab() => self.dll = v,
            RBR_THR_DLL if self.variant == Variant::Xscale && self.ier & IER_UUE == 0 => {
                self.lost.push(v)
            }
            RBR_THR_DLL => self.sent.push(v),
            IER_DLM if self.dlab() => self.dlm = v,
            IER_DLM => self.ier = v,
            FCR => {
                if v & 0x06 != 0 {
                    self.fcr_clears += 1;
                    self.busy_until_fifo_clear = false;
                }
            }
            LCR if self.busy() => self.ignored_lcr += 1,
            LCR => self.lcr = v,
            MCR => self.mcr = v,
            _ => self.stray.push(off),
        }
    }
}

fn uart(fake: FakeUart) -> Ns16550<Words<FakeUart>> {
    let v = fake.variant;
    Ns16550::from_regs(fake, v)
}

#[test]
fn plain_init_sets_the_divisor_and_8n1() {
    let mut u = uart(FakeUart::new(Variant::Plain));
    assert!(u.init(3_686_400, 115_200));
    let f = u.regs();
    assert_eq!((f.dll, f.dlm, f.lcr, f.ier, f.mcr), (2, 0, 0x03, 0, 0x03));
    assert!(f.stray.is_empty(), "{:?}", f.stray);
}

#[test]
fn the_duo_uart_divisor_from_25_mhz() {
    // 25 MHz / (16 * 115200) = 13.56: divisor 14 (rounded, as U-Boot's ns16550_calc_divisor
    // does), 111607 baud, 3.1% slow; truncated it would be 13, 4.3% fast.
    let mut u = uart(FakeUart::new(Variant::DwApb));
    assert!(u.init(25_000_000, 115_200));
    assert_eq!((u.regs().dll, u.regs().dlm), (14, 0));
}

#[test]
fn designware_waits_for_usr_busy_before_lcr() {
    let mut fake = FakeUart::new(Variant::DwApb);
    fake.busy_reads = 50;
    let mut u = uart(fake);
    assert!(u.init(25_000_000, 115_200));
    let f = u.regs();
    assert_eq!(f.ignored_lcr, 0, "LCR written while USR.BUSY");
    assert!(f.usr_reads >= 50);
    assert_eq!((f.lcr, f.dll), (0x03, 14));
}

#[test]
fn designware_busy_receiver_is_cleared_through_the_fifos() {
    // USR.BUSY stays set until the FIFOs are cleared: the bounded wait gives up, the LCR write
    // is ignored, read back, and the FIFO clear lets the next try take.
    let mut fake = FakeUart::new(Variant::DwApb);
    fake.busy_until_fifo_clear = true;
    let mut u = uart(fake);
    assert!(u.init(25_000_000, 115_200));
    let f = u.regs();
    assert_eq!(f.ignored_lcr, 1);
    assert!(f.fcr_clears >= 2);
    assert_eq!((f.lcr, f.dll), (0x03, 14));
}

#[test]
fn designware_always_busy_is_bounded_and_reported() {
    let mut fake = FakeUart::new(Variant::DwApb);
    fake.always_busy = true;
    let mut u = uart(fake);
    assert!(!u.init(25_000_000, 115_200));
    let f = u.regs();
    // Every try at DLAB was ignored; 8N1 was what the boot loader left, so it reads back.
    assert_eq!(f.ignored_lcr, LCR_TRIES + 1);
    // The divisor latch never opened: DLL/DLM untouched; the console still runs at the boot
    // loader's rate.
    assert_eq!((f.dll, f.dlm), (0, 0));
    assert_eq!(f.lcr, 0x03);
    u.write_byte(b'x');
    assert_eq!(u.regs().sent.last(), Some(&b'x'));
}

#[test]
fn xscale_keeps_the_unit_enabled() {
    let mut u = uart(FakeUart::new(Variant::Xscale));
    assert!(u.init(14_857_000, 115_200));
    assert_eq!(u.regs().ier, IER_UUE, "IER must keep UUE, interrupts off");
    assert_eq!((u.regs().dll, u.regs().dlm), (8, 0));
    for &b in b"ok\n" {
        u.write_byte(b);
    }
    assert_eq!(u.regs().sent, b"ok\n");
    assert!(u.regs().lost.is_empty());
}

#[test]
fn xscale_as_plain_turns_the_unit_off() {
    // What the plain 16550 init does to a PXA UART: IER = 0 turns the unit off and the bytes
    // vanish; the variant exists because of this.
    let mut fake = FakeUart::new(Variant::Plain);
    fake.variant = Variant::Xscale;
    let mut u = Ns16550::from_regs(fake, Variant::Plain);
    u.init(14_857_000, 115_200);
    u.write_byte(b'x');
    assert_eq!(u.regs().lost, b"x");
}

#[test]
fn clock_zero_keeps_the_boot_loaders_divisor() {
    let mut fake = FakeUart::new(Variant::Xscale);
    (fake.dll, fake.dlm, fake.lcr) = (31, 0, 0x1B);
    let mut u = uart(fake);
    assert!(u.init(0, 115_200));
    let f = u.regs();
    assert_eq!((f.dll, f.dlm, f.lcr, f.ier), (31, 0, 0x03, IER_UUE));
}
