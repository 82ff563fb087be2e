//! The rates a token's time rests on, measured on the board for the report: weights through the
//! matrix kernels on one core and on all (the model's own first rows of its first feed-forward
//! matrix, copied to RAM, so the card plays no part), and, from the page cache's plan, what a
//! token reads from the card and what it runs through the kernels. `cargo xtask report` puts
//! them beside what `lmboot-host --board-sim` assumes and recomputes a token's time from them.

use super::super::profile::matvec_rate;
use super::Findings;
use crate::config::Config;
use crate::console::Out;
use crate::pagecache::{FileSource, PageCache};
use crate::platform::Platform;
use core::fmt::Write;
use inference::model::{Model, Part};
use inference::parallel::{Parallel, SingleThread};
use inference::{Kernels, Storage};

/// Bytes of the matrix the rates are measured on: past every board's last-level cache, so the
/// rate is the one weights stream at from RAM.
const MATRIX: u64 = 8 << 20;

/// Measure and record `mv1`, `mvn` (MB/s), `stream` and `weights` (MB a token).
pub(super) fn measure<F: FileSource + Send, P: Platform + ?Sized>(
    cfg: &Config,
    (platform, k): (&P, &Kernels),
    (model, cache): (&Model, &PageCache<F>),
    found: &mut Findings,
    out: &mut Out<'_>,
) {
    let w = &model.weights;
    let whole = Part::whole(model.config.n_layer);
    let stream = super::super::spec::pin_scope(cfg, model, &whole)
        .streamed_per_token(&|o, n| cache.pinned_within(o, n));
    let weights = w.matrices().map(|t| t.size).sum::<u64>() + w.token_embd.row_bytes();
    let (one, all) = kernel_rates(&w.layers[0].w_gate, cache, (platform, k));
    let mb = |b: u64| b / 1_000_000;
    found.field("mv1", mb(one));
    found.field("mvn", mb(all));
    found.field("stream", mb(stream));
    found.field("weights", mb(weights));
    let n = platform.pool().workers();
    let _ = writeln!(
        out,
        "selftest: rates: weights through the kernels ({}) at {} MB/s on one core, {} MB/s on {n}; a token reads {} MB from the card and runs {} MB through the kernels",
        k.name,
        mb(one),
        mb(all),
        mb(stream),
        mb(weights)
    );
}

/// Weight bytes/s through `k`'s kernels on one core and on all working cores, over the first
/// rows of `w` (up to [`MATRIX`] bytes) copied to RAM; 0 where it cannot run (the heap cannot
/// spare the copy, or the card fails to read it).
fn kernel_rates<S: Storage + Sync + ?Sized, P: Platform + ?Sized>(
    w: &inference::gguf::TensorInfo,
    src: &S,
    (platform, k): (&P, &Kernels),
) -> (u64, u64) {
    let rows = (MATRIX / w.row_bytes().max(1)).clamp(1, w.rows());
    let len = rows * w.row_bytes();
    let Ok(mut bytes) = inference::oom::filled(len as usize, 0u8, "the kernel rate's matrix")
    else {
        return (0, 0);
    };
    let Ok(mut m) = w.try_clone() else {
        return (0, 0);
    };
    if src.read_at(w.offset, &mut bytes).is_err() {
        return (0, 0);
    }
    m.offset = 0;
    m.dims[1] = rows;
    m.size = len;
    let one = matvec_rate(&m, &bytes, k, &SingleThread, platform);
    let all = matvec_rate(&m, &bytes, k, platform.pool(), platform);
    (one, all)
}
