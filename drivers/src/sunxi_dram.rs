//! The DRAM size of an Allwinner H3 / H2+, read from its DRAM controller. U-Boot's `go` hands
//! the kernel no device tree, but U-Boot's SPL has already found the DRAM's geometry (rank
//! count, banks, row bits, page size) and written it to the controller's configuration register,
//! MCTL_COM CR at 0x01c6_2000: bit 0 dual rank, bit 2 eight banks (else four), bits 7:4 row bits
//! less one, bits 11:8 log2(page size in bytes) less 3 (U-Boot's `mctl_set_cr`, `MCTL_CR_*` in
//! `dram_sun8i_h3.h`). The size is ranks × 2^(row bits + bank bits) × page size, as U-Boot's
//! `mctl_calc_rank_size` computes it; QEMU's orangepi-pc models the register as U-Boot leaves it.

/// The H3's DRAM controller (MCTL_COM); CR is its first register.
pub const MCTL_COM_BASE: usize = 0x01c6_2000;

/// DRAM is mapped from here on the H3 (up to 2 GiB, to 0xc000_0000).
pub const DRAM_BASE: u64 = 0x4000_0000;
pub const DRAM_MAX: u64 = 2 << 30;

/// The size in bytes that CR `cr` describes, or why it cannot be a configured H3 controller
/// (a controller U-Boot did not set up reads 0 or garbage).
pub fn size_from_cr(cr: u32) -> Result<u64, &'static str> {
    let ranks = if cr & 1 != 0 { 2 } else { 1 };
    let bank_bits = if cr & (1 << 2) != 0 { 3 } else { 2 };
    let row_bits = ((cr >> 4) & 0xf) + 1;
    let page_log2 = ((cr >> 8) & 0xf) + 3;
    if cr & (0x7 << 16) == 0 {
        return Err("no DRAM type set (the controller is not configured)");
    }
    if !(12..=16).contains(&row_bits) || !(9..=14).contains(&page_log2) {
        return Err("row bits or page size out of range");
    }
    let size = ranks << (row_bits + bank_bits + page_log2);
    if size > DRAM_MAX {
        return Err("more than the 2 GiB the H3 maps");
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CR as U-Boot's `mctl_set_cr` writes it: BL8, DDR3, 2T, interleaved, and the geometry.
    fn cr(dual: bool, eight_banks: bool, full_width: bool, page: u32, rows: u32) -> u32 {
        (0x4 << 20)
            | (0x3 << 16)
            | ((full_width as u32) << 12)
            | ((page.ilog2() + 1 - 4) << 8)
            | ((rows - 1) << 4)
            | ((eight_banks as u32) << 2)
            | dual as u32
    }

    #[test]
    fn the_sizes_of_the_boards_of_the_kind() {
        // Orange Pi Zero 256 MiB: one 16-bit DDR3 chip, 8 banks, 2 KiB pages, 14 rows.
        assert_eq!(size_from_cr(cr(false, true, false, 2048, 14)), Ok(256 << 20));
        // 512 MiB: 15 rows.
        assert_eq!(size_from_cr(cr(false, true, false, 2048, 15)), Ok(512 << 20));
        // Orange Pi PC, 1 GiB: 32-bit bus, 4 KiB pages, 15 rows.
        assert_eq!(size_from_cr(cr(false, true, true, 4096, 15)), Ok(1 << 30));
        // Dual rank doubles it.
        assert_eq!(size_from_cr(cr(true, true, true, 4096, 15)), Ok(2 << 30));
    }

    #[test]
    fn an_unconfigured_or_impossible_controller_is_refused() {
        assert!(size_from_cr(0).is_err());
        assert!(size_from_cr(0xffff_ffff).is_err());
        assert!(size_from_cr(cr(true, true, true, 8192, 16)).is_err(), "4 GiB");
        assert!(size_from_cr(cr(false, false, false, 512, 11)).is_err(), "11 row bits");
    }
}
