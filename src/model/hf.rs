//! Hugging Face model folders: `config.json` plus `model.safetensors` (or shards listed in
//! `model.safetensors.index.json`), memory-mapped and converted to the canonical
//! [`Weights`] (f32; F32, F16 and BF16 tensors).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};

use super::hf_config::{self, HfConfig};
use super::{Arch, LayerWeights, Linear, Mlp, ModelConfig, Norm, Weights};
use crate::error::{Error, Result};

/// The safetensors files of a folder: `model.safetensors`, or the shards named by
/// `model.safetensors.index.json`.
pub fn weight_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    if !index.is_file() {
        return Err(Error::file(
            dir,
            "no model.safetensors or model.safetensors.index.json in this folder",
        ));
    }
    let text = std::fs::read_to_string(&index)
        .map_err(|e| Error::file(&index, format!("cannot read: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::file(&index, format!("{}:{}: {e}", e.line(), e.column())))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| Error::file(&index, "missing object weight_map"))?;
    let mut files: Vec<String> = Vec::new();
    for (name, f) in map {
        let f = f
            .as_str()
            .ok_or_else(|| Error::file(&index, format!("weight_map.{name} is not a file name")))?;
        if f.contains('/') || f.contains("..") {
            return Err(Error::file(
                &index,
                format!("weight_map.{name}: {f:?} is not a file in this folder"),
            ));
        }
        if !files.iter().any(|g| g == f) {
            files.push(f.to_string());
        }
    }
    files.sort();
    Ok(files.into_iter().map(|f| dir.join(f)).collect())
}

fn map_file(path: &Path) -> Result<Mmap> {
    let f = File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))?;
    // SAFETY: read-only map of a file attnviz never writes.
    unsafe { Mmap::map(&f) }.map_err(|e| Error::file(path, format!("cannot memory-map: {e}")))
}

/// Parameter count and total bytes of the weight files, from their headers only.
pub fn inspect_files(files: &[PathBuf]) -> Result<(u64, u64)> {
    let (mut params, mut bytes) = (0u64, 0u64);
    for f in files {
        let map = map_file(f)?;
        bytes += map.len() as u64;
        let (_, meta) = SafeTensors::read_metadata(&map)
            .map_err(|e| Error::file(f, format!("not a safetensors file: {e}")))?;
        for info in meta.tensors().values() {
            if matches!(info.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
                params += info.shape.iter().product::<usize>() as u64;
            }
        }
    }
    Ok((params, bytes))
}

/// The folder's config from `config.json`.
pub fn config(dir: &Path) -> Result<ModelConfig> {
    let path = dir.join("config.json");
    hf_config::config(&path, &HfConfig::read(&path)?)
}

/// Tensors of all shards by name.
struct Source<'a> {
    files: Vec<(&'a Path, SafeTensors<'a>)>,
    index: HashMap<String, usize>,
    /// Check names and shapes only; every tensor comes back empty.
    dry: bool,
}

impl<'a> Source<'a> {
    fn new(maps: &'a [(PathBuf, Mmap)], dry: bool) -> Result<Self> {
        let mut files = Vec::new();
        let mut index = HashMap::new();
        for (i, (p, m)) in maps.iter().enumerate() {
            let st = SafeTensors::deserialize(m)
                .map_err(|e| Error::file(p, format!("not a valid safetensors file: {e}")))?;
            for n in st.names() {
                index.insert(n.to_string(), i);
            }
            files.push((p.as_path(), st));
        }
        Ok(Source { files, index, dry })
    }

    fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    fn where_(&self) -> &Path {
        self.files[0].0
    }

    /// A tensor converted to f32, checked against its expected shape.
    fn get(&self, name: &str, want: &[usize], from: &str) -> Result<Vec<f32>> {
        let (path, view) = self.view(name)?;
        if view.shape() != want {
            return Err(Error::file(
                path,
                format!(
                    "tensor {name} has shape {:?}, expected {want:?} from config.json ({from})",
                    view.shape()
                ),
            ));
        }
        if self.dry {
            return Ok(Vec::new());
        }
        let n = want.iter().product();
        let mut out = vec![0f32; n];
        convert(path, name, view.dtype(), view.data(), 0, 1, &mut out)?;
        Ok(out)
    }

    fn view(&self, name: &str) -> Result<(&'a Path, safetensors::tensor::TensorView<'a>)> {
        let i = *self
            .index
            .get(name)
            .ok_or_else(|| Error::file(self.where_(), format!("missing required tensor {name}")))?;
        let (path, st) = &self.files[i];
        let v = st
            .tensor(name)
            .map_err(|e| Error::file(*path, format!("tensor {name}: {e}")))?;
        Ok((*path, v))
    }

    /// Columns [c0, c0 + out) of a Conv1D weight [in, cols] as a Linear weight [out, in].
    fn conv1d_cols(&self, name: &str, want: [usize; 2], c0: usize, out: usize) -> Result<Vec<f32>> {
        let (path, view) = self.view(name)?;
        if view.shape() != want {
            return Err(Error::file(
                path,
                format!(
                    "tensor {name} has shape {:?}, expected {want:?} from config.json (Conv1D [in, out])",
                    view.shape()
                ),
            ));
        }
        if self.dry {
            return Ok(Vec::new());
        }
        let [rows, cols] = want;
        let mut w = vec![0f32; out * rows];
        // out row o of the result is column c0 + o of the source: stride `cols`.
        for (o, row) in w.chunks_exact_mut(rows).enumerate() {
            convert(path, name, view.dtype(), view.data(), c0 + o, cols, row)?;
        }
        Ok(w)
    }

    /// Elements [start, start + len) of a 1-D tensor of `total` elements.
    fn slice1(&self, name: &str, total: usize, start: usize, len: usize) -> Result<Vec<f32>> {
        let (path, view) = self.view(name)?;
        if view.shape() != [total] {
            return Err(Error::file(
                path,
                format!(
                    "tensor {name} has shape {:?}, expected [{total}] from config.json",
                    view.shape()
                ),
            ));
        }
        if self.dry {
            return Ok(Vec::new());
        }
        let mut out = vec![0f32; len];
        convert(path, name, view.dtype(), view.data(), start, 1, &mut out)?;
        Ok(out)
    }
}

/// out[k] = data[first + k * stride] as f32.
fn convert(
    path: &Path,
    name: &str,
    dtype: Dtype,
    data: &[u8],
    first: usize,
    stride: usize,
    out: &mut [f32],
) -> Result<()> {
    let at = |k: usize| first + k * stride;
    match dtype {
        Dtype::F32 => {
            for (k, o) in out.iter_mut().enumerate() {
                let i = 4 * at(k);
                *o = f32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
            }
        }
        Dtype::F16 => {
            for (k, o) in out.iter_mut().enumerate() {
                let i = 2 * at(k);
                *o = f16::from_le_bytes([data[i], data[i + 1]]).to_f32();
            }
        }
        Dtype::BF16 => {
            for (k, o) in out.iter_mut().enumerate() {
                let i = 2 * at(k);
                *o = bf16::from_le_bytes([data[i], data[i + 1]]).to_f32();
            }
        }
        other => {
            return Err(Error::file(
                path,
                format!(
                    "tensor {name} has dtype {other:?}, which attnviz cannot load (supported: F32, F16, BF16)"
                ),
            ));
        }
    }
    Ok(())
}

/// Load every tensor of the folder into the canonical layout.
pub fn weights(dir: &Path, c: &ModelConfig) -> Result<Weights> {
    build(dir, c, false)
}

/// Check that every tensor is present with the shape the config implies (headers only).
pub fn check(dir: &Path, c: &ModelConfig) -> Result<()> {
    build(dir, c, true).map(|_| ())
}

fn build(dir: &Path, c: &ModelConfig, dry: bool) -> Result<Weights> {
    let mut maps = Vec::new();
    for f in weight_files(dir)? {
        let m = map_file(&f)?;
        maps.push((f, m));
    }
    let src = Source::new(&maps, dry)?;
    match c.arch {
        Arch::Bert => bert(&src, c),
        Arch::Gpt2 => gpt2(&src, c),
        Arch::Llama => llama(&src, c),
    }
}

/// The prefix the names carry (`bert.`, `transformer.`) when they carry it.
fn prefix(src: &Source, probe: &str, p: &str) -> String {
    if src.has(&format!("{p}{probe}")) {
        p.to_string()
    } else {
        String::new()
    }
}

fn linear(src: &Source, p: &str, out_dim: usize, in_dim: usize, bias: bool) -> Result<Linear> {
    let w = src.get(&format!("{p}.weight"), &[out_dim, in_dim], "[out, in]")?;
    let b = if bias {
        Some(src.get(&format!("{p}.bias"), &[out_dim], "[out]")?)
    } else {
        None
    };
    Ok(Linear {
        w,
        b,
        out_dim,
        in_dim,
    })
}

fn norm(src: &Source, p: &str, d: usize, bias: bool, w_name: &str, b_name: &str) -> Result<Norm> {
    Ok(Norm {
        w: src.get(&format!("{p}.{w_name}"), &[d], "hidden size")?,
        b: if bias {
            Some(src.get(&format!("{p}.{b_name}"), &[d], "hidden size")?)
        } else {
            None
        },
    })
}

fn bert(src: &Source, c: &ModelConfig) -> Result<Weights> {
    let p = prefix(src, "embeddings.word_embeddings.weight", "bert.");
    let d = c.d_model;
    let e = format!("{p}embeddings");
    let tok_embed = src.get(
        &format!("{e}.word_embeddings.weight"),
        &[c.vocab, d],
        "vocab_size, hidden_size",
    )?;
    let pos_embed = src.get(
        &format!("{e}.position_embeddings.weight"),
        &[c.context, d],
        "max_position_embeddings, hidden_size",
    )?;
    let (tp, tv) = src.view(&format!("{e}.token_type_embeddings.weight"))?;
    if tv.shape().len() != 2 || tv.shape()[1] != d || tv.shape()[0] == 0 {
        return Err(Error::file(
            tp,
            format!(
                "tensor {e}.token_type_embeddings.weight has shape {:?}, expected [type_vocab_size, {d}]",
                tv.shape()
            ),
        ));
    }
    let mut type_embed = vec![0f32; d];
    convert(
        tp,
        "token_type_embeddings",
        tv.dtype(),
        tv.data(),
        0,
        1,
        &mut type_embed,
    )?;
    // Older checkpoints name LayerNorm parameters gamma/beta.
    let ln = |q: &str| -> Result<Norm> {
        if src.has(&format!("{q}.gamma")) {
            norm(src, q, d, true, "gamma", "beta")
        } else {
            norm(src, q, d, true, "weight", "bias")
        }
    };
    let embed_norm = Some(ln(&format!("{e}.LayerNorm"))?);
    let mut layers = Vec::with_capacity(c.layers);
    for l in 0..c.layers {
        let q = format!("{p}encoder.layer.{l}");
        layers.push(LayerWeights {
            wq: linear(src, &format!("{q}.attention.self.query"), d, d, true)?,
            wk: linear(src, &format!("{q}.attention.self.key"), d, d, true)?,
            wv: linear(src, &format!("{q}.attention.self.value"), d, d, true)?,
            wo: linear(src, &format!("{q}.attention.output.dense"), d, d, true)?,
            attn_norm: ln(&format!("{q}.attention.output.LayerNorm"))?,
            mlp: Mlp::Plain {
                up: linear(src, &format!("{q}.intermediate.dense"), c.d_ff, d, true)?,
                down: linear(src, &format!("{q}.output.dense"), d, c.d_ff, true)?,
            },
            mlp_norm: ln(&format!("{q}.output.LayerNorm"))?,
        });
    }
    Ok(Weights {
        tok_embed,
        pos_embed: Some(pos_embed),
        type_embed: Some(type_embed),
        embed_norm,
        layers,
        final_norm: None,
        lm_head: None,
    })
}

fn gpt2(src: &Source, c: &ModelConfig) -> Result<Weights> {
    let p = prefix(src, "wte.weight", "transformer.");
    let d = c.d_model;
    let tok_embed = src.get(
        &format!("{p}wte.weight"),
        &[c.vocab, d],
        "vocab_size, n_embd",
    )?;
    let pos_embed = src.get(
        &format!("{p}wpe.weight"),
        &[c.context, d],
        "n_positions, n_embd",
    )?;
    // Conv1D: weight [in, out], y = x W + b; transposed to [out, in].
    let conv = |name: &str, in_dim: usize, out_dim: usize| -> Result<Linear> {
        Ok(Linear {
            w: src.conv1d_cols(&format!("{name}.weight"), [in_dim, out_dim], 0, out_dim)?,
            b: Some(src.get(&format!("{name}.bias"), &[out_dim], "[out]")?),
            out_dim,
            in_dim,
        })
    };
    let mut layers = Vec::with_capacity(c.layers);
    for l in 0..c.layers {
        let q = format!("{p}h.{l}");
        let qkv = format!("{q}.attn.c_attn");
        let part = |k: usize| -> Result<Linear> {
            Ok(Linear {
                w: src.conv1d_cols(&format!("{qkv}.weight"), [d, 3 * d], k * d, d)?,
                b: Some(src.slice1(&format!("{qkv}.bias"), 3 * d, k * d, d)?),
                out_dim: d,
                in_dim: d,
            })
        };
        layers.push(LayerWeights {
            attn_norm: norm(src, &format!("{q}.ln_1"), d, true, "weight", "bias")?,
            wq: part(0)?,
            wk: part(1)?,
            wv: part(2)?,
            wo: conv(&format!("{q}.attn.c_proj"), d, d)?,
            mlp_norm: norm(src, &format!("{q}.ln_2"), d, true, "weight", "bias")?,
            mlp: Mlp::Plain {
                up: conv(&format!("{q}.mlp.c_fc"), d, c.d_ff)?,
                down: conv(&format!("{q}.mlp.c_proj"), c.d_ff, d)?,
            },
        });
    }
    Ok(Weights {
        tok_embed,
        pos_embed: Some(pos_embed),
        type_embed: None,
        embed_norm: None,
        layers,
        final_norm: Some(norm(src, &format!("{p}ln_f"), d, true, "weight", "bias")?),
        lm_head: None,
    })
}

fn llama(src: &Source, c: &ModelConfig) -> Result<Weights> {
    let d = c.d_model;
    let qd = c.heads * c.d_head;
    let kvd = c.kv_heads * c.d_head;
    let tok_embed = src.get(
        "model.embed_tokens.weight",
        &[c.vocab, d],
        "vocab_size, hidden_size",
    )?;
    let rms = |name: &str| norm(src, name, d, false, "weight", "bias");
    let mut layers = Vec::with_capacity(c.layers);
    for l in 0..c.layers {
        let q = format!("model.layers.{l}");
        let bias = src.has(&format!("{q}.self_attn.q_proj.bias"));
        layers.push(LayerWeights {
            attn_norm: rms(&format!("{q}.input_layernorm"))?,
            wq: linear(src, &format!("{q}.self_attn.q_proj"), qd, d, bias)?,
            wk: linear(src, &format!("{q}.self_attn.k_proj"), kvd, d, bias)?,
            wv: linear(src, &format!("{q}.self_attn.v_proj"), kvd, d, bias)?,
            wo: linear(src, &format!("{q}.self_attn.o_proj"), d, qd, false)?,
            mlp_norm: rms(&format!("{q}.post_attention_layernorm"))?,
            mlp: Mlp::Gated {
                gate: linear(src, &format!("{q}.mlp.gate_proj"), c.d_ff, d, false)?,
                up: linear(src, &format!("{q}.mlp.up_proj"), c.d_ff, d, false)?,
                down: linear(src, &format!("{q}.mlp.down_proj"), d, c.d_ff, false)?,
            },
        });
    }
    let lm_head = if c.tied_embeddings {
        None
    } else {
        Some(linear(src, "lm_head", c.vocab, d, false)?)
    };
    Ok(Weights {
        tok_embed,
        pos_embed: None,
        type_embed: None,
        embed_norm: None,
        layers,
        final_norm: Some(rms("model.norm")?),
        lm_head,
    })
}
