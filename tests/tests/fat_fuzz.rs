//! Robustness: thousands of random corruptions (fixed seeds) of the boot sector, partition table, FAT
//! and directory areas of small good images, and truncations at every kind of length. Mount, list,
//! open and read must only ever return `Ok` or `Err`: a panic fails the test naming the case, and a
//! watchdog fails it if a case does not finish (an unbounded loop).

mod fat_common;

use drivers::block::CountingDevice;
use drivers::fat::{FatError, FormatError, Volume};
use fat_common::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Byte ranges worth corrupting: (offset, length).
fn regions(d: &SparseDisk, base: u64) -> Vec<(u64, u64)> {
    let l = Layout::read(d, base);
    let mut r = vec![(base, 96), (base + 510, 2)];
    if base != 0 {
        r.push((0x1BE, 66));
    }
    // The used part of the first FAT.
    let used = (0..4096u32)
        .filter(|&c| d.u32_at(l.fat_entry(c)) != 0)
        .max()
        .unwrap_or(2);
    r.push((l.fat_entry(0), u64::from(used + 16) * 4));
    // Every directory cluster.
    let mut dev = d.clone();
    let vol = Volume::mount(&mut dev).unwrap();
    let mut dirs = vec![l.root_cluster];
    for e in vol.list_dir(&mut dev, "/").unwrap() {
        if e.is_dir {
            dirs.push(e.first_cluster);
        }
    }
    for first in dirs {
        for c in l.chain(d, first) {
            r.push((l.cluster(c), l.cluster_bytes()));
        }
    }
    r
}

/// Apply 1..=6 random corruptions inside `regions`; returns what to restore.
fn corrupt(
    d: &mut SparseDisk,
    regions: &[(u64, u64)],
    rng: &mut Rng,
    clusters: u32,
) -> Vec<(u64, Vec<u8>)> {
    let mut undo = Vec::new();
    for _ in 0..1 + rng.below(6) {
        let (start, len) = regions[rng.below(regions.len() as u64) as usize];
        let at = start + rng.below(len);
        let new: Vec<u8> = match rng.below(4) {
            0 => vec![rng.next_u64() as u8],
            1 => vec![d.get(at, 1)[0] ^ (1 << rng.below(8))],
            2 => vec![
                [0x00, 0xFF, 0xE5, 0x05, 0x0F, 0x2E, 0x40, 0x41, 0x80, 0x20]
                    [rng.below(10) as usize],
            ],
            _ => {
                let v: u32 = match rng.below(8) {
                    0 => 0,
                    1 => 1,
                    2 => 0x0FFF_FFF7,
                    3 => 0x0FFF_FFF8 + rng.below(8) as u32,
                    4 => rng.next_u64() as u32,
                    5 => clusters + rng.below(4) as u32,
                    _ => 2 + rng.below(u64::from(clusters).min(400)) as u32,
                };
                let at = at & !3;
                undo.push((at, d.get(at, 4)));
                d.patch(at, &v.to_le_bytes());
                continue;
            }
        };
        undo.push((at, d.get(at, new.len())));
        d.patch(at, &new);
    }
    undo
}

fn restore(d: &mut SparseDisk, undo: Vec<(u64, Vec<u8>)>) {
    for (at, old) in undo.into_iter().rev() {
        d.patch(at, &old);
    }
}

/// Everything a kernel would do with the volume. Returns the number of device requests.
fn exercise(d: &mut SparseDisk, rng: &mut Rng) -> u64 {
    let mut dev = CountingDevice::new(d);
    if let Ok(vol) = Volume::mount(&mut dev) {
        use_volume(&vol, &mut dev, rng);
    }
    dev.requests()
}

/// List, open and read through an already mounted volume.
fn use_volume<D: drivers::block::BlockDevice>(vol: &Volume, dev: &mut D, rng: &mut Rng) {
    let mut paths: Vec<String> = [
        SMALL_MODEL,
        "/LMBOOT.TXT",
        "/empty.dat",
        "/many/file number 07.txt",
        "/models/none",
        "/a/b",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for dir in ["/", "/models", "/many"] {
        if let Ok(list) = vol.list_dir(dev, dir) {
            for e in list.iter().take(40) {
                let p = format!("{}/{}", dir.trim_end_matches('/'), e.name);
                if e.is_dir {
                    let _ = vol.list_dir(dev, &p);
                }
                paths.push(p);
            }
        }
    }
    let mut buf = vec![0u8; 64 << 10];
    for p in &paths {
        let Ok(f) = vol.open(dev, p) else { continue };
        let size = f.size();
        let n = size.min(buf.len() as u64) as usize;
        let _ = f.read_at(dev, 0, &mut buf[..n]);
        let _ = f.read_at(dev, size - n as u64, &mut buf[..n]);
        if size > 0 {
            let off = rng.below(size);
            let len = rng.below((size - off).min(5000) + 1) as usize;
            let _ = f.read_at(dev, off, &mut buf[..len]);
        }
        assert!(matches!(
            f.read_at(dev, size, &mut buf[..1]),
            Err(FatError::Format(FormatError::ReadPastEnd { .. }))
        ));
    }
}

/// Run `cases` under a watchdog: a panic or a case running past `limit` fails the test with its index.
fn watched(name: &str, limit: Duration, cases: impl FnOnce(&AtomicU64) + Send + 'static) {
    let current = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel();
    let c = current.clone();
    let worker = std::thread::spawn(move || {
        cases(&c);
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let case = current.load(Ordering::SeqCst);
            let _ = worker.join();
            panic!("{name}: case {case} panicked (see the message above)");
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "{name}: case {} did not finish in {limit:?}: unbounded loop?",
                current.load(Ordering::SeqCst)
            )
        }
    }
}

fn fuzz(name: &'static str, partitioned: bool, cases: u64, seed: u64) {
    let mut d = small_image(partitioned);
    let base = if partitioned { 2048 * 512 } else { 0 };
    let regions = regions(&d, base);
    let clusters = Layout::read(&d, base).clusters();
    watched(name, Duration::from_secs(300), move |current| {
        let mut max_requests = 0;
        let (mut mounted, mut opened) = (0, 0);
        for case in 0..cases {
            current.store(case, Ordering::SeqCst);
            let mut rng = Rng::new(seed ^ case.wrapping_mul(0x9E37_79B9));
            let undo = corrupt(&mut d, &regions, &mut rng, clusters);
            let requests = exercise(&mut d, &mut rng);
            max_requests = max_requests.max(requests);
            if let Ok(vol) = Volume::mount(&mut d) {
                mounted += 1;
                opened += u32::from(vol.open(&mut d, SMALL_MODEL).is_ok());
            }
            restore(&mut d, undo);
        }
        println!(
            "{name}: {cases} cases, {mounted} mounted, {opened} opened the model, at most {max_requests} requests"
        );
        // The image is whole again.
        let vol = Volume::mount(&mut d).unwrap();
        check_file(&vol, &mut d, SMALL_MODEL, &bytes(7, SMALL_MODEL_LEN), 1);
    });
}

#[test]
fn random_corruptions_bare() {
    fuzz("bare", false, 4000, 0x1234_5678);
}

#[test]
fn random_corruptions_partitioned() {
    fuzz("partitioned", true, 2000, 0xF00D_FA32);
}

#[test]
fn truncations() {
    let d0 = small_image(false);
    let l = Layout::read(&d0, 0);
    let total = d0.len_blocks();
    let data = l.data_sectors_start();
    let mut lens = vec![
        0,
        1,
        2,
        l.reserved - 1,
        l.reserved,
        l.reserved + 1,
        data - 1,
        data,
        data + 1,
        total - 1,
        total,
    ];
    let mut rng = Rng::new(77);
    lens.extend((0..200).map(|_| rng.below(total + 1)));
    let vol = Volume::mount(&mut d0.clone()).unwrap();
    watched("truncations", Duration::from_secs(300), move |current| {
        for (i, &n) in lens.iter().enumerate() {
            current.store(i as u64, Ordering::SeqCst);
            let mut d = d0.clone();
            d.set_len_blocks(n);
            exercise(&mut d, &mut rng);
            // Mounted while whole, then shrunk: reads fail cleanly.
            use_volume(&vol, &mut d, &mut rng);
        }
    });
}
