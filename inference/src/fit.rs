//! Sizes against the address space: file offsets and sizes stay `u64` (a model may be larger than
//! 4 GiB on a 64 GiB card), and become `usize` only for what is held in memory, through [`fit`],
//! which refuses with a [`TooLarge`] naming the object instead of truncating.
//!
//! On a 32-bit board (`usize` of 32 bits) one object can be at most `isize::MAX` bytes (2 GiB
//! less a byte), Rust's limit for one allocation; on a 64-bit one the limit is out of reach and
//! the heap decides. Sizes are computed in `u64` with [`bytes`], which saturates, so an overflow
//! is always "too large", never a small wrapped number.

use alloc::string::String;
use core::fmt;

/// The most bytes one object in memory can take on this target (`isize::MAX`).
pub const ADDRESS_LIMIT: u64 = isize::MAX as u64;

/// An object that cannot be held in memory here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    /// What it is, e.g. `tensor "blk.0.ffn_up.weight"` or `the KV cache`.
    pub what: String,
    /// Its size in bytes (`u64::MAX` when the computation overflowed).
    pub bytes: u64,
    /// The most one object may take.
    pub limit: u64,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The limit tells the board: a test may pose as a 32-bit one.
        let bits = if self.limit <= u32::MAX as u64 {
            32
        } else {
            usize::BITS
        };
        if self.bytes == u64::MAX {
            write!(f, "{}: its size overflows", self.what)?;
        } else {
            write!(f, "{} is {}", self.what, Size(self.bytes))?;
        }
        write!(
            f,
            ": more than this {bits}-bit board can address in one piece ({})",
            Size(self.limit)
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for TooLarge {}

/// `count` items of `each` bytes, in `u64`; `u64::MAX` on overflow (which no limit admits).
pub fn bytes(count: u64, each: u64) -> u64 {
    count.saturating_mul(each)
}

/// `bytes` as an in-memory length, if it is at most [`ADDRESS_LIMIT`]; `what` names the object
/// for the error.
pub fn fit(bytes: u64, what: impl FnOnce() -> String) -> Result<usize, TooLarge> {
    fit_within(bytes, ADDRESS_LIMIT, what)
}

/// [`fit`] against an explicit `limit` (tests pose as a 32-bit board with `1 << 31`). `u64::MAX`,
/// what [`bytes`] makes of an overflow, never fits.
pub fn fit_within(
    bytes: u64,
    limit: u64,
    what: impl FnOnce() -> String,
) -> Result<usize, TooLarge> {
    match usize::try_from(bytes) {
        Ok(n) if bytes <= limit && bytes != u64::MAX => Ok(n),
        _ => Err(TooLarge {
            what: what(),
            bytes,
            limit,
        }),
    }
}

/// A byte count for people: `5.2 GiB`, `640 KiB`, `100 bytes` (one decimal, rounded down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
        let n = self.0;
        for (unit, shift) in UNITS {
            if n >> shift != 0 {
                let whole = n >> shift;
                let tenths = (((n - (whole << shift)) as u128 * 10) >> shift) as u64;
                return if tenths == 0 {
                    write!(f, "{whole} {unit}")
                } else {
                    write!(f, "{whole}.{tenths} {unit}")
                };
            }
        }
        write!(f, "{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::ToString;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(Size(100).to_string(), "100 bytes");
        assert_eq!(Size(640 << 10).to_string(), "640 KiB");
        assert_eq!(Size((5 << 30) + (1 << 28)).to_string(), "5.2 GiB");
        assert_eq!(Size(u64::MAX).to_string(), "16777215.9 TiB");
    }

    #[test]
    fn a_size_past_the_limit_is_named_not_truncated() {
        let limit = 1 << 31; // a 32-bit board
        let name = || String::from("tensor \"blk.0.ffn_up.weight\"");
        assert_eq!(fit_within(limit, limit, name), Ok(limit as usize));
        let e = fit_within((5 << 30) + (1 << 28), limit, name).unwrap_err();
        assert_eq!(e.bytes, (5 << 30) + (1 << 28));
        let text = format!("{e}");
        assert!(
            text.starts_with("tensor \"blk.0.ffn_up.weight\" is 5.2 GiB: more than this")
                && text.ends_with("can address in one piece (2 GiB)"),
            "{text}"
        );
        // A product that overflows u64 saturates, and is refused at any limit.
        let e = fit_within(bytes(u64::MAX / 2, 3), u64::MAX, name).unwrap_err();
        assert!(format!("{e}").contains("its size overflows"), "{e}");
        // On this target: what the address space holds fits, a byte more does not.
        assert!(fit(ADDRESS_LIMIT, name).is_ok());
        assert!(fit(ADDRESS_LIMIT + 1, name).is_err());
        // 4 GiB + 1 is too large for a 32-bit board whatever the limit says.
        let over_4g = fit_within((1 << 32) + 1, u64::MAX, name);
        assert_eq!(over_4g.is_err(), usize::BITS == 32);
    }
}
