//! What the logits say: per-token loss and the most likely next tokens. Log-softmax in f64,
//! max-subtracted, so that large logits never overflow.

use serde::Serialize;

/// One candidate next token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TopToken {
    pub id: u32,
    pub logit: f32,
    /// softmax(logits)[id] over the whole vocabulary.
    pub prob: f64,
}

/// ln sum_j exp(row_j), computed stably.
pub fn log_sum_exp(row: &[f32]) -> f64 {
    let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + row
        .iter()
        .map(|&v| (v as f64 - max).exp())
        .sum::<f64>()
        .ln()
}

/// -ln p(ids[i] | ids[..i]) for i in 1..n, from logits [n, vocab] (row i - 1 predicts
/// token i). Empty for n < 2.
pub fn token_loss(logits: &[f32], vocab: usize, ids: &[u32]) -> Vec<f64> {
    (1..ids.len())
        .map(|i| {
            let row = &logits[(i - 1) * vocab..][..vocab];
            log_sum_exp(row) - row[ids[i] as usize] as f64
        })
        .collect()
}

/// The most likely token of one logits row (lowest id on ties): `top_k(row, 1)[0].id`
/// without the softmax, what greedy decoding needs.
pub fn argmax(row: &[f32]) -> Option<u32> {
    let mut best: Option<(u32, f32)> = None;
    for (i, &v) in row.iter().enumerate() {
        if best.is_none_or(|(_, b)| v.total_cmp(&b).is_gt()) {
            best = Some((i as u32, v));
        }
    }
    best.map(|(i, _)| i)
}

/// Up to this k, [`top_k`] keeps a sorted list of candidates in one pass over the row
/// instead of an index of the whole vocabulary (262,144 entries for Gemma 3).
const STREAM_K: usize = 64;

/// The `k` most likely tokens of one logits row, most likely first (ties: lower id first).
pub fn top_k(row: &[f32], k: usize) -> Vec<TopToken> {
    let lse = log_sum_exp(row);
    let k = k.min(row.len());
    let by_logit = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
    let idx: Vec<u32> = if k <= STREAM_K {
        // Sorted best first; a later id never beats an equal logit, so ties keep id order.
        let mut best: Vec<u32> = Vec::with_capacity(k + 1);
        for (i, &v) in row.iter().enumerate() {
            if best.len() == k
                && best
                    .last()
                    .is_none_or(|&l| !v.total_cmp(&row[l as usize]).is_gt())
            {
                continue;
            }
            let at = best.partition_point(|&b| !v.total_cmp(&row[b as usize]).is_gt());
            best.insert(at, i as u32);
            best.truncate(k);
        }
        best
    } else {
        let mut idx: Vec<u32> = (0..row.len() as u32).collect();
        if k < idx.len() {
            idx.select_nth_unstable_by(k - 1, by_logit);
        }
        idx.truncate(k);
        idx.sort_by(by_logit);
        idx
    };
    idx.into_iter()
        .map(|id| {
            let logit = row[id as usize];
            TopToken {
                id,
                logit,
                prob: (logit as f64 - lse).exp(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_and_top_k_of_a_known_row() {
        // p = softmax([0, ln 3]) = [1/4, 3/4]
        let l3 = 3f32.ln();
        let logits = [0.0, l3, 5.0, 5.0];
        let loss = token_loss(&logits, 2, &[7, 0]);
        assert!((loss[0] - 4f64.ln()).abs() < 1e-6);
        let top = top_k(&logits[..2], 5);
        assert_eq!(top.iter().map(|t| t.id).collect::<Vec<_>>(), [1, 0]);
        assert!((top[0].prob - 0.75).abs() < 1e-6);
        // ties: lower id first
        assert_eq!(top_k(&logits[2..], 1)[0].id, 0);
    }

    #[test]
    fn large_logits_do_not_overflow() {
        let row = [1000.0f32, 999.0, -1000.0];
        let top = top_k(&row, 3);
        let total: f64 = top.iter().map(|t| t.prob).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert!(token_loss(&row, 3, &[0, 0])[0].is_finite());
    }

    /// The one-pass selection and argmax against a full sort, on rows full of ties and on
    /// k both sides of the streaming bound.
    #[test]
    fn top_k_and_argmax_match_a_full_sort() {
        use rand::{RngExt, SeedableRng};
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for case in 0..200 {
            let n = r.random_range(1..300);
            let spread = if case % 2 == 0 { 4 } else { 1000 };
            let row: Vec<f32> = (0..n)
                .map(|_| r.random_range(0..spread) as f32 * 0.5 - 3.0)
                .collect();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|a, b| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b)));
            for k in [0, 1, 2, 5, STREAM_K - 1, STREAM_K, STREAM_K + 1, n, n + 3] {
                let got: Vec<u32> = top_k(&row, k).iter().map(|t| t.id).collect();
                assert_eq!(got, want[..k.min(n)], "n {n} k {k}");
            }
            assert_eq!(argmax(&row), Some(want[0]));
        }
        assert_eq!(argmax(&[]), None);
    }
}
