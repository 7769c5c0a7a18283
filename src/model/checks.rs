//! Checks of a model's stated sizes and numbers, shared by the GGUF and Hugging Face
//! readers, each error naming the file and the key as that format spells it.
//!
//! Sizes are checked before anything is allocated from them (a layer count of 2e9 would
//! otherwise abort allocating a terabyte). Numbers are checked at load because a bad one
//! does not fail later: an infinite norm epsilon gives uniform predictions and a RoPE base
//! of 0 gives NaN, both with exit 0.

use std::path::Path;

use super::ModelConfig;
use crate::attn::limits::model as lim;
use crate::error::{Error, Result};

/// The kernel's checks of its inputs speak as `compute` does (of Q, K, V and its
/// flags); inside a model's forward pass the same failure means the numbers a layer
/// computed went wrong, which is what the message then says.
pub(crate) fn model_attention(e: crate::Error) -> crate::Error {
    match e {
        crate::Error::Usage(msg) => {
            let fact = msg.split("; ").next().unwrap_or(&msg);
            crate::Error::Usage(format!(
                "a layer's attention cannot run: {fact}; Q, K and V are the queries, keys and values the layer computed from the model's weights and the input, so the model file or an intervention (--rope-base, --mask) gave non-finite or out-of-range numbers"
            ))
        }
        other => other,
    }
}

/// What a size is, for its ceiling.
#[derive(Debug, Clone, Copy)]
pub enum Size {
    Layers,
    Heads,
    Width,
    Vocab,
    Context,
}

impl Size {
    fn max(self) -> usize {
        match self {
            Size::Layers => lim::MAX_LAYERS,
            Size::Heads => lim::MAX_HEADS,
            Size::Width => lim::MAX_WIDTH,
            Size::Vocab => lim::MAX_VOCAB,
            Size::Context => lim::MAX_CONTEXT,
        }
    }
}

/// Refuse any stated (key, value, kind) over its ceiling.
pub fn sizes(path: &Path, stated: &[(&str, Option<u64>, Size)]) -> Result<()> {
    for &(key, v, kind) in stated {
        if let Some(v) = v
            && v > kind.max() as u64
        {
            return Err(Error::file(
                path,
                format!(
                    "{key} is {v}, past the {} that attnviz accepts for it (larger than any real model: a damaged file?)",
                    kind.max()
                ),
            ));
        }
    }
    Ok(())
}

/// The keys that hold a config's numbers, as the file spells them.
pub struct NumberKeys<'a> {
    pub norm_eps: &'a str,
    pub rope_base: &'a str,
    pub local_rope_base: &'a str,
}

/// Refuse a norm epsilon, RoPE base or score scale that is not a finite positive number.
pub fn numbers(path: &Path, c: &ModelConfig, keys: &NumberKeys) -> Result<()> {
    let bad = |key: &str, v: f64, want: &str| {
        Err(Error::file(
            path,
            format!("{key} is {v}; it must be {want}"),
        ))
    };
    if !(c.norm_eps.is_finite() && c.norm_eps > 0.0 && c.norm_eps < 1.0) {
        return bad(
            keys.norm_eps,
            c.norm_eps,
            "a small positive number (norm epsilons are about 1e-5)",
        );
    }
    let positive = "a finite number above 0 (RoPE bases are about 1e4 to 1e6)";
    if let Some(base) = c.rope_base()
        && !(base.is_finite() && base > 0.0)
    {
        return bad(keys.rope_base, base, positive);
    }
    if let Some(base) = c.details.local_rope_base
        && !(base.is_finite() && base > 0.0)
    {
        return bad(keys.local_rope_base, base, positive);
    }
    if let Some(s) = c.details.attn_scale
        && !(s.is_finite() && s > 0.0)
    {
        return bad("the attention scale", s, "a finite number above 0");
    }
    Ok(())
}

/// Refuse a tensor read as f32 (norms, biases, embeddings) that holds NaN or infinity,
/// naming it and its layer: one such value makes every later number NaN.
pub fn finite(path: &Path, name: &str, values: &[f32]) -> Result<()> {
    let Some(i) = values.iter().position(|v| !v.is_finite()) else {
        return Ok(());
    };
    Err(Error::file(
        path,
        format!(
            "tensor {name}{} holds {} at element {i}; every weight must be a finite number (a damaged file?)",
            layer_of(name),
            values[i]
        ),
    ))
}

/// " (layer L)" for a tensor of a block: the first all-digit part of its name
/// (blk.3.attn_norm, model.layers.3.mlp); "" for any other tensor.
pub fn layer_of(name: &str) -> String {
    name.split('.')
        .find(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(String::new(), |l| format!(" (layer {l})"))
}
