//! Speculative decoding on the PC runner: the flags, the draft sources they name, and the
//! `speculation:` line.

use crate::MmapStorage;
use inference::generate::{Engine, GenError, GenReport, LogitsFilter};
use inference::model::{Model, Part, RunState};
use inference::sampler::Sampler;
use inference::speculate::{
    same_vocabulary, Draft, DraftShape, DraftVocab, HeadCut, ModelDraft, SpecSettings, SpecStats,
    Speculator, MAX_LOOKUP,
};
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Storage};

/// Take `arg` into `s` if it is a speculation flag (`val` gives its value): `Ok(false)` if not.
pub fn parse(
    s: &mut SpecSettings,
    arg: &str,
    val: &mut dyn FnMut(&str) -> String,
) -> Result<bool, String> {
    let num = |name: &str, v: String, max: usize| -> Result<usize, String> {
        match v.parse::<usize>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(format!("{name}: {v:?} is not a number from 0 to {max}")),
        }
    };
    let max = inference::quant::MAX_BATCH - 1;
    match arg {
        "--lookup" => s.lookup = num(arg, val(arg), MAX_LOOKUP)?,
        "--self-draft" => s.self_draft = num(arg, val(arg), usize::MAX)?,
        "--draft" => s.draft = Some(val(arg)),
        "--draft-vocab" => {
            let v = val(arg);
            s.draft_vocab = DraftVocab::parse(&v).ok_or(format!(
                "--draft-vocab: {v:?} is not auto, all or 256 or more tokens"
            ))?;
        }
        "--draft-max" => match num(arg, val(arg), max)? {
            0 => return Err(format!("--draft-max: 0 guesses (1 to {max})")),
            k => s.draft_max = k,
        },
        "--speculate" => {
            let v = val(arg);
            s.mode = SpecSettings::parse_mode(&v)
                .ok_or(format!("--speculate: {v:?} is not auto, off or 1 to {max}"))?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A draft model opened beside the target, refused unless it shares the target's vocabulary.
pub struct DraftFile {
    pub src: MmapStorage,
    pub model: Model,
}

impl DraftFile {
    pub fn open(name: &str, target: &Tokenizer) -> Result<DraftFile, String> {
        let what = |e: &dyn std::fmt::Display| format!("--draft {name}: {e}");
        let path = models::cached(name).map_err(|e| what(&e))?;
        let src = MmapStorage::open(&path).map_err(|e| what(&e))?;
        let g = Gguf::open(&src).map_err(|e| what(&e))?;
        let tok = Tokenizer::from_gguf(&g, &src).map_err(|e| what(&e))?;
        same_vocabulary(target, &tok).map_err(|e| what(&e))?;
        let model = Model::load(&g, &src).map_err(|e| what(&e))?;
        Ok(DraftFile { src, model })
    }
}

/// What one speculative generation needs besides the engine.
pub struct Job<'a> {
    pub prompt: &'a [u32],
    pub n: usize,
    pub is_end: &'a dyn Fn(u32) -> bool,
    pub clock: &'a dyn Fn() -> u64,
}

/// Generate with the sources `a` names; the report and the counts.
pub fn generate<S: Storage + Sync>(
    engine: &Engine<'_, S, crate::pool::Pool>,
    st: &mut RunState,
    sampler: &mut Sampler,
    (a, draft): (&SpecSettings, Option<&DraftFile>),
    job: Job<'_>,
    filter: Option<&mut dyn LogitsFilter>,
    on_token: &mut dyn FnMut(u32) -> bool,
) -> Result<(GenReport, SpecStats), String> {
    let shape = DraftShape {
        ctx: st.ctx(),
        batch: st.batch(),
        max_draft: a.max_guesses(),
    };
    let (pool, k) = (engine.pool, engine.kernels);
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let other = match draft {
        Some(d) => {
            let m = ModelDraft::model(&d.model, &d.src, pool, k, shape).map_err(|x| e(&x))?;
            // The PC has the memory: only a count given cuts the head.
            let m = match a.draft_vocab {
                DraftVocab::Lowest(n) => {
                    let cut = HeadCut::new(&d.model, &d.src, n, shape.ctx).map_err(|x| e(&x))?;
                    eprintln!(
                        "draft: head cut to the {} lowest of {} token ids and the context's tokens ({:.1} MB)",
                        cut.lowest(),
                        d.model.config.vocab,
                        cut.bytes() as f64 / 1e6
                    );
                    m.with_cut(cut)
                }
                _ => m,
            };
            Some(Box::new(m) as Box<dyn Draft + '_>)
        }
        None => None,
    };
    a.check_self_draft(engine.model.config.n_layer)?;
    let mut spec = Speculator::new(a, other, None);
    spec.generate(
        engine,
        st,
        sampler,
        (job.prompt, job.n),
        (job.is_end, job.clock),
        filter,
        on_token,
    )
    .map_err(|x: GenError| x.to_string())
}

/// `speculation: 2.31 tokens per target pass, 62% of 211 guesses taken; 41.6 MB of weights per
/// generated token (96.0 MB a pass)`: the weights a board streaming all of them would read.
pub fn line(model: &Model, s: &SpecStats, generated: usize) -> String {
    let per_pass = model.weights.bytes_of(&Part::whole(model.config.n_layer)) as f64 / 1e6;
    // As the boards count: the passes after the first token's, per token after the first.
    let per_token = per_pass * s.passes as f64 / generated.saturating_sub(1).max(1) as f64;
    format!("speculation: {s}; {per_token:.1} MB of weights per generated token ({per_pass:.1} MB a pass)")
}
