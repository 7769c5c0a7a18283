//! LayerNorm and RMSNorm over the rows of [n, d], as transformers computes them: the
//! statistics of each row accumulated in f64 (transformers uses f32; f64 only removes
//! rounding), the normalised value in f32, then the scale (and LayerNorm's shift).

use crate::model::config::NormKind;
use crate::model::weights::Norm;

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
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / d;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d;
    let inv = 1.0 / (var + eps).sqrt();
    for (j, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        let normed = ((v as f64 - mean) * inv) as f32;
        *o = normed * norm.w[j] + norm.b.as_ref().map_or(0.0, |b| b[j]);
    }
}

/// x * rsqrt(mean(x^2) + eps) * w (Llama's RMSNorm: no mean subtracted, no shift).
fn rms_norm(x: &[f32], norm: &Norm, eps: f64, out: &mut [f32]) {
    let ms = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / x.len() as f64;
    let inv = (1.0 / (ms + eps).sqrt()) as f32;
    for (j, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = (v * inv) * norm.w[j] + norm.b.as_ref().map_or(0.0, |b| b[j]);
    }
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
}
