//! Speculative decoding, exactly: the logits of every row of a checking pass are those of one
//! token at a time; after rejected draft tokens and a rollback the KV cache and the next logits
//! are those of never having seen them (gemma3's window rings wrapping); and greedy speculative
//! generation is token for token plain greedy generation, with the same stop and final position,
//! on the synthetic llama, qwen3 and gemma3 models and on the default model.

mod common;

use common::models::{model_file, Spec, GEMMA3, LLAMA, QWEN2, QWEN3, VOCAB};
use inference::generate::{Engine, GenError, GenReport, StopReason};
use inference::model::{Model, ModelError, RunState};
use inference::parallel::SingleThread;
use inference::quant::MAX_BATCH;
use inference::sampler::{Sampler, SamplerConfig};
use inference::speculate::{Draft, Lookup, SpecStats};
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels, SliceStorage, Storage};

/// A synthetic model's file (kept alive by the caller) and the model read from it.
fn synthetic(spec: &Spec) -> (Vec<u8>, Model) {
    let bytes = model_file(spec).bytes();
    let model = {
        let src = SliceStorage::new(&bytes);
        let g = Gguf::open(&src).unwrap();
        Model::load(&g, &src).unwrap()
    };
    (bytes, model)
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Feed `tokens` one at a time; the logits after each.
fn one_at_a_time<S: Storage + Sync>(
    model: &Model,
    src: &S,
    st: &mut RunState,
    tokens: &[u32],
) -> Vec<Vec<u32>> {
    let k = Kernels::best();
    tokens
        .iter()
        .map(|&t| {
            model.forward(st, src, &SingleThread, &k, t, true).unwrap();
            bits(&st.logits)
        })
        .collect()
}

/// Feed `tokens` in batches as large as the run state takes.
fn feed<S: Storage + Sync>(model: &Model, src: &S, st: &mut RunState, tokens: &[u32]) {
    let k = Kernels::best();
    for c in tokens.chunks(st.batch()) {
        model
            .forward_batch(st, src, &SingleThread, &k, c, true)
            .unwrap();
    }
}

fn tokens(n: usize, mul: u32, add: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * mul + add) % VOCAB as u32)
        .collect()
}

#[test]
fn every_row_of_a_pass_has_the_logits_of_one_token_at_a_time() {
    for spec in [LLAMA, QWEN2, QWEN3, GEMMA3] {
        let (bytes, model) = synthetic(&spec);
        let src = SliceStorage::new(&bytes);
        let toks = tokens(90, 11, 5);
        let mut st1 = RunState::new(&model, 128, 1).unwrap();
        let want = one_at_a_time(&model, &src, &mut st1, &toks);
        let mut st = RunState::with_batch(&model, 128, 1, 32).unwrap();
        let before = st.bytes();
        assert_eq!(
            model.forward_rows(&mut st, &src, &SingleThread, &Kernels::best(), &toks[..2]),
            Err(ModelError::NoRowLogits)
        );
        st.keep_row_logits(&model, st.batch()).unwrap();
        let extra = RunState::row_logits_bytes(&model, 32) as usize;
        assert_eq!(st.bytes(), (before.0, before.1 + extra));
        // Passes of 1, 7, 32 and 50 (in two) rows.
        let mut at = 0;
        for b in [1, 7, 32, 32, 18] {
            let k = Kernels::best();
            let rows = &toks[at..at + b];
            model
                .forward_rows(&mut st, &src, &SingleThread, &k, rows)
                .unwrap();
            for i in 0..b {
                let got = bits(st.row_logits(i, VOCAB).unwrap());
                assert!(
                    got == want[at + i],
                    "{}: row {i} of a pass of {b} at {at}",
                    spec.arch
                );
            }
            at += b;
        }
    }
}

/// The live K/V rows of every layer at `pos` (what a query there and the next ones can see), as
/// bits, position by position.
fn live_kv(model: &Model, st: &RunState) -> Vec<Vec<u16>> {
    let (c, kv) = (&model.config, &st.kv);
    let mut rows = vec![];
    for l in 0..c.n_layer {
        let s = kv.seen(l, st.pos - 1, c.window(l));
        for t in 0..s.n {
            let slot = (s.first + t) % s.ring * kv.kv_dim;
            rows.push(s.keys[slot..slot + kv.kv_dim].to_vec());
            rows.push(s.values[slot..slot + kv.kv_dim].to_vec());
        }
    }
    rows
}

/// Rounds of checking passes over the true continuation with wrong candidates after `a` right
/// ones, each rolled back to the accepted tokens, against feeding the true tokens one at a
/// time: the same K/V rows over the live positions and the same logits, then and while
/// generation continues.
#[test]
fn rollback_forgets_rejected_candidates_bit_for_bit() {
    for spec in [LLAMA, QWEN3, GEMMA3] {
        let (bytes, model) = synthetic(&spec);
        let src = SliceStorage::new(&bytes);
        let k = Kernels::best();
        let truth = tokens(260, 7, 3);
        let ctx = 256;
        let mut plain = RunState::new(&model, ctx, 1).unwrap();
        let mut st = RunState::with_batch(&model, ctx, 1, 16).unwrap();
        st.keep_row_logits(&model, st.batch()).unwrap();
        // 100 positions first: gemma3's rings (window 5 + 63) have wrapped.
        let prompt = &truth[..100];
        one_at_a_time(&model, &src, &mut plain, prompt);
        feed(&model, &src, &mut st, prompt);
        let mut round = 0;
        while st.pos < 220 {
            let (pos, a) = (st.pos, round % 5);
            // The true token, `a` true candidates, then wrong ones.
            let mut batch = truth[pos..pos + 1 + a].to_vec();
            batch.extend((0..10).map(|i| (truth[pos + 1 + a] + 1 + i) % VOCAB as u32));
            model
                .forward_rows(&mut st, &src, &SingleThread, &k, &batch)
                .unwrap();
            let want = one_at_a_time(&model, &src, &mut plain, &truth[pos..pos + 1 + a]);
            for (i, w) in want.iter().enumerate() {
                assert!(
                    bits(st.row_logits(i, VOCAB).unwrap()) == *w,
                    "{} row {i}",
                    spec.arch
                );
            }
            st.rollback(pos + 1 + a).unwrap();
            assert_eq!(st.pos, plain.pos);
            assert!(
                live_kv(&model, &st) == live_kv(&model, &plain),
                "{}: K/V at {}",
                spec.arch,
                st.pos
            );
            round += 1;
        }
        // Continue both one token at a time.
        let rest = &truth[st.pos..st.pos + 30];
        let a = one_at_a_time(&model, &src, &mut st, rest);
        let b = one_at_a_time(&model, &src, &mut plain, rest);
        assert!(a == b, "{}: logits after the rollbacks", spec.arch);
        assert!(
            live_kv(&model, &st) == live_kv(&model, &plain),
            "{}: K/V at the end",
            spec.arch
        );
    }
}

#[test]
fn a_rollback_forward_or_past_the_ring_is_refused() {
    let (bytes, model) = synthetic(&GEMMA3);
    let src = SliceStorage::new(&bytes);
    let mut st = RunState::with_batch(&model, 200, 1, 64).unwrap();
    let toks = tokens(130, 3, 1);
    feed(&model, &src, &mut st, &toks);
    let e = st.rollback(131).unwrap_err();
    assert!(
        matches!(
            e,
            ModelError::Rollback {
                to: 131,
                pos: 130,
                ..
            }
        ),
        "{e}"
    );
    assert!(st.rollback(130 - MAX_BATCH - 1).is_err());
    st.rollback(100).unwrap();
    // Still measured from the highest position written.
    assert!(st.rollback(130 - MAX_BATCH - 1).is_err());
    st.rollback(130 - MAX_BATCH).unwrap();
    assert_eq!(st.pos, 130 - MAX_BATCH);
}

/// One generation's tokens, report and final position.
type Run = (Vec<u32>, GenReport, usize);

/// A generation on `model` from `prompt`: plain greedy, or speculative with `draft`.
fn generate<S: Storage + Sync>(
    model: &Model,
    src: &S,
    job: (&[u32], usize, usize),
    is_end: &dyn Fn(u32) -> bool,
    draft: Option<&mut dyn Draft>,
) -> (Run, SpecStats) {
    generate_with(model, src, job, is_end, draft, (SamplerConfig::greedy(), 0))
}

/// [`generate`] with sampler settings `cfg`, the run state keeping the logits of `rows` rows (0:
/// as many as `generate_speculative` keeps by itself).
fn generate_with<S: Storage + Sync>(
    model: &Model,
    src: &S,
    (prompt, n, ctx): (&[u32], usize, usize),
    is_end: &dyn Fn(u32) -> bool,
    draft: Option<&mut dyn Draft>,
    (cfg, rows): (SamplerConfig, usize),
) -> (Run, SpecStats) {
    let engine = Engine::new(model, src, &SingleThread, Kernels::best());
    let mut st = RunState::with_batch(model, ctx, 1, 16).unwrap();
    if rows > 0 {
        st.keep_row_logits(model, rows).unwrap();
        assert_eq!(st.rows_kept(), rows);
    }
    let mut sampler = Sampler::new(cfg, model.config.vocab).unwrap();
    let mut out = vec![];
    let mut on = |t| {
        out.push(t);
        true
    };
    let (rep, stats) = match draft {
        None => {
            let r = engine.generate(&mut st, &mut sampler, prompt, n, is_end, &|| 0, &mut on);
            (r.unwrap(), SpecStats::default())
        }
        Some(d) => engine
            .generate_speculative(&mut st, &mut sampler, prompt, n, d, is_end, &|| 0, &mut on)
            .unwrap(),
    };
    ((out, rep, st.pos), stats)
}

/// Proposes what it is told: the true continuation (from a plain run), or junk.
struct Oracle {
    text: Vec<u32>,
    k: usize,
    junk: bool,
}

impl Draft for Oracle {
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        let have = &self.text[context.len().min(self.text.len())..];
        let m = have.len().min(out.len()).min(self.k);
        for (o, &t) in out.iter_mut().zip(have).take(m) {
            *o = if self.junk { (t + 1) % VOCAB as u32 } else { t };
        }
        Ok(m)
    }
}

/// Speculative against plain on one model and prompt, with lookup and both oracles; the lookup
/// run's counts.
fn check_equal<S: Storage + Sync>(
    name: &str,
    model: &Model,
    src: &S,
    job: (&[u32], usize, usize),
    is_end: &dyn Fn(u32) -> bool,
) -> SpecStats {
    let (want, _) = generate(model, src, job, is_end, None);
    let mut text = job.0.to_vec();
    text.extend(&want.0);
    let mut lookup = Lookup {
        max_n: 3,
        max_draft: 8,
    };
    let mut right = Oracle {
        text: text.clone(),
        k: 6,
        junk: false,
    };
    let mut wrong = Oracle {
        text,
        k: 6,
        junk: true,
    };
    let mut stats = vec![];
    for (what, d) in [
        ("lookup", &mut lookup as &mut dyn Draft),
        ("oracle", &mut right),
        ("junk", &mut wrong),
    ] {
        let (got, s) = generate(model, src, job, is_end, Some(d));
        assert_eq!(got.0, want.0, "{name} with {what}: tokens");
        assert_eq!(
            (got.1.generated, got.1.stop),
            (want.1.generated, want.1.stop),
            "{name} with {what}"
        );
        assert_eq!(got.2, want.2, "{name} with {what}: final position");
        assert!(s.accepted <= s.drafted, "{name} with {what}: {s:?}");
        stats.push(s);
    }
    let passes_plain = want.2 - job.0.len();
    assert_eq!(stats[2].accepted, 0, "{name}: junk accepted");
    assert_eq!(stats[2].passes, passes_plain, "{name}: junk");
    if want.0.len() > 4 {
        assert!(
            stats[1].tokens_per_pass() > 2.0,
            "{name}: oracle {:?}",
            stats[1]
        );
    }
    eprintln!(
        "{name}: lookup {:?}, {:.2} tokens per pass",
        stats[0],
        stats[0].tokens_per_pass()
    );
    stats[0]
}

#[test]
fn speculative_greedy_is_plain_greedy_on_synthetic_models() {
    let never = |_: u32| false;
    for spec in [LLAMA, QWEN3, GEMMA3] {
        let (bytes, model) = synthetic(&spec);
        let src = SliceStorage::new(&bytes);
        let repetitive: Vec<u32> = (0..48)
            .map(|i| [4, 9, 17, 23, 4, 9, 30, 2][i % 8])
            .collect();
        let varied = tokens(37, 13, 6);
        let mut accepted = 0;
        for (what, prompt) in [
            ("repetitive", &repetitive),
            ("varied", &varied),
            ("short", &vec![5]),
        ] {
            let name = format!("{} {what}", spec.arch);
            let s = check_equal(&name, &model, &src, (prompt, 60, 200), &never);
            accepted += s.accepted;
            // An end token drawn mid-round: the third distinct token plain greedy makes.
            let (plain, _) = generate(&model, &src, (prompt, 60, 200), &never, None);
            let mut seen = vec![];
            for t in plain.0 {
                if !seen.contains(&t) {
                    seen.push(t);
                }
            }
            if let Some(&end) = seen.get(2) {
                let is_end = move |t: u32| t == end;
                check_equal(
                    &format!("{name}, end {end}"),
                    &model,
                    &src,
                    (prompt, 60, 200),
                    &is_end,
                );
            }
            // Token limits inside a round.
            for n in [0, 1, 2, 9] {
                check_equal(
                    &format!("{name}, {n} tokens"),
                    &model,
                    &src,
                    (prompt, n, 200),
                    &never,
                );
            }
        }
        assert!(accepted > 0, "{}: lookup never helped", spec.arch);
    }
}

/// The context fills in the middle of what a round could check.
#[test]
fn a_full_context_stops_speculation_as_it_stops_the_plain_loop() {
    let never = |_: u32| false;
    for spec in [LLAMA, GEMMA3] {
        let (bytes, model) = synthetic(&spec);
        let src = SliceStorage::new(&bytes);
        let prompt = tokens(20, 5, 1);
        for ctx in [21, 22, 27, 33] {
            let name = format!("{} ctx {ctx}", spec.arch);
            check_equal(&name, &model, &src, (&prompt, 100, ctx), &never);
            let (plain, _) = generate(&model, &src, (&prompt, 100, ctx), &never, None);
            assert_eq!(plain.1.stop, Some(StopReason::ContextFull), "{name}");
        }
    }
}

/// Settings other than plain greedy run the plain loop: the same tokens, one per pass.
#[test]
fn sampled_settings_fall_back_to_the_plain_loop() {
    let (bytes, model) = synthetic(&QWEN3);
    let src = SliceStorage::new(&bytes);
    let cfg = SamplerConfig {
        seed: 7,
        ..SamplerConfig::default()
    };
    let prompt = tokens(30, 3, 2);
    let never = |_: u32| false;
    let job = (&prompt[..], 40, 200);
    let (want, _) = generate_with(&model, &src, job, &never, None, (cfg, 0));
    let mut lookup = Lookup {
        max_n: 2,
        max_draft: 4,
    };
    let (got, s) = generate_with(&model, &src, job, &never, Some(&mut lookup), (cfg, 0));
    assert_eq!((got.0, got.2), (want.0, want.2));
    assert_eq!((s.passes, s.drafted), (39, 0));
}

/// The default model, greedy on a code prompt that repeats itself: the same tokens as plain
/// greedy, more than one token per target pass from lookup; and its rows (the output head read
/// in several steps) are those of one token at a time.
#[test]
fn speculative_greedy_is_plain_greedy_on_the_default_model() {
    let (src, g) = common::open(&common::model_path());
    let model = Model::load(&g, &src).unwrap();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap();
    let code = "<|im_start|>user\nRename the variable x to total in this code and print it again in full:\n\
        def add(a, b):\n    x = a + b\n    return x\n\n\
        def add3(a, b, c):\n    x = a + b + c\n    return x\n<|im_end|>\n<|im_start|>assistant\n\
        def add(a, b):\n    total = a + b\n";
    let prompt = tok.encode(code, false, true).unwrap();
    let is_end = |t: u32| t == 0 || t == 2;
    let (want, _) = generate(&model, &src, (&prompt, 40, 512), &is_end, None);
    let mut lookup = Lookup {
        max_n: 3,
        max_draft: 8,
    };
    let (got, s) = generate(&model, &src, (&prompt, 40, 512), &is_end, Some(&mut lookup));
    eprintln!(
        "SmolLM2 code edit: {:?}, {:.2} tokens per pass",
        s,
        s.tokens_per_pass()
    );
    assert_eq!(got.0, want.0, "tokens");
    assert_eq!((got.1.stop, got.2), (want.1.stop, want.2));
    assert!(s.tokens_per_pass() > 1.0, "{s:?}");

    let mut st1 = RunState::new(&model, 64, 1).unwrap();
    let rows = &prompt[..12];
    let one = one_at_a_time(&model, &src, &mut st1, rows);
    let mut st = RunState::with_batch(&model, 64, 1, 12).unwrap();
    st.keep_row_logits(&model, st.batch()).unwrap();
    model
        .forward_rows(&mut st, &src, &SingleThread, &Kernels::best(), rows)
        .unwrap();
    for (i, w) in one.iter().enumerate() {
        assert!(
            bits(st.row_logits(i, model.config.vocab).unwrap()) == *w,
            "row {i}"
        );
    }
}

/// A run state that keeps the logits of 3 rows checks at most 2 drafts a pass, with the same
/// output.
#[test]
fn fewer_rows_kept_check_fewer_drafts() {
    let (bytes, model) = synthetic(&QWEN3);
    let src = SliceStorage::new(&bytes);
    let never = |_: u32| false;
    let prompt: Vec<u32> = (0..24).map(|i| [3, 8, 12, 3, 8, 30][i % 6]).collect();
    let job = (&prompt[..], 40, 200);
    let (want, _) = generate(&model, &src, job, &never, None);
    let mut lookup = Lookup {
        max_n: 3,
        max_draft: 8,
    };
    let greedy = (SamplerConfig::greedy(), 3);
    let (got, s) = generate_with(&model, &src, job, &never, Some(&mut lookup), greedy);
    assert_eq!(got, want);
    assert!(s.drafted <= 2 * s.passes && s.accepted > 0, "{s:?}");
}
