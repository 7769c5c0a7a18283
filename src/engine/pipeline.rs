//! Tokens to output, every stage named, with its matrices, shape and formula, so views
//! can show it and the inspector can explain any cell.
//!
//! CONTRACT (shared by the engine and the app): the types below are what views read.
//! `Pipeline::build` computes everything in f64; views never compute attention.

use ndarray::Array2;

use crate::engine::config::{MaskKind, PeKind};
use crate::error::{Error, Result};

/// What a model run is made of: the sentence, the shapes, the seed and the options.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub tokens: Vec<String>,
    pub d_model: usize,
    pub heads: usize,
    /// KV heads (GQA groups); `heads` for MHA, 1 for MQA.
    pub kv_heads: usize,
    pub seed: u64,
    pub pe: PeKind,
    pub mask: MaskKind,
    /// Apply 1/sqrt(d_k) to the scores (the `s` key toggles it to show why it matters).
    pub scaled: bool,
}

/// Every stage of the pipeline, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StageId {
    Tokens,
    Embeddings,
    PositionEncoding,
    QkvProjection,
    SplitHeads,
    Rope,
    Scores,
    Scale,
    Alibi,
    Mask,
    Softmax,
    WeightedSum,
    Concat,
    OutputProjection,
}

/// One matrix of a stage, with labels for its rows and columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// e.g. "Q (head 1)", "weights (head 2)", "X + PE".
    pub name: String,
    pub data: Array2<f64>,
    pub row_labels: Vec<String>,
    pub col_labels: Vec<String>,
}

/// One step of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub id: StageId,
    /// Short name for the breadcrumb, e.g. "softmax".
    pub title: &'static str,
    /// One line, e.g. "A = softmax(S / sqrt(d_k) + M) row by row".
    pub formula: String,
    /// If true, `matrices[h]` belongs to query head h (len == heads); otherwise the
    /// matrices are alternatives of one stage (e.g. Q, K, V of the projection).
    pub per_head: bool,
    pub matrices: Vec<Matrix>,
}

/// The arithmetic of one cell, for the inspector.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// e.g. "score[2,1] head 1".
    pub title: String,
    /// The terms, one per line, e.g. "q2.k1 = 0.31*-0.12 + ... = 0.84".
    pub lines: Vec<String>,
    /// The cell's value.
    pub value: f64,
}

/// Per-row statistics of one head's attention weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowStats {
    /// Entropy in nats of the row's weights (0 for a one-hot row).
    pub entropy: f64,
    pub max_weight: f64,
}

/// The whole computation for one [`ModelConfig`].
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub config: ModelConfig,
    pub stages: Vec<Stage>,
}

impl Pipeline {
    /// Compute every stage (f64 reference).
    pub fn build(config: &ModelConfig) -> Result<Pipeline> {
        let _ = config;
        Err(Error::Internal(
            "the stage pipeline is not built yet".into(),
        ))
    }

    pub fn stage(&self, id: StageId) -> Option<&Stage> {
        self.stages.iter().find(|s| s.id == id)
    }
}
