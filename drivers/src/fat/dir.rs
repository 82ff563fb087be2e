//! Directories: walking a directory's cluster chain entry by entry, 8.3 short names and VFAT long
//! names.
//!
//! A 32-byte entry is one of: the end marker (first byte 0x00, nothing valid follows), a deleted
//! entry (0xE5), a long-name part (attribute 0x0F), a volume label (attribute bit 0x08), or a short
//! entry naming a file or directory. A short name's first byte 0x05 stands for 0xE5. The NT
//! "lowercase" bits of byte 12 (0x08 base, 0x10 extension) give names like `lmboot.txt` that mtools
//! and Linux store without a long name.
//!
//! Long names come before their short entry in reverse order: the first has ordinal N | 0x40, the
//! last ordinal 1; each holds 13 UTF-16 units and the checksum of the short name it belongs to. A
//! sequence is used only when it is complete, in order, and its checksum matches; otherwise the short
//! name stands alone (that is what Windows and Linux do with orphans).
//!
//! A directory ends at the end marker or, without one, where its chain ends properly. Walking is
//! bounded by a [`ChainCheck`]: a loop is an error after a few times its length, and every block of
//! a directory cluster is read, so a loop walked up to the volume's cluster count would be millions
//! of reads on a card of several GiB.

use alloc::string::String;

use super::table::{ChainCheck, FatCache, Link};
use super::{read, FatError, FormatError, Volume};
use crate::block::{BlockDevice, BLOCK_SIZE};

const ATTR_VOLUME_ID: u8 = 0x08;
const ATTR_DIRECTORY: u8 = 0x10;
/// READ_ONLY | HIDDEN | SYSTEM | VOLUME_ID, under the mask 0x3F.
const ATTR_LONG_NAME: u8 = 0x0F;
/// Long names are at most 20 entries of 13 units (255 characters are allowed).
const LFN_MAX_ENTRIES: u8 = 20;
const LFN_UNITS: usize = 13;

/// One file or directory in a directory listing ("." and ".." are left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The long name when there is a valid one, else the short name with the NT lowercase bits applied.
    pub name: String,
    /// The 8.3 name as stored, e.g. `SMOLLM~1.GGU`. Bytes above 0x7F are shown as Latin-1.
    pub short_name: String,
    pub is_dir: bool,
    /// Bytes (0 for directories).
    pub size: u64,
    pub first_cluster: u32,
    /// The attribute byte (0x01 read-only, 0x02 hidden, 0x04 system, 0x10 directory, 0x20 archive).
    pub attributes: u8,
}

impl DirEntry {
    /// Whether `component` names this entry: its long or its short name, case-insensitively.
    pub fn matches(&self, component: &str) -> bool {
        names_equal(&self.name, component) || names_equal(&self.short_name, component)
    }
}

/// Case-insensitive comparison (Unicode lowercase mapping, which covers ASCII exactly).
pub(super) fn names_equal(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// The checksum a long name's entries carry of their short entry's 11 name bytes.
pub(super) fn short_name_checksum(name: &[u8]) -> u8 {
    name.iter()
        .fold(0u8, |sum, &b| sum.rotate_right(1).wrapping_add(b))
}

fn oem_char(b: u8, lower: bool) -> char {
    if lower {
        char::from(b.to_ascii_lowercase())
    } else {
        char::from(b)
    }
}

/// The 8.3 name of a short entry as `BASE.EXT`; `nt_case` applies the NT lowercase bits.
fn short_name(e: &[u8], nt_case: bool) -> Result<String, FormatError> {
    let trim = |s: &[u8]| s.len() - s.iter().rev().take_while(|&&b| b == b' ').count();
    let (base, ext) = (&e[0..8], &e[8..11]);
    let (lower_base, lower_ext) = (nt_case && e[12] & 0x08 != 0, nt_case && e[12] & 0x10 != 0);
    // At most 8 + 1 + 3 characters: gathered on the stack, then copied into a String of their size.
    let mut chars = ['\0'; 12];
    let mut n = 0;
    let mut put = |c: char| {
        chars[n] = c;
        n += 1;
    };
    for (i, &b) in base[..trim(base)].iter().enumerate() {
        put(oem_char(
            if i == 0 && b == 0x05 { 0xE5 } else { b },
            lower_base,
        ));
    }
    let ext = &ext[..trim(ext)];
    if !ext.is_empty() {
        put('.');
        for &b in ext {
            put(oem_char(b, lower_ext));
        }
    }
    string_of(chars[..n].iter().copied(), "a short name")
}

/// The characters of `chars` as a `String` allocated fallibly to their exact size, or the error
/// naming `what`.
pub(super) fn string_of<I>(chars: I, what: &'static str) -> Result<String, FormatError>
where
    I: Iterator<Item = char> + Clone,
{
    let bytes = chars.clone().map(char::len_utf8).sum();
    let mut s = String::new();
    s.try_reserve_exact(bytes)
        .map_err(|_| FormatError::NoMemory { what, bytes })?;
    s.extend(chars);
    Ok(s)
}

/// A long name being collected.
struct LongName {
    units: [u16; LFN_MAX_ENTRIES as usize * LFN_UNITS],
    active: bool,
    /// Entries in the sequence.
    count: u8,
    /// Ordinal of the entry seen last; the next must be one less.
    last: u8,
    checksum: u8,
}

impl LongName {
    fn new() -> Self {
        LongName {
            units: [0; LFN_MAX_ENTRIES as usize * LFN_UNITS],
            active: false,
            count: 0,
            last: 0,
            checksum: 0,
        }
    }

    fn reset(&mut self) {
        self.active = false;
    }

    fn feed(&mut self, e: &[u8]) {
        let ord = e[0];
        let n = ord & 0x3F;
        if ord & 0x80 != 0 || n == 0 || n > LFN_MAX_ENTRIES {
            self.active = false;
            return;
        }
        if ord & 0x40 != 0 {
            self.active = true;
            self.count = n;
            self.checksum = e[13];
        } else if !(self.active && n + 1 == self.last && e[13] == self.checksum) {
            self.active = false;
            return;
        }
        self.last = n;
        let at = (n as usize - 1) * LFN_UNITS;
        let parts = e[1..11]
            .chunks_exact(2)
            .chain(e[14..26].chunks_exact(2))
            .chain(e[28..32].chunks_exact(2));
        for (slot, u) in self.units[at..at + LFN_UNITS].iter_mut().zip(parts) {
            *slot = u16::from_le_bytes([u[0], u[1]]);
        }
    }

    /// The collected name if it is complete and belongs to the short entry with `checksum`.
    fn take(&mut self, checksum: u8) -> Result<Option<String>, FormatError> {
        let ok = self.active && self.last == 1 && self.checksum == checksum;
        self.active = false;
        if !ok {
            return Ok(None);
        }
        let units = &self.units[..self.count as usize * LFN_UNITS];
        let len = units
            .iter()
            .position(|&u| u == 0x0000 || u == 0xFFFF)
            .unwrap_or(units.len());
        if len == 0 {
            return Ok(None);
        }
        let chars = char::decode_utf16(units[..len].iter().copied())
            .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER));
        string_of(chars, "a long name").map(Some)
    }
}

/// Call `f` with each entry of the directory starting at `first` (named `name`, for errors) until it
/// returns `Some`, the end marker, or the end of the chain.
pub(super) fn walk<D: BlockDevice, T>(
    vol: &Volume,
    dev: &mut D,
    cache: &mut FatCache,
    name: &str,
    first: u32,
    mut f: impl FnMut(DirEntry) -> Option<T>,
) -> Result<Option<T>, FatError<D::Error>> {
    if !vol.is_data_cluster(first) {
        return Err(FatError::Format(FormatError::BadFirstCluster {
            name: name.into(),
            cluster: first,
            limit: vol.clusters + 2,
        }));
    }
    let mut long = LongName::new();
    let mut block = [0u8; BLOCK_SIZE];
    let mut cluster = first;
    let mut check = ChainCheck::new(first);
    loop {
        let lba = vol.cluster_lba(cluster);
        for b in 0..vol.cluster_blocks {
            read(dev, lba + b, &mut block)?;
            for e in block.chunks_exact(32) {
                match e[0] {
                    0x00 => return Ok(None),
                    0xE5 => {
                        long.reset();
                        continue;
                    }
                    _ => {}
                }
                let attr = e[11];
                if attr & 0x3F == ATTR_LONG_NAME {
                    long.feed(e);
                    continue;
                }
                if attr & ATTR_VOLUME_ID != 0 {
                    long.reset();
                    continue;
                }
                let long_name = long.take(short_name_checksum(&e[0..11]))?;
                if &e[0..11] == b".          " || &e[0..11] == b"..         " {
                    continue;
                }
                let name = match long_name {
                    Some(name) => name,
                    None => short_name(e, true)?,
                };
                let entry = DirEntry {
                    name,
                    short_name: short_name(e, false)?,
                    is_dir: attr & ATTR_DIRECTORY != 0,
                    size: u64::from(u32::from_le_bytes([e[28], e[29], e[30], e[31]])),
                    first_cluster: u32::from(u16::from_le_bytes([e[20], e[21]])) << 16
                        | u32::from(u16::from_le_bytes([e[26], e[27]])),
                    attributes: attr,
                };
                if let Some(t) = f(entry) {
                    return Ok(Some(t));
                }
            }
        }
        match cache.next(vol, dev, cluster)? {
            Link::Next(n) => {
                check.step(vol, cluster, n)?;
                cluster = n;
            }
            Link::End => return Ok(None),
        }
    }
}
