//! Every layer's attention weights of a text, kept for the app in 2 bytes a weight.
//!
//! A model session shows all of its maps at once (30 layers x 9 heads of SmolLM2), and at
//! the app's 1,024 tokens their f32 values would take 1.1 GB. A weight is a probability in
//! [0, 1], so it is kept as a 16-bit fixed-point number (absolute error at most 7.6e-6,
//! below the 4 decimals the app prints and the 1e-4 its tests hold real models to), and a
//! layer whose weights above the diagonal are all zero (every causal and sliding-window
//! layer) keeps only its lower triangle: 283 MB for that case instead of 1.1 GB.
//!
//! Why not f16: its relative precision puts an error of up to 2.4e-4 on weights near 1,
//! visible at 4 decimals, while fixed point spends its bits evenly on [0, 1].

/// 2^16 - 1 steps over [0, 1].
const STEPS: f32 = 65535.0;

/// Largest error a stored weight has: half a step.
pub const MAX_ERROR: f32 = 0.5 / STEPS;

/// Layers x heads x [n, n] attention weights, compressed as described in the module.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttentionMaps {
    n: usize,
    heads: usize,
    layers: Vec<LayerMaps>,
}

#[derive(Debug, Clone, PartialEq)]
struct LayerMaps {
    /// Only rows' entries j <= i are stored (everything above the diagonal was 0).
    lower: bool,
    data: Vec<u16>,
}

fn encode(w: f32) -> u16 {
    // NaN never reaches here (the kernel's weights are finite); clamp covers rounding.
    (w.clamp(0.0, 1.0) * STEPS).round() as u16
}

fn decode(q: u16) -> f32 {
    q as f32 / STEPS
}

/// Bytes of one layer as stored: `heads` heads of n x n, or of the lower triangle.
pub fn layer_bytes(heads: usize, n: usize, lower: bool) -> u64 {
    let cells = if lower {
        n as u64 * (n as u64 + 1) / 2
    } else {
        n as u64 * n as u64
    };
    heads as u64 * cells * 2
}

impl AttentionMaps {
    pub fn new(n: usize, heads: usize) -> AttentionMaps {
        AttentionMaps {
            n,
            heads,
            layers: Vec::new(),
        }
    }

    /// Append the next layer's weights [heads, n, n].
    pub fn push_layer(&mut self, weights: &[f32]) {
        let (n, heads) = (self.n, self.heads);
        debug_assert_eq!(weights.len(), heads * n * n);
        let lower = weights
            .chunks_exact(n)
            .enumerate()
            .all(|(r, row)| row[r % n + 1..].iter().all(|&w| w == 0.0));
        let mut data = Vec::with_capacity((layer_bytes(heads, n, lower) / 2) as usize);
        for (r, row) in weights.chunks_exact(n).enumerate() {
            let end = if lower { r % n + 1 } else { n };
            data.extend(row[..end].iter().map(|&w| encode(w)));
        }
        self.layers.push(LayerMaps { lower, data });
    }

    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Where row i of head h starts in a layer's data, and how many entries it stores.
    fn row_span(&self, lower: bool, h: usize, i: usize) -> (usize, usize) {
        let n = self.n;
        if lower {
            let per_head = n * (n + 1) / 2;
            (h * per_head + i * (i + 1) / 2, i + 1)
        } else {
            ((h * n + i) * n, n)
        }
    }

    /// Row i of head h in `layer` into `out` [n] (zeros past the stored part).
    pub fn row_into(&self, layer: usize, h: usize, i: usize, out: &mut [f32]) {
        let len = self.row_prefix_into(layer, h, i, out);
        out[len..self.n].fill(0.0);
    }

    /// The stored part of row i of head h in `layer` into the start of `out`; returns
    /// its length (the rest of the row is 0).
    pub fn row_prefix_into(&self, layer: usize, h: usize, i: usize, out: &mut [f32]) -> usize {
        let lm = &self.layers[layer];
        let (start, len) = self.row_span(lm.lower, h, i);
        for (o, &q) in out[..len].iter_mut().zip(&lm.data[start..start + len]) {
            *o = decode(q);
        }
        len
    }

    /// Row i of head h in `layer`, [n].
    pub fn row(&self, layer: usize, h: usize, i: usize) -> Vec<f32> {
        let mut out = vec![0.0; self.n];
        self.row_into(layer, h, i, &mut out);
        out
    }

    /// Head h of `layer`, [n, n] row-major.
    pub fn head(&self, layer: usize, h: usize) -> Vec<f32> {
        let n = self.n;
        let mut out = vec![0.0; n * n];
        for (i, row) in out.chunks_exact_mut(n).enumerate() {
            self.row_into(layer, h, i, row);
        }
        out
    }

    /// Every head of `layer`, [heads, n, n].
    pub fn layer(&self, layer: usize) -> Vec<f32> {
        (0..self.heads).flat_map(|h| self.head(layer, h)).collect()
    }

    /// One weight.
    pub fn get(&self, layer: usize, h: usize, i: usize, j: usize) -> f32 {
        let lm = &self.layers[layer];
        let (start, len) = self.row_span(lm.lower, h, i);
        if j < len {
            decode(lm.data[start + j])
        } else {
            0.0
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(|l| l.data.len() * 2).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Random softmax rows, causal (zeros above the diagonal) or not.
    fn weights(heads: usize, n: usize, causal: bool, rng: &mut ChaCha8Rng) -> Vec<f32> {
        let mut w = vec![0.0f32; heads * n * n];
        for (r, row) in w.chunks_exact_mut(n).enumerate() {
            let end = if causal { r % n + 1 } else { n };
            let raw: Vec<f32> = (0..end).map(|_| rng.random::<f32>().powi(4)).collect();
            let s: f32 = raw.iter().sum();
            for (o, v) in row.iter_mut().zip(&raw) {
                *o = v / s;
            }
        }
        w
    }

    #[test]
    fn every_weight_comes_back_within_half_a_step() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for (n, heads) in [(1, 1), (5, 3), (17, 2)] {
            let mut maps = AttentionMaps::new(n, heads);
            let causal = weights(heads, n, true, &mut rng);
            let full = weights(heads, n, false, &mut rng);
            maps.push_layer(&causal);
            maps.push_layer(&full);
            assert_eq!(maps.layers(), 2);
            assert_eq!(
                maps.bytes() as u64,
                layer_bytes(heads, n, true) + layer_bytes(heads, n, n == 1)
            );
            for (l, w) in [&causal, &full].into_iter().enumerate() {
                assert_eq!(maps.layer(l).len(), w.len());
                for (x, (&got, &want)) in maps.layer(l).iter().zip(w.iter()).enumerate() {
                    assert!((got - want).abs() <= MAX_ERROR, "n {n} layer {l} cell {x}");
                    let (h, i, j) = (x / (n * n), x / n % n, x % n);
                    assert_eq!(maps.get(l, h, i, j), got);
                    assert_eq!(maps.row(l, h, i)[j], got);
                }
            }
        }
    }

    #[test]
    fn a_causal_layer_keeps_half() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut maps = AttentionMaps::new(64, 2);
        maps.push_layer(&weights(2, 64, true, &mut rng));
        assert_eq!(maps.bytes(), 2 * (64 * 65 / 2) * 2);
    }
}
