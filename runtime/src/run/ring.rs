//! The run on a ring of boards (`ring = K/N`): after the model's header is read, the boards form
//! the ring ([`crate::ring`]), each loads only its window of layers, and then the head runs the
//! chat or the prompt as a board alone would, with the other layers round the ring, while every
//! other board serves its window until the head ends the run.

use super::profile::{matvec_rate, rate};
use super::{
    auto_batch, check_part, choose_kernels, load, ms, reader, say_pins, start_serving, Opened,
    RunError, HEAP_MARGIN,
};
use crate::card::Direct;
use crate::config::{Config, RingPlace};
use crate::console::{Console, Out};
use crate::iocore::{Served, Texted};
use crate::pagecache::{FileSource, PageCache};
use crate::platform::{Platform, RingLink};
use crate::promptcache;
use crate::ring::follower::{self, Assignment};
use crate::ring::head::{self, Head};
use crate::ring::plan::{self, Profile, Window};
use crate::ring::{Node, RingError};
use alloc::boxed::Box;
use alloc::string::String;
use core::cell::RefCell;
use core::fmt::Write;
use drivers::block::WriteBlocks;
use inference::model::{Model, Part, RunState};
use inference::storage::SliceStorage;
use inference::{Kernels, Storage};

/// What the ring steps need from the steps before.
pub(super) struct Before<'a, D: WriteBlocks + Send> {
    pub cfg: &'a Config,
    pub m: &'a Opened,
    pub direct: Direct<D>,
    pub cores: usize,
}

/// Form the ring, load this board's window, then run (the head) or serve (the others).
pub(super) fn run<D, P>(
    place: RingPlace,
    b: Before<'_, D>,
    con: &mut dyn Console,
    platform: &P,
) -> Result<(), RunError>
where
    D: WriteBlocks + Send,
    D::Error: Send,
    P: Platform + ?Sized,
{
    let mut out = Out(con);
    let (link, what) = platform
        .ring_link(place.board, b.cfg.ring_baud)
        .ok_or_else(|| {
            RunError::RingLink(
                "this board has no link UART (its board file has no [ring_uart])".into(),
            )
        })?
        .map_err(RunError::RingLink)?;
    let _ = writeln!(
        out,
        "ring: board {} of {}, {what}",
        place.board, place.boards
    );
    let mut found = super::selftest::Findings::default();
    let kernels = choose_kernels(b.cfg, platform, &mut found, &mut out)?;
    if b.cfg.selftest.as_deref() == Some("full") {
        let _ = writeln!(out, "{}", found.line(platform));
    }
    let key =
        promptcache::model_key(&b.m.gguf, &b.direct).map_err(|e| RunError::Model(e.into()))?;
    let mut profile = measure(&b.m.model, &b.direct, &kernels, b.cores, platform);
    profile.cache = b.cfg.cache_bytes.unwrap_or(u64::MAX);
    let _ = writeln!(
        out,
        "ring: this board: {} MiB free{}, matrices at {} MB/s, card at {} MB/s",
        profile.ram >> 20,
        cache_note(&profile),
        profile.compute / 1_000_000,
        profile.card / 1_000_000
    );
    let mut node = Node::new(place.board, place.boards, link, platform.clock());
    let n_layer = b.m.model.config.n_layer;
    let board = Board {
        b,
        kernels,
        platform,
    };
    if place.board == 1 {
        board.head(node, key, profile, &mut out)
    } else {
        let asg = follower::join(&mut node, key, profile, n_layer).map_err(RunError::Ring)?;
        board.follow(node, asg, &mut out)
    }
}

/// A board of the ring once its link is up: what the steps before made, its kernels, its
/// platform.
struct Board<'a, D: WriteBlocks + Send, P: Platform + ?Sized> {
    b: Before<'a, D>,
    kernels: Kernels,
    platform: &'a P,
}

/// This board's profile: free heap, the first layer's gate matrix read from the card (its read
/// rate) and multiplied on all working cores (the matrix rate).
fn measure<D, P>(
    model: &Model,
    direct: &Direct<D>,
    kernels: &Kernels,
    cores: usize,
    platform: &P,
) -> Profile
where
    D: WriteBlocks + Send,
    P: Platform + ?Sized,
{
    let ram = platform.heap_free();
    let mut w = model.weights.layers[0].w_gate.clone();
    // At most MEASURE_BYTES of its rows: the rates are per byte, and a large model's matrix may be
    // more than a 32-bit board can hold at once.
    let rows = (MEASURE_BYTES / w.row_bytes().max(1)).clamp(1, w.rows());
    (w.dims[1], w.dims[2], w.dims[3]) = (rows, 1, 1);
    w.size = rows * w.row_bytes();
    let mut bytes = alloc::vec![0u8; w.size as usize];
    let t0 = platform.now_ns();
    let read = direct.read_at(w.offset, &mut bytes).is_ok();
    let card = if read {
        rate(w.size, platform.now_ns() - t0)
    } else {
        0
    };
    w.offset = 0;
    let compute = matvec_rate(
        &w,
        &SliceStorage::new(&bytes),
        kernels,
        platform.pool(),
        platform,
    );
    Profile {
        ram,
        cache: u64::MAX,
        compute,
        card,
        cores: cores as u8,
    }
}

/// Most bytes of a matrix [`measure`] reads and multiplies.
const MEASURE_BYTES: u64 = 64 << 20;

/// The cache's capacity: what is left of the heap (less the margin), at most `cache = ...`.
fn capacity<P: Platform + ?Sized>(cfg: &Config, size: u64, platform: &P) -> u64 {
    let auto = platform.heap_free().saturating_sub(HEAP_MARGIN);
    cfg.cache_bytes.unwrap_or(auto).min(auto).min(size)
}

/// The page cache a ring board reads its window through.
type Cache<'s> = PageCache<Box<dyn FileSource<Error = String> + Send + 's>>;

/// The page cache over the card for `part`: its tensors pinned as far as RAM goes, those that
/// save the most card bytes per byte of RAM first (the memory line says what), the rest streamed
/// with read-ahead as on a board alone (a core serving the card when it cannot queue reads), the
/// line served (`tick`) while they load, the weights checked; then `then` with it.
fn with_part<D, P, R>(
    direct: Direct<D>,
    (cfg, model, part, cores): (&Config, &Model, &Part, usize),
    tick: &dyn Fn(),
    platform: &P,
    out: &mut Out<'_>,
    then: impl FnOnce(&Cache<'_>, &mut Out<'_>) -> Result<R, RunError>,
) -> Result<R, RunError>
where
    D: WriteBlocks + Send,
    D::Error: Send,
    P: Platform + ?Sized,
{
    let size = direct.len();
    let wanted = super::spec::pin_order(cfg, (model, part), None)?;
    let cap = capacity(cfg, size, platform);
    let streams = cap < model.weights.bytes_of(part);
    // Declaration order is drop order reversed: the cache goes first (waiting for the reads in
    // flight), then the serving core stops, then the shared source goes.
    let (shared, plain) = reader(direct.into_inner(), cfg, streams, cores, platform);
    let serve = || shared.as_ref().is_some_and(|s| s.serve_one());
    let _serving = start_serving(&shared, &serve, cores, platform, out);
    let src: Box<dyn FileSource<Error = String> + Send + '_> = match (&shared, plain) {
        (Some(s), _) => Box::new(Served::new(s)),
        (None, Some(c)) => Box::new(Texted(c)),
        (None, None) => unreachable!("reader() returns one of the two"),
    };
    let scope = super::spec::pin_scope(cfg, model, part);
    let (a, b) = (part.layers.start, part.layers.end);
    let memory = format_args!("memory: page cache {} MiB for layers {a}..{b}", cap >> 20);
    let src_shape = (src.len(), src.queue_depth());
    say_pins(&memory, (src_shape, cap, cfg), (scope, &wanted), out)?;
    let (cache, _) = load(src, cfg, cap, &wanted, tick, platform, out)?;
    cache.set_schedule(model.weights.read_order_of(part), cores);
    check_part(model, &cache, part, platform, out)?;
    then(&cache, out)
}

/// What of speculation a ring's head does: lookup, and a self-draft within its own layers (the
/// checking pass goes round the ring, every row coming back); no draft model.
fn say_speculation(cfg: &Config, part: &Part, out: &mut Out<'_>) {
    let s = &cfg.spec;
    let own = s.self_draft.min(part.layers.end);
    let _ = writeln!(
        out,
        "ring: the head speculates{}{}{}",
        if s.lookup > 0 { ", lookup" } else { "" },
        match own {
            0 => String::new(),
            1 => ", its first layer as a self-draft".into(),
            n => alloc::format!(", its first {n} layers as a self-draft"),
        },
        if s.draft.is_some() {
            " (a draft model is not used on a ring)"
        } else {
            ""
        }
    );
}

/// `, page cache at most N MiB` when a board's `cache =` setting bounds it, else nothing.
fn cache_note(p: &Profile) -> String {
    match p.cache {
        u64::MAX => String::new(),
        c => alloc::format!(", page cache at most {} MiB", c >> 20),
    }
}

/// Each board's window and prediction, on the head's console.
fn say_split(windows: &[Window], profiles: &[Profile], out: &mut Out<'_>) {
    let total: u64 = windows.iter().map(|w| w.ns).sum();
    for (i, (w, p)) in windows.iter().zip(profiles).enumerate() {
        let _ = writeln!(
            out,
            "ring: board {} runs {w} ({} MiB RAM{}, matrices at {} MB/s)",
            i + 1,
            p.ram >> 20,
            cache_note(p),
            p.compute / 1_000_000
        );
    }
    let _ = writeln!(
        out,
        "ring: predicted {} ms per token round the ring (the links' time not counted)",
        ms(total)
    );
}

impl<D, P> Board<'_, D, P>
where
    D: WriteBlocks + Send,
    D::Error: Send,
    P: Platform + ?Sized,
{
    /// The head: gather the boards, split the layers, load its own window, wait for the others,
    /// then chat or generate with the other layers round the ring. Whatever happens, the other
    /// boards are told to stop at the end.
    fn head(
        self,
        node: Node<RingLink>,
        key: u64,
        mine: Profile,
        out: &mut Out<'_>,
    ) -> Result<(), RunError> {
        let (b, kernels, platform) = (self.b, self.kernels, self.platform);
        let (cfg, m) = (b.cfg, b.m);
        let node = RefCell::new(node);
        let r = match split(&node, key, mine, &b, out) {
            Ok((part, ctx, batch)) => {
                let tick = || node.borrow_mut().tick();
                let what = (cfg, &m.model, &part, b.cores);
                with_part(b.direct, what, &tick, platform, out, |cache, out| {
                    let mut st = RunState::for_part(&m.model, ctx, b.cores, batch, &part)
                        .map_err(RunError::Buffers)?;
                    if cfg.spec.on() {
                        let rows = cfg.spec.max_guesses() + 1;
                        st.keep_row_logits(&m.model, rows)
                            .map_err(RunError::Buffers)?;
                        say_speculation(cfg, &part, out);
                    }
                    await_ready(&node, out)?;
                    let head = Head::new(&node, part.clone());
                    let model_run = super::ModelRun {
                        cfg,
                        m,
                        kv_file: None,
                        kernels,
                        ctx,
                        card_rate: 0,
                        remote: Some(&head),
                    };
                    model_run
                        .run(cache, (&mut st, Default::default()), platform, out)
                        .map(|_| ())
                })
            }
            Err(e) => Err(e),
        };
        node.borrow_mut().stop_all();
        let _ = writeln!(out, "{}", node.borrow().stats_text());
        r
    }

    /// A board after the head: load the window it was given, say so, serve it until the end.
    fn follow(
        self,
        node: Node<RingLink>,
        asg: Assignment,
        out: &mut Out<'_>,
    ) -> Result<(), RunError> {
        let (b, kernels, platform) = (self.b, self.kernels, self.platform);
        let (cfg, model) = (b.cfg, &b.m.model);
        let part = Part {
            layers: asg.layers.clone(),
            ends: false,
        };
        let _ = writeln!(
            out,
            "ring: the head gave this board layers {}..{} (context {}, batches of {})",
            part.layers.start, part.layers.end, asg.ctx, asg.batch
        );
        let node = RefCell::new(node);
        let ready = core::cell::Cell::new(false);
        let served = RunState::for_part(model, asg.ctx, b.cores, asg.batch, &part)
            .map_err(RunError::Buffers)
            .and_then(|mut st| {
                let tick = || node.borrow_mut().tick();
                let what = (cfg, model, &part, b.cores);
                with_part(b.direct, what, &tick, platform, out, |cache, out| {
                    let want = model.weights.bytes_of(&part);
                    let pinned = cache.resident_bytes().min(want);
                    follower::ready(&mut node.borrow_mut(), pinned, want - pinned)
                        .map_err(RunError::Ring)?;
                    ready.set(true);
                    let _ = writeln!(
                        out,
                        "ring: serving layers {}..{}",
                        part.layers.start, part.layers.end
                    );
                    let run = (cache, platform.pool(), &kernels);
                    Ok(follower::serve(&node, model, &mut st, run, &part))
                })
            });
        // A board that cannot load its window tells the head why, which would otherwise wait
        // for its ready for as long as loading may take.
        let served = served.inspect_err(|e| {
            if !ready.get() {
                follower::give_up(&mut node.borrow_mut(), e);
            }
        })?;
        let _ = writeln!(out, "{}", node.borrow().stats_text());
        match served {
            Ok(s) => {
                let _ = writeln!(
                    out,
                    "ring: the head ended the run ({} batches served, {} KiB of hidden states taken)",
                    s.batches,
                    s.bytes >> 10
                );
                Ok(())
            }
            Err(RingError::Stopped) => Ok(()),
            Err(e) => Err(RunError::Ring(e)),
        }
    }
}

/// The head's formation, first part: the boards' hellos and the split. Returns its own part,
/// the context and the prompt batch.
fn split<D: WriteBlocks + Send>(
    node: &RefCell<Node<RingLink>>,
    key: u64,
    mine: Profile,
    b: &Before<'_, D>,
    out: &mut Out<'_>,
) -> Result<(Part, usize, usize), RunError> {
    let (cfg, model) = (b.cfg, &b.m.model);
    let profiles = head::gather(&mut node.borrow_mut(), key, mine).map_err(RunError::Ring)?;
    let ctx = cfg.ctx.min(model.config.train_ctx);
    let least = profiles.iter().map(|p| p.ram).min().unwrap_or(0);
    let batch = cfg.batch.unwrap_or_else(|| auto_batch(model, ctx, least));
    let shape = plan::shape(model, ctx, batch, cfg.page_bytes, b.cores, HEAP_MARGIN);
    let windows = head::assign(&mut node.borrow_mut(), &shape, &profiles, ctx, batch)
        .map_err(RunError::Ring)?;
    say_split(&windows, &profiles, out);
    let part = Part {
        layers: windows[0].layers.clone(),
        ends: true,
    };
    Ok((part, ctx, batch))
}

/// The head's formation, last part: every other board has loaded its window.
fn await_ready(node: &RefCell<Node<RingLink>>, out: &mut Out<'_>) -> Result<(), RunError> {
    let readies = head::await_ready(&mut node.borrow_mut()).map_err(RunError::Ring)?;
    for (i, (pinned, streamed)) in readies.iter().enumerate() {
        let _ = writeln!(
            out,
            "ring: board {} ready ({} MiB pinned, {} MiB streamed)",
            i + 2,
            pinned >> 20,
            streamed >> 20
        );
    }
    Ok(())
}
