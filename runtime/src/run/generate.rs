//! Generate mode: the prompt from `lmboot.txt`, the tokens streamed between the output markers,
//! then the stats: time, page cache and I/O per token, the profile's prediction against what
//! happened, and instruction counts (per core when measuring a split).

use super::measure::{InstructionCounter, MeasuredPool, Shares};
use super::profile::{profile, time_ns, Profile};
use super::{ms, RunError, BEGIN_OUTPUT, CONFIG_PATH, END_OUTPUT};
use crate::config::Config;
use crate::console::Out;
use crate::pagecache::order::PinReport;
use crate::pagecache::{CacheStats, FileSource, PageCache};
use crate::platform::{CardBus, Platform};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use drivers::sd::BusMode;
use inference::generate::{Engine, GenReport, LogitsFilter, Remote, StopReason};
use inference::json::JsonConstraint;
use inference::model::{Model, Part, RunState};
use inference::parallel::Parallel;
use inference::sampler::Sampler;
use inference::speculate::{self_draft_bytes, PassCost, SpecStats};
use inference::tokenizer::{StreamDecoder, Tokenizer};
use inference::Kernels;

/// What generation needs from the loading steps.
pub(super) struct Gen<'a, F: FileSource> {
    pub cfg: &'a Config,
    pub model: &'a Model,
    pub tok: &'a Tokenizer,
    pub cache: &'a PageCache<F>,
    pub kernels: Kernels,
    pub ctx: usize,
    /// Card read rate measured while loading (bytes/s; 0 if unknown).
    pub card_rate: u64,
    /// The other boards of a ring, when this board is its head.
    pub remote: Option<&'a dyn Remote>,
}

/// Tokenize the prompt and generate on the board's pool, or on a [`MeasuredPool`] for
/// `measure_cores`.
pub(super) fn run<F: FileSource + Send, Q: Platform + ?Sized>(
    g: &Gen<'_, F>,
    (st, spec): (&mut RunState, super::spec::SpecParts<'_>),
    platform: &Q,
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let prompt = g.cfg.prompt.as_deref().ok_or(RunError::NoPrompt)?;
    let ids = g
        .tok
        .encode(prompt, true, g.cfg.special)
        .map_err(RunError::Prompt)?;
    match (g.cfg.measure_cores, platform.instruction_counter()) {
        (Some(n), Some((read, bits))) => {
            let pool = MeasuredPool::new(n, &read, bits);
            let _ = writeln!(
                out,
                "measuring: the {n}-core split runs on one core, each core's share counted"
            );
            generate(g, &ids, (st, spec), &pool, Some(&pool), platform, out)
        }
        (Some(_), None) => Err(RunError::NoInstructionCounter),
        (None, _) => generate(g, &ids, (st, spec), platform.pool(), None, platform, out),
    }
}

/// Counters sampled along the way: instructions at the start, after the prompt and at the end;
/// the cache after the prompt and after each generated token; per-core shares after the prompt.
struct Marks {
    i0: Option<u64>,
    i_prefill: Option<u64>,
    i_end: Option<u64>,
    before: CacheStats,
    at_first: Option<CacheStats>,
    per_tok: Vec<CacheStats>,
    shares_start: Option<Shares>,
    shares_first: Option<Shares>,
}

impl Marks {
    /// The marks at the start, with room for `tokens` per-token samples (allocated now: nothing
    /// is allocated while generating).
    fn start<F: FileSource>(
        counter: &InstructionCounter<'_>,
        cache: &PageCache<F>,
        measured: Option<&MeasuredPool<'_>>,
        tokens: usize,
    ) -> Self {
        counter.sample();
        Marks {
            i0: counter.total(),
            i_prefill: None,
            i_end: None,
            before: cache.stats(),
            at_first: None,
            per_tok: Vec::with_capacity(tokens.min(4096) + 1),
            shares_start: measured.map(|m| m.shares()),
            shares_first: None,
        }
    }

    /// A token was generated: on the first, the prompt's end; after each, the cache.
    fn token<F: FileSource>(
        &mut self,
        counter: &InstructionCounter<'_>,
        cache: &PageCache<F>,
        measured: Option<&MeasuredPool<'_>>,
    ) {
        if self.at_first.is_none() {
            counter.sample();
            self.i_prefill = counter.total();
            self.at_first = Some(cache.stats());
            self.shares_first = measured.map(|m| m.shares());
        }
        if self.per_tok.len() < self.per_tok.capacity() {
            self.per_tok.push(cache.stats());
        }
    }
}

/// Generate with `pool`, stream the text, print the stats (per-core shares when measuring).
fn generate<F, P, Q>(
    g: &Gen<'_, F>,
    ids: &[u32],
    (st, spec): (&mut RunState, super::spec::SpecParts<'_>),
    pool: &P,
    measured: Option<&MeasuredPool<'_>>,
    platform: &Q,
    out: &mut Out<'_>,
) -> Result<(), RunError>
where
    F: FileSource + Send,
    P: Parallel + ?Sized,
    Q: Platform + ?Sized,
{
    let (cfg, cache, tok) = (g.cfg, g.cache, g.tok);
    let prof = profile((g.model, cache, &g.kernels), pool, platform);
    let mut sampler = Sampler::new(cfg.sampler, g.model.config.vocab).map_err(RunError::Sampler)?;
    let read = platform.instruction_counter();
    let counter = InstructionCounter::new(read.as_ref().map(|(f, b)| (f as &dyn Fn() -> u64, *b)));
    let clock = platform.clock();
    let sample = |_, _| counter.sample();
    let engine = Engine {
        model: g.model,
        src: cache,
        pool,
        kernels: g.kernels,
        on_forward: Some(&sample),
        remote: g.remote,
    };
    let _ = writeln!(
        out,
        "prompt: {} tokens; generating up to {} (kernels {})",
        ids.len(),
        cfg.max_tokens,
        g.kernels.name
    );
    let _ = writeln!(out, "{BEGIN_OUTPUT}");
    let mut marks = Marks::start(&counter, cache, measured, cfg.max_tokens);
    let mut dec = StreamDecoder::new();
    // JSON mode: the output is one JSON value, and generation ends when it is complete.
    let mut json = match cfg.json {
        true => Some(JsonConstraint::from_tokenizer(tok).map_err(RunError::Json)?),
        false => None,
    };
    let filter = json.as_mut().map(|j| j as &mut dyn LogitsFilter);
    let mut on_token = |t| {
        marks.token(&counter, cache, measured);
        dec.push(tok.token_to_piece(t), |s| out.0.write_bytes(s.as_bytes()));
        true
    };
    let is_end = |t| tok.is_eog(t);
    // What a pass reads of what is not pinned (an untied embedding: one row).
    let part = g
        .remote
        .map_or(Part::whole(g.model.config.n_layer), |r| r.part().clone());
    let streamed = super::spec::pin_scope(cfg, g.model, &part)
        .streamed_per_token(&|o, n| cache.pinned_within(o, n));
    let compute = time_ns(prof.weights, prof.matvec) as f64;
    // A pass pays the streamed bytes' card time and half the arithmetic (decoding the weights),
    // each token the other half, until the planner has measured them.
    let prior = PassCost {
        fixed: time_ns(streamed, g.card_rate) as f64 + compute / 2.0,
        per_token: compute / 2.0,
    };
    // A self-draft's guess: its layers and head, their card time where not resident.
    let (own, own_streamed) = self_draft_bytes(g.model, cfg.spec.self_draft, cache);
    let guess = match cfg.spec.self_draft {
        0 => 0.0,
        _ => (time_ns(own_streamed, g.card_rate) + time_ns(own, prof.matvec)) as f64,
    };
    let mut spec = super::spec::speculator(cfg, g.remote, (pool, g.kernels), spec, Some(prior))
        .map_err(RunError::Generate)?
        .map(|s| s.with_draft_prior(guess));
    let (report, spec_stats) = match spec.as_mut() {
        Some(s) => {
            let (job, stop) = ((ids, cfg.max_tokens), (&is_end as _, &clock as _));
            let (r, stats) = s
                .generate(&engine, st, &mut sampler, job, stop, filter, &mut on_token)
                .map_err(RunError::Generate)?;
            (r, Some(stats))
        }
        None => {
            let r = engine
                .generate_filtered(
                    st,
                    &mut sampler,
                    ids,
                    cfg.max_tokens,
                    &is_end,
                    &clock,
                    filter,
                    &mut on_token,
                )
                .map_err(RunError::Generate)?;
            (r, None)
        }
    };
    dec.finish(|s| out.0.write_bytes(s.as_bytes()));
    counter.sample();
    marks.i_end = counter.total();
    let _ = writeln!(out, "\n{END_OUTPUT}");
    let complete = json.as_ref().is_some_and(|j| j.is_complete());
    print_per_token(&marks.per_tok, out);
    print_stats(g, &report, &marks, complete, platform, out);
    if let Some(s) = spec_stats {
        let _ = writeln!(out, "{}", speculation_line(g, &s, &report, &marks));
    }
    // On a ring's head the profile would speak of the whole model on this board alone; the
    // split's prediction was printed when the ring formed.
    if g.remote.is_none() {
        print_profile(g, &report, &prof, pool.workers(), platform.card_bus(), out);
    }
    print_instructions(&report, &marks, measured, out);
    Ok(())
}

/// `speculation: 2.31 tokens per target pass, 62% of 211 guesses taken; 41 MB from the card per
/// generated token after the first (95 MB without speculation)`.
fn speculation_line<F: FileSource>(
    g: &Gen<'_, F>,
    s: &SpecStats,
    report: &GenReport,
    marks: &Marks,
) -> String {
    let after = g.cache.stats();
    let first = marks.at_first.unwrap_or(after);
    let per_token = (after.bytes_read - first.bytes_read) / steps(report);
    // What each pass read: a pass per token without speculation.
    let per_pass = (after.bytes_read - first.bytes_read) / (s.passes.max(1) as u64);
    format!(
        "speculation: {s}; {} KiB from the card per generated token after the first ({} KiB a pass)",
        per_token >> 10,
        per_pass >> 10
    )
}

/// Per token: what the forward pass that produced it cost the cache (only when the model streams).
fn print_per_token(per_tok: &[CacheStats], out: &mut Out<'_>) {
    let streams = per_tok
        .first()
        .zip(per_tok.last())
        .is_some_and(|(a, b)| b.bytes_read > a.bytes_read);
    if !streams {
        return;
    }
    for (i, w) in per_tok.windows(2).enumerate().take(64) {
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
}

/// Generated tokens after the first (at least 1): the steps per-token figures divide by.
fn steps(report: &GenReport) -> u64 {
    (report.generated.max(1) as u64 - 1).max(1)
}

/// Time, stop reason, heap and page-cache totals.
fn print_stats<F: FileSource, Q: Platform + ?Sized>(
    g: &Gen<'_, F>,
    report: &GenReport,
    marks: &Marks,
    json_complete: bool,
    platform: &Q,
    out: &mut Out<'_>,
) {
    let gen = report.generated.max(1) as u64;
    let after = g.cache.stats();
    let before = marks.before;
    // Bytes per generated token: from the first generated token on (the prompt's passes excluded).
    let first = marks.at_first.unwrap_or(after);
    let per_token = (after.bytes_read - first.bytes_read) / steps(report);
    let stop = match report.stop {
        Some(StopReason::EndToken(t)) => format!("end token {t}"),
        Some(StopReason::Stopped) if json_complete => "JSON value complete".into(),
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
        "stats: heap high-water {} KiB; page cache hits {}, misses {}, bytes read {} ({} per prompt token, {} per generated token after the first), refills {}, read ahead {} pages, I/O stall {} ms ({} per generated token after the first)",
        platform.heap_high() >> 10,
        after.hits - before.hits,
        after.misses - before.misses,
        after.bytes_read - before.bytes_read,
        (first.bytes_read - before.bytes_read) / report.prompt_tokens.max(1) as u64,
        per_token,
        after.refills - before.refills,
        after.prefetched - before.prefetched,
        ms(after.stall - before.stall),
        ms((after.stall - first.stall) / steps(report))
    );
}

/// The profile's prediction against what happened.
fn print_profile<F: FileSource>(
    g: &Gen<'_, F>,
    report: &GenReport,
    prof: &Profile,
    workers: usize,
    bus: Option<CardBus>,
    out: &mut Out<'_>,
) {
    let gen = report.generated.max(1) as u64;
    let whole = Part::whole(g.model.config.n_layer);
    let scope = super::spec::pin_scope(g.cfg, g.model, &whole);
    let pinned = |o, n| g.cache.pinned_within(o, n);
    let streamed = scope.streamed_per_token(&pinned);
    let compute_ns = time_ns(prof.weights, prof.matvec);
    let io_ns = time_ns(streamed, g.card_rate);
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
        workers,
        prof.weights / 1_000_000,
        streamed / 1_000_000,
        ms(compute_ns),
        ms(io_ns),
        ms(compute_ns + io_ns),
        ms(achieved),
        if io_ns > compute_ns { "I/O-bound" } else { "compute-bound" }
    );
    let pins = PinReport {
        scope,
        total: g.cache.resident_bytes(),
        pinned: &pinned,
    };
    let _ = writeln!(out, "profile: {pins}");
    if streamed > 0 {
        print_bus_prediction(streamed, compute_ns, g.card_rate, bus, out);
    }
}

/// What the streamed bytes cost per token on the card's own bus: at the rate measured while
/// loading, and at the ceiling of the best mode the board's slot could run (each plus this
/// machine's compute with no overlap, and hidden behind it). Without an SD bus (virtio-blk), the
/// ceilings of High Speed and DDR50.
fn print_bus_prediction(
    streamed: u64,
    compute_ns: u64,
    measured: u64,
    bus: Option<CardBus>,
    out: &mut Out<'_>,
) {
    let at = |rate: u64| {
        let io = time_ns(streamed, rate);
        (ms(io + compute_ns), ms(io.max(compute_ns)))
    };
    let mb = |rate: u64| rate as f64 / 1e6;
    match bus {
        Some(bus) => {
            let (a, b) = at(measured);
            let best = bus.best.ceiling_bytes_per_s();
            let (c, d) = at(best);
            let _ = writeln!(
                out,
                "profile: card bus {}, {} kHz, {}-bit (ceiling {:.1} MB/s); at the measured {:.1} MB/s {a} ms per token ({b} ms if reads hide behind compute); at this slot's best mode, {} ({:.1} MB/s ceiling), {c} ms ({d} ms)",
                bus.mode,
                bus.clock_hz / 1000,
                bus.width,
                mb(bus.ceiling()),
                mb(measured),
                bus.best,
                mb(best)
            );
        }
        None => {
            let hs = BusMode::HighSpeed.ceiling_bytes_per_s();
            let ddr = BusMode::Ddr50.ceiling_bytes_per_s();
            let ((a, b), (c, d)) = (at(hs), at(ddr));
            let _ = writeln!(
                out,
                "profile: the card is not on an SD bus; from an SD card in High Speed ({:.1} MB/s ceiling) {a} ms per token ({b} ms if reads hide behind compute), in UHS-I DDR50 ({:.1} MB/s) {c} ms ({d} ms)",
                mb(hs),
                mb(ddr)
            );
        }
    }
}

/// Instructions per prompt token and per generated token; with a measured split, the critical
/// path and each core's share.
fn print_instructions(
    report: &GenReport,
    marks: &Marks,
    measured: Option<&MeasuredPool<'_>>,
    out: &mut Out<'_>,
) {
    let (Some(a), Some(b), Some(c)) = (marks.i0, marks.i_prefill, marks.i_end) else {
        return;
    };
    if (a, b, c) == (0, 0, 0) {
        let _ = writeln!(out, "stats: instructions: not counted (the PMU counts only under QEMU -icount or on hardware)");
        return;
    }
    let steps = steps(report);
    let _ = writeln!(
        out,
        "stats: instructions: prompt {} ({} per prompt token), generation {} per generated token (after the first)",
        b - a,
        (b - a) / report.prompt_tokens.max(1) as u64,
        (c - b) / steps
    );
    let (Some(m), Some(sa), Some(s0)) = (measured, &marks.shares_start, &marks.shares_first) else {
        return;
    };
    // The prompt's passes: what ran outside the parallel jobs is core 0's.
    let prompt = b - a;
    let serial = prompt - (s0.in_jobs - sa.in_jobs);
    let critical = serial + (s0.critical - sa.critical);
    let _ = writeln!(
        out,
        "stats: {} cores: prompt critical path {} per prompt token ({}% of the one-core count)",
        m.workers(),
        critical / report.prompt_tokens.max(1) as u64,
        critical * 100 / prompt.max(1),
    );
    // Per generated token, from the first generated token on.
    let s1 = m.shares();
    let total = c - b;
    let serial = total - (s1.in_jobs - s0.in_jobs);
    let critical = serial + (s1.critical - s0.critical);
    let cores: Vec<String> = (0..m.workers())
        .map(|w| {
            let mine = s1.per_worker[w] - s0.per_worker[w] + if w == 0 { serial } else { 0 };
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
