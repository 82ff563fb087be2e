//! The device tree the firmware or QEMU passes in: only the RAM size is read.

/// (base, size) of the first RAM region, if the blob at `addr` is a valid device tree with one.
pub fn ram(addr: usize) -> Option<(u64, u64)> {
    if addr == 0 {
        return None;
    }
    // SAFETY: `addr` is where the boot protocol put the device tree; `from_ptr` checks the magic
    // and sizes before reading further.
    let fdt = unsafe { fdt::Fdt::from_ptr(addr as *const u8) }.ok()?;
    let node = fdt.find_node("/memory")?;
    let region = node.reg()?.next()?;
    Some((region.starting_address as u64, region.size? as u64))
}

/// The timer frequency (`/cpus/timebase-frequency`), if present.
pub fn timebase(addr: usize) -> Option<u64> {
    if addr == 0 {
        return None;
    }
    // SAFETY: as in `ram`.
    let fdt = unsafe { fdt::Fdt::from_ptr(addr as *const u8) }.ok()?;
    let cpus = fdt.find_node("/cpus")?;
    let p = cpus.property("timebase-frequency")?;
    p.as_usize().map(|v| v as u64)
}

/// The first hart's ISA string (`riscv,isa` of the first `/cpus/cpu@…` node), if present.
pub fn riscv_isa(addr: usize) -> Option<&'static str> {
    if addr == 0 {
        return None;
    }
    // SAFETY: as in `ram`; the blob stays in place for the kernel's life.
    let fdt = unsafe { fdt::Fdt::from_ptr(addr as *const u8) }.ok()?;
    let cpu = fdt.cpus().next()?;
    cpu.property("riscv,isa")?.as_str()
}
