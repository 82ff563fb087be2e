//! NaN or infinity in a weight is found at load and named: the tensor and the block (quantized
//! scales) or the element (float tensors), for every weight type.

mod common;

use inference::model::{check_finite, ModelError};
use inference::{GgmlType, Gguf, SliceStorage};

#[test]
fn non_finite_scales_and_values_are_named() {
    let dir = common::shared().join("fixtures/quant");
    for (name, ty) in common::QUANT_FIXTURES {
        let mut bytes = std::fs::read(dir.join(format!("{name}.gguf"))).unwrap();
        let g = Gguf::open(&SliceStorage::new(&bytes)).unwrap();
        let t = g.require_tensor("w").unwrap().clone();
        assert_eq!(t.ty, ty);
        let mut scratch = vec![0u8; 4096];
        check_finite(&SliceStorage::new(&bytes), &t, &mut scratch)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Poison block 7's (first) scale, or element 7 of a float tensor.
        let bb = ty.block_bytes();
        let at = t.offset as usize
            + 7 * bb
            + match ty {
                GgmlType::Q2K => 80,
                GgmlType::Q3K => 108,
                GgmlType::Q6K => 208,
                _ => 0,
            };
        match ty {
            GgmlType::F32 => bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes()),
            GgmlType::Bf16 => bytes[at..at + 2].copy_from_slice(&0x7f80u16.to_le_bytes()), // +inf
            _ => bytes[at..at + 2].copy_from_slice(&0x7e00u16.to_le_bytes()), // f16 NaN
        }
        let e = check_finite(&SliceStorage::new(&bytes), &t, &mut scratch).unwrap_err();
        match (&e, ty) {
            (
                ModelError::NonFinite { tensor, index: 7 },
                GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16,
            ) => assert_eq!(tensor, "w"),
            (ModelError::NonFiniteScale { tensor, block: 7 }, _) => assert_eq!(tensor, "w"),
            _ => panic!("{name}: wrong error {e:?}"),
        }
        assert!(e.to_string().contains("\"w\""), "{e}");
    }
}

#[test]
fn the_default_model_is_finite() {
    let (src, g) = common::open(&common::model_path());
    let model = inference::model::Model::load(&g, &src).unwrap();
    model
        .weights
        .check_finite(&src, &mut vec![0u8; 64 * 1024])
        .unwrap();
}
