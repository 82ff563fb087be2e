//! Chat on the serial line: the conversation ([`session`]), the line editor ([`lineedit`]), the
//! `/` commands ([`commands`]) and the run's chat step (`step`: the template, the system prompt
//! and the prompt cache), which [`crate::run`] starts once the model is loaded.

pub mod commands;
pub mod lineedit;
pub mod session;
pub(crate) mod step;

pub use session::{Chat, Line};
