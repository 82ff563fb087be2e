//! Chat over the serial line in QEMU (virt aarch64): turns that keep the KV cache, `/reset`,
//! Ctrl-C, and the prompt cache on the card (saved, restored with the prefill skipped, a changed
//! system prompt detected, nothing written without `allow_write`).

mod common;

use common::boot::{boot_input, built, host_text, make_image};
use inference::storage::FileStorage;
use inference::template::{chat_template, default_system_prompt, Template};
use inference::tokenizer::Tokenizer;
use inference::Gguf;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(900);

/// The model's template, default system prompt and tokenizer, read on the host.
fn model_chat() -> (Template, String, Tokenizer) {
    let src = FileStorage::open(&common::model_path()).unwrap();
    let g = Gguf::open(&src).unwrap();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap();
    let template = Template::from_gguf(&g, &tok);
    let system = chat_template(&g)
        .and_then(|t| default_system_prompt(t).unwrap())
        .unwrap_or_default();
    (template, system, tok)
}

/// `(new tokens, context before, context after, generated, why)` of every `[turn ...]` line.
fn turns(uart: &str) -> Vec<(usize, usize, usize, usize, String)> {
    let num = |s: &str| {
        s.trim()
            .parse::<usize>()
            .unwrap_or_else(|_| panic!("number in {s:?}"))
    };
    uart.lines()
        .filter(|l| l.starts_with("[turn "))
        .map(|l| {
            let (_, rest) = l.split_once(": ").unwrap();
            let (new, rest) = rest.split_once(" new tokens processed (context ").unwrap();
            let (before, rest) = rest.split_once(" -> ").unwrap();
            let (after, rest) = rest.split_once(" of ").unwrap();
            let (_, rest) = rest.split_once("), ").unwrap();
            let (generated, rest) = rest.split_once(" generated").unwrap();
            let why = rest
                .rsplit_once("; ")
                .unwrap()
                .1
                .trim_end_matches(']')
                .to_string();
            (num(new), num(before), num(after), num(generated), why)
        })
        .collect()
}

fn chat_settings(n: usize) -> xtask::Settings {
    xtask::Settings {
        n,
        extra: vec![("mode".into(), "chat".into())],
        ..Default::default()
    }
}

fn boot_chat(img: &std::path::Path, input: &[u8]) -> String {
    let b = built("qemu-virt-aarch64");
    let (code, uart) = boot_input(b, img, &xtask::QemuOpts::default(), Some(input), LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(
        uart.contains("\nbye\n"),
        "the chat should end on Ctrl-D:\n{uart}"
    );
    uart
}

/// Two turns: the second feeds only its own tokens (the first turn stays in the KV cache); the
/// first reply is what the PC runner says to the same transcript; `/reset` starts again from the
/// system prompt; a bad command is answered, not fatal.
#[test]
fn two_turns_keep_the_cache_and_reset_starts_again() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let (template, system, tok) = model_chat();
    assert_eq!(template, Template::ChatMl);
    let n = 8;
    let img = make_image("chat-turns", &chat_settings(n), &model);
    let uart = boot_chat(
        &img,
        b"Hi!\nWhat is the capital of France?\n/temp hot\n/set top_k -1\n/set seed 5\n/show\n/stats\n/reset\nHi!\n\x04",
    );

    let sys_tokens = tok
        .encode(&template.system(&system).unwrap(), true, true)
        .unwrap()
        .len();
    assert!(
        uart.contains(&format!(
            "chat: chatml template, {sys_tokens} system tokens"
        )),
        "{uart}"
    );
    let t = turns(&uart);
    assert_eq!(t.len(), 3, "{uart}");
    // Turn 1: the system prompt is in the cache; the turn feeds the user piece.
    let first = tok
        .encode(&template.user_turn("Hi!", true).unwrap(), false, true)
        .unwrap();
    assert_eq!((t[0].0, t[0].1), (first.len(), sys_tokens));
    // Turn 2 starts where turn 1 ended and feeds only: the last reply token (not yet through the
    // model), the end of turn, and the new user piece.
    let piece = format!(
        "{}{}",
        template.end_of_turn(),
        template
            .user_turn("What is the capital of France?", false)
            .unwrap()
    );
    let second = 1 + tok.encode(&piece, false, true).unwrap().len();
    assert_eq!(t[1].1, t[0].2, "turn 2 must continue from turn 1's context");
    assert_eq!(
        t[1].0, second,
        "turn 2 processed more than its own tokens:\n{uart}"
    );
    assert!(t[1].0 < t[1].1, "turn 2 must not re-read turn 1");
    assert!(uart.contains("Paris"), "{uart}");
    // The first reply equals the PC runner's greedy text for the same transcript.
    let transcript = format!(
        "{}{}",
        template.system(&system).unwrap(),
        template.user_turn("Hi!", true).unwrap()
    );
    let s = xtask::Settings {
        prompt: transcript,
        n,
        ..Default::default()
    };
    let want = host_text(b, &model, &s);
    let reply1 = uart
        .split("\n> Hi!\n")
        .nth(1)
        .and_then(|r| r.split("\n[turn 1").next())
        .unwrap();
    assert_eq!(reply1, want.trim_end_matches('\n'));
    // The bad commands, /set, /show, /stats, /reset.
    assert!(
        uart.contains("/temp: expected a number from 0 to 2, got \"hot\""),
        "{uart}"
    );
    assert!(
        uart.contains("/set top_k: expected a whole number, got \"-1\""),
        "{uart}"
    );
    // lmboot.txt's repeat_penalty = 1 (cargo xtask writes it) leaves the chat's guard off.
    let shown = "sampling: temperature 0, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1, repeat_last_n 64, seed 5";
    assert!(uart.contains(&format!("\n{shown}\n")), "/set: {uart}");
    assert!(
        uart.contains(&format!("\n{shown}; JSON mode off\n")),
        "/show: {uart}"
    );
    assert!(uart.contains("stats: 2 turns;"), "{uart}");
    assert!(uart.contains(&format!("conversation reset (")), "{uart}");
    assert!(
        uart.contains(&format!("context {sys_tokens} of 512 positions used")),
        "{uart}"
    );
    // After the reset the same first message gets the same first turn and reply.
    assert_eq!((t[2].0, t[2].1, t[2].2), (t[0].0, t[0].1, t[0].2));
    let reply3 = uart
        .rsplit("\n> Hi!\n")
        .next()
        .and_then(|r| r.split("\n[turn 1").next())
        .unwrap();
    assert_eq!(reply3, reply1);
}

/// Ctrl-C during a reply stops it after the token being printed; the chat goes on. With no
/// `repeat_penalty` in `lmboot.txt` (and none in the model), the chat's repetition guard is on.
#[test]
fn ctrl_c_stops_a_reply() {
    let model = common::model_path();
    let mut s = chat_settings(48);
    s.repeat_penalty = String::new();
    let img = make_image("chat-ctrl-c", &s, &model);
    let uart = boot_chat(
        &img,
        b"Tell me a long story about a dragon.\n\x03/stats\n\x04",
    );
    assert!(
        uart.contains(
            "sampling: chat's repetition guard: repeat_penalty 1.1 over the last 64 tokens"
        ),
        "{uart}"
    );
    let t = turns(&uart);
    assert_eq!(t.len(), 1, "{uart}");
    assert_eq!(t[0].4, "stopped (Ctrl-C)", "{uart}");
    assert!(t[0].3 < 48, "the reply ran to its limit: {uart}");
    assert!(uart.contains("stats: 1 turns;"), "{uart}");
}

/// The FAT blocks of `/lmboot.kv` in a card image: (byte offset, length) runs.
fn kv_runs(img: &[u8]) -> Vec<(usize, usize)> {
    use drivers::block::RamDisk;
    let mut dev = RamDisk::new(img);
    let vol = drivers::fat::Volume::mount(&mut dev).unwrap();
    let f = vol.open(&mut dev, xtask::PROMPT_CACHE_ON_CARD).unwrap();
    f.extents()
        .iter()
        .map(|e| (e.lba as usize * 512, e.blocks as usize * 512))
        .collect()
}

/// The prompt cache: the first boot runs the system prompt and saves its state into the
/// preallocated file; the second restores it (prefill skipped) and replies the same; a card whose
/// system prompt changed sees the stale state, runs the prompt and saves again; without
/// `allow_write` the card is not written at all.
#[test]
fn the_prompt_cache_skips_the_prefill_and_notices_a_changed_prompt() {
    let model = common::model_path();
    let mut s = chat_settings(6);
    s.extra.push(("allow_write".into(), "true".into()));
    let img = make_image("chat-pcache", &s, &model);
    let input = b"Hi!\n\x04";

    let first = boot_chat(&img, input);
    assert!(
        first.contains("/lmboot.kv: not used: nothing saved yet; prefilled in"),
        "{first}"
    );
    assert!(first.contains(", saved to /lmboot.kv ("), "{first}");
    let second = boot_chat(&img, input);
    assert!(
        second.contains("/lmboot.kv: restored the state after"),
        "{second}"
    );
    assert!(second.contains("prefill skipped"), "{second}");
    let reply = |u: &str| {
        u.split("\n> Hi!\n")
            .nth(1)
            .and_then(|r| r.split("\n[turn 1").next())
            .unwrap()
            .to_string()
    };
    assert_eq!(reply(&first), reply(&second));
    assert_eq!(turns(&first)[0].0, turns(&second)[0].0);

    // Another system prompt on a card holding the saved state.
    let saved = std::fs::read(&img).unwrap();
    s.extra.push(("system".into(), "You are a pirate.".into()));
    let img2 = make_image("chat-pcache-changed", &s, &model);
    let mut card = std::fs::read(&img2).unwrap();
    for ((a, n), (b, m)) in kv_runs(&saved).into_iter().zip(kv_runs(&card)) {
        assert_eq!(n, m);
        card[b..b + m].copy_from_slice(&saved[a..a + n]);
    }
    std::fs::write(&img2, &card).unwrap();
    let third = boot_chat(&img2, input);
    assert!(
        third.contains("/lmboot.kv: not used: saved for another prompt; prefilled in"),
        "{third}"
    );
    assert!(third.contains(", saved to /lmboot.kv ("), "{third}");

    // Without allow_write nothing on the card changes.
    let s = chat_settings(6);
    let img3 = make_image("chat-pcache-readonly", &s, &model);
    let before = std::fs::read(&img3).unwrap();
    let fourth = boot_chat(&img3, input);
    assert!(
        fourth.contains("not saved to /lmboot.kv (allow_write = false)"),
        "{fourth}"
    );
    assert!(
        std::fs::read(&img3).unwrap() == before,
        "the card changed without allow_write"
    );
}
