//! A weight matrix [rows, cols] (row-major, `nn.Linear`'s [out, in]) as the model holds
//! it: f32 values, or the blocks of a GGML quantized type read in place from the
//! memory-mapped GGUF file, so a 4-bit model takes about its file's size in memory.
//!
//! Code that needs f32 values dequantizes only what it reads: [`Matrix::row_into`] (an
//! embedding lookup), [`Matrix::to_f32`] (a display of one matrix, a test). Products with
//! a quantized matrix run on its blocks ([`super::qmatmul`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::quant::{self, GgmlType};
use crate::error::{Error, Result};

/// A byte range of a buffer shared by every matrix cut from it (the file's memory map,
/// or owned bytes), kept alive as long as one of them is.
#[derive(Clone)]
pub struct SharedBytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
}

impl SharedBytes {
    /// `len` bytes of `owner` from `start`, or None when they are not all inside it.
    pub fn new(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    ) -> Option<Self> {
        let end = start.checked_add(len)?;
        (end <= (*owner).as_ref().len()).then_some(SharedBytes { owner, start, len })
    }

    /// Owned bytes (a matrix quantized in memory, a test).
    pub fn owned(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        SharedBytes {
            owner: Arc::new(bytes),
            start: 0,
            len,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.start + self.len]
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedBytes({} bytes at {})", self.len, self.start)
    }
}

/// Blocks of a quantized type: `rows` rows of `cols` values, each row a whole number of
/// blocks (GGUF's ne = [cols, rows]).
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    ty: GgmlType,
    bytes: SharedBytes,
    rows: usize,
    cols: usize,
}

impl QuantMatrix {
    /// Checks that `cols` is a whole number of blocks and that `bytes` holds the matrix.
    pub fn new(ty: GgmlType, bytes: SharedBytes, rows: usize, cols: usize) -> Result<Self> {
        let row_bytes = ty.tensor_bytes(cols).ok_or_else(|| {
            Error::Internal(format!(
                "a {} row of {cols} values is not a whole number of {}-value blocks",
                ty.name(),
                ty.block_elems()
            ))
        })?;
        if rows.checked_mul(row_bytes) != Some(bytes.len) {
            return Err(Error::Internal(format!(
                "a {} matrix [{rows}, {cols}] takes {row_bytes} x {rows} bytes; {} given",
                ty.name(),
                bytes.len
            )));
        }
        Ok(QuantMatrix {
            ty,
            bytes,
            rows,
            cols,
        })
    }

    /// The block type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.cols / self.ty.block_elems() * self.ty.block_bytes()
    }

    /// All the blocks, row after row.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The blocks of row `i`.
    pub fn row(&self, i: usize) -> &[u8] {
        let rb = self.row_bytes();
        &self.bytes()[i * rb..][..rb]
    }

    /// Rows r0..r0 + n as a matrix of their own, sharing these bytes; None when they are
    /// not all inside (a fused projection split by its output rows).
    pub fn row_range(&self, r0: usize, n: usize) -> Option<QuantMatrix> {
        let rb = self.row_bytes();
        if r0.checked_add(n)? > self.rows {
            return None;
        }
        let bytes = SharedBytes {
            owner: self.bytes.owner.clone(),
            start: self.bytes.start + r0 * rb,
            len: n * rb,
        };
        Some(QuantMatrix {
            ty: self.ty,
            bytes,
            rows: n,
            cols: self.cols,
        })
    }

    /// Rows r0.. dequantized into `out` (a whole number of rows).
    pub fn dequantize_rows(&self, r0: usize, out: &mut [f32]) {
        let n = out.len() / self.cols.max(1);
        let rb = self.row_bytes();
        quant::dequantize(self.ty, &self.bytes()[r0 * rb..(r0 + n) * rb], out);
    }
}

/// A weight matrix: f32 values (its shape kept by its owner, e.g. [`super::Linear`]) or a
/// quantized one that knows its shape.
#[derive(Clone, Debug)]
pub enum Matrix {
    F32(Vec<f32>),
    Quant(QuantMatrix),
}

impl From<Vec<f32>> for Matrix {
    fn from(v: Vec<f32>) -> Self {
        Matrix::F32(v)
    }
}

impl PartialEq for Matrix {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Matrix::F32(a), Matrix::F32(b)) => a == b,
            (Matrix::Quant(a), Matrix::Quant(b)) => {
                a.ty == b.ty && a.rows == b.rows && a.cols == b.cols && a.bytes() == b.bytes()
            }
            _ => false,
        }
    }
}

impl Matrix {
    /// Values held (rows x cols).
    pub fn len(&self) -> usize {
        match self {
            Matrix::F32(v) => v.len(),
            Matrix::Quant(q) => q.rows * q.cols,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values if they are f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            Matrix::F32(v) => Some(v),
            Matrix::Quant(_) => None,
        }
    }

    /// The values if they are f32, to change (training, tests).
    pub fn as_f32_mut(&mut self) -> Option<&mut Vec<f32>> {
        match self {
            Matrix::F32(v) => Some(v),
            Matrix::Quant(_) => None,
        }
    }

    pub fn as_quant(&self) -> Option<&QuantMatrix> {
        match self {
            Matrix::Quant(q) => Some(q),
            Matrix::F32(_) => None,
        }
    }

    /// The storage type's GGML name ("F32" for f32 values).
    pub fn type_name(&self) -> &'static str {
        match self {
            Matrix::F32(_) => "F32",
            Matrix::Quant(q) => q.ty.name(),
        }
    }

    /// Every value as f32, borrowed when they are f32 already, dequantized otherwise.
    pub fn to_f32(&self) -> Cow<'_, [f32]> {
        match self {
            Matrix::F32(v) => Cow::Borrowed(v),
            Matrix::Quant(q) => {
                let mut out = vec![0.0f32; q.rows * q.cols];
                q.dequantize_rows(0, &mut out);
                Cow::Owned(out)
            }
        }
    }

    /// Rows r0..r0 + n of a matrix `cols` wide; an empty f32 matrix when they are not all
    /// inside (a dry check of shapes holds no values).
    pub fn row_range(&self, r0: usize, n: usize, cols: usize) -> Matrix {
        match self {
            Matrix::F32(v) => Matrix::F32(
                v.get(r0 * cols..(r0 + n) * cols)
                    .map(<[f32]>::to_vec)
                    .unwrap_or_default(),
            ),
            Matrix::Quant(q) => q
                .row_range(r0, n)
                .map(Matrix::Quant)
                .unwrap_or(Matrix::F32(Vec::new())),
        }
    }

    /// Row `i` of rows `out.len()` wide, as f32 (an embedding lookup dequantizes this row
    /// only).
    pub fn row_into(&self, i: usize, out: &mut [f32]) {
        let c = out.len();
        match self {
            Matrix::F32(v) => out.copy_from_slice(&v[i * c..][..c]),
            Matrix::Quant(q) => {
                debug_assert_eq!(q.cols, c);
                quant::dequantize(q.ty, q.row(i), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quant_rows_dequantize_alone_and_bounds_are_checked() {
        // Two Q8_0 rows of 32: d = 0.5 (f16 0x3800), qs = row index + j.
        let mut bytes = Vec::new();
        for r in 0..2u8 {
            bytes.extend_from_slice(&[0x00, 0x38]);
            bytes.extend((0..32u8).map(|j| r + j));
        }
        let q = QuantMatrix::new(GgmlType::Q8_0, SharedBytes::owned(bytes.clone()), 2, 32).unwrap();
        let m = Matrix::Quant(q);
        let mut row = vec![0.0; 32];
        m.row_into(1, &mut row);
        assert_eq!(row[0], 0.5);
        assert_eq!(row[31], 16.0);
        assert_eq!(m.to_f32()[32..], row[..]);
        assert_eq!(m.len(), 64);
        assert!(
            QuantMatrix::new(GgmlType::Q8_0, SharedBytes::owned(bytes.clone()), 3, 32).is_err()
        );
        assert!(QuantMatrix::new(GgmlType::Q8_0, SharedBytes::owned(bytes), 2, 33).is_err());
        assert!(SharedBytes::new(Arc::new(vec![0u8; 4]), 2, 3).is_none());
    }
}
