//! The property buffer of channel 8 as plain words, and what can go wrong with a call: a request
//! of one tag is encoded and the firmware's answer decoded by pure functions, tested on the host.
//!
//! Layout (the firmware's "Mailbox property interface"; Linux's raspberrypi-firmware.c, Circle's
//! bcmpropertytags.cpp): word 0 the buffer size in bytes, word 1 the code (0 = request; the answer
//! 0x8000_0000 = success, 0x8000_0001 = the firmware could not parse the buffer), then per tag its
//! id, its value buffer size in bytes, a request/response word (the answer sets bit 31 and puts
//! the answer's length in bytes in bits 30:0), the value buffer, and last the end tag 0.

use core::fmt;

/// Words in the property buffer: 32 words = 128 bytes, two whole 64-byte cache lines.
pub const BUFFER_WORDS: usize = 32;
/// Bytes in the property buffer.
pub const BUFFER_BYTES: usize = BUFFER_WORDS * 4;
/// Most answer words a call returns.
pub const MAX_ANSWER_WORDS: usize = 4;
/// Header words before the value buffer: size, code, tag, value size, request/response.
const HEADER_WORDS: usize = 5;
/// Buffer code of an answer that succeeded.
pub const CODE_SUCCESS: u32 = 0x8000_0000;
/// A tag's request/response word: bit 31 set by the firmware when it has processed the tag.
const RESPONSE: u32 = 1 << 31;

/// The tags this driver sends.
pub mod tags {
    pub const GET_BOARD_REVISION: u32 = 0x0001_0002;
    pub const GET_ARM_MEMORY: u32 = 0x0001_0005;
    pub const SET_POWER_STATE: u32 = 0x0002_8001;
    pub const GET_CLOCK_RATE: u32 = 0x0003_0002;
    pub const GET_MAX_CLOCK_RATE: u32 = 0x0003_0004;
    pub const GET_TEMPERATURE: u32 = 0x0003_0006;
    pub const GET_MAX_TEMPERATURE: u32 = 0x0003_000a;
    pub const GET_THROTTLED: u32 = 0x0003_0046;
    pub const GET_CLOCK_RATE_MEASURED: u32 = 0x0003_0047;
    pub const SET_CLOCK_RATE: u32 = 0x0003_8002;
    pub const SET_GPIO_STATE: u32 = 0x0003_8041;
    pub const GET_DMA_CHANNELS: u32 = 0x0006_0001;
}

/// A tag's name, for messages.
pub fn tag_name(tag: u32) -> &'static str {
    match tag {
        tags::GET_BOARD_REVISION => "GET_BOARD_REVISION",
        tags::GET_ARM_MEMORY => "GET_ARM_MEMORY",
        tags::SET_POWER_STATE => "SET_POWER_STATE",
        tags::GET_CLOCK_RATE => "GET_CLOCK_RATE",
        tags::GET_MAX_CLOCK_RATE => "GET_MAX_CLOCK_RATE",
        tags::GET_TEMPERATURE => "GET_TEMPERATURE",
        tags::GET_MAX_TEMPERATURE => "GET_MAX_TEMPERATURE",
        tags::GET_THROTTLED => "GET_THROTTLED",
        tags::GET_CLOCK_RATE_MEASURED => "GET_CLOCK_RATE_MEASURED",
        tags::SET_CLOCK_RATE => "SET_CLOCK_RATE",
        tags::SET_GPIO_STATE => "SET_GPIO_STATE",
        tags::GET_DMA_CHANNELS => "GET_DMA_CHANNELS",
        _ => "tag",
    }
}

/// What a poll loop of the mailbox was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// The write mailbox (MAIL1) to have room.
    WriteRoom,
    /// The firmware's answer in the read mailbox (MAIL0).
    Answer,
}

/// Why a mailbox call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailboxError {
    /// The request does not fit the buffer (`words` needed).
    TooLarge { tag: u32, words: usize },
    /// A poll loop ran out of polls.
    Timeout { tag: u32, waiting: Waiting },
    /// An answer on the property channel carrying another buffer than the one `sent`.
    WrongAnswer { tag: u32, sent: u32, got: u32 },
    /// The buffer's answer code is not success.
    Failed { tag: u32, code: u32 },
    /// The firmware left the tag unprocessed (response bit clear in `indicator`).
    NotProcessed { tag: u32, indicator: u32 },
    /// The firmware answered `len` value bytes where the tag has `want` (0: it does not know it).
    Short { tag: u32, len: u32, want: u32 },
    /// The firmware processed the tag and refused: its first two answer words.
    Refused { tag: u32, answer: [u32; 2] },
}

impl fmt::Display for MailboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match *self {
            MailboxError::TooLarge { tag, .. }
            | MailboxError::Timeout { tag, .. }
            | MailboxError::WrongAnswer { tag, .. }
            | MailboxError::Failed { tag, .. }
            | MailboxError::NotProcessed { tag, .. }
            | MailboxError::Short { tag, .. }
            | MailboxError::Refused { tag, .. } => tag,
        };
        write!(f, "mailbox {} ({tag:#x}): ", tag_name(tag))?;
        match *self {
            MailboxError::TooLarge { words, .. } => {
                write!(f, "request of {words} words does not fit {BUFFER_WORDS}")
            }
            MailboxError::Timeout { waiting, .. } => f.write_str(match waiting {
                Waiting::WriteRoom => "the write mailbox stayed full (MAIL1_STA FULL)",
                Waiting::Answer => "no answer from the firmware (MAIL0_STA stayed EMPTY)",
            }),
            MailboxError::WrongAnswer { sent, got, .. } => {
                write!(
                    f,
                    "answer {got:#010x} for another buffer (sent {sent:#010x})"
                )
            }
            MailboxError::Failed { code, .. } => {
                write!(f, "the firmware answered code {code:#010x}")
            }
            MailboxError::NotProcessed { indicator, .. } => {
                write!(f, "tag not processed (response word {indicator:#010x})")
            }
            MailboxError::Short { len, want, .. } => {
                write!(f, "answer of {len} bytes, {want} expected")?;
                if len == 0 {
                    f.write_str(" (the firmware does not implement the tag)")?;
                }
                Ok(())
            }
            MailboxError::Refused { answer, .. } => {
                write!(f, "refused (answer {:#x}, {:#x})", answer[0], answer[1])
            }
        }
    }
}

/// Encode a request of one `tag` with value words `req` and room for `answer_words` into `buf`;
/// returns the words used.
pub fn encode(
    buf: &mut [u32; BUFFER_WORDS],
    tag: u32,
    req: &[u32],
    answer_words: usize,
) -> Result<usize, MailboxError> {
    let value_words = req.len().max(answer_words);
    let total = HEADER_WORDS + value_words + 1;
    if total > BUFFER_WORDS || answer_words > MAX_ANSWER_WORDS {
        return Err(MailboxError::TooLarge { tag, words: total });
    }
    buf.fill(0);
    buf[0] = (total * 4) as u32;
    buf[2] = tag;
    buf[3] = (value_words * 4) as u32;
    buf[HEADER_WORDS..HEADER_WORDS + req.len()].copy_from_slice(req);
    // buf[1] = 0 (a request), buf[4] = 0 (request indicator), the end tag 0 after the values.
    Ok(total)
}

/// Decode the firmware's answer to a request [`encode`]d with `tag` and `answer_words`: the first
/// `answer_words` value words (the rest 0).
pub fn decode(
    buf: &[u32; BUFFER_WORDS],
    tag: u32,
    answer_words: usize,
) -> Result<[u32; MAX_ANSWER_WORDS], MailboxError> {
    if buf[1] != CODE_SUCCESS {
        return Err(MailboxError::Failed { tag, code: buf[1] });
    }
    let indicator = buf[4];
    if indicator & RESPONSE == 0 {
        return Err(MailboxError::NotProcessed { tag, indicator });
    }
    let n = answer_words.min(MAX_ANSWER_WORDS);
    let (len, want) = (indicator & !RESPONSE, (n * 4) as u32);
    if len < want {
        return Err(MailboxError::Short { tag, len, want });
    }
    let mut out = [0u32; MAX_ANSWER_WORDS];
    out[..n].copy_from_slice(&buf[HEADER_WORDS..HEADER_WORDS + n]);
    Ok(out)
}
