//! Attention with soft-capped scores (Gemma 2): s = cap * tanh(scale q.k / cap), then the
//! mask and the softmax. The flash kernel computes softmax(scale q.k + bias) and has no
//! place for a tanh between the product and the exponent, so capped layers take this
//! direct form: the N x N scores per head, the softmax in f64 sums, then P V. It also
//! returns P, which is what the display shows.

use rayon::prelude::*;

use crate::attn::problem::AttnSpec;
use crate::error::Result;
use crate::kernel::thread_pool;
use crate::model::config::ModelConfig;
use crate::model::gemm::matmul_nt;

/// Keys and values [G, stride, d_head] of which rows 0..len are used.
pub(crate) struct KeyValueRows<'a> {
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub stride: usize,
    pub len: usize,
}

/// (out [H, n_q, d_head], weights [H, n_q, n_k]) of capped attention; a row that sees no
/// key gets zero weights and a zero output.
pub(crate) fn capped_attention(
    cfg: &ModelConfig,
    q: &[f32],
    n_q: usize,
    kv: &KeyValueRows,
    spec: &AttnSpec,
    cap: f64,
    threads: usize,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let (dh, n_k, h) = (cfg.d_head, kv.len, cfg.heads);
    let mut out = vec![0.0f32; h * n_q * dh];
    let mut weights = vec![0.0f32; h * n_q * n_k];
    let one_head = |(head, (o, p)): (usize, (&mut [f32], &mut [f32]))| -> Result<()> {
        let g = cfg.kv_head_for(head);
        let k = &kv.k[g * kv.stride * dh..][..n_k * dh];
        let v = &kv.v[g * kv.stride * dh..][..n_k * dh];
        matmul_nt(
            &q[head * n_q * dh..][..n_q * dh],
            n_q,
            dh,
            k,
            n_k,
            None,
            p,
            1,
        )?;
        let mut row64 = vec![0.0f64; n_k];
        for (i, (row, orow)) in p
            .chunks_exact_mut(n_k)
            .zip(o.chunks_exact_mut(dh))
            .enumerate()
        {
            let mut max = f64::NEG_INFINITY;
            for (j, (s, r)) in row.iter().zip(row64.iter_mut()).enumerate() {
                let capped = cap * (spec.scale * *s as f64 / cap).tanh();
                *r = capped + spec.mask.bias(0, head, i, j);
                max = max.max(*r);
            }
            if max == f64::NEG_INFINITY {
                row.fill(0.0);
                continue;
            }
            let mut sum = 0.0f64;
            for r in row64.iter_mut() {
                *r = (*r - max).exp();
                sum += *r;
            }
            let mut acc = vec![0.0f64; dh];
            for (j, (w, r)) in row.iter_mut().zip(&row64).enumerate() {
                let pw = r / sum;
                *w = pw as f32;
                if pw != 0.0 {
                    for (a, &x) in acc.iter_mut().zip(&v[j * dh..][..dh]) {
                        *a += pw * x as f64;
                    }
                }
            }
            for (dst, a) in orow.iter_mut().zip(acc) {
                *dst = a as f32;
            }
        }
        Ok(())
    };
    if threads <= 1 {
        out.chunks_mut(n_q * dh)
            .zip(weights.chunks_mut(n_q * n_k))
            .enumerate()
            .try_for_each(one_head)?;
    } else {
        thread_pool(threads)?.install(|| {
            out.par_chunks_mut(n_q * dh)
                .zip(weights.par_chunks_mut(n_q * n_k))
                .enumerate()
                .try_for_each(one_head)
        })?;
    }
    Ok((out, weights))
}

/// cap * tanh(x / cap) over a slice (Gemma 2's final logits).
pub(crate) fn softcap_slice(x: &mut [f32], cap: f64) {
    for v in x {
        *v = (cap * (*v as f64 / cap).tanh()) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attn::config::MaskKind;
    use crate::attn::mask::Mask;
    use crate::attn::problem::ProblemShape;
    use crate::model::config::{Act, Arch, NormKind, NormPlace, PosKind};

    #[test]
    fn a_huge_cap_is_plain_softmax_and_a_small_one_flattens() {
        let cfg = ModelConfig {
            arch: Arch::Gemma2,
            layers: 1,
            heads: 2,
            kv_heads: 1,
            d_model: 4,
            d_head: 2,
            d_ff: 4,
            vocab: 4,
            context: 8,
            norm: NormKind::Rms,
            norm_place: NormPlace::Pre,
            norm_eps: 1e-6,
            act: Act::GeluTanh,
            pos: PosKind::Learned,
            causal: true,
            tied_embeddings: true,
            details: Default::default(),
        };
        let q = [
            3.0f32, 0.0, 0.0, 2.0, -1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 0.0, -3.0,
        ];
        let k = [1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0];
        let v = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let shape = ProblemShape {
            batch: 1,
            heads: 2,
            kv_heads: 1,
            n_q: 3,
            n_k: 3,
            d: 2,
            dv: 2,
        };
        let spec = AttnSpec::new(
            &shape,
            Mask::resolve(&MaskKind::Causal, 1, 2, 3, 3).unwrap(),
            false,
            Some(1.0),
        );
        let kv = KeyValueRows {
            k: &k,
            v: &v,
            stride: 3,
            len: 3,
        };
        let (out, w) = capped_attention(&cfg, &q, 3, &kv, &spec, 1e9, 1).unwrap();
        // head 0, query 1: scores (0, 2) over keys 0..=1
        let e = (2.0f64).exp();
        let p1 = e / (1.0 + e);
        assert!((w[3 + 1] as f64 - p1).abs() < 1e-6, "{w:?}");
        assert_eq!(w[2], 0.0, "causal: query 0 does not see key 2");
        assert!((out[2 + 1] as f64 - ((1.0 - p1) * 2.0 + p1 * 4.0)).abs() < 1e-5);
        // A cap of 0.5 bounds every score to (-0.5, 0.5): weights at most e / (e + 1) apart.
        let (_, w) = capped_attention(&cfg, &q, 3, &kv, &spec, 0.5, 2).unwrap();
        let (a, b) = (w[3] as f64, w[4] as f64);
        assert!(b / a < 1f64.exp() && b > a, "{a} {b}");
    }
}
