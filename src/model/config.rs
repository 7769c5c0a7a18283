//! A model's shape and semantics, independent of the file it came from.

use serde::Serialize;

/// The model families attnviz runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// Llama 2/3, SmolLM, TinyLlama: RMSNorm, RoPE, SwiGLU, GQA, causal.
    Llama,
    /// Mistral: Llama with a sliding window on every layer (when its config sets one).
    Mistral,
    /// Qwen 2 / 2.5: Llama with biases on Q, K and V.
    Qwen2,
    /// Qwen 3: Llama with an RMSNorm on every query and key head before RoPE.
    Qwen3,
    /// Gemma 2: sliding and global layers alternating, soft-capped attention scores and
    /// logits, norms after attention and MLP too, embeddings scaled by sqrt(d_model).
    Gemma2,
    /// Gemma 3: five sliding layers to one global, query/key norms, a RoPE base per kind.
    Gemma3,
    /// Phi-3 / Phi-4-mini: Llama with fused QKV and gate/up projections, maybe partial RoPE.
    Phi3,
    /// GPT-NeoX / Pythia: LayerNorm, partial RoPE, parallel attention and MLP.
    GptNeox,
    /// BERT, MiniLM: learned positions, post-LayerNorm, GELU, bidirectional.
    Bert,
    /// GPT-2: learned positions, pre-LayerNorm, GELU (tanh), causal.
    Gpt2,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Mistral => "mistral",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma2 => "gemma2",
            Arch::Gemma3 => "gemma3",
            Arch::Phi3 => "phi3",
            Arch::GptNeox => "gpt_neox",
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
    /// What the newer families add; `Details::default()` is none of it.
    pub details: Details,
}

/// The parts of a model that only some families have. The default is a plain model:
/// global attention, one RoPE base over the whole head, scale 1/sqrt(d_head), no caps.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Details {
    /// Per layer, the sliding window W (query i sees keys i - W < j <= i) or None for a
    /// global layer; empty when every layer is global.
    pub windows: Vec<Option<usize>>,
    /// RoPE base of the sliding layers, when it differs from the global one (Gemma 3).
    pub local_rope_base: Option<f64>,
    /// Dimensions of a head that RoPE rotates, from the first (partial RoPE); None: all.
    pub rope_dims: Option<usize>,
    /// Per rotated pair, what the global layers divide its frequency by (Llama 3's
    /// scaling, linear scaling, a GGUF's `rope_freqs`); empty: none.
    pub rope_divisors: Vec<f64>,
    /// The score scale when it is not 1/sqrt(d_head) (Gemma's query_pre_attn_scalar).
    pub attn_scale: Option<f64>,
    /// Scores become cap * tanh(scores / cap) before the mask and softmax (Gemma 2).
    pub attn_softcap: Option<f64>,
    /// Logits become cap * tanh(logits / cap) (Gemma 2).
    pub final_softcap: Option<f64>,
    /// The token embeddings are multiplied by this (Gemma: sqrt(d_model)).
    pub embed_scale: Option<f64>,
    /// x + attn(norm1 x) + mlp(norm2 x) in one step (GPT-NeoX).
    pub parallel_residual: bool,
}

/// What kind of attention one layer has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerAttention {
    Global,
    Window(usize),
}

impl ModelConfig {
    /// The KV head that query head `h` reads (GQA): h / (heads / kv_heads).
    pub fn kv_head_for(&self, h: usize) -> usize {
        h / (self.heads / self.kv_heads)
    }

    /// Layer `l`'s sliding window, if it has one.
    pub fn window(&self, l: usize) -> Option<usize> {
        self.details.windows.get(l).copied().flatten()
    }

    /// Layer `l`'s attention kind.
    pub fn attention_kind(&self, l: usize) -> LayerAttention {
        match self.window(l) {
            Some(w) => LayerAttention::Window(w),
            None => LayerAttention::Global,
        }
    }

    /// Dimensions of a head that RoPE rotates.
    pub fn rope_dims(&self) -> usize {
        self.details.rope_dims.unwrap_or(self.d_head)
    }

    /// The attention score scale: 1/sqrt(d_head) unless the model sets its own.
    pub fn attn_scale(&self) -> f64 {
        self.details
            .attn_scale
            .unwrap_or(1.0 / (self.d_head as f64).sqrt())
    }

    /// RoPE base, if the model uses RoPE.
    pub fn rope_base(&self) -> Option<f64> {
        match self.pos {
            PosKind::Rope { base, .. } => Some(base),
            PosKind::Learned => None,
        }
    }
}
