//! Card images: an MBR with one FAT32 partition (type 0x0C) at 1 MiB, formatted and filled with the
//! `fatfs` crate. Sizes are powers of two (QEMU's SD card model requires it).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// First block of the partition.
pub const PART_START_LBA: u64 = 2048;

/// A file to put on the card: path inside the volume (directories are created) and its source.
#[derive(Debug)]
pub enum Content<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

/// A window of a file, for fatfs to format and fill the partition in place.
struct Slice {
    f: File,
    start: u64,
    len: u64,
    pos: u64,
}

impl Read for Slice {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.len.saturating_sub(self.pos)) as usize;
        self.f.seek(SeekFrom::Start(self.start + self.pos))?;
        let n = self.f.read(&mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for Slice {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.len.saturating_sub(self.pos)) as usize;
        if n == 0 && !buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "write past the end of the partition",
            ));
        }
        self.f.seek(SeekFrom::Start(self.start + self.pos))?;
        let n = self.f.write(&buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.f.flush()
    }
}

impl Seek for Slice {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let p = match to {
            SeekFrom::Start(p) => p as i64,
            SeekFrom::Current(d) => self.pos as i64 + d,
            SeekFrom::End(d) => self.len as i64 + d,
        };
        if p < 0 || p as u64 > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek outside the partition",
            ));
        }
        self.pos = p as u64;
        Ok(self.pos)
    }
}

fn mbr(total_blocks: u64) -> [u8; 512] {
    let mut m = [0u8; 512];
    let e = &mut m[0x1be..0x1ce];
    e[0] = 0x00; // not bootable (the Pi firmware does not care)
    e[1..4].copy_from_slice(&[0xfe, 0xff, 0xff]); // CHS: use LBA
    e[4] = 0x0c; // FAT32 with LBA
    e[5..8].copy_from_slice(&[0xfe, 0xff, 0xff]);
    e[8..12].copy_from_slice(&(PART_START_LBA as u32).to_le_bytes());
    e[12..16].copy_from_slice(&((total_blocks - PART_START_LBA) as u32).to_le_bytes());
    m[510] = 0x55;
    m[511] = 0xaa;
    m
}

/// Write an image at `out` holding `files`, at least `min_bytes` large (rounded up to a power of two
/// with room for the files). Large files are copied with a progress line on stderr.
pub fn make_image(out: &Path, files: &[(&str, Content<'_>)], min_bytes: u64) -> Result<(), String> {
    let payload: u64 = files
        .iter()
        .map(|(_, c)| match c {
            Content::Bytes(b) => b.len() as u64,
            Content::File(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
        })
        .sum();
    // FAT, directory and cluster slack: 3% plus 16 MiB; FAT32 needs at least 64 MiB in practice.
    let need = (payload + payload / 32 + (16 << 20) + PART_START_LBA * 512)
        .max(min_bytes)
        .max(64 << 20);
    let size = need.next_power_of_two();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(out)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    f.set_len(size)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let blocks = size / 512;
    let mut f = f;
    f.write_all(&mbr(blocks)).map_err(|e| e.to_string())?;
    let part = Slice {
        f,
        start: PART_START_LBA * 512,
        len: size - PART_START_LBA * 512,
        pos: 0,
    };
    let mut part = part;
    fatfs::format_volume(
        &mut part,
        fatfs::FormatVolumeOptions::new()
            .fat_type(fatfs::FatType::Fat32)
            .volume_label(*b"LMBOOT     "),
    )
    .map_err(|e| format!("formatting FAT32: {e}"))?;
    let fs = fatfs::FileSystem::new(part, fatfs::FsOptions::new())
        .map_err(|e| format!("opening the new volume: {e}"))?;
    let root = fs.root_dir();
    for (path, content) in files {
        let path = path.trim_start_matches('/');
        let mut dir = root.clone();
        let mut parts: Vec<&str> = path.split('/').collect();
        let name = parts.pop().unwrap_or_default();
        for d in parts {
            dir = match dir.open_dir(d) {
                Ok(x) => x,
                Err(_) => dir
                    .create_dir(d)
                    .map_err(|e| format!("creating /{d}: {e}"))?,
            };
        }
        let mut file = dir
            .create_file(name)
            .map_err(|e| format!("creating /{path}: {e}"))?;
        file.truncate().map_err(|e| e.to_string())?;
        match content {
            Content::Bytes(b) => file
                .write_all(b)
                .map_err(|e| format!("writing /{path}: {e}"))?,
            Content::File(src) => {
                let mut r = File::open(src).map_err(|e| format!("{}: {e}", src.display()))?;
                let total = r.metadata().map(|m| m.len()).unwrap_or(0);
                let mut buf = vec![0u8; 4 << 20];
                let mut done = 0u64;
                let mut shown = u64::MAX;
                loop {
                    let n = r
                        .read(&mut buf)
                        .map_err(|e| format!("{}: {e}", src.display()))?;
                    if n == 0 {
                        break;
                    }
                    file.write_all(&buf[..n])
                        .map_err(|e| format!("writing /{path}: {e}"))?;
                    done += n as u64;
                    let pct = done * 100 / total.max(1);
                    if pct / 5 != shown {
                        shown = pct / 5;
                        let bar = "#".repeat((pct / 5) as usize);
                        eprint!("\rxtask: copying /{path} [{bar:<20}] {pct:>3}%");
                    }
                }
                eprintln!();
            }
        }
        file.flush().map_err(|e| e.to_string())?;
    }
    drop(root);
    fs.unmount()
        .map_err(|e| format!("closing the volume: {e}"))?;
    Ok(())
}

/// Where the Allwinner boot ROM looks for the SPL on a card: 8 KiB.
pub const BOOT_LOADER_OFFSET: u64 = 8 << 10;

/// Write a boot loader (U-Boot with its SPL) into the gap between the MBR and the partition, at
/// [`BOOT_LOADER_OFFSET`]; refused if it would reach the partition.
pub fn write_boot_loader(image: &Path, loader: &[u8]) -> Result<(), String> {
    let room = PART_START_LBA * 512 - BOOT_LOADER_OFFSET;
    if loader.len() as u64 > room {
        return Err(format!(
            "the boot loader is {} bytes; {room} fit between 8 KiB and the partition",
            loader.len()
        ));
    }
    let mut f = OpenOptions::new()
        .write(true)
        .open(image)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    f.seek(SeekFrom::Start(BOOT_LOADER_OFFSET))
        .and_then(|_| f.write_all(loader))
        .map_err(|e| format!("{}: writing the boot loader: {e}", image.display()))
}

/// Escape a prompt for `lmboot.txt` (one line; `\n`, `\t`, `\\` escapes).
pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}
