//! GQA and MQA beside MHA on the same inputs.
//!
//! Start from a multi-head layer: H query heads and H key/value heads. Grouping it into
//! g KV heads (g divides H) makes query head h read K/V head h / (H / g) (see
//! [`ProblemShape::kv_head_for`]). To get the grouped K and V from the MHA ones we
//! mean-pool the heads of each group — the conversion Ainslie et al. 2023 ("GQA:
//! Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints")
//! found best before uptraining. Pooling the projected K and V is the same as pooling
//! the projection weights, because the projection is linear.
//!
//! For every divisor g of H this module reports who shares what, the cache it needs,
//! and how far the output moves from MHA: the largest absolute difference and the
//! relative Frobenius difference ||O_g - O_mha|| / ||O_mha||. Without uptraining this
//! is the damage the conversion does; g = H is MHA itself (no change), g = 1 is MQA.

use ndarray::{Array3, ArrayView3, Axis, s};

use crate::cli::Dtype;
use crate::engine::config::MaskKind;
use crate::engine::mask::Mask;
use crate::engine::memory::{KvSharing, divisors};
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::engine::reference;
use crate::error::{Error, Result};

/// One choice of KV heads, against MHA.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupChoice {
    pub kv_heads: usize,
    /// Query heads per KV head.
    pub group_size: usize,
    pub sharing: KvSharing,
    /// For each query head, the KV head it reads.
    pub kv_head_of: Vec<usize>,
    /// For each KV head, the query heads that read it.
    pub query_heads_of: Vec<Vec<usize>>,
    /// Numbers one layer's cache holds for the n tokens: n x kv_heads x (d + dv).
    pub cache_elements: u64,
    /// `cache_elements` at the chosen dtype.
    pub cache_bytes: u64,
    /// The pooled keys and values [kv_heads, n, d] and [kv_heads, n, dv].
    pub k: Array3<f64>,
    pub v: Array3<f64>,
    /// The output with the pooled K/V: [heads, n, dv].
    pub out: Array3<f64>,
    /// max |O_g - O_mha| over everything.
    pub max_abs_diff: f64,
    /// ||O_g - O_mha||_F / ||O_mha||_F (0 when O_mha is all zeros and O_g too).
    pub rel_diff: f64,
    /// max |O_g - O_mha| per query head.
    pub head_max_abs_diff: Vec<f64>,
}

/// MHA and every grouping of its K/V heads, on the same Q, K, V.
#[derive(Debug, Clone, PartialEq)]
pub struct GqaComparison {
    pub heads: usize,
    pub n: usize,
    pub d: usize,
    pub dv: usize,
    pub dtype: Dtype,
    pub mask: MaskKind,
    pub scale: f64,
    /// [heads, n, dv]
    pub mha_out: Array3<f64>,
    /// One entry per divisor of `heads`, MQA (1) first, MHA (heads) last.
    pub choices: Vec<GroupChoice>,
}

/// Mean-pool `kv` [H, n, w] into `groups` heads: head g is the mean of heads
/// g (H/groups) .. (g+1) (H/groups).
pub fn mean_pool_heads(kv: ArrayView3<f64>, groups: usize) -> Result<Array3<f64>> {
    let (h, n, w) = kv.dim();
    if groups == 0 || h % groups != 0 {
        return Err(Error::usage(format!(
            "{groups} KV groups do not divide {h} heads; choose a divisor of {h}"
        )));
    }
    let size = h / groups;
    let mut out = Array3::zeros((groups, n, w));
    for g in 0..groups {
        let mean = kv
            .slice(s![g * size..(g + 1) * size, .., ..])
            .mean_axis(Axis(0))
            .expect("a group holds at least one head");
        out.slice_mut(s![g, .., ..]).assign(&mean);
    }
    Ok(out)
}

/// Compare MHA on q [H, n, d], k [H, n, d], v [H, n, dv] with every grouping of its K/V
/// heads, under `mask` and `scale` (1/sqrt(d) unless given).
pub fn compare(
    q: ArrayView3<f64>,
    k: ArrayView3<f64>,
    v: ArrayView3<f64>,
    mask: &MaskKind,
    scale: Option<f64>,
    dtype: Dtype,
) -> Result<GqaComparison> {
    let (h, n_q, d) = q.dim();
    let (hk, n_k, dk) = k.dim();
    let (hv, n_v, dv) = v.dim();
    if hk != h || hv != h {
        return Err(Error::usage(format!(
            "the GQA comparison starts from multi-head K/V: Q has {h} heads, K {hk}, V {hv}; give all three the same heads"
        )));
    }
    let mha_shape = ProblemShape::from_dims([1, h, n_q, d], [1, h, n_k, dk], [1, h, n_v, dv])?;
    let mask = Mask::resolve(mask, 1, h, n_q, n_k)?;
    let spec = AttnSpec::new(&mha_shape, mask.clone(), false, scale);
    let q4 = q.insert_axis(Axis(0));
    let run = |shape: &ProblemShape, k: ArrayView3<f64>, v: ArrayView3<f64>| -> Array3<f64> {
        reference::attention(
            shape,
            q4,
            k.insert_axis(Axis(0)),
            v.insert_axis(Axis(0)),
            &spec,
        )
        .out
        .index_axis_move(Axis(0), 0)
    };
    let mha_out = run(&mha_shape, k, v);
    let mha_norm = mha_out.iter().map(|x| x * x).sum::<f64>().sqrt();

    let choices = divisors(h as u64)
        .into_iter()
        .map(|g| {
            let g = g as usize;
            let shape = ProblemShape {
                kv_heads: g,
                ..mha_shape
            };
            let kg = mean_pool_heads(k, g)?;
            let vg = mean_pool_heads(v, g)?;
            let out = run(&shape, kg.view(), vg.view());
            let diff = &out - &mha_out;
            let kv_head_of: Vec<usize> = (0..h).map(|qh| shape.kv_head_for(qh)).collect();
            let query_heads_of = (0..g)
                .map(|kv| (0..h).filter(|&qh| kv_head_of[qh] == kv).collect())
                .collect();
            let diff_norm = diff.iter().map(|x| x * x).sum::<f64>().sqrt();
            let cache_elements = (n_k * g * (d + dv)) as u64;
            Ok(GroupChoice {
                kv_heads: g,
                group_size: h / g,
                sharing: KvSharing::of(h as u64, g as u64),
                kv_head_of,
                query_heads_of,
                cache_elements,
                cache_bytes: cache_elements * dtype.bytes(),
                max_abs_diff: diff.iter().map(|x| x.abs()).fold(0.0, f64::max),
                rel_diff: if mha_norm > 0.0 {
                    diff_norm / mha_norm
                } else {
                    diff_norm
                },
                head_max_abs_diff: diff
                    .outer_iter()
                    .map(|hd| hd.iter().map(|x| x.abs()).fold(0.0, f64::max))
                    .collect(),
                k: kg,
                v: vg,
                out,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(GqaComparison {
        heads: h,
        n: n_q,
        d,
        dv,
        dtype,
        mask: mask.kind().clone(),
        scale: spec.scale,
        mha_out,
        choices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wave(h: usize, n: usize, d: usize, phase: f64) -> Array3<f64> {
        Array3::from_shape_fn((h, n, d), |(a, b, c)| {
            ((a * 5 + b * 3 + c * 2) as f64 * 0.41 + phase).cos()
        })
    }

    #[test]
    fn sharing_follows_kv_head_for_and_mha_is_unchanged() {
        let (q, k, v) = (wave(8, 6, 4, 0.0), wave(8, 6, 4, 1.0), wave(8, 6, 4, 2.0));
        let c = compare(
            q.view(),
            k.view(),
            v.view(),
            &MaskKind::Causal,
            None,
            Dtype::F16,
        )
        .unwrap();
        let gs: Vec<usize> = c.choices.iter().map(|c| c.kv_heads).collect();
        assert_eq!(gs, [1, 2, 4, 8]);
        let gqa2 = &c.choices[1];
        assert_eq!(gqa2.kv_head_of, [0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(gqa2.query_heads_of, [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(gqa2.cache_bytes, 6 * 2 * 8 * 2);
        let mha = c.choices.last().unwrap();
        assert_eq!(mha.sharing, KvSharing::Mha);
        assert_eq!(mha.max_abs_diff, 0.0);
        assert!(
            c.choices[0].max_abs_diff > 1e-3,
            "MQA pools different heads"
        );
        assert_eq!(c.choices[0].sharing, KvSharing::Mqa);
    }

    #[test]
    fn heads_that_already_agree_pool_without_loss() {
        let q = wave(4, 5, 3, 0.0);
        let one_k = wave(1, 5, 3, 1.0);
        let one_v = wave(1, 5, 2, 2.0);
        let k = ndarray::concatenate(Axis(0), &[one_k.view(); 4]).unwrap();
        let v = ndarray::concatenate(Axis(0), &[one_v.view(); 4]).unwrap();
        let c = compare(
            q.view(),
            k.view(),
            v.view(),
            &MaskKind::None,
            None,
            Dtype::F32,
        )
        .unwrap();
        for choice in &c.choices {
            assert!(choice.max_abs_diff < 1e-14, "g={}", choice.kv_heads);
        }
    }

    #[test]
    fn mismatched_heads_are_refused() {
        let q = wave(4, 5, 3, 0.0);
        let k = wave(2, 5, 3, 0.0);
        let e = compare(
            q.view(),
            k.view(),
            k.view(),
            &MaskKind::None,
            None,
            Dtype::F32,
        );
        assert!(e.unwrap_err().to_string().contains("Q has 4 heads, K 2"));
    }
}
