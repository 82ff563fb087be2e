//! Streaming UTF-8 output: token pieces in, complete characters out.

/// Turns a stream of byte pieces (token pieces, which may end inside a character) into text.
///
/// Every complete character is handed to the caller's `emit` callback as soon as its last byte
/// arrives; an incomplete tail (at most 3 bytes) is held back until the next piece. Bytes that can
/// never become valid UTF-8 are emitted as U+FFFD, one per maximal invalid subsequence, exactly as
/// `String::from_utf8_lossy` does on the whole stream. [`StreamDecoder::finish`] flushes an
/// unfinished tail as U+FFFD. Valid runs of a piece are passed through without copying, and
/// nothing allocates, so it can write straight to a UART.
#[derive(Debug, Clone, Default)]
pub struct StreamDecoder {
    /// Bytes of the character being assembled.
    pending: [u8; 4],
    n_pending: usize,
    /// Bytes the pending character needs in total.
    need: usize,
}

const REPLACEMENT: &str = "\u{FFFD}";

impl StreamDecoder {
    pub const fn new() -> Self {
        StreamDecoder {
            pending: [0; 4],
            n_pending: 0,
            need: 0,
        }
    }

    /// Feed `bytes`; `emit` receives the text they complete, possibly in several parts.
    pub fn push(&mut self, bytes: &[u8], mut emit: impl FnMut(&str)) {
        let mut rest = bytes;
        // First finish the held-back character, byte by byte.
        while self.n_pending > 0 {
            let Some((&b, tail)) = rest.split_first() else {
                return;
            };
            if !self.continues(b) {
                // The pending sequence cannot complete: one invalid subsequence. `b` starts afresh.
                emit(REPLACEMENT);
                self.n_pending = 0;
                break;
            }
            self.pending[self.n_pending] = b;
            self.n_pending += 1;
            rest = tail;
            if self.n_pending == self.need {
                self.n_pending = 0;
                match core::str::from_utf8(&self.pending[..self.need]) {
                    Ok(s) => emit(s),
                    Err(_) => emit(REPLACEMENT),
                }
            }
        }
        // Then whole runs.
        loop {
            match core::str::from_utf8(rest) {
                Ok(s) => {
                    if !s.is_empty() {
                        emit(s);
                    }
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    if let Ok(s) = core::str::from_utf8(valid) {
                        if !s.is_empty() {
                            emit(s);
                        }
                    }
                    match e.error_len() {
                        Some(n) => {
                            emit(REPLACEMENT);
                            rest = after.get(n..).unwrap_or(&[]);
                        }
                        None => {
                            // A valid but unfinished character at the end: hold it.
                            let n = after.len().min(3);
                            self.pending[..n].copy_from_slice(&after[..n]);
                            self.n_pending = n;
                            self.need = match after.first() {
                                Some(0xC2..=0xDF) => 2,
                                Some(0xE0..=0xEF) => 3,
                                _ => 4,
                            };
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Feed the piece of token `id` of `tok`.
    pub fn push_token(&mut self, tok: &super::Tokenizer, id: u32, emit: impl FnMut(&str)) {
        self.push(tok.token_to_piece(id), emit)
    }

    /// End of stream: an unfinished character is emitted as U+FFFD.
    pub fn finish(&mut self, mut emit: impl FnMut(&str)) {
        if self.n_pending > 0 {
            self.n_pending = 0;
            emit(REPLACEMENT);
        }
    }

    /// Whether an incomplete character is being held back.
    pub fn has_pending(&self) -> bool {
        self.n_pending > 0
    }

    /// Whether `b` can be the next byte of the pending character.
    fn continues(&self, b: u8) -> bool {
        // The second byte has a narrower range after some lead bytes (no overlong forms, no
        // surrogates, nothing above U+10FFFF).
        let (lo, hi) = match (self.n_pending, self.pending[0]) {
            (1, 0xE0) => (0xA0, 0xBF),
            (1, 0xED) => (0x80, 0x9F),
            (1, 0xF0) => (0x90, 0xBF),
            (1, 0xF4) => (0x80, 0x8F),
            _ => (0x80, 0xBF),
        };
        (lo..=hi).contains(&b)
    }
}
