//! One weight type's kernels in one set: the one-row, four-row and batched kernels
//! ([`RowKernels`]) for the activation format they take ([`TypeKernels`]). A row of
//! [`super::types::TYPES`] holds the scalar ones; a set's table ([`super::table::Kernels`]) holds
//! its own, or none.

use super::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use super::batch::Mat;
use core::fmt;

/// One row · the activations.
pub type Dot<A> = fn(&[u8], &[A]) -> f32;
/// Four consecutive rows of `rb` bytes each (`w` holds `4 * rb` bytes) · the activations, into
/// `out`; each `out[r]` equals the one-row kernel on row `r`, bit for bit.
pub type Dot4<A> = fn(&[u8], usize, &[A], &mut [f32; 4]);

/// A weight type's kernels in one set, for activations of element type `A`.
pub struct RowKernels<A: 'static> {
    /// One row.
    pub dot: Dot<A>,
    /// Four rows at once (the activations loaded once for four rows), if the set has it.
    pub x4: Option<Dot4<A>>,
    /// Rows × several activation columns ([`super::batch`]: each weight block decoded once), if the set
    /// has it; otherwise a batch goes column by column through `dot` and `x4`.
    pub mat: Option<Mat<A>>,
}

// (Derived Clone and Copy would ask `A: Copy`; function pointers are Copy whatever `A` is.)
impl<A> Clone for RowKernels<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for RowKernels<A> {}

impl<A> fmt::Debug for RowKernels<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowKernels")
            .field("x4", &self.x4.is_some())
            .field("mat", &self.mat.is_some())
            .finish_non_exhaustive()
    }
}

impl<A> RowKernels<A> {
    /// A one-row kernel alone.
    pub const fn dot(dot: Dot<A>) -> Self {
        RowKernels {
            dot,
            x4: None,
            mat: None,
        }
    }

    /// With a four-row kernel.
    pub const fn x4(self, x4: Dot4<A>) -> Self {
        RowKernels {
            x4: Some(x4),
            ..self
        }
    }

    /// With a batched kernel.
    pub const fn mat(self, mat: Mat<A>) -> Self {
        RowKernels {
            mat: Some(mat),
            ..self
        }
    }

    /// `out[r]` = row `r` of `w` (rows of `rb` bytes) · `a`: four rows at a time where there is
    /// a four-row kernel, the rest one by one. Rows past the last multiple of four, when there
    /// are four rows or more, go through the four-row kernel too, as the last four rows (the
    /// one to three before them computed twice, to the same bits): the one-row kernel runs only
    /// for a matrix of fewer than four rows.
    pub(super) fn rows(&self, w: &[u8], rb: usize, a: &[A], out: &mut [f32]) {
        let mut done = 0;
        if let (Some(f4), Some(rb4)) = (self.x4, rb.checked_mul(4)) {
            for (o, w4) in out.chunks_exact_mut(4).zip(w.chunks_exact(rb4)) {
                if let Ok(o) = <&mut [f32; 4]>::try_from(o) {
                    f4(w4, rb, a, o);
                    done += 4;
                }
            }
            let n = out.len().min(w.len() / rb.max(1));
            if done >= 4 && done < n {
                let last = (n - 4) * rb;
                let mut o = [0.0f32; 4];
                f4(&w[last..last + rb4], rb, a, &mut o);
                out[done..n].copy_from_slice(&o[4 - (n - done)..]);
                done = n;
            }
        }
        for (o, row) in out[done..].iter_mut().zip(w[done * rb..].chunks_exact(rb)) {
            *o = (self.dot)(row, a);
        }
    }

    /// The batched kernel over `cols` columns of `a`, if there is one (`false`: none ran).
    pub(super) fn batch(&self, w: &[u8], rb: usize, a: &[A], cols: usize, out: &mut [f32]) -> bool {
        self.mat.map(|f| f(w, rb, a, cols, out)).is_some()
    }
}

/// A weight type's kernels in one set, by the activation format they take.
#[derive(Clone, Copy, Debug)]
pub enum TypeKernels {
    F32(RowKernels<f32>),
    F16(RowKernels<u16>),
    Bf16(RowKernels<u16>),
    Q8_0(RowKernels<BlockQ8_0>),
    Q8_1(RowKernels<BlockQ8_1>),
    Q8K(RowKernels<BlockQ8K>),
}

/// An activation element type, and the kernels of a [`TypeKernels`] that take it.
pub trait ActElem: Sized + 'static {
    fn kernels(t: TypeKernels) -> Option<RowKernels<Self>>;
}

/// The [`ActElem`] impls: each element type and the [`TypeKernels`] variants that take it.
macro_rules! act_elems {
    ($($t:ty => $($v:ident)|+;)*) => {$(
        impl ActElem for $t {
            fn kernels(t: TypeKernels) -> Option<RowKernels<Self>> {
                match t {
                    $(TypeKernels::$v(k))|+ => Some(k),
                    _ => None,
                }
            }
        }
    )*};
}

act_elems! {
    f32 => F32;
    u16 => F16 | Bf16;
    BlockQ8_0 => Q8_0;
    BlockQ8_1 => Q8_1;
    BlockQ8K => Q8K;
}
