//! JSON mode: constrain generation token by token so the reply is always one syntactically valid
//! JSON document (RFC 8259), and say when that document is complete.
//!
//! Two layers:
//!
//! - [`JsonState`], a pushdown automaton over bytes: the JSON grammar (objects, arrays, strings
//!   with every escape including `\uXXXX` and surrogate pairs, numbers with sign, fraction and
//!   exponent, `true`/`false`/`null`, whitespace) with a stack of at most [`MAX_DEPTH`] open
//!   containers kept in a bit set. It is `Copy` and 12 bytes, so checking a token is "copy the
//!   state, push the token's bytes, stop at the first refusal". Strings must be valid UTF-8 (no
//!   overlong forms, no encoded surrogates, nothing above U+10FFFF) and a `\u` high surrogate must
//!   be followed by a `\u` low surrogate, so every accepted document is also a valid Rust `str`
//!   that strict parsers (serde_json) accept.
//! - [`JsonConstraint`], the automaton against a vocabulary: the token bytes are laid out once,
//!   grouped by first byte; [`JsonConstraint::mask`] sets the logit of every token that cannot
//!   come next to `f32::NEG_INFINITY`, [`JsonConstraint::accept`] advances over the drawn token.
//!   It implements [`LogitsFilter`](super::stop::LogitsFilter) for the generation loops
//!   (`Engine::generate_filtered`, the speculative loop).
//!
//! Choices, on purpose:
//!
//! - **The top-level value must be an object or an array.** That is what a user of `json = true`
//!   wants, and it makes completion observable: a top-level number (`12`) is only known to be
//!   over when something follows it, which generation never produces.
//! - **No dead ends.** Every prefix the automaton accepts can be completed, and
//!   [`JsonState::closing_bytes`] is the exact length of the shortest completion (the unit tests
//!   check the Bellman equation `closing_bytes(s) = 1 + min over bytes b of closing_bytes(s + b)`
//!   on every reachable state they visit, which makes it exact).
//! - **The reply always completes within the budget.** `mask` is told how many tokens remain
//!   (`remaining`, this one included) and allows a token only if, after it, the shortest completion
//!   still fits in the tokens left at one byte per token: `closing_bytes(after) <= remaining - 1`.
//!   The vocabulary must hold a one-byte token for every byte that starts a shortest completion
//!   (checked by [`JsonConstraint::new`], true of every byte-level BPE vocabulary and of
//!   SentencePiece vocabularies with byte fallback), so at least one token is always allowed and
//!   the budget invariant carries from step to step. When the budget is already too small
//!   (`remaining < closing_bytes`, e.g. `max_tokens = 1`) only tokens that shorten the completion
//!   are allowed: the reply gets as close as it can and is cut off by the token limit.
//! - **Whitespace runs are bounded.** Outside strings at most `max_whitespace` bytes of whitespace
//!   in a row ([`DEFAULT_MAX_WHITESPACE`] unless set), so the model cannot spend its budget on
//!   blanks. Inside strings raw control characters (newline, tab...) are invalid JSON anyway.
//! - **Special tokens never appear.** Control and end-of-generation tokens have no bytes for the
//!   constraint and are never allowed, except that once the value is complete *only* the
//!   end-of-generation tokens are allowed, for callers that keep sampling after completion.
//!
//! Files: `state.rs` the automaton, `constraint.rs` the automaton against a vocabulary, `tests.rs`
//! an independent checker and the properties above.
#![forbid(unsafe_code)]

mod constraint;
mod state;
#[cfg(test)]
mod tests;

pub use constraint::{JsonConstraint, JsonError};
pub use state::JsonState;

/// Most containers (`{` / `[`) open at once. Deeper nesting is refused (the model can still put
/// strings, numbers and literals there).
pub const MAX_DEPTH: usize = 32;

/// Default limit of consecutive whitespace bytes outside strings.
pub const DEFAULT_MAX_WHITESPACE: u8 = 2;
