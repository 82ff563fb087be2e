//! Chat templates (prompt templates): the text around each message of a conversation, so that an
//! instruction-tuned model sees the format it was trained on.
//!
//! GGUF files carry the model's Jinja template under `tokenizer.chat_template`. lmboot does not
//! run Jinja: [`Template::detect`] recognises the template's family by its markers, and each
//! family's format is written out below (checked against the Hugging Face templates and
//! llama.cpp's `llm_chat_apply_template`).
//!
//! # Incremental transcripts
//!
//! The kernel keeps the KV cache between turns, so the transcript is built piece by piece and
//! each piece is tokenized and fed once:
//!
//! ```text
//! system(sys)                      once, at the start (always call it: it may be empty, or
//!                                  carry the BOS or the opening of the first turn)
//! user_turn(msg1, true)            the first message and the assistant header
//! reply1                           the model's tokens, as generated
//! end_of_turn()                    closes the reply (the sampled stop token was not fed)
//! user_turn(msg2, false)           ...
//! ```
//!
//! The concatenation equals what the full template renders for the same conversation
//! ([`Template::render`] is that reference rendering, and the tests compare the two). Encode each
//! piece with `parse_special = true` and without `add_special`, except for the first piece (even
//! if it is empty) when the template does not write the BOS itself ([`Template::renders_bos`]):
//! then `add_special` lets the tokenizer add one if its vocabulary asks for it.
//!
//! For ChatML and Llama-3 every piece boundary sits next to a special token, so tokenizing the
//! pieces one by one gives exactly the tokens of the whole transcript. Zephyr and Llama-2 run on
//! SentencePiece vocabularies whose text after a boundary gets a space prefix; the text is the
//! same, the tokens at a boundary may differ slightly (as in llama.cpp's own chat mode, which also
//! tokenizes each new part on its own).
#![forbid(unsafe_code)]

use crate::gguf::{Gguf, Value};
use crate::oom::OutOfMemory;
use crate::tokenizer::Tokenizer;
use alloc::string::String;

/// The GGUF metadata key of the Jinja chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The model's Jinja chat template (`tokenizer.chat_template`), if the file has one as a string.
pub fn chat_template(g: &Gguf) -> Option<&str> {
    g.get(CHAT_TEMPLATE_KEY).and_then(Value::as_str)
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// The role's name as templates write it.
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a conversation, for [`Template::render`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub role: Role,
    pub content: &'a str,
}

/// A chat template family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// ChatML (SmolLM2-Instruct, Qwen, ...). Every message is
    /// `<|im_start|>{role}\n{content}<|im_end|>\n` and the generation prompt is
    /// `<|im_start|>assistant\n`:
    ///
    /// ```text
    /// <|im_start|>system\n{sys}<|im_end|>\n<|im_start|>user\n{msg}<|im_end|>\n<|im_start|>assistant\n
    /// {reply}<|im_end|>\n<|im_start|>user\n{msg2}<|im_end|>\n<|im_start|>assistant\n
    /// ```
    ///
    /// Content is not trimmed. Many ChatML templates (SmolLM2's, Qwen2's) insert a default system
    /// message when the conversation has none: [`default_system_prompt`] extracts it, and the
    /// kernel passes it to [`Template::system`].
    ChatMl,
    /// Zephyr (TinyLlama-1.1B-Chat). Every message is `<|{role}|>\n{content}</s>\n` and the
    /// generation prompt `<|assistant|>\n` (the Hugging Face template renders with
    /// `trim_blocks`, so the newline after each `{{ ... }}` line stays):
    ///
    /// ```text
    /// <|system|>\n{sys}</s>\n<|user|>\n{msg}</s>\n<|assistant|>\n{reply}</s>\n<|user|>\n...
    /// ```
    ///
    /// Content is not trimmed; no BOS in the text (the tokenizer adds it).
    Zephyr,
    /// Llama-2-chat. The system prompt sits inside the first instruction, every user message is
    /// wrapped in `<s>[INST] ... [/INST]` and every reply is `' ' + reply + ' </s>'`:
    ///
    /// ```text
    /// <s>[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{msg} [/INST] {reply} </s><s>[INST] {msg2} [/INST]
    /// ```
    ///
    /// Without a system prompt the first turn is `<s>[INST] {msg} [/INST]`. The template strips
    /// messages; here user messages are trimmed on both sides (the Hugging Face template keeps
    /// leading spaces of the first message when there is a system prompt; llama.cpp trims
    /// neither). The model's reply starts with the space after `[/INST]` (SentencePiece's `▁`).
    /// The text writes BOS (`<s>`) itself.
    Llama2,
    /// Llama-3-Instruct. Every message is
    /// `<|start_header_id|>{role}<|end_header_id|>\n\n{content | trim}<|eot_id|>`, the first one
    /// preceded by `<|begin_of_text|>`:
    ///
    /// ```text
    /// <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{sys}<|eot_id|>
    /// <|start_header_id|>user<|end_header_id|>\n\n{msg}<|eot_id|>
    /// <|start_header_id|>assistant<|end_header_id|>\n\n{reply}<|eot_id|>...
    /// ```
    ///
    /// (Llama 3.1's template adds a dated default system message; that is not reproduced.) The
    /// text writes BOS (`<|begin_of_text|>`) itself.
    Llama3,
    /// Gemma (2 and 3). The system prompt opens the first user turn; every turn is
    /// `<start_of_turn>{user|model}\n{content | trim}<end_of_turn>\n`, the first preceded by
    /// `<bos>`, and the generation prompt is `<start_of_turn>model\n`:
    ///
    /// ```text
    /// <bos><start_of_turn>user\n{sys}\n\n{msg}<end_of_turn>\n<start_of_turn>model\n
    /// {reply}<end_of_turn>\n<start_of_turn>user\n{msg2}<end_of_turn>\n<start_of_turn>model\n
    /// ```
    ///
    /// Gemma-3-270M's GGUF carries no template: its vocabulary's `<start_of_turn>` selects this.
    Gemma,
}

impl Template {
    /// Every family.
    pub const ALL: [Template; 5] = [
        Template::ChatMl,
        Template::Zephyr,
        Template::Llama2,
        Template::Llama3,
        Template::Gemma,
    ];

    /// A short name for messages (`chatml`, `zephyr`, `llama2`, `llama3`, `gemma`).
    pub fn name(self) -> &'static str {
        match self {
            Template::ChatMl => "chatml",
            Template::Zephyr => "zephyr",
            Template::Llama2 => "llama2",
            Template::Llama3 => "llama3",
            Template::Gemma => "gemma",
        }
    }

    /// The family of a Jinja chat template, recognised by its markers, or `None` if none matches.
    ///
    /// `<|im_start|>` → ChatML; `<|start_header_id|>` → Llama-3; `<|user|>` and `<|assistant|>`
    /// → Zephyr (but not with `<|end|>`, which marks Phi-3's different format); `[INST]` →
    /// Llama-2.
    pub fn from_markers(chat_template: &str) -> Option<Template> {
        let has = |m: &str| chat_template.contains(m);
        if has("<|im_start|>") {
            Some(Template::ChatMl)
        } else if has("<start_of_turn>") {
            Some(Template::Gemma)
        } else if has("<|start_header_id|>") {
            Some(Template::Llama3)
        } else if has("<|user|>") && has("<|assistant|>") && !has("<|end|>") {
            Some(Template::Zephyr)
        } else if has("[INST]") {
            Some(Template::Llama2)
        } else {
            None
        }
    }

    /// The template family for a model: by the markers of its Jinja template (see
    /// [`Template::from_markers`]); else by its vocabulary (`has_token` says whether a token with
    /// that exact text exists): `<|im_start|>` → ChatML, `<|start_header_id|>` and `<|eot_id|>`
    /// → Llama-3, `[INST]` → Llama-2; else ChatML.
    pub fn detect(chat_template: Option<&str>, has_token: impl Fn(&str) -> bool) -> Template {
        if let Some(t) = chat_template.and_then(Template::from_markers) {
            return t;
        }
        if has_token("<|im_start|>") {
            Template::ChatMl
        } else if has_token("<start_of_turn>") && has_token("<end_of_turn>") {
            Template::Gemma
        } else if has_token("<|start_header_id|>") && has_token("<|eot_id|>") {
            Template::Llama3
        } else if has_token("[INST]") {
            Template::Llama2
        } else {
            Template::ChatMl
        }
    }

    /// [`Template::detect`] on a model's GGUF metadata and vocabulary.
    pub fn from_gguf(g: &Gguf, tok: &Tokenizer) -> Template {
        Template::detect(chat_template(g), |t| tok.token_id(t.as_bytes()).is_some())
    }

    /// Whether the rendered text writes the BOS token itself (Llama-2's `<s>`, Llama-3's
    /// `<|begin_of_text|>`). If not, encode the first piece with the tokenizer's `add_special`
    /// so a BOS is added when the vocabulary asks for one; if so, never add one.
    pub fn renders_bos(self) -> bool {
        matches!(self, Template::Llama2 | Template::Llama3 | Template::Gemma)
    }

    /// The text that starts a conversation, with system prompt `text` (none if empty). Call it
    /// once before the first [`Template::user_turn`], even without a system prompt: Llama-2
    /// opens its first instruction here and Llama-3 writes its BOS.
    pub fn system(self, text: &str) -> Result<String, OutOfMemory> {
        match self {
            Template::ChatMl => concat(&around(["<|im_start|>system\n", "<|im_end|>\n"], text)),
            Template::Zephyr => concat(&around(["<|system|>\n", "</s>\n"], text)),
            Template::Llama2 => {
                let [a, b, c] = around(["<<SYS>>\n", "\n<</SYS>>\n\n"], text);
                concat(&["<s>[INST] ", a, b, c])
            }
            Template::Llama3 => {
                let [a, b, c] = around(
                    [
                        "<|start_header_id|>system<|end_header_id|>\n\n",
                        "<|eot_id|>",
                    ],
                    text.trim(),
                );
                concat(&["<|begin_of_text|>", a, b, c])
            }
            Template::Gemma => {
                let [_, b, c] = around(["", "\n\n"], text);
                concat(&["<bos><start_of_turn>user\n", b, c])
            }
        }
    }

    /// The text for a new user message `text`, including the assistant header, so that the model
    /// writes the reply next. `first_turn` is true for the first message after
    /// [`Template::system`].
    pub fn user_turn(self, text: &str, first_turn: bool) -> Result<String, OutOfMemory> {
        let unless_first = |s: &'static str| if first_turn { "" } else { s };
        match self {
            Template::ChatMl => concat(&[
                "<|im_start|>user\n",
                text,
                "<|im_end|>\n<|im_start|>assistant\n",
            ]),
            Template::Zephyr => concat(&["<|user|>\n", text, "</s>\n<|assistant|>\n"]),
            Template::Llama2 => concat(&[unless_first("<s>[INST] "), text.trim(), " [/INST]"]),
            Template::Llama3 => concat(&[
                "<|start_header_id|>user<|end_header_id|>\n\n",
                text.trim(),
                "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
            ]),
            Template::Gemma => concat(&[
                unless_first("<start_of_turn>user\n"),
                text.trim(),
                "<end_of_turn>\n<start_of_turn>model\n",
            ]),
        }
    }

    /// The text that closes the assistant's reply in the transcript: `<|im_end|>\n`, `</s>\n`,
    /// ` </s>`, `<|eot_id|>`. Append it after every reply whose stop token was not fed to the
    /// model: the model stopped on its end token (sampled but not run), hit the length limit, or
    /// was interrupted.
    pub fn end_of_turn(self) -> &'static str {
        match self {
            Template::ChatMl => "<|im_end|>\n",
            Template::Zephyr => "</s>\n",
            Template::Llama2 => " </s>",
            Template::Llama3 => "<|eot_id|>",
            Template::Gemma => "<end_of_turn>\n",
        }
    }

    /// The token text the model writes to end its reply ([`Template::end_of_turn`] starts with
    /// it, after Llama-2's space).
    pub fn end_token(self) -> &'static str {
        match self {
            Template::ChatMl => "<|im_end|>",
            Template::Zephyr | Template::Llama2 => "</s>",
            Template::Llama3 => "<|eot_id|>",
            Template::Gemma => "<end_of_turn>",
        }
    }

    /// What follows [`Template::end_token`] in [`Template::end_of_turn`]: the text to append
    /// instead of `end_of_turn` when the model's end token *was* fed through the model (`\n` for
    /// ChatML and Zephyr, nothing for the Llamas; for Llama-2 the transcript then lacks the space
    /// before `</s>`, as in llama.cpp's rendering).
    pub fn after_end_token(self) -> &'static str {
        match self {
            Template::ChatMl | Template::Zephyr | Template::Gemma => "\n",
            Template::Llama2 | Template::Llama3 => "",
        }
    }

    /// Texts that end the reply when they appear in the decoded output: the end token, and the
    /// opening of a new turn (a model that forgets to stop would otherwise write the user's part
    /// too; Zephyr's `<|user|>` is plain text in TinyLlama's vocabulary).
    pub fn stop_strings(self) -> &'static [&'static str] {
        match self {
            Template::ChatMl => &["<|im_end|>", "<|im_start|>", "<|endoftext|>"],
            Template::Zephyr => &["</s>", "<|user|>", "<|system|>"],
            Template::Llama2 => &["</s>", "[INST]"],
            Template::Llama3 => &["<|eot_id|>", "<|start_header_id|>", "<|end_of_text|>"],
            Template::Gemma => &["<end_of_turn>", "<start_of_turn>", "<eos>"],
        }
    }

    /// The byte offset of the first stop string in `reply`, if any: the reply ends there.
    pub fn find_stop(self, reply: &str) -> Option<usize> {
        self.stop_strings()
            .iter()
            .filter_map(|s| reply.find(s))
            .min()
    }

    /// The length of the longest tail of `text` that could be the start of a stop string (and is
    /// not a whole one): a streaming printer holds these bytes back until the next token decides.
    /// Always on a character boundary of `text`.
    pub fn partial_stop_len(self, text: &str) -> usize {
        let mut best = 0;
        for stop in self.stop_strings() {
            for n in (best + 1..stop.len().min(text.len() + 1)).rev() {
                let tail = &text.as_bytes()[text.len() - n..];
                if stop.as_bytes().starts_with(tail) {
                    best = n;
                    break;
                }
            }
        }
        // Stop strings are ASCII, so a matching tail is ASCII and starts on a boundary.
        best
    }

    /// The reference rendering of a whole conversation, as the family's Jinja template renders
    /// it (with `add_generation_prompt`): what the incremental pieces must add up to. A system
    /// message counts only as the first message (as in the templates), and for Llama-2 assistant
    /// messages are written as the template stores them (without the leading space the model
    /// generates).
    pub fn render(self, messages: &[Message], add_generation_prompt: bool) -> String {
        let mut s = String::new();
        match self {
            Template::ChatMl => {
                for m in messages {
                    push_all(
                        &mut s,
                        &[
                            "<|im_start|>",
                            m.role.name(),
                            "\n",
                            m.content,
                            "<|im_end|>\n",
                        ],
                    );
                }
                if add_generation_prompt {
                    s.push_str("<|im_start|>assistant\n");
                }
            }
            Template::Zephyr => {
                for m in messages {
                    push_all(&mut s, &["<|", m.role.name(), "|>\n", m.content, "</s>\n"]);
                }
                if add_generation_prompt {
                    s.push_str("<|assistant|>\n");
                }
            }
            Template::Llama2 => {
                // The Hugging Face Llama-2-chat template: the system message is folded into the
                // first message, which is then stripped as a whole; the template ignores
                // add_generation_prompt ("[/INST]" already asks for the reply).
                let (system, rest) = match messages.split_first() {
                    Some((m, rest)) if m.role == Role::System => (Some(m.content), rest),
                    _ => (None, messages),
                };
                for (i, m) in rest.iter().enumerate() {
                    let mut content = String::new();
                    if let (0, Some(sys)) = (i, system) {
                        push_all(&mut content, &["<<SYS>>\n", sys, "\n<</SYS>>\n\n"]);
                    }
                    content.push_str(m.content);
                    match m.role {
                        Role::User => push_all(&mut s, &["<s>[INST] ", content.trim(), " [/INST]"]),
                        Role::Assistant => push_all(&mut s, &[" ", content.trim(), " </s>"]),
                        Role::System => {}
                    }
                }
            }
            Template::Llama3 => {
                for (i, m) in messages.iter().enumerate() {
                    if i == 0 {
                        s.push_str("<|begin_of_text|>");
                    }
                    push_all(
                        &mut s,
                        &[
                            "<|start_header_id|>",
                            m.role.name(),
                            "<|end_header_id|>\n\n",
                            m.content.trim(),
                            "<|eot_id|>",
                        ],
                    );
                }
                if add_generation_prompt {
                    s.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
                }
            }
            Template::Gemma => render_gemma(&mut s, messages, add_generation_prompt),
        }
        s
    }
}

/// Gemma's template: `<bos>`, the system message (if first) as a prefix of the first turn's
/// content, assistant turns as `model`, contents trimmed.
fn render_gemma(s: &mut String, messages: &[Message], add_generation_prompt: bool) {
    s.push_str("<bos>");
    let (prefix, rest) = match messages.split_first() {
        Some((m, rest)) if m.role == Role::System => (Some(m.content), rest),
        _ => (None, messages),
    };
    for (i, m) in rest.iter().enumerate() {
        let role = match m.role {
            Role::Assistant => "model",
            r => r.name(),
        };
        push_all(s, &["<start_of_turn>", role, "\n"]);
        if let (0, Some(p)) = (i, prefix) {
            push_all(s, &[p, "\n\n"]);
        }
        push_all(s, &[m.content.trim(), "<end_of_turn>\n"]);
    }
    if add_generation_prompt {
        s.push_str("<start_of_turn>model\n");
    }
}

fn push_all(s: &mut String, parts: &[&str]) {
    for p in parts {
        s.push_str(p);
    }
}

/// `text` between `open` and `close`, or nothing if `text` is empty.
fn around<'a>([open, close]: [&'a str; 2], text: &'a str) -> [&'a str; 3] {
    if text.is_empty() {
        ["", "", ""]
    } else {
        [open, text, close]
    }
}

/// `parts` joined, in a `String` reserved fallibly to its exact length: a chat turn's text is as
/// long as what the user typed.
fn concat(parts: &[&str]) -> Result<String, OutOfMemory> {
    let len = parts.iter().map(|p| p.len()).sum();
    let mut s = String::new();
    s.try_reserve_exact(len).map_err(|_| OutOfMemory {
        what: "the chat template's text",
        bytes: len,
    })?;
    push_all(&mut s, parts);
    Ok(s)
}

/// The default system message a ChatML template inserts when the conversation has none, e.g.
/// SmolLM2's "You are a helpful AI assistant named SmolLM, trained by Hugging Face" or Qwen2's
/// "You are a helpful assistant.".
///
/// Looks for a string literal `'<|im_start|>system\n...<|im_end|>` in the template (the `\n` may
/// be a newline or the escape `\n`; escapes `\n`, `\t`, `\'`, `\"` and `\\` in the text are
/// decoded). Occurrences that build the text from an expression (`+ message['content']`) are
/// skipped. `Ok(None)` if there is none; an error if the heap has no room for the text.
pub fn default_system_prompt(chat_template: &str) -> Result<Option<String>, OutOfMemory> {
    const OPEN: &str = "<|im_start|>system";
    const CLOSE: &str = "<|im_end|>";
    let mut rest = chat_template;
    while let Some(i) = rest.find(OPEN) {
        rest = &rest[i + OPEN.len()..];
        let body = match rest.strip_prefix('\n') {
            Some(b) => b,
            None => match rest.strip_prefix("\\n") {
                Some(b) => b,
                None => continue,
            },
        };
        let Some(end) = body.find(CLOSE) else {
            continue;
        };
        if let Some(text) = unescape_literal(&body[..end])? {
            if !text.trim().is_empty() {
                return Ok(Some(text));
            }
        }
    }
    Ok(None)
}

/// The text of a piece of a Jinja string literal, or `None` if it leaves the literal (an
/// unescaped quote) or holds template syntax.
fn unescape_literal(lit: &str) -> Result<Option<String>, OutOfMemory> {
    let mut out = String::new();
    // Unescaping only shortens the text, so this one reservation holds it.
    out.try_reserve_exact(lit.len()).map_err(|_| OutOfMemory {
        what: "the template's default system prompt",
        bytes: lit.len(),
    })?;
    let mut chars = lit.chars();
    while let Some(c) = chars.next() {
        let decoded = match c {
            '\\' => match chars.next() {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('\'') => '\'',
                Some('"') => '"',
                Some('\\') => '\\',
                _ => return Ok(None),
            },
            '\'' | '"' | '{' | '}' => return Ok(None),
            c => c,
        };
        out.push(decoded);
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn dsp(t: &str) -> Option<String> {
        default_system_prompt(t).unwrap()
    }

    /// SmolLM2-135M-Instruct's template, as stored in its GGUF.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    /// Qwen2.5-Instruct's template (abridged around the system parts), as its JSON decodes: the
    /// newlines inside literals are the escape `\n`.
    const QWEN25: &str = "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- messages[0]['content'] }}\n    {%- else %}\n        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

    /// TinyLlama-1.1B-Chat-v1.0's template.
    const ZEPHYR: &str = "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

    /// Llama-2-chat's template (the part after the system-message split).
    const LLAMA2: &str = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

    /// Meta-Llama-3-8B-Instruct's template.
    const LLAMA3: &str = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

    /// Gemma 3's template (abridged: string contents only).
    const GEMMA3: &str = "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";

    /// Phi-3's template: `<|user|>`/`<|assistant|>` with `<|end|>`, not Zephyr.
    const PHI3: &str = "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}";

    fn no_tokens(_: &str) -> bool {
        false
    }

    #[test]
    fn detects_by_markers() {
        for (tpl, want) in [
            (SMOLLM2, Template::ChatMl),
            (QWEN25, Template::ChatMl),
            (ZEPHYR, Template::Zephyr),
            (LLAMA2, Template::Llama2),
            (LLAMA3, Template::Llama3),
            (GEMMA3, Template::Gemma),
        ] {
            assert_eq!(Template::detect(Some(tpl), no_tokens), want, "{tpl}");
            // The markers win over the vocabulary.
            assert_eq!(Template::detect(Some(tpl), |_| true), want, "{tpl}");
        }
        assert_eq!(Template::from_markers(PHI3), None);
        assert_eq!(Template::from_markers(""), None);
        assert_eq!(Template::from_markers("{{ messages }}"), None);
    }

    #[test]
    fn falls_back_to_the_vocabulary_then_chatml() {
        let vocab = |toks: &'static [&'static str]| move |t: &str| toks.contains(&t);
        assert_eq!(
            Template::detect(None, vocab(&["<|im_start|>", "<|im_end|>"])),
            Template::ChatMl
        );
        assert_eq!(
            Template::detect(None, vocab(&["<|start_header_id|>", "<|eot_id|>"])),
            Template::Llama3
        );
        assert_eq!(
            Template::detect(None, vocab(&["<start_of_turn>", "<end_of_turn>"])),
            Template::Gemma
        );
        assert_eq!(
            Template::detect(Some("unknown {{ x }}"), vocab(&["[INST]", "[/INST]"])),
            Template::Llama2
        );
        // Both: ChatML first.
        assert_eq!(
            Template::detect(
                None,
                vocab(&["<|start_header_id|>", "<|eot_id|>", "<|im_start|>"])
            ),
            Template::ChatMl
        );
        // Only half of Llama-3's markers is not enough.
        assert_eq!(
            Template::detect(None, vocab(&["<|start_header_id|>"])),
            Template::ChatMl
        );
        assert_eq!(Template::detect(None, no_tokens), Template::ChatMl);
        assert_eq!(Template::detect(Some(PHI3), no_tokens), Template::ChatMl);
    }

    #[test]
    fn default_system_prompts() {
        assert_eq!(
            dsp(SMOLLM2).as_deref(),
            Some("You are a helpful AI assistant named SmolLM, trained by Hugging Face")
        );
        assert_eq!(
            dsp(QWEN25).as_deref(),
            Some("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")
        );
        // A template that only renders the given system message has no default.
        let plain = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
        assert_eq!(dsp(plain), None);
        let expr = "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}";
        assert_eq!(dsp(expr), None);
        for t in [
            ZEPHYR,
            LLAMA2,
            LLAMA3,
            "",
            "<|im_start|>system",
            "<|im_start|>system\n",
        ] {
            assert_eq!(dsp(t), None, "{t:?}");
        }
        // Escapes are decoded; an empty default is no default.
        assert_eq!(
            dsp("'<|im_start|>system\\nIt\\'s\\tme\\\\<|im_end|>'").as_deref(),
            Some("It's\tme\\")
        );
        assert_eq!(dsp("'<|im_start|>system\n<|im_end|>'"), None);
        assert_eq!(dsp("'<|im_start|>system\\n\\q<|im_end|>'"), None);
    }

    /// A conversation: system prompt, then (user, reply) pairs, then a last user message.
    struct Conv<'a> {
        system: &'a str,
        turns: &'a [(&'a str, &'a str)],
        last: &'a str,
    }

    /// The model's reply as it generates it (Llama-2's starts with the space after `[/INST]`).
    fn generated(t: Template, reply: &str) -> String {
        match t {
            Template::Llama2 => alloc::format!(" {reply}"),
            _ => reply.into(),
        }
    }

    fn incremental(t: Template, c: &Conv) -> String {
        let mut s = t.system(c.system).unwrap();
        let mut first = true;
        for (user, reply) in c.turns {
            s += &t.user_turn(user, first).unwrap();
            first = false;
            s += &generated(t, reply);
            s += t.end_of_turn();
        }
        s += &t.user_turn(c.last, first).unwrap();
        s
    }

    fn messages<'a>(c: &Conv<'a>) -> Vec<Message<'a>> {
        let mut m = Vec::new();
        if !c.system.is_empty() {
            m.push(Message {
                role: Role::System,
                content: c.system,
            });
        }
        for (user, reply) in c.turns {
            m.push(Message {
                role: Role::User,
                content: user,
            });
            m.push(Message {
                role: Role::Assistant,
                content: reply,
            });
        }
        m.push(Message {
            role: Role::User,
            content: c.last,
        });
        m
    }

    #[test]
    fn incremental_pieces_add_up_to_the_full_rendering() {
        let turns: &[(&str, &str)] = &[
            ("Hi!", "Hello! How can I help you today?"),
            ("What is 2+2?", "2 + 2 = 4.\n\nAnything else?"),
            ("Écris un haïku 🙂", "Le vent d'automne\nsouffle"),
        ];
        let systems = ["", "You are terse.", "Line one.\nLine two."];
        for t in Template::ALL {
            for system in systems {
                for n in 0..=turns.len() {
                    let c = Conv {
                        system,
                        turns: &turns[..n],
                        last: "And now?",
                    };
                    assert_eq!(
                        incremental(t, &c),
                        t.render(&messages(&c), true),
                        "{} system={system:?} turns={n}",
                        t.name()
                    );
                }
            }
        }
    }

    /// [`incremental`] of `system`, the `(user, reply)` exchanges `turns`, then `last`.
    fn conversation(t: Template, system: &str, turns: &[(&str, &str)], last: &str) -> String {
        incremental(
            t,
            &Conv {
                system,
                turns,
                last,
            },
        )
    }

    #[test]
    fn chatml_exact_text() {
        let t = Template::ChatMl;
        let s = conversation(t, "Be brief.", &[("Hi", "Hello!")], "Bye");
        assert_eq!(
            s,
            "<|im_start|>system\nBe brief.<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n\
             <|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(t.system("").unwrap(), "");
        // SmolLM2's template without a system message: the default, then the turn.
        let sys = dsp(SMOLLM2).unwrap();
        assert_eq!(
            conversation(t, &sys, &[], "Hi"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
             Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn zephyr_exact_text() {
        let t = Template::Zephyr;
        let s = conversation(t, "sys", &[("msg", "reply")], "msg2");
        assert_eq!(
            s,
            "<|system|>\nsys</s>\n<|user|>\nmsg</s>\n<|assistant|>\nreply</s>\n\
             <|user|>\nmsg2</s>\n<|assistant|>\n"
        );
        assert_eq!(
            conversation(t, "", &[], "msg"),
            "<|user|>\nmsg</s>\n<|assistant|>\n"
        );
    }

    #[test]
    fn llama2_exact_text() {
        let t = Template::Llama2;
        // The generated reply starts with a space (see `generated`).
        let s = conversation(t, "sys", &[("msg", "reply")], " msg2 ");
        assert_eq!(
            s,
            "<s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nmsg [/INST] reply </s><s>[INST] msg2 [/INST]"
        );
        assert_eq!(conversation(t, "", &[], "msg"), "<s>[INST] msg [/INST]");
    }

    #[test]
    fn gemma_exact_text() {
        let t = Template::Gemma;
        let s = conversation(t, "Be brief.", &[("Hi", "Hello!")], " Bye ");
        assert_eq!(
            s,
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n\
             Hello!<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
        );
        assert_eq!(
            conversation(t, "", &[], "Hi"),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
        );
        assert!(t.renders_bos());
        assert_eq!(t.find_stop("Sure.<end_of_turn>"), Some(5));
    }

    #[test]
    fn llama3_exact_text() {
        let t = Template::Llama3;
        let s = conversation(t, "sys", &[("msg", "reply")], "msg2\n");
        assert_eq!(
            s,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nmsg<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\nreply<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nmsg2<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        assert_eq!(
            t.system("  ").unwrap(),
            "<|begin_of_text|>",
            "a blank system prompt is none"
        );
    }

    #[test]
    fn end_tokens_and_stops() {
        for t in Template::ALL {
            let eot = t.end_of_turn();
            let (head, tail) = eot.split_at(eot.find(t.end_token()).unwrap());
            assert!(head.trim().is_empty(), "{}", t.name());
            assert_eq!(&tail[t.end_token().len()..], t.after_end_token());
            assert!(t.stop_strings().contains(&t.end_token()));
            assert_eq!(t.find_stop("no stop here"), None);
            let reply = alloc::format!("Sure.{}more", t.end_token());
            assert_eq!(t.find_stop(&reply), Some(5));
            assert_eq!(
                t.renders_bos(),
                t.system("").unwrap().contains(['<']),
                "{}",
                t.name()
            );
        }
        // The earliest stop wins.
        assert_eq!(
            Template::ChatMl.find_stop("a<|im_start|>b<|im_end|>"),
            Some(1)
        );
        assert_eq!(Template::Zephyr.find_stop("ok\n<|user|>\nmore"), Some(3));
    }

    #[test]
    fn partial_stops_are_held_back() {
        let t = Template::ChatMl;
        assert_eq!(t.partial_stop_len(""), 0);
        assert_eq!(t.partial_stop_len("Hello"), 0);
        assert_eq!(t.partial_stop_len("Hello<"), 1);
        assert_eq!(t.partial_stop_len("Hello<|"), 2);
        assert_eq!(t.partial_stop_len("Hello<|im_"), 5);
        assert_eq!(t.partial_stop_len("Hello<|im_e"), 6);
        assert_eq!(t.partial_stop_len("Hello<|ix"), 0);
        assert_eq!(t.partial_stop_len("<|im_end|"), 9);
        assert_eq!(t.partial_stop_len("héllo 🙂"), 0);
        let z = Template::Zephyr;
        assert_eq!(z.partial_stop_len("done</"), 2);
        assert_eq!(z.partial_stop_len("done<|us"), 4);
        // The held-back tail always starts on a character boundary.
        for s in ["é<", "🙂<|im", "<|", "a"] {
            for t in Template::ALL {
                let n = t.partial_stop_len(s);
                assert!(s.is_char_boundary(s.len() - n), "{s:?}");
            }
        }
    }

    #[test]
    fn names_are_distinct() {
        let names: Vec<_> = Template::ALL.iter().map(|t| t.name()).collect();
        for (i, a) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(a));
        }
        assert_eq!(Role::Assistant.name(), "assistant");
    }
}
