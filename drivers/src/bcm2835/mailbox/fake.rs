//! A fake VideoCore behind fake mailbox registers, for the tests: it reads the property buffer the
//! driver posts, answers each tag from its settings like the firmware (or with a failure code, or
//! not at all), and records what it saw and any protocol violation (a write while MAIL1 is full, a
//! wrong channel or buffer address, a read of an empty MAIL0). The cache hooks it is given record
//! into the same per-thread event list, so a test sees the order of clean, post, answer and
//! invalidate.

extern crate std;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use alloc::{format, vec};
use core::cell::RefCell;
use std::thread_local;

use super::*;

/// One event of a call, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Clean(usize, usize),
    Invalidate(usize, usize),
    /// The driver wrote MAIL1 (the firmware took the buffer).
    Posted,
    /// The driver read the answer from MAIL0.
    Answered,
    Barrier,
}

thread_local! {
    static EVENTS: RefCell<Vec<Event>> = const { RefCell::new(Vec::new()) };
}

pub fn events() -> Vec<Event> {
    EVENTS.with(|e| e.borrow().clone())
}

fn record(e: Event) {
    EVENTS.with(|v| v.borrow_mut().push(e));
}

fn clean(addr: usize, len: usize) {
    record(Event::Clean(addr, len));
}

/// # Safety
/// None needed: it only records the call.
unsafe fn invalidate(addr: usize, len: usize) {
    record(Event::Invalidate(addr, len));
}

/// The firmware's settings and records.
#[derive(Debug, Default)]
pub struct Firmware {
    /// GET_CLOCK_RATE answers by clock id (absent: 0); SET_CLOCK_RATE changes them.
    pub clocks: BTreeMap<u32, u32>,
    /// GET_CLOCK_RATE_MEASURED answers.
    pub measured: BTreeMap<u32, u32>,
    /// GET_MAX_CLOCK_RATE answers (SET_CLOCK_RATE clamps to them).
    pub max: BTreeMap<u32, u32>,
    pub temp_mc: u32,
    pub max_temp_mc: u32,
    /// GET_THROTTLED's answer.
    pub throttled: u32,
    /// Buffer code to answer with (0 means [`CODE_SUCCESS`]).
    pub code: u32,
    /// Never answer.
    pub silent: bool,
    /// Tags answered with no value bytes, as QEMU answers the ones it does not implement.
    pub unknown: Vec<u32>,
    /// SET_POWER_STATE answers "no such device".
    pub no_power_device: bool,
    /// SET_GPIO_STATE's status answer.
    pub gpio_status: u32,
    /// MAIL1 reports FULL for this many polls before it takes a write.
    pub full_polls: u32,
    /// Every tag processed with its request values.
    pub log: Vec<(u32, Vec<u32>)>,
    pub powered: Vec<u32>,
    pub gpios: BTreeMap<u32, u32>,
    pub violations: Vec<String>,
}

impl Firmware {
    /// The answer to `tag` with request values `v`, or `None` for a tag it does not know.
    fn answer(&mut self, tag: u32, v: &[u32]) -> Option<Vec<u32>> {
        let get = |m: &BTreeMap<u32, u32>| m.get(&v[0]).copied().unwrap_or(0);
        Some(match tag {
            tags::GET_CLOCK_RATE => vec![v[0], get(&self.clocks)],
            tags::GET_CLOCK_RATE_MEASURED => vec![v[0], get(&self.measured)],
            tags::GET_MAX_CLOCK_RATE => vec![v[0], get(&self.max)],
            tags::SET_CLOCK_RATE => {
                let hz = v[1].min(get(&self.max));
                self.clocks.insert(v[0], hz);
                vec![v[0], hz]
            }
            tags::GET_TEMPERATURE => vec![0, self.temp_mc],
            tags::GET_MAX_TEMPERATURE => vec![0, self.max_temp_mc],
            tags::GET_THROTTLED => vec![self.throttled],
            tags::SET_POWER_STATE if self.no_power_device => vec![v[0], 2],
            tags::SET_POWER_STATE => {
                self.powered.push(v[0]);
                vec![v[0], v[1] & 1]
            }
            tags::SET_GPIO_STATE => {
                self.gpios.insert(v[0], v[1]);
                vec![self.gpio_status, v[1]]
            }
            tags::GET_ARM_MEMORY => vec![0, 0x3b40_0000],
            tags::GET_BOARD_REVISION => vec![0x00a0_2082],
            _ => return None,
        })
    }

    /// Process the buffer `b` in place, as the firmware does.
    fn process(&mut self, b: &mut [u32; BUFFER_WORDS]) {
        if b[1] != 0 {
            self.violations
                .push(format!("buffer code {:#x} in a request", b[1]));
        }
        b[1] = if self.code == 0 {
            CODE_SUCCESS
        } else {
            self.code
        };
        if b[1] != CODE_SUCCESS {
            return;
        }
        let end = (b[0] as usize / 4).min(BUFFER_WORDS);
        let mut i = 2;
        while i + 3 <= end && b[i] != 0 {
            let (tag, size) = (b[i], b[i + 1] as usize / 4);
            let values = &mut b[i + 3..(i + 3 + size).min(end)];
            self.log.push((tag, values.to_vec()));
            let answer = if self.unknown.contains(&tag) {
                None
            } else {
                self.answer(tag, values)
            };
            let len = answer.as_ref().map_or(0, |a| a.len().min(values.len()));
            if let Some(a) = answer {
                values[..len].copy_from_slice(&a[..len]);
            }
            b[i + 2] = (1 << 31) | (len * 4) as u32;
            i += 3 + size;
        }
    }
}

/// The fake mailbox registers.
#[derive(Debug)]
pub struct FakeMailbox {
    pub fw: Rc<RefCell<Firmware>>,
    buffer: &'static PropertyBuffer,
    answers: VecDeque<u32>,
    full_left: u32,
}

impl Regs for FakeMailbox {
    fn read32(&mut self, off: usize) -> u32 {
        match off {
            MAIL1_STATUS if self.full_left > 0 => {
                self.full_left -= 1;
                FULL
            }
            MAIL1_STATUS => 0,
            MAIL0_STATUS if self.answers.is_empty() => EMPTY,
            MAIL0_STATUS => 0,
            MAIL0_READ => match self.answers.pop_front() {
                Some(v) => {
                    record(Event::Answered);
                    v
                }
                None => {
                    self.fw
                        .borrow_mut()
                        .violations
                        .push("read of an empty MAIL0".into());
                    0
                }
            },
            _ => {
                self.fw
                    .borrow_mut()
                    .violations
                    .push(format!("read of {off:#x}"));
                0
            }
        }
    }

    fn write32(&mut self, off: usize, v: u32) {
        let mut fw = self.fw.borrow_mut();
        if off != MAIL1_WRITE {
            fw.violations.push(format!("write of {off:#x}"));
            return;
        }
        if self.full_left > 0 {
            fw.violations.push("MAIL1 written while full".into());
        }
        record(Event::Posted);
        let addr = self.buffer.addr() as u32;
        if v & 0xF != CHANNEL || v & !0xF != addr & !0xF {
            fw.violations.push(format!(
                "posted {v:#x}, buffer {addr:#x} channel 8 expected"
            ));
        }
        let mut words = self.buffer.load();
        fw.process(&mut words);
        self.buffer.store(&words);
        if !fw.silent {
            self.answers.push_back(v);
        }
        self.full_left = fw.full_polls;
    }

    fn barrier(&mut self) {
        record(Event::Barrier);
    }
}

/// A mailbox over a fake firmware set up by `fw`, with its own buffer; the event list of this
/// thread starts empty.
pub fn mailbox(fw: Firmware) -> (Mailbox<FakeMailbox>, Rc<RefCell<Firmware>>) {
    EVENTS.with(|e| e.borrow_mut().clear());
    let buffer: &'static PropertyBuffer = alloc::boxed::Box::leak(alloc::boxed::Box::default());
    let full_left = fw.full_polls;
    let fw = Rc::new(RefCell::new(fw));
    let regs = FakeMailbox {
        fw: fw.clone(),
        buffer,
        answers: VecDeque::new(),
        full_left,
    };
    let cache = CacheOps { clean, invalidate };
    // SAFETY: fake registers; the buffer is this mailbox's alone; the hooks only record.
    let mb = unsafe { Mailbox::new(regs, buffer, cache) };
    (mb, fw)
}
