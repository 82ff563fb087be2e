//! `chat`: bytes typed on the serial line into the chat line editor, and every line it completes
//! through what a line goes through before the model: the command parser, the message text, the
//! template's user turn and the tokenizer (GPT-2's, as `Chat` encodes a turn: specials parsed).
//!
//! Besides never panicking, the echo must draw on a terminal exactly the line the editor holds:
//! the body keeps its own screen line from the echo bytes and compares after every byte.

use super::peak::bounded;
use super::vocab::gpt2;
use inference::template::Template;
use runtime::chat::commands::{self, Command, MAX_TEMP};
use runtime::chat::lineedit::{Event, LineEditor};

/// The most one run may allocate: the line, the screen, one rendered turn and its tokens, for
/// inputs of at most 4 KiB and lines of at most 249 bytes.
pub const MAX_ALLOC: usize = 256 << 10;

const TEMPLATES: [Template; 5] = [
    Template::ChatMl,
    Template::Zephyr,
    Template::Llama2,
    Template::Llama3,
    Template::Gemma,
];

/// A terminal's current line, as drawn by the echo.
#[derive(Debug, Default)]
struct Screen(String);

impl Screen {
    fn echo(&mut self, b: &[u8]) {
        match b {
            b"\x08 \x08" => {
                self.0.pop();
            }
            b"\r\n" | b"^C\r\n" => self.0.clear(),
            b"\x07" => {}
            text => match std::str::from_utf8(text) {
                Ok(s) => self.0.push_str(s),
                Err(_) => panic!("chat: the editor echoed bytes that are not UTF-8: {text:?}"),
            },
        }
    }
}

/// The first byte sets the line length limit and the template; the rest is typed.
pub fn run(data: &[u8]) {
    let Some((&sel, typed)) = data.split_first() else {
        return;
    };
    let tok = gpt2();
    bounded("chat", MAX_ALLOC, || {
        let max = 1 + (sel >> 3) as usize * 8;
        let template = TEMPLATES[(sel & 7) as usize % TEMPLATES.len()];
        let mut ed = LineEditor::new(max);
        let mut screen = Screen::default();
        let (mut turns, mut last) = (0, None);
        for &b in typed {
            let ev = ed.feed(b, &mut |e| screen.echo(e));
            assert_eq!(
                screen.0,
                ed.line(),
                "chat: the echo drew another line than typed"
            );
            assert!(ed.line().len() <= max, "chat: the line outgrew its limit");
            if let Some(Event::Line(l)) = ev {
                if let Some(turn) = line(&l, max, template, turns == 0) {
                    last = Some(turn);
                }
                turns += 1;
            }
        }
        // Only the last turn through the tokenizer: encoding every line made the target four
        // times slower, and the tokenizer target fuzzes the encoder itself.
        if let Some(turn) = last {
            if let Ok(ids) = tok.encode(&turn, false, true) {
                assert!(
                    ids.iter().all(|&t| (t as usize) < tok.vocab_size()),
                    "chat: a token outside the vocabulary"
                );
            }
        }
    });
}

/// One completed line, as `Chat::run` takes it; for a message, the turn's text to encode.
fn line(l: &str, max: usize, template: Template, first: bool) -> Option<String> {
    assert!(l.len() <= max, "chat: a line longer than the limit");
    assert!(
        !l.contains(char::is_control),
        "chat: a control character in a line: {l:?}"
    );
    if l.trim().is_empty() {
        return None;
    }
    match commands::parse(l) {
        Some(Ok(Command::Temp(t))) => {
            assert!((0.0..=MAX_TEMP).contains(&t), "chat: /temp accepted {t}")
        }
        Some(Ok(_)) => {}
        Some(Err(msg)) => assert!(!msg.is_empty(), "chat: an empty error for {l:?}"),
        None => {
            let msg = commands::message_text(l);
            assert!(
                l.ends_with(msg),
                "chat: the message is not the end of the line"
            );
            return template.user_turn(msg, first).ok();
        }
    }
    None
}
