//! The f64 reference attention on tensors: plain loops, no tricks. Every fast path is
//! tested against this.

use ndarray::{Array3, Array4, ArrayView4};

use crate::engine::problem::{AttnSpec, ProblemShape};

/// Output [B,H,Nq,dv] and log-sum-exp [B,H,Nq] (-inf for a row with no visible key).
#[derive(Debug, Clone)]
pub struct AttnOutput {
    pub out: Array4<f64>,
    pub lse: Array3<f64>,
}

/// softmax(scale * Q K^T + ALiBi + mask) V, row by row, max-subtracted. A file mask's
/// biases are shifted per row by [`Mask::row_shift`](crate::attn::mask::Mask::row_shift)
/// (added back to the log-sum-exp), so that no finite bias overflows. The inputs must
/// pass [`crate::attn::range::check`] for [`PathKind::Reference`](crate::attn::range::PathKind)
/// (compute checks them); within those bounds nothing overflows.
pub fn attention(
    shape: &ProblemShape,
    q: ArrayView4<f64>,
    k: ArrayView4<f64>,
    v: ArrayView4<f64>,
    spec: &AttnSpec,
) -> AttnOutput {
    let mut out = Array4::zeros((shape.batch, shape.heads, shape.n_q, shape.dv));
    let mut lse = Array3::from_elem((shape.batch, shape.heads, shape.n_q), f64::NEG_INFINITY);
    let mut scores = vec![0.0; shape.n_k];
    for b in 0..shape.batch {
        for h in 0..shape.heads {
            let g = shape.kv_head_for(h);
            for i in 0..shape.n_q {
                for (j, s) in scores.iter_mut().enumerate() {
                    let bias = spec.mask.shifted_bias(b, h, i, j);
                    *s = if bias == f64::NEG_INFINITY {
                        f64::NEG_INFINITY
                    } else {
                        let dot: f64 = (0..shape.d)
                            .map(|c| q[[b, h, i, c]] * k[[b, g, j, c]])
                            .sum();
                        dot * spec.scale + spec.alibi_bias(h, i, j) + bias
                    };
                }
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if m == f64::NEG_INFINITY {
                    continue; // every key masked: zeros, lse = -inf
                }
                let mut l = 0.0;
                for (j, &s) in scores.iter().enumerate() {
                    let p = (s - m).exp();
                    if p == 0.0 {
                        continue;
                    }
                    l += p;
                    for c in 0..shape.dv {
                        out[[b, h, i, c]] += p * v[[b, g, j, c]];
                    }
                }
                for c in 0..shape.dv {
                    out[[b, h, i, c]] /= l;
                }
                lse[[b, h, i]] = m + l.ln() + spec.mask.row_shift(b, h, i);
            }
        }
    }
    AttnOutput { out, lse }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::mask::Mask;
    use ndarray::Array2;

    fn worked_example() -> (ProblemShape, Array4<f64>, Array4<f64>, Array4<f64>) {
        let q = Array2::from_shape_vec(
            (4, 4),
            vec![
                1., 0., 2., 0., 0., 1., 1., 0., 1., 1., 0., 1., 0., 2., 1., 1.,
            ],
        )
        .unwrap();
        let k = Array2::from_shape_vec(
            (4, 4),
            vec![
                2., 1., 0., 0., 0., 1., 1., 0., 1., 0., 1., 1., 0., 0., 2., 1.,
            ],
        )
        .unwrap();
        let v = Array2::from_shape_vec((4, 2), vec![1., 0., 0., 1., 1., 1., 2., 1.]).unwrap();
        let to4 = |a: Array2<f64>| {
            a.insert_axis(ndarray::Axis(0))
                .insert_axis(ndarray::Axis(0))
        };
        let shape = ProblemShape::from_dims([1, 1, 4, 4], [1, 1, 4, 4], [1, 1, 4, 2]).unwrap();
        (shape, to4(q), to4(k), to4(v))
    }

    #[test]
    fn worked_example_row_0() {
        let (shape, q, k, v) = worked_example();
        let mask = Mask::resolve(&Default::default(), 1, 1, 4, 4).unwrap();
        let spec = AttnSpec::new(&shape, mask, false, Some(0.5));
        let o = attention(&shape, q.view(), k.view(), v.view(), &spec);
        assert!(
            (o.out[[0, 0, 0, 0]] - 1.2699).abs() < 1e-4,
            "{}",
            o.out[[0, 0, 0, 0]]
        );
        assert!(
            (o.out[[0, 0, 0, 1]] - 0.8429).abs() < 1e-4,
            "{}",
            o.out[[0, 0, 0, 1]]
        );
    }

    #[test]
    fn fully_masked_rows_are_zero_with_lse_minus_inf() {
        let (shape, q, k, v) = worked_example();
        let mask = Mask::resolve(&"padding:0".parse().unwrap(), 1, 1, 4, 4).unwrap();
        let spec = AttnSpec::new(&shape, mask, true, None);
        let o = attention(&shape, q.view(), k.view(), v.view(), &spec);
        assert!(o.out.iter().all(|&x| x == 0.0));
        assert!(o.lse.iter().all(|&x| x == f64::NEG_INFINITY));
    }
}
