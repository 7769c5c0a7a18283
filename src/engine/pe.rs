//! Position encodings: the sinusoidal table, RoPE rotations and ALiBi slopes.

use ndarray::{Array2, ArrayViewMut2};

/// Base of the sinusoidal table (Vaswani et al. 2017).
pub const SINUSOIDAL_BASE: f64 = 10000.0;

/// The sinusoidal table: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(..).
pub fn sinusoidal(n: usize, d: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |(pos, k)| {
        let i = (k / 2) as f64;
        let angle = pos as f64 / SINUSOIDAL_BASE.powf(2.0 * i / d as f64);
        if k % 2 == 0 { angle.sin() } else { angle.cos() }
    })
}

pub use crate::attn::alibi::alibi_slopes;

/// Rotation angle of RoPE pair `pair` (dims 2*pair, 2*pair+1) at position `pos`.
pub fn rope_angle(pos: f64, pair: usize, d: usize, base: f64) -> f64 {
    pos * base.powf(-2.0 * pair as f64 / d as f64)
}

/// Rotate one vector in place by RoPE at position `pos` (interleaved pairs; an odd last
/// dimension is left as it is).
pub fn rope_rotate(x: &mut [f64], pos: f64, base: f64) {
    let d = x.len();
    for pair in 0..d / 2 {
        let (s, c) = rope_angle(pos, pair, d, base).sin_cos();
        let (a, b) = (x[2 * pair], x[2 * pair + 1]);
        x[2 * pair] = a * c - b * s;
        x[2 * pair + 1] = a * s + b * c;
    }
}

/// Rotate every row of `x` ([N, d]); row r stands at position `first_pos + r`.
pub fn rope_rows(mut x: ArrayViewMut2<f64>, first_pos: f64, base: f64) {
    for (r, mut row) in x.rows_mut().into_iter().enumerate() {
        let mut v = row.to_vec();
        rope_rotate(&mut v, first_pos + r as f64, base);
        row.iter_mut().zip(v).for_each(|(dst, src)| *dst = src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinusoidal_pe_of_position_1() {
        let pe = sinusoidal(2, 8);
        let got: Vec<f64> = pe
            .row(1)
            .iter()
            .take(3)
            .map(|v| (v * 1e4).round() / 1e4)
            .collect();
        assert_eq!(got, vec![0.8415, 0.5403, 0.0998]);
    }

    #[test]
    fn alibi_slopes_for_8_heads() {
        let s = alibi_slopes(8);
        for (h, m) in s.iter().enumerate() {
            assert_eq!(*m, 1.0 / 2f64.powi(h as i32 + 1));
        }
    }

    #[test]
    fn alibi_slopes_for_6_heads_follow_the_paper() {
        // p = 4: 1/4, 1/16, 1/64, 1/256; then 2p = 8 slopes, every other: 1/2, 1/8
        let s = alibi_slopes(6);
        let want = [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125];
        assert_eq!(s, want);
    }

    #[test]
    fn rope_keeps_norm() {
        let mut v = vec![1.0, 2.0, 3.0, 4.0, 5.0];
        let before: f64 = v.iter().map(|x| x * x).sum();
        rope_rotate(&mut v, 7.0, 10000.0);
        let after: f64 = v.iter().map(|x| x * x).sum();
        assert!((before - after).abs() < 1e-12);
        assert_eq!(v[4], 5.0);
    }
}
