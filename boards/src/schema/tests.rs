use super::*;

fn boards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn every_board() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(boards_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && !p.ends_with("Cargo.toml"))
        .collect();
    v.sort();
    v
}

fn virt_text() -> String {
    std::fs::read_to_string(boards_dir().join("qemu-virt-aarch64.toml")).unwrap()
}

#[test]
fn every_board_parses_and_passes_its_checks() {
    let all = every_board();
    assert!(all.len() >= 4, "{all:?}");
    for p in all {
        let b = load(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.file_stem().unwrap().to_str(), Some(b.name.as_str()));
        let k = b.kernel_constants(true, 0x8_0000);
        assert!(
            k.contains(&format!("pub const NAME: &str = {:?};", b.name)),
            "{k}"
        );
        assert_eq!(k.matches("    Region {").count(), b.memory.len());
        assert!(b.linker_symbols(0x8_0000).contains("STACK_SIZE = 0x80000;"));
    }
}

#[test]
fn a_misspelt_key_is_an_error_naming_it() {
    let text = virt_text().replace("max_cores", "max_core");
    let e = parse(&text).unwrap_err();
    assert!(e.contains("unknown field `max_core`"), "{e}");
    let text = virt_text().replace("[uart]\n", "[uart]\nbaud = 9600\n");
    let e = parse(&text).unwrap_err();
    assert!(e.contains("unknown field `baud`"), "{e}");
}

#[test]
fn a_missing_key_is_an_error_naming_it() {
    let text: String = virt_text()
        .lines()
        .filter(|l| !l.starts_with("load_address"))
        .map(|l| format!("{l}\n"))
        .collect();
    let e = parse(&text).unwrap_err();
    assert!(e.contains("missing field `load_address`"), "{e}");
}

#[test]
fn a_wrong_type_or_kind_is_an_error_naming_the_key() {
    let e = parse(&virt_text().replace("max_cores = 4", "max_cores = \"four\"")).unwrap_err();
    assert!(e.contains("max_cores"), "{e}");
    let e = parse(&virt_text().replace("kind = \"pl011\"", "kind = \"pl012\"")).unwrap_err();
    assert!(
        e.contains("unknown variant `pl012`") && e.contains("ns16550"),
        "{e}"
    );
}

#[test]
fn rules_across_keys_are_checked() {
    let e = parse(&virt_text().replace("core_start = \"psci-hvc\"", "core_start = \"sbi-hsm\""))
        .unwrap_err();
    assert_eq!(e, "core_start = \"sbi-hsm\" is not a method of aarch64");
    let e = parse(&virt_text().replace("stride = 0x200\n", "")).unwrap_err();
    assert!(e.contains("needs base, stride and count"), "{e}");
    let e = parse(&virt_text().replace("end = 0x4000_0000\n", "end = 0x5000_0000\n")).unwrap_err();
    assert!(e.contains("in order and apart"), "{e}");
    let rpi4 = std::fs::read_to_string(boards_dir().join("rpi4.toml")).unwrap();
    let e = parse(&rpi4.replace("clock_ids = [12, 1]", "clock_ids = [12]")).unwrap_err();
    assert!(e.contains("one id per base (2)"), "{e}");
}

#[test]
fn the_boot_window_and_the_pi_cards_are_checked() {
    let rpi3 = std::fs::read_to_string(boards_dir().join("rpi3.toml")).unwrap();
    let b = parse(&rpi3).unwrap();
    assert_eq!(
        (b.ram_from, b.ram_size_fallback),
        (RamFrom::DtbThenMailbox, 448 << 20)
    );
    let card = b.card.unwrap();
    assert!(card.dtbs.contains(&"bcm2837-rpi-zero-2-w.dtb".to_string()));
    assert!(card.config_txt.unwrap().contains("upstream_kernel=1"));
    for bad in ["0x1c08_0000", "0x4000_0000", "0x0"] {
        let t = rpi3.replace(
            "ram_size_fallback = 0x1c00_0000",
            &format!("ram_size_fallback = {bad}"),
        );
        let e = parse(&t).unwrap_err();
        assert!(
            e.contains("whole 2 MiB blocks inside one normal"),
            "{bad}: {e}"
        );
    }
    let e = parse(&virt_text().replace("load_address = 0x4020_0000", "load_address = 0x5000_0000"))
        .unwrap_err();
    assert!(e.contains("load_address = 0x50000000 lies outside"), "{e}");
    let rpi4 = std::fs::read_to_string(boards_dir().join("rpi4.toml")).unwrap();
    assert!(rpi4.contains("arm_peri_high=0"));
    let e = parse(&rpi4.replace("arm_peri_high=0", "arm_peri_high=1")).unwrap_err();
    assert!(e.contains("peripherals low"), "{e}");
}

#[test]
fn the_armv7a_boards_and_their_rules() {
    let rpi2 = board_text("rpi2");
    let b = parse(&rpi2).unwrap();
    assert_eq!(
        (b.arch, b.core_start),
        (Arch::Armv7a, CoreStart::Bcm2836Mailbox)
    );
    assert_eq!(b.card.unwrap().kernel, "kernel7.img");
    let e = parse(&rpi2.replace(
        "core_start = \"bcm2836-mailbox\"",
        "core_start = \"psci-hvc\"",
    ))
    .unwrap_err();
    assert_eq!(e, "core_start = \"psci-hvc\" is not a method of armv7a");
    let h3 = board_text("orangepi-h3");
    let b = parse(&h3).unwrap();
    assert_eq!((b.uart.stride, b.ram_from), (4, RamFrom::SunxiDramc));
    assert_eq!(b.qemu.as_ref().map(|q| q.kernel), Some(KernelFormat::UBoot));
    let card = b.card.unwrap();
    assert_eq!(card.u_boot.as_deref(), Some("orangepi_zero"));
    assert!(card.boot_script.unwrap().contains("go {load_address}"));
    let e = parse(&h3.replace("stride = 4", "stride = 2")).unwrap_err();
    assert!(e.contains("[uart] stride = 2: must be 1 or 4"), "{e}");
    let e = parse(&h3.replace("ccu = 0x01c2_0000\n", "")).unwrap_err();
    assert!(e.contains("needs ccu"), "{e}");
    let e = parse(&h3.replace("core_start = \"sunxi-cpucfg\"", "core_start = \"sbi-hsm\""))
        .unwrap_err();
    assert!(e.contains("not a method of armv7a"), "{e}");
}

#[test]
fn load_names_the_file() {
    let dir = std::env::temp_dir().join(format!("lmboot-boards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.toml");
    std::fs::write(&p, virt_text().replace("exit =", "exitt =")).unwrap();
    let e = load(&p).unwrap_err();
    assert!(
        e.starts_with(&format!("{}: ", p.display())) && e.contains("exitt"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `text` with its `[ring_uart]` table's `key = ...` line replaced by `line` (removed if empty).
fn with_ring_line(text: &str, key: &str, line: &str) -> String {
    let start = text.find("[ring_uart]\n").unwrap();
    let at = start + text[start..].find(&format!("\n{key} =")).unwrap() + 1;
    let end = at + text[at..].find('\n').unwrap() + 1;
    let line = if line.is_empty() {
        String::new()
    } else {
        format!("{line}\n")
    };
    format!("{}{line}{}", &text[..at], &text[end..])
}

fn board_text(name: &str) -> String {
    std::fs::read_to_string(boards_dir().join(format!("{name}.toml"))).unwrap()
}

#[test]
fn the_ring_uart_is_emitted_as_constants() {
    let cases = [
        (
            "qemu-virt-aarch64",
            "Some(0x9040000)",
            "Pl011",
            "24000000",
            "None",
            "None",
        ),
        (
            "rpi4",
            "Some(0xfe201600)",
            "Pl011",
            "48000000",
            "Bcm2711Uart3",
            "RtsCts",
        ),
        (
            "rpi3",
            "Some(0x3f215040)",
            "Mini",
            "250000000",
            "Bcm2837MiniGpio14",
            "RtsCts",
        ),
        // No [ring_uart]: no base and the rest inert.
        ("qemu-virt-riscv64", "None", "Pl011", "0", "None", "None"),
    ];
    for (name, base, kind, clock, pins, flow) in cases {
        let b = parse(&board_text(name)).unwrap();
        assert_eq!(b.ring_uart.is_some(), base != "None", "{name}");
        let k = b.kernel_constants(false, 0x8_0000);
        for line in [
            format!("pub const RING_UART_BASE: Option<usize> = {base};"),
            format!("pub const RING_UART_KIND: drivers::uart::LinkKind = drivers::uart::LinkKind::{kind};"),
            format!("pub const RING_UART_CLOCK_HZ: u32 = {clock};"),
            format!("pub const RING_UART_PINS: drivers::bcm2835::gpio::LinkPins = drivers::bcm2835::gpio::LinkPins::{pins};"),
            format!("pub const RING_UART_FLOW: drivers::uart::Flow = drivers::uart::Flow::{flow};"),
        ] {
            assert!(k.contains(&line), "{name}: {line}\n{k}");
        }
    }
}

#[test]
fn ring_uart_keys_are_checked_like_the_others() {
    let virt = virt_text();
    let e = parse(&virt.replace("[ring_uart]\n", "[ring_uart]\nbaud = 921600\n")).unwrap_err();
    assert!(e.contains("unknown field `baud`"), "{e}");
    for key in ["kind", "base", "clock_hz", "pins", "flow"] {
        let e = parse(&with_ring_line(&virt, key, "")).unwrap_err();
        assert!(e.contains(&format!("missing field `{key}`")), "{key}: {e}");
    }
    let e = parse(&with_ring_line(&virt, "kind", "kind = \"ns16550\"")).unwrap_err();
    assert!(
        e.contains("unknown variant `ns16550`") && e.contains("mini"),
        "{e}"
    );
    let e = parse(&with_ring_line(&virt, "pins", "pins = \"bcm2711-uart5\"")).unwrap_err();
    assert!(
        e.contains("unknown variant `bcm2711-uart5`") && e.contains("bcm2837-mini-14-15"),
        "{e}"
    );
    let e = parse(&with_ring_line(&virt, "flow", "flow = \"rts-cts\"")).unwrap_err();
    assert!(
        e.contains("unknown variant `rts-cts`") && e.contains("rtscts"),
        "{e}"
    );
}

#[test]
fn ring_uart_rules_across_keys_are_checked() {
    let virt = virt_text();
    for base in ["0x0900_0000", "0"] {
        let e = parse(&with_ring_line(&virt, "base", &format!("base = {base}"))).unwrap_err();
        assert!(e.contains("must be a UART other than the console"), "{e}");
    }
    let e = parse(&with_ring_line(&virt, "clock_hz", "clock_hz = 0")).unwrap_err();
    assert!(e.contains("clock_hz = 0"), "{e}");
    // Pins of a Pi on a board without a GPIO block.
    let e = parse(&with_ring_line(&virt, "pins", "pins = \"bcm2711-uart3\"")).unwrap_err();
    assert_eq!(
        e,
        "[ring_uart] pins = \"bcm2711-uart3\" needs kind = \"pl011\", gpio_base and gpio_kind = \"bcm2711\""
    );
    // The mini UART's pins on a Pi 4, a PL011 on the Pi 3's mini UART pins.
    let rpi4 = board_text("rpi4");
    let e = parse(&with_ring_line(
        &rpi4,
        "pins",
        "pins = \"bcm2837-mini-14-15\"",
    ))
    .unwrap_err();
    assert!(e.contains("needs kind = \"mini\""), "{e}");
    let e = parse(&with_ring_line(
        &board_text("rpi3"),
        "kind",
        "kind = \"pl011\"",
    ))
    .unwrap_err();
    assert!(e.contains("gpio_kind = \"bcm2835\""), "{e}");
    // Any UART may go without pin routing.
    let b = parse(&with_ring_line(&rpi4, "pins", "pins = \"none\"")).unwrap();
    assert_eq!(b.ring_uart.unwrap().pins, LinkPins::None);
}

#[test]
fn the_link_interrupt_and_its_controller_are_emitted_as_constants() {
    let cases = [
        (
            "qemu-virt-aarch64",
            "Some(40)",
            "Some(boards::IrqController::GicV2 { dist: 0x8000000, cpu: 0x8010000 })",
        ),
        (
            "rpi4",
            "Some(153)",
            "Some(boards::IrqController::GicV2 { dist: 0xff841000, cpu: 0xff842000 })",
        ),
        (
            "rpi3",
            "Some(29)",
            "Some(boards::IrqController::Bcm2836 { armctrl: 0x3f00b200, local: 0x40000000 })",
        ),
        ("qemu-virt-riscv64", "None", "None"),
    ];
    for (name, irq, gic) in cases {
        let k = parse(&board_text(name))
            .unwrap()
            .kernel_constants(false, 0x8_0000);
        for line in [
            format!("pub const RING_UART_IRQ: Option<u32> = {irq};"),
            format!("pub const IRQ_CONTROLLER: Option<boards::IrqController> = {gic};"),
        ] {
            assert!(k.contains(&line), "{name}: {line}\n{k}");
        }
    }
}

#[test]
fn the_link_interrupt_rules_are_checked() {
    let virt = virt_text();
    for id in [31, 1020] {
        let e = parse(&with_ring_line(&virt, "irq", &format!("irq = {id}"))).unwrap_err();
        assert!(
            e.contains(&format!("irq = {id}")) && e.contains("32 to 1019"),
            "{e}"
        );
    }
    let no_gic = virt.replace(
        "[irq]\nkind = \"gicv2\"\ndist_base = 0x0800_0000\ncpu_base = 0x0801_0000\n",
        "",
    );
    assert_ne!(no_gic, virt);
    let e = parse(&no_gic).unwrap_err();
    assert_eq!(
        e,
        "[ring_uart] irq = 40 needs an [irq] table (the interrupt controller)"
    );
    // Without the interrupt the link is polled.
    let b = parse(&with_ring_line(&no_gic, "irq", "")).unwrap();
    assert_eq!(b.ring_uart.unwrap().irq, None);
    let e = parse(&virt.replace("cpu_base = 0x0801_0000", "cpu_base = 0x0800_0000")).unwrap_err();
    assert_eq!(e, "[irq] kind = \"gicv2\" needs dist_base and cpu_base (two different blocks, neither 0) and no other base");
    let e = parse(&virt.replace("kind = \"gicv2\"", "kind = \"bcm2836\"")).unwrap_err();
    assert!(e.contains("needs armctrl_base and local_base"), "{e}");
    let rpi3 = board_text("rpi3");
    let e = parse(&with_ring_line(&rpi3, "irq", "irq = 64")).unwrap_err();
    assert!(
        e.contains("irq = 64: a BCM2835 GPU interrupt is 0 to 63"),
        "{e}"
    );
    let e = parse(&virt.replace("kind = \"gicv2\"", "kind = \"gicv3\"")).unwrap_err();
    assert!(e.contains("unknown variant `gicv3`"), "{e}");
}

#[test]
fn a_non_pi_sdhci_host_and_its_clock_are_emitted_as_constants() {
    let duo = load(&boards_dir().join("milkv-duo.toml")).unwrap();
    let k = duo.kernel_constants(false, 0x8_0000);
    assert!(
        k.contains("pub const BLOCK_HOST: Option<boards::SdhciHost> = Some(boards::SdhciHost::DwcmshcCv18xx);"),
        "{k}"
    );
    assert!(
        k.contains("pub const BLOCK_BASE_CLOCK_HZ: u32 = 375000000;"),
        "{k}"
    );
    assert!(
        k.contains("ns16550::Variant = drivers::uart::ns16550::Variant::DwApb;"),
        "{k}"
    );
    let k1 = load(&boards_dir().join("spacemit-k1.toml")).unwrap();
    let k = k1.kernel_constants(false, 0x8_0000);
    assert!(k.contains("Some(boards::SdhciHost::SpacemitK1)"), "{k}");
    assert!(
        k.contains("ns16550::Variant = drivers::uart::ns16550::Variant::Xscale;"),
        "{k}"
    );
    // The Pi's: no host, the mailbox's clock.
    let k = load(&boards_dir().join("rpi4.toml"))
        .unwrap()
        .kernel_constants(false, 0x8_0000);
    assert!(
        k.contains("pub const BLOCK_HOST: Option<boards::SdhciHost> = None;"),
        "{k}"
    );
    assert!(k.contains("Variant::Plain;"), "{k}");
}

#[test]
fn sdhci_host_rules_name_the_key() {
    let duo = board_text("milkv-duo");
    let e = parse(&duo.replace("base_clock_hz = 375_000_000\n", "")).unwrap_err();
    assert!(
        e.contains("needs base_clock_hz") && e.contains("dwcmshc-cv18xx"),
        "{e}"
    );
    let e = parse(&duo.replace("base_clock_hz = 375_000_000", "base_clock_hz = 0")).unwrap_err();
    assert!(e.contains("base_clock_hz = 0"), "{e}");
    let e = parse(&duo.replace("host = \"dwcmshc-cv18xx\"", "host = \"dwcmshc\"")).unwrap_err();
    assert!(
        e.contains("unknown variant `dwcmshc`") && e.contains("spacemit-k1"),
        "{e}"
    );
    let e = parse(&duo.replace("base = 0x0431_0000", "bases = [0x0431_0000]")).unwrap_err();
    assert!(e.contains("needs base (one controller; no bases)"), "{e}");
    let e = parse(&duo.replace("[block]\n", "[block]\nclock_ids = [1]\n")).unwrap_err();
    assert!(e.contains("not clock_ids or sd_clock_id"), "{e}");
    let e = parse(&duo.replace("max_cores = 1\n", "max_cores = 1\nsd_clock_id = 1\n")).unwrap_err();
    assert!(e.contains("not clock_ids or sd_clock_id"), "{e}");
    // A Pi's sdhci takes no base_clock_hz; other kinds take neither key.
    let rpi4 = board_text("rpi4");
    let e = parse(&rpi4.replace(
        "clock_ids = [12, 1]",
        "clock_ids = [12, 1]\nbase_clock_hz = 1",
    ))
    .unwrap_err();
    assert!(
        e.contains("base_clock_hz is for an sdhci host other than"),
        "{e}"
    );
    let e = parse(&rpi4.replace(
        "clock_ids = [12, 1]",
        "clock_ids = [12, 1]\nhost = \"spacemit-k1\"",
    ))
    .unwrap_err();
    assert!(
        e.contains("host = \"spacemit-k1\" is a riscv64 SoC's, not aarch64's"),
        "{e}"
    );
    let orange = board_text("orangepi-h3");
    let e = parse(&orange.replace(
        "ccu = 0x01c2_0000",
        "ccu = 0x01c2_0000\nhost = \"spacemit-k1\"",
    ))
    .unwrap_err();
    assert!(
        e.contains("host and base_clock_hz are for kind = \"sdhci\""),
        "{e}"
    );
}

#[test]
fn uart_variants_need_a_16550_on_words() {
    let duo = board_text("milkv-duo");
    let e = parse(&duo.replace("stride = 4\n", "")).unwrap_err();
    assert!(
        e.contains("variant = \"dw-apb\" needs kind = \"ns16550\" and stride = 4"),
        "{e}"
    );
    let e = parse(&duo.replace("variant = \"dw-apb\"", "variant = \"pxa\"")).unwrap_err();
    assert!(
        e.contains("unknown variant `pxa`") && e.contains("xscale"),
        "{e}"
    );
    let k1 = load(&boards_dir().join("spacemit-k1.toml")).unwrap();
    assert!(k1
        .kernel_constants(false, 0)
        .contains("pub const UART_CLOCK_HZ: u32 = 0;"));
    let e = parse(&virt_text().replace("clock_hz = 24_000_000", "clock_hz = 0")).unwrap_err();
    assert!(
        e.contains("clock_hz = 0 (keep the boot loader's divisor)"),
        "{e}"
    );
    let e = parse(&virt_text().replace("[uart]\n", "[uart]\nvariant = \"xscale\"\n")).unwrap_err();
    assert!(
        e.contains("variant = \"xscale\" needs kind = \"ns16550\""),
        "{e}"
    );
}

#[test]
fn the_pi_cards_run_sdhost_with_the_arasan_as_the_fallback() {
    for name in ["rpi3.toml", "rpi2.toml"] {
        let text = std::fs::read_to_string(boards_dir().join(name)).unwrap();
        let b = parse(&text).unwrap();
        assert_eq!(b.block.kind, BlockKind::Sdhost, "{name}");
        assert_eq!(
            (b.block.base, b.block.dma),
            (Some(0x3f20_2000), Some(0x3f00_7000))
        );
        let k = b.kernel_constants(true, 0x1_0000);
        assert!(
            k.contains("BlockKind::Sdhost")
                && k.contains("BLOCK_DMA: Option<usize> = Some(0x3f007000)"),
            "{k}"
        );
        // The fallback the board file's comment names: the Arasan on sdhci, by PIO.
        let arasan = text.replace(
            "kind = \"sdhost\"\nbase = 0x3f20_2000\ndma = 0x3f00_7000\n",
            "kind = \"sdhci\"\nbases = [0x3f30_0000]\n",
        );
        let b = parse(&arasan).unwrap();
        assert_eq!(b.block.kind, BlockKind::Sdhci, "{name}");
        let k = b.kernel_constants(true, 0x1_0000);
        assert!(k.contains("0x3f300000"), "{k}");
        assert!(k.contains("BLOCK_DMA: Option<usize> = None"), "{k}");
        // dma is sdhost's alone; sdhost needs its base.
        let e = parse(&arasan.replace(
            "bases = [0x3f30_0000]\n",
            "bases = [0x3f30_0000]\ndma = 0x3f00_7000\n",
        ))
        .unwrap_err();
        assert!(e.contains("[block] dma is for kind = \"sdhost\""), "{e}");
        let e = parse(&text.replace("base = 0x3f20_2000\n", "")).unwrap_err();
        assert!(e.contains("kind = \"sdhost\" needs base"), "{e}");
    }
}
