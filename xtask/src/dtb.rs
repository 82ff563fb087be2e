//! The Raspberry Pi device trees for the card. Debian's raspi-firmware ships none, and without
//! one the firmware passes the kernel no memory map (a Pi 4's mailbox reports only the block
//! below 1 GiB). `cargo xtask setup` fetches them from Debian's arm64 kernel package (pinned by
//! version), keeps only the files named here in the cache (never in the repository), and every
//! use checks their sha256.
//!
//! The names are mainline Linux's (`bcm2837-*` for the Pi 3 family, where the Raspberry Pi
//! kernel says `bcm2710-*`): config.txt's `upstream_kernel=1` makes the firmware look for these,
//! as Debian's own raspi-firmware setup does (its z50-raspi-firmware hook).

use crate::{cache_dir, workspace_root};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// The Debian (bookworm, arm64) package the device trees come from, and its version.
pub const PACKAGE: &str = "linux-image-6.1.0-50-arm64";
pub const VERSION: &str = "6.1.176-1";
/// Where the package keeps them.
const INSIDE: &str = "usr/lib/linux-image-6.1.0-50-arm64/broadcom";

/// Every device tree a board's card may carry, with its sha256.
pub const DTBS: [(&str, &str); 4] = [
    (
        "bcm2711-rpi-4-b.dtb",
        "b61443b9dcd7af9ebefa113114af77ec0cd3b477be22bd060f99b3bf376b2ae8",
    ),
    (
        "bcm2837-rpi-3-b.dtb",
        "452eb81cde2331942cf000af509e2b3e9736c742612339ba449b34a591d1849e",
    ),
    (
        "bcm2837-rpi-3-b-plus.dtb",
        "0b8c6471bc04839641b9dd2c20b861700516df2187a092109c62675711b38ea3",
    ),
    (
        "bcm2837-rpi-zero-2-w.dtb",
        "d34246a0fa6358d375139f554cf8a2d8b8f1b34d3de4919456d0e261d6dc9ec8",
    ),
];

/// The cache folder holding them.
pub fn dir() -> PathBuf {
    cache_dir().join("dtbs").join(VERSION)
}

/// The sha256 of `bytes`, in hex.
fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `bytes` against the pinned sum of `name`.
pub fn check(name: &str, bytes: &[u8]) -> Result<(), String> {
    let Some((_, want)) = DTBS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<&str> = DTBS.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "{name}: not a device tree xtask knows ({})",
            known.join(", ")
        ));
    };
    let got = sha256(bytes);
    if got != *want {
        return Err(format!(
            "{name}: sha256 {got}, expected {want} (from {PACKAGE} {VERSION})"
        ));
    }
    Ok(())
}

/// The checked contents of `name` from the cache.
pub fn read(name: &str) -> Result<Vec<u8>, String> {
    let p = dir().join(name);
    let bytes = fs::read(&p).map_err(|e| {
        format!(
            "{}: {e} (run `cargo xtask setup` for the Pi device trees)",
            p.display()
        )
    })?;
    check(name, &bytes)?;
    Ok(bytes)
}

/// Fetch the device trees unless the cache holds them all, checked; returns their folder.
pub fn ensure() -> Result<PathBuf, String> {
    if DTBS.iter().all(|(n, _)| read(n).is_ok()) {
        eprintln!(
            "xtask: Pi device trees ready in {} (sha256 verified)",
            dir().display()
        );
        return Ok(dir());
    }
    let mut c = Command::new("bash");
    c.arg(workspace_root().join("xtask/scripts/fetch-dtbs.sh"))
        .arg(cache_dir())
        .args([PACKAGE, VERSION, INSIDE])
        .arg(dir())
        .args(DTBS.iter().map(|(n, _)| *n));
    let ok = c.status().map(|s| s.success()).unwrap_or(false);
    if !ok {
        return Err(format!(
            "fetching the Pi device trees from {PACKAGE} {VERSION} failed (is that version still in Debian bookworm? update xtask/src/dtb.rs)"
        ));
    }
    for (n, _) in DTBS {
        if let Err(e) = read(n) {
            let _ = fs::remove_file(dir().join(n));
            return Err(e);
        }
    }
    Ok(dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sums_are_pinned_and_checked() {
        assert!(check("bcm2711-rpi-4-b.dtb", b"not a device tree")
            .unwrap_err()
            .contains("expected b61443b9"));
        assert!(check("bcm2710-rpi-3-b.dtb", b"")
            .unwrap_err()
            .contains("not a device tree xtask knows"));
        for (n, sum) in DTBS {
            assert_eq!(sum.len(), 64, "{n}");
            assert!(n.starts_with("bcm2") && n.ends_with(".dtb"), "{n}");
        }
    }

    /// Every device tree a board's card names is one xtask fetches and checks.
    #[test]
    fn every_board_names_known_device_trees() {
        for name in ["rpi3", "rpi4"] {
            let b = crate::board(name).unwrap();
            assert!(!b.dtbs.is_empty(), "{name} carries no device tree");
            for d in &b.dtbs {
                assert!(DTBS.iter().any(|(n, _)| n == d), "{name}: {d}");
            }
        }
    }

    /// When the cache has them (after `cargo xtask setup`): real blobs the kernel's reader
    /// accepts, with one memory node at 0 that the firmware fills in (as shipped: 1 GiB on the Pi
    /// 3s, 512 MiB on the Zero 2 W, empty on the Pi 4).
    #[test]
    fn cached_device_trees_parse() {
        for (n, _) in DTBS {
            let Ok(bytes) = read(n) else {
                eprintln!("{n}: not in the cache (run `cargo xtask setup`); skipped");
                continue;
            };
            let t = drivers::fdt::Fdt::new(&bytes).unwrap_or_else(|e| panic!("{n}: {e}"));
            let ram = t.memory().unwrap_or_else(|e| panic!("{n}: {e}"));
            assert!(ram.as_slice().len() <= 1, "{n}: {ram}");
            assert!(ram.total() <= 1 << 30, "{n}: {ram}");
            assert!(ram.as_slice().iter().all(|b| b.start == 0), "{n}: {ram}");
            assert!(t.property(&["cpus"], "#address-cells").unwrap().is_some());
        }
    }
}
