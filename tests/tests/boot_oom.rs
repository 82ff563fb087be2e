//! Running out of heap on a board: QEMU `virt` (aarch64) given too little RAM for the default
//! model's tables stops with a message naming what was being allocated, the load step that asked
//! and the heap's used, free and high-water figures, and a non-zero status; never a silent hang.

mod common;

use common::boot::{boot, built, make_image};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(300);
/// RAM for the kernel, its stacks and a heap too small for the default model's tokenizer.
const MEM: &str = "8M";

#[test]
fn a_heap_too_small_names_what_was_being_allocated() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let mem = std::env::var("LMBOOT_OOM_MEM").unwrap_or(MEM.into());
    let img = make_image("virt-oom", &common::boot::once(4), &model);
    let (code, uart) = boot(b, &img, Some(&mem), &[], LIMIT);
    eprintln!("{uart}");
    assert_ne!(code, 0, "the run cannot succeed in {mem}");
    // Either a fallible allocation returned its error (printed with the heap's figures), or an
    // infallible one panicked (the panic handler names the size and the load step).
    let fallible = uart
        .lines()
        .any(|l| l.starts_with("error: ") && l.contains("out of memory allocating "));
    let infallible = uart
        .lines()
        .any(|l| l.starts_with("*** out of memory: ") && l.contains(" bytes asked for while "));
    assert!(fallible || infallible, "no out-of-memory message:\n{uart}");
    let figures = uart
        .lines()
        .find(|l| l.contains("heap: ") && l.contains(" used, ") && l.contains(" free, high-water "))
        .unwrap_or_else(|| panic!("no heap figures:\n{uart}"));
    let used: u64 = figures
        .split("heap: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("heap figures unreadable: {figures}"));
    assert!(used > 0, "{figures}");
    assert!(
        !uart.contains("--- output ---"),
        "generation must not start"
    );
}
