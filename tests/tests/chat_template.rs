//! Chat templates on real vocabularies: SmolLM2-Instruct's GGUF template is detected as ChatML, its
//! default system prompt is found, and the two-turn transcript built piece by piece tokenizes to
//! the special tokens of the format, with the same tokens as the whole transcript at once.

mod common;

use inference::template::{self, default_system_prompt, Template};
use inference::tokenizer::Tokenizer;

fn id(tok: &Tokenizer, text: &str) -> u32 {
    tok.token_id(text.as_bytes())
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

/// The pieces of a two-turn conversation, in order, as the kernel feeds them.
fn pieces(t: Template, system: &str) -> Vec<String> {
    vec![
        t.system(system).unwrap(),
        t.user_turn("Hi!", true).unwrap(),
        "Hello! How can I help you today?".into(),
        t.end_of_turn().into(),
        t.user_turn("What is 2+2?", false).unwrap(),
    ]
}

/// Each piece encoded on its own (BOS only on the first, if the template does not write it).
fn encode_pieces(tok: &Tokenizer, t: Template, pieces: &[String]) -> Vec<u32> {
    let mut ids = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        let add = i == 0 && !t.renders_bos();
        ids.extend(tok.encode(p, add, true).unwrap());
    }
    ids
}

#[test]
fn smollm2_instruct_is_chatml() {
    let (src, g) = common::open(&common::model_path());
    let tok = Tokenizer::from_gguf(&g, &src).unwrap();
    let tpl = template::chat_template(&g).expect("the model has a chat template");
    assert!(tpl.contains("<|im_start|>"), "{tpl}");
    let t = Template::from_gguf(&g, &tok);
    assert_eq!(t, Template::ChatMl);
    assert_eq!(
        Template::detect(None, |s| tok.token_id(s.as_bytes()).is_some()),
        Template::ChatMl,
        "the vocabulary alone says ChatML too"
    );

    // No system message given: the template's own default is used.
    let system = default_system_prompt(tpl)
        .unwrap()
        .expect("SmolLM2's template has a default");
    assert_eq!(
        system,
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    );

    let pieces = pieces(t, &system);
    let text: String = pieces.concat();
    assert_eq!(
        text,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
         Face<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello! How can \
         I help you today?<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n\
         <|im_start|>assistant\n"
    );

    let (start, end, nl) = (
        id(&tok, "<|im_start|>"),
        id(&tok, "<|im_end|>"),
        id(&tok, "Ċ"),
    );
    assert_eq!((start, end), (1, 2));
    assert!(tok.is_eog(end), "<|im_end|> ends generation");
    // A role's text, as tokens ("assistant" is two tokens in this vocabulary).
    let role = |r: &str| tok.encode(r, false, false).unwrap();

    let whole = tok.encode(&text, !t.renders_bos(), true).unwrap();
    assert!(!tok.add_bos(), "SmolLM2 adds no BOS");
    assert_eq!(whole[0], start, "{whole:?}");
    let tail = [&[start][..], &role("assistant"), &[nl]].concat();
    assert!(whole.ends_with(&tail), "{whole:?}");
    let count = |x: u32| whole.iter().filter(|&&i| i == x).count();
    assert_eq!(count(start), 5, "system, user, assistant, user, assistant");
    assert_eq!(count(end), 4, "every message but the open reply is closed");
    // Each <|im_end|> is followed by a newline and then <|im_start|>.
    for (i, &x) in whole.iter().enumerate() {
        if x == end {
            assert_eq!(whole[i + 1..i + 3], [nl, start], "at {i}: {whole:?}");
        }
    }
    // The roles follow their <|im_start|> in order, each with its newline.
    let starts: Vec<usize> = (0..whole.len()).filter(|&i| whole[i] == start).collect();
    for (&at, r) in starts
        .iter()
        .zip(["system", "user", "assistant", "user", "assistant"])
    {
        let want = [&role(r)[..], &[nl]].concat();
        assert!(whole[at + 1..].starts_with(&want), "{r} at {at}: {whole:?}");
    }

    // Piece by piece gives the same tokens: every boundary is next to a special token.
    assert_eq!(encode_pieces(&tok, t, &pieces), whole);
    // And the tokens print back as the text.
    assert_eq!(
        String::from_utf8(tok.detokenize(&whole, false, true)).unwrap(),
        text
    );

    // Without special-token parsing the markers are plain text.
    let plain = tok.encode(&text, false, false).unwrap();
    assert!(!plain.contains(&start) && !plain.contains(&end));
}

fn vocab(name: &str) -> (Tokenizer, Option<String>) {
    let (src, g) =
        common::open(&common::shared().join(format!("fixtures/vocab/ggml-vocab-{name}.gguf")));
    let tok = Tokenizer::from_gguf(&g, &src).unwrap_or_else(|e| panic!("{name}: {e}"));
    (tok, template::chat_template(&g).map(String::from))
}

#[test]
fn qwen2_vocabulary_is_chatml() {
    let (tok, tpl) = vocab("qwen2");
    let t = Template::detect(tpl.as_deref(), |s| tok.token_id(s.as_bytes()).is_some());
    assert_eq!(t, Template::ChatMl);
    for system in ["", "You are a helpful assistant."] {
        let pieces = pieces(t, system);
        let whole = tok
            .encode(&pieces.concat(), !t.renders_bos(), true)
            .unwrap();
        assert_eq!(encode_pieces(&tok, t, &pieces), whole, "system={system:?}");
        let start = id(&tok, "<|im_start|>");
        let n = whole.iter().filter(|&&i| i == start).count();
        assert_eq!(n, 4 + usize::from(!system.is_empty()));
    }
}

#[test]
fn llama3_vocabulary_is_llama3() {
    let (tok, tpl) = vocab("llama-bpe");
    let t = Template::detect(tpl.as_deref(), |s| tok.token_id(s.as_bytes()).is_some());
    assert_eq!(t, Template::Llama3);
    let bos = id(&tok, "<|begin_of_text|>");
    let header = id(&tok, "<|start_header_id|>");
    let eot = id(&tok, "<|eot_id|>");
    for system in ["", "Be brief."] {
        let pieces = pieces(t, system);
        let whole = tok.encode(&pieces.concat(), false, true).unwrap();
        assert_eq!(encode_pieces(&tok, t, &pieces), whole, "system={system:?}");
        assert_eq!(whole[..2], [bos, header], "exactly one BOS");
        assert_eq!(whole.iter().filter(|&&i| i == bos).count(), 1);
        let turns = 4 + usize::from(!system.is_empty());
        assert_eq!(whole.iter().filter(|&&i| i == header).count(), turns);
        assert_eq!(whole.iter().filter(|&&i| i == eot).count(), turns - 1);
    }
}

#[test]
fn llama2_on_sentencepiece_keeps_one_bos_per_turn() {
    let (tok, _) = vocab("llama-spm");
    let t = Template::Llama2;
    let pieces = pieces(t, "Be brief.");
    let ids = encode_pieces(&tok, t, &pieces);
    let bos = tok.bos().unwrap();
    let eos = tok.eos().unwrap();
    assert_eq!(ids[0], bos);
    assert_eq!(ids.iter().filter(|&&i| i == bos).count(), 2, "{ids:?}");
    assert_eq!(ids.iter().filter(|&&i| i == eos).count(), 1, "{ids:?}");
}
