//! The naive f32 path, as the source articles write it: materialise the full score
//! matrix S = Q K^T with ndarray, scale, bias, softmax row by row, then multiply by V.
//! It needs Nq x Nk floats per head, which is the memory wall FlashAttention removes.

use ndarray::{Array2, Array3, Array4, ArrayView4, Axis, s};

use crate::engine::problem::{AttnSpec, ProblemShape};

/// Output [B,H,Nq,dv] and log-sum-exp [B,H,Nq] in f32.
#[derive(Debug, Clone)]
pub struct NaiveOutput {
    pub out: Array4<f32>,
    pub lse: Array3<f32>,
}

/// Bytes of one head's score matrix in f32.
pub fn score_bytes(shape: &ProblemShape) -> u64 {
    shape.n_q as u64 * shape.n_k as u64 * 4
}

pub fn attention(
    shape: &ProblemShape,
    q: ArrayView4<f32>,
    k: ArrayView4<f32>,
    v: ArrayView4<f32>,
    spec: &AttnSpec,
) -> NaiveOutput {
    let mut out = Array4::zeros((shape.batch, shape.heads, shape.n_q, shape.dv));
    let mut lse = Array3::from_elem((shape.batch, shape.heads, shape.n_q), f32::NEG_INFINITY);
    let scale = spec.scale as f32;
    for b in 0..shape.batch {
        for h in 0..shape.heads {
            let g = shape.kv_head_for(h);
            let qh = q.slice(s![b, h, .., ..]);
            let kh = k.slice(s![b, g, .., ..]);
            let vh = v.slice(s![b, g, .., ..]);
            let mut scores: Array2<f32> = qh.dot(&kh.t());
            for ((i, j), x) in scores.indexed_iter_mut() {
                let bias = spec.mask.bias(b, h, i, j) + spec.alibi_bias(h, i, j);
                *x = *x * scale + bias as f32;
            }
            for (i, mut row) in scores.axis_iter_mut(Axis(0)).enumerate() {
                let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                if m == f32::NEG_INFINITY {
                    row.fill(0.0);
                    continue;
                }
                row.mapv_inplace(|x| (x - m).exp());
                let l: f32 = row.sum();
                row.mapv_inplace(|x| x / l);
                lse[[b, h, i]] = m + l.ln();
            }
            out.slice_mut(s![b, h, .., ..]).assign(&scores.dot(&vh));
        }
    }
    NaiveOutput { out, lse }
}
