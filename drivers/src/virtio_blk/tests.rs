//! The driver against a fake virtio-blk device in RAM: a transport that plays the device's side of
//! the split virtqueue (descriptor chains, the available and used rings) over a disk image, and can
//! fail requests with the I/O error status.

use super::*;
use alloc::vec;
use alloc::vec::Vec;
use virtio_drivers::transport::{DeviceStatus, InterruptStatus};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// The fake device: its disk, its queue's addresses, and the blocks it fails.
struct FakeBlk {
    disk: Vec<u8>,
    status: DeviceStatus,
    /// Size, descriptor table, available ring, used ring.
    queue: Option<(usize, usize, usize, usize)>,
    last_avail: u16,
    /// Requests touching this LBA end with VIRTIO_BLK_S_IOERR.
    bad_lba: Option<u64>,
}

impl FakeBlk {
    fn new(blocks: usize) -> Self {
        let disk = (0..blocks * 512).map(|i| (i * 7 + i / 512) as u8).collect();
        FakeBlk {
            disk,
            status: DeviceStatus::empty(),
            queue: None,
            last_avail: 0,
            bad_lba: None,
        }
    }

    /// Serve every request the driver made available, in order.
    fn serve(&mut self) {
        let Some((size, desc, avail, used)) = self.queue else {
            return;
        };
        // SAFETY: the addresses the driver gave in `queue_set`, identity-mapped host memory it
        // keeps while the queue is set; the device side only touches what virtio lets it.
        unsafe {
            let avail_idx = core::ptr::read_volatile((avail + 2) as *const u16);
            while self.last_avail != avail_idx {
                let slot = self.last_avail as usize % size;
                let head = core::ptr::read_volatile((avail + 4 + 2 * slot) as *const u16);
                let len = self.request(desc, head);
                let used_idx = core::ptr::read_volatile((used + 2) as *const u16);
                let entry = used + 4 + 8 * (used_idx as usize % size);
                core::ptr::write_volatile(entry as *mut u32, head as u32);
                core::ptr::write_volatile((entry + 4) as *mut u32, len);
                core::ptr::write_volatile((used + 2) as *mut u16, used_idx.wrapping_add(1));
                self.last_avail = self.last_avail.wrapping_add(1);
            }
        }
    }

    /// One request's chain from descriptor `head`: header, data, status. Returns the bytes
    /// written for the driver.
    ///
    /// # Safety
    /// `desc` is the driver's descriptor table and the chain's buffers are live.
    unsafe fn request(&mut self, desc: usize, head: u16) -> u32 {
        let mut parts = Vec::new();
        let mut i = head;
        loop {
            let d = desc + 16 * i as usize;
            // SAFETY: the caller's guarantee.
            let (addr, len, flags, next) = unsafe {
                (
                    core::ptr::read_volatile(d as *const u64) as usize,
                    core::ptr::read_volatile((d + 8) as *const u32) as usize,
                    core::ptr::read_volatile((d + 12) as *const u16),
                    core::ptr::read_volatile((d + 14) as *const u16),
                )
            };
            parts.push((addr, len));
            if flags & 1 == 0 {
                break;
            }
            i = next;
        }
        let (hdr, status) = (parts[0].0, parts[parts.len() - 1].0);
        // SAFETY: the header is 16 device-readable bytes; the status one device-writable byte.
        let (kind, sector) = unsafe {
            (
                core::ptr::read_volatile(hdr as *const u32),
                core::ptr::read_volatile((hdr + 8) as *const u64),
            )
        };
        let data = &parts[1..parts.len() - 1];
        let bytes: usize = data.iter().map(|p| p.1).sum();
        let blocks = sector..sector + (bytes / 512) as u64;
        let ok = self.bad_lba.is_none_or(|b| !blocks.contains(&b))
            && (sector as usize * 512 + bytes) <= self.disk.len();
        let mut at = sector as usize * 512;
        let mut written = 1;
        for &(addr, len) in data.iter().filter(|_| ok) {
            let disk = &mut self.disk[at..at + len];
            // SAFETY: a data buffer of the chain, `len` bytes.
            let buf = unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, len) };
            match kind {
                0 => {
                    buf.copy_from_slice(disk);
                    written += len as u32;
                }
                1 => disk.copy_from_slice(buf),
                _ => {}
            }
            at += len;
        }
        // SAFETY: the status byte.
        unsafe { core::ptr::write_volatile(status as *mut u8, if ok { 0 } else { 1 }) };
        written
    }
}

impl Transport for FakeBlk {
    fn device_type(&self) -> DeviceType {
        DeviceType::Block
    }
    fn read_device_features(&mut self) -> u64 {
        // VIRTIO_F_VERSION_1 only: no indirect descriptors, so a request takes three entries.
        1 << 32
    }
    fn write_driver_features(&mut self, _features: u64) {}
    fn max_queue_size(&mut self, _queue: u16) -> u32 {
        16
    }
    fn notify(&mut self, _queue: u16) {
        self.serve();
    }
    fn get_status(&self) -> DeviceStatus {
        self.status
    }
    fn set_status(&mut self, status: DeviceStatus) {
        self.status = status;
    }
    fn set_guest_page_size(&mut self, _size: u32) {}
    fn requires_legacy_layout(&self) -> bool {
        false
    }
    fn queue_set(&mut self, _q: u16, size: u32, desc: PhysAddr, avail: PhysAddr, used: PhysAddr) {
        self.queue = Some((size as usize, desc as usize, avail as usize, used as usize));
    }
    fn queue_unset(&mut self, _queue: u16) {
        self.queue = None;
    }
    fn queue_used(&mut self, _queue: u16) -> bool {
        self.queue.is_some()
    }
    fn ack_interrupt(&mut self) -> InterruptStatus {
        InterruptStatus::empty()
    }
    fn read_config_generation(&self) -> u32 {
        0
    }
    fn read_config_space<T: FromBytes + IntoBytes>(
        &self,
        offset: usize,
    ) -> virtio_drivers::Result<T> {
        // capacity (u64, in blocks) first; the rest of the config space reads as zero.
        let mut config = [0u8; 64];
        config[..8].copy_from_slice(&((self.disk.len() / 512) as u64).to_le_bytes());
        let n = core::mem::size_of::<T>();
        T::read_from_bytes(&config[offset..offset + n])
            .map_err(|_| virtio_drivers::Error::ConfigSpaceMissing)
    }
    fn write_config_space<T: IntoBytes + Immutable>(
        &mut self,
        _offset: usize,
        _value: T,
    ) -> virtio_drivers::Result<()> {
        Ok(())
    }
}

fn device(blocks: usize) -> (VirtioBlock<FakeBlk>, Vec<u8>) {
    let fake = FakeBlk::new(blocks);
    let disk = fake.disk.clone();
    (VirtioBlock::new(fake).expect("a block device"), disk)
}

#[test]
fn synchronous_reads_return_the_disk() {
    let (mut dev, disk) = device(64);
    assert_eq!(dev.num_blocks(), 64);
    let mut buf = vec![0u8; 8 * 512];
    dev.read_blocks(3, &mut buf).unwrap();
    assert_eq!(buf, disk[3 * 512..11 * 512]);
}

#[test]
fn queued_reads_complete_each_with_its_token() {
    let (mut dev, disk) = device(64);
    assert_eq!(dev.queue_depth(), SLOTS);
    let mut bufs = vec![vec![0u8; 2 * 512]; 8];
    let mut queued = Vec::new();
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: each buffer outlives its request: all are polled below before they drop.
        match unsafe { dev.submit_read(2 * i as u64, b.as_mut_ptr(), b.len()) }.unwrap() {
            Submitted::Queued(t) => queued.push(t),
            Submitted::Done => panic!("virtio-blk queues its reads"),
        }
    }
    let mut done = Vec::new();
    while let Some((t, r)) = dev.poll_read() {
        r.unwrap();
        done.push(t);
    }
    done.sort();
    queued.sort();
    assert_eq!(done, queued);
    for (i, b) in bufs.iter().enumerate() {
        assert_eq!(b[..], disk[2 * i * 512..(2 * i + 2) * 512], "request {i}");
    }
}

#[test]
fn a_failing_block_is_an_error_naming_it() {
    let mut fake = FakeBlk::new(64);
    fake.bad_lba = Some(5);
    let mut dev = VirtioBlock::new(fake).unwrap();
    let mut buf = vec![0u8; 4 * 512];
    let e = dev.read_blocks(4, &mut buf).unwrap_err();
    assert_eq!((e.op, e.lba, e.blocks), (Op::Read, 4, 4));
    dev.read_blocks(8, &mut buf).unwrap();
}

#[test]
fn writes_reach_the_disk_and_out_of_range_requests_are_refused() {
    let (mut dev, _) = device(16);
    let data = vec![0xa5u8; 2 * 512];
    dev.write_blocks(6, &data).unwrap();
    dev.flush().unwrap();
    let mut back = vec![0u8; 2 * 512];
    dev.read_blocks(6, &mut back).unwrap();
    assert_eq!(back, data);
    assert!(dev.read_blocks(15, &mut back).is_err());
}
