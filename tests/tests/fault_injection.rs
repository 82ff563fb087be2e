//! The runtime's whole run (mount, config, model, page cache, generation) on the host, over a RAM
//! disk with injected faults: transient CRC errors and timeouts are retried and change nothing; a
//! permanently bad block and a card that vanishes end the run with an error naming what failed.

mod common;

use drivers::block::{BlockDevice, Fault, FaultyDevice, RamDisk, Retry, WriteBlocks};
use runtime::console::Console;
use runtime::platform::Host;
use runtime::run::{run, BEGIN_OUTPUT, END_OUTPUT};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

struct Capture(Vec<u8>);
impl Console for Capture {
    fn write_bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
}

/// Counts the errors that pass through (below the retry layer).
struct CountErrors<D> {
    inner: D,
    errors: Arc<AtomicU64>,
}
impl<D: BlockDevice> BlockDevice for CountErrors<D> {
    type Error = D::Error;
    fn num_blocks(&self) -> u64 {
        self.inner.num_blocks()
    }
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        let r = self.inner.read_blocks(lba, buf);
        if r.is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

impl<D: WriteBlocks> WriteBlocks for CountErrors<D> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), D::Error> {
        self.inner.write_blocks(lba, buf)
    }
}

const TOKENS: usize = 6;

/// A card image (MBR + FAT32) with the default model and a greedy prompt, in memory.
fn card() -> &'static [u8] {
    static CARD: OnceLock<Vec<u8>> = OnceLock::new();
    CARD.get_or_init(|| {
        let s = xtask::Settings {
            prompt: "Once upon a time".into(),
            n: TOKENS,
            ..Default::default()
        };
        let img = std::env::temp_dir().join(format!("lmboot-faults-{}.img", std::process::id()));
        let cfg = s.config_text(xtask::MODEL_ON_CARD);
        use xtask::image::Content;
        let model = common::model_path();
        xtask::image::make_image(
            &img,
            &[
                ("lmboot.txt", Content::Bytes(cfg.as_bytes())),
                (xtask::MODEL_ON_CARD, Content::File(&model)),
            ],
            0,
        )
        .unwrap();
        let bytes = std::fs::read(&img).unwrap();
        let _ = std::fs::remove_file(&img);
        bytes
    })
}

/// Run the kernel on `dev`; (result, UART text).
fn boot<D: WriteBlocks + Send>(dev: D) -> (Result<(), String>, String)
where
    D::Error: Send,
{
    boot_with_heap(dev, 1 << 30)
}

/// [`boot`] on a board with `heap` bytes of heap free.
fn boot_with_heap<D: WriteBlocks + Send>(dev: D, heap: u64) -> (Result<(), String>, String)
where
    D::Error: Send,
{
    let mut con = Capture(vec![]);
    let r = run(dev, &mut con, &Host::new(heap)).map_err(|e| e.to_string());
    (r, String::from_utf8_lossy(&con.0).into_owned())
}

fn text(uart: &str) -> &str {
    let s = uart.find(BEGIN_OUTPUT).expect("output marker") + BEGIN_OUTPUT.len() + 1;
    let e = uart[s..]
        .find(&format!("\n{END_OUTPUT}"))
        .expect("end marker");
    &uart[s..s + e]
}

#[test]
fn transient_faults_are_retried_and_change_nothing() {
    let (r, clean) = boot(RamDisk::new(card().to_vec()));
    r.unwrap();
    // The host runner prints the same text (the runtime's run is the same code as on the boards).
    let s = xtask::Settings {
        prompt: "Once upon a time".into(),
        n: TOKENS,
        ..Default::default()
    };
    let host = std::process::Command::new(xtask::build_host().unwrap())
        .arg("--model")
        .arg(common::model_path())
        .args(s.host_args())
        .output()
        .unwrap();
    assert_eq!(
        text(&clean),
        String::from_utf8_lossy(&host.stdout).trim_end_matches('\n')
    );

    let errors = Arc::new(AtomicU64::new(0));
    let faulty = FaultyDevice::new(
        RamDisk::new(card().to_vec()),
        &[
            Fault::TransientCrc { every: 5 },
            Fault::TransientTimeout { every: 7 },
        ],
    );
    let dev = Retry::new(
        CountErrors {
            inner: faulty,
            errors: errors.clone(),
        },
        3,
    );
    let (r, uart) = boot(dev);
    r.unwrap();
    let n = errors.load(Ordering::Relaxed);
    eprintln!("{n} transient faults injected and retried");
    assert!(n > 50, "too few faults injected: {n}");
    assert_eq!(text(&uart), text(&clean));
}

/// The first block of the model file on the card.
fn model_lba() -> u64 {
    let mut dev = RamDisk::new(card().to_vec());
    let f = drivers::fat::open(&mut dev, xtask::MODEL_ON_CARD).unwrap();
    f.extents()[0].lba
}

#[test]
fn a_permanently_bad_block_is_an_error_naming_it() {
    let bad = model_lba() + 100_000;
    let dev = Retry::new(
        FaultyDevice::new(
            RamDisk::new(card().to_vec()),
            &[Fault::BadBlock { lba: bad }],
        ),
        3,
    );
    let (r, uart) = boot(dev);
    let e = r.unwrap_err();
    eprintln!("{e}");
    assert!(e.contains(&format!("LBA {bad}")), "{e}");
    assert!(e.contains("failed 3 times"), "{e}");
    assert!(
        !uart.contains(BEGIN_OUTPUT),
        "generation should not have started"
    );
}

#[test]
fn a_vanishing_card_ends_the_run_cleanly() {
    for after in [1u64, 10, 200] {
        let dev = Retry::new(
            FaultyDevice::new(RamDisk::new(card().to_vec()), &[Fault::Vanish { after }]),
            3,
        );
        let (r, _) = boot(dev);
        let e = r.unwrap_err();
        assert!(e.contains("card removed"), "after {after} requests: {e}");
    }
}

#[test]
fn a_heap_too_small_for_the_buffers_is_refused_before_allocating() {
    let (r, uart) = boot_with_heap(RamDisk::new(card().to_vec()), 5 << 20);
    let e = r.unwrap_err();
    assert!(
        e.starts_with("memory: the KV cache for ")
            && e.contains(" and the buffers (")
            && e.ends_with("need more than the 5 MiB of heap free (4 MiB kept in reserve): lower ctx in /lmboot.txt"),
        "{e}"
    );
    assert!(!uart.contains("memory: KV cache"), "{uart}");
}
