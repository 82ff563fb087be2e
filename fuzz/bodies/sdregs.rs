//! `sdregs`: the SD card's register blocks as a card sends them: the CID and CSD (R2 responses)
//! and the CMD6 switch-status block, through the parsers in `drivers::sd` and what the drivers
//! derive from them (capacity, clock, the fastest bus mode offered, the card line printed).
//!
//! The input is the CID (16 bytes, most significant first, CRC byte last), the CSD (16), the
//! switch status (64) and a byte of host settings; short inputs are padded with zeros. No parser
//! for the SCR exists yet (the drivers do not read it); a target for it belongs with the parser.

use super::peak::bounded;
use drivers::sd::{
    parse_cid, parse_csd, r2_from_full, r2_register, tran_speed_hz, BusMode, CardInfo, HostKind,
    SwitchStatus, CCC_SWITCH, SWITCH_STATUS_BYTES,
};

/// Bytes of the input the target reads.
pub const INPUT_BYTES: usize = 16 + 16 + SWITCH_STATUS_BYTES + 1;

/// The most one run may allocate: the printed card line (a few hundred bytes).
pub const MAX_ALLOC: usize = 4 << 10;

/// The response words a controller holds for a 16-byte register, CRC byte dropped, as the SDHCI
/// and Allwinner drivers read them.
fn response(reg: &[u8]) -> [u32; 4] {
    let mut b = [0u8; 16];
    b.copy_from_slice(reg);
    let full = u128::from_be_bytes(b);
    let words = [
        full as u32,
        (full >> 32) as u32,
        (full >> 64) as u32,
        (full >> 96) as u32,
    ];
    let resp = r2_from_full(&words);
    assert_eq!(
        r2_register(&resp),
        full & !0xFF,
        "sdregs: the response words do not give back the register"
    );
    resp
}

/// Parse the blocks and build what the driver reports of the card.
pub fn run(data: &[u8]) {
    bounded("sdregs", MAX_ALLOC, || parse(data));
}

fn parse(data: &[u8]) {
    let mut b = [0u8; INPUT_BYTES];
    let n = data.len().min(INPUT_BYTES);
    b[..n].copy_from_slice(&data[..n]);
    let (cid, csd) = (response(&b[..16]), response(&b[16..32]));
    let status: &[u8; SWITCH_STATUS_BYTES] = b[32..32 + SWITCH_STATUS_BYTES]
        .try_into()
        .unwrap_or(&[0; SWITCH_STATUS_BYTES]);
    let host = b[INPUT_BYTES - 1];

    let id = parse_cid(&cid);
    assert!(
        (2000..=2255).contains(&id.year) && id.month <= 15,
        "sdregs: CID date out of its field"
    );
    let _ = id.to_string();
    let parsed = parse_csd(&csd);
    let ccc = ((r2_register(&csd) >> 84) & 0xFFF) as u16;
    let sw = SwitchStatus::parse(status);
    assert!(
        sw.group1_result <= 0xF,
        "sdregs: switch result out of its field"
    );
    // The fastest mode the card offers that the host allows, as `raise_speed` picks it.
    let limit = BusMode::FASTEST_FIRST[(host & 3) as usize];
    let mode = if ccc & CCC_SWITCH == 0 {
        BusMode::DefaultSpeed
    } else {
        BusMode::FASTEST_FIRST
            .into_iter()
            .find(|&m| m <= limit && sw.supports(m))
            .unwrap_or(BusMode::DefaultSpeed)
    };
    let mut down = Some(mode);
    let mut steps = 0;
    while let Some(m) = down {
        steps += 1;
        assert!(
            steps <= 5,
            "sdregs: stepping down the bus modes does not end"
        );
        down = m.step_down();
    }
    let csd_clock = parsed.ok().and_then(|c| c.max_clock_hz);
    let info = CardInfo {
        host: if host & 4 != 0 {
            HostKind::Sunxi
        } else {
            HostKind::Sdhci
        },
        blocks: parsed.map_or(0, |c| c.blocks),
        high_capacity: parsed.is_ok_and(|c| c.structure == 1),
        sd_v2: host & 8 != 0,
        rca: u16::from_be_bytes([b[0], b[1]]),
        cid,
        csd,
        data_clock_hz: csd_clock.unwrap_or(0).min(mode.max_clock_hz()),
        bus_width: if host & 16 != 0 { 4 } else { 1 },
        bus_mode: mode,
        ..CardInfo::default()
    };
    if let Ok(c) = parsed {
        let _ = c.to_string();
        assert!(c.blocks > 0, "sdregs: a CSD that parses gives no blocks");
        assert!(
            info.bytes() / 512 == c.blocks,
            "sdregs: the card's bytes overflow"
        );
    }
    assert!(
        info.bus_bytes_per_s() <= mode.ceiling_bytes_per_s(),
        "sdregs: the bus rate exceeds the mode's ceiling"
    );
    assert_eq!(
        info.cid_bytes()[..15],
        b[..15],
        "sdregs: CID bytes round trip"
    );
    let _ = info.to_string();
    let _ = tran_speed_hz(b[16 + 3]);
}
