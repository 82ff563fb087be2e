//! Code-point classes for the pre-tokenizers, and GPT-2's byte ↔ character map.
//!
//! The classes are the Unicode general categories folded into the groups the split rules name
//! (`\p{L}`, `\p{N}`, `\p{P}`, ...), plus the White_Space property for `\s`. They come from the
//! Unicode Character Database 15.1, the version llama.cpp's tables are generated from, so both
//! sides classify every code point the same way (`unicode_table.rs`, made by `gen_unicode.py`).

use super::unicode_table::RANGES;

/// The Unicode version the classes come from.
pub use super::unicode_table::UNICODE_VERSION;

/// Unassigned code point (`Cn`).
pub const UNDEFINED: u16 = 0x0001;
/// `\p{N}`: `Nd`, `Nl`, `No`.
pub const NUMBER: u16 = 0x0002;
/// `\p{L}`: `Lu`, `Ll`, `Lt`, `Lm`, `Lo`.
pub const LETTER: u16 = 0x0004;
/// `\p{Z}`: `Zs`, `Zl`, `Zp`.
pub const SEPARATOR: u16 = 0x0008;
/// `\p{M}`: `Mn`, `Mc`, `Me`.
pub const MARK: u16 = 0x0010;
/// `\p{P}`: `Pc`, `Pd`, `Ps`, `Pe`, `Pi`, `Pf`, `Po`.
pub const PUNCTUATION: u16 = 0x0020;
/// `\p{S}`: `Sm`, `Sc`, `Sk`, `So`.
pub const SYMBOL: u16 = 0x0040;
/// `\p{C}` except unassigned: `Cc`, `Cf`, `Co`, `Cs`.
pub const CONTROL: u16 = 0x0080;
/// The White_Space property (`\s`).
pub const WHITESPACE: u16 = 0x0100;

/// Code points with the Unicode White_Space property.
const WHITE_SPACE: [u32; 25] = [
    0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
    0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
];

/// The class flags of code point `cp` (one category flag, plus [`WHITESPACE`]); never 0 for a
/// valid code point.
pub fn flags(cp: u32) -> u16 {
    if cp > 0x10FFFF {
        return UNDEFINED;
    }
    // Last range starting at or before `cp` (RANGES[0] starts at 0).
    let key = (cp << 8) | 0xFF;
    let i = RANGES.partition_point(|&r| r <= key).saturating_sub(1);
    let mut f = (RANGES[i] & 0xFF) as u16;
    if WHITE_SPACE.binary_search(&cp).is_ok() {
        f |= WHITESPACE;
    }
    f
}

/// The 68 bytes GPT-2 does not write as themselves (controls, space, DEL, C1 controls, NBSP, soft
/// hyphen), in order; the `i`-th is written as U+0100 + `i`.
const SHIFTED: [u8; 68] = {
    let mut t = [0u8; 68];
    let mut n = 0;
    let mut b = 0usize;
    while b < 256 {
        if !is_printable_byte(b as u8) {
            t[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    t
};

/// The character GPT-2's byte-level BPE writes for byte `b`: printable Latin-1 bytes stand for
/// themselves, the other 68 for U+0100 onwards in order.
pub fn byte_to_char(b: u8) -> char {
    if is_printable_byte(b) {
        return char::from(b);
    }
    let rank = SHIFTED.iter().position(|&x| x == b).unwrap_or(0) as u32;
    char::from_u32(0x100 + rank).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The byte behind a character of GPT-2's byte alphabet, if `c` is one.
pub fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if cp < 0x100 {
        let b = cp as u8;
        return is_printable_byte(b).then_some(b);
    }
    SHIFTED.get((cp - 0x100) as usize).copied()
}

const fn is_printable_byte(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// A 256-entry table from byte to its GPT-2 character (UTF-8, 1 or 2 bytes).
pub fn byte_char_table() -> [([u8; 2], u8); 256] {
    let mut t = [([0u8; 2], 0u8); 256];
    for (b, slot) in t.iter_mut().enumerate() {
        let c = byte_to_char(b as u8);
        let mut buf = [0u8; 4];
        let s = c.encode_utf8(&mut buf);
        let n = s.len().min(2);
        slot.0[..n].copy_from_slice(&s.as_bytes()[..n]);
        slot.1 = n as u8;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(char_to_byte('€'), None);
    }

    #[test]
    fn classes() {
        assert_eq!(flags('a' as u32), LETTER);
        assert_eq!(flags('7' as u32), NUMBER);
        assert_eq!(flags(' ' as u32), SEPARATOR | WHITESPACE);
        assert_eq!(flags('\n' as u32), CONTROL | WHITESPACE);
        assert_eq!(flags('$' as u32), SYMBOL);
        assert_eq!(flags('!' as u32), PUNCTUATION);
        assert_eq!(flags(0x0301), MARK);
        assert_eq!(flags(0x4E2D), LETTER);
        assert_eq!(flags(0x0378), UNDEFINED);
        assert_eq!(flags(0x10FFFF), UNDEFINED);
        assert_eq!(flags(0x1F600), SYMBOL);
    }
}
