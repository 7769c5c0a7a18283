//! Tokens to output, every stage named, with its matrices, shape and formula, so views
//! can show it and the inspector can explain any cell.
//!
//! CONTRACT (shared by the engine and the app): the types below are what views read.
//! `Pipeline::build` computes everything in f64; views never compute attention.
//!
//! Three ways to make a pipeline:
//! - [`Pipeline::build`]: a model lesson, from a sentence and a seed; every stage has data.
//! - [`Pipeline::from_qkv`]: tensors loaded from files (`view --q/--k/--v`). The stages
//!   before `SplitHeads` (tokens, embeddings, PE, projection) have no data: they are
//!   present, inactive and have no matrices. `SplitHeads` holds the loaded q, k, v; the
//!   stages after it are computed as in a lesson; `OutputProjection` has no W_O and
//!   passes the concatenation through (inactive).
//! - [`Pipeline::from_weights`]: attention weights loaded from a file (`view --attn`).
//!   Only `Softmax` has data; every other stage is inactive with no matrices.
//!
//! In every case all 14 stages are present, in [`StageId`] order.

mod attend;
mod block;
mod explain;
mod num;
mod stages;
mod text;

pub(crate) use stages::dim_labels;
pub use stages::{Explanation, Matrix, RowStats, Source, Stage, StageId};

use ndarray::{Array2, Array3, Axis, s};

use crate::engine::config::{MaskKind, PeKind};
use crate::engine::embed;
use crate::engine::limits;
use crate::engine::mask::Mask;
use crate::engine::pe;
use crate::engine::problem::ProblemShape;
use crate::error::{Error, Result};

use attend::{AttendOptions, HeadInputs, Labels};
pub use block::{BlockInfo, BlockMlp, BlockNorm, BlockTensors};

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

/// The sentence of the default lesson.
pub const EXAMPLE_SENTENCE: &str = "The cat sat on the mat.";

impl ModelConfig {
    /// The default lesson: a short English sentence, d_model 16, 4 heads (MHA), seed 42,
    /// sinusoidal PE, no mask, scaled scores.
    pub fn example() -> ModelConfig {
        ModelConfig {
            tokens: ModelConfig::tokens_from_text(EXAMPLE_SENTENCE),
            d_model: 16,
            heads: 4,
            kv_heads: 4,
            seed: 42,
            pe: PeKind::Sinusoidal,
            mask: MaskKind::None,
            scaled: true,
        }
    }

    /// Split a sentence into tokens: on whitespace; punctuation becomes its own token;
    /// each CJK character is its own token ("The cat." -> The, cat, .).
    pub fn tokens_from_text(text: &str) -> Vec<String> {
        text::tokens(text)
    }

    /// Dimensions per head, d_model / heads.
    pub fn d_head(&self) -> usize {
        self.d_model / self.heads.max(1)
    }

    /// Check shapes and options; every message names the field and says what would fit.
    pub fn validate(&self) -> Result<()> {
        let n = self.tokens.len();
        if n == 0 {
            return Err(Error::usage(
                "tokens: the sentence is empty; give at least one word, e.g. --tokens \"The cat sat\"",
            ));
        }
        if n > limits::MAX_MODEL_TOKENS {
            return Err(Error::usage(format!(
                "tokens: {n} tokens is over the limit of {} for a lesson (MAX_MODEL_TOKENS); use a shorter sentence",
                limits::MAX_MODEL_TOKENS
            )));
        }
        if self.heads == 0 || self.heads > limits::MAX_HEADS {
            return Err(Error::usage(format!(
                "heads (--heads) is {}; it must be between 1 and {} (MAX_HEADS)",
                self.heads,
                limits::MAX_HEADS
            )));
        }
        if self.d_model == 0 || self.d_model > limits::MAX_D_MODEL {
            return Err(Error::usage(format!(
                "d_model (--d-model) is {}; it must be between 1 and {} (MAX_D_MODEL)",
                self.d_model,
                limits::MAX_D_MODEL
            )));
        }
        if !self.d_model.is_multiple_of(self.heads) {
            let lower = self.d_model / self.heads * self.heads;
            let upper = lower + self.heads;
            let near = if lower == 0 {
                format!("{upper}")
            } else {
                format!("{lower} or {upper}")
            };
            return Err(Error::usage(format!(
                "d_model (--d-model) {} is not divisible by heads (--heads) {}: each head gets d_model / heads dimensions; use a multiple of {}, e.g. {near}",
                self.d_model, self.heads, self.heads
            )));
        }
        if self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return Err(Error::usage(format!(
                "kv_heads (--kv-heads) {} does not divide heads {}: query heads share K/V in equal groups (GQA); use a divisor of {} (1 = MQA, {} = MHA)",
                self.kv_heads, self.heads, self.heads, self.heads
            )));
        }
        if let PeKind::Rope { base } = self.pe
            && !(base.is_finite() && base > 1.0)
        {
            return Err(Error::usage(format!(
                "pe rope:{base}: the RoPE base must be a number above 1, e.g. rope:10000"
            )));
        }
        if matches!(self.pe, PeKind::Rope { .. }) && !self.d_head().is_multiple_of(2) {
            return Err(Error::usage(format!(
                "pe rope rotates pairs of dimensions, but d_head = d_model / heads = {} is odd; choose d_model and heads with an even quotient",
                self.d_head()
            )));
        }
        match &self.mask {
            MaskKind::Window(0) | MaskKind::WindowSinks { window: 0, .. } => {
                return Err(Error::usage(
                    "mask window:0 sees no key at all; W must be >= 1",
                ));
            }
            MaskKind::Padding(lens) if lens.len() != 1 => {
                return Err(Error::usage(format!(
                    "mask padding gives {} lengths, but a lesson is one sequence; write padding:L with one length <= {n}",
                    lens.len()
                )));
            }
            MaskKind::Padding(lens) if lens[0] > n => {
                return Err(Error::usage(format!(
                    "mask padding:{} is longer than the {n} tokens; the valid length must be <= {n}",
                    lens[0]
                )));
            }
            _ => {}
        }
        Ok(())
    }
}

/// The whole computation for one [`ModelConfig`].
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// For [`Pipeline::from_qkv`]: tokens are the key labels, d_model = heads x d,
    /// seed 0. For [`Pipeline::from_weights`]: d_model 0 (unknown), kv_heads = heads.
    pub config: ModelConfig,
    pub stages: Vec<Stage>,
    pub source: Source,
    /// Batch 1. d and dv are 0 for [`Source::Weights`] (unknown).
    pub shape: ProblemShape,
    /// Label of each query row (bottom-right aligned on the keys when Nq < Nk).
    pub query_labels: Vec<String>,
    /// Label of each key column.
    pub key_labels: Vec<String>,
    /// The factor the scores were multiplied by (1/sqrt(d_k)), or None when scaling is
    /// off or unknown.
    pub scale: Option<f64>,
    /// ALiBi slope per query head, when ALiBi is on.
    pub alibi_slopes: Option<Vec<f64>>,
    /// RoPE's base, when RoPE is on.
    pub rope_base: Option<f64>,
    /// The mask, resolved for (1, heads, Nq, Nk).
    pub mask: Mask,
    /// For [`Source::Block`]: the block's norms and weights the inspector explains with.
    pub block: Option<Box<BlockInfo>>,
}

impl Pipeline {
    /// Compute every stage (f64 reference).
    pub fn build(config: &ModelConfig) -> Result<Pipeline> {
        config.validate()?;
        let n = config.tokens.len();
        let (d, heads, groups, dh) = (
            config.d_model,
            config.heads,
            config.kv_heads,
            config.d_head(),
        );
        let mask = Mask::resolve(&config.mask, 1, heads, n, n)?;
        let tokens = config.tokens.clone();
        let mut stages = Vec::with_capacity(StageId::ALL.len());

        // Tokens
        let ids = Array2::from_shape_fn((n, 1), |(i, _)| embed::token_id(&tokens[i]) as f64);
        stages.push(Stage::new(
            StageId::Tokens,
            format!(
                "{n} token{}; id = FNV-1a(text) mod {} (a stand-in vocabulary)",
                if n == 1 { "" } else { "s" },
                embed::VOCAB_SIZE
            ),
            true,
            vec![Matrix::new(
                "token ids",
                ids,
                tokens.clone(),
                vec!["id".into()],
            )],
        ));

        // Embeddings
        let x = embed::embeddings(config.seed, &tokens, d);
        let x_matrix = Matrix::new("X", x.clone(), tokens.clone(), dim_labels(d));
        stages.push(Stage::new(
            StageId::Embeddings,
            format!(
                "X [{n} x {d}]: each token's seeded vector (seed {}); the same word gets the same row",
                config.seed
            ),
            true,
            vec![x_matrix.clone()],
        ));

        // Position encoding
        // Ok(table, formula) when the PE adds vectors to X, Err(why not) otherwise.
        let table = match config.pe {
            PeKind::Sinusoidal => Ok((
                pe::sinusoidal(n, d),
                format!(
                    "X + PE, PE[p,2i] = sin(p / {}^(2i/{d})), PE[p,2i+1] = cos(p / {}^(2i/{d}))",
                    pe::SINUSOIDAL_BASE,
                    pe::SINUSOIDAL_BASE
                ),
            )),
            PeKind::Learned => Ok((
                embed::learned_positions(config.seed, n, d),
                "X + P, P a learned table of position vectors (here seeded stand-ins)".into(),
            )),
            PeKind::None => Err(
                "inactive: no position encoding (pe none), so attention sees the tokens as a bag: order does not matter",
            ),
            PeKind::Rope { .. } => {
                Err("inactive: RoPE adds nothing to X; it rotates q and k after the projection")
            }
            PeKind::Alibi => {
                Err("inactive: ALiBi adds nothing to X; it biases the scores by distance")
            }
        };
        let x_in = match table {
            Ok((table, formula)) => {
                let sum = &x + &table;
                stages.push(Stage::new(
                    StageId::PositionEncoding,
                    formula,
                    true,
                    vec![
                        Matrix::new("X + PE", sum.clone(), tokens.clone(), dim_labels(d)),
                        Matrix::new("PE", table, tokens.clone(), dim_labels(d)),
                    ],
                ));
                sum
            }
            Err(why) => {
                stages.push(Stage::new(
                    StageId::PositionEncoding,
                    why.into(),
                    false,
                    vec![x_matrix],
                ));
                x
            }
        };

        // Fused projection: one [d, d + 2 G d_head] matmul.
        let width = d + 2 * groups * dh;
        let w_qkv = embed::weight(config.seed, "W_qkv", d, width);
        let qkv = x_in.dot(&w_qkv);
        let q = qkv.slice(s![.., 0..d]).to_owned();
        let k = qkv.slice(s![.., d..d + groups * dh]).to_owned();
        let v = qkv.slice(s![.., d + groups * dh..]).to_owned();
        let w_cols: Vec<String> = (0..width)
            .map(|c| {
                if c < d {
                    format!("q{c}")
                } else if c < d + groups * dh {
                    format!("k{}", c - d)
                } else {
                    format!("v{}", c - d - groups * dh)
                }
            })
            .collect();
        stages.push(Stage::new(
            StageId::QkvProjection,
            format!(
                "[Q | K | V] = (X + PE) W_qkv, one fused matmul: [{n} x {d}] x [{d} x {width}] ({d} for Q, {} each for K and V)",
                groups * dh
            ),
            true,
            vec![
                Matrix::new("Q", q.clone(), tokens.clone(), dim_labels(d)),
                Matrix::new("K", k.clone(), tokens.clone(), dim_labels(groups * dh)),
                Matrix::new("V", v.clone(), tokens.clone(), dim_labels(groups * dh)),
                Matrix::new("W_qkv", w_qkv, dim_labels(d), w_cols),
            ],
        ));

        let split = |a: &Array2<f64>, parts: usize| -> Vec<Array2<f64>> {
            (0..parts)
                .map(|p| a.slice(s![.., p * dh..(p + 1) * dh]).to_owned())
                .collect()
        };
        let inputs = HeadInputs {
            q: split(&q, heads),
            k: split(&k, groups),
            v: split(&v, groups),
            from_files: false,
        };
        let labels = Labels {
            queries: tokens.clone(),
            keys: tokens.clone(),
        };
        let options = AttendOptions::new(config.pe, &mask, config.scaled, heads, dh);
        let (attend_stages, concat) = attend::stages(&inputs, &options, &labels);
        stages.extend(attend_stages);

        // Output projection
        let w_o = embed::weight(config.seed, "W_O", heads * dh, d);
        let out = concat.dot(&w_o);
        stages.push(Stage::new(
            StageId::OutputProjection,
            format!(
                "output = concat W_O: [{n} x {}] x [{} x {d}]",
                heads * dh,
                heads * dh
            ),
            true,
            vec![
                Matrix::new("output", out, tokens.clone(), dim_labels(d)),
                Matrix::new("W_O", w_o, dim_labels(heads * dh), dim_labels(d)),
            ],
        ));

        debug_assert!(stages.iter().map(|s| s.id).eq(StageId::ALL));
        Ok(Pipeline {
            config: config.clone(),
            stages,
            source: Source::Model,
            shape: ProblemShape {
                batch: 1,
                heads,
                kv_heads: groups,
                n_q: n,
                n_k: n,
                d: dh,
                dv: dh,
            },
            query_labels: tokens.clone(),
            key_labels: tokens,
            scale: options.scale,
            alibi_slopes: options.alibi.clone(),
            rope_base: options.rope_base,
            mask,
            block: None,
        })
    }

    /// The pipeline of tensors loaded from files: q [H,Nq,d], k [G,Nk,d], v [G,Nk,dv].
    /// `tokens` label the keys (one per key) or are empty (then "t0", "t1", ...). Only
    /// position encodings that act inside attention apply: none, RoPE, ALiBi.
    pub fn from_qkv(
        tokens: Vec<String>,
        q: Array3<f64>,
        k: Array3<f64>,
        v: Array3<f64>,
        mask: &MaskKind,
        pe: PeKind,
        scaled: bool,
    ) -> Result<Pipeline> {
        let (h, n_q, d) = q.dim();
        let (g, n_k, dk) = k.dim();
        let (gv, n_v, dv) = v.dim();
        let shape = ProblemShape::from_dims([1, h, n_q, d], [1, g, n_k, dk], [1, gv, n_v, dv])?;
        check_view_size(h, n_q, n_k)?;
        match pe {
            PeKind::None | PeKind::Alibi => {}
            PeKind::Rope { .. } if d % 2 == 0 => {}
            PeKind::Rope { .. } => {
                return Err(Error::usage(format!(
                    "--pe rope rotates pairs of dimensions, but q and k have d = {d} (odd); RoPE needs an even d"
                )));
            }
            PeKind::Sinusoidal | PeKind::Learned => {
                return Err(Error::usage(format!(
                    "--pe {pe} adds position vectors to the embeddings, which tensors loaded from files no longer have; use none, rope[:base] or alibi"
                )));
            }
        }
        for (name, a) in [("q", &q), ("k", &k), ("v", &v)] {
            check_finite(name, a)?;
        }
        let labels = labels_for(tokens, n_q, n_k)?;
        let mask_r = Mask::resolve(mask, 1, h, n_q, n_k)?;
        let inputs = HeadInputs {
            q: q.outer_iter().map(|a| a.to_owned()).collect(),
            k: k.outer_iter().map(|a| a.to_owned()).collect(),
            v: v.outer_iter().map(|a| a.to_owned()).collect(),
            from_files: true,
        };
        let options = AttendOptions::new(pe, &mask_r, scaled, h, d);
        let why = "q, k and v were loaded from files";
        let mut stages: Vec<Stage> = [
            StageId::Tokens,
            StageId::Embeddings,
            StageId::PositionEncoding,
            StageId::QkvProjection,
        ]
        .into_iter()
        .map(|id| Stage::unavailable(id, why))
        .collect();
        let (attend_stages, concat) = attend::stages(&inputs, &options, &labels);
        stages.extend(attend_stages);
        let concat_matrix = stages
            .last()
            .expect("attend yields the concat stage")
            .matrices
            .clone();
        debug_assert_eq!(concat_matrix[0].data, concat);
        stages.push(Stage::new(
            StageId::OutputProjection,
            "inactive: no W_O for tensors loaded from files; the output is the concatenation"
                .into(),
            false,
            concat_matrix,
        ));
        Ok(Pipeline {
            config: ModelConfig {
                tokens: labels.keys.clone(),
                d_model: h * d,
                heads: h,
                kv_heads: g,
                seed: 0,
                pe,
                mask: mask.clone(),
                scaled,
            },
            stages,
            source: Source::Tensors,
            shape,
            query_labels: labels.queries,
            key_labels: labels.keys,
            scale: options.scale,
            alibi_slopes: options.alibi.clone(),
            rope_base: options.rope_base,
            mask: mask_r,
            block: None,
        })
    }

    /// The pipeline of attention weights loaded from a file, attn [H, Nq, Nk]: only the
    /// `Softmax` stage has data. `tokens` label the keys or are empty.
    pub fn from_weights(tokens: Vec<String>, attn: Array3<f64>) -> Result<Pipeline> {
        let (h, n_q, n_k) = attn.dim();
        if h == 0 || n_q == 0 || n_k == 0 {
            return Err(Error::usage(format!(
                "attention weights of shape [{h}, {n_q}, {n_k}] are empty; every dimension must be at least 1"
            )));
        }
        check_weights_size(h, n_q, n_k)?;
        let heads = attn.outer_iter().map(|a| a.to_owned()).collect();
        drop(attn);
        Pipeline::from_head_weights(tokens, heads)
    }

    /// [`Pipeline::from_weights`] with one [n_q, n_k] matrix a head, each kept as given (a
    /// model's 9 heads of 1,024 x 1,024 are never held twice).
    pub fn from_head_weights(tokens: Vec<String>, heads: Vec<Array2<f64>>) -> Result<Pipeline> {
        let h = heads.len();
        let (n_q, n_k) = heads.first().map_or((0, 0), Array2::dim);
        if h == 0 || n_q == 0 || n_k == 0 {
            return Err(Error::usage(format!(
                "attention weights of shape [{h}, {n_q}, {n_k}] are empty; every dimension must be at least 1"
            )));
        }
        if let Some((hh, a)) = heads
            .iter()
            .enumerate()
            .find(|(_, a)| a.dim() != (n_q, n_k))
        {
            return Err(Error::usage(format!(
                "attention weights of head {hh} are {:?}, not [{n_q}, {n_k}] as head 0's",
                a.dim()
            )));
        }
        check_weights_size(h, n_q, n_k)?;
        for (hh, a) in heads.iter().enumerate() {
            if let Some(((i, j), x)) = a.indexed_iter().find(|(_, x)| !x.is_finite()) {
                return Err(Error::usage(format!(
                    "attention weights hold {x} at [{hh}, {i}, {j}]; every value must be finite"
                )));
            }
            if let Some(((i, j), w)) = a.indexed_iter().find(|(_, w)| **w < 0.0) {
                return Err(Error::usage(format!(
                    "attention weights hold {w} at [{hh}, {i}, {j}]; weights are softmax outputs, never negative"
                )));
            }
        }
        let labels = labels_for(tokens, n_q, n_k)?;
        let why = "only the attention weights were loaded";
        let mut heads = Some(heads);
        let stages = StageId::ALL
            .into_iter()
            .map(|id| {
                if id != StageId::Softmax {
                    return Stage::unavailable(id, why);
                }
                let matrices = heads
                    .take()
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                    .map(|(hh, a)| {
                        Matrix::new(
                            format!("weights (head {})", hh + 1),
                            a,
                            labels.queries.clone(),
                            labels.keys.clone(),
                        )
                    })
                    .collect();
                Stage::new(
                    StageId::Softmax,
                    "A, the attention weights as loaded (each row: how much a query takes from each key)".into(),
                    true,
                    matrices,
                )
            })
            .collect();
        Ok(Pipeline {
            config: ModelConfig {
                tokens: labels.keys.clone(),
                d_model: 0,
                heads: h,
                kv_heads: h,
                seed: 0,
                pe: PeKind::None,
                mask: MaskKind::None,
                scaled: false,
            },
            stages,
            source: Source::Weights,
            shape: ProblemShape {
                batch: 1,
                heads: h,
                kv_heads: h,
                n_q,
                n_k,
                d: 0,
                dv: 0,
            },
            query_labels: labels.queries,
            key_labels: labels.keys,
            scale: None,
            alibi_slopes: None,
            rope_base: None,
            mask: Mask::resolve(&MaskKind::None, 1, h, n_q, n_k)?,
            block: None,
        })
    }

    pub fn stage(&self, id: StageId) -> Option<&Stage> {
        self.stages.iter().find(|s| s.id == id)
    }

    /// The KV group that query head `h` reads (GQA: h / (heads / kv_heads)).
    pub fn kv_group_for(&self, h: usize) -> usize {
        self.shape.kv_head_for(h)
    }

    /// The matrices of query head `h` in a per-head stage, followed by those of its KV
    /// group (e.g. [q_h, k_g, v_g] for `SplitHeads`); a non-per-head stage's matrices.
    pub fn head_matrices(&self, id: StageId, h: usize) -> Vec<&Matrix> {
        let Some(stage) = self.stage(id) else {
            return Vec::new();
        };
        if !stage.per_head {
            return stage.matrices.iter().collect();
        }
        let mut out: Vec<&Matrix> = stage.matrices.get(h).into_iter().collect();
        if h < self.shape.heads
            && let Some(group) = stage.kv_groups.get(self.kv_group_for(h))
        {
            out.extend(group.iter());
        }
        out
    }

    /// Entropy (nats) and largest weight of each row of head `h`'s attention weights;
    /// empty if there is no such head. A fully masked row (all zeros) has 0 and 0.
    pub fn row_stats(&self, head: usize) -> Vec<RowStats> {
        let Some(weights) = self
            .stage(StageId::Softmax)
            .and_then(|s| s.matrices.get(head))
        else {
            return Vec::new();
        };
        weights
            .data
            .axis_iter(Axis(0))
            .enumerate()
            .map(|(i, row)| RowStats {
                entropy: row
                    .iter()
                    .filter(|&&w| w > 0.0)
                    .map(|&w| -w * w.ln())
                    .sum::<f64>()
                    .max(0.0),
                max_weight: row.iter().copied().fold(0.0, f64::max),
                visible: if self.source == Source::Weights {
                    row.iter().filter(|&&w| w > 0.0).count()
                } else {
                    (0..row.len())
                        .filter(|&j| !self.mask.is_masked(0, head, i, j))
                        .count()
                },
            })
            .collect()
    }

    // `explain`, the inspector's arithmetic of one cell, is in `explain.rs`.
}

fn check_view_size(h: usize, n_q: usize, n_k: usize) -> Result<()> {
    if h > limits::MAX_HEADS {
        return Err(Error::usage(format!(
            "{h} heads is over the limit of {} (MAX_HEADS) for the app; slice a few heads out first",
            limits::MAX_HEADS
        )));
    }
    if n_q.max(n_k) > limits::MAX_VIEW_TOKENS {
        return Err(Error::usage(format!(
            "{n_q} queries x {n_k} keys is over the limit of {} tokens (MAX_VIEW_TOKENS) for the app; slice a window of the sequence first",
            limits::MAX_VIEW_TOKENS
        )));
    }
    let cells = (h * n_q) as u64 * n_k as u64;
    if cells > limits::MAX_PIPELINE_SCORE_CELLS {
        return Err(Error::usage(format!(
            "{h} heads x {n_q} x {n_k} = {cells} score cells is over the limit of {} (MAX_PIPELINE_SCORE_CELLS) for the app; use fewer heads or a shorter sequence",
            limits::MAX_PIPELINE_SCORE_CELLS
        )));
    }
    Ok(())
}

/// A weights-only pipeline keeps one score-shaped matrix per head where a computed one
/// keeps five, so it may hold five times the cells in the same memory.
fn check_weights_size(h: usize, n_q: usize, n_k: usize) -> Result<()> {
    // The head and token limits are a computed pipeline's; one head's cells always fit.
    check_view_size(h, 1, 1)?;
    check_view_size(1, n_q, n_k)?;
    let cells = (h * n_q) as u64 * n_k as u64;
    if cells > limits::MAX_WEIGHT_CELLS {
        return Err(Error::usage(format!(
            "{h} heads x {n_q} x {n_k} = {cells} weights is over the limit of {} (MAX_WEIGHT_CELLS) for the app; use fewer heads or a shorter sequence",
            limits::MAX_WEIGHT_CELLS
        )));
    }
    Ok(())
}

fn check_finite(name: &str, a: &Array3<f64>) -> Result<()> {
    match a.indexed_iter().find(|(_, x)| !x.is_finite()) {
        None => Ok(()),
        Some(((i, j, c), x)) => Err(Error::usage(format!(
            "{name} holds {x} at [{i}, {j}, {c}]; every value must be finite"
        ))),
    }
}

/// Labels of keys (the tokens, or t0, t1, ...) and of queries (bottom-right aligned:
/// query i stands at key position i + Nk - Nq; before position 0 it is "q{i}").
fn labels_for(tokens: Vec<String>, n_q: usize, n_k: usize) -> Result<Labels> {
    let keys = if tokens.is_empty() {
        (0..n_k).map(|j| format!("t{j}")).collect()
    } else if tokens.len() == n_k {
        tokens
    } else {
        return Err(Error::usage(format!(
            "{} token labels given but there are {n_k} keys; give one label per key (one per line in --tokens-file)",
            tokens.len()
        )));
    };
    let offset = n_k as isize - n_q as isize;
    let queries = (0..n_q)
        .map(|i| {
            let p = i as isize + offset;
            if p >= 0 {
                keys[p as usize].clone()
            } else {
                format!("q{i}")
            }
        })
        .collect();
    Ok(Labels { queries, keys })
}

#[cfg(test)]
mod tests;
