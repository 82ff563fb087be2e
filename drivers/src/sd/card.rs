//! Pure logic of the SD card: the CSD (capacity, speed), the CID (for printing), and what a driver
//! learnt about the card ([`CardInfo`]). No registers here; everything is testable from plain
//! values.

use core::fmt;

use super::error::Cause;
use super::speed::{BusMode, SpeedNote};

/// A 128-bit card register (CID or CSD) as the controller hands it over: response words 0..3
/// hold its bits 127:8 shifted down by 8 (the CRC byte is not stored). Returns the register with
/// bit `n` at bit `n` and a zero CRC byte.
pub fn r2_register(resp: &[u32; 4]) -> u128 {
    let v = resp[0] as u128
        | (resp[1] as u128) << 32
        | (resp[2] as u128) << 64
        | ((resp[3] & 0x00FF_FFFF) as u128) << 96;
    v << 8
}

/// Bits `hi..=lo` of a 128-bit register (at most 32 of them).
fn field(reg: u128, hi: u32, lo: u32) -> u32 {
    let width = hi - lo + 1;
    ((reg >> lo) & ((1u128 << width) - 1)) as u32
}

/// What the driver uses from the CSD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Csd {
    /// CSD_STRUCTURE: 0 = version 1.0 (SDSC), 1 = version 2.0 (SDHC/SDXC).
    pub structure: u8,
    /// Capacity in 512-byte blocks.
    pub blocks: u64,
    /// TRAN_SPEED decoded (25 MHz for every default-speed card); `None` if the field is reserved.
    pub max_clock_hz: Option<u32>,
}

/// Decode the CSD from the R2 response words of CMD9.
///
/// Version 1.0: capacity = (C_SIZE + 1) * 2^(C_SIZE_MULT + 2) * 2^READ_BL_LEN bytes, READ_BL_LEN
/// 9..=11 (a 2 GiB card says 1024-byte blocks, a 4 GiB one 2048). Version 2.0: (C_SIZE + 1) * 512
/// KiB. Version 3.0 (SDUC, over 2 TiB) is refused.
pub fn parse_csd(resp: &[u32; 4]) -> Result<Csd, Cause> {
    let reg = r2_register(resp);
    let structure = field(reg, 127, 126) as u8;
    let read_bl_len = field(reg, 83, 80) as u8;
    let blocks = match structure {
        0 => {
            if !(9..=11).contains(&read_bl_len) {
                return Err(Cause::BadCsd {
                    structure,
                    read_bl_len,
                });
            }
            let c_size = field(reg, 73, 62) as u64;
            let mult = field(reg, 49, 47);
            // At most 4096 * 2^9 * 2^11 bytes: no overflow.
            ((c_size + 1) << (mult + 2 + read_bl_len as u32)) >> 9
        }
        1 => {
            let c_size = field(reg, 69, 48) as u64;
            (c_size + 1) << 10
        }
        _ => {
            return Err(Cause::BadCsd {
                structure,
                read_bl_len,
            })
        }
    };
    Ok(Csd {
        structure,
        blocks,
        max_clock_hz: tran_speed_hz(field(reg, 103, 96) as u8),
    })
}

impl fmt::Display for Csd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CSD v{}.0, {} blocks ({} MiB)",
            self.structure + 1,
            self.blocks,
            self.blocks >> 11
        )?;
        match self.max_clock_hz {
            Some(hz) => write!(f, ", TRAN_SPEED {} kHz", hz / 1000),
            None => f.write_str(", TRAN_SPEED reserved"),
        }
    }
}

/// The card identification register (CID, SD Physical Layer spec section 5.2), decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cid {
    /// MID (bits 127:120), assigned by the SD Association.
    pub manufacturer_id: u8,
    /// OID (bits 119:104): two ASCII characters.
    pub oem_id: [u8; 2],
    /// PNM (bits 103:64): five ASCII characters.
    pub product_name: [u8; 5],
    /// PRV (bits 63:56): BCD major (high nibble) and minor (low nibble) revision.
    pub revision: u8,
    /// PSN (bits 55:24).
    pub serial: u32,
    /// MDT (bits 19:8): the year (2000 + bits 19:12).
    pub year: u16,
    /// MDT: the month (bits 11:8), 1..=12 on a well-formed card.
    pub month: u8,
}

/// Decode the CID from the R2 response words of CMD2 (or CMD10).
pub fn parse_cid(resp: &[u32; 4]) -> Cid {
    let reg = r2_register(resp);
    let b = reg.to_be_bytes();
    Cid {
        manufacturer_id: b[0],
        oem_id: [b[1], b[2]],
        product_name: [b[3], b[4], b[5], b[6], b[7]],
        revision: b[8],
        serial: field(reg, 55, 24),
        year: 2000 + field(reg, 19, 12) as u16,
        month: field(reg, 11, 8) as u8,
    }
}

impl fmt::Display for Cid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MID {:#04x}, OEM \"", self.manufacturer_id)?;
        ascii(f, &self.oem_id)?;
        f.write_str("\", product \"")?;
        ascii(f, &self.product_name)?;
        write!(
            f,
            "\" rev {}.{}, serial {:#010x}, made {}-{:02}",
            self.revision >> 4,
            self.revision & 0xF,
            self.serial,
            self.year,
            self.month
        )
    }
}

/// TRAN_SPEED (CSD bits 103:96): time value (bits 6:3) times a power of ten (bits 2:0) of 100
/// kbit/s; one bit per clock on the CMD line, so this is the clock limit. 0x32 is 25 MHz.
pub fn tran_speed_hz(ts: u8) -> Option<u32> {
    // Time values times 10.
    const MULT: [u32; 16] = [
        0, 10, 12, 13, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 70, 80,
    ];
    let unit = (ts & 7) as u32;
    let mult = MULT[((ts >> 3) & 0xF) as usize];
    if unit > 3 || mult == 0 {
        return None;
    }
    // 100 kbit/s * 10^unit * mult / 10 = 10_000 * 10^unit * mult.
    Some(10_000 * 10u32.pow(unit) * mult)
}

/// R2 response words as a controller that keeps all 128 bits hands them over (word 0 = bits 31:0,
/// the CRC byte in its low 8 bits: the Allwinner controller) turned into the layout of
/// [`r2_register`] (bits 127:8 shifted down by 8, as SDHCI keeps them).
pub fn r2_from_full(words: &[u32; 4]) -> [u32; 4] {
    let v = (words[0] as u128
        | (words[1] as u128) << 32
        | (words[2] as u128) << 64
        | (words[3] as u128) << 96)
        >> 8;
    [
        v as u32,
        (v >> 32) as u32,
        (v >> 64) as u32,
        (v >> 96) as u32,
    ]
}

/// Which kind of host controller a [`CardInfo`] came from (for printing its clock line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HostKind {
    /// An SDHCI controller (`crate::sdhci`).
    #[default]
    Sdhci,
    /// The Allwinner SD/MMC controller (`crate::sunxi_mmc`): the base clock is its module clock.
    Sunxi,
    /// The BCM2835-family sdhost controller (`crate::sdhost`): the base clock is the VPU core
    /// clock.
    Sdhost,
}

/// What the driver learnt about the card and the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CardInfo {
    /// The controller kind.
    pub host: HostKind,
    /// Capacity in 512-byte blocks.
    pub blocks: u64,
    /// SDHC/SDXC (OCR CCS = 1): commands take block numbers. SDSC takes byte addresses.
    pub high_capacity: bool,
    /// The card answered CMD8 (physical layer 2.00 or later).
    pub sd_v2: bool,
    /// Relative card address from CMD3.
    pub rca: u16,
    /// OCR from the last ACMD41.
    pub ocr: u32,
    /// CID as the R2 response words (see [`r2_register`]).
    pub cid: [u32; 4],
    /// CSD as the R2 response words.
    pub csd: [u32; 4],
    /// SDHCI spec version field: 0 = 1.00, 1 = 2.00, 2 = 3.00 (0 on other controllers).
    pub host_version: u8,
    /// Base clock the dividers were computed from (the module clock's parent on Allwinner).
    pub base_clock_hz: u32,
    /// Identification clock (<= 400 kHz).
    pub id_clock_hz: u32,
    /// Data transfer clock (<= 25 MHz at Default Speed, <= 50 MHz at High Speed).
    pub data_clock_hz: u32,
    /// Data bus width in use: 1 or 4.
    pub bus_width: u8,
    /// The bus timing card and host run in.
    pub bus_mode: BusMode,
    /// Why the bus runs no faster than the driver's limit, when the card or host could not take
    /// a faster mode.
    pub speed_note: Option<SpeedNote>,
    /// The card signals at 1.8 V (it accepted S18R and the voltage switch succeeded).
    pub signal_1v8: bool,
}

impl CardInfo {
    /// The bus's ceiling in bytes per second at the mode, clock and width in use (block and
    /// command overheads aside).
    pub fn bus_bytes_per_s(&self) -> u64 {
        self.bus_mode
            .bytes_per_s(self.data_clock_hz, self.bus_width.max(1))
    }

    /// Capacity in bytes.
    pub fn bytes(&self) -> u64 {
        self.blocks * 512
    }

    /// The CID's 16 bytes, most significant first (byte 15, the CRC, reads 0).
    pub fn cid_bytes(&self) -> [u8; 16] {
        r2_register(&self.cid).to_be_bytes()
    }

    /// The CSD's 16 bytes, most significant first (byte 15, the CRC, reads 0).
    pub fn csd_bytes(&self) -> [u8; 16] {
        r2_register(&self.csd).to_be_bytes()
    }

    /// The CID, decoded.
    pub fn cid(&self) -> Cid {
        parse_cid(&self.cid)
    }

    /// The CSD, decoded (as at initialisation, which refused a CSD it could not decode).
    pub fn csd(&self) -> Result<Csd, Cause> {
        parse_csd(&self.csd)
    }

    /// Manufacturer ID (CID bits 127:120).
    pub fn manufacturer_id(&self) -> u8 {
        self.cid().manufacturer_id
    }

    /// OEM/application ID (two ASCII characters).
    pub fn oem_id(&self) -> [u8; 2] {
        self.cid().oem_id
    }

    /// Product name (five ASCII characters).
    pub fn product_name(&self) -> [u8; 5] {
        self.cid().product_name
    }

    /// Product serial number.
    pub fn serial(&self) -> u32 {
        self.cid().serial
    }
}

/// Printable ASCII or '?', without trailing NULs and spaces (padding in CID text fields).
fn ascii(f: &mut fmt::Formatter<'_>, s: &[u8]) -> fmt::Result {
    let end = s
        .iter()
        .rposition(|&c| c != 0 && c != b' ')
        .map_or(0, |i| i + 1);
    for &c in &s[..end] {
        let c = if c.is_ascii_graphic() || c == b' ' {
            c as char
        } else {
            '?'
        };
        write!(f, "{c}")?;
    }
    Ok(())
}

impl fmt::Display for CardInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.high_capacity {
            "SDHC/SDXC"
        } else if self.sd_v2 {
            "SDSC (v2)"
        } else {
            "SDSC (v1)"
        };
        write!(f, "{kind} card \"")?;
        ascii(f, &self.product_name())?;
        write!(f, "\" (MID {:#04x}, OID \"", self.manufacturer_id())?;
        ascii(f, &self.oem_id())?;
        write!(
            f,
            "\", serial {:#010x}), {} blocks ({} MiB), RCA {:#06x}, {}, {}-bit bus at {} kHz (base clock {} kHz, identification at {} kHz, ",
            self.serial(),
            self.blocks,
            self.bytes() >> 20,
            self.rca,
            self.bus_mode,
            self.bus_width,
            self.data_clock_hz / 1000,
            self.base_clock_hz / 1000,
            self.id_clock_hz / 1000,
        )?;
        match self.host {
            HostKind::Sdhci => write!(f, "SDHCI spec version field {})", self.host_version),
            HostKind::Sunxi => f.write_str("Allwinner SD/MMC)"),
            HostKind::Sdhost => f.write_str("BCM2835 sdhost)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    /// The R2 response words a controller holds for the 16-byte register `reg` (most significant
    /// byte first): bits 127:8, shifted down by 8 (the CRC byte is dropped).
    fn response(reg: [u8; 16]) -> [u32; 4] {
        let v = u128::from_be_bytes(reg) >> 8;
        [
            v as u32,
            (v >> 32) as u32,
            (v >> 64) as u32,
            (v >> 96) as u32,
        ]
    }

    /// The SD CRC7 over the first 15 bytes, with the end bit: equals byte 15 of an intact register.
    fn crc7(data: &[u8]) -> u8 {
        let mut crc = 0u8;
        for &byte in data {
            let mut d = byte;
            for _ in 0..8 {
                crc <<= 1;
                if (d ^ crc) & 0x80 != 0 {
                    crc ^= 0x09;
                }
                d <<= 1;
            }
        }
        (crc << 1) | 1
    }

    // Registers read from real cards (published with the tests of the embedded-sdmmc crate); each
    // carries its CRC7, checked below, so the bytes are a card's and not made up.
    const CID_PATRIOT: [u8; 16] = [
        0x12, 0x34, 0x56, 0x41, 0x53, 0x54, 0x43, 0x00, 0x20, 0x00, 0x00, 0x0c, 0xef, 0x01, 0x65,
        0xef,
    ];
    const CSD_V1_512: [u8; 16] = [
        0x00, 0x26, 0x00, 0x32, 0x5f, 0x59, 0x83, 0xc8, 0xad, 0xdb, 0xcf, 0xff, 0xd2, 0x40, 0x40,
        0xa5,
    ];
    const CSD_V1_1024: [u8; 16] = [
        0x00, 0x7f, 0x00, 0x32, 0x5b, 0x5a, 0x83, 0xaf, 0x7f, 0xff, 0xcf, 0x80, 0x16, 0x80, 0x00,
        0x6f,
    ];
    const CSD_V2: [u8; 16] = [
        0x40, 0x0e, 0x00, 0x32, 0x5b, 0x59, 0x00, 0x00, 0x1d, 0x69, 0x7f, 0x80, 0x0a, 0x40, 0x00,
        0x8b,
    ];

    #[test]
    fn test_registers_are_intact() {
        for r in [CID_PATRIOT, CSD_V1_512, CSD_V1_1024, CSD_V2] {
            assert_eq!(crc7(&r[..15]), r[15], "{r:02x?}");
        }
    }

    #[test]
    fn cid_of_a_real_card_decodes_per_the_spec() {
        let cid = parse_cid(&response(CID_PATRIOT));
        assert_eq!(cid.manufacturer_id, 0x12);
        assert_eq!(&cid.oem_id, b"4V");
        assert_eq!(&cid.product_name, b"ASTC\0");
        // PRV 0x20: revision 2.0 (BCD nibbles).
        assert_eq!(cid.revision, 0x20);
        // PSN: bytes 9..=12.
        assert_eq!(cid.serial, 0x0000_0cef);
        // MDT 0x165 (bits 19:8): year 0x16 -> 2022, month 5.
        assert_eq!((cid.year, cid.month), (2022, 5));
        assert_eq!(
            cid.to_string(),
            "MID 0x12, OEM \"4V\", product \"ASTC\" rev 2.0, serial 0x00000cef, made 2022-05"
        );
    }

    #[test]
    fn csd_of_real_cards_gives_their_capacity() {
        // v1.0, READ_BL_LEN 9, C_SIZE 3874, C_SIZE_MULT 7: 3875 * 512 * 512 bytes.
        let v1 = parse_csd(&response(CSD_V1_512)).unwrap();
        assert_eq!((v1.structure, v1.blocks), (0, 1_984_000));
        // v1.0, READ_BL_LEN 10 (a 2 GB card), C_SIZE 3773, C_SIZE_MULT 7.
        let v1 = parse_csd(&response(CSD_V1_1024)).unwrap();
        assert_eq!((v1.structure, v1.blocks), (0, 3_864_576));
        // v2.0, C_SIZE 7529: 7530 * 512 KiB.
        let v2 = parse_csd(&response(CSD_V2)).unwrap();
        assert_eq!((v2.structure, v2.blocks), (1, 7_710_720));
        // TRAN_SPEED 0x32: 25 MHz on all three.
        assert_eq!(v2.max_clock_hz, Some(25_000_000));
        assert_eq!(
            v2.to_string(),
            "CSD v2.0, 7710720 blocks (3765 MiB), TRAN_SPEED 25000 kHz"
        );
    }

    #[test]
    fn card_info_accessors_use_the_kept_registers() {
        let info = CardInfo {
            cid: response(CID_PATRIOT),
            csd: response(CSD_V2),
            ..CardInfo::default()
        };
        assert_eq!(info.cid(), parse_cid(&response(CID_PATRIOT)));
        assert_eq!(info.csd().unwrap().blocks, 7_710_720);
        assert_eq!(info.serial(), 0xcef);
        assert_eq!(info.cid_bytes()[..15], CID_PATRIOT[..15]);
    }
}
