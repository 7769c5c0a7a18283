//! Rotary position embeddings on q and k, in the two layouts real weights come in.
//!
//! Pair i of a head (i < d_head / 2) is rotated by angle pos * base^(-2i/d_head). Which
//! two dimensions form pair i depends on the weights' row order ([`RopeStyle`]): (2i, 2i+1)
//! for GGUF llama weights, which llama.cpp's converter permutes into that order, and
//! (i, i + d_head/2) for Hugging Face weights, transformers' `rotate_half`. The angles are
//! computed in f64 and their sines and cosines stored in f32.
//!
//! Two variations of real models: partial RoPE rotates only the first `dims` dimensions
//! of a head (GPT-NeoX, some Phi models), with frequencies base^(-2i/dims) and, in the
//! Half layout, pairs (i, i + dims/2); frequency divisors (Llama 3's scaling, linear
//! scaling, a GGUF's `rope_freqs` tensor) divide pair i's frequency by divisors[i].

use crate::error::{Error, Result};
use crate::model::config::RopeStyle;

/// cos and sin of every (position, pair) for positions pos0..pos0 + n.
#[derive(Debug, Clone)]
pub struct RopeTable {
    pairs: usize,
    d_head: usize,
    n: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeTable {
    /// The table for `n` positions from `pos0`; d_head must be even.
    #[cfg(test)]
    pub fn new(base: f64, d_head: usize, pos0: usize, n: usize) -> Result<Self> {
        Self::scaled(base, d_head, d_head, &[], pos0, n)
    }

    /// The table rotating the first `dims` of `d_head` dimensions, pair i's frequency
    /// divided by `divisors[i]` (empty: by 1).
    pub fn scaled(
        base: f64,
        d_head: usize,
        dims: usize,
        divisors: &[f64],
        pos0: usize,
        n: usize,
    ) -> Result<Self> {
        if !dims.is_multiple_of(2) || dims == 0 || dims > d_head {
            return Err(Error::usage(format!(
                "RoPE needs an even number of rotated dimensions, at most the head's {d_head}; this model rotates {dims}"
            )));
        }
        if !divisors.is_empty()
            && (divisors.len() != dims / 2 || divisors.iter().any(|f| !(f.is_finite() && *f > 0.0)))
        {
            return Err(Error::usage(format!(
                "RoPE frequency divisors: {} values for {} pairs, each must be a positive number",
                divisors.len(),
                dims / 2
            )));
        }
        if !(base.is_finite() && base > 1.0) {
            return Err(Error::usage(format!(
                "RoPE base {base} is not a number above 1; give e.g. --rope-base 10000"
            )));
        }
        let pairs = dims / 2;
        let inv_freq: Vec<f64> = (0..pairs)
            .map(|i| base.powf(-2.0 * i as f64 / dims as f64) / divisors.get(i).unwrap_or(&1.0))
            .collect();
        let mut cos = Vec::with_capacity(n * pairs);
        let mut sin = Vec::with_capacity(n * pairs);
        for p in pos0..pos0 + n {
            for &f in &inv_freq {
                let (s, c) = (p as f64 * f).sin_cos();
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        Ok(RopeTable {
            pairs,
            d_head,
            n,
            cos,
            sin,
        })
    }

    /// Rotate x [heads, n, d_head] (head-major) in place; row r stands at position pos0 + r.
    pub fn apply(&self, style: RopeStyle, x: &mut [f32]) {
        let d = self.d_head;
        for head in x.chunks_exact_mut(self.n * d) {
            for (r, row) in head.chunks_exact_mut(d).enumerate() {
                let row = &mut row[..2 * self.pairs];
                let cos = &self.cos[r * self.pairs..][..self.pairs];
                let sin = &self.sin[r * self.pairs..][..self.pairs];
                match style {
                    RopeStyle::Interleaved => {
                        for (i, pair) in row.chunks_exact_mut(2).enumerate() {
                            let (a, b) = (pair[0], pair[1]);
                            pair[0] = a * cos[i] - b * sin[i];
                            pair[1] = a * sin[i] + b * cos[i];
                        }
                    }
                    RopeStyle::Half => {
                        let (lo, hi) = row.split_at_mut(self.pairs);
                        for i in 0..self.pairs {
                            let (a, b) = (lo[i], hi[i]);
                            lo[i] = a * cos[i] - b * sin[i];
                            hi[i] = a * sin[i] + b * cos[i];
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_styles_rotate_the_same_pairs_after_the_permutation() {
        // A vector in Half order (pairs (i, i + 2)) and the same vector in Interleaved order.
        let half = [1.0f32, 2.0, 3.0, 4.0];
        let inter = [1.0f32, 3.0, 2.0, 4.0];
        let t = RopeTable::new(10000.0, 4, 5, 1).unwrap();
        let (mut a, mut b) = (half, inter);
        t.apply(RopeStyle::Half, &mut a);
        t.apply(RopeStyle::Interleaved, &mut b);
        assert_eq!([a[0], a[2], a[1], a[3]], b);
        // pair 0 at position 5 turns by 5 rad
        let (s, c) = 5f64.sin_cos();
        assert!((b[0] as f64 - (c - 3.0 * s)).abs() < 1e-6);
    }

    #[test]
    fn position_zero_is_the_identity_and_odd_heads_are_refused() {
        let t = RopeTable::new(500.0, 6, 0, 1).unwrap();
        let mut x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        t.apply(RopeStyle::Half, &mut x);
        assert_eq!(x, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert!(RopeTable::new(10000.0, 5, 0, 1).is_err());
        assert!(RopeTable::new(0.5, 4, 0, 1).is_err());
    }

    #[test]
    fn partial_rope_leaves_the_tail_and_divisors_slow_pairs() {
        // d_head 6, 4 rotated: frequencies 1 and 100^(-1/2) = 0.1, the second divided by 4.
        let t = RopeTable::scaled(100.0, 6, 4, &[1.0, 4.0], 3, 1).unwrap();
        let mut x = [1.0f32, 0.0, 0.0, 1.0, 7.0, 8.0];
        t.apply(RopeStyle::Half, &mut x);
        // pair 0 = dims (0, 2) turns by 3 rad; pair 1 = dims (1, 3) by 3 * 0.1 / 4.
        let (s0, c0) = 3f64.sin_cos();
        let (s1, c1) = (0.075f64).sin_cos();
        let want = [c0, -s1, s0, c1, 7.0, 8.0];
        for (a, b) in x.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-6, "{x:?} vs {want:?}");
        }
        assert!(RopeTable::scaled(100.0, 6, 8, &[], 0, 1).is_err());
        assert!(RopeTable::scaled(100.0, 6, 4, &[1.0], 0, 1).is_err());
        assert!(RopeTable::scaled(100.0, 6, 4, &[1.0, 0.0], 0, 1).is_err());
    }
}
