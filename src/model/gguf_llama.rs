//! GGUF architecture `llama` -> [`ModelConfig`] and [`Weights`].
//!
//! llama.cpp's converter permutes the rows of Q and K so that RoPE rotates interleaved
//! pairs (2i, 2i+1); the rows are kept as stored and the config says
//! [`RopeStyle::Interleaved`].

use super::gguf::GgufFile;
use super::{
    Act, Arch, LayerWeights, Linear, Mlp, ModelConfig, Norm, NormKind, NormPlace, PosKind,
    RopeStyle, Weights,
};
use crate::error::{Error, Result};

/// Architectures attnviz reads from GGUF files.
pub const GGUF_ARCHS: &str = "llama";

/// The config from the header alone.
pub fn config(g: &GgufFile) -> Result<ModelConfig> {
    let arch = g.str("general.architecture")?;
    if arch != "llama" {
        return Err(Error::file(
            &g.path,
            format!(
                "general.architecture is {arch:?}, which attnviz cannot run (supported: {GGUF_ARCHS})"
            ),
        ));
    }
    let usize_key = |k: &str| -> Result<usize> {
        let v = g.u64(k)?;
        if v == 0 {
            return Err(Error::file(&g.path, format!("metadata key {k} is 0")));
        }
        Ok(v as usize)
    };
    let layers = usize_key("llama.block_count")?;
    let heads = usize_key("llama.attention.head_count")?;
    let kv_heads = match g.opt_u64("llama.attention.head_count_kv")? {
        Some(0) | None => heads,
        Some(v) => v as usize,
    };
    let d_model = usize_key("llama.embedding_length")?;
    let d_ff = usize_key("llama.feed_forward_length")?;
    let context = usize_key("llama.context_length")?;
    let base = g.opt_f64("llama.rope.freq_base")?.unwrap_or(10000.0);
    let eps = g
        .opt_f64("llama.attention.layer_norm_rms_epsilon")?
        .ok_or_else(|| {
            Error::file(
                &g.path,
                "missing required metadata key llama.attention.layer_norm_rms_epsilon",
            )
        })?;
    if !heads.is_multiple_of(kv_heads) {
        return Err(Error::file(
            &g.path,
            format!(
                "llama.attention.head_count {heads} is not a multiple of llama.attention.head_count_kv {kv_heads}"
            ),
        ));
    }
    let d_head = match g.opt_u64("llama.attention.key_length")? {
        Some(k) => k as usize,
        None => {
            if !d_model.is_multiple_of(heads) {
                return Err(Error::file(
                    &g.path,
                    format!(
                        "llama.embedding_length {d_model} is not a multiple of llama.attention.head_count {heads}"
                    ),
                ));
            }
            d_model / heads
        }
    };
    if let Some(rd) = g.opt_u64("llama.rope.dimension_count")?
        && rd as usize != d_head
    {
        return Err(Error::file(
            &g.path,
            format!(
                "llama.rope.dimension_count is {rd} but heads are {d_head} wide: partial RoPE is not supported"
            ),
        ));
    }
    let vocab = match g.opt_u64("llama.vocab_size")? {
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
    Ok(ModelConfig {
        arch: Arch::Llama,
        layers,
        heads,
        kv_heads,
        d_model,
        d_head,
        d_ff,
        vocab,
        context,
        norm: NormKind::Rms,
        norm_place: NormPlace::Pre,
        norm_eps: eps,
        act: Act::Silu,
        pos: PosKind::Rope {
            base,
            style: RopeStyle::Interleaved,
        },
        causal: true,
        tied_embeddings: g.tensor("output.weight").is_none(),
    })
}

/// Dequantize every tensor into the canonical layout.
pub fn weights(g: &GgufFile, c: &ModelConfig) -> Result<Weights> {
    build(c, &|n, w, what| g.read(n, w, what))
}

/// Check that every tensor is present with the shape the config implies, reading none.
pub fn check(g: &GgufFile, c: &ModelConfig) -> Result<()> {
    build(c, &|n, w, what| g.check(n, w, what).map(|_| Vec::new())).map(|_| ())
}

type Read<'a> = dyn Fn(&str, &[usize], &str) -> Result<Vec<f32>> + 'a;

fn build(c: &ModelConfig, read: &Read) -> Result<Weights> {
    let d = c.d_model;
    let qd = c.heads * c.d_head;
    let kvd = c.kv_heads * c.d_head;
    let lin = |name: &str, in_dim: usize, out_dim: usize| -> Result<Linear> {
        let w = read(
            name,
            &[in_dim, out_dim],
            &format!("the config ([in, out] = [{in_dim}, {out_dim}])"),
        )?;
        Ok(Linear {
            w,
            b: None,
            out_dim,
            in_dim,
        })
    };
    let norm = |name: &str| -> Result<Norm> {
        Ok(Norm {
            w: read(name, &[d], "llama.embedding_length")?,
            b: None,
        })
    };
    let tok_embed = read(
        "token_embd.weight",
        &[d, c.vocab],
        "llama.embedding_length and the vocabulary size",
    )?;
    let mut layers = Vec::with_capacity(c.layers);
    for l in 0..c.layers {
        let p = format!("blk.{l}.");
        layers.push(LayerWeights {
            attn_norm: norm(&format!("{p}attn_norm.weight"))?,
            wq: lin(&format!("{p}attn_q.weight"), d, qd)?,
            wk: lin(&format!("{p}attn_k.weight"), d, kvd)?,
            wv: lin(&format!("{p}attn_v.weight"), d, kvd)?,
            wo: lin(&format!("{p}attn_output.weight"), qd, d)?,
            mlp_norm: norm(&format!("{p}ffn_norm.weight"))?,
            mlp: Mlp::Gated {
                gate: lin(&format!("{p}ffn_gate.weight"), d, c.d_ff)?,
                up: lin(&format!("{p}ffn_up.weight"), d, c.d_ff)?,
                down: lin(&format!("{p}ffn_down.weight"), c.d_ff, d)?,
            },
        });
    }
    let final_norm = Some(norm("output_norm.weight")?);
    let lm_head = if c.tied_embeddings {
        None
    } else {
        Some(lin("output.weight", d, c.vocab)?)
    };
    Ok(Weights {
        tok_embed,
        pos_embed: None,
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
