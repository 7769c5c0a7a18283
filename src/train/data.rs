//! What the model trains on, drawn from ChaCha8 seeded by `--seed`:
//!
//! - the induction task (DESIGN.md, "Training a small model"): uniform random tokens in
//!   which a span of random length L in [`MIN_SPAN`, context/2] is copied to a random later,
//!   non-overlapping offset. The tokens of the copy after its first are predictable only by
//!   finding the earlier occurrence of the current token and reading the token after it
//!   (an induction circuit); the distance back varies, so a head that looks a fixed
//!   distance back cannot;
//! - byte-level text: windows of context + 1 bytes at random offsets of a file.
//!
//! Each sequence carries a mask of the targets that copying predicts (`repeated`), so the
//! loss can be split into the part an induction circuit can lower and the rest.

use std::path::Path;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};

/// The shortest repeated span: shorter ones give too few predictable tokens to learn from.
pub const MIN_SPAN: usize = 4;

/// Where the sequences come from.
#[derive(Debug, Clone)]
pub enum Source {
    Induction {
        vocab: usize,
    },
    /// A file's bytes (vocab 256).
    Text {
        bytes: Vec<u8>,
    },
}

impl Source {
    /// A text file for `--text`, refused if it cannot fill one sequence of `context` + 1
    /// bytes.
    pub fn text(path: &Path, context: usize) -> Result<Source> {
        let bytes =
            std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read it: {e}")))?;
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
            Source::Induction { vocab } => *vocab,
            Source::Text { .. } => 256,
        }
    }
}

/// A batch: inputs and next-token targets, [B*T] each, and which targets copying predicts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub batch: usize,
    pub tokens: Vec<u32>,
    pub targets: Vec<u32>,
    pub repeated: Vec<bool>,
}

/// A seeded stream of batches.
pub struct Sampler {
    source: Source,
    context: usize,
    rng: ChaCha8Rng,
}

impl Sampler {
    pub fn new(source: Source, context: usize, seed: u64) -> Sampler {
        Sampler {
            source,
            context,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
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
            match &self.source {
                Source::Induction { vocab } => {
                    induction_sequence(&mut self.rng, *vocab, &mut seq, &mut rep);
                }
                Source::Text { bytes } => {
                    let start = self.rng.random_range(0..=bytes.len() - (t + 1));
                    for (s, &b) in seq.iter_mut().zip(&bytes[start..]) {
                        *s = b as u32;
                    }
                    copyable_targets(&seq, &mut rep);
                }
            }
            out.tokens.extend_from_slice(&seq[..t]);
            out.targets.extend_from_slice(&seq[1..]);
            out.repeated.extend_from_slice(&rep);
        }
        out
    }
}

/// One induction sequence of `seq.len()` = context + 1 tokens; `rep[p]` marks the
/// positions p whose target seq[p + 1] is inside the copy after its first token.
fn induction_sequence(rng: &mut ChaCha8Rng, vocab: usize, seq: &mut [u32], rep: &mut [bool]) {
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
        Source::Induction { vocab } => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn induction_copies_a_span_and_marks_its_predictable_targets() {
        let mut s = Sampler::new(Source::Induction { vocab: 16 }, 32, 5);
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
        assert_eq!(
            Sampler::new(Source::Induction { vocab: 16 }, 32, 5).next(50),
            b
        );
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
