//! How a real model encodes positions, for the app's position view: RoPE's rotation
//! frequencies with the base in force (the model's own or the `--rope-base` that replaces
//! it), or the rows of the learned position table that the text's positions read.
//!
//! No terminal code: the view draws what this module reads off the session.

use crate::model::config::{Arch, PosKind, RopeStyle};
use crate::model::session::ModelSession;

/// One pair of head dimensions that RoPE turns together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopePair {
    /// The two dimensions of the head, in the weights' order: (2i, 2i+1) for interleaved
    /// (GGUF) weights, (i, i + d/2) for rotate-half (Hugging Face) weights.
    pub dims: (usize, usize),
    /// Radians per position: base^(-2i/d_head).
    pub freq: f64,
    /// Positions per full turn: 2 pi / freq.
    pub wavelength: f64,
}

/// RoPE as the forward pass applies it.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeInfo {
    /// The base in force.
    pub base: f64,
    /// The model's own base (differs from `base` under `--rope-base`).
    pub model_base: f64,
    pub d_head: usize,
    pub style: RopeStyle,
    pub pairs: Vec<RopePair>,
}

impl RopeInfo {
    pub fn new(base: f64, model_base: f64, d_head: usize, style: RopeStyle) -> RopeInfo {
        let half = d_head / 2;
        let pairs = (0..half)
            .map(|i| {
                // The same f64 expression as the forward pass's RopeTable.
                let freq = base.powf(-2.0 * i as f64 / d_head as f64);
                RopePair {
                    dims: match style {
                        RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                        RopeStyle::Half => (i, i + half),
                    },
                    freq,
                    wavelength: std::f64::consts::TAU / freq,
                }
            })
            .collect();
        RopeInfo {
            base,
            model_base,
            d_head,
            style,
            pairs,
        }
    }

    /// The angle pair `i` is turned by at position `pos`, in radians.
    pub fn angle(&self, i: usize, pos: usize) -> f64 {
        pos as f64 * self.pairs[i].freq
    }

    pub fn changed(&self) -> bool {
        self.base != self.model_base
    }
}

/// The learned position rows the text's positions read.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedRows {
    /// The tensor's usual name in the model's files.
    pub tensor: &'static str,
    /// Rows of the whole table (the longest text the model takes).
    pub context: usize,
    pub d_model: usize,
    /// Rows 0..n, [n, d_model] row-major.
    pub rows: Vec<f32>,
    /// The L2 norm of each row.
    pub norms: Vec<f64>,
    /// Cosine similarity of rows i and j, [n, n] row-major.
    pub similarity: Vec<f64>,
    /// Positions are not added (`--no-pe`): the rows are shown but not used.
    pub dropped: bool,
}

impl LearnedRows {
    pub fn n(&self) -> usize {
        self.norms.len()
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.d_model..(i + 1) * self.d_model]
    }
}

/// What the model does with positions.
#[derive(Debug, Clone, PartialEq)]
pub enum PositionInfo {
    Rope(RopeInfo),
    Learned(LearnedRows),
    /// A RoPE model run with `--no-pe`: q and k are not rotated.
    RopeDropped {
        model_base: f64,
    },
    /// The model says it has learned positions but its weights hold no table.
    Missing,
}

impl PositionInfo {
    /// Read off the session: its config, the interventions in force and the loaded
    /// position table.
    pub fn of(session: &ModelSession) -> PositionInfo {
        let cfg = session.config();
        match cfg.pos {
            PosKind::Rope { base, style } => match session.rope_base() {
                Some(b) => PositionInfo::Rope(RopeInfo::new(b, base, cfg.d_head, style)),
                None => PositionInfo::RopeDropped { model_base: base },
            },
            PosKind::Learned => {
                let Some(table) = &session.model.weights.pos_embed else {
                    return PositionInfo::Missing;
                };
                let (d, n) = (cfg.d_model, session.n().min(cfg.context));
                let rows = table[..n * d].to_vec();
                let norms: Vec<f64> = rows
                    .chunks_exact(d)
                    .map(|r| r.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt())
                    .collect();
                let mut similarity = vec![0.0; n * n];
                for i in 0..n {
                    for j in 0..n {
                        let dot: f64 = rows[i * d..(i + 1) * d]
                            .iter()
                            .zip(&rows[j * d..(j + 1) * d])
                            .map(|(&a, &b)| a as f64 * b as f64)
                            .sum();
                        let denom = norms[i] * norms[j];
                        similarity[i * n + j] = if denom > 0.0 { dot / denom } else { 0.0 };
                    }
                }
                PositionInfo::Learned(LearnedRows {
                    tensor: match cfg.arch {
                        Arch::Bert => "embeddings.position_embeddings",
                        Arch::Gpt2 => "wpe",
                        _ => "position table",
                    },
                    context: cfg.context,
                    d_model: d,
                    rows,
                    norms,
                    similarity,
                    dropped: session.options.no_pe,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_follow_the_base_and_the_pairs_follow_the_layout() {
        let r = RopeInfo::new(100000.0, 100000.0, 64, RopeStyle::Half);
        assert_eq!(r.pairs.len(), 32);
        assert_eq!(r.pairs[0].freq, 1.0);
        assert_eq!(r.pairs[1].dims, (1, 33));
        // the last pair: 100000^(-62/64)
        assert!((r.pairs[31].freq - 100000f64.powf(-62.0 / 64.0)).abs() < 1e-18);
        assert!((r.angle(31, 10) - 10.0 * r.pairs[31].freq).abs() < 1e-15);
        assert!((r.pairs[0].wavelength - std::f64::consts::TAU).abs() < 1e-12);
        let i = RopeInfo::new(500.0, 100000.0, 4, RopeStyle::Interleaved);
        assert_eq!(i.pairs[1].dims, (2, 3));
        assert!((i.pairs[1].freq - 500f64.powf(-0.5)).abs() < 1e-15);
        assert!(i.changed());
    }
}
