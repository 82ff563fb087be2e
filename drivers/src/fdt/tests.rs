//! Hand-made blobs: the shapes the Pi firmware, QEMU and OpenSBI pass, and broken ones.

use super::*;
use crate::ram::Block;
use alloc::vec::Vec;

/// Writes a version-17 blob (an empty reservation map, then the structure and strings blocks).
#[derive(Default)]
struct Builder {
    structure: Vec<u8>,
    strings: Vec<u8>,
}

impl Builder {
    fn word(&mut self, w: u32) -> &mut Self {
        self.structure.extend_from_slice(&w.to_be_bytes());
        self
    }

    fn pad(&mut self) {
        while !self.structure.len().is_multiple_of(4) {
            self.structure.push(0);
        }
    }

    fn begin(&mut self, name: &str) -> &mut Self {
        self.word(BEGIN_NODE);
        self.structure.extend_from_slice(name.as_bytes());
        self.structure.push(0);
        self.pad();
        self
    }

    fn end(&mut self) -> &mut Self {
        self.word(END_NODE)
    }

    fn prop(&mut self, name: &str, value: &[u8]) -> &mut Self {
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        self.word(PROP).word(value.len() as u32).word(off);
        self.structure.extend_from_slice(value);
        self.pad();
        self
    }

    fn cells(&mut self, name: &str, cells: &[u32]) -> &mut Self {
        let v: Vec<u8> = cells.iter().flat_map(|c| c.to_be_bytes()).collect();
        self.prop(name, &v)
    }

    fn memory(&mut self, name: &str, reg: &[u32]) -> &mut Self {
        self.begin(name)
            .prop("device_type", b"memory\0")
            .cells("reg", reg)
            .end()
    }

    fn finish(&mut self) -> Vec<u8> {
        self.word(END);
        let off_rsv = HEADER_LEN as u32;
        let off_struct = off_rsv + 16;
        let off_strings = off_struct + self.structure.len() as u32;
        let total = off_strings + self.strings.len() as u32;
        let header = [
            MAGIC,
            total,
            off_struct,
            off_strings,
            off_rsv,
            17,
            16,
            0,
            self.strings.len() as u32,
            self.structure.len() as u32,
        ];
        let mut b: Vec<u8> = header.iter().flat_map(|w| w.to_be_bytes()).collect();
        b.extend_from_slice(&[0; 16]);
        b.extend_from_slice(&self.structure);
        b.extend_from_slice(&self.strings);
        b
    }
}

fn root(ac: u32, sc: u32) -> Builder {
    let mut b = Builder::default();
    b.begin("")
        .cells("#address-cells", &[ac])
        .cells("#size-cells", &[sc])
        .prop("model", b"Raspberry Pi 3 Model B\0");
    b
}

fn blocks(blob: &[u8]) -> Vec<(u64, u64)> {
    let ram = Fdt::new(blob).unwrap().memory().unwrap();
    ram.as_slice().iter().map(|b| (b.start, b.end)).collect()
}

#[test]
fn one_block_with_32_bit_cells_as_on_a_pi_3() {
    let blob = root(1, 1)
        .begin("cpus")
        .end()
        .memory("memory@0", &[0, 0x3c00_0000])
        .begin("soc")
        .cells("reg", &[0x7e00_0000, 0x100_0000])
        .end()
        .end()
        .finish();
    assert_eq!(blocks(&blob), [(0, 0x3c00_0000)]);
}

#[test]
fn several_blocks_in_several_nodes_as_on_a_pi_4_with_8_gib() {
    // #address-cells = 2, #size-cells = 1: three cells per entry; a 4 GiB range is split.
    let blob = root(2, 1)
        .memory(
            "memory@0",
            &[0, 0, 0x3b40_0000, 0, 0x4000_0000, 0xbc00_0000],
        )
        .memory(
            "memory@100000000",
            &[1, 0, 0x8000_0000, 1, 0x8000_0000, 0x8000_0000],
        )
        // A placeholder the firmware did not fill, a disabled node and a node that is not RAM.
        .memory("memory@200000000", &[2, 0, 0])
        .begin("memory@300000000")
        .prop("device_type", b"memory\0")
        .prop("status", b"disabled\0")
        .cells("reg", &[3, 0, 0x1000_0000])
        .end()
        .begin("sram@400000000")
        .cells("reg", &[4, 0, 0x1000_0000])
        .end()
        .end()
        .finish();
    assert_eq!(
        blocks(&blob),
        [
            (0, 0x3b40_0000),
            (0x4000_0000, 0xfc00_0000),
            (0x1_0000_0000, 0x1_8000_0000),
            (0x1_8000_0000, 0x2_0000_0000)
        ]
    );
    let ram = Fdt::new(&blob).unwrap().memory().unwrap();
    let usable = ram.usable(
        &[Block::new(0, 0xfc00_0000), Block::new(1 << 32, 2 << 32)],
        2 << 20,
    );
    assert_eq!(usable.total(), (948 + 3008 + 4096) << 20);
}

#[test]
fn sixty_four_bit_cells_as_on_qemu_virt() {
    let blob = root(2, 2)
        .memory("memory@40000000", &[0, 0x4000_0000, 2, 0])
        .end()
        .finish();
    assert_eq!(blocks(&blob), [(0x4000_0000, 0x2_4000_0000)]);
}

#[test]
fn properties_by_path_with_nops_between_tokens() {
    let mut b = root(2, 2);
    b.word(NOP)
        .begin("cpus")
        .cells("timebase-frequency", &[10_000_000])
        .begin("cpu-map")
        .end()
        .begin("cpu@0")
        .prop("riscv,isa", b"rv64imafdcv_zicsr\0")
        .end()
        .word(NOP)
        .end()
        .end();
    let blob = b.finish();
    let t = Fdt::new(&blob).unwrap();
    let tb = t.property(&["cpus"], "timebase-frequency").unwrap();
    assert_eq!(tb.and_then(cells), Some(10_000_000));
    let isa = t.property(&["cpus", "cpu@"], "riscv,isa").unwrap();
    assert_eq!(isa, Some(&b"rv64imafdcv_zicsr\0"[..]));
    assert_eq!(t.property(&["cpus"], "riscv,isa").unwrap(), None);
    assert_eq!(t.property(&["soc"], "reg").unwrap(), None);
    assert!(t.memory().unwrap().is_empty());
}

#[test]
fn a_truncated_blob_is_an_error_at_every_length() {
    let blob = root(1, 1)
        .memory("memory@0", &[0, 0x1c00_0000])
        .end()
        .finish();
    for n in 0..blob.len() {
        let e = Fdt::new(&blob[..n]).unwrap_err();
        assert!(matches!(e, DtError::Truncated { .. }), "{n}: {e}");
    }
    // A header that claims less than the structure needs: the walk stops at the block's end.
    let mut short = blob.clone();
    short[36..40].copy_from_slice(&24u32.to_be_bytes()); // the root's start and one property
    let e = Fdt::new(&short).unwrap().memory().unwrap_err();
    assert!(matches!(e, DtError::PastEnd { .. }), "{e}");
}

#[test]
fn bad_magic_version_blocks_tokens_and_cells_are_named() {
    let blob = root(1, 1)
        .memory("memory@0", &[0, 0x1000_0000])
        .end()
        .finish();
    let mut bad = blob.clone();
    bad[0] = 0;
    let e = Fdt::new(&bad).unwrap_err();
    assert_eq!(e, DtError::BadMagic { found: 0x000d_feed });
    assert!(alloc::format!("{e}").contains("no device tree"));

    let mut old = blob.clone();
    old[24..28].copy_from_slice(&2u32.to_be_bytes());
    assert!(matches!(Fdt::new(&old), Err(DtError::BadVersion { .. })));

    let mut outside = blob.clone();
    outside[12..16].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
    assert!(matches!(
        Fdt::new(&outside),
        Err(DtError::BlockOutside {
            what: "strings",
            ..
        })
    ));

    let mut token = blob.clone();
    token[56..60].copy_from_slice(&7u32.to_be_bytes()); // the root's BEGIN_NODE
    assert!(matches!(
        Fdt::new(&token).unwrap().memory(),
        Err(DtError::BadToken { token: 7, .. })
    ));

    let cells3 = root(3, 1)
        .memory("memory@0", &[0, 0, 0, 1 << 20])
        .end()
        .finish();
    let e = Fdt::new(&cells3).unwrap().memory().unwrap_err();
    assert_eq!(
        e,
        DtError::BadCells {
            address: 3,
            size: 1
        }
    );

    let ragged = root(2, 1)
        .memory("memory@0", &[0, 0, 1 << 20, 0])
        .end()
        .finish();
    assert!(matches!(
        Fdt::new(&ragged).unwrap().memory(),
        Err(DtError::BadReg { len: 16, .. })
    ));

    let wraps = root(2, 2)
        .memory("memory@0", &[0xffff_ffff, 0xffff_0000, 0, 0x10_0000])
        .end()
        .finish();
    assert!(matches!(
        Fdt::new(&wraps).unwrap().memory(),
        Err(DtError::BadBlock { .. })
    ));
}

#[test]
fn nesting_is_capped_and_a_missing_end_is_found() {
    let mut b = root(1, 1);
    for _ in 0..MAX_DEPTH + 1 {
        b.begin("n");
    }
    let blob = b.finish();
    assert!(matches!(
        Fdt::new(&blob).unwrap().memory(),
        Err(DtError::TooDeep { .. })
    ));
    // Nodes left open at the END token.
    let open = root(1, 1).finish();
    assert!(matches!(
        Fdt::new(&open).unwrap().memory(),
        Err(DtError::BadToken { token: END, .. })
    ));
}

/// Every byte of a valid blob replaced by a few values: never a panic or an endless walk.
#[test]
fn corrupted_blobs_never_panic() {
    let mut b = root(2, 1);
    b.memory(
        "memory@0",
        &[0, 0, 0x3b40_0000, 0, 0x4000_0000, 0xbc00_0000],
    )
    .begin("cpus")
    .cells("timebase-frequency", &[19_200_000])
    .end()
    .end();
    let blob = b.finish();
    for i in 0..blob.len() {
        for v in [0x00, 0x01, 0x03, 0x09, 0x7f, 0xff] {
            let mut m = blob.clone();
            m[i] = v;
            if let Ok(t) = Fdt::new(&m) {
                let _ = t.memory();
                let _ = t.property(&["cpus"], "timebase-frequency");
            }
        }
    }
}

#[test]
fn dma_ranges_of_the_pi_4s_emmc2bus() {
    let cells = |c: &[u32]| c.iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
    // The B0 stepping's window (bcm2711.dtsi): bus 0xc0000000 reaches the first GiB.
    let b0 = dma_range(&cells(&[0, 0xc000_0000, 0, 0, 0x4000_0000])).unwrap();
    assert_eq!(
        b0,
        DmaRange {
            bus: 0xc000_0000,
            phys: 0,
            size: 0x4000_0000
        }
    );
    assert_eq!(b0.bus_address(0x1000, 0x1000), Some(0xc000_1000));
    assert_eq!(b0.bus_address(0x3fff_f000, 0x2000), None, "past the window");
    // What the firmware writes for the C0 stepping: 1:1 below 0xfc000000.
    let c0 = dma_range(&cells(&[0, 0, 0, 0, 0xfc00_0000])).unwrap();
    assert_eq!(c0.bus_address(0x8000_0000, 4096), Some(0x8000_0000));
    // A 32-bit tree's parent address of one cell.
    let one = dma_range(&cells(&[0, 0xc000_0000, 0, 0x4000_0000])).unwrap();
    assert_eq!((one.bus, one.phys, one.size), (0xc000_0000, 0, 0x4000_0000));
    assert_eq!(dma_range(&[0; 12]), None);
    assert_eq!(dma_range(&[]), None);
}
