//! The run, portable: everything after the board is up. Mount the card → read `lmboot.txt` → open
//! the model (name, architecture, size, weight types) → page cache (load with progress) → tokenizer
//! → generate, streaming tokens → a stats line. The board supplies a block device, a console, a
//! clock and a worker pool; the host tests run the same function over a RAM disk.

use crate::config::{Config, IoCore, Mode};
use crate::iocore::{IoShared, Served, Texted};
use crate::measure::MeasuredPool;
use crate::pagecache::{DynBlock, DynDev, FileSource, PageCache};
use crate::promptcache::{self, LoadOutcome};
use crate::session::{Chat, Line};
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use drivers::block::{BlockDevice, WriteBlocks};
use drivers::fat::{File, Volume};
use inference::chat::{chat_template, default_system_prompt, Template};
use inference::generate::{Engine, StopReason};
use inference::json::JsonConstraint;
use inference::model::{Model, RunState};
use inference::parallel::Parallel;
use inference::sampler::Sampler;
use inference::storage::{Storage, StorageError};
use inference::tokenizer::{StreamDecoder, Tokenizer};
use inference::{Gguf, Kernels};

/// Where the configuration lives on the card.
pub const CONFIG_PATH: &str = "/lmboot.txt";
/// Heap kept free beyond what the model's buffers need (allocator slack, DMA buffers, stacks of
/// the loop).
pub const HEAP_MARGIN: u64 = 4 << 20;

/// Marker lines around the generated text, so tests can cut it out exactly.
pub const BEGIN_OUTPUT: &str = "--- output ---";
pub const END_OUTPUT: &str = "--- end ---";

/// The serial console, as the run sees it.
pub trait Console {
    fn write_bytes(&mut self, b: &[u8]);
    /// A received byte, if one is waiting (never blocks).
    fn read_byte(&mut self) -> Option<u8> {
        None
    }
}

struct W<'a>(&'a mut dyn Console);
impl Write for W<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.write_bytes(s.as_bytes());
        Ok(())
    }
}

/// What the board provides besides the device and console.
pub struct Env<'a, P: Parallel + ?Sized> {
    /// Nanoseconds since boot.
    pub clock_ns: fn() -> u64,
    /// Free heap bytes now.
    pub heap_free: &'a dyn Fn() -> u64,
    /// Heap high-water mark in bytes.
    pub heap_high: &'a dyn Fn() -> u64,
    /// This core's retired-instruction counter and its width in bits (it may wrap), if the CPU
    /// counts instructions.
    pub instructions: Option<(&'a (dyn Fn() -> u64 + Sync), u32)>,
    pub pool: &'a P,
    pub kernels: Kernels,
    /// Choose how many cores work (`None` = all); returns how many will.
    pub set_cores: Option<&'a dyn Fn(Option<usize>) -> usize>,
    /// Raise a CPU exception (an access to unmapped memory), for `selftest = exception`.
    pub raise_exception: Option<fn()>,
    /// A core to serve the card while the others compute (boards with more than one core).
    pub io_core: Option<IoCoreHooks>,
}

/// How the run takes a core out of the compute jobs to serve the card ([`crate::iocore`]).
#[derive(Debug, Clone, Copy)]
pub struct IoCoreHooks {
    /// Have one working core call `serve` in a loop (sleeping while it returns `false`); returns
    /// that core's index, or `None` if no core can be spared.
    ///
    /// # Safety
    /// `stop` must be called before `serve` is dropped.
    pub start: unsafe fn(&(dyn Fn() -> bool + Sync)) -> Option<usize>,
    /// Stop serving and give the core back to the jobs.
    pub stop: fn(),
    /// Wake the serving core (after queueing a read).
    pub wake: fn(),
}

/// Stops the serving core when dropped (after the page cache, which waits for reads in flight).
struct Serving(fn());

impl Drop for Serving {
    fn drop(&mut self) {
        (self.0)()
    }
}

impl<P: Parallel + ?Sized> fmt::Debug for Env<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("kernels", &self.kernels)
            .finish_non_exhaustive()
    }
}

/// Why a run failed. Every variant says what and where.
#[derive(Debug)]
pub enum RunError {
    Card(String),
    Config(String),
    Model(String),
    NoPrompt,
    Memory(String),
    Generate(String),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Card(m) => write!(f, "card: {m}"),
            RunError::Config(m) => write!(f, "{CONFIG_PATH}: {m}"),
            RunError::Model(m) => write!(f, "model: {m}"),
            RunError::NoPrompt => write!(f, "{CONFIG_PATH} sets no prompt (add `prompt = ...`)"),
            RunError::Memory(m) => write!(f, "memory: {m}"),
            RunError::Generate(m) => write!(f, "generation: {m}"),
        }
    }
}

/// The model file on the card, read through the FAT extents. Reads can be queued when the device
/// has a request queue: a page becomes one device request per extent piece, and the page is
/// reported when its last piece is.
#[derive(Debug)]
pub struct CardFile<D: BlockDevice> {
    pub file: File,
    pub dev: D,
    /// Device requests in flight: (device tag, page tag).
    pieces: Vec<(u16, u32)>,
    /// Pages in flight: (page tag, pieces left, first error).
    pages: Vec<PageRead<D::Error>>,
}

impl<D: BlockDevice> CardFile<D> {
    pub fn new(file: File, dev: D) -> Self {
        let q = dev.queue_depth();
        Self {
            file,
            dev,
            pieces: Vec::with_capacity(q),
            pages: Vec::with_capacity(q),
        }
    }
}

/// A page read in flight: its tag, the device requests left, and the first error.
type PageRead<E> = (u32, u32, Option<drivers::fat::FatError<E>>);

/// Largest device request a queued page read makes (virtio-blk's per-request limit).
const MAX_PIECE: u64 = 1 << 20;

impl<D: WriteBlocks + Send> FileSource for CardFile<D> {
    type Error = drivers::fat::FatError<D::Error>;
    fn len(&self) -> u64 {
        self.file.size()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.file.read_at(&mut self.dev, offset, buf)
    }
    fn queue_depth(&self) -> usize {
        self.dev.queue_depth()
    }
    unsafe fn start(
        &mut self,
        tag: u32,
        offset: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<bool, Self::Error> {
        use drivers::block::Submitted;
        use drivers::fat::FatError;
        let size = self.file.size();
        let end = offset.checked_add(len as u64).filter(|&e| e <= size);
        let (Some(end), true, true) = (end, offset.is_multiple_of(512), self.dev.queue_depth() > 0)
        else {
            // SAFETY: the caller guarantees `buf` is valid for `len` bytes.
            let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
            self.read(offset, b)?;
            return Ok(true);
        };
        let mut pos = offset;
        let mut queued = 0u32;
        let mut failed = None;
        while pos < end {
            let Some(run) = self.file.map_block(pos / 512) else {
                failed = Some(FatError::ReadPastEnd {
                    offset,
                    len: len as u64,
                    size,
                });
                break;
            };
            // Whole blocks: the last may run past the file's end into its last block (the buffer
            // has room, and the extents cover that block).
            let blocks = (end - pos)
                .div_ceil(512)
                .min(run.blocks)
                .min(MAX_PIECE / 512);
            let n = (blocks * 512) as usize;
            // SAFETY: `pos - offset + n` is at most `len` rounded up to 512, which the caller
            // guarantees `buf` can hold, untouched until this page is reported.
            match unsafe {
                self.dev
                    .submit_read(run.lba, buf.add((pos - offset) as usize), n)
            } {
                Ok(Submitted::Done) => {}
                Ok(Submitted::Queued(t)) => {
                    self.pieces.push((t, tag));
                    queued += 1;
                }
                Err(error) => {
                    failed = Some(FatError::Device {
                        lba: run.lba,
                        blocks,
                        error,
                    });
                    break;
                }
            }
            pos += n as u64;
        }
        match (queued, failed) {
            (0, Some(e)) => Err(e),
            (0, None) => Ok(true),
            // Pieces already queued are writing into the buffer: report the page (and any error)
            // only once they are done.
            (n, e) => {
                self.pages.push((tag, n, e));
                Ok(false)
            }
        }
    }
    fn poll(&mut self) -> Option<(u32, Result<(), Self::Error>)> {
        use drivers::fat::FatError;
        while let Some((t, r)) = self.dev.poll_read() {
            let Some(i) = self.pieces.iter().position(|p| p.0 == t) else {
                continue;
            };
            let (_, tag) = self.pieces.swap_remove(i);
            let Some(j) = self.pages.iter().position(|p| p.0 == tag) else {
                continue;
            };
            let page = &mut self.pages[j];
            page.1 -= 1;
            if let Err(error) = r {
                page.2.get_or_insert(FatError::Device {
                    lba: 0,
                    blocks: 0,
                    error,
                });
            }
            if page.1 == 0 {
                let (tag, _, e) = self.pages.swap_remove(j);
                return Some((tag, e.map_or(Ok(()), Err)));
            }
        }
        None
    }
    fn with_device(&mut self, f: &mut dyn FnMut(&mut dyn DynBlock)) -> bool {
        f(&mut self.dev);
        true
    }
}

/// Uncached reads of the card file (the header and tokenizer, before the cache is sized).
struct Direct<D: WriteBlocks + Send>(spin::Mutex<CardFile<D>>);

impl<D: WriteBlocks + Send> Storage for Direct<D> {
    fn len(&self) -> u64 {
        self.0.lock().file.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        inference::storage::check_range(offset, buf.len() as u64, self.len())?;
        self.0
            .lock()
            .read(offset, buf)
            .map_err(|e| StorageError::Io {
                offset,
                len: buf.len() as u64,
                detail: e.to_string(),
            })
    }
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

/// Boot-to-tokens on `dev`. Prints progress, the generated text between [`BEGIN_OUTPUT`] and
/// [`END_OUTPUT`], and a stats line.
pub fn run<D, P>(mut dev: D, con: &mut dyn Console, env: &Env<'_, P>) -> Result<(), RunError>
where
    D: WriteBlocks + Send,
    D::Error: Send,
    P: Parallel + ?Sized,
{
    let mut out = W(con);
    let t_boot = (env.clock_ns)();

    // The card and the configuration.
    let vol = Volume::mount(&mut dev).map_err(|e| RunError::Card(e.to_string()))?;
    let cfg = match vol.open(&mut dev, CONFIG_PATH) {
        Ok(f) => {
            let mut text = alloc::vec![0u8; f.size().min(1 << 20) as usize];
            f.read_at(&mut dev, 0, &mut text)
                .map_err(|e| RunError::Card(format!("reading {CONFIG_PATH}: {e}")))?;
            Config::parse(&text).map_err(|e| RunError::Config(e.to_string()))?
        }
        Err(e) => return Err(RunError::Config(format!("cannot open it: {e}"))),
    };
    let file = vol
        .open(&mut dev, &cfg.model)
        .map_err(|e| RunError::Card(format!("opening the model {}: {e}", cfg.model)))?;
    let size = file.size();
    // The prompt-cache file, if the card has it (opened now, while the device is at hand).
    let kv_file = cfg
        .prompt_cache
        .as_ref()
        .and_then(|p| vol.open(&mut dev, p).ok().map(|f| (p.clone(), f)));
    let _ = writeln!(
        out,
        "model: {} ({} bytes in {} extents)",
        cfg.model,
        size,
        file.extents().len()
    );

    // The header, metadata and tokenizer, read directly.
    let direct = Direct(spin::Mutex::new(CardFile::new(file, dev)));
    let g = Gguf::open(&direct).map_err(|e| RunError::Model(e.to_string()))?;
    let model = Model::load(&g, &direct).map_err(|e| RunError::Model(e.to_string()))?;
    let c = &model.config;
    let mut types: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &g.tensors {
        *types.entry(t.ty.name()).or_default() += 1;
    }
    let types: Vec<String> = types.iter().map(|(k, v)| format!("{k} x{v}")).collect();
    let _ = writeln!(
        out,
        "model: {:?}, {} ({} layers, dim {}, {} heads / {} kv, ffn {}, vocab {}), tensors: {}",
        c.name,
        g.architecture().unwrap_or("?"),
        c.n_layer,
        c.dim,
        c.n_head,
        c.n_head_kv,
        c.ffn_dim,
        c.vocab,
        types.join(", ")
    );
    let tok = Tokenizer::from_gguf(&g, &direct).map_err(|e| RunError::Model(e.to_string()))?;

    let cores = match env.set_cores {
        Some(set) => set(cfg.cores),
        None => env.pool.workers(),
    };
    let _ = writeln!(out, "cores: {cores} working");

    // Buffers first, then the page cache gets what is left.
    let ctx = cfg.ctx.min(c.train_ctx);
    let mut st = RunState::new(&model, ctx, cfg.measure_cores.unwrap_or(cores))
        .map_err(|e| RunError::Memory(e.to_string()))?;
    let (kv_bytes, buf_bytes) = st.bytes();
    let free = (env.heap_free)();
    let auto = free.saturating_sub(HEAP_MARGIN);
    let capacity = cfg.cache_bytes.unwrap_or(auto).min(auto).min(size);
    let _ = writeln!(
        out,
        "memory: KV cache {} KiB ({ctx} positions), buffers {} KiB, heap free {} MiB, page cache {} MiB of a {} MiB model",
        kv_bytes >> 10,
        buf_bytes >> 10,
        free >> 20,
        capacity >> 20,
        size >> 20
    );
    let card = direct.0.into_inner();
    // Read-ahead needs reads that run while the cores compute: a device with a request queue
    // (virtio-blk) does that by itself; otherwise (the Pi's SD host, PIO) one core serves the card.
    let streams = capacity < size;
    let want_core = match cfg.io_core {
        IoCore::On => true,
        IoCore::Off => false,
        IoCore::Auto => card.queue_depth() == 0,
    } && streams
        && cfg.readahead > 0
        && cfg.measure_cores.is_none()
        && cores >= 2;
    let (shared, plain) = match (want_core, env.io_core) {
        (true, Some(hooks)) => (Some(IoShared::new(card, hooks.wake)), None),
        _ => (None, Some(card)),
    };
    let serve = || shared.as_ref().is_some_and(|s| s.serve_one());
    let mut _serving = None;
    if let (Some(_), Some(hooks)) = (&shared, env.io_core) {
        // SAFETY: `_serving` stops the service when dropped, before `serve` and `shared` (declared
        // earlier) and after the cache (declared later), which waits for the reads in flight.
        match unsafe { (hooks.start)(&serve) } {
            Some(core) => {
                _serving = Some(Serving(hooks.stop));
                let _ = writeln!(
                    out,
                    "read-ahead: core {core} serves the card, {} compute",
                    cores - 1
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "read-ahead: no core to spare for the card; reads stay synchronous"
                );
            }
        }
    }
    let src: Box<dyn FileSource<Error = String> + Send + '_> = match (&shared, plain) {
        (Some(s), _) => Box::new(Served::new(s)),
        (None, Some(c)) => Box::new(Texted(c)),
        (None, None) => return Err(RunError::Memory("no card source".into())),
    };
    let t_load = (env.clock_ns)();
    let mut last = 0;
    let opts = crate::pagecache::Options {
        readahead: cfg.readahead,
        ..Default::default()
    };
    let mut cache =
        PageCache::with_options(src, capacity, cfg.page_bytes, opts, &mut |done, total| {
            let pct = if total == 0 { 100 } else { done * 100 / total };
            if pct >= last + 10 || done == total {
                last = pct;
                let _ = write!(out, "\rloading {pct:>3}%");
            }
        })
        .map_err(|e| RunError::Memory(e.to_string()))?;
    let load_ns = (env.clock_ns)() - t_load;
    cache.set_clock(env.clock_ns);
    let _ = writeln!(
        out,
        "\nloaded {} MiB in {} ms ({} MiB resident, page {} KiB, read-ahead {})",
        cache.resident_bytes() >> 20,
        ms(load_ns),
        cache.resident_bytes() >> 20,
        cfg.page_bytes >> 10,
        match cache.readahead() {
            _ if cache.resident_bytes() == size => "not needed".to_string(),
            0 if cfg.readahead > 0 => "off (the card reads synchronously)".to_string(),
            0 => "off".to_string(),
            n => format!("{n} pages"),
        }
    );
    // Every weight finite (NaN/Inf in a scale would poison every token): one pass over the model.
    let t_check = (env.clock_ns)();
    let mut scratch = alloc::vec![0u8; 64 * 1024];
    model
        .weights
        .check_finite(&cache, &mut scratch)
        .map_err(|e| RunError::Model(e.to_string()))?;
    drop(scratch);
    let _ = writeln!(
        out,
        "weights checked: no NaN or infinity ({} ms)",
        ms((env.clock_ns)() - t_check)
    );

    match cfg.selftest.as_deref() {
        Some("panic") => {
            let _ = writeln!(out, "selftest: panicking on purpose");
            panic!("selftest: a deliberate panic");
        }
        Some("exception") => {
            let _ = writeln!(out, "selftest: raising an exception on purpose");
            if let Some(f) = env.raise_exception {
                f();
            }
            return Err(RunError::Config(
                "selftest = exception: this platform cannot raise one".into(),
            ));
        }
        _ => {}
    }

    let kernels = match cfg.kernels.as_str() {
        "auto" => env.kernels,
        name => Kernels::by_name(name).ok_or_else(|| {
            RunError::Config(format!("kernels = {name}: not available on this CPU"))
        })?,
    };

    // Chat on the serial line.
    if cfg.mode == Mode::Chat || (cfg.mode == Mode::Auto && cfg.prompt.is_none()) {
        let template = Template::from_gguf(&g, &tok);
        let system = match &cfg.system {
            Some(s) => s.clone(),
            None => chat_template(&g)
                .and_then(default_system_prompt)
                .unwrap_or_default(),
        };
        let engine = Engine {
            model: &model,
            src: &cache,
            pool: env.pool,
            kernels,
            on_forward: None,
        };
        let mut sampler = Sampler::new(cfg.sampler, model.config.vocab)
            .map_err(|e| RunError::Config(e.to_string()))?;
        let clock = || (env.clock_ns)();
        // The prompt cache: the state after the system piece, on the card.
        let key = promptcache::model_key(&g, &cache).ok();
        let kv = kv_file.as_ref().zip(key);
        let mut start = |st: &mut RunState, ids: &[u32]| -> Result<String, String> {
            let mut said = String::new();
            if let Some(((path, file), key)) = kv {
                let mut r = None;
                cache.with_device(&mut |d| {
                    r = Some(promptcache::load(file, &mut DynDev(d), key, ids, st))
                });
                match r {
                    Some(Ok(o @ LoadOutcome::Restored { .. })) => {
                        return Ok(format!("{path}: {o}, prefill skipped"))
                    }
                    Some(Ok(o)) => said = format!("{path}: {o}; "),
                    Some(Err(e)) => said = format!("{path}: {e}; "),
                    None => {}
                }
                st.reset();
            }
            let t0 = (env.clock_ns)();
            engine
                .feed(st, ids)
                .map_err(|e| format!("system prompt: {e}"))?;
            said.push_str(&format!("prefilled in {} ms", ms((env.clock_ns)() - t0)));
            if let Some(((path, file), key)) = kv {
                if cfg.allow_write {
                    let mut r = None;
                    cache.with_device(&mut |d| {
                        r = Some(promptcache::save(file, &mut DynDev(d), key, ids, st))
                    });
                    match r {
                        Some(Ok(rep)) => {
                            said.push_str(&format!(", saved to {path} ({} KiB)", rep.bytes >> 10))
                        }
                        Some(Err(e)) => said.push_str(&format!(", not saved to {path}: {e}")),
                        None => {}
                    }
                } else {
                    said.push_str(&format!(", not saved to {path} (allow_write = false)"));
                }
            }
            Ok(said)
        };
        let mut json = JsonConstraint::from_tokenizer(&tok).ok();
        let mut chat = Chat {
            tok: &tok,
            template,
            system,
            max_reply: cfg.max_tokens,
            clock: &clock,
            start: &mut start,
            json: json.as_mut(),
            json_on: cfg.json,
        };
        let idle = || {
            for _ in 0..1000 {
                core::hint::spin_loop();
            }
        };
        let mut line = Line::new(out.0, &idle);
        chat.run(&engine, &mut st, &mut sampler, &mut line)
            .map_err(RunError::Generate)?;
        return Ok(());
    }

    // Generate.
    let prompt = cfg.prompt.as_deref().ok_or(RunError::NoPrompt)?;
    let ids = tok
        .encode(prompt, true, cfg.special)
        .map_err(|e| RunError::Generate(e.to_string()))?;
    let card_rate = if load_ns > 0 {
        cache.resident_bytes() as u128 * 1_000_000_000 / load_ns as u128
    } else {
        0
    } as u64;
    let g = Gen {
        cfg: &cfg,
        model: &model,
        tok: &tok,
        cache: &cache,
        ids: &ids,
        kernels,
        ctx,
        card_rate,
    };
    match (cfg.measure_cores, env.instructions) {
        (Some(n), Some((read, bits))) => {
            let pool = MeasuredPool::new(n, read, bits);
            let _ = writeln!(
                out,
                "measuring: the {n}-core split runs on one core, each core's share counted"
            );
            generate(&g, &mut st, &pool, Some(&pool), env, &mut out)?;
        }
        (Some(_), None) => {
            return Err(RunError::Config(
                "measure_cores needs an instruction counter".into(),
            ))
        }
        (None, _) => generate(&g, &mut st, env.pool, None, env, &mut out)?,
    }
    let _ = writeln!(
        out,
        "stats: total {} ms since the card was mounted",
        ms((env.clock_ns)() - t_boot)
    );
    Ok(())
}

/// What generation needs from the loading steps.
struct Gen<'a, F: FileSource> {
    cfg: &'a Config,
    model: &'a Model,
    tok: &'a Tokenizer,
    cache: &'a PageCache<F>,
    ids: &'a [u32],
    kernels: Kernels,
    ctx: usize,
    /// Card read rate measured while loading (bytes/s; 0 if unknown).
    card_rate: u64,
}

/// The boot-time profile: what the hardware does, to predict a token's time.
#[derive(Debug, Clone, Copy, Default)]
struct Profile {
    /// Bytes/s.
    memory: u64,
    /// Weight bytes/s through the matrix-vector kernels on all working cores.
    matvec: u64,
    /// Weight bytes per token.
    weights: u64,
}

fn rate(bytes: u64, ns: u64) -> u64 {
    if ns == 0 {
        0
    } else {
        (bytes as u128 * 1_000_000_000 / ns as u128) as u64
    }
}

/// Measure memory bandwidth (a copy) and matrix throughput (one feed-forward matrix, all cores).
fn profile<F: FileSource + Send, P: Parallel + ?Sized, Q: Parallel + ?Sized>(
    g: &Gen<'_, F>,
    pool: &P,
    env: &Env<'_, Q>,
) -> Profile {
    use inference::matvec::matvec;
    use inference::parallel::par_chunks;
    let mut p = Profile {
        weights: g.model.weights.matrices().map(|t| t.size).sum::<u64>()
            + g.model.weights.token_embd.row_bytes(),
        ..Default::default()
    };
    let size = ((env.heap_free)() / 8).min(8 << 20) as usize;
    let mut a: Vec<u8> = Vec::new();
    let mut b: Vec<u8> = Vec::new();
    if size >= 1 << 16 && a.try_reserve_exact(size).is_ok() && b.try_reserve_exact(size).is_ok() {
        a.resize(size, 1);
        b.resize(size, 0);
        let t0 = (env.clock_ns)();
        for _ in 0..4 {
            b.copy_from_slice(&a);
            a[0] = a[0].wrapping_add(b[size - 1]);
        }
        p.memory = rate(4 * size as u64, (env.clock_ns)() - t0);
    }
    drop((a, b));
    let w = &g.model.weights.layers[0].w_gate;
    let mut acts = inference::ActBuf::with_capacity(w.row_len() as usize);
    let x = alloc::vec![0.25f32; w.row_len() as usize];
    if acts.quantize(w.ty.act_format(), &x).is_ok() {
        if let Some(act) = acts.acts() {
            let mut out = alloc::vec![0f32; w.rows() as usize];
            let mut scratch: Vec<Vec<u8>> = (0..pool.workers())
                .map(|_| alloc::vec![0u8; 64 * 1024])
                .collect();
            let mut best = u64::MAX;
            for _ in 0..2 {
                let t0 = (env.clock_ns)();
                let r = par_chunks(pool, &mut out, 1, &mut scratch, |rows, part, s| {
                    matvec(&g.kernels, g.cache, w, rows, &act, part, s)
                });
                if r.is_err() {
                    return p;
                }
                best = best.min((env.clock_ns)() - t0);
            }
            p.matvec = rate(w.size, best);
        }
    }
    p
}

/// Generate with `pool`, stream the text, print the stats (per-core shares when measuring).
fn generate<F, P, Q>(
    g: &Gen<'_, F>,
    st: &mut RunState,
    pool: &P,
    measured: Option<&MeasuredPool<'_>>,
    env: &Env<'_, Q>,
    out: &mut W<'_>,
) -> Result<(), RunError>
where
    F: FileSource + Send,
    P: Parallel + ?Sized,
    Q: Parallel + ?Sized,
{
    let (cfg, cache, tok) = (g.cfg, g.cache, g.tok);
    let prof = profile(g, pool, env);
    let mut sampler = Sampler::new(cfg.sampler, g.model.config.vocab)
        .map_err(|e| RunError::Config(e.to_string()))?;
    let counter =
        InstructionCounter::new(env.instructions.map(|(f, b)| (f as &dyn Fn() -> u64, b)));
    let sample = || counter.sample();
    let engine = Engine {
        model: g.model,
        src: cache,
        pool,
        kernels: g.kernels,
        on_forward: Some(&sample),
    };
    let _ = writeln!(
        out,
        "prompt: {} tokens; generating up to {} (kernels {})",
        g.ids.len(),
        cfg.max_tokens,
        g.kernels.name
    );
    let _ = writeln!(out, "{BEGIN_OUTPUT}");
    let before = cache.stats();
    let mut at_first = None;
    let mut shares_first = None;
    counter.sample();
    let i0 = counter.total();
    let mut i_prefill = None;
    let mut dec = StreamDecoder::new();
    // Cache counters after each generated token (preallocated: no allocation while generating).
    let mut per_tok: Vec<crate::pagecache::CacheStats> =
        Vec::with_capacity(cfg.max_tokens.min(4096) + 1);
    // JSON mode: the output is one JSON value, and generation ends when it is complete.
    let mut json = if cfg.json {
        Some(JsonConstraint::from_tokenizer(tok).map_err(|e| RunError::Config(format!("json = true: {e}")))?)
    } else {
        None
    };
    let filter: Option<&mut dyn inference::generate::LogitsFilter> = match json.as_mut() {
        Some(j) => Some(j),
        None => None,
    };
    let report = engine
        .generate_filtered(
            st,
            &mut sampler,
            g.ids,
            cfg.max_tokens,
            &|t| tok.is_eog(t),
            &env.clock_ns,
            filter,
            &mut |t| {
                if at_first.is_none() {
                    counter.sample();
                    i_prefill = counter.total();
                    at_first = Some(cache.stats());
                    shares_first = measured.map(|m| m.shares());
                }
                if per_tok.len() < per_tok.capacity() {
                    per_tok.push(cache.stats());
                }
                dec.push(tok.token_to_piece(t), |s| out.0.write_bytes(s.as_bytes()));
                true
            },
        )
        .map_err(|e| RunError::Generate(e.to_string()))?;
    dec.finish(|s| out.0.write_bytes(s.as_bytes()));
    counter.sample();
    let i_end = counter.total();
    let _ = writeln!(out, "\n{END_OUTPUT}");

    let after = cache.stats();
    let gen = report.generated.max(1) as u64;
    // Per token: what the forward pass that produced it cost the cache (when the model streams).
    let streams = per_tok
        .first()
        .zip(per_tok.last())
        .is_some_and(|(a, b)| b.bytes_read > a.bytes_read);
    for (i, w) in per_tok
        .windows(2)
        .enumerate()
        .take(if streams { 64 } else { 0 })
    {
        let (a, b) = (w[0], w[1]);
        let _ = writeln!(
            out,
            "token {:>3}: read {} KiB, hits {}, misses {}, read ahead {} pages ({} waited for), I/O stall {} ms",
            i + 2,
            (b.bytes_read - a.bytes_read) >> 10,
            b.hits - a.hits,
            b.misses - a.misses,
            b.prefetched - a.prefetched,
            b.late - a.late,
            ms(b.stall - a.stall)
        );
    }
    let steps = (gen - 1).max(1);
    // Bytes per generated token: from the first generated token on (the prompt's passes excluded).
    let first = at_first.unwrap_or(after);
    let per_token = (after.bytes_read - first.bytes_read) / steps;
    let stop = match report.stop {
        Some(StopReason::EndToken(t)) => format!("end token {t}"),
        Some(StopReason::Stopped) if json.as_ref().is_some_and(|j| j.is_complete()) => "JSON value complete".into(),
        Some(StopReason::ContextFull) => format!(
            "context full ({} positions; raise ctx in {CONFIG_PATH})",
            g.ctx
        ),
        _ => "token limit".into(),
    };
    let _ = writeln!(
        out,
        "stats: prompt {} tokens in {} ms, generated {} tokens in {} ms ({} ms/token), first token after {} ms; stop: {stop}",
        report.prompt_tokens,
        ms(report.prefill_time),
        report.generated,
        ms(report.gen_time),
        ms(report.gen_time) / gen,
        ms(report.first_token_time)
    );
    let _ = writeln!(
        out,
        "stats: heap high-water {} KiB; page cache hits {}, misses {}, bytes read {} ({} per generated token after the first), refills {}, read ahead {} pages, I/O stall {} ms ({} per generated token after the first)",
        (env.heap_high)() >> 10,
        after.hits - before.hits,
        after.misses - before.misses,
        after.bytes_read - before.bytes_read,
        per_token,
        after.refills - before.refills,
        after.prefetched - before.prefetched,
        ms(after.stall - before.stall),
        ms((after.stall - first.stall) / steps)
    );
    // The profile's prediction against what happened.
    let streamed = cache.len().saturating_sub(cache.resident_bytes());
    let compute_ns = if prof.matvec > 0 {
        prof.weights as u128 * 1_000_000_000 / prof.matvec as u128
    } else {
        0
    } as u64;
    let io_ns = if g.card_rate > 0 {
        streamed as u128 * 1_000_000_000 / g.card_rate as u128
    } else {
        0
    } as u64;
    let achieved = if gen > 1 {
        (report.gen_time - (report.first_token_time - report.prefill_time)) / (gen - 1)
    } else {
        report.gen_time
    };
    let _ = writeln!(
        out,
        "profile: card {} MB/s, memory copy {} MB/s, matvec {} MB/s of weights on {} cores; per token {} MB of weights, {} MB from the card: compute {} ms + I/O {} ms = predicted {} ms (no overlap), achieved {} ms: {}",
        g.card_rate / 1_000_000,
        prof.memory / 1_000_000,
        prof.matvec / 1_000_000,
        pool.workers(),
        prof.weights / 1_000_000,
        streamed / 1_000_000,
        ms(compute_ns),
        ms(io_ns),
        ms(compute_ns + io_ns),
        ms(achieved),
        if io_ns > compute_ns { "I/O-bound" } else { "compute-bound" }
    );
    if let (Some(0), Some(0), Some(0)) = (i0, i_prefill, i_end) {
        let _ = writeln!(out, "stats: instructions: not counted (the PMU counts only under QEMU -icount or on hardware)");
    } else if let (Some(a), Some(b), Some(c)) = (i0, i_prefill, i_end) {
        let _ = writeln!(
            out,
            "stats: instructions: prompt {} ({} per prompt token), generation {} per generated token (after the first)",
            b - a,
            (b - a) / report.prompt_tokens.max(1) as u64,
            (c - b) / steps
        );
        if let (Some(m), Some(s0)) = (measured, shares_first) {
            // Per generated token, from the first generated token on.
            let s1 = m.shares();
            let total = c - b;
            let serial = total - (s1.in_jobs - s0.in_jobs);
            let critical = serial + (s1.critical - s0.critical);
            let cores: Vec<String> = (0..m.workers())
                .map(|w| {
                    let mine =
                        s1.per_worker[w] - s0.per_worker[w] + if w == 0 { serial } else { 0 };
                    format!("{}", mine / steps)
                })
                .collect();
            let _ = writeln!(
                out,
                "stats: {} cores: critical path {} per generated token ({}% of the one-core count), per core [{}]",
                m.workers(),
                critical / steps,
                critical * 100 / total.max(1),
                cores.join(", ")
            );
        }
    }
    Ok(())
}

/// A retired-instruction count extended to 64 bits: sampled after every forward pass (well under
/// one wrap of a 32-bit counter), adding the wrapping difference each time.
struct InstructionCounter<'a> {
    read: Option<(&'a dyn Fn() -> u64, u32)>,
    last: core::cell::Cell<u64>,
    total: core::cell::Cell<u64>,
}

impl<'a> InstructionCounter<'a> {
    fn new(read: Option<(&'a dyn Fn() -> u64, u32)>) -> Self {
        let last = read.map(|(f, _)| f()).unwrap_or(0);
        Self {
            read,
            last: core::cell::Cell::new(last),
            total: core::cell::Cell::new(0),
        }
    }
    fn sample(&self) {
        if let Some((f, bits)) = self.read {
            let now = f();
            let mask = if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            self.total
                .set(self.total.get() + (now.wrapping_sub(self.last.get()) & mask));
            self.last.set(now);
        }
    }
    fn total(&self) -> Option<u64> {
        self.read.map(|_| self.total.get())
    }
}
