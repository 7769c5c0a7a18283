//! A GGUF model -> [`ModelConfig`] and [`Weights`], for the architectures of
//! [`GGUF_ARCHS`], under the names and metadata keys llama.cpp's converter writes
//! (`{arch}.block_count`, `blk.N.attn_q.weight`, ...).
//!
//! What the converter changed on the way, undone or kept here:
//! - `llama`: the rows of Q and K are permuted so that RoPE rotates interleaved pairs
//!   (2i, 2i+1); the rows are kept as stored and the config says
//!   [`RopeStyle::Interleaved`]. Every other architecture keeps transformers' order
//!   ([`RopeStyle::Half`]).
//! - Gemma: the norm weights already hold 1 + w (transformers adds the 1 at run time).
//! - Llama 3's frequency scaling is a tensor `rope_freqs.weight` of per-pair divisors.
//! - Phi-3 keeps Q, K, V fused (`attn_qkv`) and gate and up fused in `ffn_up`; GPT-2's and
//!   GPT-NeoX's `attn_qkv` hold all of Q, then K, then V. They are split by rows here.
//! - What llama.cpp fixes in code rather than the file: Gemma's embedding scale
//!   sqrt(d_model), Gemma 2's alternating windows, Gemma 3's five sliding layers to one
//!   global and its sliding layers' RoPE base 10000 (unless `rope.freq_base_swa` says
//!   otherwise), and the score scale 1/sqrt(d_model / heads) of the 27B Gemmas.

use super::checks::{self, Size};
use super::gguf::GgufFile;
use super::weights::ExtraNorms;
use super::{
    Act, Arch, Details, LayerWeights, Linear, Matrix, Mlp, ModelConfig, Norm, NormKind, NormPlace,
    PosKind, RopeStyle, Weights,
};
use crate::error::{Error, Result};

/// Architectures attnviz reads from GGUF files.
pub const GGUF_ARCHS: &str = "gemma2, gemma3, gpt2, gptneox, llama, phi3, qwen2, qwen3";

/// The GGUF architecture name -> the family.
fn arch_of(name: &str) -> Option<Arch> {
    Some(match name {
        "llama" => Arch::Llama,
        "qwen2" => Arch::Qwen2,
        "qwen3" => Arch::Qwen3,
        "gemma2" => Arch::Gemma2,
        "gemma3" => Arch::Gemma3,
        "phi3" => Arch::Phi3,
        "gptneox" => Arch::GptNeox,
        "gpt2" => Arch::Gpt2,
        _ => return None,
    })
}

/// The config from the header alone.
pub fn config(g: &GgufFile) -> Result<ModelConfig> {
    let name = g.str("general.architecture")?;
    let Some(arch) = arch_of(name) else {
        return Err(Error::file(
            &g.path,
            format!(
                "general.architecture is {name:?}, which attnviz cannot run (supported: {GGUF_ARCHS})"
            ),
        ));
    };
    let key = |k: &str| format!("{name}.{k}");
    let usize_key = |k: &str| -> Result<usize> {
        let k = key(k);
        let v = g.u64(&k)?;
        if v == 0 {
            return Err(Error::file(&g.path, format!("metadata key {k} is 0")));
        }
        usize::try_from(v).map_err(|_| Error::file(&g.path, format!("metadata key {k} is {v}")))
    };
    // Every size is checked against its ceiling before any of them is used.
    let stated = [
        ("block_count", Size::Layers),
        ("attention.head_count", Size::Heads),
        ("attention.head_count_kv", Size::Heads),
        ("embedding_length", Size::Width),
        ("feed_forward_length", Size::Width),
        ("context_length", Size::Context),
        ("attention.key_length", Size::Width),
        ("rope.dimension_count", Size::Width),
        ("vocab_size", Size::Vocab),
        ("attention.sliding_window", Size::Context),
    ]
    .map(|(k, kind)| (key(k), kind));
    let mut values = Vec::new();
    for (k, kind) in &stated {
        values.push((k.as_str(), g.opt_u64(k)?, *kind));
    }
    checks::sizes(&g.path, &values)?;
    let layers = usize_key("block_count")?;
    // Each block has several tensors of its own.
    if layers > g.tensors.len() {
        return Err(Error::file(
            &g.path,
            format!(
                "{} is {layers} but the file holds only {} tensors",
                key("block_count"),
                g.tensors.len()
            ),
        ));
    }
    let heads = usize_key("attention.head_count")?;
    let kv_heads = match g.opt_u64(&key("attention.head_count_kv"))? {
        Some(0) | None => heads,
        Some(v) => v as usize,
    };
    let d_model = usize_key("embedding_length")?;
    let d_ff = usize_key("feed_forward_length")?;
    let context = usize_key("context_length")?;
    let gemma = matches!(arch, Arch::Gemma2 | Arch::Gemma3);
    let neox = arch == Arch::GptNeox;
    // GPT-2 and GPT-NeoX: LayerNorm with biases everywhere.
    let layer_norm = matches!(arch, Arch::GptNeox | Arch::Gpt2);
    let default_base = if arch == Arch::Gemma3 {
        1_000_000.0
    } else {
        10000.0
    };
    let base = g.opt_f64(&key("rope.freq_base"))?.unwrap_or(default_base);
    let eps_key = if layer_norm {
        key("attention.layer_norm_epsilon")
    } else {
        key("attention.layer_norm_rms_epsilon")
    };
    let eps = g
        .opt_f64(&eps_key)?
        .ok_or_else(|| Error::file(&g.path, format!("missing required metadata key {eps_key}")))?;
    if !heads.is_multiple_of(kv_heads) {
        return Err(Error::file(
            &g.path,
            format!(
                "{} {heads} is not a multiple of {} {kv_heads}",
                key("attention.head_count"),
                key("attention.head_count_kv")
            ),
        ));
    }
    let d_head = match g.opt_u64(&key("attention.key_length"))? {
        Some(k) if k > 0 => k as usize,
        _ => {
            if !d_model.is_multiple_of(heads) {
                return Err(Error::file(
                    &g.path,
                    format!(
                        "{} {d_model} is not a multiple of {} {heads}",
                        key("embedding_length"),
                        key("attention.head_count")
                    ),
                ));
            }
            d_model / heads
        }
    };
    let rope_dims = match g.opt_u64(&key("rope.dimension_count"))? {
        Some(rd) if rd as usize > d_head || rd == 0 || rd % 2 == 1 => {
            return Err(Error::file(
                &g.path,
                format!(
                    "{} is {rd}; it must be even, above 0 and at most the head width {d_head}",
                    key("rope.dimension_count")
                ),
            ));
        }
        Some(rd) => rd as usize,
        None => d_head,
    };
    let vocab = match g.opt_u64(&key("vocab_size"))? {
        Some(v) => v as usize,
        None => match g.tensor("token_embd.weight") {
            Some(t) if t.dims.len() == 2 => t.dims[1] as usize,
            _ => match g.opt_array("tokenizer.ggml.tokens")? {
                Some(a) => a.len(),
                None => {
                    return Err(Error::file(
                        &g.path,
                        "missing required tensor token_embd.weight",
                    ));
                }
            },
        },
    };
    let window = match g.opt_u64(&key("attention.sliding_window"))? {
        Some(0) | None => None,
        Some(w) => Some(w as usize),
    };
    let windows: Vec<Option<usize>> = match (arch, window) {
        (_, None) => Vec::new(),
        (Arch::Gemma2, Some(w)) => (0..layers).map(|l| (l % 2 == 0).then_some(w)).collect(),
        (Arch::Gemma3, Some(w)) => (0..layers)
            .map(|l| ((l + 1) % 6 != 0).then_some(w))
            .collect(),
        (_, Some(w)) => vec![Some(w); layers],
    };
    let local_rope_base = match arch {
        Arch::Gemma3 => Some(g.opt_f64(&key("rope.freq_base_swa"))?.unwrap_or(10000.0)),
        _ => None,
    }
    .filter(|&b| b != base);
    let rope_divisors = if arch == Arch::Gpt2 {
        Vec::new()
    } else {
        rope_divisors(g, &key, rope_dims)?
    };
    let softcap = |k: &str| -> Result<Option<f64>> {
        match g.opt_f64(&key(k))? {
            Some(c) if !(c.is_finite() && c >= 0.0) => Err(Error::file(
                &g.path,
                format!("{} is {c}; a soft cap must be a positive number", key(k)),
            )),
            Some(c) if c > 0.0 => Ok(Some(c)),
            _ => Ok(None),
        }
    };
    let attn_scale = match (arch, g.opt_f64(&key("attention.scale"))?) {
        (_, Some(s)) if s > 0.0 => Some(s),
        // llama.cpp's special case: the 27B Gemmas scale by 1/sqrt(d_model / heads).
        (Arch::Gemma2, _) if layers == 46 => Some(1.0 / ((d_model / heads) as f64).sqrt()),
        (Arch::Gemma3, _) if layers == 62 => Some(1.0 / ((d_model / heads) as f64).sqrt()),
        _ => None,
    };
    let details = Details {
        windows,
        local_rope_base,
        rope_dims: (rope_dims != d_head).then_some(rope_dims),
        rope_divisors,
        attn_scale,
        attn_softcap: if arch == Arch::Gemma2 {
            softcap("attn_logit_softcapping")?
        } else {
            None
        },
        final_softcap: if gemma {
            softcap("final_logit_softcapping")?
        } else {
            None
        },
        embed_scale: gemma.then(|| (d_model as f64).sqrt()),
        parallel_residual: neox && g.opt_bool(&key("use_parallel_residual"))?.unwrap_or(true),
    };
    let c = ModelConfig {
        arch,
        layers,
        heads,
        kv_heads,
        d_model,
        d_head,
        d_ff,
        vocab,
        context,
        norm: if layer_norm {
            NormKind::Layer
        } else {
            NormKind::Rms
        },
        norm_place: NormPlace::Pre,
        norm_eps: eps,
        act: match arch {
            Arch::Gemma2 | Arch::Gemma3 => Act::GeluTanh,
            Arch::GptNeox => Act::Gelu,
            Arch::Gpt2 => Act::GeluTanh,
            _ => Act::Silu,
        },
        pos: if arch == Arch::Gpt2 {
            PosKind::Learned
        } else {
            PosKind::Rope {
                base,
                style: if arch == Arch::Llama {
                    RopeStyle::Interleaved
                } else {
                    RopeStyle::Half
                },
            }
        },
        causal: true,
        tied_embeddings: g.tensor("output.weight").is_none(),
        details,
    };
    checks::numbers(
        &g.path,
        &c,
        &checks::NumberKeys {
            norm_eps: &eps_key,
            rope_base: &key("rope.freq_base"),
            local_rope_base: &key("rope.freq_base_swa"),
        },
    )?;
    Ok(c)
}

/// Per-pair frequency divisors: a `rope_freqs.weight` tensor (Llama 3) or linear scaling.
fn rope_divisors(g: &GgufFile, key: &dyn Fn(&str) -> String, dims: usize) -> Result<Vec<f64>> {
    if let Some(t) = g.tensor("rope_freqs.weight") {
        let f = g.read(
            "rope_freqs.weight",
            &[dims / 2],
            "the rotated pairs (rope.dimension_count / 2)",
        )?;
        if let Some(bad) = f.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(Error::file(
                &g.path,
                format!(
                    "tensor {} holds {bad}; frequency factors must be positive",
                    t.name
                ),
            ));
        }
        return Ok(f.iter().map(|&v| v as f64).collect());
    }
    let ty = match g.get(&key("rope.scaling.type")) {
        Some(v) => v.as_str().unwrap_or("").to_string(),
        None => return Ok(Vec::new()),
    };
    match ty.as_str() {
        "none" | "" => Ok(Vec::new()),
        "linear" => {
            let f = g.opt_f64(&key("rope.scaling.factor"))?.unwrap_or(1.0);
            if !(f.is_finite() && f > 0.0) {
                return Err(Error::file(
                    &g.path,
                    format!("{} is {f}; it must be positive", key("rope.scaling.factor")),
                ));
            }
            Ok(if f == 1.0 {
                Vec::new()
            } else {
                vec![f; dims / 2]
            })
        }
        other => Err(Error::file(
            &g.path,
            format!(
                "{} is {other:?}, which attnviz does not run (none, linear, or a rope_freqs tensor)",
                key("rope.scaling.type")
            ),
        )),
    }
}

/// The canonical layout: matrices kept in their type in the file's map, norms f32.
pub fn weights(g: &GgufFile, c: &ModelConfig) -> Result<Weights> {
    build(c, &|n, w, what| g.read(n, w, what), &|n, w, what| {
        g.matrix(n, w, what)
    })
}

/// Check that every tensor is present with the shape the config implies, reading none.
pub fn check(g: &GgufFile, c: &ModelConfig) -> Result<()> {
    build(
        c,
        &|n, w, what| g.check(n, w, what).map(|_| Vec::new()),
        &|n, w, what| g.check(n, w, what).map(|_| Matrix::F32(Vec::new())),
    )
    .map(|_| ())
}

type Read<'a> = dyn Fn(&str, &[usize], &str) -> Result<Vec<f32>> + 'a;
type ReadMatrix<'a> = dyn Fn(&str, &[usize], &str) -> Result<Matrix> + 'a;

fn build(c: &ModelConfig, read: &Read, matrix: &ReadMatrix) -> Result<Weights> {
    let d = c.d_model;
    let qd = c.heads * c.d_head;
    let kvd = c.kv_heads * c.d_head;
    let neox = matches!(c.arch, Arch::GptNeox | Arch::Gpt2);
    let what =
        |in_dim: usize, out_dim: usize| format!("the config ([in, out] = [{in_dim}, {out_dim}])");
    let lin = |name: &str, in_dim: usize, out_dim: usize| -> Result<Linear> {
        let w = matrix(
            &format!("{name}.weight"),
            &[in_dim, out_dim],
            &what(in_dim, out_dim),
        )?;
        let b = if neox {
            Some(read(
                &format!("{name}.bias"),
                &[out_dim],
                "the output size",
            )?)
        } else {
            None
        };
        Ok(Linear {
            w,
            b,
            out_dim,
            in_dim,
        })
    };
    // A fused projection [in, sum of parts] split by output rows.
    let split = |name: &str, in_dim: usize, parts: &[usize]| -> Result<Vec<Linear>> {
        let total: usize = parts.iter().sum();
        let w = matrix(
            &format!("{name}.weight"),
            &[in_dim, total],
            &what(in_dim, total),
        )?;
        let b = if neox {
            Some(read(&format!("{name}.bias"), &[total], "the output size")?)
        } else {
            None
        };
        let mut at = 0;
        let mut out = Vec::with_capacity(parts.len());
        for &rows in parts {
            // A dry check reads no values: every part comes back empty.
            let part = |v: &[f32], width: usize| {
                v.get(at * width..(at + rows) * width)
                    .map(|s| s.to_vec())
                    .unwrap_or_default()
            };
            out.push(Linear {
                w: w.row_range(at, rows, in_dim),
                b: b.as_deref().map(|b| part(b, 1)),
                out_dim: rows,
                in_dim,
            });
            at += rows;
        }
        Ok(out)
    };
    let norm_of = |name: &str, width: usize| -> Result<Norm> {
        Ok(Norm {
            w: read(&format!("{name}.weight"), &[width], "the norm's width")?,
            b: if neox {
                Some(read(&format!("{name}.bias"), &[width], "the norm's width")?)
            } else {
                None
            },
        })
    };
    let norm = |name: &str| norm_of(name, d);
    let tok_embed = matrix(
        "token_embd.weight",
        &[d, c.vocab],
        "the embedding length and the vocabulary size",
    )?;
    let mut layers = Vec::with_capacity(c.layers);
    for l in 0..c.layers {
        let p = format!("blk.{l}.");
        let fused_qkv = matches!(c.arch, Arch::Phi3 | Arch::GptNeox | Arch::Gpt2);
        let (wq, wk, wv) = if fused_qkv {
            let mut v = split(&format!("{p}attn_qkv"), d, &[qd, kvd, kvd])?.into_iter();
            match (v.next(), v.next(), v.next()) {
                (Some(q), Some(k), Some(v)) => (q, k, v),
                _ => return Err(Error::Internal("fused qkv split".into())),
            }
        } else {
            (
                lin(&format!("{p}attn_q"), d, qd)?,
                lin(&format!("{p}attn_k"), d, kvd)?,
                lin(&format!("{p}attn_v"), d, kvd)?,
            )
        };
        // Qwen 2's Q, K and V carry biases.
        let with_bias = |mut x: Linear, name: &str| -> Result<Linear> {
            if c.arch == Arch::Qwen2 {
                x.b = Some(read(
                    &format!("{p}{name}.bias"),
                    &[x.out_dim],
                    "the output size",
                )?);
            }
            Ok(x)
        };
        let (wq, wk, wv) = (
            with_bias(wq, "attn_q")?,
            with_bias(wk, "attn_k")?,
            with_bias(wv, "attn_v")?,
        );
        let mlp = match c.arch {
            Arch::Phi3 => {
                let mut v = split(&format!("{p}ffn_up"), d, &[c.d_ff, c.d_ff])?.into_iter();
                match (v.next(), v.next()) {
                    (Some(gate), Some(up)) => Mlp::Gated {
                        gate,
                        up,
                        down: lin(&format!("{p}ffn_down"), c.d_ff, d)?,
                    },
                    _ => return Err(Error::Internal("fused gate/up split".into())),
                }
            }
            Arch::GptNeox | Arch::Gpt2 => Mlp::Plain {
                up: lin(&format!("{p}ffn_up"), d, c.d_ff)?,
                down: lin(&format!("{p}ffn_down"), c.d_ff, d)?,
            },
            _ => Mlp::Gated {
                gate: lin(&format!("{p}ffn_gate"), d, c.d_ff)?,
                up: lin(&format!("{p}ffn_up"), d, c.d_ff)?,
                down: lin(&format!("{p}ffn_down"), c.d_ff, d)?,
            },
        };
        let head_norms = matches!(c.arch, Arch::Qwen3 | Arch::Gemma3);
        let gemma = matches!(c.arch, Arch::Gemma2 | Arch::Gemma3);
        let opt = |on: bool, name: &str, width: usize| -> Result<Option<Norm>> {
            if on {
                norm_of(&format!("{p}{name}"), width).map(Some)
            } else {
                Ok(None)
            }
        };
        layers.push(LayerWeights {
            attn_norm: norm(&format!("{p}attn_norm"))?,
            wq,
            wk,
            wv,
            wo: lin(&format!("{p}attn_output"), qd, d)?,
            mlp_norm: norm(&format!("{p}ffn_norm"))?,
            mlp,
            extra: ExtraNorms {
                q_norm: opt(head_norms, "attn_q_norm", c.d_head)?,
                k_norm: opt(head_norms, "attn_k_norm", c.d_head)?,
                post_attn: opt(gemma, "post_attention_norm", d)?,
                post_mlp: opt(gemma, "post_ffw_norm", d)?,
            },
        });
    }
    let final_norm = Some(norm("output_norm")?);
    let lm_head = if c.tied_embeddings {
        None
    } else {
        Some(Linear {
            w: matrix("output.weight", &[d, c.vocab], &what(d, c.vocab))?,
            b: None,
            out_dim: c.vocab,
            in_dim: d,
        })
    };
    let pos_embed = if c.arch == Arch::Gpt2 {
        Some(read(
            "position_embd.weight",
            &[d, c.context],
            "the embedding length and the context length",
        )?)
    } else {
        None
    };
    Ok(Weights {
        tok_embed,
        pos_embed,
        type_embed: None,
        embed_norm: None,
        layers,
        final_norm,
        lm_head,
    })
}

/// Parameters as the file stores them (sum of tensor element counts).
pub fn params(g: &GgufFile) -> u64 {
    g.tensors.iter().map(|t| t.elems()).sum()
}
