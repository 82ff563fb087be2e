//! The `lmboot-host` command line: teacher-forced logits dumped to a file meet the KL rule, and bad
//! arguments are errors with a message, not panics.

mod common;

use common::golden;
use std::ffi::OsStr;
use std::process::Command;

fn host() -> std::path::PathBuf {
    xtask::build_host().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn teacher_forced_dump_meets_the_kl_rule() {
    let bin = host();
    let case = golden::load("smollm2-once");
    let dump = std::env::temp_dir().join(format!("lmboot-teacher-{}.f32", std::process::id()));
    let golden_txt = common::shared().join("golden/smollm2-once.txt");
    common::host_ok(
        &bin,
        &common::model_path(),
        [
            OsStr::new("--teacher"),
            golden_txt.as_os_str(),
            OsStr::new("--dump-logits"),
            dump.as_os_str(),
        ],
    );
    let rows = golden::rows(&dump, 49152);
    let reference = golden::rows(&case.ref64, 49152);
    assert_eq!(rows.len(), case.generated_ids.len());
    let mut sum = 0.0;
    for (step, (ours, r)) in rows.iter().zip(&reference).enumerate() {
        let kl = golden::kl(r, ours);
        assert!(kl <= 0.05, "step {step}: KL {kl}");
        sum += kl;
    }
    assert!(sum / rows.len() as f64 <= 0.005);
    let _ = std::fs::remove_file(&dump);
}

#[test]
fn bad_arguments_are_errors() {
    let bin = host();
    let model = common::model_path();
    for (args, needle) in [
        (
            vec!["--model", "/no/such/file.gguf", "--prompt", "x"],
            "/no/such/file.gguf",
        ),
        (vec!["--prompt", "x"], "--model"),
        (vec!["--model", "M", "--temp", "nan"], "temperature"),
        (vec!["--model", "M", "--top-p", "2"], "top_p"),
        (vec!["--model", "M", "-n", "many"], "not a valid number"),
        (vec!["--model", "M", "--frobnicate"], "unknown argument"),
        (vec!["--model", "M", "--threads", "0"], "--threads"),
        (vec!["--model", "M", "--lookup", "9"], "--lookup"),
        (vec!["--model", "M", "--speculate", "often"], "--speculate"),
        (vec!["--model", "M", "--draft-max", "0"], "--draft-max"),
        (
            vec!["--model", "M", "--draft-vocab", "100"],
            "--draft-vocab: \"100\" is not auto, all or 256 or more tokens",
        ),
        (
            vec!["--model", "M", "--prompt", "x", "--self-draft", "30"],
            "the model has 30 layers",
        ),
        (
            vec!["--model", "M", "--prompt", "x", "--draft", "G"],
            "the draft model's vocabulary is not the target's: 262144 tokens, the target has 49152",
        ),
    ] {
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if *a == "M" {
                    model.display().to_string()
                } else if *a == "G" {
                    common::named_model("gemma-3-270m").display().to_string()
                } else {
                    a.to_string()
                }
            })
            .collect();
        let out = Command::new(&bin).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
    // A prompt longer than the context is an error naming the context.
    let long = "word ".repeat(100);
    let out = common::run_host(&bin, &model, ["--prompt", &long, "--ctx", "16"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("context"));
}
