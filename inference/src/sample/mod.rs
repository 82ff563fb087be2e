//! Sampling: from the logits to the next token, and when to stop.
//!
//! - [`sampler`]: repetition penalty, then greedy or top-k → top-p → min-p → temperature → a seeded
//!   draw, and the exact check of guessed tokens for speculative decoding;
//! - [`json`]: JSON mode, a constraint that masks the logits so the reply is one valid JSON
//!   document (a [`stop::LogitsFilter`]);
//! - [`stop`]: the draw under a filter and the stop rules every generation loop applies (end
//!   token, callback, complete output, token limit, full context), and the report they fill.

pub mod json;
pub mod sampler;
pub mod stop;
