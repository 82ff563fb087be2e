//! The GGUF reader on the real default model (SmolLM2-135M-Instruct Q4_1), read through the
//! byte-range storage trait, and matrix-vector products over its weights.

mod common;

use inference::matvec::{matvec, read_row_f32};
use inference::quant;
use inference::storage::FileStorage;
use inference::{ActBuf, GgmlType, Gguf, Kernels, SliceStorage, Storage, StorageError};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts what goes through the storage trait.
struct Counting<S> {
    inner: S,
    reads: AtomicU64,
    bytes: AtomicU64,
    max_end: AtomicU64,
}

impl<S: Storage> Storage for Counting<S> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.max_end
            .fetch_max(offset + buf.len() as u64, Ordering::Relaxed);
        self.inner.read_at(offset, buf)
    }
}

#[test]
fn reads_the_default_models_metadata_and_tensor_table() {
    let path = common::model_path();
    let src = Counting {
        inner: FileStorage::open(&path).unwrap(),
        reads: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        max_end: AtomicU64::new(0),
    };
    let g = Gguf::open(&src).unwrap();

    // Only the header region was read, through the trait, in buffered chunks (the 8 KiB read-ahead
    // buffer may reach a little past the table): no tensor data beyond that.
    let (reads, bytes, end) = (
        src.reads.load(Ordering::Relaxed),
        src.bytes.load(Ordering::Relaxed),
        src.max_end.load(Ordering::Relaxed),
    );
    eprintln!(
        "header: {reads} reads, {bytes} bytes, highest byte {end}, data starts at {}",
        g.data_offset
    );
    assert!(
        end <= g.data_offset + 8192,
        "reader touched tensor data (up to byte {end})"
    );
    assert!(bytes <= g.data_offset + 8192, "header read {bytes} bytes");
    assert_eq!(g.file_len, xtask::MODEL_BYTES);

    // Metadata.
    assert_eq!(g.version, 3);
    assert_eq!(g.architecture().unwrap(), "llama");
    assert_eq!(g.get_u64(&g.arch_key("block_count").unwrap()).unwrap(), 30);
    assert_eq!(g.get_u64("llama.embedding_length").unwrap(), 576);
    assert_eq!(g.get_u64("llama.feed_forward_length").unwrap(), 1536);
    assert_eq!(g.get_u64("llama.attention.head_count").unwrap(), 9);
    assert_eq!(g.get_u64("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(g.get_u64("llama.context_length").unwrap(), 8192);
    assert_eq!(g.get_u64("llama.vocab_size").unwrap(), 49152);
    assert_eq!(g.get_u64("llama.rope.dimension_count").unwrap(), 64);
    assert_eq!(g.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert_eq!(
        g.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap(),
        1e-5
    );
    assert_eq!(g.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(g.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    assert_eq!(g.get_u64("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert_eq!(g.get_u64("tokenizer.ggml.eos_token_id").unwrap(), 2);
    assert!(!g.get_bool("tokenizer.ggml.add_bos_token").unwrap());
    assert!(g
        .get_str("tokenizer.chat_template")
        .unwrap()
        .contains("<|im_start|>"));
    assert_eq!(g.alignment, 32);

    // Arrays, read lazily through the trait.
    let array = |key| g.array(&src, key).unwrap();
    let tokens = array("tokenizer.ggml.tokens").strings().unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens[1], "<|im_start|>");
    assert_eq!(tokens[2], "<|im_end|>");
    let merges = array("tokenizer.ggml.merges").strings().unwrap();
    assert_eq!(merges.len(), 48900);
    let types = array("tokenizer.ggml.token_type").ints().unwrap();
    assert_eq!(types.len(), 49152);
    // Typed accessor errors name the key.
    assert!(g.get_str("llama.block_count").is_err());
    assert!(g.get_u64("no.such.key").is_err());
    assert!(array("tokenizer.ggml.token_type").strings().is_err());

    // Tensor table: 272 tensors with the right types and shapes.
    assert_eq!(g.tensors.len(), 272);
    let count = |ty| g.tensors.iter().filter(|t| t.ty == ty).count();
    assert_eq!(count(GgmlType::Q4_1), 30 * 7);
    assert_eq!(count(GgmlType::F32), 30 * 2 + 1);
    assert_eq!(count(GgmlType::Q8_0), 1);
    let emb = g.require_tensor("token_embd.weight").unwrap();
    assert_eq!(
        (emb.ty, emb.shape()),
        (GgmlType::Q8_0, &[576u64, 49152][..])
    );
    assert_eq!(emb.offset, g.data_offset);
    assert_eq!(emb.size, 49152 * 576 / 32 * 34);
    assert!(
        g.tensor("output.weight").is_none(),
        "SmolLM2 ties the output head to token_embd"
    );
    let norm = g.require_tensor("output_norm.weight").unwrap();
    assert_eq!((norm.ty, norm.shape()), (GgmlType::F32, &[576u64][..]));
    for l in 0..30 {
        let shape = |n: &str| {
            let t = g.require_tensor(&format!("blk.{l}.{n}.weight")).unwrap();
            (t.ty, t.shape().to_vec())
        };
        assert_eq!(shape("attn_norm"), (GgmlType::F32, vec![576]));
        assert_eq!(shape("ffn_norm"), (GgmlType::F32, vec![576]));
        assert_eq!(shape("attn_q"), (GgmlType::Q4_1, vec![576, 576]));
        assert_eq!(shape("attn_k"), (GgmlType::Q4_1, vec![576, 192]));
        assert_eq!(shape("attn_v"), (GgmlType::Q4_1, vec![576, 192]));
        assert_eq!(shape("attn_output"), (GgmlType::Q4_1, vec![576, 576]));
        assert_eq!(shape("ffn_gate"), (GgmlType::Q4_1, vec![576, 1536]));
        assert_eq!(shape("ffn_up"), (GgmlType::Q4_1, vec![576, 1536]));
        assert_eq!(shape("ffn_down"), (GgmlType::Q4_1, vec![1536, 576]));
    }
    // Offsets: aligned, inside the file, back to back (each tensor padded to the alignment).
    let mut by_offset: Vec<_> = g.tensors.iter().collect();
    by_offset.sort_by_key(|t| t.offset);
    for w in by_offset.windows(2) {
        assert_eq!(
            w[1].offset,
            (w[0].offset + w[0].size).next_multiple_of(32),
            "{} -> {}",
            w[0].name,
            w[1].name
        );
    }
    let last = by_offset.last().unwrap();
    assert_eq!(last.offset + last.size, g.file_len);
    assert!(g
        .tensors
        .iter()
        .all(|t| (t.offset - g.data_offset).is_multiple_of(g.alignment)));
}

/// A matrix-vector product read through the file (chunked into a small scratch buffer), the same
/// product over resident bytes, split into uneven row ranges, all equal; and equal to a float64
/// product of the dequantized weights within the 8-bit activation error.
#[test]
fn matvec_over_storage_matches_in_memory_and_reference() {
    let path = common::model_path();
    let (file, g) = common::open(&path);
    let whole = std::fs::read(&path).unwrap();
    let mem = SliceStorage::new(&whole);
    let k = Kernels::SCALAR;
    for name in [
        "blk.0.attn_q.weight",
        "blk.3.ffn_down.weight",
        "blk.29.attn_k.weight",
    ] {
        let w = g.require_tensor(name).unwrap();
        let n = w.row_len() as usize;
        let rows = w.rows() as usize;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.5)
            .collect();
        let mut acts = ActBuf::with_capacity(n);
        acts.quantize(w.ty.act_format(), &x).unwrap();
        let a = acts.acts().unwrap();

        let mut resident = vec![0f32; rows];
        matvec(&k, &mem, w, 0..rows, &a, &mut resident, &mut []).unwrap();

        // Through the file: a scratch buffer of 3 rows and a bit, ranges that do not divide evenly.
        let mut scratch = vec![0u8; 3 * w.row_bytes() as usize + 5];
        let mut streamed = vec![0f32; rows];
        let cuts = [0, 1, 17, rows / 2, rows - 3, rows];
        for c in cuts.windows(2) {
            matvec(
                &k,
                &file,
                w,
                c[0]..c[1],
                &a,
                &mut streamed[c[0]..c[1]],
                &mut scratch,
            )
            .unwrap();
        }
        assert_eq!(
            resident, streamed,
            "{name}: streamed and resident products differ"
        );

        // Against the dequantized weights in float64.
        let rb = w.row_bytes() as usize;
        let mut row = vec![0f32; n];
        for r in 0..rows {
            let off = w.offset as usize + r * rb;
            quant::dequantize_row(w.ty, &whole[off..off + rb], &mut row);
            let exact: f64 = row.iter().zip(&x).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mag: f64 = row
                .iter()
                .zip(&x)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            assert!(
                (resident[r] as f64 - exact).abs() <= 2e-3 * mag,
                "{name} row {r}: {} vs {exact} (scale {mag})",
                resident[r]
            );
        }
    }

    // Errors, not panics: a scratch buffer smaller than a row, rows outside the tensor.
    let w = g.require_tensor("blk.0.attn_q.weight").unwrap();
    let mut acts = ActBuf::with_capacity(576);
    acts.quantize(w.ty.act_format(), &[0.5; 576]).unwrap();
    let a = acts.acts().unwrap();
    let mut out = vec![0f32; 4];
    assert!(matvec(&k, &file, w, 0..4, &a, &mut out, &mut [0u8; 10]).is_err());
    assert!(matvec(&k, &file, w, 574..578, &a, &mut out, &mut [0u8; 4096]).is_err());
    assert!(matvec(&k, &file, w, 0..3, &a, &mut out, &mut [0u8; 4096]).is_err());
}

/// The embedding lookup reads one row only and dequantizes it exactly.
#[test]
fn embedding_row_lookup_reads_one_row() {
    let path = common::model_path();
    let (file, g) = common::open(&path);
    let emb = g.require_tensor("token_embd.weight").unwrap();
    let counting = Counting {
        inner: file,
        reads: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        max_end: AtomicU64::new(0),
    };
    let mut row = vec![0f32; 576];
    let mut scratch = vec![0u8; emb.row_bytes() as usize];
    read_row_f32(&counting, emb, 9690, &mut row, &mut scratch).unwrap();
    assert_eq!(counting.bytes.load(Ordering::Relaxed), emb.row_bytes());
    assert_eq!(counting.reads.load(Ordering::Relaxed), 1);
    let whole = std::fs::read(&path).unwrap();
    let off = (emb.offset + 9690 * emb.row_bytes()) as usize;
    let mut want = vec![0f32; 576];
    quant::dequantize_row(
        emb.ty,
        &whole[off..off + emb.row_bytes() as usize],
        &mut want,
    );
    assert_eq!(row, want);
    assert!(row.iter().any(|&v| v != 0.0));
    assert!(read_row_f32(&counting, emb, 49152, &mut row, &mut scratch).is_err());
}
