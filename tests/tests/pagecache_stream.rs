//! The page cache under the real forward pass with less room than the model: bytes read from the
//! card per generated token, for caches of 16, 32 and 64 MiB, with the resident-prefix policy
//! (eviction by next use on the pass's read order) and with plain LRU beside it: at most
//! (M - C) x 1.05 plus the streaming window; and per prompt token when the prompt goes in batches:
//! the streamed part is read once per batch.

mod common;

use inference::generate::Engine;
use inference::model::{Model, RunState};
use inference::parallel::SingleThread;
use inference::sampler::{Sampler, SamplerConfig};
use inference::{Gguf, Kernels};
use runtime::pagecache::hostfile::HostFile;
use runtime::pagecache::{Options, PageCache, Policy};
use std::sync::atomic::Ordering;

const PAGE: usize = 256 * 1024;
/// Pages of the streaming window (not pinned, so read every token at worst).

/// Bytes read per generated token (averaged over the tokens after the first two) and the number of
/// tensors read from outside the pinned part.
fn per_token(capacity: u64, policy: Policy) -> (u64, usize, Vec<u32>) {
    per_token_with(
        capacity,
        Options {
            policy,
            readahead: 0,
        },
        false,
    )
    .0
}

/// As [`per_token`], with a choice of read-ahead; also the cache's counters at the end.
fn per_token_with(
    capacity: u64,
    opts: Options,
    queued: bool,
) -> ((u64, usize, Vec<u32>), runtime::pagecache::CacheStats) {
    let src = HostFile::open(&common::model_path(), queued).unwrap();
    let bytes = src.counter();
    let cache = PageCache::with_options(src, capacity, PAGE, opts, &mut |_, _| {}).unwrap();
    let g = Gguf::open(&cache).unwrap();
    let model = Model::load(&g, &cache).unwrap();
    if opts.policy == Policy::ResidentPrefix {
        cache.set_schedule(model.weights.read_order(), 1);
    }
    let streamed = g
        .tensors
        .iter()
        .filter(|t| t.offset + t.size > cache.resident_bytes())
        .count();
    let engine = Engine::new(&model, &cache, &SingleThread, Kernels::best());
    let mut st = RunState::new(&model, 64, 1).unwrap();
    let mut sampler = Sampler::new(SamplerConfig::greedy(), model.config.vocab).unwrap();
    let prompt = &common::golden::load("smollm2-once").prompt_ids;
    let mut marks = vec![];
    let mut tokens = vec![];
    engine
        .generate(
            &mut st,
            &mut sampler,
            prompt,
            6,
            &|_| false,
            &|| 0,
            &mut |t| {
                marks.push(bytes.load(Ordering::Relaxed));
                tokens.push(t);
                true
            },
        )
        .unwrap();
    // marks[i] is taken after the forward pass that produced token i; tokens 2..5 each cost one pass.
    let per = (marks[5] - marks[1]) / 4;
    ((per, streamed, tokens), cache.stats())
}

#[test]
fn bytes_read_per_token_stay_near_model_minus_cache() {
    let m = std::fs::metadata(common::model_path()).unwrap().len();
    let mut reference_tokens = None;
    for mib in [16u64, 32, 64, 88] {
        let c = mib << 20;
        let (ours, streamed, tokens) = per_token(c, Policy::ResidentPrefix);
        let (lru, _, lru_tokens) = per_token(c, Policy::Lru);
        // The read order is known: the window keeps what is needed soonest (see window_pages).
        let bound = (m - c) as f64 * 1.05;
        eprintln!(
            "cache {mib:>2} MiB: resident-prefix {:.1} MB/token (M - C = {:.1} MB, bound {:.1} MB, {streamed} tensors streamed); LRU {:.1} MB/token",
            ours as f64 / 1e6,
            (m - c) as f64 / 1e6,
            bound / 1e6,
            lru as f64 / 1e6
        );
        assert!(
            (ours as f64) <= bound,
            "{mib} MiB: {ours} bytes per token > bound {bound}"
        );
        // Pages shared by neighbouring tensors that the pass reads far apart are read twice; the rest
        // is the unpinned part plus the window.
        // LRU re-reads nearly the whole model every token.
        assert!(lru as f64 >= 0.9 * m as f64, "LRU read only {lru} of {m}");
        // The cache never changes the tokens.
        assert_eq!(tokens, lru_tokens);
        if let Some(r) = &reference_tokens {
            assert_eq!(&tokens, r);
        }
        reference_tokens = Some(tokens);
    }
}

/// Read-ahead on a queued source (announced by the forward pass) keeps the same bound and the same
/// tokens, and the pages arrive ahead of need: almost no lookup misses.
#[test]
fn read_ahead_keeps_the_bound_and_the_tokens() {
    let m = std::fs::metadata(common::model_path()).unwrap().len();
    for mib in [16u64, 64] {
        let c = mib << 20;
        let plain = per_token(c, Policy::ResidentPrefix);
        let ((ours, _, tokens), stats) = per_token_with(
            c,
            Options {
                policy: Policy::ResidentPrefix,
                readahead: 4,
            },
            true,
        );
        // The four read-ahead slots may hold pages read early that a later pass reads again.
        let bound = (m - c) as f64 * 1.05 + (4 * PAGE) as f64;
        eprintln!(
            "cache {mib:>2} MiB with read-ahead 4: {:.1} MB/token (without: {:.1}); {} pages read ahead, {} misses, {} waited for",
            ours as f64 / 1e6,
            plain.0 as f64 / 1e6,
            stats.prefetched,
            stats.misses,
            stats.late
        );
        assert!(
            (ours as f64) <= bound,
            "{mib} MiB: {ours} bytes per token > bound {bound}"
        );
        assert_eq!(tokens, plain.2);
        assert!(stats.prefetched > 0);
        // Nearly every streamed page was read ahead rather than missed.
        assert!(stats.misses * 10 < stats.prefetched, "{stats:?}");
    }
}

/// A 64-token prompt in batches of 32 reads the streamed part of the model once per batch: per
/// prompt token at most ((M - C) x 1.05 + the window) / 32, against about M - C one token at a
/// time; the logits are the same.
#[test]
fn a_prompt_batch_reads_the_streamed_part_once() {
    let m = std::fs::metadata(common::model_path()).unwrap().len();
    let c = 32u64 << 20;
    let case = common::golden::load("smollm2-chat-mountain");
    let prompt = case.conversation_ids();
    let feed = |batch: usize, tokens: &[u32]| {
        let src = HostFile::open(&common::model_path(), true).unwrap();
        let bytes = src.counter();
        let opts = Options {
            policy: Policy::ResidentPrefix,
            readahead: 4,
        };
        let cache = PageCache::with_options(src, c, PAGE, opts, &mut |_, _| {}).unwrap();
        let g = Gguf::open(&cache).unwrap();
        let model = Model::load(&g, &cache).unwrap();
        cache.set_schedule(model.weights.read_order(), 1);
        let engine = Engine::new(&model, &cache, &SingleThread, Kernels::best());
        let mut st = RunState::with_batch(&model, 96, 1, batch).unwrap();
        let before = bytes.load(Ordering::Relaxed);
        engine.feed(&mut st, tokens).unwrap();
        let per = (bytes.load(Ordering::Relaxed) - before) / tokens.len() as u64;
        (
            per,
            st.logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            cache.stats(),
        )
    };
    let (one, _, _) = feed(1, &prompt[..8]);
    let (batched, logits, stats) = feed(32, &prompt[..64]);
    let bound = (m - c) as f64 * 1.05 / 32.0;
    eprintln!(
        "cache 32 MiB, M - C = {:.1} MB: one token at a time {:.1} MB per prompt token, batches of 32 {:.2} MB (bound {:.2} MB); {} pages read ahead, {} misses",
        (m - c) as f64 / 1e6,
        one as f64 / 1e6,
        batched as f64 / 1e6,
        bound / 1e6,
        stats.prefetched,
        stats.misses
    );
    assert!(
        batched as f64 <= bound,
        "{batched} bytes per prompt token > {bound}"
    );
    // One token at a time streams nearly all of M - C every pass (a little less: the window
    // keeps some pages from the pass before); a batch shares it among 32 tokens.
    assert!(
        one as f64 >= 0.9 * (m - c) as f64,
        "one token at a time read only {one}"
    );
    assert!(
        batched * 20 <= one,
        "batched {batched} vs one at a time {one}"
    );
    // Read-ahead keeps working during batch passes: the misses are mostly the 64 embedding rows
    // (one lookup per token, nothing to announce ahead).
    assert!(stats.prefetched > stats.misses * 5, "{stats:?}");
    // The same logits as one token at a time.
    let (_, logits_one, _) = feed(1, &prompt[..64]);
    assert!(logits == logits_one);
}
