//! The first-boot self-test (`selftest = full`) on a board: QEMU `virt` (aarch64) checks every
//! kernel set it runs against scalar, prints the verdict and the `lmboot-report:` line, and
//! `cargo xtask report` decodes it; a set made to compute one operation wrong
//! (`selftest_fault = kernels`) is named, disabled, and the scalar set runs instead, printing the
//! same tokens (the sets agree bit for bit); a byte of the model file flipped on the card stops
//! the run with the error naming it, before any token.

mod common;

use common::boot::{boot_with, built, generated, host_text, line, make_image};
use std::io::{Cursor, Seek, SeekFrom, Write};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(600);

fn settings(fault: Option<&str>) -> xtask::Settings {
    let mut s = xtask::Settings {
        prompt: "The capital of France is".into(),
        n: 6,
        temp: "0".into(),
        selftest: Some("full".into()),
        ..Default::default()
    };
    if let Some(f) = fault {
        s.extra.push(("selftest_fault".into(), f.into()));
    }
    s
}

#[test]
fn the_self_test_reports_and_a_wrong_kernel_set_is_disabled() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let want = host_text(b, &model, &settings(None));
    for (name, fault) in [
        ("selftest", None),
        ("selftest-kernels", Some("kernels")),
        ("selftest-core", Some("core")),
    ] {
        let s = settings(fault);
        let img = make_image(name, &s, &model);
        let (code, uart) = boot_with(b, &img, &xtask::QemuOpts::default(), LIMIT);
        assert_eq!(code, 0, "{uart}");
        assert_eq!(
            generated(&uart),
            want,
            "{name}: kernel and lmboot-host disagree"
        );
        let model_line = line(&uart, "selftest: model ok: ");
        assert!(
            model_line.contains(" MiB read from the card (whole) in "),
            "{model_line}"
        );
        let report = line(&uart, "lmboot-report: ");
        assert!(report.len() <= report::MAX_LEN, "{report}");
        let decoded = xtask::report::decode(&uart).unwrap_or_else(|e| panic!("{e}: {report}"));
        assert!(
            decoded.contains("| board | qemu-virt-aarch64 |"),
            "{decoded}"
        );
        // virtio-blk: one way to read, its rate in `blk`.
        let card = line(&uart, "selftest: card ok: ");
        assert!(
            card.ends_with(" MB/s (the device reads one way, no PIO or DMA to choose, as virtio-blk: nothing to compare)"),
            "{card}"
        );
        assert!(report.contains(" blk="), "{report}");
        let memory = line(&uart, "selftest: memory ok: copy ");
        assert!(memory.contains(" MiB patterned in "), "{memory}");
        if fault == Some("core") {
            let cores = line(&uart, "selftest: cores FAILED: ");
            assert_eq!(
                cores,
                "selftest: cores FAILED: core 3 did not answer; the run uses cores 0-2"
            );
            assert!(
                report.contains(" cores=3/4 ") && report.contains(",cores:fail,"),
                "{report}"
            );
            assert!(
                decoded.contains("FAILED cores: a core did not start"),
                "{decoded}"
            );
            continue;
        }
        let cores = line(
            &uart,
            "selftest: cores ok: 4 cores computed the same checksum (",
        );
        assert!(report.contains(" cores=4/4 "), "{cores}\n{report}");
        let verdict = match fault {
            None => line(&uart, "selftest: kernels ok"),
            Some(_) => line(&uart, "selftest: kernels fail"),
        };
        if fault.is_none() {
            assert!(
                verdict.starts_with("selftest: kernels ok: neon equal to scalar bit for bit ("),
                "{verdict}"
            );
            assert!(verdict.ends_with("the run uses neon"), "{verdict}");
            assert!(
                report.contains(" kernels=neon auto=neon ")
                    && report.contains(
                        " verdicts=model:ok,card:ok,clocks:skip,memory:ok,kernels:ok,cores:ok,forward:ok "
                    ),
                "{report}"
            );
            assert!(decoded.contains("Every check passed."), "{decoded}");
        } else {
            let failed = line(&uart, "selftest: kernels FAILED: ");
            assert!(
                failed.contains("kernel set neon: q·k 64 wide, output 0: ")
                    && failed.ends_with("that set is disabled for this run"),
                "{failed}"
            );
            assert!(verdict.ends_with("the run uses scalar"), "{verdict}");
            assert!(uart.contains("(kernels scalar)"), "{uart}");
            assert!(
                report.contains(" kernels=scalar auto=neon ")
                    && report
                        .contains(" verdicts=model:ok,card:ok,clocks:skip,memory:ok,kernels:fail,cores:ok,forward:ok "),
                "{report}"
            );
            assert!(
                decoded.contains("FAILED kernels: a kernel set computed other numbers"),
                "{decoded}"
            );
        }
    }
}

/// Flip bit 4 of each byte in `at` of `/model.gguf` in the card image at `img` (its FAT partition
/// at 1 MiB).
fn flip_model_bytes(img: &std::path::Path, at: std::ops::Range<u64>) {
    let mut bytes = std::fs::read(img).unwrap();
    let start = xtask::image::PART_START_LBA as usize * 512;
    let mut part = bytes[start..].to_vec();
    {
        let fs =
            fatfs::FileSystem::new(Cursor::new(&mut part[..]), fatfs::FsOptions::new()).unwrap();
        let mut f = fs.root_dir().open_file("model.gguf").unwrap();
        let mut b = vec![0u8; (at.end - at.start) as usize];
        f.seek(SeekFrom::Start(at.start)).unwrap();
        std::io::Read::read_exact(&mut f, &mut b).unwrap();
        b.iter_mut().for_each(|x| *x ^= 0x10);
        f.seek(SeekFrom::Start(at.start)).unwrap();
        f.write_all(&b).unwrap();
    }
    bytes[start..].copy_from_slice(&part);
    std::fs::write(img, bytes).unwrap();
}

/// A byte of the model's weights changed on the card after `cargo xtask image` wrote it: the
/// self-test names the file and both digests, prints the report, and stops before any token.
#[test]
fn a_model_file_changed_on_the_card_stops_the_run_before_any_token() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let img = make_image("selftest-model", &settings(None), &model);
    // Deep in the weights: the header and tokenizer still read as they were.
    let len = std::fs::metadata(&model).unwrap().len();
    flip_model_bytes(&img, len - 4096..len - 4095);
    let (code, uart) = boot_with(b, &img, &xtask::QemuOpts::default(), LIMIT);
    assert_eq!(code, 1, "{uart}");
    let error = line(
        &uart,
        "error: selftest: model FAILED: /model.gguf's CRC-32 (whole) is ",
    );
    assert!(
        error.contains(", but lmboot.txt's model_crc32 says ")
            && error
                .ends_with("(write the card again with cargo xtask image, or try another card)"),
        "{error}"
    );
    let report = line(&uart, "lmboot-report: ");
    assert!(report.contains(" verdicts=model:fail "), "{report}");
    assert!(!uart.contains("--- output ---"), "{uart}");
    let decoded = xtask::report::decode(&uart).unwrap();
    assert!(
        decoded.contains("FAILED model: the model file on the card is not the file written"),
        "{decoded}"
    );
}

/// With `model_digest = 1` the model check reads only the file's first and last MiB: a byte
/// changed in the middle of the weights passes it, and the forward check names the damage (the
/// first logits are not the PC's); the run goes on, and the report says which check failed.
#[test]
fn a_change_the_short_digest_misses_is_caught_by_the_forward_check() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let mut s = settings(None);
    s.extra.push(("model_digest".into(), "1".into()));
    let img = make_image("selftest-forward", &s, &model);
    // 64 bytes of the first row of a middle layer's gate projection, more than a MiB from
    // either end, past its first block's f16 scale. (Not the down projection: after the BOS
    // token a few huge values dominate its input, the rest round to 0 in 8 bits, and a change
    // to the first row there leaves the logits' bits as they were.)
    let src = inference::storage::FileStorage::open(&model).unwrap();
    let g = inference::Gguf::open(&src).unwrap();
    let m = inference::model::Model::load(&g, &src).unwrap();
    let w = &m.weights.layers[m.config.n_layer / 2].w_gate;
    let len = std::fs::metadata(&model).unwrap().len();
    assert!(w.offset > 1 << 20 && w.offset + (1 << 20) < len);
    flip_model_bytes(&img, w.offset + 4..w.offset + 68);
    let (code, uart) = boot_with(b, &img, &xtask::QemuOpts::default(), LIMIT);
    assert_eq!(code, 0, "{uart}");
    let model_line = line(&uart, "selftest: model ok: 2 MiB read from the card ");
    assert!(
        model_line.contains("(its first and last MiBs (model_digest))"),
        "{model_line}"
    );
    let forward = line(&uart, "selftest: forward FAILED: the logits after token ");
    assert!(forward.contains("; the PC's: "), "{forward}");
    let report = line(&uart, "lmboot-report: ");
    assert!(
        report.contains(",forward:fail ") && report.contains("model:ok"),
        "{report}"
    );
    assert!(uart.contains("--- output ---"), "the run goes on: {uart}");
    let decoded = xtask::report::decode(&uart).unwrap();
    assert!(
        decoded.contains("FAILED forward: this CPU's first logits differ"),
        "{decoded}"
    );
}
