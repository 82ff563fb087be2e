//! The GICv2 driver against two plain register files (distributor, CPU interface), with
//! ITARGETSR0 reading as the calling core's bit as on the real thing.

use super::*;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

struct Ram {
    words: Vec<u32>,
    /// What ITARGETSR0 reads as (this core's CPU interface bit), for the distributor.
    me: Option<u32>,
}

impl Regs for Ram {
    fn read32(&mut self, off: usize) -> u32 {
        match (off, self.me) {
            (GICD_ITARGETSR, Some(me)) => me * 0x0101_0101,
            _ => self.words[off / 4],
        }
    }

    fn write32(&mut self, off: usize, v: u32) {
        self.words[off / 4] = v;
    }
}

fn gic(me: u32) -> GicV2<Ram> {
    let dist = Ram {
        words: vec![0; DIST_BLOCK_SIZE / 4],
        me: Some(me),
    };
    let cpu = Ram {
        words: vec![0; CPU_BLOCK_SIZE / 4],
        me: None,
    };
    GicV2::from_regs(dist, cpu)
}

#[test]
fn an_spi_is_enabled_routed_to_this_core_and_level_sensitive() {
    for (id, me) in [(40u32, 1u32), (153, 4), (33, 2), (1019, 8)] {
        let mut g = gic(me);
        // Every interrupt's configuration starts as edge-triggered here, to see it cleared.
        g.dist.words[GICD_ICFGR / 4..GICD_ICFGR / 4 + 64].fill(0xaaaa_aaaa);
        assert_eq!(g.enable_spi(id), Ok(me as u8));
        let word = |bank: usize, per: u32| g.dist.words[bank / 4 + (id / per) as usize];
        assert_eq!(word(GICD_ISENABLER, 32), 1 << (id % 32), "id {id}");
        assert_eq!(word(GICD_ICENABLER, 32), 1 << (id % 32), "disabled first");
        let byte = |w: u32| (w >> ((id % 4) * 8)) & 0xff;
        assert_eq!(
            byte(word(GICD_ITARGETSR, 4)),
            me,
            "routed to core mask {me}"
        );
        assert_eq!(byte(word(GICD_IPRIORITYR, 4)), PRIORITY);
        let cfg = word(GICD_ICFGR, 16);
        assert_eq!((cfg >> ((id % 16) * 2)) & 3, 0, "level-sensitive");
        assert_eq!(
            cfg | (2 << ((id % 16) * 2)),
            0xaaaa_aaaa,
            "others untouched"
        );
        assert_eq!(g.dist.words[GICD_CTLR / 4] & 1, 1);
        assert_eq!(g.cpu.words[GICC_CTLR / 4] & 1, 1);
        assert_eq!(g.cpu.words[GICC_PMR / 4], PMR_ALL);
    }
}

#[test]
fn ids_outside_the_spis_are_refused_by_name() {
    for id in [0, 15, 31, 1020, 1023, u32::MAX] {
        let mut g = gic(1);
        let e = g.enable_spi(id).unwrap_err();
        assert_eq!(e, BadIrq(id));
        assert!(e.to_string().contains(&id.to_string()));
        assert!(
            g.dist.words.iter().all(|&w| w == 0),
            "nothing written for {id}"
        );
    }
}

#[test]
fn a_gic_with_one_interface_routes_to_it() {
    assert_eq!(gic(0).enable_spi(40), Ok(1));
}

#[test]
fn acknowledge_and_end() {
    let mut g = gic(1);
    g.cpu.words[GICC_IAR / 4] = (2 << 10) | 40;
    assert_eq!(g.acknowledge(), Some((40, (2 << 10) | 40)));
    g.end((2 << 10) | 40);
    assert_eq!(g.cpu.words[GICC_EOIR / 4], (2 << 10) | 40);
    g.cpu.words[GICC_IAR / 4] = 1023;
    assert_eq!(g.acknowledge(), None, "spurious");
}
