//! Chat on the serial line: the conversation ([`session`]), the line editor ([`lineedit`]) and the
//! `/` commands ([`commands`]). The run starts it once the model is loaded, through its
//! conversation step (`run/converse.rs`: the template, the system prompt and the prompt cache).

pub mod commands;
pub mod lineedit;
pub mod session;

pub use session::{Chat, ChatError, Line};
