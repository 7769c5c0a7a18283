//! What the model trains on, drawn from ChaCha8 seeded by `--seed`:
//!
//! - the induction task (DESIGN.md, "Training a small model"): each sequence starts with a
//!   block A of L random tokens (L uniform in [`INDUCTION_MIN_SPAN`, context/2], drawn with
//!   replacement), then A again at once, then fresh random tokens. Only the tokens of the
//!   second copy after its first are trained on (`trained`): they are what an induction
//!   circuit predicts (find the earlier occurrence of the current token, read the token
//!   after it), and every other token is noise that nothing can predict. Both halves of
//!   the recipe matter: with the loss on every token, or with the copy at a random offset,
//!   a 2-layer model does not form the circuit within thousands of steps;
//! - the copy-span task: uniform random tokens in which a span of random length L in
//!   [`MIN_SPAN`, context/2] is copied to a random later, non-overlapping offset, the loss
//!   on every token. A 2-layer model learns a fixed-distance shortcut on it instead of the
//!   circuit (layer-0 heads looking about context/2 back);
//! - byte-level text: windows of context + 1 bytes at random offsets of a file.
//!
//! Each sequence carries a mask of the targets that copying predicts (`repeated`), so the
//! loss can be split into the part an induction circuit can lower and the rest, and a
//! mask of the targets the loss is taken on (`trained`).

use std::path::Path;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};

/// The shortest repeated span of the copy-span task: shorter ones give too few
/// predictable tokens to learn from.
pub const MIN_SPAN: usize = 4;

/// The shortest block A of the induction task.
pub const INDUCTION_MIN_SPAN: usize = 8;

/// Bytes of a `--text` file: byte-level training samples random windows, so more text
/// than this adds nothing a CPU run can learn from, and it is held in memory.
pub const MAX_TEXT_BYTES: u64 = 256 << 20;

/// Where the sequences come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A repeated block at the start, the loss on its predictable second copy.
    Induction { vocab: usize },
    /// A span copied to a random later offset, the loss on every token.
    CopySpan { vocab: usize },
    /// A file's bytes (vocab 256).
    Text { bytes: Vec<u8> },
}

impl Source {
    /// A text file for `--text`, refused if it cannot fill one sequence of `context` + 1
    /// bytes.
    pub fn text(path: &Path, context: usize) -> Result<Source> {
        let bytes = crate::input::read_bounded(path, MAX_TEXT_BYTES, "--text training data")?;
        if bytes.len() < context + 1 {
            return Err(Error::file(
                path,
                format!(
                    "it holds {} bytes but one training sequence needs --context + 1 = {} (use a longer file or a shorter --context)",
                    bytes.len(),
                    context + 1
                ),
            ));
        }
        Ok(Source::Text { bytes })
    }

    pub fn vocab(&self) -> usize {
        match self {
            Source::Induction { vocab } | Source::CopySpan { vocab } => *vocab,
            Source::Text { .. } => 256,
        }
    }
}

/// A batch: inputs and next-token targets, [B*T] each, which targets copying predicts
/// and which the loss is taken on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub batch: usize,
    pub tokens: Vec<u32>,
    pub targets: Vec<u32>,
    pub repeated: Vec<bool>,
    pub trained: Vec<bool>,
}

/// A seeded stream of batches.
pub struct Sampler {
    source: Source,
    context: usize,
    rng: ChaCha8Rng,
    offset_share: f64,
}

impl Sampler {
    pub fn new(source: Source, context: usize, seed: u64) -> Sampler {
        Sampler {
            source,
            context,
            rng: ChaCha8Rng::seed_from_u64(seed),
            offset_share: 0.0,
        }
    }

    /// From now on, place the induction task's repeated block after a random prefix in
    /// this share of the sequences (0: always at the start).
    pub fn set_offset_share(&mut self, share: f64) {
        self.offset_share = share.clamp(0.0, 1.0);
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The next `batch` sequences.
    pub fn next(&mut self, batch: usize) -> Batch {
        let t = self.context;
        let mut out = Batch {
            batch,
            ..Default::default()
        };
        let mut seq = vec![0u32; t + 1];
        let mut rep = vec![false; t];
        for _ in 0..batch {
            rep.fill(false);
            let masked = match &self.source {
                Source::Induction { vocab } => {
                    let offset =
                        self.offset_share > 0.0 && self.rng.random::<f64>() < self.offset_share;
                    induction_sequence(&mut self.rng, *vocab, &mut seq, &mut rep, offset);
                    true
                }
                Source::CopySpan { vocab } => {
                    copy_span_sequence(&mut self.rng, *vocab, &mut seq, &mut rep);
                    false
                }
                Source::Text { bytes } => {
                    let start = self.rng.random_range(0..=bytes.len() - (t + 1));
                    for (s, &b) in seq.iter_mut().zip(&bytes[start..]) {
                        *s = b as u32;
                    }
                    copyable_targets(&seq, &mut rep);
                    false
                }
            };
            out.tokens.extend_from_slice(&seq[..t]);
            out.targets.extend_from_slice(&seq[1..]);
            out.repeated.extend_from_slice(&rep);
            if masked {
                out.trained.extend_from_slice(&rep);
            } else {
                out.trained.extend(std::iter::repeat_n(true, t));
            }
        }
        out
    }
}

/// One induction sequence of `seq.len()` = context + 1 tokens: A, A, fresh tokens (with
/// `offset`, random tokens first, then A, A). `rep[p]` marks the positions p whose target
/// seq[p + 1] is in the second copy after its first token (p = s + L .. s + 2L - 2 for
/// the block starting at s).
fn induction_sequence(
    rng: &mut ChaCha8Rng,
    vocab: usize,
    seq: &mut [u32],
    rep: &mut [bool],
    offset: bool,
) {
    let t = seq.len() - 1;
    for s in seq.iter_mut() {
        *s = rng.random_range(0..vocab as u32);
    }
    let max_span = t / 2;
    if max_span < 2 {
        return;
    }
    let span = rng.random_range(INDUCTION_MIN_SPAN.min(max_span)..=max_span);
    let start = if offset {
        rng.random_range(0..=t - 2 * span)
    } else {
        0
    };
    seq.copy_within(start..start + span, start + span);
    for r in &mut rep[start + span..start + 2 * span - 1] {
        *r = true;
    }
}

/// One copy-span sequence of `seq.len()` = context + 1 tokens; `rep[p]` marks the
/// positions p whose target seq[p + 1] is inside the copy after its first token.
fn copy_span_sequence(rng: &mut ChaCha8Rng, vocab: usize, seq: &mut [u32], rep: &mut [bool]) {
    let n = seq.len();
    for s in seq.iter_mut() {
        *s = rng.random_range(0..vocab as u32);
    }
    let max_span = ((n - 1) / 2).max(MIN_SPAN).min(n / 2);
    if max_span < 2 {
        return;
    }
    let span = rng.random_range(MIN_SPAN.min(max_span)..=max_span);
    let a = rng.random_range(0..=n - 2 * span);
    let b = rng.random_range(a + span..=n - span);
    seq.copy_within(a..a + span, b);
    // Targets b+1 .. b+span-1 are predicted at positions b .. b+span-2.
    for r in &mut rep[b..b + span - 1] {
        *r = true;
    }
}

/// For text: target seq[p + 1] is copyable when the bigram (seq[p], seq[p + 1]) occurred
/// earlier in the sequence.
fn copyable_targets(seq: &[u32], rep: &mut [bool]) {
    for p in 1..rep.len() {
        rep[p] = (0..p).any(|j| seq[j] == seq[p] && seq[j + 1] == seq[p + 1]);
    }
}

/// The fixed probe the head scores are measured on: for the induction task, `context`/2
/// distinct random tokens (so every token of the second half has exactly one earlier
/// copy) followed by the same tokens again; for text, a window of the file repeated.
pub fn probe(source: &Source, context: usize, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let half = context / 2;
    let first: Vec<u32> = match source {
        Source::Induction { vocab } | Source::CopySpan { vocab } => {
            let mut ids: Vec<u32> = (0..*vocab as u32).collect();
            // Fisher-Yates: the first `half` (or all, for a small vocab) are distinct.
            for i in 0..ids.len() {
                let j = rng.random_range(i..ids.len());
                ids.swap(i, j);
            }
            (0..half).map(|i| ids[i % ids.len()]).collect()
        }
        Source::Text { bytes } => {
            let start = rng.random_range(0..=bytes.len() - half);
            bytes[start..start + half]
                .iter()
                .map(|&b| b as u32)
                .collect()
        }
    };
    let mut p: Vec<u32> = first.iter().chain(&first).copied().collect();
    while p.len() < context {
        p.push(first.first().copied().unwrap_or(0));
    }
    p
}

/// The probe for `induction_offset_max`: a prefix of context/4 tokens, then a block of
/// distinct tokens twice, so the copy does not start at position 0. For the token tasks
/// the prefix's tokens are distinct from the block's (each token of the second copy has
/// exactly one earlier occurrence); for text, both are windows of the file.
pub fn offset_probe(source: &Source, context: usize, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6a09_e667_f3bc_c908);
    let prefix = context / 4;
    let block = (context - prefix) / 2;
    let (pre, first): (Vec<u32>, Vec<u32>) = match source {
        Source::Induction { vocab } | Source::CopySpan { vocab } => {
            let mut ids: Vec<u32> = (0..*vocab as u32).collect();
            for i in 0..ids.len() {
                let j = rng.random_range(i..ids.len());
                ids.swap(i, j);
            }
            let pick = |k: usize| ids[k % ids.len()];
            (
                (0..prefix).map(|i| pick(block + i)).collect(),
                (0..block).map(pick).collect(),
            )
        }
        Source::Text { bytes } => {
            let mut window = |len: usize| -> Vec<u32> {
                let start = rng.random_range(0..=bytes.len() - len);
                bytes[start..start + len]
                    .iter()
                    .map(|&b| b as u32)
                    .collect()
            };
            (window(prefix), window(block))
        }
    };
    let mut p: Vec<u32> = pre.iter().chain(&first).chain(&first).copied().collect();
    while p.len() < context {
        p.push(first.first().copied().unwrap_or(0));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_span_copies_a_span_and_marks_its_predictable_targets() {
        let mut s = Sampler::new(Source::CopySpan { vocab: 16 }, 32, 5);
        let b = s.next(50);
        assert_eq!(b.tokens.len(), 50 * 32);
        let mut spans = std::collections::BTreeSet::new();
        for i in 0..50 {
            let tok = &b.tokens[i * 32..][..32];
            let tgt = &b.targets[i * 32..][..32];
            let rep = &b.repeated[i * 32..][..32];
            assert_eq!(&tok[1..], &tgt[..31]);
            let marked: Vec<usize> = (0..32).filter(|&p| rep[p]).collect();
            assert!(marked.len() >= MIN_SPAN - 1, "{marked:?}");
            spans.insert(marked.len());
            // Each marked target equals the token after an earlier copy of its input.
            for &p in &marked {
                let found = (0..p).any(|j| tok[j] == tok[p] && tgt[j] == tgt[p]);
                assert!(found, "sequence {i} position {p}");
            }
        }
        assert!(spans.len() > 5, "span lengths vary: {spans:?}");
        assert!(
            b.trained.iter().all(|&t| t),
            "copy-span trains on every token"
        );
        assert_eq!(
            Sampler::new(Source::CopySpan { vocab: 16 }, 32, 5).next(50),
            b
        );
    }

    #[test]
    fn induction_repeats_a_leading_block_and_trains_only_on_its_second_copy() {
        let t = 64;
        let mut s = Sampler::new(Source::Induction { vocab: 64 }, t, 3);
        let b = s.next(200);
        let mut spans = std::collections::BTreeSet::new();
        for i in 0..200 {
            let tok = &b.tokens[i * t..][..t];
            let tgt = &b.targets[i * t..][..t];
            let rep = &b.repeated[i * t..][..t];
            assert_eq!(&b.trained[i * t..][..t], rep);
            let marked: Vec<usize> = (0..t).filter(|&p| rep[p]).collect();
            // Positions L .. 2L-2 are marked: L - 1 targets, L in [8, t/2].
            let l = marked.len() + 1;
            assert!((INDUCTION_MIN_SPAN..=t / 2).contains(&l), "L = {l}");
            assert_eq!(marked, (l..2 * l - 1).collect::<Vec<_>>());
            assert_eq!(tok[..l], tok[l..2 * l], "A then A again");
            for &p in &marked {
                assert_eq!(
                    tgt[p],
                    tok[p - l + 1],
                    "target {p} is the token after the copy"
                );
            }
            spans.insert(l);
        }
        assert!(spans.len() > 15, "block lengths vary: {spans:?}");
    }

    #[test]
    fn the_offset_probe_puts_a_distinct_block_twice_after_a_prefix() {
        let p = offset_probe(&Source::Induction { vocab: 64 }, 64, 2);
        assert_eq!(p.len(), 64);
        let (pre, block) = (16, 24);
        assert_eq!(p[pre..pre + block], p[pre + block..pre + 2 * block]);
        let set: std::collections::BTreeSet<_> = p[..pre + block].iter().collect();
        assert_eq!(
            set.len(),
            pre + block,
            "prefix and block hold distinct tokens"
        );
        assert_ne!(p[..block], p[pre..pre + block]);
    }

    #[test]
    fn the_probe_repeats_distinct_tokens() {
        let p = probe(&Source::Induction { vocab: 64 }, 64, 1);
        assert_eq!(p.len(), 64);
        assert_eq!(p[..32], p[32..]);
        let set: std::collections::BTreeSet<_> = p[..32].iter().collect();
        assert_eq!(set.len(), 32);
    }
}
