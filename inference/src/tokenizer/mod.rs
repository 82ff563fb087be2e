//! Tokenizers built from GGUF metadata, behaving as llama.cpp's (`llama-vocab.cpp`, `unicode.cpp`).
//!
//! # Design
//!
//! [`Tokenizer::from_gguf`] (`load.rs`) reads the `tokenizer.ggml.*` keys once through the
//! [`Storage`](crate::storage::Storage) (arrays are streamed, never held twice), validates them,
//! and builds flat tables:
//! - the token texts in one byte arena with an open-addressing hash index: lookup by text is a hash
//!   and one or two comparisons (no per-token allocation);
//! - per-token attributes (normal, control, user-defined, byte, ...) and scores;
//! - for byte-level BPE, the merge table as `(left id, right id) → (rank, merged id)` sorted by the
//!   id pair, so merging works on ids alone;
//! - the decoded piece of every token (llama.cpp's `token_to_piece` with `special = true`) in a second
//!   arena, so decoding is a copy;
//! - the special tokens (control, user-defined, unknown) longest first, and the end-of-generation set.
//!
//! Building the SmolLM2 vocabulary (49,152 tokens, 48,900 merges) is one pass over the arrays, a hash
//! table and a sort of the merges: about 15 ms on a PC (half of it reading the file). Encoding a
//! prompt takes microseconds and allocates only small per-call vectors.
//!
//! Encoding ([`Tokenizer::encode`]) follows llama.cpp's `tokenize`:
//! 1. special-token partition (`tokenizer_st_partition`): for each special token, longest text
//!    first, every occurrence in the not-yet-matched text becomes that token. User-defined tokens are
//!    always matched; control and unknown tokens only with `parse_special`;
//! 2. each remaining text fragment goes to the model's tokenizer:
//!    - `llama` (SentencePiece, `spm.rs`): a space is prepended when `add_space_prefix` is set and the
//!      fragment starts the text or follows a special token; spaces become U+2581; pieces are merged
//!      by score; characters without a token fall back to `<0xNN>` byte tokens;
//!    - `gpt2` (byte-level BPE, `bpe.rs`): the pre-tokenizer named by `tokenizer.ggml.pre` splits the
//!      fragment into words (hand-written matchers in `pretok.rs`, no regex engine, Unicode classes
//!      from the same UCD version as llama.cpp's tables); each word's bytes become GPT-2 characters
//!      and are merged by rank;
//! 3. with `add_special`, BOS and EOS are added as `add_bos_token` / `add_eos_token` say.
//!
//! Decoding: [`Tokenizer::token_to_piece`] gives a token's bytes (control tokens as their text),
//! [`Tokenizer::decode`] concatenates them (dropping the SentencePiece prefix space of the first
//! token, as llama.cpp does), [`Tokenizer::detokenize`] is llama.cpp's `detokenize` with its options,
//! and [`StreamDecoder`] turns pieces into complete UTF-8 for a console.
//!
//! Bad metadata is a [`TokenizerError`] naming the key and the value; nothing here panics on input.
#![forbid(unsafe_code)]

mod bpe;
mod error;
mod load;
mod pretok;
mod spm;
mod stream;
mod symbols;
pub mod unicode;
mod unicode_table;
mod vocab;

pub use error::TokenizerError;
pub use stream::StreamDecoder;

use crate::oom::{self, OutOfMemory};
use alloc::vec::Vec;
use bpe::Merges;
use core::fmt;
use pretok::{Class, Stage};
use spm::TOKENS;
use vocab::{attr, Arena, Vocab};

/// "No token" inside the tables.
pub(crate) const NONE: u32 = u32::MAX;

/// The metadata keys read by [`Tokenizer::from_gguf`].
pub mod keys {
    pub const MODEL: &str = "tokenizer.ggml.model";
    pub const PRE: &str = "tokenizer.ggml.pre";
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    pub const SCORES: &str = "tokenizer.ggml.scores";
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    pub const MERGES: &str = "tokenizer.ggml.merges";
    pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
    pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
    pub const EOT_ID: &str = "tokenizer.ggml.eot_token_id";
    pub const EOM_ID: &str = "tokenizer.ggml.eom_token_id";
    pub const UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
    /// (sic: llama.cpp's spelling)
    pub const SEP_ID: &str = "tokenizer.ggml.seperator_token_id";
    pub const PAD_ID: &str = "tokenizer.ggml.padding_token_id";
    pub const MASK_ID: &str = "tokenizer.ggml.mask_token_id";
    pub const FIM_PRE_ID: &str = "tokenizer.ggml.fim_pre_token_id";
    pub const FIM_SUF_ID: &str = "tokenizer.ggml.fim_suf_token_id";
    pub const FIM_MID_ID: &str = "tokenizer.ggml.fim_mid_token_id";
    pub const FIM_PAD_ID: &str = "tokenizer.ggml.fim_pad_token_id";
    pub const FIM_REP_ID: &str = "tokenizer.ggml.fim_rep_token_id";
    pub const FIM_SEP_ID: &str = "tokenizer.ggml.fim_sep_token_id";
    pub const PREFIX_ID: &str = "tokenizer.ggml.prefix_token_id";
    pub const SUFFIX_ID: &str = "tokenizer.ggml.suffix_token_id";
    pub const MIDDLE_ID: &str = "tokenizer.ggml.middle_token_id";
    pub const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
    pub const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
    pub const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
}

/// The tokenizer model (`tokenizer.ggml.model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// `llama`: SentencePiece BPE with byte fallback (Llama 2, TinyLlama).
    SentencePiece,
    /// `gpt2`: byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM).
    ByteLevelBpe,
}

/// The pre-tokenizer of a byte-level BPE vocabulary (`tokenizer.ggml.pre`), by split rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// No `pre` key, or `default`: llama.cpp's fallback rules (punctuation runs, the GPT-2 rule,
    /// number runs, then three ASCII digits at a time).
    Default,
    /// `gpt2`, `gpt-2`, `phi-2`, `mpt`, `olmo`, ...: the GPT-2 rule.
    Gpt2,
    /// `llama-bpe`, `llama3`, `llama-v3`, `dbrx`, ...: the llama-3 rule (numbers of up to 3 digits,
    /// case-insensitive contractions, newline handling).
    Llama3,
    /// `qwen2`, `stablelm2`, `deepseek-r1-qwen`, ...: the llama-3 rule with one digit per number.
    Qwen2,
    /// `smollm`, `starcoder`, `refact`, `command-r`, ...: every digit alone, then the GPT-2 rule.
    StarCoder,
}

impl PreTokenizer {
    fn stages(self) -> &'static [Stage] {
        match self {
            PreTokenizer::Default => &[
                Stage::Runs(Class::PunctAndSome),
                Stage::Gpt2,
                Stage::Runs(Class::Number),
                Stage::AsciiDigits3,
            ],
            PreTokenizer::Gpt2 => &[Stage::Gpt2],
            PreTokenizer::Llama3 => &[Stage::Llama3 { max_digits: 3 }],
            PreTokenizer::Qwen2 => &[Stage::Llama3 { max_digits: 1 }],
            PreTokenizer::StarCoder => &[Stage::Isolate(Class::Number), Stage::Gpt2],
        }
    }
}

/// What a `pre` name selects, with llama.cpp's per-name flags.
struct PreConfig {
    pre: PreTokenizer,
    /// Strip spaces before punctuation when detokenizing (`clean_up_tokenization_spaces`).
    clean_spaces: bool,
    /// A word that is a whole token is not merged.
    ignore_merges: bool,
    /// Default of `add_bos_token`.
    add_bos: bool,
}

fn pre_config(name: Option<&str>) -> Option<PreConfig> {
    use PreTokenizer::*;
    let c = |pre, clean_spaces, ignore_merges, add_bos| {
        Some(PreConfig {
            pre,
            clean_spaces,
            ignore_merges,
            add_bos,
        })
    };
    match name {
        None | Some("default") => c(Default, true, false, false),
        Some(n) => match n {
            "gpt2" | "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es"
            | "jina-v2-de" | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais"
            | "exaone4" => c(Gpt2, true, false, false),
            "trillion" | "granite-docling" => c(Gpt2, false, false, false),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" | "jina-v5-nano" => c(Llama3, true, true, true),
            "dbrx" | "smaug-bpe" => c(Llama3, true, false, false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
                c(Qwen2, false, false, false)
            }
            "stablelm2" | "megrez" => c(Qwen2, true, false, false),
            "smollm" | "command-r" => c(StarCoder, false, false, false),
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
                c(StarCoder, true, false, false)
            }
            _ => None,
        },
    }
}

/// Texts that make a token the EOT token when no `eot_token_id` is given (llama.cpp's list; the
/// first present wins).
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

/// Texts of tokens that end generation (llama.cpp's list).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// The special-token ids of a vocabulary (`None`: not defined).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

/// A tokenizer for one vocabulary: encode text to token ids and decode ids to bytes.
#[derive(Clone)]
pub struct Tokenizer {
    model: Model,
    pre: PreTokenizer,
    vocab: Vocab,
    /// `token_to_piece` of every token.
    pieces: Arena,
    merges: Merges,
    /// SPM: the `<0xNN>` token of each byte; BPE: the token of each byte's GPT-2 character.
    byte_tokens: [u32; 256],
    /// The token whose text is the one raw byte (BPE fallback).
    raw_byte_tokens: [u32; 256],
    byte_chars: [([u8; 2], u8); 256],
    /// Control, user-defined and unknown tokens, longest text first.
    special: Vec<u32>,
    /// End-of-generation tokens, sorted.
    eog: Vec<u32>,
    ids: SpecialIds,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    ignore_merges: bool,
    clean_spaces: bool,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("model", &self.model)
            .field("pre", &self.pre)
            .field("n_tokens", &self.vocab.len())
            .field("n_merges", &self.merges.len())
            .field("n_special", &self.special.len())
            .field("ids", &self.ids)
            .field("eog", &self.eog)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .field("add_space_prefix", &self.add_space_prefix)
            .finish()
    }
}

/// A piece of text during encoding: raw text (byte range) or an already matched special token.
#[derive(Debug, Clone, Copy)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

impl Tokenizer {
    /// `token_to_piece(id, special = true)` of every token, as llama.cpp caches it.
    fn build_pieces(&self) -> Result<Arena, TokenizerError> {
        let n = self.vocab.len();
        let mut pieces = Arena::with_capacity(n)?;
        let mut buf = Vec::new();
        for id in 0..n as u32 {
            buf.clear();
            let text = self.vocab.text(id);
            let a = self.vocab.attr(id);
            if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
                oom::extend(&mut buf, text, PIECE)?;
            } else if a & attr::NORMAL != 0 {
                match self.model {
                    Model::SentencePiece => unescape_spaces(text, &mut buf)?,
                    Model::ByteLevelBpe => decode_gpt2_text(text, &mut buf)?,
                }
            } else if a & attr::BYTE != 0 {
                oom::push(&mut buf, parse_byte_token(text), PIECE)?;
            }
            // The arena holds at most the token texts, a little expanded; it fits in u32 offsets
            // because the texts did (a piece is never more than ~2x its text plus a short marker).
            if !pieces.push(&buf)? {
                pieces.push(&[])?;
            }
        }
        pieces.shrink_to_fit();
        Ok(pieces)
    }

    // ---- accessors ----

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    pub fn model(&self) -> Model {
        self.model
    }

    /// The pre-tokenizer (meaningful for [`Model::ByteLevelBpe`]).
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        self.pre
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.ids.bos
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.ids.eos
    }

    /// End-of-turn token: `eot_token_id`, or the first of llama.cpp's EOT texts in the vocabulary.
    pub fn eot(&self) -> Option<u32> {
        self.ids.eot
    }

    /// All special-token ids.
    pub fn special_ids(&self) -> &SpecialIds {
        &self.ids
    }

    /// Whether generation stops at `id` (EOS, EOT, EOM, and the tokens llama.cpp treats as such).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The end-of-generation tokens, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    /// Whether `encode(.., add_special = true, ..)` adds BOS / EOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether SentencePiece text gets a leading space (and decoding drops it).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }

    /// The token's text as stored in the vocabulary (SentencePiece's U+2581, GPT-2's byte
    /// characters, `<0xNN>`...), or `None` for an id outside it.
    pub fn token_text(&self, id: u32) -> Option<&[u8]> {
        ((id as usize) < self.vocab.len()).then(|| self.vocab.text(id))
    }

    /// The token whose text is exactly `text`.
    pub fn token_id(&self, text: &[u8]) -> Option<u32> {
        self.vocab.find(text)
    }

    /// The token's score (SentencePiece merge priority; 0 without scores).
    pub fn token_score(&self, id: u32) -> f32 {
        self.vocab.score(id)
    }

    /// Whether `id` is a control token (type 3, or marked so by its text).
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attr(id) & attr::CONTROL != 0
    }

    /// Whether `id` is a byte token (`<0xNN>`, type 6).
    pub fn is_byte(&self, id: u32) -> bool {
        self.vocab.attr(id) & attr::BYTE != 0
    }

    // ---- encoding ----

    /// Tokenize `text`. `add_special` adds BOS/EOS as the metadata says; `parse_special` turns the
    /// text of control tokens into those tokens (user-defined tokens are always matched).
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let mut out = Vec::new();
        self.encode_into(text, add_special, parse_special, &mut out)?;
        Ok(out)
    }

    /// [`Tokenizer::encode`] for bytes that should be UTF-8; invalid UTF-8 is an error naming the
    /// offset of the first bad byte.
    pub fn encode_bytes(
        &self,
        bytes: &[u8],
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let text = core::str::from_utf8(bytes).map_err(|e| TokenizerError::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        self.encode(text, add_special, parse_special)
    }

    /// [`Tokenizer::encode`], appending to `out`.
    pub fn encode_into(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizerError> {
        let fragments = self.partition(text, parse_special)?;
        if add_special && self.add_bos {
            oom::extend(out, self.ids.bos.as_slice(), TOKENS)?;
        }
        match self.model {
            Model::SentencePiece => {
                let mut buf = Vec::new();
                let mut prev_special = true; // the first fragment gets the prefix too
                for f in &fragments {
                    match *f {
                        Fragment::Text(a, b) => {
                            buf.clear();
                            if self.add_space_prefix && prev_special {
                                oom::push(&mut buf, b' ', PROMPT)?;
                            }
                            oom::extend(&mut buf, &text.as_bytes()[a..b], PROMPT)?;
                            let escaped = escape_spaces(&buf)?;
                            spm::tokenize(
                                &self.vocab,
                                &self.byte_tokens,
                                self.ids.unk,
                                &escaped,
                                out,
                            )?;
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            oom::push(out, id, TOKENS)?;
                            prev_special = true;
                        }
                    }
                }
            }
            Model::ByteLevelBpe => {
                let tables = bpe::Tables {
                    merges: &self.merges,
                    byte_tokens: &self.byte_tokens,
                    raw_byte_tokens: &self.raw_byte_tokens,
                    byte_chars: &self.byte_chars,
                    ignore_merges: self.ignore_merges,
                };
                let mut scratch = Vec::new();
                for f in &fragments {
                    match *f {
                        Fragment::Text(a, b) => {
                            // Special tokens are UTF-8, so fragments end on character boundaries.
                            let Some(frag) = text.get(a..b) else { continue };
                            for (wa, wb) in pretok::split(frag, self.pre.stages()) {
                                bpe::tokenize_word(
                                    &self.vocab,
                                    &tables,
                                    &frag.as_bytes()[wa..wb],
                                    &mut scratch,
                                    out,
                                )?;
                            }
                        }
                        Fragment::Token(id) => oom::push(out, id, TOKENS)?,
                    }
                }
            }
        }
        if add_special && self.add_eos {
            oom::extend(out, self.ids.eos.as_slice(), TOKENS)?;
        }
        Ok(())
    }

    /// Split `text` around special tokens (llama.cpp's `tokenizer_st_partition`): for each special
    /// token, longest first, every occurrence inside still-unmatched text becomes that token.
    fn partition(&self, text: &str, parse_special: bool) -> Result<Vec<Fragment>, OutOfMemory> {
        const FRAGMENTS: &str = "the prompt's fragments";
        let bytes = text.as_bytes();
        let mut frags = Vec::new();
        if !bytes.is_empty() {
            oom::push(&mut frags, Fragment::Text(0, bytes.len()), FRAGMENTS)?;
        }
        let mut next = Vec::new();
        for &id in &self.special {
            if !parse_special && self.vocab.attr(id) & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let pat = self.vocab.text(id);
            if pat.is_empty() {
                continue;
            }
            let mut found = false;
            next.clear();
            for &f in &frags {
                let Fragment::Text(a, b) = f else {
                    oom::push(&mut next, f, FRAGMENTS)?;
                    continue;
                };
                let mut pos = a;
                while let Some(m) = find(&bytes[pos..b], pat) {
                    found = true;
                    if m > 0 {
                        oom::push(&mut next, Fragment::Text(pos, pos + m), FRAGMENTS)?;
                    }
                    oom::push(&mut next, Fragment::Token(id), FRAGMENTS)?;
                    pos += m + pat.len();
                }
                if pos < b {
                    oom::push(&mut next, Fragment::Text(pos, b), FRAGMENTS)?;
                }
            }
            if found {
                core::mem::swap(&mut frags, &mut next);
            }
        }
        Ok(frags)
    }

    // ---- decoding ----

    /// The bytes of token `id` (llama.cpp's `token_to_piece` with `special = true`): normal tokens
    /// as text (U+2581 → space, GPT-2 characters → bytes), byte tokens as their byte, control,
    /// user-defined and unknown tokens as their text, unused ones empty. Empty for an unknown id.
    pub fn token_to_piece(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize)
    }

    /// The pieces of `ids` concatenated; with `add_space_prefix` (SentencePiece) one leading space of
    /// the first piece is dropped, as llama.cpp's detokenizer does. Control tokens appear as their
    /// text. No other clean-up: for byte-level BPE this gives back exactly the encoded text.
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let mut p = self.token_to_piece(id);
            if i == 0 && self.add_space_prefix && p.first() == Some(&b' ') {
                p = &p[1..];
            }
            out.extend_from_slice(p);
        }
        out
    }

    /// llama.cpp's `detokenize`: `remove_special` drops a leading BOS and trailing EOS (when the
    /// model adds them), `unparse_special` keeps control and unknown tokens' text (else they are
    /// dropped); the SentencePiece prefix space is removed; and for vocabularies with
    /// `clean_up_tokenization_spaces` the spaces before `?!.,` and some apostrophes are removed.
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        if remove_special && self.add_bos {
            if let (Some(&first), Some(bos)) = (ids.first(), self.ids.bos) {
                if first == bos {
                    remove_space = false;
                    ids = &ids[1..];
                }
            }
        }
        if remove_special && self.add_eos {
            if let (Some(&last), Some(eos)) = (ids.last(), self.ids.eos) {
                if last == eos {
                    ids = &ids[..ids.len() - 1];
                }
            }
        }
        let mut text = Vec::new();
        for &id in ids {
            let mut p = self.token_to_piece(id);
            if !unparse_special && self.vocab.attr(id) & (attr::UNKNOWN | attr::CONTROL) != 0 {
                p = &[];
            }
            if remove_space && p.first() == Some(&b' ') {
                p = &p[1..];
            }
            remove_space = false;
            text.extend_from_slice(p);
        }
        if self.clean_spaces {
            clean_up_spaces(&mut text);
        }
        text
    }
}

/// Spaces → U+2581 (SentencePiece's visible space).
fn escape_spaces(text: &[u8]) -> Result<Vec<u8>, OutOfMemory> {
    // Each space becomes three bytes: room for exactly that, so the pushes never grow it.
    let spaces = text.iter().filter(|&&b| b == b' ').count();
    let mut out = oom::with_capacity(text.len() + 2 * spaces, PROMPT)?;
    for &b in text {
        if b == b' ' {
            out.extend_from_slice("\u{2581}".as_bytes());
        } else {
            out.push(b);
        }
    }
    Ok(out)
}

/// What the prompt's text buffers are, in an out-of-memory error.
const PROMPT: &str = "the prompt's text";

/// What the buffer a token's piece is built in is, in an out-of-memory error.
const PIECE: &str = "a token's piece";

/// U+2581 → space.
fn unescape_spaces(text: &[u8], out: &mut Vec<u8>) -> Result<(), OutOfMemory> {
    const MARK: &[u8] = "\u{2581}".as_bytes();
    // The result is never longer than the text.
    oom::reserve(out, text.len(), PIECE)?;
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(MARK) {
            out.push(b' ');
            i += MARK.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    Ok(())
}

/// A GPT-2 token text back to bytes. A character outside the byte alphabet is written as llama.cpp
/// does: `[UNK_BYTE_0x<its UTF-8 in hex><the token text>]`; invalid UTF-8 counts as U+FFFD per byte.
fn decode_gpt2_text(text: &[u8], out: &mut Vec<u8>) -> Result<(), OutOfMemory> {
    let unknown = |c: char, out: &mut Vec<u8>| {
        oom::extend(out, b"[UNK_BYTE_0x", PIECE)?;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut b = [0u8; 4];
        for x in c.encode_utf8(&mut b).bytes() {
            let hex = [HEX[(x >> 4) as usize], HEX[(x & 15) as usize]];
            oom::extend(out, &hex, PIECE)?;
        }
        oom::extend(out, text, PIECE)?;
        oom::push(out, b']', PIECE)
    };
    for chunk in text.utf8_chunks() {
        for c in chunk.valid().chars() {
            match unicode::char_to_byte(c) {
                Some(b) => oom::push(out, b, PIECE)?,
                None => unknown(c, out)?,
            }
        }
        for _ in chunk.invalid() {
            unknown(char::REPLACEMENT_CHARACTER, out)?;
        }
    }
    Ok(())
}

/// The byte of a `<0xNN>` token (llama.cpp reads the two characters after `<0x` as hex).
fn parse_byte_token(text: &[u8]) -> u8 {
    let digits = text.get(3..).unwrap_or(&[]);
    let mut v: u32 = 0;
    for &c in digits.iter().take(2) {
        match (c as char).to_digit(16) {
            Some(d) => v = v * 16 + d,
            None => break,
        }
    }
    v as u8
}

/// First occurrence of `needle` (non-empty) in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    let first = needle[0];
    let last_start = hay.len() - needle.len();
    let mut i = 0;
    while i <= last_start {
        match hay[i..=last_start].iter().position(|&c| c == first) {
            None => return None,
            Some(p) => {
                i += p;
                if &hay[i..i + needle.len()] == needle {
                    return Some(i);
                }
                i += 1;
            }
        }
    }
    None
}

/// llama.cpp's three clean-up passes of `detokenize` (spaces before `?!.,`, around a lone `'`, and
/// before `'s 'm 're 've`), done in place the same way.
fn clean_up_spaces(text: &mut Vec<u8>) {
    // Pass 1: " ?", " !", " .", " ," lose the space.
    let n = text.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);

    // Pass 2: " ' " becomes "'".
    let n = text.len();
    let mut total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = text[i];
        if x == b'\'' && i + 1 < n && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    text.truncate(total);

    // Pass 3: " 's", " 'm", " 're", " 've" lose the space.
    let n = text.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = text[i + 1];
            if matches!(x1, b's' | b'm') {
                total -= 1;
            } else if i + 2 < n && !matches!(x1, b't' | b'd') {
                let x2 = text[i + 2];
                if (x1 == b'r' || x1 == b'v') && x2 == b'e' {
                    total -= 1;
                }
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_substring() {
        assert_eq!(find(b"abcabd", b"abd"), Some(3));
        assert_eq!(find(b"ab", b"abc"), None);
        assert_eq!(find(b"aaa", b"a"), Some(0));
        assert_eq!(find(b"xyz", b"z"), Some(2));
    }

    #[test]
    fn clean_up() {
        let mut t = b"Hello , world ! It 's a ' test ' isn 't it ?".to_vec();
        clean_up_spaces(&mut t);
        assert_eq!(
            core::str::from_utf8(&t).unwrap(),
            "Hello, world! It's a'test'isn 't it?"
        );
    }

    #[test]
    fn byte_tokens() {
        assert_eq!(parse_byte_token(b"<0x0A>"), 10);
        assert_eq!(parse_byte_token(b"<0xE2>"), 0xE2);
    }
}
