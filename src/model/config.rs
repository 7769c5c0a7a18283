//! A model's shape and semantics, independent of the file it came from.

use serde::Serialize;

/// The model families attnviz runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Llama 2/3, SmolLM, TinyLlama, Mistral-style: RMSNorm, RoPE, SwiGLU, GQA, causal.
    Llama,
    /// BERT, MiniLM: learned positions, post-LayerNorm, GELU, bidirectional.
    Bert,
    /// GPT-2: learned positions, pre-LayerNorm, GELU (tanh), causal.
    Gpt2,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Bert => "bert",
            Arch::Gpt2 => "gpt2",
        }
    }
}

/// Which normalisation a block uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NormKind {
    /// (x - mean) / sqrt(var + eps) * w + b.
    Layer,
    /// x / sqrt(mean(x^2) + eps) * w (computed in f32, as transformers does).
    Rms,
}

/// Where the norms sit relative to the residual.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NormPlace {
    /// x + f(norm(x)) (Llama, GPT-2); a final norm after the last block.
    Pre,
    /// norm(x + f(x)) (BERT); the embeddings are normed too, no final norm.
    Post,
}

/// The MLP's activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    /// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)) (BERT).
    Gelu,
    /// GELU's tanh approximation (GPT-2's `gelu_new`).
    GeluTanh,
    /// x sigmoid(x), gating a SwiGLU MLP (Llama).
    Silu,
}

/// How RoPE pairs the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RopeStyle {
    /// Pairs (2i, 2i+1): GGUF llama weights (llama.cpp permutes Q and K to this layout).
    Interleaved,
    /// Pairs (i, i + d/2), transformers' `rotate_half`: Hugging Face llama weights.
    Half,
}

/// How positions enter the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PosKind {
    /// Rotary embeddings on q and k with angle pos * base^(-2i/d_head).
    Rope { base: f64, style: RopeStyle },
    /// A learned table [context, d_model] added to the token embeddings.
    Learned,
}

/// Everything the forward pass needs to know about a model besides its tensors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelConfig {
    pub arch: Arch,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub d_model: usize,
    pub d_head: usize,
    /// Hidden width of the MLP.
    pub d_ff: usize,
    pub vocab: usize,
    /// Longest sequence the model was trained on (learned tables have this many rows).
    pub context: usize,
    pub norm: NormKind,
    pub norm_place: NormPlace,
    pub norm_eps: f64,
    pub act: Act,
    pub pos: PosKind,
    /// Causal (decoder) or bidirectional (encoder) attention.
    pub causal: bool,
    /// The LM head is the token embedding matrix.
    pub tied_embeddings: bool,
}

impl ModelConfig {
    /// The KV head that query head `h` reads (GQA): h / (heads / kv_heads).
    pub fn kv_head_for(&self, h: usize) -> usize {
        h / (self.heads / self.kv_heads)
    }

    /// RoPE base, if the model uses RoPE.
    pub fn rope_base(&self) -> Option<f64> {
        match self.pos {
            PosKind::Rope { base, .. } => Some(base),
            PosKind::Learned => None,
        }
    }
}
