//! Teacher-forced agreement with llama.cpp and the float64 reference (`../shared/README.md`, "What
//! matches llama.cpp means"): fed each case's prompt and then llama.cpp's generated tokens, every
//! step's distribution is within 0.05 nats (KL from the reference) and 0.005 on average, and the best
//! token is llama.cpp's wherever the reference's top-2 margin is at least 0.5. Every case in
//! `shared/golden` (the default model's, and `models/`: Qwen2.5-Coder-0.5B and Gemma-3-270M, each
//! fetched by name into the cache).

mod common;

use common::golden;
use inference::model::{Model, RunState};
use inference::parallel::SingleThread;
use inference::Kernels;

#[test]
fn teacher_forced_kl_against_float64_reference() {
    let mut report = String::new();
    for (path, cases) in common::cases_by_model() {
        check_model(&path, &cases, &mut report);
    }
    eprintln!("\n{report}");
}

/// The KL rule on every case of one model; a line per case into `report`.
fn check_model(path: &std::path::Path, cases: &[golden::Case], report: &mut String) {
    let (src, g) = common::open(path);
    let model = Model::load(&g, &src).unwrap();
    let vocab = model.config.vocab;
    let k = Kernels::best();
    for case in cases {
        let reference = golden::rows(&case.ref64, vocab);
        assert_eq!(
            reference.len(),
            case.generated_ids.len(),
            "{}: reference rows",
            case.name
        );
        // The prompt in batches of 32 (bit for bit the logits of one token at a time).
        let mut st = RunState::with_batch(&model, 512, 1, 32).unwrap();
        let chunks: Vec<&[u32]> = case.prompt_ids.chunks(32).collect();
        for (i, c) in chunks.iter().enumerate() {
            model
                .forward_batch(&mut st, &src, &SingleThread, &k, c, i + 1 == chunks.len())
                .unwrap();
        }
        let (mut max_kl, mut sum_kl, mut argmax_checked) = (0f64, 0f64, 0);
        for (step, &next) in case.generated_ids.iter().enumerate() {
            // st.logits: the distribution step `step` chose from.
            let kl = golden::kl(&reference[step], &st.logits);
            max_kl = max_kl.max(kl);
            sum_kl += kl;
            let (ref_best, margin) = golden::top2(&reference[step]);
            let (our_best, _) = golden::top2(&st.logits);
            if margin >= 0.5 {
                argmax_checked += 1;
                assert_eq!(
                    our_best as u32, case.generated_ids[step],
                    "{} step {step}: best token {our_best}, llama.cpp chose {} (reference best {ref_best}, margin {margin})",
                    case.name, case.generated_ids[step]
                );
            }
            assert!(kl <= 0.05, "{} step {step}: KL {kl} > 0.05", case.name);
            if step + 1 < case.generated_ids.len() {
                model
                    .forward(&mut st, &src, &SingleThread, &k, next, true)
                    .unwrap();
            }
        }
        let mean = sum_kl / case.generated_ids.len() as f64;
        let line = format!(
            "{:<24} steps {:>3}  KL max {max_kl:.4}  mean {mean:.4}  argmax checked on {argmax_checked} steps\n",
            case.name,
            case.generated_ids.len()
        );
        eprint!("{line}");
        report.push_str(&line);
        assert!(mean <= 0.005, "{}: mean KL {mean} > 0.005", case.name);
    }
}
