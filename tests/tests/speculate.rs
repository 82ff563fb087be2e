//! Speculative decoding, exactly: the logits of every row of a checking pass are those of one
//! token at a time; after rejected draft tokens and a rollback the KV cache and the next logits
//! are those of never having seen them (gemma3's window rings wrapping); and greedy speculative
//! generation is token for token plain greedy generation, with the same stop and final position,
//! on the synthetic llama, qwen3 and gemma3 models and on the default model.

mod common;

use common::models::{model_file, Spec, GEMMA3, LLAMA, QWEN2, QWEN3, VOCAB};
use inference::generate::{Engine, GenError, GenReport, StopReason};
use inference::model::{Model, ModelError, RunState, Tree};
use inference::parallel::SingleThread;
use inference::quant::MAX_BATCH;
use inference::sampler::{Sampler, SamplerConfig};
use inference::speculate::resident::{load_runs, DraftStore};
use inference::speculate::{
    same_vocabulary, Draft, DraftShape, Drafts, HeadCut, Lookup, ModelDraft, Planner, SpecSettings,
    SpecStats, Speculation,
};
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

/// `st` is at `plain`'s position with its K/V over the live positions.
fn same_state(model: &Model, st: &RunState, plain: &RunState, what: &str) {
    assert_eq!(st.pos, plain.pos, "{what}");
    assert!(
        live_kv(model, st) == live_kv(model, plain),
        "{what}: K/V at {}",
        st.pos
    );
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
            same_state(&model, &st, &plain, spec.arch);
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

/// Rounds of tree passes at positions past gemma3's ring wrap: decoy branches first (so the true
/// path's rows are not consecutive), then the true continuation `a` deep with a wrong sibling at
/// each step. Every row has the logits of feeding its own path one token at a time; after
/// [`RunState::keep_path`] the K/V over the live positions and the logits as generation goes on
/// are those of feeding the true tokens one at a time. Also with the error budget's exact
/// attention (its own path through the tree).
#[test]
fn trees_of_candidates_check_every_path_and_keep_one_bit_for_bit() {
    use inference::model::exact::Exact;
    let v = VOCAB as u32;
    for (spec, exact) in [
        (LLAMA, false),
        (QWEN3, false),
        (GEMMA3, false),
        (GEMMA3, true),
    ] {
        let (bytes, model) = synthetic(&spec);
        let src = SliceStorage::new(&bytes);
        let run = (&src, &SingleThread, &Kernels::best());
        let truth = tokens(240, 7, 3);
        let mut plain = RunState::new(&model, 256, 1).unwrap();
        let mut st = RunState::with_batch(&model, 256, 1, 32).unwrap();
        if exact {
            let e = Exact {
                kv: true,
                ..Exact::default()
            };
            plain.set_exact(e, &model);
            st.set_exact(e, &model);
        }
        st.keep_row_logits(&model, st.batch()).unwrap();
        let prompt = &truth[..100];
        one_at_a_time(&model, &src, &mut plain, prompt);
        feed(&model, &src, &mut st, prompt);
        let rounds = if exact { 3 } else { 12 };
        for round in 0..rounds {
            let (pos, a) = (st.pos, 1 + round % 4);
            let mut tree = Tree::new(truth[pos], 32);
            // Decoys: a branch of three, then a wrong first guess with a child.
            tree.extend(0, &[(truth[pos + 1] + 5) % v, 9, 10]);
            tree.extend(0, &[(truth[pos + 1] + 6) % v, 11]);
            // The true path, with a wrong sibling after each true row.
            let mut at = 0;
            for d in 1..=a {
                let t = truth[pos + d];
                at = tree.child(at, t).unwrap();
                tree.extend(at, &[(t + 3) % v]);
            }
            assert!(!tree.is_chain());
            model.forward_tree(&mut st, run, &tree).unwrap();
            assert_eq!(st.pos, pos + tree.len());
            let mut path = [0u8; MAX_BATCH];
            for r in 0..tree.len() {
                let rows = tree.path(r, &mut path).to_vec();
                let toks: Vec<u32> = rows.iter().map(|&i| tree.tokens()[i as usize]).collect();
                let want = one_at_a_time(&model, &src, &mut plain, &toks);
                plain.rollback(pos).unwrap();
                assert!(
                    bits(st.row_logits(r, VOCAB).unwrap()) == *want.last().unwrap(),
                    "{} (exact {exact}) round {round}: row {r} of {:?}",
                    spec.arch,
                    tree.parents()
                );
            }
            let keep = tree.path(at, &mut path).to_vec();
            assert!(keep.windows(2).any(|w| w[1] != w[0] + 1), "{keep:?}");
            st.keep_path(pos, &keep).unwrap();
            one_at_a_time(&model, &src, &mut plain, &truth[pos..pos + 1 + a]);
            same_state(
                &model,
                &st,
                &plain,
                &format!("{} (exact {exact})", spec.arch),
            );
        }
        let rest = &truth[st.pos..st.pos + 20];
        let a = one_at_a_time(&model, &src, &mut st, rest);
        let b = one_at_a_time(&model, &src, &mut plain, rest);
        assert!(
            a == b,
            "{} (exact {exact}): logits after the trees",
            spec.arch
        );
        // A path that is not one (not from the root, not increasing) is refused.
        let mut t = Tree::new(truth[st.pos], 8);
        t.extend(0, &[1, 2]);
        t.extend(0, &[3]);
        let pos = st.pos;
        model.forward_tree(&mut st, run, &t).unwrap();
        for bad in [&[1u8, 2][..], &[0, 2, 1], &[0, 9], &[]] {
            assert!(st.keep_path(pos, bad).is_err(), "{bad:?}");
        }
        st.keep_path(pos, &[0, 3]).unwrap();
        assert_eq!(st.pos, pos + 2);
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
    generate_with(
        model,
        src,
        job,
        is_end,
        draft,
        (SamplerConfig::greedy(), 0, 0),
    )
}

/// Guesses nothing: with a self-draft, the target's own first layers are the only source.
struct NoGuess;

impl Draft for NoGuess {
    fn propose(&mut self, _: &[u32], _: &mut [u32]) -> Result<usize, GenError> {
        Ok(0)
    }
}

/// [`generate`] with sampler settings `cfg`, the run state keeping the logits of `rows` rows (0:
/// as many as `generate_speculative` keeps by itself), and the first `own` layers as a self-draft
/// after `draft` (0: none).
fn generate_with<S: Storage + Sync>(
    model: &Model,
    src: &S,
    (prompt, n, ctx): (&[u32], usize, usize),
    is_end: &dyn Fn(u32) -> bool,
    draft: Option<&mut dyn Draft>,
    (cfg, rows, own): (SamplerConfig, usize, usize),
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
        Some(d) => {
            let job = (prompt, n);
            spec_gen(
                &engine,
                (&mut st, &mut sampler),
                job,
                (d, MAX_BATCH - 1, own),
                is_end,
                None,
                &mut on,
            )
        }
    };
    ((out, rep, st.pos), stats)
}

/// [`Engine::generate_speculative`] with `d` then the first `own` layers (0: none), `k` guesses
/// a pass (a fixed planner).
fn spec_gen<S: Storage + Sync>(
    engine: &Engine<'_, S, SingleThread>,
    (st, sampler): (&mut RunState, &mut Sampler),
    (prompt, n): (&[u32], usize),
    (d, k, own): (&mut dyn Draft, usize, usize),
    is_end: &dyn Fn(u32) -> bool,
    f: Option<&mut dyn inference::generate::LogitsFilter>,
    on: &mut dyn FnMut(u32) -> bool,
) -> (GenReport, SpecStats) {
    let mut spec = Speculation::new(d, Planner::fixed(k));
    spec.self_draft = own;
    engine
        .generate_speculative(st, sampler, prompt, n, &mut spec, is_end, &|| 0, f, on)
        .unwrap()
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

/// Guesses a tree that holds the true continuation (from a plain run) behind decoys: a wrong
/// branch of two first, then the truth 5 deep with a wrong sibling after each true row.
struct TreeOracle(Vec<u32>);

impl Draft for TreeOracle {
    fn propose_tree(&mut self, context: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        let v = VOCAB as u32;
        let have = &self.0[context.len().min(self.0.len())..];
        if let Some(&t) = have.first() {
            tree.extend(0, &[(t + 1) % v, (t + 2) % v]);
        }
        let mut at = 0;
        for &t in have.iter().take(5) {
            let Some(r) = tree.child(at, t) else { break };
            tree.child(at, (t + 3) % v);
            at = r;
        }
        Ok(0)
    }
}

/// Guesses a tree: each of its tokens as a child of the root (in order: the sampler checks them
/// in turn), the last one with a child of its own.
struct Siblings(Vec<u32>);

impl Draft for Siblings {
    fn propose_tree(&mut self, _: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        let mut last = None;
        for &t in &self.0 {
            last = tree.child(0, t).or(last);
        }
        if let Some(r) = last {
            tree.child(r, self.0[0]);
        }
        Ok(0)
    }
}

/// A draft model for a synthetic target: one layer, a narrower feed-forward (so its weights are
/// not the target's first layer), the same vocabulary.
fn draft_spec(spec: &Spec) -> Spec {
    Spec {
        layers: 1,
        ffn: 32,
        ..spec.clone()
    }
}

const SHAPE: DraftShape = DraftShape {
    ctx: 256,
    batch: 8,
    max_draft: 5,
};

/// A draft model held as a board holds it: its layers in RAM, the rest read from `src`.
fn held<'a, S: Storage>(m: &Model, src: &'a S) -> DraftStore<&'a S> {
    DraftStore::new(load_runs(m, src).unwrap(), src)
}

/// `m` drafting with its head cut to the `lowest` ids (and the context's tokens), from `store`.
fn cut_draft<'a, S: Storage + Sync>(
    m: &'a Model,
    store: &'a S,
    lowest: usize,
    shape: DraftShape,
) -> ModelDraft<'a, S, SingleThread> {
    let cut = HeadCut::new(m, store, lowest, shape.ctx).unwrap();
    let k = Kernels::best();
    ModelDraft::model(m, store, &SingleThread, k, shape)
        .unwrap()
        .with_cut(cut)
}

/// Speculative against plain on one model and prompt, with lookup, both oracles, a self-draft of
/// the first layer, the draft model `dm` and lookup then the self-draft; the lookup run's counts.
fn check_equal<S: Storage + Sync>(
    name: &str,
    (model, src): (&Model, &S),
    dm: (&Model, &SliceStorage),
    job: (&[u32], usize, usize),
    is_end: &dyn Fn(u32) -> bool,
) -> SpecStats {
    let (want, _) = generate(model, src, job, is_end, None);
    let mut text = job.0.to_vec();
    text.extend(&want.0);
    let lookup = Lookup {
        max_n: 3,
        max_draft: 8,
    };
    let (mut lookup1, mut lookup2) = (lookup, lookup);
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
    let mut tree = TreeOracle(right.text.clone());
    let (k, one) = (Kernels::best(), &SingleThread);
    let mut other = ModelDraft::model(dm.0, dm.1, one, k, SHAPE).unwrap();
    let mut other2 = ModelDraft::model(dm.0, dm.1, one, k, SHAPE).unwrap();
    // Its head cut to a third of the vocabulary (the context's tokens added as they come).
    let store = held(dm.0, dm.1);
    let mut cut = cut_draft(dm.0, &store, VOCAB / 3, SHAPE);
    let mut both = Drafts(vec![Box::new(&mut lookup2), Box::new(&mut other2)]);
    let mut stats = vec![];
    // (name, source, layers of the target that guess after it)
    for (what, d, own) in [
        ("lookup", &mut lookup1 as &mut dyn Draft, 0),
        ("oracle", &mut right, 0),
        ("junk", &mut wrong, 0),
        ("self-draft", &mut NoGuess, 1),
        ("draft model", &mut other, 0),
        ("lookup, draft model, self-draft", &mut both, 1),
        ("a tree of decoys and the truth", &mut tree, 0),
        ("the draft model cut to a third of its head", &mut cut, 0),
    ] {
        let greedy = (SamplerConfig::greedy(), 0, own);
        let (got, s) = generate_with(model, src, job, is_end, Some(d), greedy);
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
    if want.0.len() > 4 {
        let t = stats[6];
        assert!(
            t.branched > 0 && t.tokens_per_pass() > 1.5,
            "{name}: tree {t:?}"
        );
    }
    assert_eq!(stats[2].passes, passes_plain, "{name}: junk");
    if want.0.len() > 4 {
        assert!(
            stats[1].tokens_per_pass() > 2.0,
            "{name}: oracle {:?}",
            stats[1]
        );
    }
    eprintln!(
        "{name}: lookup {:?}, self-draft {:?}, draft model {:?}, cut {:?}",
        stats[0], stats[3], stats[4], stats[7]
    );
    stats[0]
}

#[test]
fn speculative_greedy_is_plain_greedy_on_synthetic_models() {
    let never = |_: u32| false;
    for spec in [LLAMA, QWEN3, GEMMA3] {
        let (bytes, model) = synthetic(&spec);
        let src = SliceStorage::new(&bytes);
        let (dbytes, dmodel) = synthetic(&draft_spec(&spec));
        let dm = (&dmodel, &SliceStorage::new(&dbytes));
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
            let s = check_equal(&name, (&model, &src), dm, (prompt, 60, 200), &never);
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
                    (&model, &src),
                    dm,
                    (prompt, 60, 200),
                    &is_end,
                );
            }
            // Token limits inside a round.
            for n in [0, 1, 2, 9] {
                check_equal(
                    &format!("{name}, {n} tokens"),
                    (&model, &src),
                    dm,
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
        let (dbytes, dmodel) = synthetic(&draft_spec(&spec));
        let dm = (&dmodel, &SliceStorage::new(&dbytes));
        let prompt = tokens(20, 5, 1);
        for ctx in [21, 22, 27, 33] {
            let name = format!("{} ctx {ctx}", spec.arch);
            check_equal(&name, (&model, &src), dm, (&prompt, 100, ctx), &never);
            let (plain, _) = generate(&model, &src, (&prompt, 100, ctx), &never, None);
            assert_eq!(plain.1.stop, Some(StopReason::ContextFull), "{name}");
        }
    }
}

/// Softmax of `logits` at temperature `t`, in f64.
fn softmax(logits: &[f32], t: f64) -> Vec<f64> {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let e: Vec<f64> = logits
        .iter()
        .map(|&v| ((v as f64 - max) / t).exp())
        .collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|v| v / sum).collect()
}

/// The exact distributions of the 2nd and 3rd sampled tokens after `prompt` at temperature `t`
/// (no other filter), by feeding every first and second token (rolled back after each).
fn exact_marginals(model: &Model, src: &SliceStorage, prompt: &[u32], t: f64) -> [Vec<f64>; 2] {
    let mut st = RunState::with_batch(model, 64, 1, 16).unwrap();
    feed(model, src, &mut st, prompt);
    let p1 = softmax(&st.logits, t);
    let (base, k) = (st.pos, Kernels::best());
    let mut p2 = vec![0.0; VOCAB];
    let mut p3 = vec![0.0; VOCAB];
    for x in 0..VOCAB {
        st.rollback(base).unwrap();
        model
            .forward(&mut st, src, &SingleThread, &k, x as u32, true)
            .unwrap();
        let q2 = softmax(&st.logits, t);
        for y in 0..VOCAB {
            p2[y] += p1[x] * q2[y];
            st.rollback(base + 1).unwrap();
            model
                .forward(&mut st, src, &SingleThread, &k, y as u32, true)
                .unwrap();
            for (z, q3) in softmax(&st.logits, t).iter().enumerate() {
                p3[z] += p1[x] * q2[y] * q3;
            }
        }
    }
    [p2, p3]
}

/// Pearson's chi-square of `counts` against the distribution `p` (bins expecting fewer than 5
/// pooled), and its degrees of freedom.
fn chi_square(counts: &[usize], p: &[f64]) -> (f64, usize) {
    let n: usize = counts.iter().sum();
    let (mut chi, mut bins, mut pool) = (0.0, 0, (0.0, 0.0));
    for (&c, &q) in counts.iter().zip(p) {
        let e = q * n as f64;
        if e < 5.0 {
            pool = (pool.0 + c as f64, pool.1 + e);
        } else {
            chi += (c as f64 - e).powi(2) / e;
            bins += 1;
        }
    }
    if pool.1 > 0.0 {
        chi += (pool.0 - pool.1).powi(2) / pool.1;
        bins += 1;
    }
    (chi, bins - 1)
}

/// The chi-square value exceeded with probability 1e-4 at `df` degrees of freedom
/// (Wilson-Hilferty: (X/df)^(1/3) is close to normal; z = 3.719 is the normal's 1e-4 tail).
fn chi_square_critical(df: usize) -> f64 {
    let d = df as f64;
    let v = 2.0 / (9.0 * d);
    d * (1.0 - v + 3.719 * v.sqrt()).powi(3)
}

/// Sampling with drafts keeps the sampler's distribution: over 4000 seeds, the 2nd and 3rd
/// tokens (each checked against a self-draft's guess, often taken and often not) follow the
/// exact distributions computed by enumerating every earlier token. Each chi-square test fails a
/// correct sampler with probability 1e-4 (two tests: at most 2e-4 for one seed set; the seeds
/// are fixed, so the outcome is reproducible).
#[test]
fn sampled_speculation_keeps_the_samplers_distribution() {
    let (bytes, model) = synthetic(&QWEN3);
    let src = SliceStorage::new(&bytes);
    let t = 2.0;
    let prompt = tokens(12, 3, 2);
    let exact = exact_marginals(&model, &src, &prompt, t as f64);
    let never = |_: u32| false;
    // The second token's likeliest two, and an unlikely one to be refused first.
    let mut by_p: Vec<usize> = (0..VOCAB).collect();
    by_p.sort_by(|&a, &b| exact[0][b].total_cmp(&exact[0][a]));
    let siblings = [by_p[VOCAB - 1], by_p[0], by_p[1]].map(|t| t as u32);
    // A draft model whose head keeps the 6 lowest ids and the prompt's (most of what the
    // target samples at this temperature is outside it).
    let (dbytes, dmodel) = synthetic(&draft_spec(&QWEN3));
    let dsrc = SliceStorage::new(&dbytes);
    let store = held(&dmodel, &dsrc);
    // Counts of tokens 2 and 3, from the self-draft, a tree of siblings and the cut draft model
    // (seeds in turn).
    let mut counts = vec![vec![vec![0usize; VOCAB]; 2]; 3];
    let mut total = [SpecStats::default(); 3];
    for seed in 0..6000 {
        let cfg = SamplerConfig {
            temperature: t,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed,
            ..SamplerConfig::default()
        };
        let job = (&prompt[..], 3, 64);
        let source = (seed % 3) as usize;
        let (got, s) = match source {
            0 => generate_with(&model, &src, job, &never, Some(&mut NoGuess), (cfg, 3, 1)),
            1 => {
                let mut d = Siblings(siblings.to_vec());
                generate_with(&model, &src, job, &never, Some(&mut d), (cfg, 5, 0))
            }
            _ => {
                let mut d = cut_draft(&dmodel, &store, 6, SHAPE);
                generate_with(&model, &src, job, &never, Some(&mut d), (cfg, 3, 0))
            }
        };
        assert_eq!(got.0.len(), 3);
        counts[source][0][got.0[1] as usize] += 1;
        counts[source][1][got.0[2] as usize] += 1;
        total[source].add(&s);
    }
    let names = ["a self-draft", "a tree of siblings", "a cut draft model"];
    for (source, name) in names.iter().enumerate() {
        let s = total[source];
        let rate = s.acceptance();
        eprintln!("sampled with {name}: {s:?}, acceptance {rate:.3}");
        assert!(s.accepted > 100 && s.accepted < s.drafted, "{name}: {s:?}");
        for (i, (c, p)) in counts[source].iter().zip(&exact).enumerate() {
            let (chi, df) = chi_square(c, p);
            let crit = chi_square_critical(df);
            eprintln!(
                "{name}, token {}: chi-square {chi:.1} at {df} df (1e-4 level: {crit:.1})",
                i + 2
            );
            assert!(
                chi < crit,
                "{name}, token {}: chi-square {chi:.1} >= {crit:.1}",
                i + 2
            );
        }
    }
    // The test can tell: the 3rd token's counts are far from the 2nd's distribution.
    let (chi, df) = chi_square(&counts[0][1], &exact[0]);
    assert!(chi > chi_square_critical(df), "no power: {chi:.1}");
    // A seed gives the same tokens every time.
    let cfg = SamplerConfig {
        temperature: t,
        seed: 11,
        ..SamplerConfig::default()
    };
    let job = (&prompt[..], 20, 64);
    let a = generate_with(&model, &src, job, &never, Some(&mut NoGuess), (cfg, 3, 1));
    let b = generate_with(&model, &src, job, &never, Some(&mut NoGuess), (cfg, 3, 1));
    assert_eq!(a, b);
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
    // The first 24 of 30 layers as the draft, alone and after lookup (a model not trained to
    // exit early drafts poorly from fewer: 0 of 150 guesses taken from 10 layers, 12 of 107 from
    // 24, 29 of 40 from 29).
    let own = (SamplerConfig::greedy(), 0, 24);
    let job = (&prompt[..], 40, 512);
    let (got, s) = generate_with(&model, &src, job, &is_end, Some(&mut NoGuess), own);
    eprintln!("SmolLM2 code edit, self-draft of 24 layers: {s:?}");
    assert_eq!(got.0, want.0, "tokens with the self-draft");
    assert_eq!((got.1.stop, got.2), (want.1.stop, want.2));
    assert!(s.accepted > 0, "{s:?}");
    let (got, s) = generate_with(&model, &src, job, &is_end, Some(&mut lookup), own);
    eprintln!("SmolLM2 code edit, lookup then self-draft: {s:?}");
    assert_eq!(got.0, want.0, "tokens with lookup then the self-draft");
    // The model drafting for itself as a board holds a draft (layers in RAM, its tied head and
    // embedding read from the file), its head cut to the 4096 lowest ids and the context's.
    let store = held(&model, &src);
    let shape = DraftShape { ctx: 512, ..SHAPE };
    let mut d = cut_draft(&model, &store, 4096, shape);
    let plain = (SamplerConfig::greedy(), 0, 0);
    let (got, s) = generate_with(&model, &src, job, &is_end, Some(&mut d), plain);
    eprintln!("SmolLM2 code edit, itself cut to 4096 tokens: {s:?}");
    assert_eq!(got.0, want.0, "tokens with the cut draft");
    assert_eq!((got.1.stop, got.2), (want.1.stop, want.2));
    assert!(s.accepted > 0 && s.accepted < s.drafted, "{s:?}");

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

/// A cut head's scores are the whole head's at the tokens it keeps, bit for bit, after a pass
/// of one token and after a batch, for the lowest ids and for tokens added later; a draft held
/// as a board holds it (layers in RAM, the rest read from the file) reads the file's bytes.
#[test]
fn a_cut_heads_scores_are_the_whole_heads_bit_for_bit() {
    for spec in [LLAMA, QWEN3, GEMMA3] {
        let (bytes, model) = synthetic(&spec);
        let src = SliceStorage::new(&bytes);
        let store = held(&model, &src);
        let mut cut = HeadCut::new(&model, &store, 7, 16).unwrap();
        cut.add(&[31, 12, 3, 31, 39], &store).unwrap();
        assert_eq!(cut.rows(), 10, "{}: 7 lowest and 3 new", spec.arch);
        assert!(cut.contains(39) && !cut.contains(8));
        let ids: Vec<u32> = (0..cut.rows() as u32).map(|i| cut.id(i)).collect();
        assert_eq!(&ids[7..], &[31, 12, 39]);
        let (k, one) = (Kernels::best(), &SingleThread);
        for batch in [&[5u32][..], &[5, 17, 2, 33, 8, 1]] {
            let mut whole = RunState::with_batch(&model, 32, 1, 8).unwrap();
            model
                .forward_layers(&mut whole, (&src, one, &k), batch, spec.layers, true)
                .unwrap();
            let mut st = RunState::with_batch(&model, 32, 1, 8).unwrap();
            model
                .forward_layers(&mut st, (&store, one, &k), batch, spec.layers, false)
                .unwrap();
            let scores = cut
                .logits(&model, &mut st, (one, &k), batch.len() - 1)
                .unwrap();
            let want: Vec<u32> = ids
                .iter()
                .map(|&t| whole.logits[t as usize].to_bits())
                .collect();
            assert_eq!(bits(scores), want, "{} batch of {}", spec.arch, batch.len());
        }
        // The store: every byte of the file, across the edges of what it holds.
        let mut all = vec![0u8; bytes.len()];
        store.read_at(0, &mut all).unwrap();
        assert!(all == bytes, "{}: the store's bytes", spec.arch);
        let l0 = &model.weights.layers[0].wq;
        assert!(store.resident(l0.offset, l0.size as usize).is_some());
        let e = &model.weights.token_embd;
        assert!(store.resident(e.offset, e.size as usize).is_none());
        assert!(store.resident_bytes() < bytes.len() as u64);
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
    let greedy = (SamplerConfig::greedy(), 3, 0);
    let (got, s) = generate_with(&model, &src, job, &never, Some(&mut lookup), greedy);
    assert_eq!(got, want);
    assert!(s.drafted <= 2 * s.passes && s.accepted > 0, "{s:?}");
}

/// A tree pass that keeps only each row's greedy pick gives, on every row, the token greedy
/// sampling takes from the row's full logits (the same tie rule), on every synthetic
/// architecture, the head computed 3 of its 40 rows at a time (12 rows in a pass).
#[test]
fn each_rows_greedy_pick_is_that_of_its_logits() {
    let k = Kernels::best();
    for spec in [&LLAMA, &QWEN2, &QWEN3, &GEMMA3] {
        let (bytes, model) = synthetic(spec);
        let src = SliceStorage::new(&bytes);
        let prompt: Vec<u32> = (0..9).map(|i| (i * 7 + 3) % VOCAB as u32).collect();
        let mut tree = Tree::new(5, 12);
        tree.extend(0, &[6, 7, 8, 9]);
        tree.extend(0, &[11, 2, 2]);
        tree.extend(2, &[30, 31, 0, 39]);
        let mut rows = RunState::with_batch(&model, 64, 1, 16).unwrap();
        let mut best = RunState::with_batch(&model, 64, 1, 16).unwrap();
        rows.keep_row_logits(&model, 16).unwrap();
        for st in [&mut rows, &mut best] {
            model
                .forward_batch(st, &src, &SingleThread, &k, &prompt, false)
                .unwrap();
        }
        model
            .forward_tree(&mut rows, (&src, &SingleThread, &k), &tree)
            .unwrap();
        model
            .forward_tree_best(&mut best, (&src, &SingleThread, &k), &tree)
            .unwrap();
        for r in 0..tree.len() {
            let want = inference::sampler::greedy(rows.row_logits(r, VOCAB).unwrap());
            assert_eq!(best.row_best(r), Some(want), "{} row {r}", spec.arch);
        }
        assert_eq!(best.rows_kept(), 0);
    }
}

/// Greedy without a penalty keeps no rows of logits (each row's greedy pick is computed as the
/// output head is), with the plain loop's output; with a repetition penalty the check needs the
/// logits: they are kept for the rows a pass checks, not the batch. The runtime and the
/// board-sim reserve rows only when a check needs them.
#[test]
fn greedy_checks_keep_no_rows_of_logits() {
    let (bytes, model) = synthetic(&QWEN3);
    let src = SliceStorage::new(&bytes);
    let engine = Engine::new(&model, &src, &SingleThread, Kernels::best());
    let never = |_: u32| false;
    let prompt: Vec<u32> = (0..24).map(|i| [3, 8, 12, 3, 8, 30][i % 6]).collect();
    let penalty = SamplerConfig {
        repeat_penalty: 1.3,
        ..SamplerConfig::greedy()
    };
    for (cfg, keeps) in [(SamplerConfig::greedy(), false), (penalty, true)] {
        let mut st = RunState::with_batch(&model, 200, 1, 16).unwrap();
        let mut sampler = Sampler::new(cfg, VOCAB).unwrap();
        let mut want = vec![];
        let mut on = |t| {
            want.push(t);
            true
        };
        engine
            .generate(&mut st, &mut sampler, &prompt, 40, &never, &|| 0, &mut on)
            .unwrap();
        let mut st = RunState::with_batch(&model, 200, 1, 16).unwrap();
        let mut sampler = Sampler::new(cfg, VOCAB).unwrap();
        let mut lookup = Lookup {
            max_n: 3,
            max_draft: 4,
        };
        let mut got = vec![];
        let mut on = |t| {
            got.push(t);
            true
        };
        let job = (&prompt[..], 40);
        let sources = (&mut lookup as &mut dyn Draft, 4, 0);
        let state = (&mut st, &mut sampler);
        let (_, s) = spec_gen(&engine, state, job, sources, &never, None, &mut on);
        assert_eq!(got, want, "penalty {}", cfg.repeat_penalty);
        assert!(s.accepted > 0, "{s:?}");
        match keeps {
            true => assert!((2..=5).contains(&st.rows_kept()), "{}", st.rows_kept()),
            false => assert_eq!(st.rows_kept(), 0),
        }
    }
    let s = SpecSettings {
        lookup: 3,
        ..SpecSettings::default()
    };
    assert_eq!(s.rows_kept(true, false), 0, "greedy");
    assert_eq!(s.rows_kept(true, true), s.max_guesses() + 1, "JSON mode");
    assert_eq!(s.rows_kept(false, false), s.max_guesses() + 1, "sampled");
    let off = SpecSettings::default();
    assert_eq!(off.rows_kept(false, true), 0, "no source");
}

/// A draft model must share the target's tokenizer: another vocabulary is refused, naming the
/// difference.
#[test]
fn a_draft_model_of_another_vocabulary_is_refused() {
    let (src, g) = common::open(&common::model_path());
    let smol = Tokenizer::from_gguf(&g, &src).unwrap();
    let (qsrc, qg) = common::open(&common::named_model("qwen2.5-coder-0.5b"));
    let qwen = Tokenizer::from_gguf(&qg, &qsrc).unwrap();
    assert_eq!(same_vocabulary(&smol, &smol), Ok(()));
    assert_eq!(same_vocabulary(&qwen, &qwen), Ok(()));
    let e = same_vocabulary(&qwen, &smol).unwrap_err().to_string();
    let want = format!("49152 tokens, the target has {}", qwen.vocab_size());
    assert!(
        e.contains("vocabulary is not the target's") && e.contains(&want),
        "{e}"
    );
}

/// JSON mode with drafts: the constraint masks every checked row as it masks the plain loop's
/// draws, so greedy output is plain greedy JSON mode's token for token, and a sampled reply is
/// still one complete JSON value.
#[test]
fn json_mode_with_drafts_is_json_mode_without() {
    use inference::generate::LogitsFilter;
    use inference::json::JsonConstraint;
    let bytes = std::fs::read(common::model_path()).unwrap();
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).unwrap();
    let model = Model::load(&g, &src).unwrap();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap();
    let text = "<|im_start|>system\nYou answer in JSON.<|im_end|>\n<|im_start|>user\n\
        Give this record as a JSON object with the keys name, age and city: \
        {\"name\": \"Alice Smith\", \"age\": 30, \"city\": \"Paris\"}<|im_end|>\n<|im_start|>assistant\n";
    let prompt = tok.encode(text, true, true).unwrap();
    let engine = Engine::new(&model, &src, &SingleThread, Kernels::best());
    let is_end = |t: u32| tok.is_eog(t);
    let run = |cfg: SamplerConfig, draft: Option<&mut dyn Draft>| {
        let mut st = RunState::with_batch(&model, 256, 1, 16).unwrap();
        let mut sampler = Sampler::new(cfg, model.config.vocab).unwrap();
        let mut json = JsonConstraint::from_tokenizer(&tok).unwrap();
        let mut out = vec![];
        let mut on = |t| {
            out.push(t);
            true
        };
        let f = Some(&mut json as &mut dyn LogitsFilter);
        let (rep, stats) = match draft {
            None => {
                let r = engine.generate_filtered(
                    &mut st,
                    &mut sampler,
                    &prompt,
                    60,
                    &is_end,
                    &|| 0,
                    f,
                    &mut on,
                );
                (r.unwrap(), SpecStats::default())
            }
            Some(d) => spec_gen(
                &engine,
                (&mut st, &mut sampler),
                (&prompt, 60),
                (d, 6, 0),
                &is_end,
                f,
                &mut on,
            ),
        };
        (out, rep.stop, json.is_complete(), stats)
    };
    let greedy = SamplerConfig::greedy();
    let want = run(greedy, None);
    assert!(
        want.2,
        "plain JSON mode did not complete: {:?}",
        tok.decode(&want.0)
    );
    let mut lookup = Lookup {
        max_n: 3,
        max_draft: 6,
    };
    let got = run(greedy, Some(&mut lookup));
    eprintln!(
        "JSON mode, lookup: {:?}: {}",
        got.3,
        String::from_utf8_lossy(&tok.decode(&got.0))
    );
    assert_eq!((&got.0, got.1, got.2), (&want.0, want.1, want.2));
    assert!(got.3.accepted > 0, "{:?}", got.3);
    // The model drafting for itself, its head cut to the 2048 lowest ids and the context's.
    let store = held(&model, &src);
    let shape = DraftShape { ctx: 256, ..SHAPE };
    let mut cut = cut_draft(&model, &store, 2048, shape);
    let got = run(greedy, Some(&mut cut));
    eprintln!("JSON mode, a cut draft: {:?}", got.3);
    assert_eq!((&got.0, got.1, got.2), (&want.0, want.1, want.2));
    assert!(got.3.accepted > 0, "{:?}", got.3);
    let sampled = SamplerConfig {
        temperature: 0.8,
        seed: 9,
        ..SamplerConfig::default()
    };
    let got = run(sampled, Some(&mut lookup));
    assert!(
        got.2,
        "sampled JSON with drafts incomplete: {:?}",
        tok.decode(&got.0)
    );
    let reply = String::from_utf8(tok.decode(&got.0)).unwrap();
    serde_json::from_str::<serde_json::Value>(&reply).unwrap_or_else(|e| panic!("{reply}: {e}"));
}

/// A callback that stops generation (Ctrl-C in a chat) in the middle of a round of accepted
/// guesses: the same tokens, stop and final position as the plain loop stopped at that token.
#[test]
fn a_stop_from_the_callback_mid_round_is_the_plain_loops() {
    let (bytes, model) = synthetic(&LLAMA);
    let src = SliceStorage::new(&bytes);
    let prompt = tokens(20, 7, 3);
    let never = |_: u32| false;
    let (full, _) = generate(&model, &src, (&prompt, 30, 200), &never, None);
    let mut text = prompt.clone();
    text.extend(&full.0);
    let engine = Engine::new(&model, &src, &SingleThread, Kernels::best());
    let run = |stop_after: usize, draft: Option<&mut dyn Draft>| {
        let mut st = RunState::with_batch(&model, 200, 1, 16).unwrap();
        let mut sampler = Sampler::new(SamplerConfig::greedy(), VOCAB).unwrap();
        let mut out = vec![];
        let mut on = |t| {
            out.push(t);
            out.len() < stop_after
        };
        let rep = match draft {
            None => engine.generate(&mut st, &mut sampler, &prompt, 30, &never, &|| 0, &mut on),
            Some(d) => {
                let (job, on) = ((&prompt[..], 30), &mut on);
                Ok(spec_gen(
                    &engine,
                    (&mut st, &mut sampler),
                    job,
                    (d, 6, 0),
                    &never,
                    None,
                    on,
                )
                .0)
            }
        }
        .unwrap();
        (out, rep.stop, rep.generated, st.pos)
    };
    for stop_after in 1..12 {
        let want = run(stop_after, None);
        assert_eq!(want.1, Some(StopReason::Stopped));
        let mut right = Oracle {
            text: text.clone(),
            k: 6,
            junk: false,
        };
        assert_eq!(
            run(stop_after, Some(&mut right)),
            want,
            "stopped after {stop_after}"
        );
    }
}
