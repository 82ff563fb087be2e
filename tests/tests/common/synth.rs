//! Writing small GGUF files: metadata and F32 tensors, laid out with 32-byte alignment.

pub enum Meta {
    U32(u32),
    F32(f32),
    Str(String),
    /// A value of GGUF type `ty` as its encoded bytes (copied from another file: arrays and the
    /// types above alike).
    Raw {
        ty: u32,
        bytes: Vec<u8>,
    },
    /// An array of strings (GGUF type 9 of type 8).
    Strs(Vec<String>),
    /// An array of f32 (GGUF type 9 of type 6).
    F32s(Vec<f32>),
    /// An array of i32 (GGUF type 9 of type 5).
    I32s(Vec<i32>),
}

#[derive(Default)]
pub struct GgufWriter {
    meta: Vec<(String, Meta)>,
    tensors: Vec<(String, Vec<u64>, Vec<f32>)>,
    /// Bytes of zeros between the tensor table and the first tensor's data.
    gap: u64,
}

impl GgufWriter {
    pub fn meta(&mut self, k: &str, v: Meta) -> &mut Self {
        self.meta.push((k.into(), v));
        self
    }
    /// An F32 tensor with dims innermost first; `data.len()` must be their product.
    pub fn tensor(&mut self, name: &str, dims: &[u64], data: Vec<f32>) -> &mut Self {
        assert_eq!(dims.iter().product::<u64>() as usize, data.len(), "{name}");
        self.tensors.push((name.into(), dims.to_vec(), data));
        self
    }
    pub fn remove_tensor(&mut self, name: &str) -> &mut Self {
        self.tensors.retain(|t| t.0 != name);
        self
    }
    pub fn tensor_data(&mut self, name: &str) -> &mut Vec<f32> {
        &mut self.tensors.iter_mut().find(|t| t.0 == name).unwrap().2
    }
    /// Put `bytes` (a multiple of 32) of zeros before the tensor data: with a gap past 4 GiB every
    /// tensor lies past 4 GiB. Read such a file with [`GgufWriter::parts`].
    pub fn gap(&mut self, bytes: u64) -> &mut Self {
        assert_eq!(bytes % 32, 0);
        self.gap = bytes;
        self
    }
    /// The file.
    pub fn bytes(&self) -> Vec<u8> {
        let (mut b, gap, data) = self.parts();
        b.resize(b.len() + usize::try_from(gap).unwrap(), 0);
        b.extend(data);
        b
    }
    /// The file as (header and tensor table, bytes of zeros, tensor data), for a file with a gap
    /// too large to hold.
    pub fn parts(&self) -> (Vec<u8>, u64, Vec<u8>) {
        let mut b = Vec::new();
        let s = |b: &mut Vec<u8>, x: &str| {
            b.extend((x.len() as u64).to_le_bytes());
            b.extend(x.as_bytes());
        };
        b.extend(b"GGUF");
        b.extend(3u32.to_le_bytes());
        b.extend((self.tensors.len() as u64).to_le_bytes());
        b.extend((self.meta.len() as u64).to_le_bytes());
        for (k, v) in &self.meta {
            s(&mut b, k);
            match v {
                Meta::U32(x) => {
                    b.extend(4u32.to_le_bytes());
                    b.extend(x.to_le_bytes());
                }
                Meta::F32(x) => {
                    b.extend(6u32.to_le_bytes());
                    b.extend(x.to_le_bytes());
                }
                Meta::Str(x) => {
                    b.extend(8u32.to_le_bytes());
                    s(&mut b, x);
                }
                Meta::Raw { ty, bytes } => {
                    b.extend(ty.to_le_bytes());
                    b.extend(bytes);
                }
                Meta::Strs(xs) => {
                    array_header(&mut b, 8, xs.len());
                    for x in xs {
                        s(&mut b, x);
                    }
                }
                Meta::F32s(xs) => {
                    array_header(&mut b, 6, xs.len());
                    xs.iter().for_each(|x| b.extend(x.to_le_bytes()));
                }
                Meta::I32s(xs) => {
                    array_header(&mut b, 5, xs.len());
                    xs.iter().for_each(|x| b.extend(x.to_le_bytes()));
                }
            }
        }
        let mut off = self.gap;
        for (name, dims, data) in &self.tensors {
            s(&mut b, name);
            b.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                b.extend(d.to_le_bytes());
            }
            b.extend(0u32.to_le_bytes()); // F32
            b.extend(off.to_le_bytes());
            off += (data.len() as u64 * 4).next_multiple_of(32);
        }
        while b.len() % 32 != 0 {
            b.push(0);
        }
        let mut d = Vec::new();
        for (_, _, data) in &self.tensors {
            for v in data {
                d.extend(v.to_le_bytes());
            }
            while d.len() % 32 != 0 {
                d.push(0);
            }
        }
        (b, self.gap, d)
    }
}

/// The type tag of an array (9), its element type and its length.
fn array_header(b: &mut Vec<u8>, elem: u32, len: usize) {
    b.extend(9u32.to_le_bytes());
    b.extend(elem.to_le_bytes());
    b.extend((len as u64).to_le_bytes());
}
