//! `--board-sim zero2w|pi4 --mem SIZE`: the run as a board with that much RAM would make it, on
//! a clock that board would show. The weights are read through the kernel's page cache (resident
//! prefix, read-ahead) sized as the board sizes it, from a file whose bytes read are counted; the
//! clock advances by what each step would cost there: the card bytes a step read at the card's
//! rate, and the arithmetic at the board's rate of weight bytes through its cores. Speculation's
//! planner runs on that clock, so it chooses as it would on the board, and the time per token is
//! the board's predicted one. The assumptions are in [`BOARDS`]; the card and the page cache are
//! the ones the kernel runs.

use crate::simdraft::{self, SimDraft};
use crate::spec::DraftFile;
use inference::generate::{Engine, GenError};
use inference::model::{Model, Part, RunState, Tree};
use inference::parallel::SingleThread;
use inference::sampler::{Sampler, SamplerConfig};
use inference::speculate::resident::DraftPlan;
use inference::speculate::{
    draft_state, Draft, DraftShape, Drafts, Lookup, PassCost, SpecSettings, SpecStats, Speculation,
};
use inference::tokenizer::{StreamDecoder, Tokenizer};
use inference::{Gguf, Kernels, Storage};
use runtime::pagecache::hostfile::HostFile;
use runtime::pagecache::order;
use runtime::pagecache::{FileSource, Options, PageCache, Policy, DEFAULT_READAHEAD};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A board's costs.
#[derive(Debug, Clone, Copy)]
pub struct Board {
    pub name: &'static str,
    /// What the figures stand for.
    pub what: &'static str,
    /// Card bytes per second.
    pub card: f64,
    /// Weight bytes per second through the matrix kernels on all cores (one token).
    pub matvec: f64,
    /// What each token past the first adds to a pass, as a share of a one-token pass (the
    /// weights are decoded once for all the tokens of a batch).
    pub beta: f64,
}

/// The boards simulated. The card rates are the slots' bus ceilings in their best mode (what
/// `results/card.md` measures in the simulators: a page at 0.60x and 0.26x of Default Speed's
/// 12.5 MB/s); the compute rates are assumptions for Q4_K weights on four cores, stated here
/// because no board was at hand: they matter little while the card dominates, as it does in
/// every streamed case.
pub const BOARDS: [Board; 2] = [
    Board {
        name: "zero2w",
        what: "Pi Zero 2 W: SD through sdhost in High Speed at 50 MHz, 4-bit (25 MB/s); 4 Cortex-A53 at 1 GHz, 0.5 GB/s of weights",
        card: 25e6,
        matvec: 0.5e9,
        beta: 0.35,
    },
    Board {
        name: "pi4",
        what: "Pi 4: SD in UHS-I DDR50 (50 MB/s); 4 Cortex-A72 at 1.5 GHz, 1.5 GB/s of weights",
        card: 50e6,
        matvec: 1.5e9,
        beta: 0.35,
    },
];

/// The page cache's policy, as the kernel's.
const OPTS: Options = Options {
    policy: Policy::ResidentPrefix,
    readahead: DEFAULT_READAHEAD,
};

/// The board's clock: nanoseconds charged so far.
struct Clock {
    board: Board,
    ns: AtomicU64,
    /// Card bytes read so far (the file's counter), and up to where they were charged.
    read: Arc<AtomicU64>,
    charged: AtomicU64,
    /// Target weight bytes per pass.
    weights: u64,
    /// Card bytes a pass reads of what the page cache does not pin.
    streamed: u64,
    /// Split of the time charged: (I/O, compute).
    split: [AtomicU64; 2],
}

impl Clock {
    fn now(&self) -> u64 {
        self.ns.load(Ordering::Relaxed)
    }

    fn add(&self, what: usize, ns: f64) {
        self.ns.fetch_add(ns as u64, Ordering::Relaxed);
        self.split[what].fetch_add(ns as u64, Ordering::Relaxed);
    }

    /// The card bytes read since the last charge.
    fn io(&self) {
        let now = self.read.load(Ordering::Relaxed);
        let before = self.charged.swap(now, Ordering::Relaxed);
        self.add(0, (now - before) as f64 / self.board.card * 1e9);
    }

    /// A target pass of `b` tokens through `layers` of its `n_layer` layers (a self-draft's
    /// guess runs the first layers and the head).
    fn pass(&self, b: usize, share: f64) {
        self.io();
        let one = self.weights as f64 * share / self.board.matvec * 1e9;
        self.add(1, one * (1.0 + (b.max(1) - 1) as f64 * self.board.beta));
    }

    /// A draft of `tokens` passes over `bytes` of weights each.
    fn draft(&self, tokens: usize, bytes: u64) {
        self.io();
        self.add(1, tokens as f64 * bytes as f64 / self.board.matvec * 1e9);
    }
}

/// A draft source charged on the clock: each guess a pass over `bytes` of its weights.
struct Charged<'c, D: Draft> {
    inner: D,
    clock: &'c Clock,
    bytes: u64,
}

impl<D: Draft> Draft for Charged<'_, D> {
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        let n = self.inner.propose(context, out)?;
        Ok(self.charge(n))
    }

    fn propose_tree(&mut self, context: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        let passes = self.inner.propose_tree(context, tree)?;
        Ok(self.charge(passes))
    }
}

impl<D: Draft> Charged<'_, D> {
    /// Charge `passes` passes of the draft (none: only the I/O caught up); returns them.
    fn charge(&self, passes: usize) -> usize {
        if self.bytes > 0 && passes > 0 {
            self.clock.draft(passes, self.bytes);
        } else {
            self.clock.io();
        }
        passes
    }
}

/// Heap a board of `mem` bytes leaves after the kernel image, its stacks and the allocator's
/// reserve (what the QEMU boots print as heap free, less the run's margin).
fn heap_for(mem: u64) -> u64 {
    mem.saturating_sub(8 << 20)
}

/// Everything a simulated run needs from the command line.
pub struct SimArgs<'a> {
    pub board: &'a str,
    pub mem: u64,
    pub prompt: &'a str,
    pub n: usize,
    pub ctx: usize,
    pub batch: usize,
    pub sampler: SamplerConfig,
    pub spec: &'a SpecSettings,
}

/// Run the prompt as board `a.board` with `a.mem` of RAM would; print the text on stdout and the
/// board's figures on stderr.
pub fn run(path: &Path, a: &SimArgs<'_>) -> Result<(), String> {
    let board = *BOARDS
        .iter()
        .find(|b| b.name == a.board)
        .ok_or(format!("--board-sim {}: expected zero2w or pi4", a.board))?;
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let file = HostFile::open(path, true).map_err(|x| format!("{}: {x}", path.display()))?;
    let read = file.counter();
    let len = file.len();
    // The header and tokenizer, read once before the cache is sized (as the kernel does).
    let plain = inference::storage::FileStorage::open(path).map_err(|x| e(&x))?;
    let g = Gguf::open(&plain).map_err(|x| e(&x))?;
    let model = Model::load(&g, &plain).map_err(|x| e(&x))?;
    let tok = Tokenizer::from_gguf(&g, &plain).map_err(|x| e(&x))?;
    let draft = match &a.spec.draft {
        Some(name) if a.spec.on() => Some(DraftFile::open(name, &tok)?),
        _ => None,
    };
    let ctx = a.ctx.min(model.config.train_ctx);
    let whole = Part::whole(model.config.n_layer);
    let (kv, bufs) = RunState::size_of(&model, ctx, 1, a.batch, &whole).map_err(|x| e(&x))?;
    let used = kv + bufs + spec_bytes(a, &model) + runtime::run::HEAP_MARGIN;
    let heap = heap_for(a.mem).saturating_sub(used);
    let (draft, ram) = draft_ram(a, (draft, heap), (len, ctx));
    let capacity = heap.saturating_sub(ram.map_or(0, |d| d.bytes())).min(len);
    if capacity < 4 << 20 {
        return Err(format!(
            "--mem {} MiB: {} MiB left for the page cache",
            a.mem >> 20,
            capacity >> 20
        ));
    }
    // Pinned as the kernel pins: by card bytes saved per byte of RAM, a self-draft's first.
    let own = if a.spec.on() { a.spec.self_draft } else { 0 };
    let wanted = order::wanted(&model, &whole, own, Some(len)).map_err(|x| e(&x))?;
    let cache = PageCache::for_ranges(file, capacity, 256 << 10, OPTS, &wanted, &mut |_, _| {})
        .map_err(|x| e(&x))?;
    let sim = match (&draft, ram) {
        (Some(d), Some(r)) => Some(SimDraft::load(d, r, read.clone())?),
        _ => None,
    };
    cache.set_schedule(model.weights.read_order(), 1);
    let clock = Clock {
        board,
        ns: AtomicU64::new(0),
        charged: AtomicU64::new(read.load(Ordering::Relaxed)),
        read,
        weights: model.weights.bytes_of(&whole),
        streamed: order::PinScope::new(&model, &whole, own)
            .streamed_per_token(&|o, n| cache.pinned_within(o, n)),
        split: [AtomicU64::new(0), AtomicU64::new(0)],
    };
    let n_layer = model.config.n_layer;
    let on_pass = |b: usize, layers: usize| clock.pass(b, layers as f64 / n_layer as f64);
    let mut engine = Engine::new(&model, &cache, &SingleThread, Kernels::best());
    engine.on_forward = Some(&on_pass);
    let ids = tok.encode(a.prompt, true, true).map_err(|x| e(&x))?;
    let mut st = RunState::with_batch(&model, ctx, 1, a.batch).map_err(|x| e(&x))?;
    let mut sampler = Sampler::new(a.sampler, model.config.vocab).map_err(|x| e(&x))?;
    let mut out = std::io::stdout().lock();
    let mut dec = StreamDecoder::new();
    let mut marks: Vec<(u64, u64, [u64; 2])> = vec![];
    let mut on_token = |t| {
        clock.io();
        let split = [0, 1].map(|i| clock.split[i].load(Ordering::Relaxed));
        marks.push((clock.now(), clock.charged.load(Ordering::Relaxed), split));
        dec.push(tok.token_to_piece(t), |s| {
            let _ = out.write_all(s.as_bytes());
        });
        true
    };
    let now = || clock.now();
    let is_end = |t| tok.is_eog(t);
    let job = (
        &ids[..],
        a.n,
        &is_end as &dyn Fn(u32) -> bool,
        &now as &dyn Fn() -> u64,
    );
    let stats = match a.spec.on() {
        true => {
            let parts = (&model, &clock, sim.as_ref());
            Some(speculate(
                parts,
                a.spec,
                &engine,
                (&mut st, &mut sampler),
                job,
                &mut on_token,
            )?)
        }
        false => {
            let (p, n, is_end, now) = job;
            engine
                .generate(&mut st, &mut sampler, p, n, is_end, now, &mut on_token)
                .map_err(|x| e(&x))?;
            None
        }
    };
    dec.finish(|s| {
        let _ = out.write_all(s.as_bytes());
    });
    let _ = writeln!(out);
    report(&board, (capacity, len), &marks, stats)
}

/// The draft model's share of `heap` (what the target's page cache and it share) as the kernel
/// sizes it, and whether it is loaded: with speculate = auto, a draft that would cost more card
/// reads per token than its guesses could save stays on the card.
fn draft_ram(
    a: &SimArgs<'_>,
    (draft, heap): (Option<DraftFile>, u64),
    (len, ctx): (u64, usize),
) -> (Option<DraftFile>, Option<DraftPlan>) {
    let Some(d) = draft else {
        return (None, None);
    };
    let state = simdraft::state_bytes(&d.model, ctx, a.batch);
    let ram = simdraft::plan(&d, a.spec, heap, state, ctx);
    let (without, with) = ram.streamed(heap, len);
    let auto = a.spec.mode == inference::speculate::SpecMode::Auto;
    if auto && !inference::speculate::draft_model_pays(without, with, a.spec.max_guesses()) {
        eprintln!(
            "board-sim: the draft model not loaded: a pass would read {} MB instead of {} MB",
            with / 1_000_000,
            without / 1_000_000
        );
        return (None, None);
    }
    let m = &d.model;
    eprintln!(
        "board-sim: draft model: layers {} MiB, head {} of {} tokens, {} MiB in all with its run state; its token embedding read from the card a row a token",
        inference::speculate::resident::layer_bytes(m) >> 20,
        ram.rows,
        m.config.vocab,
        ram.bytes() >> 20
    );
    (Some(d), Some(ram))
}

/// Bytes speculation takes from a board's heap beside a draft model ([`draft_ram`]), as the
/// kernel counts them: the rows of logits a check keeps (none for greedy:
/// [`SpecSettings::rows_kept`]; a self-draft runs in the target's state).
fn spec_bytes(a: &SimArgs<'_>, model: &Model) -> u64 {
    match a.spec.rows_kept(a.sampler.plain_greedy(), false) {
        0 => 0,
        rows => RunState::row_logits_bytes(model, rows),
    }
}

type Job<'j> = (
    &'j [u32],
    usize,
    &'j dyn Fn(u32) -> bool,
    &'j dyn Fn() -> u64,
);

/// The speculative run: the sources charged on the clock, the planner on the board's costs.
fn speculate<S: Storage + Sync>(
    (model, clock, draft): (&Model, &Clock, Option<&SimDraft<'_>>),
    s: &SpecSettings,
    engine: &Engine<'_, S, SingleThread>,
    (st, sampler): (&mut RunState, &mut Sampler),
    (prompt, n, is_end, now): Job<'_>,
    on_token: &mut dyn FnMut(u32) -> bool,
) -> Result<SpecStats, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let k = engine.kernels;
    let shape = DraftShape {
        ctx: st.ctx(),
        batch: st.batch(),
        max_draft: s.max_guesses(),
    };
    let mut sources: Vec<Box<dyn Draft + '_>> = vec![];
    if s.lookup > 0 {
        let inner = Lookup {
            max_n: s.lookup,
            max_draft: s.max_guesses(),
        };
        sources.push(Box::new(Charged {
            inner,
            clock,
            bytes: 0,
        }));
    }
    if let Some(d) = draft {
        let st = draft_state(d.model, shape, 1).map_err(|x| e(&x))?;
        let inner = d.draft((shape, k), st)?;
        sources.push(Box::new(Charged {
            inner,
            clock,
            bytes: d.step_bytes(),
        }));
    }
    s.check_self_draft(model.config.n_layer)?;
    let mut all = Drafts(sources);
    // The kernel's prior from its boot profile: the card time of the streamed part and the
    // arithmetic of one token; the planner measures the rest on the clock.
    let one = clock.weights as f64 / clock.board.matvec * 1e9;
    let prior = PassCost {
        fixed: one * (1.0 - clock.board.beta) + clock.streamed as f64 / clock.board.card * 1e9,
        per_token: one * clock.board.beta,
    };
    // A self-draft's guess: its layers and head, read from the card where not resident.
    let (own, own_streamed) =
        inference::speculate::self_draft_bytes(model, s.self_draft, engine.src);
    let guess = match s.self_draft {
        0 => 0.0,
        _ => (own_streamed as f64 / clock.board.card + own as f64 / clock.board.matvec) * 1e9,
    };
    let plan = s.planner(Some(prior)).with_draft_prior(guess);
    let mut spec = Speculation::new(&mut all, plan);
    spec.self_draft = s.self_draft;
    let (_, stats) = engine
        .generate_speculative(
            st, sampler, prompt, n, &mut spec, is_end, now, None, on_token,
        )
        .map_err(|x| e(&x))?;
    Ok(stats)
}

/// `board-sim zero2w: ... per generated token after the first: N card bytes, T ms (I/O, compute)`
/// and the speculation line.
fn report(
    board: &Board,
    (capacity, len): (u64, u64),
    marks: &[(u64, u64, [u64; 2])],
    stats: Option<SpecStats>,
) -> Result<(), String> {
    let (Some(first), Some(last)) = (marks.first(), marks.last()) else {
        return Err("nothing generated".into());
    };
    let steps = (marks.len().max(2) - 1) as f64;
    let ms = |ns: u64| ns as f64 / 1e6 / steps;
    eprintln!("board-sim: {}", board.what);
    eprintln!(
        "board-sim: page cache {} MiB of a {} MiB model; per generated token after the first: {} card bytes, {:.0} ms (I/O {:.0} ms, compute {:.0} ms); {} tokens",
        capacity >> 20,
        len >> 20,
        ((last.1 - first.1) as f64 / steps) as u64,
        ms(last.0 - first.0),
        ms(last.2[0] - first.2[0]),
        ms(last.2[1] - first.2[1]),
        marks.len()
    );
    if let Some(s) = stats {
        eprintln!("speculation: {s}");
    }
    Ok(())
}

/// The report is for tokens 2 on; one generated token gives no figure.
pub fn figures_need(n: usize) -> Result<(), String> {
    if n < 2 {
        return Err("--board-sim: -n must be at least 2".into());
    }
    Ok(())
}
