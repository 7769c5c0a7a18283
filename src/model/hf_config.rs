//! A Hugging Face `config.json` -> [`ModelConfig`] for the model types of [`HF_TYPES`].
//!
//! RoPE settings come in two spellings: transformers 4's `rope_theta` + `rope_scaling`, and
//! transformers 5's `rope_parameters` (one object, or one per layer type for Gemma 3); both
//! are read. Scaling types other than `linear` and `llama3` are refused by name.

use std::path::Path;

use serde::Deserialize;

use super::checks::{self, Size};
use super::{Act, Arch, Details, ModelConfig, NormKind, NormPlace, PosKind, RopeStyle};
use crate::error::{Error, Result};

/// Model types attnviz reads from Hugging Face folders.
pub const HF_TYPES: &str =
    "bert, gemma2, gemma3, gemma3_text, gpt2, gpt_neox, llama, mistral, phi3, qwen2, qwen3";

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
    // The newer families
    pub hidden_activation: Option<String>,
    pub rope_parameters: Option<serde_json::Value>,
    pub rope_local_base_freq: Option<f64>,
    pub partial_rotary_factor: Option<f64>,
    pub rotary_pct: Option<f64>,
    pub rotary_emb_base: Option<f64>,
    pub sliding_window: Option<usize>,
    pub use_sliding_window: Option<bool>,
    pub max_window_layers: Option<usize>,
    pub sliding_window_pattern: Option<usize>,
    pub layer_types: Option<Vec<String>>,
    pub query_pre_attn_scalar: Option<f64>,
    pub attn_logit_softcapping: Option<f64>,
    pub final_logit_softcapping: Option<f64>,
    pub use_parallel_residual: Option<bool>,
    /// Gemma 3's multimodal checkpoints keep the language model's config here.
    pub text_config: Option<serde_json::Value>,
}

impl HfConfig {
    pub fn read(path: &Path) -> Result<HfConfig> {
        let text = crate::input::read_text_limited(
            path,
            crate::input::MAX_MODEL_JSON_BYTES,
            "a model's JSON file",
        )?;
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

/// Refuse any size of `h` past its ceiling, before anything is built from it.
fn check_sizes(path: &Path, h: &HfConfig) -> Result<()> {
    let n = |v: Option<usize>| v.map(|v| v as u64);
    checks::sizes(
        path,
        &[
            ("num_hidden_layers", n(h.num_hidden_layers), Size::Layers),
            ("n_layer", n(h.n_layer), Size::Layers),
            ("num_attention_heads", n(h.num_attention_heads), Size::Heads),
            ("n_head", n(h.n_head), Size::Heads),
            ("num_key_value_heads", n(h.num_key_value_heads), Size::Heads),
            ("hidden_size", n(h.hidden_size), Size::Width),
            ("n_embd", n(h.n_embd), Size::Width),
            ("head_dim", n(h.head_dim), Size::Width),
            ("intermediate_size", n(h.intermediate_size), Size::Width),
            ("n_inner", n(h.n_inner), Size::Width),
            ("vocab_size", n(h.vocab_size), Size::Vocab),
            (
                "max_position_embeddings",
                n(h.max_position_embeddings),
                Size::Context,
            ),
            ("n_positions", n(h.n_positions), Size::Context),
            ("sliding_window", n(h.sliding_window), Size::Context),
        ],
    )
}

/// The canonical config of a folder's `config.json` (at `path`).
pub fn config(path: &Path, h: &HfConfig) -> Result<ModelConfig> {
    check_sizes(path, h)?;
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
                details: Details::default(),
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
                details: Details::default(),
            }
        }
        "llama" | "mistral" | "qwen2" | "qwen3" | "gemma2" | "gemma3" | "gemma3_text" | "phi3"
        | "gpt_neox" => decoder(path, ty, h)?,
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
    if matches!(c.arch, Arch::Bert | Arch::Gpt2) && !c.d_model.is_multiple_of(c.heads) {
        return Err(Error::file(
            path,
            format!(
                "d_model {} is not a multiple of {} heads",
                c.d_model, c.heads
            ),
        ));
    }
    let norm_eps = match c.arch {
        Arch::Gpt2 => "layer_norm_epsilon",
        Arch::Bert | Arch::GptNeox => "layer_norm_eps",
        _ => "rms_norm_eps",
    };
    checks::numbers(
        path,
        &c,
        &checks::NumberKeys {
            norm_eps,
            rope_base: "rope_theta",
            local_rope_base: "rope_local_base_freq",
        },
    )?;
    Ok(c)
}

/// The RoPE settings of one kind of layer, from either spelling.
#[derive(Debug, Default)]
struct RopeParams {
    theta: Option<f64>,
    /// (rope_type, the whole object) of a scaling, None for plain RoPE.
    scaling: Option<(String, serde_json::Value)>,
}

fn rope_params(v: &serde_json::Value) -> RopeParams {
    let ty = v
        .get("rope_type")
        .or_else(|| v.get("type"))
        .and_then(|t| t.as_str())
        .unwrap_or("default");
    RopeParams {
        theta: v.get("rope_theta").and_then(|t| t.as_f64()),
        scaling: (ty != "default").then(|| (ty.to_string(), v.clone())),
    }
}

/// (global, sliding-layer) RoPE settings.
fn rope_settings(h: &HfConfig) -> (RopeParams, Option<RopeParams>) {
    match &h.rope_parameters {
        Some(v) if v.get("full_attention").is_some() => {
            let mut g = rope_params(&v["full_attention"]);
            g.theta = g.theta.or(h.rope_theta);
            (g, v.get("sliding_attention").map(rope_params))
        }
        Some(v) if v.is_object() => {
            let mut g = rope_params(v);
            g.theta = g.theta.or(h.rope_theta);
            (g, None)
        }
        _ => {
            let mut g = h
                .rope_scaling
                .as_ref()
                .filter(|s| !s.is_null())
                .map(rope_params)
                .unwrap_or_default();
            g.theta = h.rope_theta.or(h.rotary_emb_base);
            let local = h.rope_local_base_freq.map(|b| RopeParams {
                theta: Some(b),
                scaling: None,
            });
            (g, local)
        }
    }
}

/// Per rotated pair, the divisor of its frequency under `scaling`.
fn rope_divisors(
    path: &Path,
    scaling: &Option<(String, serde_json::Value)>,
    base: f64,
    dims: usize,
) -> Result<Vec<f64>> {
    let Some((ty, v)) = scaling else {
        return Ok(Vec::new());
    };
    let num = |k: &str| -> Result<f64> {
        v.get(k)
            .and_then(|x| x.as_f64())
            .ok_or_else(|| Error::file(path, format!("rope scaling {ty:?} lacks the number {k}")))
    };
    let pairs = dims / 2;
    match ty.as_str() {
        "linear" => {
            let f = num("factor")?;
            if !(f.is_finite() && f > 0.0) {
                return Err(Error::file(
                    path,
                    format!("rope scaling factor {f} is not positive"),
                ));
            }
            Ok(vec![f; pairs])
        }
        "llama3" => {
            let (factor, low, high) = (
                num("factor")?,
                num("low_freq_factor")?,
                num("high_freq_factor")?,
            );
            let orig = num("original_max_position_embeddings")?;
            if !(factor > 0.0 && high > low && low > 0.0 && orig > 0.0) {
                return Err(Error::file(
                    path,
                    "llama3 rope scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0",
                ));
            }
            Ok((0..pairs)
                .map(|i| {
                    let f = base.powf(-2.0 * i as f64 / dims as f64);
                    let wavelen = 2.0 * std::f64::consts::PI / f;
                    if wavelen < orig / high {
                        1.0
                    } else if wavelen > orig / low {
                        factor
                    } else {
                        let smooth = (orig / wavelen - low) / (high - low);
                        f / ((1.0 - smooth) * f / factor + smooth * f)
                    }
                })
                .collect())
        }
        other => Err(Error::file(
            path,
            format!("rope scaling type {other:?} is not supported (linear, llama3, or none)"),
        )),
    }
}

/// Per layer, its sliding window or None, from `layer_types` or the family's pattern.
fn windows(path: &Path, arch: Arch, h: &HfConfig, layers: usize) -> Result<Vec<Option<usize>>> {
    let qwen_off = matches!(arch, Arch::Qwen2 | Arch::Qwen3) && h.use_sliding_window != Some(true);
    let Some(w) = h.sliding_window.filter(|_| !qwen_off) else {
        return Ok(Vec::new());
    };
    if w == 0 {
        return Err(Error::file(path, "sliding_window is 0"));
    }
    let kinds: Vec<bool> = if let Some(types) = &h.layer_types {
        if types.len() != layers {
            return Err(Error::file(
                path,
                format!(
                    "layer_types lists {} layers; num_hidden_layers is {layers}",
                    types.len()
                ),
            ));
        }
        types
            .iter()
            .map(|t| match t.as_str() {
                "sliding_attention" => Ok(true),
                "full_attention" => Ok(false),
                other => Err(Error::file(
                    path,
                    format!("layer_types: {other:?} is not sliding_attention or full_attention"),
                )),
            })
            .collect::<Result<_>>()?
    } else {
        (0..layers)
            .map(|l| match arch {
                Arch::Gemma2 => l % 2 == 0,
                Arch::Gemma3 => (l + 1) % h.sliding_window_pattern.unwrap_or(6).max(1) != 0,
                Arch::Qwen2 | Arch::Qwen3 => l >= h.max_window_layers.unwrap_or(layers),
                _ => true,
            })
            .collect()
    };
    Ok(kinds.into_iter().map(|s| s.then_some(w)).collect())
}

/// The RoPE decoders: Llama and its descendants, Gemma, Phi-3, GPT-NeoX.
fn decoder(path: &Path, ty: &str, h: &HfConfig) -> Result<ModelConfig> {
    let nested;
    let h = match (&h.text_config, ty) {
        (Some(t), "gemma3") => {
            nested = serde_json::from_value::<HfConfig>(t.clone())
                .map_err(|e| Error::file(path, format!("text_config: {e}")))?;
            check_sizes(path, &nested)?;
            &nested
        }
        _ => h,
    };
    let arch = match ty {
        "llama" => Arch::Llama,
        "mistral" => Arch::Mistral,
        "qwen2" => Arch::Qwen2,
        "qwen3" => Arch::Qwen3,
        "gemma2" => Arch::Gemma2,
        "gemma3" | "gemma3_text" => Arch::Gemma3,
        "phi3" => Arch::Phi3,
        _ => Arch::GptNeox,
    };
    let gemma = matches!(arch, Arch::Gemma2 | Arch::Gemma3);
    let neox = arch == Arch::GptNeox;
    let d_model = need(path, h.hidden_size, "hidden_size")?;
    let heads = need(path, h.num_attention_heads, "num_attention_heads")?;
    let layers = need(path, h.num_hidden_layers, "num_hidden_layers")?;
    let d_head = h.head_dim.unwrap_or(d_model / heads.max(1));
    let (global, local) = rope_settings(h);
    let default_base = if arch == Arch::Gemma3 {
        1_000_000.0
    } else {
        10000.0
    };
    let base = global.theta.unwrap_or(default_base);
    // transformers 5 moves the fraction into rope_parameters; older configs keep it at the
    // top level (rotary_pct for GPT-NeoX).
    let in_params = h
        .rope_parameters
        .as_ref()
        .and_then(|v| {
            v.get("full_attention")
                .unwrap_or(v)
                .get("partial_rotary_factor")
        })
        .and_then(|f| f.as_f64());
    let fraction = in_params
        .or(h.partial_rotary_factor)
        .or(h.rotary_pct)
        .unwrap_or(1.0);
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(Error::file(
            path,
            format!("partial_rotary_factor {fraction} is not in (0, 1]"),
        ));
    }
    let rope_dims = (d_head as f64 * fraction) as usize;
    if rope_dims == 0 || !rope_dims.is_multiple_of(2) {
        return Err(Error::file(
            path,
            format!(
                "RoPE would rotate {rope_dims} of {d_head} head dimensions; it needs an even number above 0"
            ),
        ));
    }
    if let Some(l) = &local
        && l.scaling.is_some()
    {
        return Err(Error::file(
            path,
            "rope scaling on the sliding layers is not supported",
        ));
    }
    let local_base = match (arch, &local) {
        (Arch::Gemma3, None) => Some(10000.0),
        (_, Some(l)) => l.theta,
        _ => None,
    }
    .filter(|&b| b != base);
    let act_key = if gemma {
        "hidden_activation"
    } else {
        "hidden_act"
    };
    let act_name = if gemma {
        h.hidden_activation
            .as_deref()
            .or(h.hidden_act.as_deref())
            .unwrap_or("gelu_pytorch_tanh")
    } else {
        h.hidden_act
            .as_deref()
            .unwrap_or(if neox { "gelu" } else { "silu" })
    };
    let details = Details {
        windows: windows(path, arch, h, layers)?,
        local_rope_base: local_base,
        rope_dims: (rope_dims != d_head).then_some(rope_dims),
        rope_divisors: rope_divisors(path, &global.scaling, base, rope_dims)?,
        attn_scale: match (gemma, h.query_pre_attn_scalar) {
            (true, Some(s)) if s > 0.0 => Some(1.0 / s.sqrt()),
            (true, Some(s)) => {
                return Err(Error::file(
                    path,
                    format!("query_pre_attn_scalar {s} is not positive"),
                ));
            }
            _ => None,
        },
        attn_softcap: h.attn_logit_softcapping.filter(|_| arch == Arch::Gemma2),
        final_softcap: h.final_logit_softcapping.filter(|_| gemma),
        embed_scale: gemma.then(|| (d_model as f64).sqrt()),
        parallel_residual: neox && h.use_parallel_residual.unwrap_or(true),
    };
    for (k, cap) in [
        ("attn_logit_softcapping", details.attn_softcap),
        ("final_logit_softcapping", details.final_softcap),
    ] {
        if let Some(c) = cap
            && !(c.is_finite() && c > 0.0)
        {
            return Err(Error::file(
                path,
                format!("{k} {c} is not a positive number"),
            ));
        }
    }
    Ok(ModelConfig {
        arch,
        layers,
        heads,
        kv_heads: h.num_key_value_heads.unwrap_or(heads),
        d_model,
        d_head,
        d_ff: need(path, h.intermediate_size, "intermediate_size")?,
        vocab: need(path, h.vocab_size, "vocab_size")?,
        context: need(path, h.max_position_embeddings, "max_position_embeddings")?,
        norm: if neox { NormKind::Layer } else { NormKind::Rms },
        norm_place: NormPlace::Pre,
        norm_eps: if neox {
            h.layer_norm_eps.unwrap_or(1e-5)
        } else {
            h.rms_norm_eps.unwrap_or(1e-6)
        },
        act: act(path, act_key, act_name)?,
        pos: PosKind::Rope {
            base,
            style: RopeStyle::Half,
        },
        causal: true,
        tied_embeddings: h.tie_word_embeddings.unwrap_or(gemma),
        details,
    })
}
