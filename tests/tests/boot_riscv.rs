//! Boot tests on QEMU `virt` riscv64 (OpenSBI, S-mode): the stand-ins for the SpacemiT K1 (8 harts,
//! RVV 1.0 at VLEN 256, Zicbom) and the Milk-V Duo's C906 (one hart, scalar, 64 MiB: the model
//! streams) print exactly what `lmboot-host` prints; a damaged card is a clear error with a
//! non-zero status; a trap is reported.

mod common;

use common::boot::{boot, card, generated, host_text, selftest_passed};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(600);
const BOARD: &str = "qemu-virt-k1";

/// The SpacemiT K1's CPU as QEMU stands in for it (`qemu-virt-k1`: eight harts, RVV 1.0 at VLEN
/// 256, Zicbom): the RVV kernels on every hart print the PC runner's text, and the Zicbom cache
/// operations the K1's SD host needs are accepted and keep what the CPU wrote.
#[test]
fn k1_stand_in_matches_the_pc_runner_with_rvv_on_eight_harts() {
    // RVV runs slowly under QEMU (it emulates strided loads and ordered reductions element by
    // element), so few tokens.
    let s = xtask::Settings {
        selftest: Some("full".into()),
        ..common::boot::once(8)
    };
    let (b, img) = card("qemu-virt-k1", "k1-once", &s);
    let want = host_text(b, &common::model_path(), &s);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(uart.contains("cores: 8 working"), "{uart}");
    assert!(uart.contains("(vector RVV 1.0)"), "{uart}");
    assert!(
        uart.contains("cache: Zicbom, 64-byte blocks; clean, invalidate and flush checked"),
        "{uart}"
    );
    assert_eq!(generated(&uart), want);
    assert!(uart.contains("kernels rvv"), "{uart}");
    selftest_passed(&uart, "qemu-virt-k1");
}

/// The Milk-V Duo's CPU as QEMU stands in for it (`qemu-virt-c906`: one T-Head C906 hart, its
/// scalar ISA, 64 MiB): the default model (98 MB) does not fit, so most of it streams through
/// the page cache every token, and the board prints exactly the PC runner's text. The C906's
/// cache operations (XTheadCmo) are accepted, once `sxstatus` says the firmware enabled them.
/// (QEMU has no XTheadVector: the kernels run scalar here; the `xtheadvector` set is checked
/// against scalar under T-Head's user-mode emulator.)
#[test]
fn c906_stand_in_streams_the_model_at_64_mib_and_matches_the_pc_runner() {
    let s = xtask::Settings {
        selftest: Some("full".into()),
        ..common::boot::once(6)
    };
    let (b, img) = card("qemu-virt-c906", "c906-once", &s);
    let want = host_text(b, &common::model_path(), &s);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(uart.contains("RAM 64 MiB at 0x80000000"), "{uart}");
    assert!(uart.contains("xtheadcmo"), "QEMU's C906 ISA string: {uart}");
    assert!(
        uart.contains("THEADISAEE on); clean, invalidate and flush checked"),
        "{uart}"
    );
    assert!(uart.contains("cores: 1 working"), "{uart}");
    assert!(uart.contains("kernels scalar"), "{uart}");
    assert_eq!(generated(&uart), want);
    // Streamed: every generated token after the first read tens of MB from the card.
    let per_token: u64 = uart
        .split("bytes read ")
        .nth(1)
        .and_then(|r| r.split(" per generated token").next())
        .and_then(|r| r.rsplit(", ").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no bytes-per-token figure: {uart}"));
    assert!(
        per_token > 40_000_000,
        "{per_token} bytes per token: the model should stream at 64 MiB"
    );
    selftest_passed(&uart, "qemu-virt-c906");
}

#[test]
fn riscv_bad_boot_sector_is_a_clear_error() {
    let s = xtask::Settings {
        n: 1,
        ..Default::default()
    };
    let (b, img) = card(BOARD, "riscv-badboot", &s);
    common::boot::break_boot_signature(&img);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    assert_eq!(code, 1, "{uart}");
    assert!(
        uart.contains("error: card: FAT: LBA 2048: boot signature"),
        "{uart}"
    );
}

/// A trap is reported with scause, sepc and stval, and QEMU exits non-zero.
#[test]
fn riscv_traps_are_reported() {
    let s = xtask::Settings {
        selftest: Some("exception".into()),
        n: 1,
        ..Default::default()
    };
    let (b, img) = card(BOARD, "riscv-selftest", &s);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    assert_eq!(code, 2, "{uart}");
    assert!(uart.contains("*** trap: exception 5: scause 0x5"), "{uart}");
    assert!(uart.contains("stval 0x8"), "{uart}");
}
