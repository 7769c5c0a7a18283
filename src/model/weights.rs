//! A model's tensors in one canonical layout, row-major, whatever file they came from:
//! weight matrices as a [`Matrix`] (f32, or kept in their GGUF block type), vectors f32.
//!
//! Linear layers are stored as PyTorch's `nn.Linear` stores them, `w` [out, in], so that
//! y = x w^T + b. GGUF tensors (ne0 = in, ne1 = out) already have this layout; GPT-2's
//! `Conv1D` weights ([in, out]) are transposed by the loader. Q and K keep the row order of
//! their file: [`super::RopeStyle`] in the config says which pairs RoPE rotates.

use super::matrix::Matrix;

/// y = x w^T + b, with w [out, in].
#[derive(Debug, Clone, PartialEq)]
pub struct Linear {
    pub w: Matrix,
    pub b: Option<Vec<f32>>,
    pub out_dim: usize,
    pub in_dim: usize,
}

/// A norm's scale and (LayerNorm) shift, each [d_model].
#[derive(Debug, Clone, PartialEq)]
pub struct Norm {
    pub w: Vec<f32>,
    pub b: Option<Vec<f32>>,
}

/// The block's feed-forward part.
#[derive(Debug, Clone, PartialEq)]
pub enum Mlp {
    /// down(act(gate x) * up x) (Llama).
    Gated {
        gate: Linear,
        up: Linear,
        down: Linear,
    },
    /// down(act(up x)) (BERT, GPT-2).
    Plain { up: Linear, down: Linear },
}

/// One Transformer block.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerWeights {
    /// Pre-norm models: before attention. Post-norm (BERT): after attention + residual.
    pub attn_norm: Norm,
    /// [heads * d_head, d_model]
    pub wq: Linear,
    /// [kv_heads * d_head, d_model]
    pub wk: Linear,
    /// [kv_heads * d_head, d_model]
    pub wv: Linear,
    /// [d_model, heads * d_head]
    pub wo: Linear,
    /// Pre-norm: before the MLP. Post-norm: after MLP + residual.
    pub mlp_norm: Norm,
    pub mlp: Mlp,
    /// The norms only some families have.
    pub extra: ExtraNorms,
}

/// Norms beyond the two every block has; `Default` is none of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExtraNorms {
    /// RMSNorm over each query head [d_head], before RoPE (Qwen 3, Gemma 3).
    pub q_norm: Option<Norm>,
    /// RMSNorm over each key head [d_head], before RoPE (Qwen 3, Gemma 3).
    pub k_norm: Option<Norm>,
    /// Norm of the attention output before the residual add (Gemma 2 and 3).
    pub post_attn: Option<Norm>,
    /// Norm of the MLP output before the residual add (Gemma 2 and 3).
    pub post_mlp: Option<Norm>,
}

/// All of a model's tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// [vocab, d_model]; a lookup dequantizes one row ([`Matrix::row_into`]).
    pub tok_embed: Matrix,
    /// Learned positions [context, d_model] (BERT, GPT-2).
    pub pos_embed: Option<Vec<f32>>,
    /// BERT's token-type embedding of type 0, [d_model], added to every token.
    pub type_embed: Option<Vec<f32>>,
    /// BERT's LayerNorm of the summed embeddings.
    pub embed_norm: Option<Norm>,
    pub layers: Vec<LayerWeights>,
    /// Pre-norm models' norm after the last block.
    pub final_norm: Option<Norm>,
    /// [vocab, d_model]; None when tied to `tok_embed` or when the model has no LM head
    /// (an encoder loaded without one).
    pub lm_head: Option<Linear>,
}

impl Linear {
    /// A layer of f32 weights w [out, in].
    pub fn from_f32(w: Vec<f32>, b: Option<Vec<f32>>, out_dim: usize, in_dim: usize) -> Self {
        Linear {
            w: Matrix::F32(w),
            b,
            out_dim,
            in_dim,
        }
    }
}
