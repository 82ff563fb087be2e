//! Matrix-vector products (and matrix × a batch of vectors) over a weight tensor read through
//! [`Storage`], row range by row range.
//!
//! The worker pool gives each core a row range; each range is computed from bytes borrowed in place
//! when the storage has them resident, or read in chunks of whole rows into the caller's scratch buffer.
//! No allocation here.

use crate::gguf::TensorInfo;
use crate::quant::{Acts, ActsBatch, KernelError, Kernels};
use crate::storage::{Storage, StorageError};
use core::fmt;
use core::ops::Range;

/// Why a matrix-vector product failed.
#[derive(Debug, Clone, PartialEq)]
pub enum MatvecError {
    Storage(StorageError),
    Kernel(KernelError),
    /// The row range is not inside the tensor, or `out` has the wrong length.
    Rows {
        rows: Range<usize>,
        tensor_rows: u64,
        out_len: usize,
    },
    /// The scratch buffer cannot hold one row.
    Scratch {
        need: usize,
        have: usize,
    },
}

impl fmt::Display for MatvecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatvecError::Storage(e) => write!(f, "{e}"),
            MatvecError::Kernel(e) => write!(f, "{e}"),
            MatvecError::Rows { rows, tensor_rows, out_len } => write!(
                f,
                "rows {rows:?} with an output of {out_len} do not fit a tensor of {tensor_rows} rows"
            ),
            MatvecError::Scratch { need, have } => {
                write!(f, "scratch buffer of {have} bytes cannot hold a {need}-byte row")
            }
        }
    }
}

impl From<StorageError> for MatvecError {
    fn from(e: StorageError) -> Self {
        MatvecError::Storage(e)
    }
}
impl From<KernelError> for MatvecError {
    fn from(e: KernelError) -> Self {
        MatvecError::Kernel(e)
    }
}

/// `out[i] = W[rows.start + i] · x` for the rows in `rows`, where `acts` is `x` quantized to the
/// format of `w`'s type.
pub fn matvec<S: Storage + ?Sized>(
    kernels: &Kernels,
    src: &S,
    w: &TensorInfo,
    rows: Range<usize>,
    acts: &Acts<'_>,
    out: &mut [f32],
    scratch: &mut [u8],
) -> Result<(), MatvecError> {
    matmat(kernels, src, w, rows, &ActsBatch::one(*acts), out, scratch)
}

/// `out[i * cols + c] = W[rows.start + i] · x_c` for the rows in `rows` and each of the `cols`
/// columns of `acts` (a batch of prompt tokens): every row is read once, in place or into
/// `scratch`, for all columns, and each weight block decoded once ([`Kernels::dot_rows_batch`]).
pub fn matmat<S: Storage + ?Sized>(
    kernels: &Kernels,
    src: &S,
    w: &TensorInfo,
    rows: Range<usize>,
    acts: &ActsBatch<'_>,
    out: &mut [f32],
    scratch: &mut [u8],
) -> Result<(), MatvecError> {
    let cols = acts.cols.max(1);
    if rows.start > rows.end || rows.end as u64 > w.rows() || out.len() != rows.len() * cols {
        return Err(MatvecError::Rows {
            rows,
            tensor_rows: w.rows(),
            out_len: out.len(),
        });
    }
    if rows.is_empty() {
        return Ok(());
    }
    let n = w.row_len() as usize;
    let rb = w.row_bytes() as usize;
    let start = w.offset + rows.start as u64 * rb as u64;
    // In u64: a range of rows of a large tensor may be more than a 32-bit `usize` holds, and then
    // it cannot be resident; it is read in chunks.
    let total = rows.len() as u64 * rb as u64;
    let resident = usize::try_from(total)
        .ok()
        .and_then(|total| src.resident(start, total));
    if let Some(bytes) = resident {
        kernels.dot_rows_batch(w.ty, n, bytes, acts, out)?;
        return Ok(());
    }
    // Whole groups of four rows where possible (the SIMD kernels take four rows at a time).
    let fit = scratch.len() / rb.max(1);
    let per_chunk = if fit >= 4 { fit / 4 * 4 } else { fit };
    if per_chunk == 0 {
        return Err(MatvecError::Scratch {
            need: rb,
            have: scratch.len(),
        });
    }
    let mut done = 0;
    while done < rows.len() {
        let k = per_chunk.min(rows.len() - done);
        let buf = &mut scratch[..k * rb];
        src.read_at(start + done as u64 * rb as u64, buf)?;
        let part = &mut out[done * cols..(done + k) * cols];
        kernels.dot_rows_batch(w.ty, n, buf, acts, part)?;
        done += k;
    }
    Ok(())
}

/// Read the `row`-th row of `w` dequantized to f32 into `out` (embedding lookup: only that row is
/// read). `scratch` must hold one row's bytes.
pub fn read_row_f32<S: Storage + ?Sized>(
    src: &S,
    w: &TensorInfo,
    row: usize,
    out: &mut [f32],
    scratch: &mut [u8],
) -> Result<(), MatvecError> {
    let n = w.row_len() as usize;
    let rb = w.row_bytes() as usize;
    if row as u64 >= w.rows() || out.len() != n {
        return Err(MatvecError::Rows {
            rows: row..row + 1,
            tensor_rows: w.rows(),
            out_len: out.len(),
        });
    }
    if scratch.len() < rb {
        return Err(MatvecError::Scratch {
            need: rb,
            have: scratch.len(),
        });
    }
    let buf = &mut scratch[..rb];
    src.read_at(w.offset + row as u64 * rb as u64, buf)?;
    crate::quant::dequantize_row(w.ty, buf, out);
    Ok(())
}
