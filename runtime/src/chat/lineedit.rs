//! A line editor for the serial console, driven one received byte at a time.
//!
//! [`LineEditor::feed`] takes each byte from the UART and hands back the bytes to echo (written to
//! the UART as they are: the character typed, `\x08 \x08` to erase one, `\r\n` after Enter and
//! Ctrl-D, `^C\r\n` after Ctrl-C, BEL when a key is refused) and, when the line is done, an
//! [`Event`]. Every character is assumed to be one column wide.
//!
//! Keys: printable ASCII and UTF-8 characters are inserted; Backspace (0x08) and DEL (0x7f) erase
//! one character; Ctrl-U erases the line; Ctrl-W erases the previous word; Enter (CR, LF or CR LF,
//! counted once) ends the line; Ctrl-C abandons it ([`Event::Interrupt`]); Ctrl-D on an empty line
//! is [`Event::Eof`]. Escape sequences (arrow keys, Home, End, function keys: `ESC [ ... final`,
//! `ESC O x`) are swallowed whole. Other control bytes, C1 controls and invalid or truncated UTF-8
//! are dropped; a broken sequence never swallows the ASCII byte that interrupts it. A full line
//! (`max_len` bytes) refuses more input and rings the bell (BEL, 0x07).
//!
//! It never panics, whatever the bytes, and the line is always valid UTF-8 of at most `max_len`
//! bytes.
#![forbid(unsafe_code)]

use alloc::string::String;
use inference::oom::OutOfMemory;

/// What a received byte completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Enter: the line typed (without the line ending).
    Line(String),
    /// Ctrl-C: the line was abandoned (and cleared); during a reply, stop it.
    Interrupt,
    /// Ctrl-D on an empty line: end of input.
    Eof,
}

/// Bytes of an escape sequence after `ESC [` before it is given up as garbage.
const MAX_CSI_LEN: u8 = 16;

const BEL: u8 = 0x07;
const BS: u8 = 0x08;
const LF: u8 = b'\n';
const CR: u8 = b'\r';
const ESC: u8 = 0x1b;
const DEL: u8 = 0x7f;
const CTRL_C: u8 = 0x03;
const CTRL_D: u8 = 0x04;
const CTRL_U: u8 = 0x15;
const CTRL_W: u8 = 0x17;

/// Echo that erases one character of width 1.
const ERASE: &[u8] = b"\x08 \x08";
/// Echo that ends a line.
const NEWLINE: &[u8] = b"\r\n";
/// Echo of Ctrl-C.
const INTERRUPT: &[u8] = b"^C\r\n";

/// Where the decoder is inside a multi-byte input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    /// After ESC.
    Esc,
    /// Inside `ESC [`, with the number of bytes seen since.
    Csi(u8),
    /// After `ESC O`: one more byte.
    Ss3,
    /// Inside a UTF-8 character: its bytes so far and its length.
    Utf8 {
        bytes: [u8; 4],
        have: u8,
        need: u8,
    },
}

/// The line being typed, and the decoder state of the bytes received.
#[derive(Debug, Clone)]
pub struct LineEditor {
    line: String,
    max_len: usize,
    state: State,
    /// The last byte was a CR that ended a line: a LF right after it is the same Enter.
    after_cr: bool,
}

impl LineEditor {
    /// An empty editor for lines of at most `max_len` bytes of UTF-8.
    pub fn new(max_len: usize) -> Self {
        LineEditor {
            line: String::new(),
            max_len,
            state: State::Normal,
            after_cr: false,
        }
    }

    /// An empty editor with its `max_len` bytes reserved up front, so typing never allocates
    /// (give each line [`Event::Line`] returns back with [`Self::recycle`]).
    pub fn try_new(max_len: usize) -> Result<Self, OutOfMemory> {
        let mut ed = Self::new(max_len);
        ed.line
            .try_reserve_exact(max_len)
            .map_err(|_| OutOfMemory {
                what: "the line editor's buffer",
                bytes: max_len,
            })?;
        Ok(ed)
    }

    /// Take back the buffer of a line [`Event::Line`] returned (emptied), for the next line.
    pub fn recycle(&mut self, mut line: String) {
        if self.line.is_empty() && line.capacity() > self.line.capacity() {
            line.clear();
            self.line = line;
        }
    }

    /// The line typed so far.
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The most bytes a line holds.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Forget the line and any partial input (no echo; after a reply, say).
    pub fn clear(&mut self) {
        self.line.clear();
        self.state = State::Normal;
        self.after_cr = false;
    }

    /// Echo the line typed so far again (after output has overwritten it).
    pub fn redraw(&self, echo: &mut dyn FnMut(&[u8])) {
        if !self.line.is_empty() {
            echo(self.line.as_bytes());
        }
    }

    /// Take one received byte; `echo` receives what to send back. Returns the event the byte
    /// completed, if any.
    pub fn feed(&mut self, byte: u8, echo: &mut dyn FnMut(&[u8])) -> Option<Event> {
        if core::mem::take(&mut self.after_cr) && byte == LF {
            return None;
        }
        match self.state {
            State::Normal => self.normal(byte, echo),
            State::Esc => {
                self.state = State::Normal;
                match byte {
                    b'[' => self.state = State::Csi(0),
                    b'O' => self.state = State::Ss3,
                    // ESC then a control key: the ESC alone was typed; the key counts.
                    0..=0x1f | DEL => return self.normal(byte, echo),
                    // Alt+key (ESC then the key): dropped.
                    _ => {}
                }
                None
            }
            State::Csi(n) => {
                match byte {
                    // Parameter and intermediate bytes.
                    0x20..=0x3f if n < MAX_CSI_LEN => self.state = State::Csi(n + 1),
                    0x20..=0x3f => self.state = State::Normal,
                    // The final byte ends the sequence.
                    0x40..=0x7e => self.state = State::Normal,
                    // Not part of a sequence: the sequence was broken, the byte counts.
                    _ => {
                        self.state = State::Normal;
                        return self.normal(byte, echo);
                    }
                }
                None
            }
            State::Ss3 => {
                self.state = State::Normal;
                match byte {
                    0x20..=0x7e => None,
                    _ => self.normal(byte, echo),
                }
            }
            State::Utf8 {
                mut bytes,
                have,
                need,
            } => {
                if !(0x80..=0xbf).contains(&byte) {
                    // Truncated character: dropped, and the byte counts on its own.
                    self.state = State::Normal;
                    return self.normal(byte, echo);
                }
                bytes[have as usize] = byte;
                let have = have + 1;
                if have < need {
                    self.state = State::Utf8 { bytes, have, need };
                    return None;
                }
                self.state = State::Normal;
                if let Ok(s) = core::str::from_utf8(&bytes[..need as usize]) {
                    // C1 controls (U+0080..U+009F) are control bytes too.
                    if s.chars().all(|c| !c.is_control()) {
                        self.insert(s, echo);
                    }
                }
                None
            }
        }
    }

    /// A byte outside any sequence.
    fn normal(&mut self, byte: u8, echo: &mut dyn FnMut(&[u8])) -> Option<Event> {
        match byte {
            CR | LF => {
                self.after_cr = byte == CR;
                echo(NEWLINE);
                return Some(Event::Line(core::mem::take(&mut self.line)));
            }
            CTRL_C => {
                self.line.clear();
                echo(INTERRUPT);
                return Some(Event::Interrupt);
            }
            CTRL_D if self.line.is_empty() => {
                echo(NEWLINE);
                return Some(Event::Eof);
            }
            BS | DEL => {
                let last = self.line.chars().next_back().map_or(0, char::len_utf8);
                self.erase_to(self.line.len() - last, echo);
            }
            CTRL_U => self.erase_to(0, echo),
            CTRL_W => {
                let kept = self.line.trim_end().len();
                let word = self.line[..kept].rfind(char::is_whitespace).map_or(0, |i| {
                    i + self.line[i..].chars().next().map_or(1, char::len_utf8)
                });
                self.erase_to(word, echo);
            }
            ESC => self.state = State::Esc,
            0x20..=0x7e => {
                let b = [byte];
                // An ASCII byte is always one character.
                if let Ok(s) = core::str::from_utf8(&b) {
                    self.insert(s, echo);
                }
            }
            // Lead bytes of 2-, 3- and 4-byte characters (0xc0, 0xc1 and 0xf5.. never start one).
            0xc2..=0xf4 => {
                let need = match byte {
                    0xc2..=0xdf => 2,
                    0xe0..=0xef => 3,
                    _ => 4,
                };
                let mut bytes = [0; 4];
                bytes[0] = byte;
                self.state = State::Utf8 {
                    bytes,
                    have: 1,
                    need,
                };
            }
            // Other control bytes, stray continuation bytes, bytes never in UTF-8.
            _ => {}
        }
        None
    }

    /// Insert `s` (one character) if it fits, else ring the bell.
    fn insert(&mut self, s: &str, echo: &mut dyn FnMut(&[u8])) {
        if self.line.len() + s.len() > self.max_len {
            echo(&[BEL]);
        } else {
            self.line.push_str(s);
            echo(s.as_bytes());
        }
    }

    /// Erase the characters from byte `at` (a character boundary) to the end of the line.
    fn erase_to(&mut self, at: usize, echo: &mut dyn FnMut(&[u8])) {
        while self.line.len() > at && self.line.pop().is_some() {
            echo(ERASE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Feed `input`; the events and everything echoed.
    fn run(ed: &mut LineEditor, input: &[u8]) -> (Vec<Event>, Vec<u8>) {
        let mut out = Vec::new();
        let mut events = Vec::new();
        for &b in input {
            if let Some(e) = ed.feed(b, &mut |s: &[u8]| out.extend_from_slice(s)) {
                events.push(e);
            }
        }
        (events, out)
    }

    fn lines(input: &[u8]) -> Vec<Event> {
        run(&mut LineEditor::new(64), input).0
    }

    fn line(s: &str) -> Event {
        Event::Line(s.into())
    }

    #[test]
    fn a_recycled_buffer_keeps_its_room() {
        let mut ed = LineEditor::try_new(16).unwrap();
        let room = ed.line.capacity();
        assert!(room >= 16);
        let (events, _) = run(&mut ed, b"0123456789abcdef\r");
        let Some(Event::Line(l)) = events.into_iter().next() else {
            panic!("no line")
        };
        assert_eq!(l, "0123456789abcdef");
        ed.recycle(l);
        assert_eq!((ed.line(), ed.line.capacity()), ("", room));
    }

    #[test]
    fn enter_in_every_form_counts_once() {
        assert_eq!(lines(b"hi\r"), [line("hi")]);
        assert_eq!(lines(b"hi\n"), [line("hi")]);
        assert_eq!(lines(b"hi\r\n"), [line("hi")]);
        assert_eq!(lines(b"a\r\nb\r\n"), [line("a"), line("b")]);
        assert_eq!(lines(b"a\nb\rc\r\n"), [line("a"), line("b"), line("c")]);
        // Empty lines are lines, but CR LF is one of them.
        assert_eq!(lines(b"\r\n\r\n"), [line(""), line("")]);
        assert_eq!(lines(b"\n\n"), [line(""), line("")]);
        assert_eq!(lines(b"\r\r"), [line(""), line("")]);
        // LF CR is two Enters (no terminal sends it as one).
        assert_eq!(lines(b"\n\r"), [line(""), line("")]);
        // The LF after a CR is only skipped right after it.
        assert_eq!(lines(b"a\rb\n"), [line("a"), line("b")]);
        let (ev, out) = run(&mut LineEditor::new(8), b"ok\r\n");
        assert_eq!(ev, [line("ok")]);
        assert_eq!(out, b"ok\r\n");
    }

    #[test]
    fn echo_of_typing() {
        let (ev, out) = run(&mut LineEditor::new(64), "héllo 🙂".as_bytes());
        assert!(ev.is_empty());
        assert_eq!(out, "héllo 🙂".as_bytes());
    }

    #[test]
    fn backspace_erases_whole_characters() {
        let mut ed = LineEditor::new(64);
        let (ev, out) = run(&mut ed, "a€🙂".as_bytes());
        assert!(ev.is_empty());
        assert_eq!(out, "a€🙂".as_bytes());
        let (_, out) = run(&mut ed, b"\x7f");
        assert_eq!(ed.line(), "a€");
        assert_eq!(out, b"\x08 \x08");
        let (_, out) = run(&mut ed, b"\x08\x08");
        assert_eq!(ed.line(), "");
        assert_eq!(out, b"\x08 \x08\x08 \x08");
        // Nothing left to erase: nothing echoed.
        let (_, out) = run(&mut ed, b"\x08\x7f");
        assert_eq!(out, b"");
        assert_eq!(lines(b"abc\x08\x08d\r"), [line("ad")]);
    }

    #[test]
    fn ctrl_u_clears_the_line() {
        let mut ed = LineEditor::new(64);
        let (_, out) = run(&mut ed, "ab é\x15".as_bytes());
        assert_eq!(ed.line(), "");
        assert_eq!(out, [&b"ab \xc3\xa9"[..], &ERASE.repeat(4)].concat());
        assert_eq!(lines(b"wrong\x15right\r"), [line("right")]);
        assert_eq!(run(&mut LineEditor::new(8), b"\x15").1, b"");
    }

    #[test]
    fn ctrl_w_deletes_the_previous_word() {
        assert_eq!(lines(b"one two\x17\r"), [line("one ")]);
        assert_eq!(lines(b"one two  \x17\r"), [line("one ")]);
        assert_eq!(lines(b"one\x17\r"), [line("")]);
        assert_eq!(lines(b"  \x17\r"), [line("")]);
        assert_eq!(lines(b"a b c\x17\x17\r"), [line("a ")]);
        assert_eq!(lines("né où\x17\r".as_bytes()), [line("né ")]);
        let mut ed = LineEditor::new(64);
        let (_, out) = run(&mut ed, "x ñu\x17".as_bytes());
        assert_eq!(ed.line(), "x ");
        assert_eq!(out, ["x ñu".as_bytes(), &ERASE.repeat(2)].concat());
        // A non-ASCII space separates words too.
        assert_eq!(lines("a\u{3000}b\x17\r".as_bytes()), [line("a\u{3000}")]);
    }

    #[test]
    fn interrupt_and_eof() {
        let mut ed = LineEditor::new(64);
        let (ev, out) = run(&mut ed, b"half\x03");
        assert_eq!(ev, [Event::Interrupt]);
        assert_eq!(out, b"half^C\r\n");
        assert_eq!(ed.line(), "", "Ctrl-C drops the line");
        assert_eq!(lines(b"\x03"), [Event::Interrupt]);
        assert_eq!(lines(b"\x04"), [Event::Eof]);
        // Ctrl-D on a line that has text is ignored.
        assert_eq!(lines(b"ab\x04c\r"), [line("abc")]);
        assert_eq!(lines(b"ab\x15\x04"), [Event::Eof]);
        // Ctrl-C interrupts a half-received character or escape sequence.
        assert_eq!(lines(b"\xe2\x82\x03"), [Event::Interrupt]);
        assert_eq!(lines(b"\x1b[1;\x03"), [Event::Interrupt]);
    }

    #[test]
    fn escape_sequences_are_swallowed() {
        // Arrows (CSI and SS3 forms), Home/End, Delete, F5, a modified arrow, bracketed paste.
        for seq in [
            &b"\x1b[A"[..],
            b"\x1b[B",
            b"\x1b[C",
            b"\x1b[D",
            b"\x1bOA",
            b"\x1bOD",
            b"\x1b[H",
            b"\x1b[F",
            b"\x1b[1~",
            b"\x1b[4~",
            b"\x1b[3~",
            b"\x1b[15~",
            b"\x1b[1;5C",
            b"\x1b[200~",
            b"\x1bOH",
        ] {
            let input = [&b"ab"[..], seq, b"c\r"].concat();
            let (ev, out) = run(&mut LineEditor::new(64), &input);
            assert_eq!(ev, [line("abc")], "{seq:?}");
            assert_eq!(out, b"abc\r\n", "{seq:?}");
        }
        // Alt+x is ESC x: dropped.
        assert_eq!(lines(b"a\x1bxb\r"), [line("ab")]);
        // ESC then Enter: the Enter counts.
        assert_eq!(lines(b"a\x1b\r"), [line("a")]);
        assert_eq!(lines(b"a\x1b\x1b[Cb\r"), [line("ab")]);
        // A broken sequence gives the breaking byte back.
        assert_eq!(lines(b"a\x1b[12\rb\r"), [line("a"), line("b")]);
        assert_eq!(lines(b"a\x1bO\rb\r"), [line("a"), line("b")]);
        // An endless parameter string is given up, and typing resumes after it.
        let long = [&b"\x1b["[..], &[b'1'; 40], b"x\r"].concat();
        let got = lines(&long);
        assert_eq!(got.len(), 1);
        match &got[0] {
            Event::Line(l) => assert!(l.bytes().all(|b| b == b'1' || b == b'x'), "{l:?}"),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn invalid_utf8_is_dropped_without_eating_ascii() {
        // Truncated leads followed by ASCII.
        assert_eq!(lines(b"\xc3a\r"), [line("a")]);
        assert_eq!(lines(b"\xe2\x82a\r"), [line("a")]);
        assert_eq!(lines(b"\xf0\x9f\x99a\r"), [line("a")]);
        assert_eq!(lines(b"\xe2\r"), [line("")]);
        // Stray continuation bytes and bytes never in UTF-8.
        assert_eq!(lines(b"\x80a\xbfb\xc0c\xc1d\xf5e\xffg\r"), [line("abcdeg")]);
        // Overlong forms, surrogates, beyond U+10FFFF.
        assert_eq!(lines(b"\xe0\x80\xafa\r"), [line("a")]);
        assert_eq!(lines(b"\xed\xa0\x80b\r"), [line("b")]);
        assert_eq!(lines(b"\xf4\x90\x80\x80c\r"), [line("c")]);
        // A new lead byte in the middle of a character restarts.
        assert_eq!(lines(b"\xe2\xc3\xa9\r"), [line("é")]);
        // C1 controls (U+0085, U+009B) and other control bytes are dropped.
        assert_eq!(lines(b"a\xc2\x85\xc2\x9bb\t\x00\x01\x1f\r"), [line("ab")]);
        // But valid characters of every length go in.
        assert_eq!(
            lines("é€🙂\u{a0}".as_bytes()),
            Vec::<Event>::new(),
            "no event without Enter"
        );
        assert_eq!(lines("é€🙂\u{a0}\r".as_bytes()), [line("é€🙂\u{a0}")]);
    }

    #[test]
    fn a_full_line_rings_the_bell() {
        let mut ed = LineEditor::new(4);
        let (_, out) = run(&mut ed, b"abcdef");
        assert_eq!(ed.line(), "abcd");
        assert_eq!(out, b"abcd\x07\x07");
        // Room for one byte, not for a two-byte character.
        let mut ed = LineEditor::new(4);
        let (_, out) = run(&mut ed, "abcé".as_bytes());
        assert_eq!(ed.line(), "abc");
        assert_eq!(out, b"abc\x07");
        // Erasing makes room again.
        let (ev, _) = run(&mut ed, b"\x7fxy\r");
        assert_eq!(ev, [line("abxy")]);
        // A zero-length line takes nothing but still ends.
        assert_eq!(run(&mut LineEditor::new(0), b"a\r").0, [line("")]);
    }

    #[test]
    fn clear_and_redraw() {
        let mut ed = LineEditor::new(16);
        run(&mut ed, b"ab\xc3");
        let mut out = Vec::new();
        ed.redraw(&mut |s: &[u8]| out.extend_from_slice(s));
        assert_eq!(out, b"ab");
        ed.clear();
        assert_eq!(ed.line(), "");
        // The half character was forgotten too.
        assert_eq!(run(&mut ed, b"\xa9x\r").0, [line("x")]);
        assert_eq!(ed.max_len(), 16);
    }

    /// A terminal that understands exactly what the editor echoes: its current row must always
    /// show the line.
    #[derive(Default)]
    struct Screen {
        row: Vec<char>,
    }

    impl Screen {
        fn apply(&mut self, s: &[u8]) {
            match s {
                ERASE => {
                    assert!(self.row.pop().is_some(), "erased past the line");
                }
                NEWLINE | INTERRUPT => self.row.clear(),
                [BEL] => {}
                _ => {
                    let t = core::str::from_utf8(s).expect("echo is whole characters");
                    assert!(t.chars().all(|c| !c.is_control()), "{t:?}");
                    self.row.extend(t.chars());
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_break_it() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for max_len in [0, 1, 3, 16, 200] {
            let mut ed = LineEditor::new(max_len);
            let mut screen = Screen::default();
            let mut n_lines = 0;
            for _ in 0..100_000 {
                let r = next();
                // Mostly bytes that matter: ASCII, control keys, ESC, UTF-8 leads and
                // continuations; now and then anything.
                let byte = match r % 8 {
                    0 | 1 => b'a' + (r >> 8) as u8 % 26,
                    2 => [BS, DEL, CTRL_U, CTRL_W, ESC, b'[', b'O', b' '][(r >> 8) as usize % 8],
                    3 => 0x80 + (r >> 8) as u8 % 0x40,
                    4 => 0xc2 + (r >> 8) as u8 % 0x33,
                    5 if r >> 8 & 0xff < 8 => [CR, LF, CTRL_C, CTRL_D][(r >> 16) as usize % 4],
                    _ => (r >> 8) as u8,
                };
                let before = ed.line().to_owned();
                let mut echoed = Vec::new();
                let ev = ed.feed(byte, &mut |s: &[u8]| echoed.push(s.to_vec()));
                for s in &echoed {
                    screen.apply(s);
                }
                let line = ed.line();
                assert!(core::str::from_utf8(line.as_bytes()).is_ok());
                assert!(line.len() <= max_len, "{} > {max_len}", line.len());
                assert!(line.chars().all(|c| !c.is_control()), "{line:?}");
                match ev {
                    Some(Event::Line(l)) => {
                        assert_eq!(l, before);
                        assert!(line.is_empty());
                        n_lines += 1;
                    }
                    Some(Event::Interrupt) => assert!(line.is_empty()),
                    Some(Event::Eof) => assert!(before.is_empty() && line.is_empty()),
                    None => {}
                }
                assert_eq!(screen.row.iter().collect::<String>(), line);
            }
            assert!(n_lines > 100, "max_len {max_len}: {n_lines} lines");
        }
    }
}
