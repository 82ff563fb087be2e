//! `fat`: the FAT32 reader over a card whose first bytes are the input and the rest zeros.
//!
//! The input is the start of a volume (a `mkfs.fat` image with its trailing zeros cut: boot
//! sector, FATs, directories and the first files all sit in its first tens of KiB) and the device
//! reads zeros beyond it up to [`CARD_BLOCKS`]: a small input describes a whole volume, and no
//! run fills or copies a card-sized buffer, which kept the old target at 0.67 M runs in 600 s.

use super::peak::bounded;
use drivers::block::{BlockDevice, RequestError, BLOCK_SIZE};
use drivers::fat::Volume;

/// The card's size in blocks (1 MiB, the seed volume's size).
pub const CARD_BLOCKS: u64 = 2048;

/// The most one run may allocate: directory listings and extent lists of a 1 MiB volume, and the
/// path strings.
pub const MAX_ALLOC: usize = 1 << 20;

/// The input, then zeros, as a block device.
#[derive(Debug)]
pub struct ZeroTail<'a>(pub &'a [u8]);

impl BlockDevice for ZeroTail<'_> {
    type Error = RequestError;

    fn num_blocks(&self) -> u64 {
        CARD_BLOCKS.max(self.0.len().div_ceil(BLOCK_SIZE) as u64)
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), RequestError> {
        drivers::block::check_request(lba, buf.len(), self.num_blocks())?;
        let start = (lba as usize).saturating_mul(BLOCK_SIZE);
        let have = self.0.get(start..).unwrap_or(&[]);
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        buf[n..].fill(0);
        Ok(())
    }
}

/// Mount, list the root, open and read (the first 4 KiB of) each entry, list each as a
/// directory, open the paths the kernel opens.
pub fn run(data: &[u8]) {
    bounded("fat", MAX_ALLOC, || mount(data));
}

fn mount(data: &[u8]) {
    let mut dev = ZeroTail(data);
    let Ok(vol) = Volume::mount(&mut dev) else {
        return;
    };
    let mut buf = [0u8; 4096];
    if let Ok(entries) = vol.list_dir(&mut dev, "/") {
        for e in entries.iter().take(16) {
            let path = format!("/{}", e.name);
            if let Ok(f) = vol.open(&mut dev, &path) {
                let n = f.size().min(buf.len() as u64) as usize;
                let _ = f.read_at(&mut dev, 0, &mut buf[..n]);
                // The last bytes too: the end of the extent list.
                let tail = f.size().saturating_sub(512);
                let m = (f.size() - tail) as usize;
                let _ = f.read_at(&mut dev, tail, &mut buf[..m]);
            }
            let _ = vol.list_dir(&mut dev, &path);
        }
    }
    let _ = vol.open(&mut dev, "/model.gguf");
    let _ = vol.open(&mut dev, "/a/b/c/lmboot.txt");
}
