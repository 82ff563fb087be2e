//! The run's chat step: the template and system prompt from the model, the system piece restored
//! from or saved to the prompt cache on the card, then the conversation on the serial line.

use super::spec::{self, SpecParts};
use super::RunError;
use crate::chat::{Chat, ChatError, Line};
use crate::config::Config;
use crate::console::{Console, Out};
use crate::pagecache::{DynDev, FileSource, PageCache};
use crate::platform::Platform;
use crate::promptcache::{self, LoadOutcome};
use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use core::fmt::{self, Write};
use drivers::fat::File;
use inference::generate::{Engine, Remote};
use inference::json::{JsonConstraint, JsonError};
use inference::model::{Model, RunState};
use inference::oom::{self, OutOfMemory};
use inference::parallel::Parallel;
use inference::sampler::Sampler;
use inference::template::{chat_template, default_system_prompt, Template};
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels};

/// What a chat needs from the loading steps.
pub struct ChatRun<'a, F: FileSource> {
    pub cfg: &'a Config,
    pub g: &'a Gguf,
    pub model: &'a Model,
    pub tok: &'a Tokenizer,
    pub cache: &'a PageCache<F>,
    /// The prompt-cache file and its path, if the card has it.
    pub kv_file: Option<&'a (String, File)>,
    pub kernels: Kernels,
    /// The other boards of a ring, when this board is its head.
    pub remote: Option<&'a dyn Remote>,
}

impl<F: FileSource> core::fmt::Debug for ChatRun<'_, F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChatRun")
            .field("kernels", &self.kernels)
            .finish_non_exhaustive()
    }
}

impl<F: FileSource + Send> ChatRun<'_, F> {
    /// Talk on `con` until Ctrl-D.
    pub fn run<P: Platform + ?Sized>(
        &self,
        (st, spec): (&mut RunState, SpecParts<'_>),
        platform: &P,
        con: &mut dyn Console,
    ) -> Result<(), RunError> {
        let cfg = self.cfg;
        let system = match &cfg.system {
            Some(s) => Cow::Borrowed(s.as_str()),
            None => Cow::Owned(match chat_template(self.g) {
                Some(t) => default_system_prompt(t)
                    .map_err(RunError::OutOfMemory)?
                    .unwrap_or_default(),
                None => String::new(),
            }),
        };
        let engine = Engine {
            model: self.model,
            src: self.cache,
            pool: platform.pool(),
            kernels: self.kernels,
            on_forward: None,
            remote: self.remote,
        };
        let mut sampler =
            Sampler::new(cfg.sampler, self.model.config.vocab).map_err(RunError::Sampler)?;
        let clock = || platform.now_ns();
        let key = promptcache::model_key(self.g, self.cache).ok();
        let mut start =
            |st: &mut RunState, ids: &[u32]| self.start(&engine, key, st, ids, platform.clock());
        // A vocabulary JSON mode cannot drive is said at `/json on`; a heap too small for its
        // tables is said now, so that `/json on` is not then blamed on the model.
        let mut json = match JsonConstraint::from_tokenizer(self.tok) {
            Ok(j) => Some(j),
            Err(JsonError::OutOfMemory(e)) => {
                let _ = writeln!(Out(&mut *con), "warning: JSON mode off: {e}");
                None
            }
            Err(_) => None,
        };
        let mut chat = Chat {
            tok: self.tok,
            template: Template::from_gguf(self.g, self.tok),
            system,
            max_reply: cfg.max_tokens,
            clock: &clock,
            start: &mut start,
            json: json.as_mut(),
            json_on: cfg.json,
        };
        // While the user types, a ring's head keeps serving its line (the followers' beats).
        let idle = || {
            if let Some(r) = self.remote {
                r.tick();
            }
            for _ in 0..1000 {
                core::hint::spin_loop();
            }
        };
        let mut spec = spec::speculator(
            cfg,
            self.remote,
            (platform.pool(), self.kernels),
            spec,
            None,
        )
        .map_err(RunError::Generate)?;
        let mut line = Line::new(con, &idle).map_err(RunError::OutOfMemory)?;
        chat.run(&engine, st, &mut sampler, &mut line, spec.as_mut())
            .map_err(RunError::Chat)
    }

    /// Put the system piece `ids` at position 0 of `st`: restored from the prompt cache when it
    /// holds this model and prompt, else run and (with `allow_write`) saved there. Returns what
    /// happened, for the chat's first line.
    fn start<P: Parallel + ?Sized>(
        &self,
        engine: &Engine<'_, PageCache<F>, P>,
        key: Option<u64>,
        st: &mut RunState,
        ids: &[u32],
        clock_ns: fn() -> u64,
    ) -> Result<String, ChatError> {
        let kv = self.kv_file.zip(key);
        let mut said = String::new();
        if let Some(((path, file), key)) = kv {
            let mut r = None;
            self.cache.with_device(&mut |d| {
                r = Some(promptcache::load(file, &mut DynDev(d), key, ids, st))
            });
            match r {
                Some(Ok(o @ LoadOutcome::Restored { .. })) => {
                    append(&mut said, format_args!("{path}: {o}, prefill skipped"))?;
                    return Ok(said);
                }
                Some(Ok(o)) => append(&mut said, format_args!("{path}: {o}; "))?,
                Some(Err(e)) => append(&mut said, format_args!("{path}: {e}; "))?,
                None => {}
            }
            st.reset();
        }
        let t0 = clock_ns();
        engine
            .feed(st, ids)
            .map_err(|e| format!("system prompt: {e}"))?;
        let ms = (clock_ns() - t0) / 1_000_000;
        append(&mut said, format_args!("prefilled in {ms} ms"))?;
        if let Some(((path, file), key)) = kv {
            self.save(path, file, (key, ids, st), &mut said)?;
        }
        Ok(said)
    }

    /// Save the state after the system piece to the prompt-cache file, if writes are allowed, and
    /// say how that went after `said`.
    fn save(
        &self,
        path: &str,
        file: &File,
        (key, ids, st): (u64, &[u32], &RunState),
        said: &mut String,
    ) -> Result<(), OutOfMemory> {
        if !self.cfg.allow_write {
            return append(
                said,
                format_args!(", not saved to {path} (allow_write = false)"),
            );
        }
        let mut r = None;
        self.cache
            .with_device(&mut |d| r = Some(promptcache::save(file, &mut DynDev(d), key, ids, st)));
        match r {
            Some(Ok(rep)) => append(
                said,
                format_args!(", saved to {path} ({} KiB)", rep.bytes >> 10),
            ),
            Some(Err(e)) => append(said, format_args!(", not saved to {path}: {e}")),
            None => Ok(()),
        }
    }
}

/// `said` with `args` after it, its room reserved fallibly (the chat's first line says what the
/// prompt cache did).
fn append(said: &mut String, args: fmt::Arguments<'_>) -> Result<(), OutOfMemory> {
    let what = "the prompt cache's message";
    let piece = oom::format(args, what)?;
    said.try_reserve(piece.len()).map_err(|_| OutOfMemory {
        what,
        bytes: piece.len(),
    })?;
    said.push_str(&piece);
    Ok(())
}
