//! Special tokens, BOS/EOS and end-of-generation on the four llama.cpp vocabularies: what
//! `add_special` adds, what `parse_special` matches (longest text first), SentencePiece's space
//! prefix after a special token, and llama.cpp's `detokenize` options.

mod common;

use inference::tokenizer::{PreTokenizer, Tokenizer};

fn vocab(name: &str) -> Tokenizer {
    let (src, g) =
        common::open(&common::shared().join(format!("fixtures/vocab/ggml-vocab-{name}.gguf")));
    Tokenizer::from_gguf(&g, &src).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn id(tok: &Tokenizer, text: &str) -> u32 {
    tok.token_id(text.as_bytes())
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

#[test]
fn sentencepiece() {
    let tok = vocab("llama-spm");
    assert_eq!((tok.bos(), tok.eos(), tok.eot()), (Some(1), Some(2), None));
    assert!(tok.add_bos() && !tok.add_eos() && tok.add_space_prefix());
    assert!(tok.is_eog(2) && !tok.is_eog(1));

    let hello = tok.encode("Hello", false, false).unwrap();
    assert_eq!(hello, vec![id(&tok, "▁Hello")]);
    assert_eq!(
        tok.encode("Hello", true, false).unwrap(),
        [&[1], &hello[..]].concat()
    );
    assert_eq!(tok.encode("", true, false).unwrap(), vec![1]);
    assert_eq!(tok.encode("", false, false).unwrap(), Vec::<u32>::new());

    // parse_special: "<s>" is BOS, and the text after a special token gets the space prefix again.
    assert_eq!(
        tok.encode("<s>Hello", false, true).unwrap(),
        [&[1], &hello[..]].concat()
    );
    assert_eq!(
        tok.encode("Hello</s>", false, true).unwrap(),
        [&hello[..], &[2]].concat()
    );
    assert_eq!(tok.encode("<unk>", false, true).unwrap(), vec![0]);
    let plain = tok.encode("<s>Hello", false, false).unwrap();
    assert!(!plain.contains(&1), "{plain:?}");
    assert_eq!(tok.decode(&plain), b"<s>Hello");

    // Decoding: the prefix space of the first token goes; llama.cpp's remove_special drops BOS but
    // then keeps the space.
    assert_eq!(tok.decode(&hello), b"Hello");
    assert_eq!(tok.decode(&[1, hello[0]]), b"<s> Hello");
    assert_eq!(tok.detokenize(&[1, hello[0]], true, false), b" Hello");
    assert_eq!(tok.detokenize(&[1, hello[0], 2], false, false), b" Hello");
    assert_eq!(
        tok.detokenize(&[1, hello[0], 2], false, true),
        b"<s> Hello</s>"
    );
}

#[test]
fn llama3() {
    let tok = vocab("llama-bpe");
    assert_eq!(tok.pre_tokenizer(), PreTokenizer::Llama3);
    assert_eq!((tok.bos(), tok.eos()), (Some(128000), Some(128001)));
    // No add_bos_token key: llama.cpp's default for llama-bpe is to add BOS.
    assert!(tok.add_bos() && !tok.add_eos());
    let eot = id(&tok, "<|eot_id|>");
    assert_eq!(tok.eot(), Some(eot));
    assert!(tok.is_eog(eot) && tok.is_eog(128001));

    let ids = tok.encode("Hello", true, false).unwrap();
    assert_eq!(ids[0], 128000);
    assert_eq!(
        tok.encode("<|begin_of_text|>Hi<|eot_id|>", false, true)
            .unwrap(),
        vec![128000, id(&tok, "Hi"), eot]
    );

    // Longest special token first: "..._10|>" is not "..._1" followed by text.
    let t10 = id(&tok, "<|reserved_special_token_10|>");
    assert_eq!(
        tok.encode("<|reserved_special_token_10|>", false, true)
            .unwrap(),
        vec![t10]
    );

    // clean_up_tokenization_spaces: llama.cpp's detokenize drops spaces before punctuation.
    let ids = tok.encode("Hello , world !", false, false).unwrap();
    assert_eq!(tok.decode(&ids), b"Hello , world !");
    assert_eq!(tok.detokenize(&ids, false, false), b"Hello, world!");
}

#[test]
fn qwen2_and_gpt2() {
    let q = vocab("qwen2");
    assert_eq!(q.pre_tokenizer(), PreTokenizer::Qwen2);
    let (start, end) = (id(&q, "<|im_start|>"), id(&q, "<|im_end|>"));
    assert!(q.is_eog(end) && q.is_eog(151643) && !q.is_eog(start));
    let ids = q
        .encode("<|im_start|>user\nHi<|im_end|>", false, true)
        .unwrap();
    assert_eq!(ids.first(), Some(&start));
    assert_eq!(ids.last(), Some(&end));
    assert_eq!(q.decode(&ids), b"<|im_start|>user\nHi<|im_end|>");
    // Qwen2 splits numbers digit by digit.
    assert_eq!(q.encode("2024", false, false).unwrap().len(), 4);

    let g = vocab("gpt-2");
    assert_eq!(g.pre_tokenizer(), PreTokenizer::Gpt2);
    // "<|endoftext|>" (a control token) ends generation and is the EOT token by its text.
    let eot = id(&g, "<|endoftext|>");
    assert_eq!(eot, 50256);
    assert!(g.is_control(eot) && g.is_eog(eot));
    assert_eq!(g.eot(), Some(eot));
    assert_eq!(
        g.encode("a<|endoftext|>", false, true).unwrap(),
        vec![id(&g, "a"), eot]
    );
    assert!(!g
        .encode("a<|endoftext|>", false, false)
        .unwrap()
        .contains(&eot));
    // No add_bos_token key and pre = gpt-2: nothing is added.
    assert_eq!(g.encode("a", true, false).unwrap(), vec![id(&g, "a")]);
}
