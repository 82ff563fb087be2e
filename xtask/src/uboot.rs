//! U-Boot for the Allwinner boards' cards, and the `boot.scr` that starts lmboot. The boot ROM of
//! an H3 / H2+ loads U-Boot's SPL from 8 KiB into the card; the SPL brings up DRAM and loads
//! U-Boot, whose default boot scans the card's FAT partition for `boot.scr`. `cargo xtask setup`
//! fetches the build from Debian's u-boot-sunxi (armhf) package, pinned by version, into the cache
//! (never into the repository), and every use checks its sha256.

use crate::{cache_dir, workspace_root};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// The Debian (bookworm, armhf) package and its version.
pub const PACKAGE: &str = "u-boot-sunxi";
pub const VERSION: &str = "2023.01+dfsg-2+deb12u3";
/// The file each board directory holds: SPL and U-Boot, written at 8 KiB.
pub const FILE: &str = "u-boot-sunxi-with-spl.bin";

/// The U-Boot builds a board file may name (`[card] u_boot`), with the sha256 of their [`FILE`].
pub const BUILDS: [(&str, &str); 1] = [(
    "orangepi_zero",
    "a7dfb71b47b3dda83f17a21b25c4a144bbb8a56773d9104c1cf1e981365624ce",
)];

/// The cache folder of `build`.
pub fn dir(build: &str) -> PathBuf {
    cache_dir().join("u-boot").join(VERSION).join(build)
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The checked U-Boot of `build` from the cache.
pub fn read(build: &str) -> Result<Vec<u8>, String> {
    let Some((_, want)) = BUILDS.iter().find(|(b, _)| *b == build) else {
        let known: Vec<&str> = BUILDS.iter().map(|(b, _)| *b).collect();
        return Err(format!(
            "U-Boot build {build:?} is not one xtask knows ({})",
            known.join(", ")
        ));
    };
    let p = dir(build).join(FILE);
    let bytes = fs::read(&p)
        .map_err(|e| format!("{}: {e} (run `cargo xtask setup` for U-Boot)", p.display()))?;
    let got = sha256(&bytes);
    if got != *want {
        return Err(format!(
            "{}: sha256 {got}, expected {want} (from {PACKAGE} {VERSION})",
            p.display()
        ));
    }
    Ok(bytes)
}

/// Fetch every build unless the cache holds it, checked.
pub fn ensure() -> Result<(), String> {
    for (build, _) in BUILDS {
        if read(build).is_ok() {
            continue;
        }
        let mut c = Command::new("bash");
        c.env("DEB_ARCH", "armhf")
            .arg(workspace_root().join("xtask/scripts/fetch-dtbs.sh"))
            .arg(cache_dir())
            .args([PACKAGE, VERSION, &format!("usr/lib/u-boot/{build}")])
            .arg(dir(build))
            .arg(FILE);
        if !c.status().map(|s| s.success()).unwrap_or(false) {
            return Err(format!(
                "fetching U-Boot ({build}) from {PACKAGE} {VERSION} failed (is that version still in Debian bookworm? update xtask/src/uboot.rs)"
            ));
        }
        read(build)?;
    }
    eprintln!("xtask: U-Boot ready (sha256 verified)");
    Ok(())
}

/// `text` as a U-Boot script image (what `mkimage -A arm -O linux -T script -C none` writes):
/// the 64-byte legacy header (big-endian; magic, header CRC, size, data CRC, OS Linux, arch ARM,
/// type script, no compression, a name), then the data: a table of lengths ending in a zero word,
/// and the script. U-Boot's `source` checks both CRCs.
pub fn script_image(text: &str) -> Vec<u8> {
    let mut data = Vec::with_capacity(text.len() + 8);
    data.extend_from_slice(&(text.len() as u32).to_be_bytes());
    data.extend_from_slice(&0u32.to_be_bytes());
    data.extend_from_slice(text.as_bytes());
    let mut h = [0u8; 64];
    h[0..4].copy_from_slice(&0x2705_1956u32.to_be_bytes());
    h[12..16].copy_from_slice(&(data.len() as u32).to_be_bytes());
    h[24..28].copy_from_slice(&crc32fast::hash(&data).to_be_bytes());
    h[28] = 5; // IH_OS_LINUX
    h[29] = 2; // IH_ARCH_ARM
    h[30] = 6; // IH_TYPE_SCRIPT
    h[31] = 0; // IH_COMP_NONE
    let name = b"lmboot";
    h[32..32 + name.len()].copy_from_slice(name);
    let hcrc = crc32fast::hash(&h);
    h[4..8].copy_from_slice(&hcrc.to_be_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(&data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_image_has_the_header_u_boot_checks() {
        let img = script_image("echo hi\n");
        assert_eq!(&img[0..4], &[0x27, 0x05, 0x19, 0x56]);
        let size = u32::from_be_bytes(img[12..16].try_into().unwrap()) as usize;
        assert_eq!(size, img.len() - 64);
        let mut h = img[..64].to_vec();
        let hcrc = u32::from_be_bytes(h[4..8].try_into().unwrap());
        h[4..8].fill(0);
        assert_eq!(crc32fast::hash(&h), hcrc, "header CRC");
        let dcrc = u32::from_be_bytes(img[24..28].try_into().unwrap());
        assert_eq!(crc32fast::hash(&img[64..]), dcrc, "data CRC");
        assert_eq!(&img[64..72], &[0, 0, 0, 8, 0, 0, 0, 0], "length table");
        assert_eq!(&img[72..], b"echo hi\n");
        assert_eq!((img[28], img[29], img[30], img[31]), (5, 2, 6, 0));
    }

    #[test]
    fn an_unknown_build_is_named() {
        let e = read("bananapi").unwrap_err();
        assert!(
            e.contains("\"bananapi\"") && e.contains("orangepi_zero"),
            "{e}"
        );
    }
}
