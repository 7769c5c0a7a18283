//! What a trained head does, measured on its attention weights: the head scores of
//! DESIGN.md ("Real models") and attention rollout (Abnar & Zuidema 2020).
//!
//! Every function reads one head's weights A as an n x n row-major slice (row i = query
//! i, column j = key j) and the token ids s_0..s_{n-1} they were computed on.

use serde::Serialize;

/// The five scores of one head.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HeadScores {
    /// Mean over i >= 1 of A[i, i-1].
    pub prev_token: f64,
    /// Mean over i >= 1 of A[i, 0]: the attention sink.
    pub first_token: f64,
    /// Mean, over rows i with an earlier copy of s_i, of the weight on those copies.
    pub duplicate: f64,
    /// Mean, over rows i with an earlier j >= 1 where s_{j-1} = s_i, of the weight on
    /// those j (the token after an earlier copy of the current one).
    pub induction: f64,
    /// Mean over rows with at least 2 visible keys of the row's entropy divided by
    /// ln(visible keys), in [0, 1].
    pub entropy: f64,
}

/// Scores of one head. `visible[i]` is how many keys row i may see (i + 1 for a causal
/// model, n for a bidirectional one). Scores with no qualifying row are 0.
pub fn head_scores(a: &[f32], ids: &[u32], visible: impl Fn(usize) -> usize) -> HeadScores {
    let n = ids.len();
    debug_assert_eq!(a.len(), n * n);
    let at = |i: usize, j: usize| a[i * n + j] as f64;
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let prev: Vec<f64> = (1..n).map(|i| at(i, i - 1)).collect();
    let first: Vec<f64> = (1..n).map(|i| at(i, 0)).collect();
    let mut dup = Vec::new();
    let mut ind = Vec::new();
    let mut ent = Vec::new();
    for i in 0..n {
        let copies: Vec<usize> = (0..i).filter(|&j| ids[j] == ids[i]).collect();
        if !copies.is_empty() {
            dup.push(copies.iter().map(|&j| at(i, j)).sum());
        }
        let after: Vec<usize> = (1..i).filter(|&j| ids[j - 1] == ids[i]).collect();
        if !after.is_empty() {
            ind.push(after.iter().map(|&j| at(i, j)).sum());
        }
        let keys = visible(i).min(n);
        if keys >= 2 {
            let h: f64 = (0..n)
                .map(|j| at(i, j))
                .filter(|&p| p > 0.0)
                .map(|p| -p * p.ln())
                .sum();
            ent.push((h / (keys as f64).ln()).clamp(0.0, 1.0));
        }
    }
    HeadScores {
        prev_token: mean(&prev),
        first_token: mean(&first),
        duplicate: mean(&dup),
        induction: mean(&ind),
        entropy: mean(&ent),
    }
}

/// Attention rollout over layers: per layer A_l = 0.5 mean_h(A_l) + 0.5 I with rows
/// renormalised, then A_{L-1} ... A_1 A_0. `layers[l]` is [heads, n, n]; the result n x n.
pub fn rollout(layers: &[Vec<f32>], heads: usize, n: usize) -> Vec<f64> {
    let mut r = Rollout::new(n);
    for attn in layers {
        r.push_layer(attn, heads);
    }
    r.finish()
}

/// [`rollout`] one layer at a time, so that a caller need not keep every layer's weights:
/// it holds the n x n product so far.
#[derive(Debug, Clone)]
pub struct Rollout {
    n: usize,
    acc: Vec<f64>,
}

impl Rollout {
    pub fn new(n: usize) -> Rollout {
        Rollout {
            n,
            acc: (0..n * n)
                .map(|x| if x / n == x % n { 1.0 } else { 0.0 })
                .collect(),
        }
    }

    /// Multiply the next layer's A_l [heads, n, n] in from the left.
    pub fn push_layer(&mut self, attn: &[f32], heads: usize) {
        let n = self.n;
        debug_assert_eq!(attn.len(), heads * n * n);
        let mut a = vec![0.0f64; n * n];
        for h in 0..heads {
            for (x, &w) in attn[h * n * n..(h + 1) * n * n].iter().enumerate() {
                a[x] += w as f64 / heads as f64;
            }
        }
        for i in 0..n {
            let row = &mut a[i * n..(i + 1) * n];
            for v in row.iter_mut() {
                *v *= 0.5;
            }
            row[i] += 0.5;
            let s: f64 = row.iter().sum();
            if s > 0.0 {
                row.iter_mut().for_each(|v| *v /= s);
            }
        }
        // acc = a * acc: the newest layer multiplies from the left.
        let mut next = vec![0.0f64; n * n];
        for i in 0..n {
            for k in 0..n {
                let aik = a[i * n + k];
                if aik == 0.0 {
                    continue;
                }
                for j in 0..n {
                    next[i * n + j] += aik * self.acc[k * n + j];
                }
            }
        }
        self.acc = next;
    }

    /// The product, n x n row-major.
    pub fn finish(self) -> Vec<f64> {
        self.acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row-major n x n from rows.
    fn mat(rows: &[&[f32]]) -> Vec<f32> {
        rows.iter().flat_map(|r| r.iter().copied()).collect()
    }

    #[test]
    fn a_previous_token_head_scores_one() {
        let n = 5;
        let mut a = vec![0.0f32; n * n];
        a[0] = 1.0;
        for i in 1..n {
            a[i * n + i - 1] = 1.0;
        }
        let s = head_scores(&a, &[1, 2, 3, 4, 5], |i| i + 1);
        assert_eq!(s.prev_token, 1.0);
        assert_eq!(s.first_token, 0.25);
        assert_eq!(s.entropy, 0.0);
        // No token repeats: no qualifying rows.
        assert_eq!((s.duplicate, s.induction), (0.0, 0.0));
    }

    #[test]
    fn induction_and_duplicate_on_a_repeat() {
        // s = A B A B: row 2 (A) has an earlier A at 0, and the token after it is 1 (B).
        let ids = [7, 8, 7, 8];
        let a = mat(&[
            &[1.0, 0.0, 0.0, 0.0],
            &[0.5, 0.5, 0.0, 0.0],
            &[0.2, 0.6, 0.2, 0.0],
            &[0.1, 0.3, 0.6, 0.0],
        ]);
        let s = head_scores(&a, &ids, |i| i + 1);
        // Induction rows: i=2 (j=1: s_0 = A) -> 0.6; i=3 (j=2: s_1 = B) -> 0.6.
        assert!((s.induction - 0.6).abs() < 1e-6, "{s:?}");
        // Duplicate rows: i=2 (j=0) -> 0.2; i=3 (j=1) -> 0.3.
        assert!((s.duplicate - 0.25).abs() < 1e-6, "{s:?}");
        let uniform = mat(&[&[0.5, 0.5], &[0.5, 0.5]]);
        let u = head_scores(&uniform, &[1, 2], |_| 2);
        assert!((u.entropy - 1.0).abs() < 1e-6);
    }

    #[test]
    fn rollout_of_identity_layers_is_identity_and_rows_sum_to_one() {
        let n = 3;
        let eye: Vec<f32> = (0..n * n).map(|x| (x / n == x % n) as u8 as f32).collect();
        let r = rollout(&[eye.clone(), eye], 1, n);
        for i in 0..n {
            for j in 0..n {
                assert!((r[i * n + j] - (i == j) as u8 as f64).abs() < 1e-12);
            }
        }
        let a = mat(&[&[1.0, 0.0, 0.0], &[0.5, 0.5, 0.0], &[0.2, 0.3, 0.5]]);
        let r = rollout(&[a.clone(), a], 1, n);
        for i in 0..n {
            let s: f64 = r[i * n..(i + 1) * n].iter().sum();
            assert!((s - 1.0).abs() < 1e-12);
        }
        // One layer by hand: 0.5 A + 0.5 I for row 1 = [0.25, 0.75, 0]; two layers:
        // row 1 of M M = 0.25 * M[0] + 0.75 * M[1] = [0.25 + 0.1875, 0.5625, 0].
        assert!((r[3] - 0.4375).abs() < 1e-12 && (r[4] - 0.5625).abs() < 1e-12);
    }
}
