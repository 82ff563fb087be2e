//! `fdt`: the device tree the firmware hands over, through every query the kernel makes of it
//! (`kernel/src/platform/dtb.rs` and `ram.rs`): the header's size, the blocks, the memory nodes
//! and what is usable of them, the timer's frequency, the Pi 4's `dma-ranges`, the RISC-V ISA
//! string; and, for small trees, a walk over every node and property.

use super::peak::bounded;
use drivers::fdt::{self, Fdt, Item};
use drivers::ram::Block;

/// The most one run may allocate: nothing (the parser works in place on the blob; the memory
/// blocks are a fixed array).
pub const MAX_ALLOC: usize = 0;

/// Query the tree as the kernel does at boot.
pub fn run(data: &[u8]) {
    bounded("fdt", MAX_ALLOC, || query(data));
}

fn query(data: &[u8]) {
    let Ok(size) = fdt::total_size(data) else {
        return;
    };
    assert!(
        size >= fdt::HEADER_LEN,
        "fdt: a size below the header's passed"
    );
    let Ok(t) = Fdt::new(data) else { return };
    if let Ok(ram) = t.memory() {
        let total = ram.total();
        // Clipped to two windows, as a board's normal memory regions, at a 2 MiB alignment.
        let allowed = [Block::new(0, 1 << 30), Block::new(1 << 32, 1 << 34)];
        let usable = ram.usable(&allowed, 2 << 20);
        let left: u64 = usable.as_slice().iter().map(|b| b.len()).sum();
        assert!(left <= total, "fdt: usable RAM exceeds the tree's");
        for w in usable.as_slice().windows(2) {
            assert!(
                w[0].end < w[1].start,
                "fdt: usable blocks overlap or are unsorted"
            );
        }
    }
    let timebase = t.property(&["cpus"], "timebase-frequency");
    let _ = timebase.map(|v| v.and_then(fdt::cells));
    if let Ok(Some(v)) = t.property(&["emmc2bus"], "dma-ranges") {
        if let Some(r) = fdt::dma_range(v) {
            let _ = r.bus_address(r.phys, r.size);
            let _ = r.bus_address(u64::MAX, 2);
        }
    }
    let _ = t.property(&["cpus", "cpu@"], "riscv,isa");
    // A walk over everything, with its invariants, for small trees only: each walk is a pass
    // over the structure block, and the kernel's four queries above are already four.
    if data.len() <= 4096 {
        walk_all(&t, data.len());
    }
}

/// Every step of a walk: offsets inside the blob, at most one step per 4-byte word.
fn walk_all(t: &Fdt, len: usize) {
    let mut items = 0usize;
    let _ = t.walk(|item| {
        items += 1;
        if let Item::Prop { value, offset, .. } = item {
            assert!(offset <= len, "fdt: a property offset outside the blob");
            let _ = fdt::cells(value);
        }
        Ok(true)
    });
    assert!(items <= len / 4 + 1, "fdt: more steps than 4-byte words");
}
