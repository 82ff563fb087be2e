//! `config`: the `lmboot.txt` parser.

use super::peak::bounded;

/// The most one run may allocate: the parsed values of a 4 KiB file.
pub const MAX_ALLOC: usize = 64 << 10;

/// Parse, and validate the sampler settings.
pub fn run(data: &[u8]) {
    bounded("config", MAX_ALLOC, || {
        if let Ok(c) = runtime::config::Config::parse(data) {
            let _ = c.sampler.validate();
        }
    });
}
