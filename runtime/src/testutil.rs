//! Test support shared by the page cache's and the I/O core's tests: a sequential scan with
//! read-ahead hints and random reads with random hints, each checked against the file's bytes.

use alloc::vec;
use inference::storage::Storage;

/// Read pages `first..` of `data` in order through `c`, announcing the next three pages before
/// each read; every page must equal the file's bytes.
pub fn scan_with_hints<S: Storage + ?Sized>(c: &S, data: &[u8], page: usize, first: u64) {
    let mut b = vec![0u8; page];
    for p in first..(data.len() / page) as u64 {
        c.prefetch((p + 1) * page as u64, 3 * page as u64);
        c.read_at(p * page as u64, &mut b).unwrap();
        assert_eq!(b, &data[p as usize * page..(p as usize + 1) * page]);
    }
}

/// `count` reads of up to 3000 bytes at offsets from a fixed-seed generator, each preceded (when
/// `hint_every` divides the draw) by a hint for a random range; every read must equal the
/// file's bytes.
pub fn random_reads<S: Storage + ?Sized>(
    c: &S,
    data: &[u8],
    seed: u64,
    count: usize,
    hint_every: u64,
) {
    let mut x = seed;
    for _ in 0..count {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let off = (x >> 33) % data.len() as u64;
        let n = (((x >> 13) % 3000) as usize).min(data.len() - off as usize);
        if x.is_multiple_of(hint_every) {
            c.prefetch((x >> 20) % data.len() as u64, (x >> 40) % 8000);
        }
        let mut b = vec![0u8; n];
        c.read_at(off, &mut b).unwrap();
        assert_eq!(
            b,
            &data[off as usize..off as usize + n],
            "offset {off} len {n}"
        );
    }
}
