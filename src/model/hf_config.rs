//! A Hugging Face `config.json` -> [`ModelConfig`] for `model_type` `bert`, `gpt2`, `llama`.

use std::path::Path;

use serde::Deserialize;

use super::{Act, Arch, ModelConfig, NormKind, NormPlace, PosKind, RopeStyle};
use crate::error::{Error, Result};

/// Model types attnviz reads from Hugging Face folders.
pub const HF_TYPES: &str = "bert, gpt2, llama";

/// The fields of `config.json` attnviz reads (BERT, GPT-2 and llama names side by side).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct HfConfig {
    pub model_type: Option<String>,
    // BERT / llama
    pub hidden_size: Option<usize>,
    pub num_hidden_layers: Option<usize>,
    pub num_attention_heads: Option<usize>,
    pub num_key_value_heads: Option<usize>,
    pub head_dim: Option<usize>,
    pub intermediate_size: Option<usize>,
    pub vocab_size: Option<usize>,
    pub max_position_embeddings: Option<usize>,
    pub layer_norm_eps: Option<f64>,
    pub rms_norm_eps: Option<f64>,
    pub hidden_act: Option<String>,
    pub rope_theta: Option<f64>,
    pub rope_scaling: Option<serde_json::Value>,
    pub tie_word_embeddings: Option<bool>,
    pub position_embedding_type: Option<String>,
    pub bos_token_id: Option<serde_json::Value>,
    pub eos_token_id: Option<serde_json::Value>,
    // GPT-2
    pub n_embd: Option<usize>,
    pub n_layer: Option<usize>,
    pub n_head: Option<usize>,
    pub n_inner: Option<usize>,
    pub n_positions: Option<usize>,
    pub layer_norm_epsilon: Option<f64>,
    pub activation_function: Option<String>,
}

impl HfConfig {
    pub fn read(path: &Path) -> Result<HfConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::file(path, format!("{}:{}: {e}", e.line(), e.column())))
    }
}

fn need<T: Copy>(path: &Path, v: Option<T>, key: &str) -> Result<T> {
    v.ok_or_else(|| Error::file(path, format!("missing required key {key}")))
}

fn act(path: &Path, key: &str, name: &str) -> Result<Act> {
    Ok(match name {
        "gelu" => Act::Gelu,
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Act::GeluTanh,
        "silu" | "swish" => Act::Silu,
        _ => {
            return Err(Error::file(
                path,
                format!(
                    "{key} {name:?} is not supported (gelu, gelu_new, gelu_pytorch_tanh, silu)"
                ),
            ));
        }
    })
}

/// The canonical config of a folder's `config.json` (at `path`).
pub fn config(path: &Path, h: &HfConfig) -> Result<ModelConfig> {
    let ty = h
        .model_type
        .as_deref()
        .ok_or_else(|| Error::file(path, format!("missing model_type (supported: {HF_TYPES})")))?;
    let c = match ty {
        "bert" => {
            if let Some(p) = &h.position_embedding_type
                && p != "absolute"
            {
                return Err(Error::file(
                    path,
                    format!("position_embedding_type {p:?} is not supported (absolute)"),
                ));
            }
            let d_model = need(path, h.hidden_size, "hidden_size")?;
            let heads = need(path, h.num_attention_heads, "num_attention_heads")?;
            ModelConfig {
                arch: Arch::Bert,
                layers: need(path, h.num_hidden_layers, "num_hidden_layers")?,
                heads,
                kv_heads: heads,
                d_model,
                d_head: d_model / heads.max(1),
                d_ff: need(path, h.intermediate_size, "intermediate_size")?,
                vocab: need(path, h.vocab_size, "vocab_size")?,
                context: need(path, h.max_position_embeddings, "max_position_embeddings")?,
                norm: NormKind::Layer,
                norm_place: NormPlace::Post,
                norm_eps: h.layer_norm_eps.unwrap_or(1e-12),
                act: act(
                    path,
                    "hidden_act",
                    h.hidden_act.as_deref().unwrap_or("gelu"),
                )?,
                pos: PosKind::Learned,
                causal: false,
                tied_embeddings: false,
            }
        }
        "gpt2" => {
            let d_model = need(path, h.n_embd, "n_embd")?;
            let heads = need(path, h.n_head, "n_head")?;
            ModelConfig {
                arch: Arch::Gpt2,
                layers: need(path, h.n_layer, "n_layer")?,
                heads,
                kv_heads: heads,
                d_model,
                d_head: d_model / heads.max(1),
                d_ff: h.n_inner.unwrap_or(4 * d_model),
                vocab: need(path, h.vocab_size, "vocab_size")?,
                context: need(path, h.n_positions, "n_positions")?,
                norm: NormKind::Layer,
                norm_place: NormPlace::Pre,
                norm_eps: h.layer_norm_epsilon.unwrap_or(1e-5),
                act: act(
                    path,
                    "activation_function",
                    h.activation_function.as_deref().unwrap_or("gelu_new"),
                )?,
                pos: PosKind::Learned,
                causal: true,
                tied_embeddings: true,
            }
        }
        "llama" => {
            if let Some(s) = &h.rope_scaling
                && !s.is_null()
            {
                return Err(Error::file(
                    path,
                    format!("rope_scaling {s} is not supported (only plain RoPE)"),
                ));
            }
            let d_model = need(path, h.hidden_size, "hidden_size")?;
            let heads = need(path, h.num_attention_heads, "num_attention_heads")?;
            ModelConfig {
                arch: Arch::Llama,
                layers: need(path, h.num_hidden_layers, "num_hidden_layers")?,
                heads,
                kv_heads: h.num_key_value_heads.unwrap_or(heads),
                d_model,
                d_head: h.head_dim.unwrap_or(d_model / heads.max(1)),
                d_ff: need(path, h.intermediate_size, "intermediate_size")?,
                vocab: need(path, h.vocab_size, "vocab_size")?,
                context: need(path, h.max_position_embeddings, "max_position_embeddings")?,
                norm: NormKind::Rms,
                norm_place: NormPlace::Pre,
                norm_eps: h.rms_norm_eps.unwrap_or(1e-6),
                act: act(
                    path,
                    "hidden_act",
                    h.hidden_act.as_deref().unwrap_or("silu"),
                )?,
                pos: PosKind::Rope {
                    base: h.rope_theta.unwrap_or(10000.0),
                    style: RopeStyle::Half,
                },
                causal: true,
                tied_embeddings: h.tie_word_embeddings.unwrap_or(false),
            }
        }
        other => {
            return Err(Error::file(
                path,
                format!("model_type {other:?} is not supported (supported: {HF_TYPES})"),
            ));
        }
    };
    for (k, v) in [
        ("layers", c.layers),
        ("heads", c.heads),
        ("kv_heads", c.kv_heads),
        ("d_model", c.d_model),
        ("vocab", c.vocab),
    ] {
        if v == 0 {
            return Err(Error::file(path, format!("{k} is 0")));
        }
    }
    if !c.heads.is_multiple_of(c.kv_heads) {
        return Err(Error::file(
            path,
            format!(
                "{} attention heads are not a multiple of {} key/value heads",
                c.heads, c.kv_heads
            ),
        ));
    }
    if c.arch != Arch::Llama && !c.d_model.is_multiple_of(c.heads) {
        return Err(Error::file(
            path,
            format!(
                "d_model {} is not a multiple of {} heads",
                c.d_model, c.heads
            ),
        ));
    }
    Ok(c)
}
