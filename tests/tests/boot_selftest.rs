//! The first-boot self-test (`selftest = full`) on a board: QEMU `virt` (aarch64) checks every
//! kernel set it runs against scalar, prints the verdict and the `lmboot-report:` line, and
//! `cargo xtask report` decodes it; a set made to compute one operation wrong
//! (`selftest_fault = kernels`) is named, disabled, and the scalar set runs instead, printing the
//! same tokens (the sets agree bit for bit).

mod common;

use common::boot::{boot_with, built, generated, host_text, line, make_image};
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
    for (name, fault) in [("selftest", None), ("selftest-kernels", Some("kernels"))] {
        let s = settings(fault);
        let img = make_image(name, &s, &model);
        let (code, uart) = boot_with(b, &img, &xtask::QemuOpts::default(), LIMIT);
        assert_eq!(code, 0, "{uart}");
        assert_eq!(
            generated(&uart),
            want,
            "{name}: kernel and lmboot-host disagree"
        );
        let verdict = match fault {
            None => line(&uart, "selftest: kernels ok"),
            Some(_) => line(&uart, "selftest: kernels fail"),
        };
        let report = line(&uart, "lmboot-report: ");
        assert!(report.len() <= report::MAX_LEN, "{report}");
        let decoded = xtask::report::decode(&uart).unwrap_or_else(|e| panic!("{e}: {report}"));
        assert!(
            decoded.contains("| board | qemu-virt-aarch64 |"),
            "{decoded}"
        );
        if fault.is_none() {
            assert!(
                verdict.starts_with("selftest: kernels ok: neon equal to scalar bit for bit ("),
                "{verdict}"
            );
            assert!(verdict.ends_with("the run uses neon"), "{verdict}");
            assert!(
                report.contains(" kernels=neon auto=neon verdicts=kernels:ok "),
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
                report.contains(" kernels=scalar auto=neon verdicts=kernels:fail "),
                "{report}"
            );
            assert!(
                decoded.contains("FAILED kernels: a kernel set computed other numbers"),
                "{decoded}"
            );
        }
    }
}
