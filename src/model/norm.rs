//! LayerNorm and RMSNorm over the rows of [n, d], as transformers computes them: the
//! statistics of each row accumulated in f64 (transformers uses f32; f64 only removes
//! rounding), the normalised value in f32, then the scale (and LayerNorm's shift).
//!
//! A row's sums run in [`LANES`] independent f64 accumulators added at the end: one
//! accumulator would be a chain of dependent additions the compiler may not reorder (a
//! few cycles each, 576 of them a row on SmolLM2), the lanes are one vector addition a
//! step. The order of additions differs; in f64 the difference is far below f32's
//! rounding.

use crate::error::Result;
use crate::model::config::NormKind;
use crate::model::rows::rows_mut;
use crate::model::weights::Norm;

/// [`norm_rows`] with the rows shared out over `threads` (the same numbers).
pub fn norm_rows_on(
    threads: usize,
    kind: NormKind,
    x: &[f32],
    d: usize,
    norm: &Norm,
    eps: f64,
    out: &mut [f32],
) -> Result<()> {
    rows_mut(threads, out, d, &|r, o| {
        norm_rows(kind, &x[r.start * d..r.end * d], d, norm, eps, o)
    })
}

/// out[i] = norm(x[i]) for every row of x [n, d]; `out` has the same length as `x`.
pub fn norm_rows(kind: NormKind, x: &[f32], d: usize, norm: &Norm, eps: f64, out: &mut [f32]) {
    for (row, dst) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        match kind {
            NormKind::Layer => layer_norm(row, norm, eps, dst),
            NormKind::Rms => rms_norm(row, norm, eps, dst),
        }
    }
}

/// (x - mean) / sqrt(var + eps) * w + b, var the biased variance (PyTorch's LayerNorm).
fn layer_norm(x: &[f32], norm: &Norm, eps: f64, out: &mut [f32]) {
    let d = x.len() as f64;
    let mean = lane_sum(x, |v| v) / d;
    let var = lane_sum(x, |v| (v - mean) * (v - mean)) / d;
    let inv = 1.0 / (var + eps).sqrt();
    for (j, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        let normed = ((v as f64 - mean) * inv) as f32;
        *o = normed * norm.w[j] + norm.b.as_ref().map_or(0.0, |b| b[j]);
    }
}

/// x * rsqrt(mean(x^2) + eps) * w (Llama's RMSNorm: no mean subtracted, no shift).
fn rms_norm(x: &[f32], norm: &Norm, eps: f64, out: &mut [f32]) {
    let ms = lane_sum(x, |v| v * v) / x.len() as f64;
    let inv = (1.0 / (ms + eps).sqrt()) as f32;
    for (j, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = (v * inv) * norm.w[j] + norm.b.as_ref().map_or(0.0, |b| b[j]);
    }
}

/// Independent f64 accumulators of a row's sum: a vector's width of them.
const LANES: usize = 8;

/// The sum of f(v) over x in f64, in [`LANES`] accumulators.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v as f64);
        }
    }
    for (a, &v) in acc.iter_mut().zip(tail) {
        *a += f(v as f64);
    }
    acc.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_norm_of_a_known_row() {
        let norm = Norm {
            w: vec![1.0, 2.0, 1.0, 1.0],
            b: Some(vec![0.0, 0.0, 0.0, 0.5]),
        };
        let mut out = [0.0; 4];
        norm_rows(
            NormKind::Layer,
            &[1.0, 2.0, 3.0, 4.0],
            4,
            &norm,
            0.0,
            &mut out,
        );
        // mean 2.5, var 1.25
        let s = 1.25f64.sqrt();
        let want = [-1.5 / s, 2.0 * (-0.5 / s), 0.5 / s, 1.5 / s + 0.5];
        for (g, w) in out.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-6, "{g} vs {w}");
        }
    }

    #[test]
    fn rms_norm_of_a_known_row() {
        let norm = Norm {
            w: vec![1.0, 0.5],
            b: None,
        };
        let mut out = [0.0; 2];
        norm_rows(NormKind::Rms, &[3.0, 4.0], 2, &norm, 0.0, &mut out);
        // rms = sqrt(12.5)
        let r = 12.5f64.sqrt();
        assert!((out[0] as f64 - 3.0 / r).abs() < 1e-6);
        assert!((out[1] as f64 - 2.0 / r).abs() < 1e-6);
    }

    #[test]
    fn long_rows_match_one_sequential_sum() {
        // Lengths around the lane count and past it, so both the lanes and the tail count.
        for d in [1, 7, 8, 9, 37, 576] {
            let x: Vec<f32> = (0..d)
                .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.37)
                .collect();
            let norm = Norm {
                w: (0..d).map(|i| 1.0 + i as f32 * 0.01).collect(),
                b: Some((0..d).map(|i| i as f32 * -0.02).collect()),
            };
            let mean = x.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
            let ms = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / d as f64;
            let (mut layer, mut rms) = (vec![0.0; d], vec![0.0; d]);
            norm_rows(NormKind::Layer, &x, d, &norm, 1e-5, &mut layer);
            norm_rows(NormKind::Rms, &x, d, &norm, 1e-5, &mut rms);
            for j in 0..d {
                let b = norm.b.as_ref().unwrap()[j] as f64;
                let w = norm.w[j] as f64;
                let want_layer = (x[j] as f64 - mean) / (var + 1e-5).sqrt() * w + b;
                let want_rms = x[j] as f64 / (ms + 1e-5).sqrt() * w + b;
                assert!((layer[j] as f64 - want_layer).abs() < 1e-5, "d {d} j {j}");
                assert!((rms[j] as f64 - want_rms).abs() < 1e-5, "d {d} j {j}");
            }
        }
    }
}
