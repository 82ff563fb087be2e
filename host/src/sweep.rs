//! `--cache-sweep SIZES`: bytes read from the model file per generated token through the kernel's
//! page cache, for each cache size, with the resident-prefix policy (read-ahead off and on) and
//! with LRU beside it. The forward pass is the real one (greedy, one thread), so the access order
//! is exactly what a board sees; `cargo xtask bench` plots the figures.

use inference::generate::Engine;
use inference::model::{Model, RunState};
use inference::parallel::SingleThread;
use inference::sampler::{Sampler, SamplerConfig};
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels};
use runtime::pagecache::hostfile::HostFile;
use runtime::pagecache::{Options, PageCache, Policy, DEFAULT_READAHEAD};
use std::path::Path;
use std::sync::atomic::Ordering;

/// The cache configurations compared.
pub const CONFIGS: [(&str, Policy, usize); 3] = [
    ("resident-prefix", Policy::ResidentPrefix, 0),
    (
        "resident-prefix+read-ahead",
        Policy::ResidentPrefix,
        DEFAULT_READAHEAD,
    ),
    ("lru", Policy::Lru, 0),
];

const PAGE: usize = 256 * 1024;

/// Bytes read per generated token (tokens 2..=n, each one forward pass) with a cache of `capacity`
/// bytes; also the pages read ahead and the lookups that missed, per token.
pub fn per_token(
    model: &Path,
    prompt: &str,
    n: usize,
    capacity: u64,
    policy: Policy,
    readahead: usize,
) -> Result<(u64, u64, u64), String> {
    let src =
        HostFile::open(model, readahead > 0).map_err(|e| format!("{}: {e}", model.display()))?;
    let bytes = src.counter();
    let opts = Options { policy, readahead };
    let cache = PageCache::with_options(src, capacity, PAGE, opts, &mut |_, _| {})
        .map_err(|e| e.to_string())?;
    let g = Gguf::open(&cache).map_err(|e| e.to_string())?;
    let m = Model::load(&g, &cache).map_err(|e| e.to_string())?;
    if policy == Policy::ResidentPrefix {
        cache.set_schedule(m.weights.read_order(), 1);
    }
    let tok = Tokenizer::from_gguf(&g, &cache).map_err(|e| e.to_string())?;
    let ids = tok.encode(prompt, true, true).map_err(|e| e.to_string())?;
    let engine = Engine::new(&m, &cache, &SingleThread, Kernels::best());
    let mut st = RunState::new(&m, 256, 1).map_err(|e| e.to_string())?;
    let mut sampler =
        Sampler::new(SamplerConfig::greedy(), m.config.vocab).map_err(|e| e.to_string())?;
    let mut marks = vec![];
    engine
        .generate(
            &mut st,
            &mut sampler,
            &ids,
            n,
            &|_| false,
            &|| 0,
            &mut |_| {
                marks.push((bytes.load(Ordering::Relaxed), cache.stats()));
                true
            },
        )
        .map_err(|e| e.to_string())?;
    if marks.len() < 2 {
        return Err("need at least 2 generated tokens".into());
    }
    let (a, b) = (marks[0], marks[marks.len() - 1]);
    let steps = (marks.len() - 1) as u64;
    Ok((
        (b.0 - a.0) / steps,
        (b.1.prefetched - a.1.prefetched) / steps,
        (b.1.misses - a.1.misses) / steps,
    ))
}

/// Print one line per size and configuration:
/// `cache-sweep: <MiB> MiB <config>: <bytes> bytes/token, <p> pages read ahead, <m> misses`.
pub fn run(model: &Path, sizes: &str, n: usize) -> Result<(), String> {
    let len = std::fs::metadata(model)
        .map_err(|e| format!("{}: {e}", model.display()))?
        .len();
    println!("cache-sweep: model {len} bytes, page {PAGE} bytes, {n} tokens greedy after \"Once upon a time\"");
    for s in sizes.split(',') {
        let mib: u64 = s
            .trim()
            .parse()
            .map_err(|_| format!("--cache-sweep: {s:?} is not a size in MiB"))?;
        for (name, policy, ra) in CONFIGS {
            let (b, p, m) = per_token(model, "Once upon a time", n, mib << 20, policy, ra)?;
            println!(
                "cache-sweep: {mib} MiB {name}: {b} bytes/token, {p} pages read ahead, {m} misses"
            );
        }
    }
    Ok(())
}
