//! JSON mode on the real model: sampled replies (temperature 0.8, top-k 40, top-p 0.95, fifty
//! seeds, several questions, a small token budget) are all complete JSON objects or arrays that
//! serde_json parses, and generation stops as soon as the value is complete.
//!
//! Each question's prompt is fed once; every reply restarts from the position of its last token
//! (the KV cache before it is unchanged), so the test costs about one forward pass per generated
//! token.

mod common;
// The PC runner's persistent worker pool (no thread spawned per matrix product).
#[path = "../../host/src/pool.rs"]
mod pool;

use inference::generate::{Engine, LogitsFilter, StopReason};
use inference::json::JsonConstraint;
use inference::model::{Model, RunState};
use inference::sampler::{Sampler, SamplerConfig};
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels, SliceStorage};
use std::time::{Duration, Instant};

const QUESTIONS: &[&str] = &[
    "Describe a cat as a JSON object with name, age and colors.",
    "List three fruits and their colors as JSON.",
    "Give me a JSON object describing a book: title, author, year.",
    "Return the first five prime numbers as a JSON array.",
    "Describe the weather in Paris today as JSON with temperature and conditions.",
];

const MAX_TOKENS: usize = 40;
const REPLIES: u64 = 50;

fn chatml(question: &str) -> String {
    format!(
        "<|im_start|>system\nYou answer in JSON.<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    )
}

/// The constraint with the time spent masking.
struct Timed<'a> {
    json: &'a mut JsonConstraint,
    masking: Duration,
    masks: u32,
}

impl LogitsFilter for Timed<'_> {
    fn apply(&mut self, logits: &mut [f32], remaining: usize) {
        let t = Instant::now();
        let allowed = self.json.mask(logits, remaining);
        self.masking += t.elapsed();
        self.masks += 1;
        assert!(
            allowed > 0,
            "nothing allowed in state {:?}",
            self.json.state()
        );
    }
    fn advance(&mut self, token: u32) -> bool {
        assert!(
            self.json.accept(token),
            "a forbidden token was drawn: {token}"
        );
        self.json.is_complete()
    }
}

#[test]
fn sampled_json_replies_are_always_valid_and_complete() {
    let start = Instant::now();
    // In memory: weights are read in place, without a system call per row.
    let bytes = std::fs::read(common::model_path()).unwrap();
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).unwrap();
    let model = Model::load(&g, &src).unwrap();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap();
    let t = Instant::now();
    let mut json = JsonConstraint::from_tokenizer(&tok).unwrap();
    eprintln!(
        "JSON constraint over {} tokens built in {:?}, {} KiB of tables",
        json.vocab(),
        t.elapsed(),
        json.heap_bytes() >> 10
    );
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let pool = pool::Pool::new(workers);
    let engine = Engine::new(&model, &src, &pool, Kernels::best());
    let mut st = RunState::new(&model, 256, workers).unwrap();
    let prompts: Vec<Vec<u32>> = QUESTIONS
        .iter()
        .map(|q| tok.encode(&chatml(q), true, true).unwrap())
        .collect();
    for p in &prompts {
        // The template's five special tokens were recognised.
        assert_eq!(p.iter().filter(|&&t| tok.is_control(t)).count(), 5);
    }

    let mut masking = Duration::ZERO;
    let mut masks = 0;
    let mut generated = 0;
    let mut by_budget = 0;
    for (qi, prompt) in prompts.iter().enumerate() {
        // The prompt but its last token, once per question.
        let (head, last) = prompt.split_at(prompt.len() - 1);
        st.reset();
        engine.feed(&mut st, head).unwrap();
        for seed in (1..=REPLIES).filter(|s| (s - 1) as usize % QUESTIONS.len() == qi) {
            st.pos = head.len();
            json.reset();
            let cfg = SamplerConfig {
                temperature: 0.8,
                top_k: 40,
                top_p: 0.95,
                seed,
                ..Default::default()
            };
            let mut sampler = Sampler::new(cfg, model.config.vocab).unwrap();
            let mut out = Vec::new();
            let mut filter = Timed {
                json: &mut json,
                masking: Duration::ZERO,
                masks: 0,
            };
            let rep = engine
                .generate_filtered(
                    &mut st,
                    &mut sampler,
                    last,
                    MAX_TOKENS,
                    &|t| tok.is_eog(t),
                    &|| 0,
                    Some(&mut filter),
                    &mut |t| {
                        out.push(t);
                        true
                    },
                )
                .unwrap();
            masking += filter.masking;
            masks += filter.masks;
            generated += rep.generated;
            let text = String::from_utf8(tok.decode(&out))
                .unwrap_or_else(|e| panic!("seed {seed}: not UTF-8: {e}"));
            // Stopped by completion, within the budget.
            assert!(json.is_complete(), "seed {seed}: incomplete {text:?}");
            assert_eq!(rep.stop, Some(StopReason::Stopped), "seed {seed}: {text:?}");
            assert!(rep.generated <= MAX_TOKENS);
            if rep.generated == MAX_TOKENS {
                by_budget += 1;
            }
            let v: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("seed {seed}: serde_json: {e}: {text:?}"));
            assert!(v.is_object() || v.is_array(), "seed {seed}: {text:?}");
            if seed <= 10 || rep.generated == MAX_TOKENS && by_budget <= 3 {
                eprintln!("seed {seed:>2} ({} tokens): {text}", rep.generated);
            }
        }
    }
    eprintln!(
        "{REPLIES} replies, {generated} tokens on {workers} threads ({by_budget} replies closed by the budget of {MAX_TOKENS}); masking {:.2} ms per token over {} tokens of vocabulary; total {:.1} s",
        masking.as_secs_f64() * 1e3 / masks.max(1) as f64,
        json.vocab(),
        start.elapsed().as_secs_f64()
    );
}
