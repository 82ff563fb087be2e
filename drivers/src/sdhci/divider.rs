//! The SDHCI clock divider: pure logic, testable from plain values.

use super::regs::SPEC_V3;

/// A clock divider setting: the frequency select bits for CLOCK_CONTROL (bits 15:6) and the SD
/// clock they give, rounded down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Divider {
    /// Value for CLOCK_CONTROL bits 15:8 (and 7:6 on v3).
    pub bits: u32,
    /// What the register divides the base clock by (1 = undivided).
    pub divisor: u32,
    /// `base / divisor`, rounded down.
    pub hz: u32,
}

/// The divider that gives the fastest SD clock not above `target_hz` from `base_hz`.
///
/// SDHCI v3 (`host_version >= 2`) has a 10-bit divided clock mode: N = 1..=1023 gives base / 2N,
/// N = 0 the base clock itself. v1 / v2 have 8 bits holding a power of two N = 1..=128: base / 2N.
/// `None` when even the largest divider is too fast (e.g. a 200 MHz base on a v2 controller cannot
/// reach 400 kHz) or a clock is 0.
pub fn clock_divider(base_hz: u32, target_hz: u32, host_version: u8) -> Option<Divider> {
    if base_hz == 0 || target_hz == 0 {
        return None;
    }
    if base_hz <= target_hz {
        return Some(Divider {
            bits: 0,
            divisor: 1,
            hz: base_hz,
        });
    }
    let (base, target) = (base_hz as u64, target_hz as u64);
    let n = if host_version >= SPEC_V3 {
        // Smallest N with base / 2N <= target.
        let n = base.div_ceil(2 * target);
        if n > 1023 {
            return None;
        }
        n as u32
    } else {
        let mut n = 1u64;
        while 2 * n * target < base {
            n *= 2;
            if n > 128 {
                return None;
            }
        }
        n as u32
    };
    let bits = ((n & 0xFF) << 8) | (((n >> 8) & 0x3) << 6);
    Some(Divider {
        bits,
        divisor: 2 * n,
        hz: base_hz / (2 * n),
    })
}
