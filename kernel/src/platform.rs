//! Bring-up on core 0 and the hand-over to the portable run.

use crate::{board, console, dtb, heap, power, virtio};
use core::panic::PanicInfo;

extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
}

/// Core 0's Rust entry, called by `boot.s` with the MMU and caches on.
#[no_mangle]
extern "C" fn lmboot_main(dtb_addr: usize, _core: usize) -> ! {
    console::init();
    println!("\nlmboot {} on {}", env!("CARGO_PKG_VERSION"), board::NAME);

    // RAM: from the device tree (in x0, or at the start of RAM where QEMU puts it for ELF kernels),
    // else the board's fallback.
    let found = dtb::ram(dtb_addr).or_else(|| dtb::ram(board::RAM_BASE));
    let (ram_base, ram_size) = match found {
        Some((b, s)) => (b as usize, s as usize),
        None => {
            println!(
                "warning: no RAM size in the device tree; assuming {} MiB",
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

    let Some(dev) = virtio::VirtioBlock::probe() else {
        println!("error: no virtio block device found (is the card image attached?)");
        power::exit(1);
    };
    use drivers::block::BlockDevice;
    println!("card: virtio-blk, {} MiB", dev.num_blocks() * 512 >> 20);

    crate::arch::perf_counters_enable();
    let hz = crate::arch::counter_hz().max(1);
    let clock = move || (crate::arch::counter() as u128 * 1_000_000_000 / hz as u128) as u64;
    let heap_free = || heap::free() as u64;
    let heap_high = || heap::high_water() as u64;
    let instructions = || crate::arch::perf_counters().0;
    let env = kernel::run::Env {
        clock_ns: &clock,
        heap_free: &heap_free,
        heap_high: &heap_high,
        // PMEVCNTR0_EL0 is 32 bits wide on ARMv8.0 cores.
        instructions: Some((&instructions, 32)),
        pool: &inference::parallel::SingleThread,
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
}

/// Secondary cores (not started yet).
#[no_mangle]
extern "C" fn lmboot_secondary(_core: usize) -> ! {
    loop {
        crate::arch::wait();
    }
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
