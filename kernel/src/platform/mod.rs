//! The board, from its description in `boards/<name>.toml` (the constants in [`crate::board`]):
//! [`lmboot_main`] brings the board up on core 0 (console, RAM, heap, cores, card) and hands over
//! to the runtime's [`runtime::run::run`] with [`ThisBoard`], the runtime's
//! [`Platform`] made from the constants. The `lmboot_*` entry points the architecture's
//! `boot.s` calls are here too.

mod card;
mod clock;
mod console;
mod dtb;
mod link;
mod mailbox;
mod power;
mod ram;
mod sd;
mod time;

pub use console::print;

use crate::arch::{Arch, Cpu};
use crate::board::{self, RamFrom};
use crate::heap;
use crate::smp::CorePool;
use alloc::string::String;
use card::Card;
use core::panic::PanicInfo;
use drivers::ram::{Block, RamBlocks};
use dtb::DtInfo;
use runtime::config::ArmClock;
use runtime::platform::{CardBus, Clocks, IoCoreHooks, Platform, RingLink};

extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
}

/// The board this kernel was built for, as the run sees it: the one [`Platform`] of the kernel.
/// It carries the card's bus, which the card reports once it is up.
#[derive(Debug, Clone, Copy)]
pub struct ThisBoard {
    card_bus: Option<CardBus>,
}

impl Platform for ThisBoard {
    type Pool = CorePool;
    fn clock(&self) -> fn() -> u64 {
        time::now_ns
    }
    fn heap_free(&self) -> u64 {
        heap::free() as u64
    }
    fn heap_high(&self) -> u64 {
        heap::high_water() as u64
    }
    fn pool(&self) -> &CorePool {
        &CorePool
    }
    fn kernels(&self) -> inference::Kernels {
        inference::Kernels::best()
    }
    fn board(&self) -> &'static str {
        board::NAME
    }
    fn exit(&self, code: u32) -> ! {
        power::exit(code)
    }
    fn instruction_counter(&self) -> Option<(fn() -> u64, u32)> {
        Some((Cpu::instructions, Cpu::INSTRUCTION_COUNTER_BITS))
    }
    fn set_cores(&self, cores: Option<usize>) -> Option<usize> {
        Some(CorePool::set_active(cores.unwrap_or(usize::MAX)))
    }
    fn raise_exception(&self) {
        Cpu::raise_exception()
    }
    fn io_core(&self) -> Option<IoCoreHooks> {
        Some(IoCoreHooks {
            start: CorePool::start_service,
            stop: CorePool::stop_service,
            wake: Cpu::wake,
        })
    }
    fn set_arm_clock(&self, policy: ArmClock) -> Option<String> {
        clock::set_arm_clock(policy)
    }
    fn ring_link(
        &self,
        place: u8,
        baud: Option<u32>,
    ) -> Option<Result<(RingLink, String), String>> {
        Some(link::open(place, baud))
    }
    fn card_bus(&self) -> Option<CardBus> {
        self.card_bus
    }
    fn clocks(&self) -> Option<Clocks> {
        Some(clock::clocks())
    }
    fn cpu_id(&self) -> Option<String> {
        Cpu::cpu_id()
    }
}

/// Route the UART's pins and bring up the serial console.
fn console_init() {
    if let Some(base) = board::GPIO_BASE {
        use drivers::bcm2835::gpio::{uart0_on_14_15, GPIO_BLOCK_SIZE};
        // SAFETY: the board's GPIO block, device-mapped; nothing else touches it during bring-up.
        let regs = unsafe { drivers::mmio::Mmio::new(base, GPIO_BLOCK_SIZE) };
        uart0_on_14_15(
            &mut regs.with_barrier(Cpu::io_barrier),
            board::GPIO_KIND,
            time::wait_us,
        );
    }
    console::init();
}

/// Start the other cores into the worker pool; returns how many cores are expected online.
fn start_cores() -> usize {
    let wanted = board::MAX_CORES.min(inference::parallel::MAX_WORKERS);
    let me = Cpu::core_id();
    1 + (0..wanted)
        .filter(|&c| c != me && Cpu::start_core(board::CORE_START, c))
        .count()
}

/// Core 0's Rust entry, called by `boot.s` (on aarch64 with the MMU and caches on).
#[no_mangle]
extern "C" fn lmboot_main(dtb_addr: usize, core: usize) -> ! {
    console_init();
    crate::println!("\nlmboot {} on {}", env!("CARGO_PKG_VERSION"), board::NAME);
    console::describe();
    CorePool::note_id(core);
    // U-Boot's `go` leaves no device tree in r2 (only argc and argv in r0 and r1).
    let dt = (board::RAM_FROM != RamFrom::SunxiDramc)
        .then(|| device_tree(dtb_addr))
        .flatten();
    if let Some(hz) = dt.as_ref().and_then(|d| d.timebase.or(d.timer_hz)) {
        time::set_timebase(hz);
    }
    if let Some(w) = dt.as_ref().and_then(|d| d.emmc2_dma) {
        sd::set_emmc2_dma(w);
    }
    let (ram, source) = ram::find(dt.as_ref());
    start_heap(&ram, source);
    let isa = dt.as_ref().and_then(|d| d.isa());
    if let Some(line) = Cpu::detect_features(isa, dt.as_ref().and_then(|d| d.cache_block)) {
        crate::println!("{line}");
    }
    let expected = start_cores();
    let online = CorePool::wait_online(expected, 50_000_000);
    CorePool::set_active(online);
    if CorePool::ids_ok(online) && online == 1 {
        crate::println!("cores: 1 online (id 0)");
    } else if CorePool::ids_ok(online) {
        crate::println!("cores: {online} online (ids 0-{})", online - 1);
    } else {
        crate::println!("cores: {online} online\nwarning: the cores' ids clash or changed since entry (MPIDR at EL1 reads VMPIDR_EL2)");
    }
    match card::open() {
        Ok(card) => go(card),
        Err(e) => {
            crate::println!("error: {e}");
            power::exit(1)
        }
    }
}

/// The device tree at `addr` (QEMU virt's ELF boots also leave one at the start of RAM); a
/// warning names what was wrong with a blob that is there but unreadable.
fn device_tree(addr: usize) -> Option<DtInfo> {
    let e = match dtb::read(addr) {
        Ok(dt) => return Some(dt),
        Err(e) => e,
    };
    if board::RAM_FROM == RamFrom::Dtb {
        if let Ok(dt) = dtb::read(board::RAM_BASE) {
            return Some(dt);
        }
    }
    match e {
        dtb::DtReadError::Absent | dtb::DtReadError::NotATree { .. } => {}
        e => crate::println!("warning: {e}"),
    }
    None
}

/// Give the heap the largest free range and print the RAM lines; stops the board if the kernel
/// is not inside the RAM found.
fn start_heap(ram: &RamBlocks, source: ram::Source) {
    // SAFETY: linker symbols; only their addresses are used.
    let (kstart, kend) = unsafe {
        (
            &__kernel_start as *const u8 as usize,
            &__kernel_end as *const u8 as usize,
        )
    };
    let kernel = Block::new(kstart as u64, kend as u64);
    let several = if ram.as_slice().len() > 1 {
        "; heap in the largest (the allocator takes one range)"
    } else {
        ""
    };
    crate::println!("RAM: {ram} from {source}{several}");
    let heap = match ram.heap(kernel) {
        Some(h) if ram.holds(kernel) => h,
        _ => {
            crate::println!(
                "error: the kernel image ({kstart:#x}..{kend:#x}) does not fit in that RAM"
            );
            power::exit(1)
        }
    };
    // SAFETY: `heap` is mapped RAM outside the kernel image and its stacks, used by nothing else
    // (the device tree, which it may cover, has been read).
    unsafe { heap::init(heap.start as usize, heap.len() as usize) };
    let first = ram.as_slice().first().map_or(0, |b| b.start);
    crate::println!(
        "RAM {} MiB at {first:#x}; kernel {} KiB; heap {} MiB",
        ram.total() >> 20,
        (kend - kstart) >> 10,
        heap::free() >> 20
    );
}

/// Run on the card and power off with the result.
fn go(mut card: Card) -> ! {
    Cpu::core_init();
    let board = ThisBoard {
        card_bus: card.bus(),
    };
    match runtime::run::run(card.device(), &mut console::Serial, &board) {
        Ok(()) => {
            crate::println!("lmboot: done");
            board.exit(0)
        }
        Err(e) => {
            crate::println!("\nerror: {e}");
            if e.out_of_memory() {
                crate::println!("{}", heap::figures());
            }
            board.exit(1)
        }
    }
}

/// Secondary cores: the worker loop (`core` is the id this core read at entry).
#[no_mangle]
extern "C" fn lmboot_secondary(core: usize) -> ! {
    crate::smp::worker_loop(core)
}

/// An IRQ (aarch64's `irq_entry` in `boot.s`, with the interrupted state saved): the ring
/// link's receive interrupt, the only one the kernel enables.
#[no_mangle]
extern "C" fn lmboot_irq() {
    link::on_irq()
}

/// A CPU exception (the trap entry in `boot.s` passes the architecture's fault registers): print
/// what happened and stop with status 2.
#[no_mangle]
extern "C" fn lmboot_trap(a: u64, b: u64, c: u64, d: u64) -> ! {
    let fault = Cpu::fault([a, b, c, d]);
    console::emergency(format_args!("\n*** {fault}\n"));
    power::exit(2)
}

/// True if the panic is alloc's report of a refused allocation (its message's first bytes,
/// formatted into a buffer on the stack: the heap is full).
fn is_alloc_failure(info: &PanicInfo<'_>) -> bool {
    const WANT: &[u8] = b"memory allocation of ";
    struct Head {
        buf: [u8; 21],
        len: usize,
    }
    impl core::fmt::Write for Head {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let n = s.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }
    let mut head = Head {
        buf: [0; 21],
        len: 0,
    };
    let _ = core::fmt::write(&mut head, format_args!("{}", info.message()));
    head.buf[..head.len] == *WANT
}

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    // An allocation that had no error path (a `Vec` grown, a `format!`) panics when the heap
    // refuses it (alloc's "memory allocation of N bytes failed"): say what was asked, which load
    // step asked, and how full the heap is. (A refusal that an error path handled earlier is not
    // this panic's cause, hence the look at the message.)
    let oom = is_alloc_failure(info);
    if let Some(bytes) = heap::failed_request().filter(|_| oom) {
        console::emergency(format_args!(
            "\n*** out of memory: {bytes} bytes asked for while {}; {}\n",
            inference::oom::stage().name(),
            heap::figures()
        ));
    }
    match info.location() {
        Some(l) => console::emergency(format_args!(
            "\n*** panic at {}:{}: {}\n",
            l.file(),
            l.line(),
            info.message()
        )),
        None => console::emergency(format_args!("\n*** panic: {}\n", info.message())),
    }
    power::exit(3)
}
