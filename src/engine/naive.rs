//! The naive f32 path, as the source articles write it: materialise the full score
//! matrix S = Q K^T with ndarray, scale, bias, softmax row by row, then multiply by V.
//! It needs Nq x Nk floats per head, which is the memory wall FlashAttention removes.

use ndarray::{Array2, Array3, Array4, ArrayView4, Axis, s};

use crate::attn::range::{self, Magnitudes, PathKind};
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::Result;

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

/// softmax(scale Q K^T + ALiBi + mask) V in f32. Refused (exit 2, naming the limit) when
/// a score, a dot product or the log-sum-exp could overflow f32 ([`range::check`]); a
/// file mask's biases are shifted per row ([`crate::attn::mask::Mask::row_shift`]).
pub fn attention(
    shape: &ProblemShape,
    q: ArrayView4<f32>,
    k: ArrayView4<f32>,
    v: ArrayView4<f32>,
    spec: &AttnSpec,
) -> Result<NaiveOutput> {
    let rows = |a: ArrayView4<f32>| {
        a.rows()
            .into_iter()
            .map(|r| r.iter().map(|&x| x as f64).collect::<Vec<f64>>())
            .collect::<Vec<_>>()
    };
    let m = Magnitudes::of_rows(rows(q), rows(k), rows(v))?;
    range::check(PathKind::Naive, shape, &m, spec)?;
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
                let bias = spec.mask.shifted_bias(b, h, i, j) + spec.alibi_bias(h, i, j);
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
                lse[[b, h, i]] = (m as f64 + (l as f64).ln() + spec.mask.row_shift(b, h, i)) as f32;
            }
            out.slice_mut(s![b, h, .., ..]).assign(&scores.dot(&vh));
        }
    }
    Ok(NaiveOutput { out, lse })
}
