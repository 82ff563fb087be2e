//! Bring-up on core 0 and the hand-over to the portable run: UART pins and console, RAM (device tree
//! or VideoCore mailbox), heap, secondary cores parked, the card's block device, then
//! [`kernel::run::run`].

use crate::board::{self, BlockKind, CoreStart, RamFrom};
use crate::{console, dtb, heap, power};
use core::panic::PanicInfo;
use drivers::block::BlockDevice;

extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
    fn _start();
}

/// Nanoseconds since boot from the generic timer.
fn now_ns() -> u64 {
    let hz = crate::arch::counter_hz().max(1);
    (crate::arch::counter() as u128 * 1_000_000_000 / hz as u128) as u64
}

fn delay_us(us: u64) {
    let end = now_ns() + us * 1000;
    while now_ns() < end {
        core::hint::spin_loop();
    }
}

fn mailbox() -> drivers::bcm2835::mailbox::Mailbox {
    // SAFETY: MAILBOX_BASE is this board's mailbox, mapped as device memory; calls are made from core
    // 0 during bring-up only.
    unsafe {
        drivers::bcm2835::mailbox::Mailbox::new(board::MAILBOX_BASE, crate::arch::dcache_flush)
    }
}

/// Core 0's Rust entry, called by `boot.s` with the MMU and caches on.
#[no_mangle]
extern "C" fn lmboot_main(dtb_addr: usize, _core: usize) -> ! {
    if board::GPIO_BASE != 0 {
        // SAFETY: the board's GPIO block, device-mapped; nothing else touches it during bring-up.
        unsafe {
            drivers::bcm2835::gpio::uart0_on_14_15(board::GPIO_BASE, board::GPIO_KIND, |us| {
                delay_us(us as u64)
            })
        };
    }
    console::init();
    println!("\nlmboot {} on {}", env!("CARGO_PKG_VERSION"), board::NAME);

    let found = match board::RAM_FROM {
        // In x0, or at the start of RAM where QEMU puts it for ELF kernels.
        RamFrom::Dtb => {
            if let Some(hz) = dtb::timebase(dtb_addr) {
                crate::arch::set_timebase(hz);
            }
            dtb::ram(dtb_addr).or_else(|| dtb::ram(board::RAM_BASE))
        }
        RamFrom::Mailbox => match mailbox().arm_memory() {
            Ok((base, size)) => Some((base as u64, size as u64)),
            Err(e) => {
                println!("warning: {e}");
                None
            }
        },
    };
    let (ram_base, ram_size) = match found {
        Some((b, s)) => (b as usize, s as usize),
        None => {
            println!(
                "warning: RAM size unknown; assuming {} MiB",
                board::RAM_SIZE_FALLBACK >> 20
            );
            (board::RAM_BASE, board::RAM_SIZE_FALLBACK)
        }
    };
    // SAFETY: linker symbols; only their addresses are used.
    let (kstart, kend) = unsafe {
        (
            &__kernel_start as *const u8 as usize,
            &__kernel_end as *const u8 as usize,
        )
    };
    let ram_end = ram_base + ram_size;
    if kend >= ram_end {
        println!("error: the kernel image ({kstart:#x}..{kend:#x}) does not fit in RAM ending at {ram_end:#x}");
        power::exit(1);
    }
    // SAFETY: [kend, ram_end) is RAM after the image and the stacks, used by nothing else.
    unsafe { heap::init(kend, ram_end - kend) };
    println!(
        "RAM {} MiB at {ram_base:#x}; kernel {} KiB; heap {} MiB",
        ram_size >> 20,
        (kend - kstart) >> 10,
        heap::free() >> 20
    );

    crate::arch::detect_features(dtb_addr);
    start_cores();

    match board::BLOCK {
        BlockKind::VirtioMmio => match crate::virtio::VirtioBlock::probe() {
            Some(dev) => {
                println!("card: virtio-blk, {} MiB", dev.num_blocks() * 512 >> 20);
                // Transient device errors cost a retry, not the run.
                go(drivers::block::Retry::new(dev, 3))
            }
            None => {
                println!("error: no virtio block device found (is the card image attached?)");
                power::exit(1)
            }
        },
        BlockKind::Sdhci => match crate::sd::open(&mut mailbox()) {
            Ok(dev) => go(dev),
            Err(e) => {
                println!("error: card: {e}");
                power::exit(1)
            }
        },
    }
}

/// Start the other cores into the worker pool (they stay there; a job wakes them).
fn start_cores() {
    let wanted = board::MAX_CORES.min(inference::parallel::MAX_WORKERS);
    let expected = match board::CORE_START {
        CoreStart::SpinTable => {
            crate::arch::spin_table_release(wanted, _start as usize);
            wanted
        }
        // Cores the machine does not have (QEMU -smp) answer CPU_ON with an error.
        CoreStart::PsciHvc => {
            1 + (1..wanted)
                .filter(|&c| crate::arch::psci_cpu_on(c as u64, _start as usize) == 0)
                .count()
        }
        CoreStart::SbiHsm => {
            1 + (0..wanted)
                .filter(|&h| h != crate::arch::core_id() && crate::arch::start_hart(h))
                .count()
        }
    };
    let online = crate::smp::CorePool::wait_online(expected, 50_000_000);
    crate::smp::CorePool::set_active(online);
    println!("cores: {online} online");
}

/// Run on `dev` and power off with the result.
fn go<D: drivers::block::WriteBlocks + Send>(dev: D) -> !
where
    D::Error: Send,
{
    crate::arch::perf_counters_enable();
    let heap_free = || heap::free() as u64;
    let heap_high = || heap::high_water() as u64;
    let instructions = || crate::arch::perf_counters().0;
    let env = kernel::run::Env {
        clock_ns: now_ns,
        heap_free: &heap_free,
        heap_high: &heap_high,
        instructions: Some((&instructions, crate::arch::INSTRUCTION_COUNTER_BITS)),
        pool: &crate::smp::CorePool,
        set_cores: Some(&|n| crate::smp::CorePool::set_active(n.unwrap_or(usize::MAX))),
        raise_exception: Some(crate::arch::raise_exception),
        io_core: Some(kernel::run::IoCoreHooks {
            start: crate::smp::CorePool::start_service,
            stop: crate::smp::CorePool::stop_service,
            wake: crate::arch::sev,
        }),
        kernels: inference::Kernels::best(),
    };
    match kernel::run::run(dev, &mut UartConsole, &env) {
        Ok(()) => {
            println!("lmboot: done");
            power::exit(0)
        }
        Err(e) => {
            println!("\nerror: {e}");
            power::exit(1)
        }
    }
}

struct UartConsole;

impl kernel::run::Console for UartConsole {
    fn write_bytes(&mut self, b: &[u8]) {
        console::write_bytes(b)
    }
    fn read_byte(&mut self) -> Option<u8> {
        console::read_byte()
    }
}

/// Secondary cores: the worker loop.
#[no_mangle]
extern "C" fn lmboot_secondary(core: usize) -> ! {
    crate::smp::worker_loop(core)
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
    power::exit(3)
}

/// Microsecond time for drivers.
pub fn micros() -> u64 {
    now_ns() / 1000
}

/// Busy-wait `us` microseconds.
pub fn wait_us(us: u32) {
    delay_us(us as u64)
}
