//! The run, portable: everything after the board is up, as named steps.
//!
//! [`mount`] the card and read `lmboot.txt` → [`open_model`] (header, tensor census, tokenizer) →
//! a draft model's layers and head, if speculation names one (`spec::load`) →
//! `size_buffers` (KV cache and activations first, the page cache gets what is left) →
//! `reader` (a core serves the card, or the cores read it themselves) → `load` the page cache →
//! `check_part` → `selftest` → `choose_kernels` → [`chat`](crate::chat) (the chat step) or
//! `generate::run`. The board supplies a block device, a console, a clock and a
//! worker pool ([`Platform`]); the host tests run the same function over a RAM disk.

mod converse;
mod error;
mod generate;
pub mod measure;
mod profile;
mod ring;
mod selftest;
mod source;
pub(crate) mod spec;

pub use error::{CardError, RunError};
pub use selftest::{card_check, CardCheck, CARD_SPAN};
use spec::SpecBuffers;
pub use spec::{DraftHeld, DraftModel};

use crate::card::{CardFile, Direct};
use crate::config::{Config, IoCore};
use crate::console::{Console, Out};
use crate::iocore::{IoShared, Served, Texted};
use crate::pagecache::order::{self, PinReport, PinScope};
use crate::pagecache::{self, FileSource, Options, PageCache};
use crate::platform::Platform;
use alloc::string::{String, ToString};
use converse::ChatRun;
use core::fmt::{self, Write};
use drivers::block::{BlockDevice, WriteBlocks};
use drivers::fat::{File, Volume};
use inference::gguf::TensorInfo;
use inference::model::{Model, RunState};
use inference::oom::{self, set_stage, Stage};
use inference::parallel::Parallel;
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels};

/// Where the configuration lives on the card.
pub const CONFIG_PATH: &str = "/lmboot.txt";
/// Heap kept free beyond what the model's buffers need (allocator slack, DMA buffers, stacks of
/// the loop).
pub const HEAP_MARGIN: u64 = 4 << 20;

/// Marker lines around the generated text, so tests can cut it out exactly.
pub const BEGIN_OUTPUT: &str = "--- output ---";
pub const END_OUTPUT: &str = "--- end ---";

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

/// Boot-to-tokens on `dev`. Prints progress, the generated text between [`BEGIN_OUTPUT`] and
/// [`END_OUTPUT`], and a stats line.
pub fn run<D, P>(mut dev: D, con: &mut dyn Console, platform: &P) -> Result<(), RunError>
where
    D: WriteBlocks + Send,
    D::Error: Send,
    P: Platform + ?Sized,
{
    let mut out = Out(con);
    let t_boot = platform.now_ns();
    let Card {
        mut cfg,
        model: file,
        kv_file,
        draft: draft_file,
    } = {
        set_stage(Stage::Mount);
        mount(&mut dev)?
    };
    if let Some(line) = platform.set_arm_clock(cfg.arm_freq) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "model: {} ({} bytes in {} extents)",
        cfg.model,
        file.size(),
        file.extents().len()
    );
    let direct = Direct::new(file, dev);
    let m = open_model(&direct, &mut out)?;
    let mut found = selftest::Findings::default();
    selftest::before_load(&cfg, &direct, (platform, &mut found), &mut out)?;
    model_sampling(&mut cfg, &m.gguf, &mut out)?;
    let cfg = &cfg;
    let cores = platform
        .set_cores(cfg.cores)
        .unwrap_or_else(|| platform.pool().workers());
    let _ = writeln!(out, "cores: {cores} working");
    if let Some(place) = cfg.ring {
        let before = ring::Before {
            cfg,
            m: &m,
            direct,
            cores,
        };
        ring::run(place, before, out.0, platform)?;
        let _ = writeln!(
            out,
            "stats: total {} ms since the card was mounted",
            ms(platform.now_ns() - t_boot)
        );
        return Ok(());
    }
    let size = m.gguf_len;
    let (draft_model, held) = match draft_file {
        Some(f) => load_draft(&direct, f, (cfg, &m), cores, platform, &mut out)?,
        None => None,
    }
    .unzip();
    let draft = draft_model.as_ref().zip(held);
    let Buffers {
        mut st,
        spec,
        ctx,
        capacity,
        memory,
    } = size_buffers(cfg, (&m.model, draft), cores, size, platform)?;

    // Declaration order is drop order reversed: the cache (declared last) waits for the reads in
    // flight, then the serving core stops, then the shared source goes.
    let (shared, plain) = reader(direct.into_inner(), cfg, capacity < size, cores, platform);
    let serve = || shared.as_ref().is_some_and(|s| s.serve_one());
    let _serving = start_serving(&shared, &serve, cores, platform, &mut out);
    let src = match (&shared, plain) {
        (Some(s), _) => source::Source::Served(Served::new(s)),
        (None, Some(c)) => source::Source::Texted(Texted(c)),
        (None, None) => unreachable!("reader() returns one of the two"),
    };
    let whole = inference::model::Part::whole(m.model.config.n_layer);
    let wanted = spec::pin_order(cfg, (&m.model, &whole), Some(size))?;
    let scope = spec::pin_scope(cfg, &m.model, &whole);
    let src_shape = (src.len(), src.queue_depth());
    say_pins(
        &memory,
        (src_shape, capacity, cfg),
        (scope, &wanted),
        &mut out,
    )?;
    let (cache, load_ns) = load(src, cfg, capacity, &wanted, &|| {}, platform, &mut out)?;
    cache.set_schedule(m.model.weights.read_order(), cores);
    check_part(&m.model, &cache, &whole, platform, &mut out)?;
    selftest(cfg, platform, &mut out)?;
    let kernels = choose_kernels(cfg, platform, &mut found, &mut out)?;
    let ready = (&m.model, &cache, &mut st);
    selftest::after_load(cfg, (platform, &kernels), ready, &mut found, &mut out)?;
    let card_rate = profile::rate(cache.resident_bytes(), load_ns);
    let model_run = ModelRun {
        cfg,
        m: &m,
        kv_file: kv_file.as_ref(),
        kernels,
        ctx,
        card_rate,
        remote: None,
    };
    if model_run.run(&cache, (&mut st, spec), platform, &mut out)? {
        return Ok(());
    }
    let _ = writeln!(
        out,
        "stats: total {} ms since the card was mounted",
        ms(platform.now_ns() - t_boot)
    );
    Ok(())
}

/// The last step, chat or generate, with what the steps before made.
pub(crate) struct ModelRun<'a> {
    pub cfg: &'a Config,
    pub m: &'a Opened,
    pub kv_file: Option<&'a (String, File)>,
    pub kernels: Kernels,
    pub ctx: usize,
    /// Card read rate measured while loading (bytes/s; 0 if unknown).
    pub card_rate: u64,
    /// The other boards of a ring, when this board is its head.
    pub remote: Option<&'a dyn inference::generate::Remote>,
}

impl ModelRun<'_> {
    /// Step 9: chat on the console, or generate from the configured prompt. Returns true for a
    /// chat (which prints no stats line at the end).
    pub(crate) fn run<F: FileSource + Send, P: Platform + ?Sized>(
        &self,
        cache: &PageCache<F>,
        (st, mut spec): (&mut RunState, SpecBuffers<'_>),
        platform: &P,
        out: &mut Out<'_>,
    ) -> Result<bool, RunError> {
        let (cfg, m) = (self.cfg, self.m);
        // A draft model's file is read through the device the cache owns.
        let store = spec.store(cache);
        let spec = spec.parts(
            store
                .as_ref()
                .map(|s| s as &(dyn inference::Storage + Sync)),
        );
        if cfg.chats() {
            let chat = ChatRun {
                cfg,
                g: &m.gguf,
                model: &m.model,
                tok: &m.tok,
                cache,
                kv_file: self.kv_file,
                kernels: self.kernels,
                remote: self.remote,
            };
            set_stage(Stage::Chat);
            chat.run((st, spec), platform, out.0)?;
            return Ok(true);
        }
        let g = generate::Gen {
            cfg,
            model: &m.model,
            tok: &m.tok,
            cache,
            kernels: self.kernels,
            ctx: self.ctx,
            card_rate: self.card_rate,
            remote: self.remote,
        };
        set_stage(Stage::Generate);
        generate::run(&g, (st, spec), platform, out)?;
        Ok(false)
    }
}

/// What the card holds for the run: the configuration, the model file, the prompt-cache file.
#[derive(Debug)]
pub struct Card {
    pub cfg: Config,
    pub model: File,
    /// The prompt-cache file and its path, if the configuration names one and the card has it.
    pub kv_file: Option<(String, File)>,
    /// The draft model's file and its path, when speculation names one.
    pub draft: Option<(String, File)>,
}

/// Step 1: mount the FAT volume, read `lmboot.txt`, open the model and prompt-cache files.
pub fn mount<D: BlockDevice>(dev: &mut D) -> Result<Card, RunError> {
    let text = |e: D::Error| e.to_string();
    let vol = Volume::mount(dev).map_err(|e| RunError::Mount(e.map_device(text)))?;
    let f = vol
        .open(dev, CONFIG_PATH)
        .map_err(|e| RunError::ConfigMissing(e.map_device(text)))?;
    let mut bytes = oom::filled(
        f.size().min(1 << 20) as usize,
        0u8,
        "the configuration's text",
    )
    .map_err(RunError::OutOfMemory)?;
    f.read_at(dev, 0, &mut bytes)
        .map_err(|e| RunError::ConfigRead(e.map_device(text)))?;
    let cfg = Config::parse(&bytes).map_err(RunError::Config)?;
    let model = vol.open(dev, &cfg.model).map_err(|e| RunError::ModelOpen {
        path: cfg.model.to_string(),
        error: e.map_device(text),
    })?;
    let kv_file = cfg
        .prompt_cache
        .as_deref()
        .and_then(|p| vol.open(dev, p).ok().map(|f| (p, f)));
    let kv_file = match kv_file {
        Some((p, f)) => Some((copy(p, "the prompt cache's path")?, f)),
        None => None,
    };
    let draft = match cfg.spec.draft.as_ref().filter(|_| cfg.spec.on()) {
        Some(p) => Some((
            copy(p, "the draft model's path")?,
            vol.open(dev, p).map_err(|e| RunError::ModelOpen {
                path: p.clone(),
                error: e.map_device(text),
            })?,
        )),
        None => None,
    };
    Ok(Card {
        cfg,
        model,
        kv_file,
        draft,
    })
}

/// `s` as an owned `String`, allocated fallibly (`what` names it in the error).
fn copy(s: &str, what: &'static str) -> Result<String, RunError> {
    oom::format(format_args!("{s}"), what).map_err(RunError::OutOfMemory)
}

/// The model as read from the file's header: what every later step works on.
#[derive(Debug)]
pub struct Opened {
    pub gguf: Gguf,
    pub model: Model,
    pub tok: Tokenizer,
    /// The file's size in bytes.
    pub gguf_len: u64,
}

/// The repetition penalty a chat uses when neither `lmboot.txt` nor the model sets one.
pub const CHAT_REPEAT_PENALTY: f32 = 1.1;

/// The model's recommended sampling (`general.sampling.*`) for the settings `lmboot.txt` leaves
/// out, and a line naming what was taken; in a chat, the repetition guard where neither sets it.
fn model_sampling(cfg: &mut Config, g: &Gguf, out: &mut Out<'_>) -> Result<(), RunError> {
    let taken = cfg
        .sampler
        .apply_model_defaults(g, cfg.sampler_given)
        .map_err(RunError::ModelSampling)?;
    // Chat's repetition guard, Ollama's default: a reply that starts to repeat itself (SmolLM2
    // asked for a haiku at temperature 0.2: "a fleeting sight, a fleeting sight, ...") is
    // pushed off the loop.
    let guard =
        cfg.chats() && !cfg.sampler_given.repeat_penalty && !taken.contains(&"repeat_penalty");
    if guard {
        cfg.sampler.repeat_penalty = CHAT_REPEAT_PENALTY;
        let _ = writeln!(
            out,
            "sampling: chat's repetition guard: repeat_penalty {CHAT_REPEAT_PENALTY} over the last {} tokens (repeat_penalty = 1 in lmboot.txt turns it off; /set changes it)",
            cfg.sampler.repeat_last_n
        );
    }
    if !taken.is_empty() {
        let s = &cfg.sampler;
        let _ = writeln!(
            out,
            "sampling: the model's recommended {} (temperature {}, top_k {}, top_p {}, min_p {})",
            taken.join(", "),
            s.temperature,
            s.top_k,
            s.top_p,
            s.min_p
        );
    }
    Ok(())
}

/// Step 2: the header, metadata and tokenizer, read directly (before the cache is sized), and a
/// line naming the model and counting its weight types.
pub fn open_model<D>(direct: &Direct<D>, out: &mut Out<'_>) -> Result<Opened, RunError>
where
    D: WriteBlocks + Send,
{
    use inference::Storage;
    let size = direct.len();
    set_stage(Stage::Model);
    let gguf = Gguf::open(direct).map_err(RunError::Gguf)?;
    let model = Model::load(&gguf, direct).map_err(RunError::Model)?;
    let _ = writeln!(
        out,
        "model: {}, tensors: {}",
        summary(&gguf, &model),
        TypeCounts(&gguf.tensors)
    );
    set_stage(Stage::Tokenizer);
    let tok = Tokenizer::from_gguf(&gguf, direct).map_err(RunError::Tokenizer)?;
    Ok(Opened {
        gguf,
        model,
        tok,
        gguf_len: size,
    })
}

/// `T x N, U x M`: the tensors' types by name, in name order, each with its count (written out
/// without a map or strings: a pass over the tensors for each type).
struct TypeCounts<'a>(&'a [TensorInfo]);

impl fmt::Display for TypeCounts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = || self.0.iter().map(|t| t.ty.name());
        let mut last: Option<&str> = None;
        while let Some(name) = names().filter(|&n| last.is_none_or(|l| n > l)).min() {
            if last.is_some() {
                f.write_str(", ")?;
            }
            write!(f, "{name} x{}", names().filter(|&n| n == name).count())?;
            last = Some(name);
        }
        Ok(())
    }
}

/// `"name", arch (L layers, dim D, H heads / K kv, ffn F, vocab V)`, written where it is shown.
pub(crate) fn summary<'a>(g: &'a Gguf, model: &'a Model) -> impl fmt::Display + 'a {
    struct Summary<'a>(&'a Gguf, &'a Model);
    impl fmt::Display for Summary<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let c = &self.1.config;
            write!(
                f,
                "{:?}, {} ({} layers, dim {}, {} heads / {} kv, ffn {}, vocab {})",
                c.name,
                self.0.architecture().unwrap_or("?"),
                c.n_layer,
                c.dim,
                c.n_head,
                c.n_head_kv,
                c.ffn_dim,
                c.vocab
            )
        }
    }
    Summary(g, model)
}

/// Step 3: the run's buffers (KV cache for `ctx` positions, activations), then the page cache's
/// size from what is left of the heap. Returns the buffers, the positions, the cache's bytes and
/// the memory line's figures (said with what the cache pins, once the reader is known).
fn size_buffers<'d, P: Platform + ?Sized>(
    cfg: &Config,
    (model, draft): (&Model, Option<(&'d DraftModel, DraftHeld)>),
    cores: usize,
    size: u64,
    platform: &P,
) -> Result<Buffers<'d>, RunError> {
    set_stage(Stage::Buffers);
    let shape = run_shape(cfg, model, cores, platform.heap_free());
    let (ctx, workers, batch) = shape;
    let whole = inference::model::Part::whole(model.config.n_layer);
    let (kv, buffers) =
        RunState::size_of(model, ctx, workers, batch, &whole).map_err(RunError::Buffers)?;
    let spec = spec::bytes(cfg, (model, draft.as_ref().map(|d| &d.0.model)), shape)?;
    let heap = platform.heap_free();
    let buffers = buffers.saturating_add(spec);
    if kv.saturating_add(buffers).saturating_add(HEAP_MARGIN) > heap {
        return Err(RunError::NoRoom {
            ctx,
            kv,
            buffers,
            free: heap,
        });
    }
    let mut st = RunState::with_batch(model, ctx, workers, batch).map_err(RunError::Buffers)?;
    let (spec, spec_note) = spec::buffers(cfg, (model, draft), &mut st, shape)?;
    let (kv_bytes, buf_bytes) = st.bytes();
    let free = platform.heap_free();
    let auto = free.saturating_sub(HEAP_MARGIN);
    let capacity = cfg.cache_bytes.unwrap_or(auto).min(auto).min(size);
    let memory = Memory {
        kv: kv_bytes,
        buffers: buf_bytes,
        ctx,
        batch,
        spec_note,
        free,
        capacity,
        size,
    };
    Ok(Buffers {
        st,
        spec,
        ctx,
        capacity,
        memory,
    })
}

/// The run's shape (context positions, workers, prompt tokens per pass) with `heap` bytes free.
fn run_shape(cfg: &Config, model: &Model, cores: usize, heap: u64) -> spec::Shape {
    let ctx = cfg.ctx.min(model.config.train_ctx);
    let batch = cfg.batch.unwrap_or_else(|| auto_batch(model, ctx, heap));
    (ctx, cfg.measure_cores.unwrap_or(cores), batch)
}

/// Step 2b: the draft model `file` names, held as [`spec::load`] holds it, with the heap the
/// target's buffers leave ([`spec::room`]: counted with the prompt batch the heap allows before
/// the draft takes its share, never less than the batch they then get).
fn load_draft<D, P>(
    direct: &Direct<D>,
    file: (String, File),
    (cfg, m): (&Config, &Opened),
    cores: usize,
    platform: &P,
    out: &mut Out<'_>,
) -> Result<Option<(DraftModel, DraftHeld)>, RunError>
where
    D: WriteBlocks + Send,
    P: Platform + ?Sized,
{
    let free = platform.heap_free();
    let shape = run_shape(cfg, &m.model, cores, free);
    let heap = spec::room(cfg, &m.model, shape, free)?;
    spec::load(direct, file, (cfg, m), (platform.clock(), heap, shape), out)
}

/// The memory line's figures, up to the page cache's size (what it pins follows once the reader
/// is known).
struct Memory {
    kv: usize,
    buffers: usize,
    ctx: usize,
    batch: usize,
    spec_note: String,
    free: u64,
    capacity: u64,
    size: u64,
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "memory: KV cache {} KiB ({} positions), buffers {} KiB (prompt batches of {}){}, heap free {} MiB, page cache {} MiB of a {} MiB model",
            self.kv >> 10,
            self.ctx,
            self.buffers >> 10,
            self.batch,
            self.spec_note,
            self.free >> 20,
            self.capacity >> 20,
            self.size >> 20
        )
    }
}

/// The page cache's options from `cfg`.
fn cache_options(cfg: &Config) -> Options {
    Options {
        readahead: cfg.readahead,
        ..Default::default()
    }
}

/// Say `memory` and what a cache of `capacity` bytes over `src` (its length and queue depth)
/// pins of `scope`'s tensors (`wanted`: their ranges, most valuable first) and why.
fn say_pins(
    memory: &dyn fmt::Display,
    ((len, depth), capacity, cfg): ((u64, usize), u64, &Config),
    (scope, wanted): (PinScope<'_>, &[(u64, u64)]),
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let opts = cache_options(cfg);
    let (runs, _, _) = pagecache::plan(len, depth, capacity, cfg.page_bytes, opts, wanted)
        .map_err(RunError::Cache)?;
    let pins = PinReport {
        scope,
        total: runs.iter().map(|r| r.1).sum(),
        pinned: &|o, n| order::pinned_within(&runs, o, n),
    };
    let _ = writeln!(out, "{memory}: {pins}");
    Ok(())
}

/// What [`size_buffers`] made: the run state, speculation's, the context length and the page
/// cache's share of the heap.
struct Buffers<'d> {
    st: RunState,
    spec: SpecBuffers<'d>,
    ctx: usize,
    capacity: u64,
    memory: Memory,
}

/// Prompt tokens per forward pass when `batch = auto`: up to [`AUTO_BATCH`], as many as fit in a
/// sixteenth of the heap left after the KV cache (the rest goes to the page cache), at least 1.
pub fn auto_batch(model: &Model, ctx: usize, heap_free: u64) -> usize {
    let kv = RunState::kv_bytes_for(model, ctx);
    let budget = heap_free.saturating_sub(kv) / 16;
    let per = RunState::bytes_per_batch_token(model).max(1);
    (budget / per).clamp(1, AUTO_BATCH as u64) as usize
}

/// The largest batch `batch = auto` picks: past it a prompt pass gains little (the weights are
/// already read once per 32 tokens) and the buffers grow.
pub const AUTO_BATCH: usize = 32;

/// Step 4: how the page cache reaches the card. Read-ahead needs reads that run while the cores
/// compute: a device with a request queue (virtio-blk) does that by itself; otherwise (the Pi's SD
/// host, PIO) one core serves the card, when the model streams and a core can be spared.
#[allow(clippy::type_complexity)]
fn reader<D, P>(
    card: CardFile<D>,
    cfg: &Config,
    streams: bool,
    cores: usize,
    platform: &P,
) -> (Option<IoShared<CardFile<D>>>, Option<CardFile<D>>)
where
    D: WriteBlocks + Send,
    P: Platform + ?Sized,
{
    let want_core = match cfg.io_core {
        IoCore::On => true,
        IoCore::Off => false,
        IoCore::Auto => card.queue_depth() == 0,
    } && streams
        && cfg.readahead > 0
        && cfg.measure_cores.is_none()
        && cores >= 2;
    match (want_core, platform.io_core()) {
        (true, Some(hooks)) => (Some(IoShared::new(card, hooks.wake)), None),
        _ => (None, Some(card)),
    }
}

/// Stops the serving core when dropped (after the page cache, which waits for reads in flight).
struct Serving(fn());

impl Drop for Serving {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// Have a core call `serve` while the others compute, if the reader is shared.
fn start_serving<F, P>(
    shared: &Option<IoShared<F>>,
    serve: &(dyn Fn() -> bool + Sync),
    cores: usize,
    platform: &P,
    out: &mut Out<'_>,
) -> Option<Serving>
where
    P: Platform + ?Sized,
{
    let (Some(_), Some(hooks)) = (shared, platform.io_core()) else {
        return None;
    };
    // SAFETY: the caller keeps the returned guard, which stops the service when dropped, in a
    // local declared after `serve` and `shared` and before the cache, which waits for the reads
    // in flight: the service stops before `serve` goes.
    match unsafe { (hooks.start)(serve) } {
        Some(core) => {
            let _ = writeln!(
                out,
                "read-ahead: core {core} serves the card, {} compute",
                cores - 1
            );
            Some(Serving(hooks.stop))
        }
        None => {
            let _ = writeln!(
                out,
                "read-ahead: no core to spare for the card; reads stay synchronous"
            );
            None
        }
    }
}

/// The page cache [`load`] fills, and the nanoseconds it took.
type Loaded<F> = (PageCache<F>, u64);

/// Step 5: fill the page cache's resident part (the `wanted` ranges of the file, most valuable
/// first: [`spec::pin_order`]) with a progress counter, calling `tick` as it goes, and say how it went. Returns
/// the cache and the load time in nanoseconds.
fn load<F: FileSource<Error = String> + Send, P: Platform + ?Sized>(
    src: F,
    cfg: &Config,
    capacity: u64,
    wanted: &[(u64, u64)],
    tick: &dyn Fn(),
    platform: &P,
    out: &mut Out<'_>,
) -> Result<Loaded<F>, RunError> {
    set_stage(Stage::PageCache);
    let t_load = platform.now_ns();
    let read = platform.instruction_counter();
    let counter =
        measure::InstructionCounter::new(read.as_ref().map(|(f, b)| (f as &dyn Fn() -> u64, *b)));
    let mut last = 0;
    let opts = cache_options(cfg);
    let size = src.len();
    let page = cfg.page_bytes;
    let mut cache = PageCache::for_ranges(src, capacity, page, opts, wanted, &mut |done, total| {
        tick();
        counter.sample();
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if pct >= last + 10 || done == total {
            last = pct;
            let _ = write!(out, "\rloading {pct:>3}%");
        }
    })
    .map_err(RunError::Cache)?;
    // Each start counted once (a range may be listed twice).
    let wanted_bytes: u64 = wanted
        .iter()
        .enumerate()
        .filter(|&(i, r)| wanted[..i].iter().all(|q| q.0 != r.0))
        .map(|(_, r)| r.1)
        .sum();
    let load_ns = platform.now_ns() - t_load;
    counter.sample();
    cache.set_clock(platform.clock());
    let _ = writeln!(
        out,
        "\nloaded {} MiB in {} ms ({} MiB resident, page {} KiB, read-ahead {})",
        cache.resident_bytes() >> 20,
        ms(load_ns),
        cache.resident_bytes() >> 20,
        cfg.page_bytes >> 10,
        match cache.readahead() {
            _ if cache.resident_bytes() >= size.min(wanted_bytes) => Pages::Said("not needed"),
            0 if cfg.readahead > 0 => Pages::Said("off (the card reads synchronously)"),
            0 => Pages::Said("off"),
            n => Pages::Count(n),
        }
    );
    let mb = cache.resident_bytes() / 1_000_000;
    if let (Some(n), true) = (counter.total().filter(|&n| n > 0), mb > 0) {
        // Under QEMU's -icount the count is of every core; the others wait in WFE/WFI.
        let _ = writeln!(out, "load: {n} instructions, {} per MB read", n / mb);
    }
    Ok((cache, load_ns))
}

/// The read-ahead as the load line shows it: a word, or a count of pages.
enum Pages {
    Said(&'static str),
    Count(usize),
}

impl fmt::Display for Pages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pages::Said(s) => f.write_str(s),
            Pages::Count(n) => write!(f, "{n} pages"),
        }
    }
}

/// Step 6: every weight `part` reads is finite (NaN/Inf in a scale would poison every token): one
/// pass over those tensors (the whole model on a board alone).
fn check_part<F: FileSource, P: Platform + ?Sized>(
    model: &Model,
    cache: &PageCache<F>,
    part: &inference::model::Part,
    platform: &P,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let t_check = platform.now_ns();
    let mut scratch =
        oom::filled(64 * 1024, 0u8, "the weight check's buffer").map_err(RunError::OutOfMemory)?;
    model
        .weights
        .check_finite_of(part, cache, &mut scratch)
        .map_err(RunError::Model)?;
    let n_layer = model.config.n_layer;
    let _ = write!(out, "weights checked: no NaN or infinity");
    if !part.is_whole(n_layer) {
        let _ = write!(
            out,
            " in layers {}..{}{}",
            part.layers.start,
            part.layers.end,
            if part.ends { " and the ends" } else { "" }
        );
    }
    let _ = writeln!(out, " ({} ms)", ms(platform.now_ns() - t_check));
    Ok(())
}

/// Step 7: `selftest = panic | exception` stops here, to show the board's fault report.
fn selftest<P: Platform + ?Sized>(
    cfg: &Config,
    platform: &P,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    match cfg.selftest.as_deref() {
        Some("panic") => {
            let _ = writeln!(out, "selftest: panicking on purpose");
            panic!("selftest: a deliberate panic");
        }
        Some("exception") => {
            let _ = writeln!(out, "selftest: raising an exception on purpose");
            platform.raise_exception();
            Err(RunError::NoException)
        }
        _ => Ok(()),
    }
}

/// Step 8: the kernel set: the board's best, or the one `kernels =` names if the CPU has it.
fn choose_kernels<P: Platform + ?Sized>(
    cfg: &Config,
    platform: &P,
    found: &mut selftest::Findings,
    out: &mut Out<'_>,
) -> Result<Kernels, RunError> {
    if cfg.selftest.as_deref() == Some("full") {
        return selftest::kernels(cfg, platform, found, out);
    }
    match cfg.kernels {
        "auto" => Ok(platform.kernels()),
        name => Kernels::by_name(name).ok_or_else(|| RunError::KernelsUnavailable(name.into())),
    }
}
