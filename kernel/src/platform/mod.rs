//! The board, from its description in `boards/<name>.toml` (the constants in [`crate::board`]):
//! the [`Board`] trait says what a board provides, [`ThisBoard`] provides it from the constants,
//! and [`lmboot_main`] brings the board up on core 0 (console, RAM, heap, cores, card) and hands
//! over to the runtime's [`runtime::run::run`]. The `lmboot_*` entry points the architecture's
//! `boot.s` calls are here too.

mod card;
mod console;
mod dtb;
mod mailbox;
mod power;
mod sd;
mod time;
mod virtio;

pub use console::print;

use crate::arch::{Arch, Cpu};
use crate::board::{self, RamFrom};
use crate::heap;
use crate::smp::CorePool;
use card::Card;
use core::panic::PanicInfo;
use runtime::run::{Env, IoCoreHooks};

extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
}

/// What a board provides to the kernel.
pub trait Board {
    /// The board's name (`boards/<name>.toml`).
    const NAME: &'static str;
    /// Route the UART's pins and bring up the serial console.
    fn console_init();
    /// RAM as (base, size): from the device tree at `dtb`, the firmware, or the board file.
    fn ram(dtb: usize) -> (usize, usize);
    /// The card's block device, brought up.
    fn card() -> Result<Card, alloc::string::String>;
    /// Start the other cores into the worker pool; returns how many cores are expected online.
    fn start_cores() -> usize;
    /// Power off (or stop) with a status; never returns.
    fn exit(code: u32) -> !;
}

/// The board this kernel was built for.
#[derive(Debug, Clone, Copy)]
pub struct ThisBoard;

impl Board for ThisBoard {
    const NAME: &'static str = board::NAME;

    fn console_init() {
        if board::GPIO_BASE != 0 {
            use drivers::bcm2835::gpio::{uart0_on_14_15, GPIO_BLOCK_SIZE};
            // SAFETY: the board's GPIO block, device-mapped; nothing else touches it during
            // bring-up.
            let regs = unsafe { drivers::mmio::Mmio::new(board::GPIO_BASE, GPIO_BLOCK_SIZE) };
            uart0_on_14_15(
                &mut regs.with_barrier(Cpu::io_barrier),
                board::GPIO_KIND,
                time::wait_us,
            );
        }
        console::init();
    }

    fn ram(dtb: usize) -> (usize, usize) {
        let found = match board::RAM_FROM {
            // In x0/a1, or at the start of RAM where QEMU puts it for ELF kernels.
            RamFrom::Dtb => dtb::ram(dtb).or_else(|| dtb::ram(board::RAM_BASE)),
            RamFrom::Mailbox => match mailbox::open().arm_memory() {
                Ok((base, size)) => Some((base as u64, size as u64)),
                Err(e) => {
                    crate::println!("warning: {e}");
                    None
                }
            },
        };
        match found {
            Some((b, s)) => (b as usize, s as usize),
            None => {
                crate::println!(
                    "warning: RAM size unknown; assuming {} MiB",
                    board::RAM_SIZE_FALLBACK >> 20
                );
                (board::RAM_BASE, board::RAM_SIZE_FALLBACK)
            }
        }
    }

    fn card() -> Result<Card, alloc::string::String> {
        card::open()
    }

    fn start_cores() -> usize {
        let wanted = board::MAX_CORES.min(inference::parallel::MAX_WORKERS);
        let me = Cpu::core_id();
        1 + (0..wanted)
            .filter(|&c| c != me && Cpu::start_core(board::CORE_START, c))
            .count()
    }

    fn exit(code: u32) -> ! {
        power::exit(code)
    }
}

/// Core 0's Rust entry, called by `boot.s` (on aarch64 with the MMU and caches on).
#[no_mangle]
extern "C" fn lmboot_main(dtb_addr: usize, _core: usize) -> ! {
    ThisBoard::console_init();
    crate::println!(
        "\nlmboot {} on {}",
        env!("CARGO_PKG_VERSION"),
        ThisBoard::NAME
    );
    // The device tree, on boards whose firmware passes one (the Pi's is not read).
    let dt = if board::RAM_FROM == RamFrom::Dtb {
        dtb_addr
    } else {
        0
    };
    if let Some(hz) = dtb::timebase(dt) {
        time::set_timebase(hz);
    }
    let (ram_base, ram_size) = ThisBoard::ram(dt);
    // SAFETY: linker symbols; only their addresses are used.
    let (kstart, kend) = unsafe {
        (
            &__kernel_start as *const u8 as usize,
            &__kernel_end as *const u8 as usize,
        )
    };
    let ram_end = ram_base + ram_size;
    if kend >= ram_end {
        crate::println!("error: the kernel image ({kstart:#x}..{kend:#x}) does not fit in RAM ending at {ram_end:#x}");
        ThisBoard::exit(1);
    }
    // SAFETY: [kend, ram_end) is RAM after the image and the stacks, used by nothing else.
    unsafe { heap::init(kend, ram_end - kend) };
    crate::println!(
        "RAM {} MiB at {ram_base:#x}; kernel {} KiB; heap {} MiB",
        ram_size >> 20,
        (kend - kstart) >> 10,
        heap::free() >> 20
    );
    if let Some(line) = Cpu::detect_features(dtb::riscv_isa(dt)) {
        crate::println!("{line}");
    }
    let expected = ThisBoard::start_cores();
    let online = CorePool::wait_online(expected, 50_000_000);
    CorePool::set_active(online);
    crate::println!("cores: {online} online");
    match ThisBoard::card() {
        Ok(card) => go(card),
        Err(e) => {
            crate::println!("error: {e}");
            ThisBoard::exit(1)
        }
    }
}

/// Run on the card and power off with the result.
fn go(card: Card) -> ! {
    Cpu::core_init();
    let heap_free = || heap::free() as u64;
    let heap_high = || heap::high_water() as u64;
    let instructions = || Cpu::instructions();
    let env = Env {
        clock_ns: time::now_ns,
        heap_free: &heap_free,
        heap_high: &heap_high,
        instructions: Some((&instructions, Cpu::INSTRUCTION_COUNTER_BITS)),
        pool: &CorePool,
        set_cores: Some(&|n| CorePool::set_active(n.unwrap_or(usize::MAX))),
        raise_exception: Some(Cpu::raise_exception),
        io_core: Some(IoCoreHooks {
            start: CorePool::start_service,
            stop: CorePool::stop_service,
            wake: Cpu::wake,
        }),
        kernels: inference::Kernels::best(),
    };
    match runtime::run::run(card, &mut console::Serial, &env) {
        Ok(()) => {
            crate::println!("lmboot: done");
            ThisBoard::exit(0)
        }
        Err(e) => {
            crate::println!("\nerror: {e}");
            ThisBoard::exit(1)
        }
    }
}

/// Secondary cores: the worker loop.
#[no_mangle]
extern "C" fn lmboot_secondary(core: usize) -> ! {
    crate::smp::worker_loop(core)
}

/// A CPU exception (the trap entry in `boot.s` passes the architecture's fault registers): print
/// what happened and stop with status 2.
#[no_mangle]
extern "C" fn lmboot_trap(a: u64, b: u64, c: u64, d: u64) -> ! {
    let fault = Cpu::fault([a, b, c, d]);
    console::emergency(format_args!("\n*** {fault}\n"));
    ThisBoard::exit(2)
}

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    match info.location() {
        Some(l) => console::emergency(format_args!(
            "\n*** panic at {}:{}: {}\n",
            l.file(),
            l.line(),
            info.message()
        )),
        None => console::emergency(format_args!("\n*** panic: {}\n", info.message())),
    }
    ThisBoard::exit(3)
}
