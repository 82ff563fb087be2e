//! The RISC-V boards whose vendor U-Boot starts lmboot with `bootm` (the Milk-V Duo family, the
//! SpacemiT K1): `cargo xtask image`'s card holds a FIT that parses, whose kernel is the flat
//! image at the board's load and entry address with its hash, whose configurations are the ones
//! the board's U-Boot asks for, and whose device tree gives the kernel RAM that holds it, the
//! harts' ISA and timer. QEMU has no machine for these boards: this is what can be checked of
//! their boot files here.

use drivers::fdt::{cells, Fdt};
use std::io::{Cursor, Read};

/// The file `name` in the card image's FAT partition (at 1 MiB).
fn card_file(img: &[u8], name: &str) -> Vec<u8> {
    // fatfs wants a writable volume: a copy of the partition.
    let mut part = img[xtask::image::PART_START_LBA as usize * 512..].to_vec();
    let fs = fatfs::FileSystem::new(Cursor::new(&mut part[..]), fatfs::FsOptions::new()).unwrap();
    let mut f = fs
        .root_dir()
        .open_file(name)
        .unwrap_or_else(|e| panic!("{name} on the card: {e}"));
    let mut v = Vec::new();
    f.read_to_end(&mut v).unwrap();
    v
}

fn check(board_name: &str, configs: &[&str], harts: u32, vector: &str) {
    let board = xtask::board(board_name).unwrap();
    // One build at a time: the boards of a target share cargo's output file.
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let kernel = xtask::build_kernel(&board, false).unwrap();
    drop(guard);
    let flat = std::fs::read(&kernel).unwrap();
    let dir = common::boot::image_dir();
    let model = dir.join(format!("fit-{board_name}.model"));
    std::fs::write(&model, b"GGUF, not booted here").unwrap();
    let img_path = dir.join(format!("fit-{board_name}.img"));
    let s = xtask::Settings::default();
    xtask::card_image(&board, Some(&kernel), &s, &model, &img_path).unwrap();
    let img = std::fs::read(&img_path).unwrap();
    let fit = card_file(&img, &board.kernel_name);
    let t = Fdt::new(&fit).unwrap_or_else(|e| panic!("{board_name}: the FIT: {e}"));
    let p = |path: &[&str], name: &str| {
        t.property(path, name)
            .unwrap()
            .unwrap_or_else(|| panic!("{board_name}: {path:?} {name}"))
    };
    let k = ["images", "kernel-1"];
    assert_eq!(p(&k, "data"), &flat[..], "{board_name}: the kernel");
    assert_eq!(cells(p(&k, "load")), Some(board.load_address));
    assert_eq!(cells(p(&k, "entry")), Some(board.load_address));
    assert_eq!(
        p(&k, "os"),
        b"linux\0",
        "bootm enters it as Linux: S-mode, a0 hart, a1 tree"
    );
    let crc = p(&["images", "kernel-1", "hash-1"], "value");
    assert_eq!(crc, crc32fast::hash(&flat).to_be_bytes());
    assert!(!p(&[], "description").is_empty() && p(&[], "timestamp").len() == 4);
    for c in configs {
        assert_eq!(p(&["configurations", c], "kernel"), b"kernel-1\0", "{c}");
        assert_eq!(p(&["configurations", c], "fdt"), b"fdt-1\0", "{c}");
    }
    let tree = Fdt::new(p(&["images", "fdt-1"], "data")).unwrap();
    let ram = tree.memory().unwrap();
    assert!(
        ram.as_slice()
            .iter()
            .any(|b| (b.start..b.end).contains(&board.load_address)),
        "{board_name}: the tree's RAM holds the kernel"
    );
    let isa = tree
        .property(&["cpus", "cpu@"], "riscv,isa")
        .unwrap()
        .unwrap();
    assert!(
        std::str::from_utf8(isa).unwrap().contains(vector),
        "{board_name}"
    );
    let mut n = 0;
    while tree
        .property(&["cpus", &format!("cpu@{n}")], "reg")
        .unwrap()
        .is_some()
    {
        n += 1;
    }
    assert_eq!(n, harts, "{board_name}: harts listed");
    assert!(tree
        .property(&["cpus"], "timebase-frequency")
        .unwrap()
        .and_then(cells)
        .is_some());
    card_file(&img, "lmboot.txt");
}

mod common;

#[test]
fn the_milk_v_duo_card_holds_the_fit_its_u_boot_asks_for() {
    check(
        "milkv-duo",
        &["config-cv1800b_milkv_duo_sd"],
        1,
        "xtheadvector",
    );
}

#[test]
fn the_duo_256m_and_licheerv_nano_card_holds_their_configurations() {
    check(
        "milkv-duo256m",
        &[
            "config-sg2002_milkv_duo256m_sd",
            "config-cv1812cp_milkv_duo256m_sd",
            "config-sg2002_licheervnano_sd",
        ],
        1,
        "xtheadvector",
    );
}

#[test]
fn the_spacemit_k1_card_holds_its_fit_and_boot_script() {
    check("spacemit-k1", &["config-lmboot"], 8, "v_zicbom");
    let board = xtask::board("spacemit-k1").unwrap();
    let dir = common::boot::image_dir();
    let img = std::fs::read(dir.join("fit-spacemit-k1.img")).unwrap();
    let scr = card_file(&img, "boot.scr");
    let text = String::from_utf8_lossy(&scr);
    assert!(text.contains(&format!(
        "fatload mmc ${{devnum}}:1 0x10000000 {}",
        board.kernel_name
    )));
    assert!(text.contains("bootm 0x10000000"));
}
