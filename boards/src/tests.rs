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
    assert!(card.config_txt.contains("upstream_kernel=1"));
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
