//! A reader for the flattened device tree (DTB) a board's firmware passes at entry: the RAM
//! blocks (the `reg` of every `device_type = "memory"` node, as Linux's
//! `early_init_dt_scan_memory` in drivers/of/fdt.c reads them) and single properties by path.
//!
//! The blob is untrusted: every read is checked against its length, the walk takes at most one
//! step per 4 bytes of the structure block, nesting is capped, and every fault is an error naming
//! what was wrong and where. The format is the Devicetree Specification's chapter 5 (header,
//! structure block of big-endian tokens, strings block).
//!
//! Why not the `fdt` crate: it panics on a malformed blob (it `expect`s a NUL-terminated, UTF-8
//! string at every strings-block offset, slices the strings block at unchecked offsets and
//! `unwrap`s token reads), and a bad blob must be an error here, never a panic. Its last release
//! is from 2022.
#![forbid(unsafe_code)]

use crate::ram::RamBlocks;
use core::fmt;

/// The header's magic number.
pub const MAGIC: u32 = 0xd00d_feed;
/// Bytes of the header (version 17).
pub const HEADER_LEN: usize = 40;
/// Deepest node nesting accepted.
const MAX_DEPTH: usize = 32;

const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;

/// What was wrong with a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DtError {
    /// The blob is shorter than its header or than the size the header gives.
    Truncated {
        need: usize,
        have: usize,
    },
    BadMagic {
        found: u32,
    },
    /// A format version this reader does not know (it reads 16 and 17).
    BadVersion {
        version: u32,
        last_compatible: u32,
    },
    /// The structure or strings block lies outside the blob.
    BlockOutside {
        what: &'static str,
        offset: u32,
        size: u32,
    },
    /// A token, name or value runs past the structure block (offset in that block).
    PastEnd {
        offset: usize,
    },
    BadToken {
        offset: usize,
        token: u32,
    },
    /// A node or property name without its terminating NUL, or outside the strings block.
    BadName {
        offset: usize,
    },
    TooDeep {
        offset: usize,
    },
    /// `#address-cells` / `#size-cells` not one cell of 1 or 2 (`u32::MAX`: not one cell).
    BadCells {
        address: u32,
        size: u32,
    },
    /// A `reg` whose length is not a whole number of (address, size) entries.
    BadReg {
        offset: usize,
        len: usize,
    },
    /// A memory block that wraps the address space, or more blocks than are kept.
    BadBlock {
        base: u64,
        size: u64,
    },
    /// The structure block has no END token.
    NoEnd,
}

impl fmt::Display for DtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DtError::Truncated { need, have } => {
                write!(f, "device tree truncated: {have} bytes, needs {need}")
            }
            DtError::BadMagic { found } => {
                write!(f, "no device tree (magic {found:#010x}, not {MAGIC:#010x})")
            }
            DtError::BadVersion {
                version,
                last_compatible,
            } => write!(
                f,
                "device tree version {version} (compatible with {last_compatible}): only 16 and 17 are read"
            ),
            DtError::BlockOutside { what, offset, size } => write!(
                f,
                "device tree {what} block ({size} bytes at {offset:#x}) lies outside the blob"
            ),
            DtError::PastEnd { offset } => {
                write!(f, "device tree structure runs past its end at {offset:#x}")
            }
            DtError::BadToken { offset, token } => {
                write!(f, "device tree token {token:#x} unexpected at {offset:#x}")
            }
            DtError::BadName { offset } => {
                write!(f, "device tree name at {offset:#x} is not terminated")
            }
            DtError::TooDeep { offset } => write!(
                f,
                "device tree nodes nested deeper than {MAX_DEPTH} at {offset:#x}"
            ),
            DtError::BadCells { address, size } => write!(
                f,
                "device tree #address-cells = {address}, #size-cells = {size}: 1 or 2 each expected"
            ),
            DtError::BadReg { offset, len } => write!(
                f,
                "device tree memory reg at {offset:#x}: {len} bytes is not whole (address, size) entries"
            ),
            DtError::BadBlock { base, size } => write!(
                f,
                "device tree memory block {base:#x} + {size:#x} wraps or is one too many"
            ),
            DtError::NoEnd => write!(f, "device tree structure has no end token"),
        }
    }
}

/// A big-endian 32-bit word at `off`, if the slice holds it.
fn be32(b: &[u8], off: usize) -> Option<u32> {
    let w = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// One window of a bus's `dma-ranges`: bus addresses `bus .. bus + size` reach physical
/// `phys .. phys + size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaRange {
    pub bus: u64,
    pub phys: u64,
    pub size: u64,
}

impl DmaRange {
    /// The bus address of physical `[addr, addr + len)`, if the window holds all of it.
    pub fn bus_address(&self, addr: u64, len: u64) -> Option<u64> {
        let off = addr.checked_sub(self.phys)?;
        (off.checked_add(len)? <= self.size).then(|| self.bus + off)
    }
}

/// The first window of a `dma-ranges` value whose child addresses take 2 cells and sizes 1 (the
/// Pi 4's `emmc2bus`), with parent addresses of 2 cells (20-byte entries: the 64-bit tree) or 1
/// (16-byte entries). `None` for any other length.
pub fn dma_range(v: &[u8]) -> Option<DmaRange> {
    let cell = |i: usize| {
        v.get(4 * i..4 * i + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64)
    };
    let parent_cells = if !v.is_empty() && v.len().is_multiple_of(20) {
        2
    } else if !v.is_empty() && v.len().is_multiple_of(16) {
        1
    } else {
        return None;
    };
    let bus = cell(0)? << 32 | cell(1)?;
    let phys = match parent_cells {
        2 => cell(2)? << 32 | cell(3)?,
        _ => cell(2)?,
    };
    let size = cell(2 + parent_cells)?;
    Some(DmaRange { bus, phys, size })
}

/// A value of one or two cells (4 or 8 bytes) as a number.
pub fn cells(v: &[u8]) -> Option<u64> {
    match v.len() {
        4 => be32(v, 0).map(u64::from),
        8 => Some(((be32(v, 0)? as u64) << 32) | be32(v, 4)? as u64),
        _ => None,
    }
}

/// The NUL-terminated string starting at `off` in `b`, without the NUL.
fn c_str(b: &[u8], off: usize) -> Option<&[u8]> {
    let rest = b.get(off..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    Some(&rest[..n])
}

/// The total size a header gives, after checking its magic: how many bytes the caller must make
/// readable before [`Fdt::new`].
pub fn total_size(header: &[u8]) -> Result<usize, DtError> {
    let have = header.len();
    let (Some(magic), Some(total)) = (be32(header, 0), be32(header, 4)) else {
        return Err(DtError::Truncated {
            need: HEADER_LEN,
            have,
        });
    };
    if magic != MAGIC {
        return Err(DtError::BadMagic { found: magic });
    }
    if (total as usize) < HEADER_LEN {
        return Err(DtError::Truncated {
            need: HEADER_LEN,
            have: total as usize,
        });
    }
    Ok(total as usize)
}

/// One step of the walk over the structure block. `depth` is the nesting of the node the item
/// belongs to (the root is 0).
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    Begin {
        depth: usize,
        name: &'a [u8],
    },
    Prop {
        depth: usize,
        name: &'a [u8],
        value: &'a [u8],
        offset: usize,
    },
    End {
        depth: usize,
    },
}

/// A checked device tree blob.
#[derive(Debug, Clone, Copy)]
pub struct Fdt<'a> {
    structure: &'a [u8],
    strings: &'a [u8],
}

/// `[offset, offset + size)` of `blob`, or why not.
fn block<'a>(
    blob: &'a [u8],
    what: &'static str,
    offset: u32,
    size: u32,
) -> Result<&'a [u8], DtError> {
    let (o, s) = (offset as usize, size as usize);
    o.checked_add(s)
        .and_then(|end| blob.get(o..end))
        .ok_or(DtError::BlockOutside { what, offset, size })
}

impl<'a> Fdt<'a> {
    /// Check the header and find the blocks. `blob` may be longer than the tree.
    pub fn new(blob: &'a [u8]) -> Result<Self, DtError> {
        let total = total_size(blob)?;
        let blob = blob.get(..total).ok_or(DtError::Truncated {
            need: total,
            have: blob.len(),
        })?;
        // The header is inside `blob` (total >= HEADER_LEN): these reads cannot fail.
        let word = |i: usize| be32(blob, 4 * i).unwrap_or(0);
        let (version, last_compatible) = (word(5), word(6));
        if !(16..=17).contains(&last_compatible) || version < 16 {
            return Err(DtError::BadVersion {
                version,
                last_compatible,
            });
        }
        let off_struct = word(2);
        // Version 16 has no structure size: the block runs to the end of the blob.
        let size_struct = if version >= 17 {
            word(9)
        } else {
            (total as u32).saturating_sub(off_struct)
        };
        Ok(Fdt {
            structure: block(blob, "structure", off_struct, size_struct)?,
            strings: block(blob, "strings", word(3), word(8))?,
        })
    }

    /// Walk the structure block in order, calling `f` for each node start, property and node end
    /// until it returns `Ok(false)` or the END token. At most one step per 4 bytes.
    pub fn walk(
        &self,
        mut f: impl FnMut(Item<'a>) -> Result<bool, DtError>,
    ) -> Result<(), DtError> {
        let s = self.structure;
        let mut pos = 0usize;
        let mut open = 0usize;
        for _ in 0..=s.len() / 4 {
            let at = pos;
            let token = be32(s, pos).ok_or(DtError::PastEnd { offset: pos })?;
            pos += 4;
            let item = match token {
                BEGIN_NODE => {
                    let name = c_str(s, pos).ok_or(DtError::BadName { offset: pos })?;
                    pos = align4(pos + name.len() + 1);
                    if open == MAX_DEPTH {
                        return Err(DtError::TooDeep { offset: at });
                    }
                    open += 1;
                    Item::Begin {
                        depth: open - 1,
                        name,
                    }
                }
                END_NODE if open > 0 => {
                    open -= 1;
                    Item::End { depth: open }
                }
                PROP if open > 0 => {
                    let (item, next) = self.prop_at(pos, open - 1)?;
                    pos = next;
                    item
                }
                NOP => continue,
                END if open == 0 => return Ok(()),
                _ => return Err(DtError::BadToken { offset: at, token }),
            };
            if !f(item)? {
                return Ok(());
            }
        }
        Err(DtError::NoEnd)
    }

    /// The property whose length word is at `pos`; returns it and the offset after it.
    fn prop_at(&self, pos: usize, depth: usize) -> Result<(Item<'a>, usize), DtError> {
        let s = self.structure;
        let past = DtError::PastEnd { offset: pos };
        let len = be32(s, pos).ok_or(past)? as usize;
        let name_off = be32(s, pos + 4).ok_or(past)? as usize;
        let start = pos + 8;
        let value = start
            .checked_add(len)
            .and_then(|end| s.get(start..end))
            .ok_or(DtError::PastEnd { offset: start })?;
        let name = c_str(self.strings, name_off).ok_or(DtError::BadName { offset: name_off })?;
        let item = Item::Prop {
            depth,
            name,
            value,
            offset: pos - 4,
        };
        Ok((item, align4(start + len)))
    }

    /// The value of property `name` of the first node at `path` (node names from the root; a
    /// component matches a name exactly or up to its `@unit-address`, and a component ending in
    /// `@` matches any unit address). `None` if there is no such property.
    pub fn property(&self, path: &[&str], name: &str) -> Result<Option<&'a [u8]>, DtError> {
        let mut matched = 0usize;
        let mut found = None;
        self.walk(|item| {
            match item {
                Item::Begin { depth, name: n }
                    if depth >= 1
                        && matched == depth - 1
                        && depth <= path.len()
                        && matches(n, path[depth - 1]) =>
                {
                    matched = depth;
                }
                Item::Prop {
                    depth,
                    name: n,
                    value,
                    ..
                } if depth == path.len() && matched == depth && n == name.as_bytes() => {
                    found = Some(value);
                    return Ok(false);
                }
                Item::End { depth } if depth >= 1 && matched >= depth => matched = depth - 1,
                _ => {}
            }
            Ok(true)
        })?;
        Ok(found)
    }

    /// Every block of every available `device_type = "memory"` node's `reg`, with the root's
    /// `#address-cells` and `#size-cells` (2 and 1 when absent, as the specification says).
    /// Blocks of size 0 (placeholders the firmware did not fill) are skipped.
    pub fn memory(&self) -> Result<RamBlocks, DtError> {
        let mut ram = RamBlocks::new();
        let (mut ac, mut sc) = (2u32, 1u32);
        let mut node = MemoryNode::default();
        self.walk(|item| {
            match item {
                Item::Prop {
                    depth: 0,
                    name,
                    value,
                    ..
                } => match name {
                    b"#address-cells" => ac = one_cell(value),
                    b"#size-cells" => sc = one_cell(value),
                    _ => {}
                },
                Item::Begin { depth: 1, .. } => node = MemoryNode::default(),
                Item::Prop {
                    depth: 1,
                    name,
                    value,
                    offset,
                } => node.take(name, value, offset),
                Item::End { depth: 1 } if node.is_ram() => {
                    if let Some((reg, offset)) = node.reg {
                        add_reg(&mut ram, reg, offset, ac, sc)?;
                    }
                }
                _ => {}
            }
            Ok(true)
        })?;
        Ok(ram)
    }
}

/// What a top-level node says about itself, for [`Fdt::memory`].
#[derive(Debug, Default, Clone, Copy)]
struct MemoryNode<'a> {
    memory: bool,
    disabled: bool,
    reg: Option<(&'a [u8], usize)>,
}

impl<'a> MemoryNode<'a> {
    fn take(&mut self, name: &[u8], value: &'a [u8], offset: usize) {
        match name {
            b"device_type" => self.memory = value == b"memory\0",
            // As Linux's of_fdt_device_is_available: absent, "okay" or "ok" means available.
            b"status" => self.disabled = !matches!(value, b"okay\0" | b"ok\0"),
            b"reg" => self.reg = Some((value, offset)),
            _ => {}
        }
    }

    fn is_ram(&self) -> bool {
        self.memory && !self.disabled
    }
}

/// A `#address-cells` / `#size-cells` value: one cell (`u32::MAX` if it is not, which
/// [`add_reg`] refuses).
fn one_cell(value: &[u8]) -> u32 {
    match value.len() {
        4 => be32(value, 0).unwrap_or(u32::MAX),
        _ => u32::MAX,
    }
}

/// The (address, size) entries of a memory node's `reg`; each count must be 1 or 2 cells (what a
/// 64-bit address or size takes).
fn add_reg(
    ram: &mut RamBlocks,
    reg: &[u8],
    offset: usize,
    ac: u32,
    sc: u32,
) -> Result<(), DtError> {
    if !(1..=2).contains(&ac) || !(1..=2).contains(&sc) {
        return Err(DtError::BadCells {
            address: ac,
            size: sc,
        });
    }
    let (a, s) = (4 * ac as usize, 4 * sc as usize);
    if !reg.len().is_multiple_of(a + s) {
        return Err(DtError::BadReg {
            offset,
            len: reg.len(),
        });
    }
    for entry in reg.chunks_exact(a + s) {
        let (base, size) = (cells(&entry[..a]), cells(&entry[a..]));
        let (Some(base), Some(size)) = (base, size) else {
            return Err(DtError::BadReg {
                offset,
                len: reg.len(),
            });
        };
        if !ram.push(base, size) {
            return Err(DtError::BadBlock { base, size });
        }
    }
    Ok(())
}

/// A node name against a path component (see [`Fdt::property`]).
fn matches(name: &[u8], want: &str) -> bool {
    let w = want.as_bytes();
    if let Some(prefix) = w.strip_suffix(b"@") {
        return (name.len() > w.len() && name.starts_with(w)) || name == prefix;
    }
    name == w || name.split(|&c| c == b'@').next() == Some(w)
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

#[cfg(test)]
mod tests;
