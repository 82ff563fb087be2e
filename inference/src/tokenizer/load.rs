//! [`Tokenizer::from_gguf`] in named steps: the model and its pre-tokenizer, the vocabulary (texts,
//! scores, types), the special-token ids, the special tokens found by their text, the
//! end-of-generation set, the special tokens of the partition, the byte tables and the merges.

use super::bpe::{self, Merge, Merges};
use super::vocab::{attr, Arena, Vocab};
use super::{
    keys, pre_config, unicode, Model, PreTokenizer, SpecialIds, Tokenizer, TokenizerError,
    EOG_TEXTS, EOM_TEXTS, EOT_TEXTS, FIM_MID_TEXTS, FIM_PAD_TEXTS, FIM_PRE_TEXTS, FIM_REP_TEXTS,
    FIM_SEP_TEXTS, FIM_SUF_TEXTS, NONE,
};
use crate::gguf::{Gguf, Value, ValueType};
use crate::oom::{self, OutOfMemory};
use crate::storage::Storage;
use alloc::string::String;
use alloc::vec::Vec;

/// The flags of a vocabulary: the model's defaults, then the metadata.
struct Flags {
    pre: PreTokenizer,
    clean_spaces: bool,
    ignore_merges: bool,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
}

impl Tokenizer {
    /// Build the tokenizer described by the `tokenizer.ggml.*` metadata of `g`, reading its arrays
    /// from `src`.
    pub fn from_gguf<S: Storage + ?Sized>(g: &Gguf, src: &S) -> Result<Tokenizer, TokenizerError> {
        let (model, mut flags) = model_and_flags(g)?;
        let (mut vocab, n_tokens) = read_vocab(g, src)?;
        let mut ids = special_ids(g, model, n_tokens, &mut flags)?;
        find_special_texts(&mut ids, &mut vocab);
        let eog = end_of_generation(&ids, &mut vocab)?;
        let special = partition_tokens(&vocab, n_tokens)?;
        let (byte_tokens, raw_byte_tokens, byte_chars) = byte_tables(model, &vocab);
        // Merges (byte-level BPE only; llama.cpp requires them).
        let merges = match model {
            Model::SentencePiece => Merges::default(),
            Model::ByteLevelBpe => read_merges(g, src, &vocab)?,
        };
        let mut tok = Tokenizer {
            model,
            pre: flags.pre,
            vocab,
            pieces: Arena::default(),
            merges,
            byte_tokens,
            raw_byte_tokens,
            byte_chars,
            special,
            eog,
            ids,
            add_bos: flags.add_bos,
            add_eos: flags.add_eos,
            add_space_prefix: flags.add_space_prefix,
            ignore_merges: flags.ignore_merges,
            clean_spaces: flags.clean_spaces,
        };
        tok.pieces = tok.build_pieces()?;
        Ok(tok)
    }
}

/// Model and pre-tokenizer, with llama.cpp's defaults for each.
fn model_and_flags(g: &Gguf) -> Result<(Model, Flags), TokenizerError> {
    let model_name =
        opt_str(g, keys::MODEL)?.ok_or(TokenizerError::MissingKey { key: keys::MODEL })?;
    let model = match model_name {
        "llama" => Model::SentencePiece,
        "gpt2" => Model::ByteLevelBpe,
        other => {
            return Err(TokenizerError::UnsupportedModel {
                model: other.into(),
            })
        }
    };
    let (pre, clean_spaces, ignore_merges, add_bos, mut add_space_prefix) = match model {
        Model::SentencePiece => (PreTokenizer::Default, false, false, true, true),
        Model::ByteLevelBpe => {
            let name = opt_str(g, keys::PRE)?;
            let c = pre_config(name).ok_or_else(|| TokenizerError::UnsupportedPre {
                pre: name.unwrap_or("").into(),
            })?;
            (c.pre, c.clean_spaces, c.ignore_merges, c.add_bos, false)
        }
    };
    if let Some(b) = opt_bool(g, keys::ADD_SPACE_PREFIX)? {
        add_space_prefix = b;
    }
    let flags = Flags {
        pre,
        clean_spaces,
        ignore_merges,
        add_bos,
        add_eos: false,
        add_space_prefix,
    };
    Ok((model, flags))
}

/// The vocabulary: token texts, scores and types, indexed by text; and the token count.
fn read_vocab<S: Storage + ?Sized>(g: &Gguf, src: &S) -> Result<(Vocab, u32), TokenizerError> {
    let (texts, n_tokens) = read_texts(g, src)?;
    let scores = read_scores(g, src, n_tokens)?;
    let attrs = read_attrs(g, src, n_tokens)?;
    let mut vocab = Vocab::new(texts, attrs, scores);
    if let Some((first, second)) = vocab.build_index()? {
        return Err(TokenizerError::DuplicateToken {
            text: lossy(vocab.text(first)),
            first,
            second,
        });
    }
    Ok((vocab, n_tokens))
}

/// Tokens.
fn read_texts<S: Storage + ?Sized>(g: &Gguf, src: &S) -> Result<(Arena, u32), TokenizerError> {
    let tokens_info = array_of(g, keys::TOKENS, &[ValueType::String], "strings")?
        .ok_or(TokenizerError::MissingKey { key: keys::TOKENS })?;
    let n_tokens = match u32::try_from(tokens_info.len) {
        Ok(n) if n > 0 && n < NONE => n,
        _ => {
            return Err(TokenizerError::BadTokenCount {
                n_tokens: tokens_info.len,
            })
        }
    };
    let mut texts = Arena::with_capacity(n_tokens as usize)?;
    let mut it = g.array(src, keys::TOKENS).map_err(gguf_err(keys::TOKENS))?;
    let mut buf = Vec::new();
    let mut i = 0u32;
    while let Some(r) = it.next_bytes(&mut buf) {
        let t = r.map_err(gguf_err(keys::TOKENS))?;
        let ok = if t.is_empty() {
            let name = oom::format(format_args!("[EMPTY_{i}]"), "a token text")?;
            texts.push(name.as_bytes())?
        } else {
            texts.push(t)?
        };
        if !ok {
            return Err(TokenizerError::BadTokenCount {
                n_tokens: tokens_info.len,
            });
        }
        i += 1;
    }
    texts.shrink_to_fit();
    Ok((texts, n_tokens))
}

/// Scores (f32 or i32), one per token.
fn read_scores<S: Storage + ?Sized>(
    g: &Gguf,
    src: &S,
    n_tokens: u32,
) -> Result<Vec<f32>, TokenizerError> {
    let allowed = [ValueType::F32, ValueType::I32];
    let Some(a) = array_of(g, keys::SCORES, &allowed, "f32 or i32")? else {
        return Ok(oom::filled(n_tokens as usize, 0.0, "the token scores")?);
    };
    check_len(keys::SCORES, a.len, n_tokens)?;
    let it = g.array(src, keys::SCORES).map_err(gguf_err(keys::SCORES))?;
    let v = if a.elem == ValueType::F32 {
        it.f32s().map_err(gguf_err(keys::SCORES))?
    } else {
        let ints = it.ints().map_err(gguf_err(keys::SCORES))?;
        oom::collect(ints.len(), "the token scores", |i| ints[i] as f32)?
    };
    Ok(v.into_iter()
        .map(|s| if s.is_nan() { f32::NEG_INFINITY } else { s })
        .collect())
}

/// Token types (i32), one per token, as attributes.
fn read_attrs<S: Storage + ?Sized>(
    g: &Gguf,
    src: &S,
    n_tokens: u32,
) -> Result<Vec<u8>, TokenizerError> {
    let Some(a) = array_of(g, keys::TOKEN_TYPE, &[ValueType::I32], "i32")? else {
        return Ok(oom::filled(
            n_tokens as usize,
            attr::NORMAL,
            "the token types",
        )?);
    };
    check_len(keys::TOKEN_TYPE, a.len, n_tokens)?;
    let it = g
        .array(src, keys::TOKEN_TYPE)
        .map_err(gguf_err(keys::TOKEN_TYPE))?;
    let types = it.ints().map_err(gguf_err(keys::TOKEN_TYPE))?;
    let mut attrs = oom::with_capacity(types.len(), "the token types")?;
    attrs.extend(types.into_iter().map(attr::from_type));
    Ok(attrs)
}

/// Special-token ids: the model's defaults (dropped if out of range), then the metadata; and the
/// `add_bos` / `add_eos` flags, which need their token.
fn special_ids(
    g: &Gguf,
    model: Model,
    n_tokens: u32,
    flags: &mut Flags,
) -> Result<SpecialIds, TokenizerError> {
    let default = |id: u32| (id < n_tokens).then_some(id);
    let mut ids = match model {
        Model::SentencePiece => SpecialIds {
            bos: default(1),
            eos: default(2),
            unk: default(0),
            ..SpecialIds::default()
        },
        Model::ByteLevelBpe => SpecialIds {
            bos: default(11),
            eos: default(11),
            ..SpecialIds::default()
        },
    };
    type Slot = fn(&mut SpecialIds) -> &mut Option<u32>;
    let table: [(&'static str, Slot); 17] = [
        (keys::BOS_ID, |s| &mut s.bos),
        (keys::EOS_ID, |s| &mut s.eos),
        (keys::EOT_ID, |s| &mut s.eot),
        (keys::EOM_ID, |s| &mut s.eom),
        (keys::UNK_ID, |s| &mut s.unk),
        (keys::SEP_ID, |s| &mut s.sep),
        (keys::PAD_ID, |s| &mut s.pad),
        (keys::MASK_ID, |s| &mut s.mask),
        (keys::FIM_PRE_ID, |s| &mut s.fim_pre),
        (keys::FIM_SUF_ID, |s| &mut s.fim_suf),
        (keys::FIM_MID_ID, |s| &mut s.fim_mid),
        (keys::FIM_PAD_ID, |s| &mut s.fim_pad),
        (keys::FIM_REP_ID, |s| &mut s.fim_rep),
        (keys::FIM_SEP_ID, |s| &mut s.fim_sep),
        // Older names of the FIM keys.
        (keys::PREFIX_ID, |s| &mut s.fim_pre),
        (keys::SUFFIX_ID, |s| &mut s.fim_suf),
        (keys::MIDDLE_ID, |s| &mut s.fim_mid),
    ];
    for (key, slot) in table {
        if let Some(id) = opt_id(g, key, n_tokens)? {
            *slot(&mut ids) = Some(id);
        }
    }
    if let Some(b) = opt_bool(g, keys::ADD_BOS)? {
        flags.add_bos = b;
    }
    if let Some(b) = opt_bool(g, keys::ADD_EOS)? {
        flags.add_eos = b;
    }
    if flags.add_bos && ids.bos.is_none() {
        return Err(TokenizerError::MissingSpecialToken {
            flag: keys::ADD_BOS,
            id_key: keys::BOS_ID,
        });
    }
    if flags.add_eos && ids.eos.is_none() {
        return Err(TokenizerError::MissingSpecialToken {
            flag: keys::ADD_EOS,
            id_key: keys::EOS_ID,
        });
    }
    Ok(ids)
}

fn mark_control(vocab: &mut Vocab, id: u32) {
    if let Some(a) = vocab.attrs.get_mut(id as usize) {
        *a |= attr::CONTROL;
    }
}

/// Special tokens recognised by their text, as llama.cpp does; they become control tokens.
fn find_special_texts(ids: &mut SpecialIds, vocab: &mut Vocab) {
    for (slot, texts) in [
        (&mut ids.eot, EOT_TEXTS),
        (&mut ids.eom, EOM_TEXTS),
        (&mut ids.fim_pre, FIM_PRE_TEXTS),
        (&mut ids.fim_suf, FIM_SUF_TEXTS),
        (&mut ids.fim_mid, FIM_MID_TEXTS),
        (&mut ids.fim_pad, FIM_PAD_TEXTS),
        (&mut ids.fim_rep, FIM_REP_TEXTS),
        (&mut ids.fim_sep, FIM_SEP_TEXTS),
    ] {
        if slot.is_none() {
            if let Some(id) = texts.iter().find_map(|t| vocab.find(t.as_bytes())) {
                *slot = Some(id);
                mark_control(vocab, id);
            }
        }
    }
}

/// End of generation: FIM pad/repo/separator, tokens with an end-like text, EOS, EOT, EOM (sorted).
fn end_of_generation(ids: &SpecialIds, vocab: &mut Vocab) -> Result<Vec<u32>, OutOfMemory> {
    // Room for every candidate: three FIM ids, the texts, three end ids (so nothing grows).
    let mut eog = oom::with_capacity(EOG_TEXTS.len() + 6, "the end-of-generation tokens")?;
    eog.extend(
        [ids.fim_pad, ids.fim_rep, ids.fim_sep]
            .into_iter()
            .flatten(),
    );
    for t in EOG_TEXTS {
        if let Some(id) = vocab.find(t.as_bytes()) {
            eog.push(id);
            mark_control(vocab, id);
        }
    }
    // gpt-oss: these are plain text markers, not control tokens.
    for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(id) = vocab.find(t.as_bytes()) {
            vocab.attrs[id as usize] = attr::USER_DEFINED;
        }
    }
    eog.extend([ids.eos, ids.eot, ids.eom].into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();
    let in_eog = |vocab: &Vocab, eog: &[u32], t: &str| {
        vocab
            .find(t.as_bytes())
            .filter(|id| eog.binary_search(id).is_ok())
    };
    // o200k_harmony / solar-open: "<|end|>" does not end generation when "<|return|>" and
    // "<|call|>" (or "<|calls|>" and "<|flush|>") exist.
    let call = in_eog(vocab, &eog, "<|call|>").or(in_eog(vocab, &eog, "<|calls|>"));
    let has_return = in_eog(vocab, &eog, "<|return|>").is_some();
    let has_flush = in_eog(vocab, &eog, "<|flush|>").is_some();
    if let Some(end) = in_eog(vocab, &eog, "<|end|>") {
        if call.is_some() && (has_return || has_flush) {
            eog.retain(|&i| i != end);
            vocab.attrs[end as usize] = attr::USER_DEFINED;
        }
    }
    // gemma4 / paddleocr: "</s>" is not an end token next to "<|tool_response>".
    if in_eog(vocab, &eog, "<|tool_response>").is_some() {
        if let Some(s) = in_eog(vocab, &eog, "</s>") {
            eog.retain(|&i| i != s);
            vocab.attrs[s as usize] = attr::NORMAL;
        }
    }
    Ok(eog)
}

/// Special tokens for the partition, longest text first.
/// (A text that is not UTF-8 could match inside a character of valid text; such tokens are
/// left out, which changes nothing for real vocabularies.)
fn partition_tokens(vocab: &Vocab, n_tokens: u32) -> Result<Vec<u32>, OutOfMemory> {
    let tokens = || {
        (0..n_tokens)
            .filter(|&id| {
                vocab.attr(id) & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .filter(|&id| core::str::from_utf8(vocab.text(id)).is_ok())
    };
    let mut special = oom::with_capacity(tokens().count(), "the special tokens")?;
    special.extend(tokens());
    // The id breaks ties, so the unstable sort (which does not allocate) orders as a stable one.
    special.sort_unstable_by(|&a, &b| {
        vocab
            .text(b)
            .len()
            .cmp(&vocab.text(a).len())
            .then(a.cmp(&b))
    });
    Ok(special)
}

/// The byte tables: each byte's token (`<0xNN>` or its GPT-2 character), its raw one-byte token,
/// and the GPT-2 characters.
#[allow(clippy::type_complexity)]
fn byte_tables(model: Model, vocab: &Vocab) -> ([u32; 256], [u32; 256], [([u8; 2], u8); 256]) {
    let byte_chars = unicode::byte_char_table();
    let mut byte_tokens = [NONE; 256];
    let mut raw_byte_tokens = [NONE; 256];
    for b in 0..256usize {
        raw_byte_tokens[b] = vocab.find(&[b as u8]).unwrap_or(NONE);
        byte_tokens[b] = match model {
            Model::SentencePiece => {
                // `<0xNN>` spelled on the stack (a `format!` per byte made 256 allocations).
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                let hex = [b'<', b'0', b'x', HEX[b >> 4], HEX[b & 15], b'>'];
                vocab.find(&hex).unwrap_or(raw_byte_tokens[b])
            }
            Model::ByteLevelBpe => {
                let (c, n) = &byte_chars[b];
                vocab.find(&c[..*n as usize]).unwrap_or(NONE)
            }
        };
    }
    (byte_tokens, raw_byte_tokens, byte_chars)
}

fn gguf_err(key: &'static str) -> impl Fn(crate::gguf::GgufError) -> TokenizerError {
    move |error| TokenizerError::Gguf { key, error }
}

fn opt_str<'g>(g: &'g Gguf, key: &'static str) -> Result<Option<&'g str>, TokenizerError> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(TokenizerError::WrongType {
            key,
            expected: "a string",
            found: v.value_type(),
        }),
    }
}

fn opt_bool(g: &Gguf, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(TokenizerError::WrongType {
            key,
            expected: "a bool",
            found: v.value_type(),
        }),
    }
}

/// A token id from metadata: any integer type, `0 <= id < n_tokens`.
fn opt_id(g: &Gguf, key: &'static str, n_tokens: u32) -> Result<Option<u32>, TokenizerError> {
    let Some(v) = g.get(key) else { return Ok(None) };
    let value = match v.as_i64() {
        Some(i) => i,
        None if v.as_u64().is_some() => i64::MAX,
        None => {
            return Err(TokenizerError::WrongType {
                key,
                expected: "an integer token id",
                found: v.value_type(),
            })
        }
    };
    if value < 0 || value >= i64::from(n_tokens) {
        return Err(TokenizerError::IdOutOfRange {
            key,
            value,
            n_tokens,
        });
    }
    Ok(Some(value as u32))
}

/// The array `key`, checking its element type against `allowed`.
fn array_of(
    g: &Gguf,
    key: &'static str,
    allowed: &[ValueType],
    expected: &'static str,
) -> Result<Option<crate::gguf::ArrayInfo>, TokenizerError> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) if allowed.contains(&a.elem) => Ok(Some(*a)),
        Some(Value::Array(a)) => Err(TokenizerError::WrongElemType {
            key,
            expected,
            found: a.elem,
        }),
        Some(v) => Err(TokenizerError::WrongType {
            key,
            expected: "an array",
            found: v.value_type(),
        }),
    }
}

fn check_len(key: &'static str, len: u64, n_tokens: u32) -> Result<(), TokenizerError> {
    if len != u64::from(n_tokens) {
        return Err(TokenizerError::LengthMismatch {
            key,
            len,
            n_tokens: u64::from(n_tokens),
        });
    }
    Ok(())
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Read and check `tokenizer.ggml.merges`: each rule is `left right`, both tokens.
fn read_merges<S: Storage + ?Sized>(
    g: &Gguf,
    src: &S,
    vocab: &Vocab,
) -> Result<Merges, TokenizerError> {
    let key = keys::MERGES;
    let info = array_of(g, key, &[ValueType::String], "strings")?
        .ok_or(TokenizerError::MissingKey { key })?;
    let mut rules = Vec::with_capacity(info.len as usize);
    let mut it = g.array(src, key).map_err(gguf_err(key))?;
    let mut buf = Vec::new();
    let mut joined = Vec::new();
    let mut index = 0u64;
    while let Some(r) = it.next_bytes(&mut buf) {
        let m = r.map_err(gguf_err(key))?;
        // As llama.cpp: split at the first space after the first byte.
        let Some(sp) = m.iter().skip(1).position(|&c| c == b' ').map(|p| p + 1) else {
            return Err(TokenizerError::MalformedMerge {
                index,
                merge: lossy(m),
            });
        };
        let (left, right) = (&m[..sp], &m[sp + 1..]);
        let lookup = |part: &[u8]| {
            vocab
                .find(part)
                .ok_or_else(|| TokenizerError::MergeUnknownToken {
                    index,
                    merge: lossy(m),
                    part: lossy(part),
                })
        };
        let (l, r) = (lookup(left)?, lookup(right)?);
        joined.clear();
        joined.extend_from_slice(left);
        joined.extend_from_slice(right);
        let merged = vocab.find(&joined).unwrap_or(NONE);
        rules.push(Merge {
            key: bpe::merge_key(l, r),
            rank: u32::try_from(index).unwrap_or(NONE),
            merged,
        });
        index += 1;
    }
    Ok(Merges::new(rules))
}
