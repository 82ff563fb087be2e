//! The pin setups against a fake GPIO block: a RAM register file that models what the pins end
//! up as. Function select is plain storage. On the BCM2835 kind a pin's pull is latched from GPPUD
//! when its GPPUDCLK bit goes from 0 to 1, and the fake checks the sequence's timing (150 us of
//! the test's clock before the clock edge and before the release) and that both registers end at
//! 0; on the BCM2711 kind the pulls are the GPIO_PUP_PDN_CNTRL bits.

use super::*;
use crate::uart::Flow;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;

/// The fake register file; `now` is the test's clock in microseconds, advanced by `delay`.
struct FakeGpio<'a> {
    regs: [u32; GPIO_BLOCK_SIZE / 4],
    kind: GpioKind,
    now: &'a Cell<u64>,
    /// Latched pulls (BCM2835 kind), by pin.
    latched: [Option<Pull>; 54],
    gppud_at: u64,
    clocked_at: u64,
    barriers: usize,
    violations: Vec<String>,
}

impl<'a> FakeGpio<'a> {
    /// A block as the firmware might leave it: every function field and pull "something else".
    fn new(kind: GpioKind, now: &'a Cell<u64>) -> Self {
        let mut regs = [0u32; GPIO_BLOCK_SIZE / 4];
        for r in &mut regs[..6] {
            *r = 0x2492_4924; // every pin ALT0 (0b100) but the top bits
        }
        for r in &mut regs[PUP_PDN_CNTRL0 / 4..PUP_PDN_CNTRL0 / 4 + 4] {
            *r = 0xAAAA_AAAA; // every pin pulled down
        }
        Self {
            regs,
            kind,
            now,
            latched: [Some(Pull::Down); 54],
            gppud_at: 0,
            clocked_at: 0,
            barriers: 0,
            violations: Vec::new(),
        }
    }

    fn function(&self, pin: u8) -> u32 {
        self.regs[pin as usize / 10] >> (3 * (pin as u32 % 10)) & 7
    }

    fn pull(&self, pin: u8) -> Option<Pull> {
        match self.kind {
            GpioKind::Bcm2835 => self.latched[pin as usize],
            GpioKind::Bcm2711 => {
                let r = self.regs[PUP_PDN_CNTRL0 / 4 + pin as usize / 16];
                match r >> (2 * (pin as u32 % 16)) & 3 {
                    0 => Some(Pull::None),
                    1 => Some(Pull::Up),
                    2 => Some(Pull::Down),
                    _ => None,
                }
            }
        }
    }

    /// A write to GPPUDCLK0/1 (`bank`): latch the pins whose clock rises, check the timing.
    fn clock_write(&mut self, bank: usize, v: u32) {
        let old = self.regs[(GPPUDCLK0 / 4) + bank];
        let now = self.now.get();
        let rising = v & !old;
        if rising != 0 {
            if now < self.gppud_at + 150 {
                self.violations.push(format!(
                    "clock {bank} raised {} us after GPPUD",
                    now - self.gppud_at
                ));
            }
            let pull = match self.regs[GPPUD / 4] & 3 {
                0 => Some(Pull::None),
                1 => Some(Pull::Down),
                2 => Some(Pull::Up),
                _ => None,
            };
            for bit in 0..32 {
                if rising >> bit & 1 != 0 && bank * 32 + bit < 54 {
                    self.latched[bank * 32 + bit] = pull;
                }
            }
            self.clocked_at = now;
        }
        if old & !v != 0 && now < self.clocked_at + 150 {
            self.violations.push(format!(
                "clock {bank} released after {} us",
                now - self.clocked_at
            ));
        }
    }

    /// The pull sequence was finished: control and clocks back to 0.
    fn check_released(&self) {
        let r = &self.regs;
        assert_eq!(
            (r[GPPUD / 4], r[GPPUDCLK0 / 4], r[GPPUDCLK0 / 4 + 1]),
            (0, 0, 0)
        );
        assert!(self.violations.is_empty(), "{:?}", self.violations);
    }
}

impl Regs for FakeGpio<'_> {
    fn read32(&mut self, off: usize) -> u32 {
        assert!(
            off.is_multiple_of(4) && off < GPIO_BLOCK_SIZE,
            "read {off:#x}"
        );
        self.regs[off / 4]
    }

    fn write32(&mut self, off: usize, v: u32) {
        assert!(
            off.is_multiple_of(4) && off < GPIO_BLOCK_SIZE,
            "write {off:#x}"
        );
        match (self.kind, off) {
            (GpioKind::Bcm2835, GPPUD) => self.gppud_at = self.now.get(),
            (GpioKind::Bcm2835, 0x98 | 0x9c) => self.clock_write((off - GPPUDCLK0) / 4, v),
            (GpioKind::Bcm2711, 0x94..=0xa0) => self.violations.push(format!(
                "BCM2835 pull register {off:#x} written on a BCM2711"
            )),
            _ => {}
        }
        self.regs[off / 4] = v;
    }

    fn barrier(&mut self) {
        self.barriers += 1;
    }
}

/// A pin setup ended well: the pull sequence released (BCM2835 kind), no violation, a barrier
/// before the first access and after the last.
fn finished_cleanly(g: &FakeGpio, kind: GpioKind) {
    if kind == GpioKind::Bcm2835 {
        g.check_released();
    }
    assert!(g.violations.is_empty(), "{:?}", g.violations);
    assert_eq!(g.barriers, 2);
}

/// The functions of every pin.
fn functions(g: &FakeGpio) -> Vec<u32> {
    (0..54).map(|p| g.function(p)).collect()
}

#[test]
fn sd_pins_take_the_slot_off_the_wifi_group() {
    let now = Cell::new(0);
    let mut g = FakeGpio::new(GpioKind::Bcm2835, &now);
    // The firmware's state on a Pi 3: 34-39 on the Arasan (ALT3) for Wi-Fi, 48-53 on SDHOST (ALT0).
    for p in 34..=39 {
        set_function(&mut g, p, Function::Alt3);
    }
    let before = functions(&g);
    sd_on_emmc(&mut g, |us| now.set(now.get() + us as u64));
    for p in 34..=39 {
        assert_eq!(g.function(p), Function::Input as u32, "GPIO {p}");
    }
    for p in 48..=53 {
        assert_eq!(g.function(p), Function::Alt3 as u32, "GPIO {p}");
    }
    let after = functions(&g);
    for p in (0..34).chain(40..48) {
        assert_eq!(after[p], before[p], "GPIO {p} changed");
    }
    assert_eq!(g.pull(48), Some(Pull::None), "CLK");
    for p in 49..=53 {
        assert_eq!(g.pull(p), Some(Pull::Up), "GPIO {p}");
    }
    for p in 0..48 {
        assert_eq!(g.pull(p), Some(Pull::Down), "GPIO {p} pull changed");
    }
    g.check_released();
    assert_eq!(
        g.barriers, 2,
        "a barrier before the first access and after the last"
    );
}

#[test]
fn uart_pins_pull_rx_up_and_free_the_bluetooth_pins() {
    for kind in [GpioKind::Bcm2835, GpioKind::Bcm2711] {
        let now = Cell::new(0);
        let mut g = FakeGpio::new(kind, &now);
        // The firmware's Bluetooth routing: PL011 on 32/33 (ALT3).
        set_function(&mut g, 32, Function::Alt3);
        set_function(&mut g, 33, Function::Alt3);
        let before = functions(&g);
        uart0_on_14_15(&mut g, kind, |us| now.set(now.get() + us as u64));
        assert_eq!((g.function(14), g.function(15)), (4, 4), "{kind:?}: ALT0");
        assert_eq!((g.function(32), g.function(33)), (0, 0), "{kind:?}: inputs");
        assert_eq!(g.pull(14), Some(Pull::None), "{kind:?}: TXD");
        assert_eq!(g.pull(15), Some(Pull::Up), "{kind:?}: RXD");
        assert_eq!(g.pull(32), Some(Pull::None), "{kind:?}");
        assert_eq!(g.pull(33), Some(Pull::None), "{kind:?}");
        let after = functions(&g);
        for p in (0..54).filter(|p| ![14, 15, 32, 33].contains(p)) {
            assert_eq!(after[p], before[p], "{kind:?}: GPIO {p} changed");
            assert_eq!(
                g.pull(p as u8),
                Some(Pull::Down),
                "{kind:?}: GPIO {p} pull changed"
            );
        }
        finished_cleanly(&g, kind);
    }
}

#[test]
fn a_hurried_pull_sequence_is_caught_by_the_fake() {
    // The fake's own check: without the delays the clock edge comes too early.
    let now = Cell::new(0);
    let mut g = FakeGpio::new(GpioKind::Bcm2835, &now);
    set_pulls(&mut g, GpioKind::Bcm2835, &[15], Pull::Up, &mut |_| {});
    assert_eq!(g.violations.len(), 2, "{:?}", g.violations);
    assert_eq!(g.pull(15), Some(Pull::Up));
}

/// Route `pins` with `flow` on a fake of `kind`; returns the fake and the functions before.
fn route_link(
    kind: GpioKind,
    pins: LinkPins,
    flow: Flow,
    now: &Cell<u64>,
) -> (FakeGpio<'_>, Vec<u32>) {
    let mut g = FakeGpio::new(kind, now);
    let before = functions(&g);
    link_uart_pins(&mut g, pins, flow, |us| now.set(now.get() + us as u64));
    (g, before)
}

/// Only `changed` pins differ from `before`, in function and pull.
fn others_untouched(g: &FakeGpio, before: &[u32], changed: &[u8]) {
    let after = functions(g);
    for p in (0..54u8).filter(|p| !changed.contains(p)) {
        assert_eq!(after[p as usize], before[p as usize], "GPIO {p} changed");
        assert_eq!(g.pull(p), Some(Pull::Down), "GPIO {p} pull changed");
    }
}

#[test]
fn link_pins_follow_the_alternate_function_tables() {
    // (routing, GPIO block, function, [TX, RX, CTS, RTS]). The Pi 4's UART3 leaves the console's
    // GPIO 14/15 as they were (they are among the pins checked untouched); the Pi 3's mini UART
    // takes them.
    let cases = [
        (
            LinkPins::Bcm2711Uart3,
            GpioKind::Bcm2711,
            Function::Alt4,
            [4, 5, 6, 7],
        ),
        (
            LinkPins::Bcm2837MiniGpio14,
            GpioKind::Bcm2835,
            Function::Alt5,
            [14, 15, 16, 17],
        ),
    ];
    for (pins, kind, function, [tx, rx, cts, rts]) in cases {
        for flow in [Flow::None, Flow::RtsCts] {
            let now = Cell::new(0);
            let (g, before) = route_link(kind, pins, flow, &now);
            // TX and RTS without pull, RX and CTS pulled up.
            let routed: &[(u8, Pull)] = match flow {
                Flow::None => &[(tx, Pull::None), (rx, Pull::Up)],
                Flow::RtsCts => &[
                    (tx, Pull::None),
                    (rx, Pull::Up),
                    (cts, Pull::Up),
                    (rts, Pull::None),
                ],
            };
            for &(p, pull) in routed {
                assert_eq!(
                    g.function(p),
                    function as u32,
                    "{pins:?}, {flow:?}: GPIO {p}"
                );
                assert_eq!(g.pull(p), Some(pull), "{pins:?}, {flow:?}: GPIO {p}");
            }
            let changed: Vec<u8> = routed.iter().map(|&(p, _)| p).collect();
            others_untouched(&g, &before, &changed);
            finished_cleanly(&g, kind);
        }
    }
}

#[test]
fn a_link_without_pins_touches_nothing() {
    let now = Cell::new(0);
    let (g, before) = route_link(GpioKind::Bcm2835, LinkPins::None, Flow::RtsCts, &now);
    others_untouched(&g, &before, &[]);
    assert_eq!((g.barriers, now.get()), (0, 0));
}

#[test]
fn the_function_codes_are_the_guides() {
    // GPFSELn: 000 input, 001 output, 100 ALT0, 101 ALT1, 110 ALT2, 111 ALT3, 011 ALT4, 010 ALT5.
    let f = [
        Function::Alt0,
        Function::Alt1,
        Function::Alt2,
        Function::Alt3,
        Function::Alt4,
        Function::Alt5,
    ];
    assert_eq!(f.map(|f| f as u32), [4, 5, 6, 7, 3, 2]);
}
