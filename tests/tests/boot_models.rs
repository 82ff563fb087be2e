//! The small models people run, booted on QEMU `virt` (aarch64, Cortex-A53, 4 cores): Gemma-3-270M
//! (gemma3: sliding-window layers, a 262,144-token SentencePiece vocabulary) and
//! Qwen2.5-Coder-0.5B (qwen2, K-quants) print exactly what `lmboot-host` prints for the same model,
//! prompt and settings; Gemma chats in its own `<start_of_turn>` template, which its GGUF does not
//! carry. Each model is fetched by name into the cache (`cargo xtask fetch-model NAME`).

mod common;

use common::boot::{boot_input, built, host_text, make_image};
use inference::storage::FileStorage;
use inference::template::Template;
use inference::tokenizer::Tokenizer;
use inference::Gguf;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(900);

/// Boot `model` with `prompt`, greedy, `n` tokens and `mem` of RAM; the kernel must print the PC
/// runner's text. Returns the UART.
fn check(name: &str, model: &str, prompt: &str, n: usize, mem: Option<&str>) -> String {
    let s = xtask::Settings {
        prompt: prompt.into(),
        n,
        temp: "0".into(),
        ..Default::default()
    };
    let opts = xtask::QemuOpts {
        mem: mem.map(String::from),
        ..Default::default()
    };
    common::boot::matches_host(name, &common::named_model(model), &s, &opts, LIMIT)
}

#[test]
fn gemma3_prints_what_the_pc_runner_prints() {
    let uart = check(
        "gemma3-colors",
        "gemma-3-270m",
        "The three primary colors are",
        8,
        None,
    );
    assert!(uart.contains("gemma3 (18 layers"), "{uart}");
}

#[test]
fn qwen05_prints_what_the_pc_runner_prints() {
    let uart = check(
        "qwen05-prime",
        "qwen2.5-coder-0.5b",
        "def is_prime(n):",
        6,
        Some("1G"),
    );
    assert!(uart.contains("qwen2 (24 layers"), "{uart}");
}

/// One chat turn with Gemma: the template comes from the vocabulary (the file has none), the
/// turn feeds the template's tokens, and the reply is the PC runner's for the same transcript.
#[test]
fn gemma3_chats_in_its_own_template() {
    let b = built("qemu-virt-aarch64");
    let model = common::named_model("gemma-3-270m");
    let src = FileStorage::open(&model).unwrap();
    let g = Gguf::open(&src).unwrap();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap();
    let template = Template::from_gguf(&g, &tok);
    assert_eq!(template, Template::Gemma);
    let n = 8;
    let s = xtask::Settings {
        n,
        extra: vec![("mode".into(), "chat".into())],
        ..Default::default()
    };
    let img = make_image("gemma3-chat", &s, &model);
    let msg = "What is the capital of France?";
    let opts = xtask::QemuOpts::default();
    let input = format!("{msg}\n\x04");
    let (code, uart) = boot_input(b, &img, &opts, Some(input.as_bytes()), LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(uart.contains("chat: gemma template"), "{uart}");
    let transcript = format!(
        "{}{}",
        template.system("").unwrap(),
        template.user_turn(msg, true).unwrap()
    );
    // The PC runner adds the vocabulary's BOS itself (as llama.cpp does: a prompt that also
    // writes `<bos>` would get two).
    let transcript = transcript.strip_prefix("<bos>").unwrap().to_string();
    let want = host_text(
        b,
        &model,
        &xtask::Settings {
            prompt: transcript,
            n,
            ..Default::default()
        },
    );
    let reply = uart
        .split(&format!("\n> {msg}\n"))
        .nth(1)
        .and_then(|r| r.split("\n[turn 1").next())
        .unwrap_or_else(|| panic!("no reply in:\n{uart}"));
    assert_eq!(reply, want.trim_end_matches('\n'));
}
