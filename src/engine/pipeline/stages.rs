//! The pipeline's data as views read it: the stage names ([`StageId`]), each stage's
//! matrices ([`Matrix`]) and formula ([`Stage`]), a cell's arithmetic
//! ([`Explanation`]), row statistics and where the numbers came from. No computation:
//! the parent module builds these, the children that compute (attend, explain) and
//! every view read them.
//!
//! [`Pipeline::kv_group_for`]: super::Pipeline::kv_group_for
//! [`Pipeline::build`]: super::Pipeline::build
//! [`Pipeline::from_qkv`]: super::Pipeline::from_qkv
//! [`Pipeline::from_weights`]: super::Pipeline::from_weights
//! [`StageId::ALL`]: StageId::ALL

use ndarray::Array2;

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
    /// Real models only: the block's norm before attention (pre-norm) or after the
    /// attention residual (post-norm).
    Norm,
    /// Real models only: the residual stream after attention, x + attention(x).
    Residual,
    /// Real models only: the feed-forward part of the block.
    Mlp,
    /// Real models only: the residual stream leaving the block.
    BlockOut,
}

impl StageId {
    /// All stages in order.
    pub const ALL: [StageId; 14] = [
        StageId::Tokens,
        StageId::Embeddings,
        StageId::PositionEncoding,
        StageId::QkvProjection,
        StageId::SplitHeads,
        StageId::Rope,
        StageId::Scores,
        StageId::Scale,
        StageId::Alibi,
        StageId::Mask,
        StageId::Softmax,
        StageId::WeightedSum,
        StageId::Concat,
        StageId::OutputProjection,
    ];

    /// Every stage of a real model's block, in order: the lesson stages with the block's
    /// norm before the projection and the residuals and MLP after W_O.
    pub const BLOCK: [StageId; 18] = [
        StageId::Tokens,
        StageId::Embeddings,
        StageId::PositionEncoding,
        StageId::Norm,
        StageId::QkvProjection,
        StageId::SplitHeads,
        StageId::Rope,
        StageId::Scores,
        StageId::Scale,
        StageId::Alibi,
        StageId::Mask,
        StageId::Softmax,
        StageId::WeightedSum,
        StageId::Concat,
        StageId::OutputProjection,
        StageId::Residual,
        StageId::Mlp,
        StageId::BlockOut,
    ];

    /// Position in [`StageId::BLOCK`], which orders every stage; in a lesson's pipeline
    /// (the stages of [`StageId::ALL`]) the order is the same.
    pub fn index(self) -> usize {
        StageId::BLOCK
            .iter()
            .position(|&s| s == self)
            .expect("every stage is in BLOCK")
    }

    /// Short name for the breadcrumb.
    pub fn title(self) -> &'static str {
        match self {
            StageId::Tokens => "tokens",
            StageId::Embeddings => "embeddings",
            StageId::PositionEncoding => "+ position",
            StageId::QkvProjection => "Q K V",
            StageId::SplitHeads => "heads",
            StageId::Rope => "RoPE",
            StageId::Scores => "scores",
            StageId::Scale => "scale",
            StageId::Alibi => "ALiBi",
            StageId::Mask => "mask",
            StageId::Softmax => "softmax",
            StageId::WeightedSum => "weights x V",
            StageId::Concat => "concat",
            StageId::OutputProjection => "W_O",
            StageId::Norm => "norm",
            StageId::Residual => "+ residual",
            StageId::Mlp => "MLP",
            StageId::BlockOut => "block out",
        }
    }

    /// True for the stages whose matrices are n_q x n_k (a row per query, a column per
    /// key): the scores up to the weights. The other stages' columns are dimensions.
    pub fn has_key_columns(self) -> bool {
        self.index() >= StageId::Scores.index() && self.index() <= StageId::Softmax.index()
    }

    /// True for the stages whose matrices are one per query head.
    pub fn is_per_head(self) -> bool {
        self.index() >= StageId::SplitHeads.index() && self.index() <= StageId::WeightedSum.index()
    }
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

impl Matrix {
    pub fn new(
        name: impl Into<String>,
        data: Array2<f64>,
        row_labels: Vec<String>,
        col_labels: Vec<String>,
    ) -> Matrix {
        debug_assert_eq!(data.nrows(), row_labels.len());
        debug_assert_eq!(data.ncols(), col_labels.len());
        Matrix {
            name: name.into(),
            data,
            row_labels,
            col_labels,
        }
    }
}

/// Column labels of a feature axis: "0", "1", ...
pub(crate) fn dim_labels(n: usize) -> Vec<String> {
    (0..n).map(|c| c.to_string()).collect()
}

/// One step of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub id: StageId,
    /// Short name for the breadcrumb, e.g. "softmax".
    pub title: &'static str,
    /// One line, e.g. "A = softmax(S / sqrt(d_k) + M) row by row". For an inactive
    /// stage it says why the stage does nothing.
    pub formula: String,
    /// If true, `matrices[h]` belongs to query head h (len == heads); otherwise the
    /// matrices are alternatives of one stage (e.g. Q, K, V of the projection).
    /// `matrices[0]` of a non-per-head stage is its result.
    pub per_head: bool,
    pub matrices: Vec<Matrix>,
    /// False when the stage does nothing under the current options (RoPE when the PE is
    /// not RoPE, scale when unscaled, ...): its matrices then equal the previous stage's.
    /// Also false for stages with no data (see the module docs): those have no matrices.
    pub active: bool,
    /// Matrices of each KV group that a per-head stage also carries: `kv_groups[g]` is
    /// [k_g, v_g] for `SplitHeads` and `Rope` (k rotated there), empty for other stages.
    /// Query head h reads group [`Pipeline::kv_group_for`]`(h)`.
    pub kv_groups: Vec<Vec<Matrix>>,
}

impl Stage {
    pub(super) fn new(id: StageId, formula: String, active: bool, matrices: Vec<Matrix>) -> Stage {
        Stage {
            id,
            title: id.title(),
            formula,
            per_head: id.is_per_head(),
            matrices,
            active,
            kv_groups: Vec::new(),
        }
    }

    /// A stage with no data, for pipelines made from loaded tensors.
    pub(super) fn unavailable(id: StageId, why: &str) -> Stage {
        Stage::new(id, format!("not available: {why}"), false, Vec::new())
    }
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
    /// Keys the row may attend to: those the mask leaves (for weights read from a file,
    /// whose mask is unknown, the keys with a weight above 0). Uniform weights over them
    /// have entropy ln(visible), the most a row can have.
    pub visible: usize,
}

/// Where a pipeline's numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A seeded model lesson ([`Pipeline::build`]).
    Model,
    /// q, k, v loaded from files ([`Pipeline::from_qkv`]).
    Tensors,
    /// Attention weights loaded from a file ([`Pipeline::from_weights`]).
    Weights,
    /// One block of a real model ([`Pipeline::from_block`]).
    Block,
}
