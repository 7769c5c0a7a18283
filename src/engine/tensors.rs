//! Q, K, V (and other tensors) from .npy files as [B, H, N, d] arrays, checked: rank,
//! finite values, shapes that fit together. Outputs are written back in the rank of Q
//! and in Q's dtype, so `compute` returns what a NumPy or PyTorch user sent.

use std::path::{Path, PathBuf};

use ndarray::{Array3, Array4, ArrayD, Dimension, Ix4, IxDyn};

use crate::engine::npy::{self, NpyDtype};
use crate::engine::problem::ProblemShape;
use crate::error::{Error, Result};

/// A tensor read as [B, H, N, d], with the rank and dtype it had on disk.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub data: Array4<f64>,
    /// 2 for [N,d], 3 for [H,N,d], 4 for [B,H,N,d].
    pub rank: usize,
    pub dtype: NpyDtype,
    pub path: PathBuf,
}

impl Tensor {
    /// Dimensions as [B, H, N, d].
    pub fn dims(&self) -> [usize; 4] {
        let (b, h, n, d) = self.data.dim();
        [b, h, n, d]
    }

    /// The one sequence of a tensor with batch 1, as [H, N, d]; `flag` names it.
    pub fn single_sequence(&self, flag: &str) -> Result<Array3<f64>> {
        let [b, h, n, d] = self.dims();
        if b != 1 {
            return Err(Error::file(
                &self.path,
                format!(
                    "{flag} holds a batch of {b} sequences [B,H,N,d] = {:?}; the app shows one: save a[i] for the sequence you want",
                    self.dims()
                ),
            ));
        }
        Ok(self
            .data
            .clone()
            .into_shape_with_order((h, n, d))
            .expect("batch 1"))
    }
}

const SHAPES: &str = "[N,d], [H,N,d] or [B,H,N,d]";

/// Read a tensor of rank 2, 3 or 4 as [B,H,N,d]; `flag` (e.g. "--q") names it in
/// errors. NaN and infinities are refused with their index.
pub fn load(path: &Path, flag: &str) -> Result<Tensor> {
    load_as(path, flag, SHAPES)
}

/// [`load`], with `shapes` saying in errors which shapes would be right.
fn load_as(path: &Path, flag: &str, shapes: &str) -> Result<Tensor> {
    let a = npy::read(path).map_err(|e| match e {
        Error::File { path, msg } => Error::File {
            path,
            msg: format!("{msg} (given as {flag})"),
        },
        other => other,
    })?;
    let shape = a.data.shape().to_vec();
    let rank = shape.len();
    if !(2..=4).contains(&rank) {
        return Err(Error::file(
            path,
            format!("{flag} has rank {rank} (shape {shape:?}); expected {shapes}"),
        ));
    }
    if let Some((index, x)) = a.data.indexed_iter().find(|(_, x)| !x.is_finite()) {
        return Err(Error::file(
            path,
            format!(
                "{flag} holds {x} at index {:?}; every value must be finite",
                index.slice()
            ),
        ));
    }
    let mut dims = [1usize; 4];
    dims[4 - rank..].copy_from_slice(&shape);
    let data = a
        .data
        .into_shape_with_order(IxDyn(&dims))
        .and_then(|d| d.into_dimensionality::<Ix4>())
        .map_err(|e| Error::Internal(format!("{}: reshape: {e}", path.display())))?;
    Ok(Tensor {
        data,
        rank,
        dtype: a.dtype,
        path: path.to_path_buf(),
    })
}

/// Attention weights for `view --attn`: [n,n], [H,n,n] or [layers,H,n,n], returned as
/// one [H, Nq, Nk] array per layer.
pub fn load_attention(path: &Path) -> Result<Vec<Array3<f64>>> {
    let t = load_as(path, "--attn", "[n,n], [H,n,n] or [layers,H,n,n]")?;
    let (layers, h, n_q, n_k) = t.data.dim();
    Ok((0..layers)
        .map(|l| {
            t.data
                .index_axis(ndarray::Axis(0), l)
                .to_owned()
                .into_shape_with_order((h, n_q, n_k))
                .expect("one layer")
        })
        .collect())
}

/// How far a row of attention weights may sum from 1 before `view --attn` warns: f32
/// softmax rows sum to 1 within about n * 2^-24, far inside this.
pub const ATTENTION_ROW_SUM_TOLERANCE: f64 = 1e-3;

/// A warning for attention weights whose rows are not probability distributions: a row
/// must hold no negative value and sum to 1 (within [`ATTENTION_ROW_SUM_TOLERANCE`]), or
/// be all zeros (a query whose keys are all masked). The app still shows such weights,
/// since they may be meant (e.g. a difference of two maps); the warning names the first
/// such row (layer, head and row from 0, as in files and flags) and how many there are.
pub fn attention_rows_warning(layers: &[Array3<f64>]) -> Option<String> {
    let mut first = None;
    let mut count = 0usize;
    let mut rows = 0usize;
    for (l, layer) in layers.iter().enumerate() {
        for (h, head) in layer.outer_iter().enumerate() {
            for (i, row) in head.outer_iter().enumerate() {
                rows += 1;
                let sum: f64 = row.sum();
                let negative = row.iter().any(|&x| x < 0.0);
                let zeros = row.iter().all(|&x| x == 0.0);
                if negative || !(zeros || (sum - 1.0).abs() <= ATTENTION_ROW_SUM_TOLERANCE) {
                    count += 1;
                    first.get_or_insert((l, h, i, sum, negative));
                }
            }
        }
    }
    first.map(|(l, h, i, sum, negative)| {
        let what = if negative {
            format!("holds a negative weight (sum {sum})")
        } else {
            format!("sums to {sum}")
        };
        format!(
            "layer {l}, head {h}, row {i} {what}; attention weights are softmax rows that sum to 1 (within {ATTENTION_ROW_SUM_TOLERANCE}) or all-zero rows; {count} of {rows} rows are not (is this a score or logit array?)"
        )
    })
}

/// Q, K and V, read and checked against each other.
#[derive(Debug, Clone)]
pub struct Qkv {
    pub q: Tensor,
    pub k: Tensor,
    pub v: Tensor,
    pub shape: ProblemShape,
}

/// Read Q [B,H,Nq,d], K [B,G,Nk,d], V [B,G,Nk,dv] (each of rank 2 to 4; a lower rank
/// means batch 1 and, for rank 2, one head) and check that they fit together.
pub fn load_qkv(q: &Path, k: &Path, v: &Path) -> Result<Qkv> {
    let q = load(q, "--q")?;
    let k = load(k, "--k")?;
    let v = load(v, "--v")?;
    let shape = ProblemShape::from_dims(q.dims(), k.dims(), v.dims()).map_err(|e| {
        Error::usage(format!(
            "{e} (--q {} is {:?}, --k {} is {:?}, --v {} is {:?} as [B,H,N,d])",
            q.path.display(),
            q.dims(),
            k.path.display(),
            k.dims(),
            v.path.display(),
            v.dims()
        ))
    })?;
    Ok(Qkv { q, k, v, shape })
}

/// Drop the leading 1-sized axes that a rank-`rank` tensor did not have.
fn to_rank(a: ArrayD<f64>, rank: usize) -> ArrayD<f64> {
    let shape = a.shape().to_vec();
    let keep = rank.min(shape.len());
    let new = shape[shape.len() - keep..].to_vec();
    debug_assert!(shape[..shape.len() - keep].iter().all(|&d| d == 1));
    a.into_shape_with_order(IxDyn(&new))
        .expect("dropping axes of length 1")
}

/// The .npy bytes of an output [B,H,N,dv] in the rank and dtype of `like` (Q); `path`
/// names it in errors.
pub fn encode_like(path: &Path, out: Array4<f64>, like: &Tensor) -> Result<Vec<u8>> {
    encode_as(path, to_rank(out.into_dyn(), like.rank), like)
}

/// The .npy bytes of a per-row value [B,H,N] (e.g. log-sum-exp) shaped like Q without its
/// last axis.
pub fn encode_rows_like(path: &Path, rows: Array3<f64>, like: &Tensor) -> Result<Vec<u8>> {
    encode_as(path, to_rank(rows.into_dyn(), like.rank - 1), like)
}

fn encode_as(path: &Path, a: ArrayD<f64>, like: &Tensor) -> Result<Vec<u8>> {
    npy::encode(&a, like.dtype).map_err(|e| {
        Error::file(
            path,
            format!(
                "{e}; outputs take the dtype of Q ({}): save Q as float64 to keep such values",
                like.path.display()
            ),
        )
    })
}

/// Write an output [B,H,N,dv] in the rank and dtype of `like` (Q).
pub fn write_like(path: &Path, out: Array4<f64>, like: &Tensor) -> Result<()> {
    crate::output::write_file(path, &encode_like(path, out, like)?)
}

/// Write a per-row value [B,H,N] (e.g. log-sum-exp) shaped like Q without its last axis.
pub fn write_rows_like(path: &Path, rows: Array3<f64>, like: &Tensor) -> Result<()> {
    crate::output::write_file(path, &encode_rows_like(path, rows, like)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attention_rows_that_are_not_distributions_are_named() {
        let ok = Array3::from_shape_vec((1, 2, 2), vec![0.25, 0.75, 0.0, 0.0]).unwrap();
        assert_eq!(attention_rows_warning(std::slice::from_ref(&ok)), None);
        let mut bad = ok.clone();
        bad[[0, 1, 0]] = 0.5;
        let w = attention_rows_warning(&[ok.clone(), bad]).unwrap();
        assert!(w.contains("layer 1, head 0, row 1 sums to 0.5"), "{w}");
        assert!(w.contains("1 of 4 rows"), "{w}");
        let neg = Array3::from_shape_vec((1, 1, 2), vec![-0.5, 1.5]).unwrap();
        assert!(attention_rows_warning(&[neg]).unwrap().contains("negative"));
    }
}
