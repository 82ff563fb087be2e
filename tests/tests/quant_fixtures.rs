//! Every weight type against an independent reference: `../shared/fixtures/quant/*.gguf` hold rows
//! quantized by llama-quantize or the `gguf` Python package, their dequantization by `gguf` (`w_ref`),
//! activations `x`, and the float64 dot products `dot_ref`.

mod common;

use inference::quant;
use inference::{ActBuf, GgmlType, Kernels};

use common::QUANT_FIXTURES as TYPES;

/// llama.cpp's test-quantize-fns bound on |dot - reference| / n for quantized-activation dot products
/// (MAX_DOT_PRODUCT_ERROR, and MAX_DOT_PRODUCT_ERROR_LOWBIT for 2- and 3-bit types).
fn llama_cpp_dot_bound(ty: GgmlType) -> f64 {
    match ty {
        GgmlType::Q2K | GgmlType::Q3K => 0.04,
        _ => 0.02,
    }
}

/// The scale of the sum `w · x`, Σ |w_i · x_i| in float64: what an error is relative to.
fn scale(w: &[f32], x: &[f32]) -> f64 {
    w.iter()
        .zip(x)
        .map(|(&w, &x)| (w as f64 * x as f64).abs())
        .sum()
}

struct Fixture {
    w: Vec<u8>,
    rows: usize,
    n: usize,
    w_ref: Vec<f32>,
    x: Vec<f32>,
    dot_ref: Vec<f32>,
}

fn load(name: &str, ty: GgmlType) -> Fixture {
    let path = common::shared()
        .join("fixtures/quant")
        .join(format!("{name}.gguf"));
    let (src, g) = common::open(&path);
    let t = g.require_tensor("w").unwrap().clone();
    assert_eq!(t.ty, ty, "{name}: tensor w has type {}", t.ty);
    let fx = Fixture {
        w: common::tensor_bytes(&src, &g, "w"),
        rows: t.rows() as usize,
        n: t.row_len() as usize,
        w_ref: common::tensor_f32(&src, &g, "w_ref"),
        x: common::tensor_f32(&src, &g, "x"),
        dot_ref: common::tensor_f32(&src, &g, "dot_ref"),
    };
    assert_eq!((fx.rows, fx.n), (4, 1536), "{name}: unexpected shape");
    assert_eq!(fx.w_ref.len(), fx.rows * fx.n);
    assert_eq!(fx.x.len(), fx.n);
    assert_eq!(fx.dot_ref.len(), fx.rows);
    fx
}

#[test]
fn dequantize_matches_reference_for_all_types() {
    for (name, ty) in TYPES {
        let fx = load(&name, ty);
        let rb = fx.w.len() / fx.rows;
        let mut out = vec![0f32; fx.n];
        let (mut exact, mut worst) = (0usize, 0f64);
        for r in 0..fx.rows {
            quant::dequantize_row(ty, &fx.w[r * rb..(r + 1) * rb], &mut out);
            for (i, (&a, &b)) in out
                .iter()
                .zip(&fx.w_ref[r * fx.n..(r + 1) * fx.n])
                .enumerate()
            {
                if a.to_bits() == b.to_bits() || a == b {
                    exact += 1;
                    continue;
                }
                let rel = ((a - b).abs() / b.abs().max(f32::MIN_POSITIVE)) as f64;
                worst = worst.max(rel);
                assert!(
                    rel <= 1e-6,
                    "{name}: row {r} element {i}: {a} vs reference {b} (relative {rel:e})"
                );
            }
        }
        eprintln!(
            "{name:>5}: dequantized {} values, {exact} bit-exact, worst relative error {worst:e}",
            fx.rows * fx.n
        );
    }
}

#[test]
fn quantized_activation_dot_products_match_reference() {
    let kernels = Kernels::SCALAR;
    for (name, ty) in TYPES {
        let fx = load(&name, ty);
        let mut acts = ActBuf::with_capacity(fx.n);
        acts.quantize(ty.act_format(), &fx.x).unwrap();
        let mut out = vec![0f32; fx.rows];
        kernels
            .dot_rows(ty, fx.n, &fx.w, &acts.acts().unwrap(), &mut out)
            .unwrap();
        for r in 0..fx.rows {
            let (got, want) = (out[r] as f64, fx.dot_ref[r] as f64);
            let mag = scale(&fx.w_ref[r * fx.n..(r + 1) * fx.n], &fx.x);
            let per_elem = (got - want).abs() / fx.n as f64;
            let rel = (got - want).abs() / mag;
            eprintln!(
                "{name:>5} row {r}: dot {got:>12.5} ref {want:>12.5}  |err|/n {per_elem:.2e} (llama.cpp bound {:.2}), |err|/sum|w*x| {rel:.2e}",
                llama_cpp_dot_bound(ty)
            );
            assert!(
                per_elem <= llama_cpp_dot_bound(ty),
                "{name} row {r}: {got} vs {want}"
            );
            // Much stricter than llama.cpp's own bound (measured worst: 6.3e-4 for 8-bit activations,
            // 3.9e-4 for bf16, 1.6e-5 for f16): a wrong scale, sign or nibble order is far above these.
            let bound = match ty.act_format() {
                inference::ActFormat::F32 => 1e-6,
                inference::ActFormat::F16 => 1e-4,
                inference::ActFormat::Bf16 => 2e-3,
                _ => 2e-3,
            };
            assert!(
                rel <= bound,
                "{name} row {r}: relative error {rel:e} > {bound:e}"
            );
        }
    }
}

#[test]
fn float_activation_dot_products_match_reference() {
    for (name, ty) in TYPES {
        let fx = load(&name, ty);
        let rb = fx.w.len() / fx.rows;
        for r in 0..fx.rows {
            let got = quant::vec_dot_f32_ref(ty, &fx.w[r * rb..(r + 1) * rb], &fx.x) as f64;
            let want = fx.dot_ref[r] as f64;
            let mag = scale(&fx.w_ref[r * fx.n..(r + 1) * fx.n], &fx.x);
            let rel = (got - want).abs() / mag;
            assert!(
                rel <= 1e-6,
                "{name} row {r}: f32 dot {got} vs reference {want} (relative {rel:e})"
            );
        }
    }
}

#[test]
fn dot_rows_rejects_mismatched_arguments() {
    let fx = load("q4_1", GgmlType::Q4_1);
    let mut acts = ActBuf::with_capacity(fx.n);
    acts.quantize(inference::ActFormat::Q8_0, &fx.x).unwrap();
    let mut out = vec![0f32; fx.rows];
    let k = Kernels::SCALAR;
    // Wrong activation format for the weight type.
    assert!(matches!(
        k.dot_rows(GgmlType::Q4_1, fx.n, &fx.w, &acts.acts().unwrap(), &mut out),
        Err(inference::quant::KernelError::ActFormat { .. })
    ));
    acts.quantize(inference::ActFormat::Q8_1, &fx.x).unwrap();
    // Row bytes that are not whole rows.
    assert!(matches!(
        k.dot_rows(
            GgmlType::Q4_1,
            fx.n,
            &fx.w[..fx.w.len() - 1],
            &acts.acts().unwrap(),
            &mut out
        ),
        Err(inference::quant::KernelError::RowLength { .. })
    ));
    // Activation length different from the row length.
    acts.quantize(inference::ActFormat::Q8_1, &fx.x[..fx.n - 32])
        .unwrap();
    assert!(matches!(
        k.dot_rows(GgmlType::Q4_1, fx.n, &fx.w, &acts.acts().unwrap(), &mut out),
        Err(inference::quant::KernelError::ActLength { .. })
    ));
    // Activations whose length is not whole blocks.
    assert!(acts
        .quantize(inference::ActFormat::Q8K, &fx.x[..100])
        .is_err());
}

/// The activations as the kernel sees them: each quantized value times its block scale.
fn dequantized_acts(acts: &inference::Acts<'_>) -> Vec<f64> {
    use inference::Acts;
    match acts {
        Acts::F32(v) => v.iter().map(|&x| x as f64).collect(),
        Acts::F16(v) => v.iter().map(|&h| half_to_f64(h)).collect(),
        Acts::Bf16(v) => v
            .iter()
            .map(|&h| f32::from_bits((h as u32) << 16) as f64)
            .collect(),
        Acts::Q8_0(b) => b
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| q as f64 * b.d as f64))
            .collect(),
        Acts::Q8_1(b) => b
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| q as f64 * b.d as f64))
            .collect(),
        Acts::Q8K(b) => b
            .iter()
            .flat_map(|b| b.qs.iter().map(move |&q| q as f64 * b.d as f64))
            .collect(),
    }
}

fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f64;
    sign * if exp == 0 {
        man * 2f64.powi(-24)
    } else {
        (1.0 + man / 1024.0) * 2f64.powi(exp - 15)
    }
}

/// The integer kernels compute exactly sum(w_ref * a) for the dequantized weights and activations,
/// up to float rounding of the per-block sums (and, for Q8_1, of the f16 `s` term): this isolates the
/// kernels' bit unpacking from the activation quantization error.
#[test]
fn integer_kernels_equal_their_dequantized_arithmetic() {
    for (name, ty) in TYPES {
        let fx = load(&name, ty);
        let mut acts = ActBuf::with_capacity(fx.n);
        acts.quantize(ty.act_format(), &fx.x).unwrap();
        let a = acts.acts().unwrap();
        let aq = dequantized_acts(&a);
        let mut out = vec![0f32; fx.rows];
        Kernels::SCALAR
            .dot_rows(ty, fx.n, &fx.w, &a, &mut out)
            .unwrap();
        for r in 0..fx.rows {
            let wr = &fx.w_ref[r * fx.n..(r + 1) * fx.n];
            let exact: f64 = wr.iter().zip(&aq).map(|(&w, &x)| w as f64 * x).sum();
            let mag: f64 = wr
                .iter()
                .zip(&aq)
                .map(|(&w, &x)| (w as f64 * x).abs())
                .sum();
            let rel = (out[r] as f64 - exact).abs() / mag;
            let bound = if ty.act_format() == inference::ActFormat::Q8_1 {
                1e-4
            } else {
                1e-5
            };
            assert!(
                rel <= bound,
                "{name} row {r}: kernel {} vs exact {exact} (relative {rel:e})",
                out[r]
            );
        }
    }
}

/// llama.cpp's `kvalues_iq4nl`, written out here apart from the library's copy.
const IQ4_NL_GRID: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// A GGUF file (version 3, no metadata) with one tensor `w` of `dims` (innermost first), GGUF
/// type `ty`, holding `data`.
fn gguf_with(ty: u32, dims: &[u64], data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.push(b'w');
    b.extend((dims.len() as u32).to_le_bytes());
    for d in dims {
        b.extend(d.to_le_bytes());
    }
    b.extend(ty.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.resize(b.len().next_multiple_of(32), 0);
    b.extend(data);
    b
}

/// IQ4_NL (GGUF type 20), which has no shared fixture: a tensor written into a GGUF file is read
/// back as IQ4_NL and dequantizes to `d · grid[nibble]` (low nibbles elements 0..16 of a block,
/// high nibbles 16..32); its dot products with Q8_0 activations are, in every set this CPU runs,
/// the scalar set's bits and close to the exact sum.
#[test]
fn iq4_nl_tensor_dequantizes_to_known_values() {
    let (n, rows) = (64usize, 2usize);
    // Block k: d = 2^(k - 2) (exact in f16 and in every product), byte j holds nibbles
    // (j + k) % 16 (low) and 15 - j (high).
    let (mut data, mut want) = (Vec::new(), Vec::new());
    for k in 0..rows * n / 32 {
        let d = (2.0f32).powi(k as i32 - 2);
        data.extend((((k as u16) + 13) << 10).to_le_bytes());
        let lo: Vec<usize> = (0..16).map(|j| (j + k) % 16).collect();
        let hi: Vec<usize> = (0..16).map(|j| 15 - j).collect();
        data.extend((0..16).map(|j| (lo[j] | hi[j] << 4) as u8));
        want.extend(lo.iter().chain(&hi).map(|&q| d * IQ4_NL_GRID[q] as f32));
    }
    let file = gguf_with(20, &[n as u64, rows as u64], &data);
    let src = inference::SliceStorage::new(&file);
    let g = inference::Gguf::open(&src).unwrap();
    let t = g.require_tensor("w").unwrap().clone();
    assert_eq!((t.ty.id(), t.ty.name()), (20, "IQ4_NL"));
    assert_eq!(t.size as usize, rows * n / 32 * 18);
    let w = &file[t.offset as usize..(t.offset + t.size) as usize];
    let mut got = vec![0f32; rows * n];
    quant::dequantize_row(t.ty, w, &mut got);
    assert_eq!(got, want);

    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0)
        .collect();
    let mut acts = ActBuf::with_capacity(n);
    acts.quantize(t.ty.act_format(), &x).unwrap();
    let a = acts.acts().unwrap();
    let mut reference = vec![0f32; rows];
    Kernels::SCALAR
        .dot_rows(t.ty, n, w, &a, &mut reference)
        .unwrap();
    for r in 0..rows {
        let wr = &want[r * n..(r + 1) * n];
        let exact: f64 = wr.iter().zip(&x).map(|(&w, &x)| w as f64 * x as f64).sum();
        let rel = (reference[r] as f64 - exact).abs() / scale(wr, &x);
        assert!(
            rel <= 2e-3,
            "row {r}: {} vs exact {exact} (relative {rel:e})",
            reference[r]
        );
    }
    for k in Kernels::available() {
        let mut out = vec![0f32; rows];
        k.dot_rows(t.ty, n, w, &a, &mut out).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&out), bits(&reference), "{}", k.name);
    }
}
