//! Chat on the serial line: the conversation ([`session`]), the line editor ([`lineedit`]) and the
//! `/` commands ([`commands`]). The run starts a chat once the model is loaded
//! ([`crate::run`]'s chat step).

pub mod commands;
pub mod lineedit;
pub mod session;

pub use session::{Chat, Line};
