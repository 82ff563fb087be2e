//! Chat on the serial line: a prompt with line editing, the model's chat template, and a
//! conversation that keeps its KV cache between turns (each turn feeds only its new tokens).
//!
//! The transcript is exact: the system piece, then per turn the user piece (with the assistant
//! header), every reply token, and the template's end of turn. A reply's last printed token has not
//! been through the model yet (generation stops before feeding it), so it leads the next turn's
//! tokens. Bytes typed while the model replies are kept for the next prompt, except Ctrl-C, which
//! stops the reply.

use super::commands::{self as chatcmd, Command, Setting};
use super::lineedit::{Event, LineEditor};
use crate::console::Console;
use alloc::borrow::Cow;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use inference::generate::{Engine, GenReport, LogitsFilter, StopReason};
use inference::json::JsonConstraint;
use inference::model::RunState;
use inference::oom::{self, OutOfMemory};
use inference::parallel::Parallel;
use inference::sampler::{Sampler, SamplerConfig};
use inference::speculate::Speculator;
use inference::storage::Storage;
use inference::template::Template;
use inference::tokenizer::{StreamDecoder, Tokenizer};

/// Most bytes kept from typing ahead while the model replies.
const TYPE_AHEAD: usize = 4096;
/// Longest line the prompt accepts (bytes).
pub const MAX_LINE: usize = 2048;
const CTRL_C: u8 = 0x03;

/// The serial line: output, and input with what was typed during a reply kept for later.
pub struct Line<'a> {
    con: &'a mut dyn Console,
    ahead: VecDeque<u8>,
    /// Spins between polls of an idle UART (keeps a polling core from hammering the device).
    idle: &'a dyn Fn(),
}

impl core::fmt::Debug for Line<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Line")
            .field("ahead", &self.ahead.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Line<'a> {
    /// The line on `con`, with room for `TYPE_AHEAD` bytes typed during a reply reserved now
    /// (so typing never allocates), or the error if the heap has none.
    pub fn new(con: &'a mut dyn Console, idle: &'a dyn Fn()) -> Result<Self, OutOfMemory> {
        let mut ahead = VecDeque::new();
        ahead
            .try_reserve_exact(TYPE_AHEAD)
            .map_err(|_| OutOfMemory {
                what: "the chat's type-ahead buffer",
                bytes: TYPE_AHEAD,
            })?;
        Ok(Self { con, ahead, idle })
    }

    pub fn write(&mut self, s: &str) {
        self.con.write_bytes(s.as_bytes());
    }

    /// Write `args` straight to the console (no `String` is built).
    pub fn print(&mut self, args: fmt::Arguments<'_>) {
        let _ = fmt::Write::write_fmt(self, args);
    }

    /// During a reply: true if Ctrl-C arrived; other bytes are kept for the next prompt.
    fn interrupted(&mut self) -> bool {
        while let Some(b) = self.con.read_byte() {
            if b == CTRL_C {
                self.ahead.clear();
                return true;
            }
            if self.ahead.len() < TYPE_AHEAD {
                self.ahead.push_back(b);
            }
        }
        false
    }

    /// Read one event (a line, Ctrl-C, Ctrl-D) with editing and echo; waits for input.
    fn read_event(&mut self, ed: &mut LineEditor) -> Event {
        loop {
            let b = match self.ahead.pop_front() {
                Some(b) => b,
                None => match self.con.read_byte() {
                    Some(b) => b,
                    None => {
                        (self.idle)();
                        continue;
                    }
                },
            };
            let con = &mut *self.con;
            // The console turns "\n" into "\r\n" itself: drop the editor's own carriage returns.
            let mut echo = |bytes: &[u8]| {
                for part in bytes.split(|&c| c == b'\r') {
                    con.write_bytes(part);
                }
            };
            if let Some(e) = ed.feed(b, &mut echo) {
                return e;
            }
        }
    }
}

impl fmt::Write for Line<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.write(s);
        Ok(())
    }
}

/// Why a chat stopped: a model or device error (as text), or an allocation that failed.
#[derive(Debug)]
pub enum ChatError {
    Failed(String),
    OutOfMemory(OutOfMemory),
}

impl ChatError {
    /// True when an allocation failed.
    pub fn out_of_memory(&self) -> bool {
        match self {
            ChatError::Failed(text) => text.contains("out of memory"),
            ChatError::OutOfMemory(_) => true,
        }
    }
}

impl From<String> for ChatError {
    fn from(e: String) -> Self {
        ChatError::Failed(e)
    }
}

impl From<OutOfMemory> for ChatError {
    fn from(e: OutOfMemory) -> Self {
        ChatError::OutOfMemory(e)
    }
}

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatError::Failed(e) => f.write_str(e),
            ChatError::OutOfMemory(e) => write!(f, "{e}"),
        }
    }
}

/// What one turn cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnStats {
    /// Tokens fed through the model for this turn's prompt (new tokens only).
    pub prompt_tokens: usize,
    pub generated: usize,
    pub prefill_ns: u64,
    pub gen_ns: u64,
    /// KV positions in use after the turn.
    pub context_used: usize,
    pub stop: Option<StopReason>,
}

/// The conversation's settings and hooks.
pub struct Chat<'a> {
    pub tok: &'a Tokenizer,
    pub template: Template,
    /// The system prompt (may be empty): `lmboot.txt`'s, borrowed, or the model's.
    pub system: Cow<'a, str>,
    /// Tokens per reply at most.
    pub max_reply: usize,
    pub clock: &'a dyn Fn() -> u64,
    /// Runs (or restores) the system piece at position 0 of an empty state; returns what it did,
    /// for the UART (the prompt cache hooks in here).
    pub start: &'a mut StartFn<'a>,
    /// JSON mode's constraint, reset per reply (`None`: unavailable for this vocabulary).
    pub json: Option<&'a mut JsonConstraint>,
    pub json_on: bool,
}

/// [`Chat::start`]: runs or restores the system piece.
pub type StartFn<'a> = dyn FnMut(&mut RunState, &[u32]) -> Result<String, ChatError> + 'a;

impl core::fmt::Debug for Chat<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Chat")
            .field("template", &self.template)
            .field("max_reply", &self.max_reply)
            .finish_non_exhaustive()
    }
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

/// `n` things in `ns` nanoseconds as a rate per second with one decimal (`-` for none), written
/// where it is printed (no `String`).
fn per_second(n: usize, ns: u64) -> impl fmt::Display {
    struct Rate(usize, u64);
    impl fmt::Display for Rate {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let Rate(n, ns) = *self;
            if ns == 0 || n == 0 {
                return f.write_str("-");
            }
            let tenths = n as u128 * 10_000_000_000 / ns as u128;
            write!(f, "{}.{}", tenths / 10, tenths % 10)
        }
    }
    Rate(n, ns)
}

impl Chat<'_> {
    /// The system piece's tokens.
    fn system_tokens(&self) -> Result<Vec<u32>, String> {
        let text = self
            .template
            .system(&self.system)
            .map_err(|e| format!("{e}"))?;
        let add = !self.template.renders_bos();
        self.tok
            .encode(&text, add, true)
            .map_err(|e| format!("encoding the system prompt: {e}"))
    }

    /// Talk until Ctrl-D, replies speculative with `spec`. Errors are the model's or the
    /// device's (a bad command is only a message).
    pub fn run<S, P>(
        &mut self,
        engine: &Engine<'_, S, P>,
        st: &mut RunState,
        sampler: &mut Sampler,
        line: &mut Line<'_>,
        mut spec: Option<&mut Speculator<'_>>,
    ) -> Result<(), ChatError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let system = self.system_tokens()?;
        st.reset();
        let said = (self.start)(st, &system)?;
        if let Some(s) = spec.as_deref_mut() {
            // A /reset later feeds the same system piece: the drafts keep it.
            s.set_context(&system);
        }
        line.print(format_args!("chat: {} template, {} system tokens ({said}); context {} positions. /help for commands, Ctrl-D to end.\n", self.template.name(), system.len(), st.ctx()));
        let mut ed = LineEditor::try_new(MAX_LINE)?;
        let mut c = Convo {
            st,
            sampler,
            line,
            system,
            pending: None,
            count: 0,
            last: TurnStats::default(),
        };
        loop {
            let line = &mut *c.line;
            line.write("> ");
            let text = match line.read_event(&mut ed) {
                Event::Eof => {
                    line.write("bye\n");
                    return Ok(());
                }
                Event::Interrupt => continue,
                Event::Line(l) => l,
            };
            let done = self.take_line(&text, engine, &mut c, spec.as_deref_mut());
            // The editor types the next line into the same buffer (reserved once).
            ed.recycle(text);
            done?;
        }
    }

    /// What a line typed asks for: a command, or a message the model replies to.
    fn take_line<S, P>(
        &mut self,
        text: &str,
        engine: &Engine<'_, S, P>,
        c: &mut Convo<'_, '_>,
        spec: Option<&mut Speculator<'_>>,
    ) -> Result<(), ChatError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        if text.trim().is_empty() {
            return Ok(());
        }
        match chatcmd::parse(text) {
            Some(Err(msg)) => c.line.print(format_args!("{msg}\n")),
            Some(Ok(cmd)) => {
                let stats = matches!(cmd, Command::Stats);
                self.command(cmd, c)?;
                if let (true, Some(s)) = (stats, spec.as_deref()) {
                    c.line.print(format_args!("speculation: {}\n", s.stats));
                }
            }
            None => {
                let msg = chatcmd::message_text(text);
                if let Some(ids) = self.turn_tokens(msg, c)? {
                    self.reply(engine, &ids, c, spec)?;
                }
            }
        }
        Ok(())
    }

    /// Carry out a `/` command.
    fn command(&mut self, cmd: Command, c: &mut Convo<'_, '_>) -> Result<(), ChatError> {
        let Convo {
            st, sampler, line, ..
        } = c;
        match cmd {
            Command::Help => line.write(chatcmd::HELP),
            Command::Reset => {
                st.reset();
                sampler.reset();
                c.pending = None;
                c.count = 0;
                c.last = TurnStats::default();
                let said = (self.start)(c.st, &c.system)?;
                let (st, line) = (&c.st, &mut c.line);
                line.print(format_args!(
                    "conversation reset ({said}); context {} of {} positions used\n",
                    st.pos,
                    st.ctx()
                ));
            }
            Command::Stats => {
                let last = &c.last;
                line.print(format_args!(
                    "stats: {} turns; last turn: {} new prompt tokens in {} ms, {} generated in {} ms ({} tok/s); context {} of {} positions used\n",
                    c.count,
                    last.prompt_tokens,
                    ms(last.prefill_ns),
                    last.generated,
                    ms(last.gen_ns),
                    per_second(last.generated, last.gen_ns),
                    st.pos,
                    st.ctx()
                ))
            }
            Command::Temp(t) => {
                let mut c = sampler.config;
                c.temperature = t;
                match sampler.set_config(c) {
                    Ok(()) => line.print(format_args!("temperature {t}\n")),
                    Err(e) => line.print(format_args!("/temp: {e}\n")),
                }
            }
            Command::Set(setting) => match sampler.set_config(with(sampler.config, setting)) {
                Ok(()) => line.print(format_args!("{}\n", Shown(&sampler.config))),
                Err(e) => line.print(format_args!("/set: {e}\n")),
            },
            Command::Show => {
                let json = match (self.json.is_some(), self.json_on) {
                    (false, _) => "not available",
                    (true, true) => "on",
                    (true, false) => "off",
                };
                line.print(format_args!(
                    "{}; JSON mode {json}\n",
                    Shown(&sampler.config)
                ))
            }
            Command::Json(on) => {
                if self.json.is_none() {
                    line.write("/json: JSON mode is not available for this model\n");
                } else {
                    self.json_on = on;
                    line.write(if on {
                        "JSON mode on: replies are JSON values\n"
                    } else {
                        "JSON mode off\n"
                    });
                }
            }
        }
        Ok(())
    }

    /// This turn's tokens: the unfed end of the last reply, its end of turn, the message; `None`
    /// (with a message on the line) if they cannot be encoded or do not fit the context.
    fn turn_tokens(&self, msg: &str, c: &mut Convo<'_, '_>) -> Result<Option<Vec<u32>>, ChatError> {
        let Convo { st, line, .. } = c;
        let end = if c.count > 0 {
            self.template.end_of_turn()
        } else {
            ""
        };
        let user = self.template.user_turn(msg, c.count == 0)?;
        let piece = oom::format(format_args!("{end}{user}"), "the turn's text")?;
        let mut ids = match self.tok.encode(&piece, false, true) {
            Ok(t) => t,
            Err(e) => {
                line.print(format_args!("cannot encode that message: {e}\n"));
                return Ok(None);
            }
        };
        if let Some(p) = c.pending {
            oom::reserve(&mut ids, 1, "the turn's tokens")?;
            ids.insert(0, p);
        }
        let free = st.ctx() - st.pos;
        if ids.len() + 1 > free {
            line.print(format_args!(
                "context full: {} of {} positions used, this message needs {}; type /reset to start a new conversation\n",
                st.pos,
                st.ctx(),
                ids.len() + 1
            ));
            return Ok(None);
        }
        Ok(Some(ids))
    }

    /// Feed `ids`, stream the reply (JSON-constrained when on; Ctrl-C stops it), then the turn's
    /// line of figures.
    fn reply<S: Storage + Sync + ?Sized, P: Parallel + ?Sized>(
        &mut self,
        engine: &Engine<'_, S, P>,
        ids: &[u32],
        c: &mut Convo<'_, '_>,
        spec: Option<&mut Speculator<'_>>,
    ) -> Result<(), String> {
        let Convo {
            st, sampler, line, ..
        } = c;
        let before = st.pos;
        let mut dec = StreamDecoder::new();
        let mut printed: Option<u32> = None;
        let tok = self.tok;
        let json_on = self.json_on && self.json.is_some();
        let filter: Option<&mut dyn LogitsFilter> = match (json_on, self.json.as_deref_mut()) {
            (true, Some(j)) => {
                j.reset();
                Some(j)
            }
            _ => None,
        };
        let rep: GenReport = {
            let line_ref = &mut *line;
            let mut on_token = |t| {
                printed = Some(t);
                dec.push(tok.token_to_piece(t), |s| line_ref.write(s));
                !line_ref.interrupted()
            };
            let is_end = |t| tok.is_eog(t);
            match spec {
                Some(s) => s
                    .generate(
                        engine,
                        st,
                        sampler,
                        (ids, self.max_reply),
                        (&is_end, self.clock),
                        filter,
                        &mut on_token,
                    )
                    .map(|(r, _)| r),
                None => engine.generate_filtered(
                    st,
                    sampler,
                    ids,
                    self.max_reply,
                    &is_end,
                    self.clock,
                    filter,
                    &mut on_token,
                ),
            }
            .map_err(|e| format!("generation: {e}"))?
        };
        dec.finish(|s| line.write(s));
        c.pending = printed;
        c.count += 1;
        c.last = TurnStats {
            prompt_tokens: ids.len(),
            generated: rep.generated,
            prefill_ns: rep.prefill_time,
            gen_ns: rep.gen_time,
            context_used: st.pos,
            stop: rep.stop,
        };
        let why = match rep.stop {
            Some(StopReason::EndToken(_)) => "end of reply",
            Some(StopReason::Stopped) if json_on => "JSON value complete (or Ctrl-C)",
            Some(StopReason::Stopped) => "stopped (Ctrl-C)",
            Some(StopReason::ContextFull) => "context full",
            _ => "token limit",
        };
        line.print(format_args!(
            "\n[turn {}: {} new tokens processed (context {} -> {} of {}) in {} ms ({} tok/s), {} generated in {} ms ({} tok/s); {why}]\n",
            c.count,
            ids.len(),
            before,
            st.pos,
            st.ctx(),
            ms(rep.prefill_time),
            per_second(ids.len(), rep.prefill_time),
            rep.generated,
            ms(rep.gen_time),
            per_second(rep.generated, rep.gen_time)
        ));
        if rep.stop == Some(StopReason::ContextFull) || st.ctx() - st.pos < 8 {
            line.write("context full: type /reset to start a new conversation\n");
        }
        Ok(())
    }
}

/// `c` with `s` changed.
fn with(mut c: SamplerConfig, s: Setting) -> SamplerConfig {
    match s {
        Setting::Temperature(t) => c.temperature = t,
        Setting::TopK(k) => c.top_k = k,
        Setting::TopP(p) => c.top_p = p,
        Setting::MinP(p) => c.min_p = p,
        Setting::RepeatPenalty(r) => c.repeat_penalty = r,
        Setting::RepeatLastN(n) => c.repeat_last_n = n,
        Setting::Seed(x) => c.seed = x,
    }
    c
}

/// `sampling: temperature 0.2, top_k 40, ...`: the settings as `/show` and `/set` print them,
/// each under the name `/set` takes.
struct Shown<'a>(&'a SamplerConfig);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.0;
        write!(
            f,
            "sampling: temperature {}, top_k {}, top_p {}, min_p {}, repeat_penalty {}, repeat_last_n {}, seed {}",
            c.temperature, c.top_k, c.top_p, c.min_p, c.repeat_penalty, c.repeat_last_n, c.seed
        )
    }
}

/// The conversation: the model's state, the sampler and the line, the system piece, and where
/// the turns stand.
struct Convo<'c, 'l> {
    st: &'c mut RunState,
    sampler: &'c mut Sampler,
    line: &'c mut Line<'l>,
    /// The system piece's tokens (run again after `/reset`).
    system: Vec<u32>,
    /// The last reply token, printed but not yet fed (it leads the next turn's tokens).
    pending: Option<u32>,
    /// Turns so far.
    count: usize,
    last: TurnStats,
}
