//! The f64 reference gradients of attention: plain loops, no tricks, the truth every
//! tier and thread count of the backward kernel is tested against (and itself checked
//! against central finite differences in the tests below).
//!
//! For the loss sum(O * dO), row by row: P_i = softmax(S_i) with S = scale Q K^T +
//! ALiBi + mask, O_i = P_i V, D_i = dO_i . O_i, dP_ij = dO_i . v_j,
//! dS_ij = P_ij (dP_ij - D_i); then dQ_i = scale sum_j dS_ij k_j,
//! dK_j += scale dS_ij q_i and dV_j += P_ij dO_i, summed over the heads of a K/V group.
//! RoPE is taken back through the rotation by [`rope_backward`]: a rotation's gradient
//! is its transpose, the rotation by the opposite angle.

use ndarray::{Array3, Array4, ArrayView4, Axis};

use crate::engine::pe;
use crate::engine::problem::{AttnSpec, ProblemShape};

/// dQ [B,H,Nq,d], dK [B,G,Nk,d], dV [B,G,Nk,dv] and D = rowsum(dO * O) [B,H,Nq].
#[derive(Debug, Clone)]
pub struct Grads {
    pub dq: Array4<f64>,
    pub dk: Array4<f64>,
    pub dv: Array4<f64>,
    pub d: Array3<f64>,
}

/// Gradients of sum(O * dO) with respect to q, k (as given: after RoPE, if any) and v.
pub fn attention_backward(
    shape: &ProblemShape,
    q: ArrayView4<f64>,
    k: ArrayView4<f64>,
    v: ArrayView4<f64>,
    dout: ArrayView4<f64>,
    spec: &AttnSpec,
) -> Grads {
    let s = shape;
    let mut dq = Array4::zeros((s.batch, s.heads, s.n_q, s.d));
    let mut dk = Array4::zeros((s.batch, s.kv_heads, s.n_k, s.d));
    let mut dv = Array4::zeros((s.batch, s.kv_heads, s.n_k, s.dv));
    let mut dd = Array3::zeros((s.batch, s.heads, s.n_q));
    let mut p = vec![0.0; s.n_k];
    for b in 0..s.batch {
        for h in 0..s.heads {
            let g = s.kv_head_for(h);
            for i in 0..s.n_q {
                for (j, pj) in p.iter_mut().enumerate() {
                    let bias = spec.mask.bias(b, h, i, j);
                    *pj = if bias == f64::NEG_INFINITY {
                        f64::NEG_INFINITY
                    } else {
                        let dot: f64 = (0..s.d).map(|c| q[[b, h, i, c]] * k[[b, g, j, c]]).sum();
                        dot * spec.scale + spec.alibi_bias(h, i, j) + bias
                    };
                }
                let m = p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if m == f64::NEG_INFINITY {
                    continue; // every key masked: O = 0, no gradient flows
                }
                p.iter_mut().for_each(|x| *x = (*x - m).exp());
                let l: f64 = p.iter().sum();
                p.iter_mut().for_each(|x| *x /= l);
                let o: Vec<f64> = (0..s.dv)
                    .map(|c| (0..s.n_k).map(|j| p[j] * v[[b, g, j, c]]).sum())
                    .collect();
                let di: f64 = (0..s.dv).map(|c| dout[[b, h, i, c]] * o[c]).sum();
                dd[[b, h, i]] = di;
                for (j, &pj) in p.iter().enumerate() {
                    if pj == 0.0 {
                        continue;
                    }
                    let dp: f64 = (0..s.dv)
                        .map(|c| dout[[b, h, i, c]] * v[[b, g, j, c]])
                        .sum();
                    let ds = pj * (dp - di) * spec.scale;
                    for c in 0..s.d {
                        dq[[b, h, i, c]] += ds * k[[b, g, j, c]];
                        dk[[b, g, j, c]] += ds * q[[b, h, i, c]];
                    }
                    for c in 0..s.dv {
                        dv[[b, g, j, c]] += pj * dout[[b, h, i, c]];
                    }
                }
            }
        }
    }
    Grads { dq, dk, dv, d: dd }
}

/// Rotate q [B,H,Nq,d] and k [B,G,Nk,d] by RoPE in place; queries stand at
/// i + Nk - Nq (bottom-right, as the masks), keys at j.
pub fn apply_rope(q: &mut Array4<f64>, k: &mut Array4<f64>, base: f64) {
    rope_all(q, k, base, 1.0);
}

/// Take dq and dk (gradients with respect to the rotated q and k) back through RoPE:
/// dq_before = R^T dq_after, with the same positions as [`apply_rope`].
pub fn rope_backward(dq: &mut Array4<f64>, dk: &mut Array4<f64>, base: f64) {
    rope_all(dq, dk, base, -1.0);
}

fn rope_all(q: &mut Array4<f64>, k: &mut Array4<f64>, base: f64, sign: f64) {
    let first_q = k.dim().2 as f64 - q.dim().2 as f64;
    for (x, first) in [(q, first_q), (k, 0.0)] {
        for mut b in x.axis_iter_mut(Axis(0)) {
            for mut h in b.axis_iter_mut(Axis(0)) {
                for (r, mut row) in h.rows_mut().into_iter().enumerate() {
                    let mut v = row.to_vec();
                    pe::rope_rotate(&mut v, sign * (first + r as f64), base);
                    row.iter_mut().zip(v).for_each(|(dst, src)| *dst = src);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::config::MaskKind;
    use crate::engine::mask::Mask;
    use crate::engine::reference;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    struct Case {
        shape: ProblemShape,
        mask: &'static str,
        alibi: bool,
        rope: Option<f64>,
        seed: u64,
    }

    fn random(rng: &mut ChaCha8Rng, dims: (usize, usize, usize, usize)) -> Array4<f64> {
        Array4::from_shape_fn(dims, |_| rng.random_range(-1.0..1.0))
    }

    /// sum(O * dO) of the attention of q, k (before RoPE) and v.
    fn loss(
        c: &Case,
        spec: &AttnSpec,
        q: &Array4<f64>,
        k: &Array4<f64>,
        v: &Array4<f64>,
        dout: &Array4<f64>,
    ) -> f64 {
        let (mut q, mut k) = (q.clone(), k.clone());
        if let Some(base) = c.rope {
            apply_rope(&mut q, &mut k, base);
        }
        let o = reference::attention(&c.shape, q.view(), k.view(), v.view(), spec);
        (&o.out * dout).sum()
    }

    /// Central differences in f64 against the analytic gradients, every element.
    fn check(c: &Case) {
        let s = c.shape;
        let mut rng = ChaCha8Rng::seed_from_u64(c.seed);
        let q = random(&mut rng, (s.batch, s.heads, s.n_q, s.d));
        let k = random(&mut rng, (s.batch, s.kv_heads, s.n_k, s.d));
        let v = random(&mut rng, (s.batch, s.kv_heads, s.n_k, s.dv));
        let dout = random(&mut rng, (s.batch, s.heads, s.n_q, s.dv));
        let kind: MaskKind = c.mask.parse().unwrap();
        let mask = Mask::resolve(&kind, s.batch, s.heads, s.n_q, s.n_k).unwrap();
        let spec = AttnSpec::new(&s, mask, c.alibi, Some(0.7));
        let (mut qr, mut kr) = (q.clone(), k.clone());
        if let Some(base) = c.rope {
            apply_rope(&mut qr, &mut kr, base);
        }
        let mut g = attention_backward(&s, qr.view(), kr.view(), v.view(), dout.view(), &spec);
        if let Some(base) = c.rope {
            rope_backward(&mut g.dq, &mut g.dk, base);
        }
        let h = 1e-5;
        let mut worst: f64 = 0.0;
        let mut largest: f64 = 0.0;
        for (which, grad) in [(0, &g.dq), (1, &g.dk), (2, &g.dv)] {
            let base_t = [&q, &k, &v][which];
            for (idx, &analytic) in grad.indexed_iter() {
                let mut plus = [q.clone(), k.clone(), v.clone()];
                let mut minus = [q.clone(), k.clone(), v.clone()];
                plus[which][idx] = base_t[idx] + h;
                minus[which][idx] = base_t[idx] - h;
                let fp = loss(c, &spec, &plus[0], &plus[1], &plus[2], &dout);
                let fm = loss(c, &spec, &minus[0], &minus[1], &minus[2], &dout);
                let numeric = (fp - fm) / (2.0 * h);
                worst = worst.max((numeric - analytic).abs());
                largest = largest.max(analytic.abs());
            }
        }
        assert!(largest > 1e-3, "{}: gradients vanish", c.mask);
        let rel = worst / largest;
        assert!(
            rel < 1e-6,
            "{} alibi {} rope {:?}: rel error {rel:e}",
            c.mask,
            c.alibi,
            c.rope
        );
    }

    fn shape(
        b: usize,
        h: usize,
        g: usize,
        nq: usize,
        nk: usize,
        d: usize,
        dv: usize,
    ) -> ProblemShape {
        ProblemShape::from_dims([b, h, nq, d], [b, g, nk, d], [b, g, nk, dv]).unwrap()
    }

    #[test]
    fn matches_finite_differences() {
        let cases = [
            Case {
                shape: shape(1, 1, 1, 3, 4, 2, 3),
                mask: "none",
                alibi: false,
                rope: None,
                seed: 1,
            },
            Case {
                shape: shape(1, 2, 1, 4, 4, 2, 2),
                mask: "causal",
                alibi: true,
                rope: None,
                seed: 2,
            },
            Case {
                shape: shape(2, 2, 2, 2, 5, 4, 2),
                mask: "window:2",
                alibi: false,
                rope: Some(10000.0),
                seed: 3,
            },
            Case {
                shape: shape(2, 1, 1, 3, 3, 2, 2),
                mask: "padding:2,0",
                alibi: false,
                rope: None,
                seed: 4,
            },
            Case {
                shape: shape(1, 4, 2, 5, 3, 2, 1),
                mask: "causal",
                alibi: true,
                rope: Some(100.0),
                seed: 5,
            },
            Case {
                shape: shape(1, 1, 1, 6, 6, 2, 2),
                mask: "bigbird:0,1,0,2",
                alibi: false,
                rope: None,
                seed: 6,
            },
        ];
        for c in &cases {
            check(c);
        }
    }

    #[test]
    fn fully_masked_rows_get_no_gradient() {
        let s = shape(1, 1, 1, 3, 3, 2, 2);
        let mask = Mask::resolve(&"padding:0".parse().unwrap(), 1, 1, 3, 3).unwrap();
        let spec = AttnSpec::new(&s, mask, false, None);
        let ones = Array4::from_elem((1, 1, 3, 2), 1.0);
        let g = attention_backward(
            &s,
            ones.view(),
            ones.view(),
            ones.view(),
            ones.view(),
            &spec,
        );
        for a in [&g.dq, &g.dk, &g.dv] {
            assert!(a.iter().all(|&x| x == 0.0));
        }
    }
}
