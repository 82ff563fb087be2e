//! `lmboot-host --ring-plan N,RAM,RATE,CARD,BAUD`: what the ring's planner predicts for a model on N
//! boards alike (RAM free, weight bytes/s through the matrix kernels on all cores, card bytes/s,
//! link bits/s), beside one such board alone: the split, each board's time per token, the bytes
//! a hop carries per token and per prompt batch, and their time on the line. The boards' own
//! boot profile measures these rates; here they are the caller's assumptions.

use inference::model::Model;
use runtime::ring::msg::wire_bytes;
use runtime::ring::plan::{self, Profile, Window};

/// Bits on the line per byte (8N1: a start and a stop bit).
const BITS_PER_BYTE: u64 = 10;

/// The board the plan assumes, from `N,RAM,RATE,CARD,BAUD` (sizes with K/M/G suffixes).
struct Spec {
    boards: usize,
    profile: Profile,
    baud: u64,
}

fn size(v: &str) -> Result<u64, String> {
    let (num, mult) = match v.as_bytes().last() {
        Some(b'K' | b'k') => (&v[..v.len() - 1], 1_000),
        Some(b'M' | b'm') => (&v[..v.len() - 1], 1_000_000),
        Some(b'G' | b'g') => (&v[..v.len() - 1], 1_000_000_000),
        _ => (v, 1),
    };
    let x: f64 = num.parse().map_err(|_| format!("{v:?} is not a size"))?;
    Ok((x * mult as f64) as u64)
}

fn parse(spec: &str) -> Result<Spec, String> {
    let f: Vec<&str> = spec.split(',').collect();
    let [n, ram, rate, card, baud] = f[..] else {
        return Err(format!(
            "--ring-plan {spec:?}: expected N,RAM,RATE,CARD,BAUD (e.g. 3,448M,1G,25M,3000000)"
        ));
    };
    Ok(Spec {
        boards: n
            .parse()
            .map_err(|_| format!("{n:?} is not a board count"))?,
        profile: Profile {
            ram: size(ram)?,
            cache: u64::MAX,
            compute: size(rate)?,
            card: size(card)?,
            cores: 4,
        },
        baud: size(baud)?,
    })
}

/// Print the plan for `model` with a context of `ctx` and prompt batches of `batch`.
pub fn run(model: &Model, spec: &str, ctx: usize, batch: usize) -> Result<(), String> {
    let s = parse(spec)?;
    let shape = plan::shape(model, ctx, batch, 256 << 10, 4, runtime::run::HEAP_MARGIN);
    let alone = plan::plan(&shape, &[s.profile]).map_err(|e| e.to_string())?;
    let ring = plan::plan(&shape, &vec![s.profile; s.boards]).map_err(|e| e.to_string())?;
    let p = s.profile;
    println!(
        "boards alike: {} MB free, matrices at {} MB/s, card at {} MB/s, link {} baud; context {ctx}, prompt batches of {batch}",
        p.ram / 1_000_000,
        p.compute / 1_000_000,
        p.card / 1_000_000,
        s.baud
    );
    say("one board alone", &alone);
    say(&format!("a ring of {}", s.boards), &ring);
    let dim = model.config.dim;
    let (token, prompt) = (wire_bytes(1, dim), wire_bytes(batch, dim));
    let line_ms = |bytes: u64| bytes * BITS_PER_BYTE * 1000 / s.baud.max(1);
    let hops = s.boards as u64;
    println!(
        "link: {token} bytes a hop per token ({} ms at {} baud), {prompt} bytes a hop per prompt batch of {batch} ({} ms); {hops} hops per token",
        line_ms(token),
        s.baud,
        line_ms(prompt)
    );
    let compute: u64 = ring.iter().map(|w| w.ns / 1_000_000).sum();
    println!(
        "ring: {} ms per token ({compute} ms on the boards + {} ms on the links) against {} ms alone",
        compute + hops * line_ms(token),
        hops * line_ms(token),
        alone[0].ns / 1_000_000
    );
    Ok(())
}

fn say(what: &str, windows: &[Window]) {
    for (i, w) in windows.iter().enumerate() {
        println!("{what}: board {} runs {w}", i + 1);
    }
}
