//! The commands typed at the chat prompt: a line that starts with `/` is a command for lmboot,
//! any other line is a message for the model.
//!
//! [`parse`] turns a line into a [`Command`], an error message to print (naming the command and
//! what was wrong), or `None` for a message. A message that itself starts with `/` is typed with
//! the slash doubled: `//etc/passwd` sends `/etc/passwd` ([`message_text`] removes the extra
//! slash). Command names are matched without regard to ASCII case; spaces around the line and
//! between the words do not matter.
#![forbid(unsafe_code)]

use alloc::format;
use alloc::string::String;

/// A chat command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Command {
    /// `/reset`: forget the conversation (and the KV cache) and start again.
    Reset,
    /// `/stats`: print the statistics of the last reply and the session.
    Stats,
    /// `/temp T`: set the sampling temperature, `0 <= T <= 2` (0 is greedy).
    Temp(f32),
    /// `/json on|off`: constrain replies to one syntactically valid JSON value.
    Json(bool),
    /// `/set KEY VALUE`: change one sampling setting (named as `lmboot.txt` names it).
    Set(Setting),
    /// `/show`: print the sampling settings.
    Show,
    /// `/help`: print [`HELP`].
    Help,
}

/// A sampling setting and its new value, as `/set` takes it (the sampler checks the ranges it
/// shares with `lmboot.txt`; `/set` checks only that the value is a number of the right kind).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setting {
    Temperature(f32),
    TopK(usize),
    TopP(f32),
    MinP(f32),
    RepeatPenalty(f32),
    RepeatLastN(usize),
    Seed(u64),
}

/// The keys `/set` takes, as `lmboot.txt` spells them.
pub const KEYS: &[&str] = &[
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "repeat_last_n",
    "seed",
];

/// The highest temperature `/temp` accepts.
pub const MAX_TEMP: f32 = 2.0;

/// The command names, for messages.
pub const NAMES: &[&str] = &[
    "/reset", "/stats", "/temp", "/set", "/show", "/json", "/help",
];

/// What `/help` prints.
pub const HELP: &str = "\
Type a message and press Enter; the model replies.
Commands:
  /reset         forget the conversation and start again
  /stats         speed and memory of the last reply
  /temp <t>      sampling temperature from 0 (greedy) to 2
  /set <key> <v> a sampling setting: temperature, top_k, top_p, min_p,
                 repeat_penalty, repeat_last_n or seed
  /show          the sampling settings
  /json on|off   constrain replies to one valid JSON value
  /help          this text
  //text         send a message that starts with \"/\"
Keys:
  Backspace      erase a character
  Ctrl-U         erase the line
  Ctrl-W         erase the previous word
  Ctrl-C         stop a reply (or drop the line being typed)
  Ctrl-D         on an empty line: end the chat
";

/// The command in `line`, `Some(Err(message))` for a bad command, or `None` if the line is a
/// message for the model (it does not start with `/`, or starts with `//`).
pub fn parse(line: &str) -> Option<Result<Command, String>> {
    let line = line.trim();
    let rest = line.strip_prefix('/')?;
    if rest.starts_with('/') {
        return None;
    }
    let mut words = rest.split_whitespace();
    let Some(name) = words.next() else {
        return Some(Err(format!(
            "empty command; commands: {}",
            NAMES.join(", ")
        )));
    };
    let arg = words.next();
    let extra = words.next();
    if name.eq_ignore_ascii_case("set") {
        return Some(set(arg, extra, words.next()));
    }
    let is = |n: &str| name.eq_ignore_ascii_case(n);
    let cmd = if is("reset") {
        no_arg(Command::Reset, "/reset", arg)
    } else if is("stats") {
        no_arg(Command::Stats, "/stats", arg)
    } else if is("show") {
        no_arg(Command::Show, "/show", arg)
    } else if is("help") || name == "?" {
        no_arg(Command::Help, "/help", arg)
    } else if is("temp") {
        one_arg("/temp", arg, extra).and_then(temp)
    } else if is("json") {
        one_arg("/json", arg, extra).and_then(json)
    } else {
        Err(format!(
            "unknown command \"/{name}\"; commands: {} (a message starting with \"/\" is typed \
             \"//\")",
            NAMES.join(", ")
        ))
    };
    Some(cmd)
}

/// The text to send to the model for a message `line` (one that [`parse`] says is no command):
/// the line with a doubled leading slash made single.
pub fn message_text(line: &str) -> &str {
    match line.trim_start().strip_prefix("//") {
        Some(rest) => &line[line.len() - rest.len() - 1..],
        None => line,
    }
}

fn no_arg(cmd: Command, name: &str, arg: Option<&str>) -> Result<Command, String> {
    match arg {
        None => Ok(cmd),
        Some(a) => Err(format!("{name}: takes no argument, got {a:?}")),
    }
}

/// The single argument of `name`, or the error for a missing or extra one.
fn one_arg<'a>(
    name: &'static str,
    arg: Option<&'a str>,
    extra: Option<&str>,
) -> Result<(&'static str, &'a str), String> {
    match (arg, extra) {
        (Some(a), None) => Ok((name, a)),
        (None, _) => Err(format!("{name}: {}, got nothing", expected(name))),
        (Some(_), Some(x)) => Err(format!("{name}: takes one argument, got also {x:?}")),
    }
}

fn expected(name: &str) -> &'static str {
    match name {
        "/temp" => "expected a number from 0 to 2",
        _ => "expected on or off",
    }
}

/// `/set KEY VALUE`: the key one of [`KEYS`] (any ASCII case; `temp` for `temperature`), the
/// value a number of the setting's kind.
fn set(key: Option<&str>, value: Option<&str>, extra: Option<&str>) -> Result<Command, String> {
    let keys = KEYS.join(", ");
    let (Some(key), Some(v)) = (key, value) else {
        return Err(format!(
            "/set: expected a key and a value (/set KEY VALUE; keys: {keys})"
        ));
    };
    if let Some(x) = extra {
        return Err(format!("/set: takes a key and one value, got also {x:?}"));
    }
    let key = key.to_ascii_lowercase();
    let float = || match v.parse::<f32>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("/set {key}: expected a number, got {v:?}")),
    };
    let whole = || {
        v.parse::<u64>()
            .map_err(|_| format!("/set {key}: expected a whole number, got {v:?}"))
    };
    let count = || whole().map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let s = match key.as_str() {
        "temperature" | "temp" => Setting::Temperature(float()?),
        "top_k" => Setting::TopK(count()?),
        "top_p" => Setting::TopP(float()?),
        "min_p" => Setting::MinP(float()?),
        "repeat_penalty" => Setting::RepeatPenalty(float()?),
        "repeat_last_n" => Setting::RepeatLastN(count()?),
        "seed" => Setting::Seed(whole()?),
        _ => return Err(format!("/set: unknown key {key:?}; keys: {keys}")),
    };
    Ok(Command::Set(s))
}

fn temp((name, arg): (&'static str, &str)) -> Result<Command, String> {
    match arg.parse::<f32>() {
        Ok(t) if (0.0..=MAX_TEMP).contains(&t) => Ok(Command::Temp(t)),
        _ => Err(format!("{name}: {}, got {arg:?}", expected(name))),
    }
}

fn json((name, arg): (&'static str, &str)) -> Result<Command, String> {
    let on = ["on", "true", "1", "yes"];
    let off = ["off", "false", "0", "no"];
    if on.iter().any(|w| arg.eq_ignore_ascii_case(w)) {
        Ok(Command::Json(true))
    } else if off.iter().any(|w| arg.eq_ignore_ascii_case(w)) {
        Ok(Command::Json(false))
    } else {
        Err(format!("{name}: {}, got {arg:?}", expected(name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> Command {
        match parse(line) {
            Some(Ok(c)) => c,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    fn err(line: &str) -> String {
        match parse(line) {
            Some(Err(e)) => e,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn messages_are_not_commands() {
        for line in [
            "",
            "   ",
            "hello",
            "what is 1/2?",
            " hi /reset",
            "//reset",
            "// a comment",
            "  //x",
        ] {
            assert_eq!(parse(line), None, "{line:?}");
        }
    }

    #[test]
    fn doubled_slash_sends_one() {
        assert_eq!(message_text("//etc/passwd"), "/etc/passwd");
        assert_eq!(message_text("  //x"), "/x");
        assert_eq!(message_text("///"), "//");
        assert_eq!(message_text("hello"), "hello");
        assert_eq!(message_text("a//b"), "a//b");
        assert_eq!(message_text(""), "");
    }

    #[test]
    fn simple_commands() {
        assert_eq!(ok("/reset"), Command::Reset);
        assert_eq!(ok("  /reset  "), Command::Reset);
        assert_eq!(ok("/RESET"), Command::Reset);
        assert_eq!(ok("/stats"), Command::Stats);
        assert_eq!(ok("/help"), Command::Help);
        assert_eq!(ok("/?"), Command::Help);
        assert_eq!(ok("/reset\r"), Command::Reset);
    }

    #[test]
    fn temperature() {
        assert_eq!(ok("/temp 0.7"), Command::Temp(0.7));
        assert_eq!(ok("/temp 0"), Command::Temp(0.0));
        assert_eq!(ok("/temp 2"), Command::Temp(2.0));
        assert_eq!(ok("/temp   1.5  "), Command::Temp(1.5));
        assert_eq!(ok("/Temp .5"), Command::Temp(0.5));
        assert_eq!(ok("/temp 1e0"), Command::Temp(1.0));
        assert_eq!(
            err("/temp hot"),
            "/temp: expected a number from 0 to 2, got \"hot\""
        );
        assert_eq!(
            err("/temp"),
            "/temp: expected a number from 0 to 2, got nothing"
        );
        for bad in [
            "-0.1", "2.01", "NaN", "nan", "inf", "-inf", "1,5", "0.7x", "",
        ] {
            let line = format!("/temp {bad}");
            let e = err(&line);
            assert!(
                e.starts_with("/temp: expected a number from 0 to 2"),
                "{line}: {e}"
            );
        }
        assert_eq!(
            err("/temp 1 2"),
            "/temp: takes one argument, got also \"2\""
        );
    }

    #[test]
    fn set_and_show() {
        assert_eq!(
            ok("/set temperature 0.3"),
            Command::Set(Setting::Temperature(0.3))
        );
        assert_eq!(ok("/SET Temp 1"), Command::Set(Setting::Temperature(1.0)));
        assert_eq!(ok("/set top_k 20"), Command::Set(Setting::TopK(20)));
        assert_eq!(ok("/set top_p 0.9"), Command::Set(Setting::TopP(0.9)));
        assert_eq!(ok("/set min_p 0"), Command::Set(Setting::MinP(0.0)));
        assert_eq!(
            ok("/set repeat_penalty 1.1"),
            Command::Set(Setting::RepeatPenalty(1.1))
        );
        assert_eq!(
            ok("/set repeat_last_n 128"),
            Command::Set(Setting::RepeatLastN(128))
        );
        assert_eq!(ok("/set seed 42"), Command::Set(Setting::Seed(42)));
        assert_eq!(ok("/show"), Command::Show);
        assert_eq!(
            err("/set top_k -1"),
            "/set top_k: expected a whole number, got \"-1\""
        );
        assert_eq!(
            err("/set top_p nan"),
            "/set top_p: expected a number, got \"nan\""
        );
        let e = err("/set colour blue");
        assert!(e.starts_with("/set: unknown key \"colour\"; keys: "), "{e}");
        for key in KEYS {
            assert!(e.contains(key), "{e}");
            assert!(HELP.contains(key), "{key}");
        }
        assert!(err("/set").starts_with("/set: expected a key and a value"));
        assert!(err("/set seed").starts_with("/set: expected a key and a value"));
        assert_eq!(
            err("/set seed 1 2"),
            "/set: takes a key and one value, got also \"2\""
        );
        assert_eq!(err("/show all"), "/show: takes no argument, got \"all\"");
    }

    #[test]
    fn json_switch() {
        assert_eq!(ok("/json on"), Command::Json(true));
        assert_eq!(ok("/json OFF"), Command::Json(false));
        assert_eq!(ok("/json 1"), Command::Json(true));
        assert_eq!(ok("/json no"), Command::Json(false));
        assert_eq!(
            err("/json maybe"),
            "/json: expected on or off, got \"maybe\""
        );
        assert_eq!(err("/json"), "/json: expected on or off, got nothing");
    }

    #[test]
    fn arguments_where_none_belong() {
        assert_eq!(err("/reset now"), "/reset: takes no argument, got \"now\"");
        assert_eq!(err("/stats all"), "/stats: takes no argument, got \"all\"");
        assert_eq!(err("/help temp"), "/help: takes no argument, got \"temp\"");
    }

    #[test]
    fn unknown_commands_name_themselves_and_the_known_ones() {
        let e = err("/quit");
        assert!(e.contains("\"/quit\""), "{e}");
        for name in NAMES {
            assert!(e.contains(name), "{e}");
        }
        let e = err("/tmp 0.5");
        assert!(e.starts_with("unknown command \"/tmp\""), "{e}");
        let e = err("/");
        assert!(e.starts_with("empty command"), "{e}");
        assert!(err("/  ").starts_with("empty command"));
        // The name is shown as typed.
        assert!(err("/é").contains("\"/é\""));
    }

    #[test]
    fn help_lists_every_command_and_key() {
        for name in NAMES {
            assert!(HELP.contains(name), "{name}");
        }
        for key in ["Backspace", "Ctrl-U", "Ctrl-C", "Ctrl-W", "Ctrl-D", "//"] {
            assert!(HELP.contains(key), "{key}");
        }
        // Fits an 80-column terminal.
        assert!(HELP.lines().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn never_panics() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let alphabet = [
            '/', ' ', 't', 'e', 'm', 'p', '0', '.', '5', 'j', 's', 'o', 'n', 'é', '\t',
        ];
        for _ in 0..20_000 {
            let mut line = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for i in 0..(seed % 12) {
                line.push(alphabet[(seed >> (4 * i + 4)) as usize % alphabet.len()]);
            }
            if parse(&line).is_none() {
                let m = message_text(&line);
                assert!(line.ends_with(m));
            }
        }
    }
}
