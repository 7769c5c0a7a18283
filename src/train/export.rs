//! A trained model as a Hugging Face GPT-2 folder: `config.json` (`model_type` gpt2),
//! `model.safetensors` with GPT-2's tensor names (no `transformer.` prefix, as the
//! original checkpoints) and Conv1D's [in, out] layout, and `tokenizer.json`: a
//! word-level vocabulary "0" .. "V-1" for the induction task (tokens are typed as
//! numbers separated by spaces), GPT-2's byte-level alphabet with no merges for text
//! (token id = byte value). `attnviz --model DIR` and transformers both open it.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use serde_json::json;

use crate::error::{Error, Result};

use super::ops::{LN_EPS, transpose};
use super::params::Layout;

/// Which tokenizer the folder gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vocab {
    /// Word-level: token i is the word `i`.
    Numbers,
    /// Byte-level: token i is byte i.
    Bytes,
}

/// Writes the folder `dir` (created if missing; files of the same names replaced).
pub fn write_hf_gpt2(dir: &Path, layout: &Layout, params: &[f32], vocab: Vocab) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::file(dir, format!("cannot create the folder: {e}")))?;
    let s = layout.shape;
    let config = json!({
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": s.vocab,
        "n_positions": s.context,
        "n_ctx": s.context,
        "n_embd": s.d_model,
        "n_layer": s.layers,
        "n_head": s.heads,
        "n_inner": s.d_ff(),
        "activation_function": "gelu_new",
        "layer_norm_epsilon": LN_EPS,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "tie_word_embeddings": true,
        // No BOS/EOS: the vocabulary is the task's tokens only (GPT-2's default 50256 is
        // outside it).
        "bos_token_id": null,
        "eos_token_id": null,
        "torch_dtype": "float32",
    });
    write(
        dir,
        "config.json",
        serde_json::to_string_pretty(&config)
            .unwrap_or_default()
            .as_bytes(),
    )?;
    let tok = match vocab {
        Vocab::Numbers => numbers_tokenizer(s.vocab),
        Vocab::Bytes => bytes_tokenizer(),
    };
    write(
        dir,
        "tokenizer.json",
        serde_json::to_string_pretty(&tok)
            .unwrap_or_default()
            .as_bytes(),
    )?;
    // Each tensor's little-endian bytes, Conv1D weights transposed to [in, out].
    let mut blobs: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for t in &layout.tensors {
        let src = &params[t.range.clone()];
        let (shape, vals) = if t.conv1d {
            let (out, inp) = (t.shape[0], t.shape[1]);
            let mut tr = vec![0.0f32; src.len()];
            transpose(src, out, inp, &mut tr);
            (vec![inp, out], tr)
        } else {
            (t.shape.clone(), src.to_vec())
        };
        let bytes = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        blobs.push((t.name.clone(), shape, bytes));
    }
    let views = blobs
        .iter()
        .map(|(n, sh, b)| {
            TensorView::new(Dtype::F32, sh.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| Error::Internal(format!("tensor {n}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    let path = dir.join("model.safetensors");
    safetensors::tensor::serialize_to_file(views, Some(meta), &path)
        .map_err(|e| Error::file(&path, format!("cannot write: {e}")))
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, bytes).map_err(|e| Error::file(&p, format!("cannot write: {e}")))
}

fn numbers_tokenizer(vocab: usize) -> serde_json::Value {
    let v: serde_json::Map<String, serde_json::Value> =
        (0..vocab).map(|i| (i.to_string(), json!(i))).collect();
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": v, "unk_token": "<unk>"}
    })
}

/// GPT-2's byte -> printable character table (`bytes_to_unicode` in its encoder.py):
/// printable Latin-1 bytes stand for themselves, the others for 256 + n in order.
pub fn byte_chars() -> Vec<char> {
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut n = 0;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap_or('?')
            } else {
                n += 1;
                char::from_u32(255 + n).unwrap_or('?')
            }
        })
        .collect()
}

fn bytes_tokenizer() -> serde_json::Value {
    let v: serde_json::Map<String, serde_json::Value> = byte_chars()
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c.to_string(), json!(i)))
        .collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false});
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": byte_level,
        "post_processor": null,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": v, "merges": []}
    })
}
