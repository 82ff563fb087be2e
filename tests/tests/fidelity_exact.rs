//! The error budget's switches (`inference::model::exact`, `lmboot-host --exact`, `cargo xtask
//! fidelity`) on the default model.

mod common;

use common::golden;
use inference::model::{Model, RunState};
use inference::parallel::SingleThread;
use inference::Kernels;

/// The error budget accounts for the whole error: with every activation kept in f32, the K/V in
/// f32 and the attention in f64 (`Exact`), the default model's distributions on `smollm2-once`
/// are the float64 reference's up to f32 rounding (mean KL under 1e-4 over the first 8 steps,
/// against about 0.003 as lmboot runs). Host only: the exact path is slow f64 scalar code.
#[test]
fn exact_switches_remove_the_error() {
    use inference::model::exact::Exact;
    let (src, g) = common::open(&common::model_path());
    let model = Model::load(&g, &src).unwrap();
    let case = golden::load("smollm2-once");
    let reference = golden::rows(&case.ref64, model.config.vocab);
    let mut e = Exact::default();
    for s in ["acts", "kv", "attention"] {
        assert!(e.set(s), "{s}");
    }
    assert!(!e.set("everything"));
    let mut st = RunState::new(&model, 128, 1).unwrap();
    st.set_exact(e, &model);
    let k = Kernels::best();
    let n = case.prompt_ids.len();
    for (i, &t) in case.prompt_ids.iter().enumerate() {
        model
            .forward(&mut st, &src, &SingleThread, &k, t, i + 1 == n)
            .unwrap();
    }
    let mut sum = 0.0;
    let steps = 8;
    for (step, &next) in case.generated_ids.iter().take(steps).enumerate() {
        sum += golden::kl(&reference[step], &st.logits);
        model
            .forward(&mut st, &src, &SingleThread, &k, next, true)
            .unwrap();
    }
    let mean = sum / steps as f64;
    eprintln!("smollm2-once with every approximation exact: mean KL {mean:.2e}");
    assert!(mean < 1e-4, "mean KL {mean}");
}
