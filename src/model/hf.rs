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
use super::weights::ExtraNorms;
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
    let text = crate::input::read_text_limited(
        &index,
        crate::input::MAX_MODEL_JSON_BYTES,
        "a model's JSON file",
    )?;
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
    if files.is_empty() {
        return Err(Error::file(
            &index,
            "weight_map names no tensors; it should map each tensor name to its shard file",
        ));
    }
    files.sort();
    Ok(files.into_iter().map(|f| dir.join(f)).collect())
}

fn map_file(path: &Path) -> Result<Mmap> {
    crate::input::check_regular(path)?;
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

    /// Rows `blocks` ((first, count) each, in order) of a tensor of shape `want`, one
    /// row being want[1..] (one element of a 1-D tensor): the parts of a fused tensor.
    fn gather(&self, name: &str, want: &[usize], blocks: &[(usize, usize)]) -> Result<Vec<f32>> {
        let (path, view) = self.view(name)?;
        if view.shape() != want {
            return Err(Error::file(
                path,
                format!(
                    "tensor {name} has shape {:?}, expected {want:?} from config.json (a fused tensor)",
                    view.shape()
                ),
            ));
        }
        if self.dry {
            return Ok(Vec::new());
        }
        let width: usize = want[1..].iter().product();
        let total: usize = blocks.iter().map(|b| b.1).sum();
        let mut out = vec![0f32; total * width];
        let mut at = 0;
        for &(first, count) in blocks {
            let dst = &mut out[at * width..(at + count) * width];
            convert(path, name, view.dtype(), view.data(), first * width, 1, dst)?;
            at += count;
        }
        Ok(out)
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
    super::checks::finite(path, name, out)
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
        Arch::GptNeox => gpt_neox(&src, c),
        Arch::Llama
        | Arch::Mistral
        | Arch::Qwen2
        | Arch::Qwen3
        | Arch::Gemma2
        | Arch::Gemma3
        | Arch::Phi3 => llama_family(&src, c),
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
        w: w.into(),
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
            extra: Default::default(),
            mlp_norm: ln(&format!("{q}.output.LayerNorm"))?,
        });
    }
    Ok(Weights {
        tok_embed: tok_embed.into(),
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
            w: src
                .conv1d_cols(&format!("{name}.weight"), [in_dim, out_dim], 0, out_dim)?
                .into(),
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
                w: src
                    .conv1d_cols(&format!("{qkv}.weight"), [d, 3 * d], k * d, d)?
                    .into(),
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
            extra: Default::default(),
        });
    }
    Ok(Weights {
        tok_embed: tok_embed.into(),
        pos_embed: Some(pos_embed),
        type_embed: None,
        embed_norm: None,
        layers,
        final_norm: Some(norm(src, &format!("{p}ln_f"), d, true, "weight", "bias")?),
        lm_head: None,
    })
}

/// Llama and the families that only add to it: Mistral, Qwen 2 and 3, Gemma 2 and 3
/// (whose RMSNorms scale by 1 + w: the loader adds the 1), Phi-3 (fused QKV and gate/up).
fn llama_family(src: &Source, c: &ModelConfig) -> Result<Weights> {
    let d = c.d_model;
    let qd = c.heads * c.d_head;
    let kvd = c.kv_heads * c.d_head;
    let gemma = matches!(c.arch, Arch::Gemma2 | Arch::Gemma3);
    let p = ["model.", "model.language_model.", "language_model.model."]
        .into_iter()
        .find(|p| src.has(&format!("{p}embed_tokens.weight")))
        .unwrap_or("model.");
    let tok_embed = src.get(
        &format!("{p}embed_tokens.weight"),
        &[c.vocab, d],
        "vocab_size, hidden_size",
    )?;
    let rms_of = |name: &str, width: usize| -> Result<Norm> {
        let mut n = norm(src, name, width, false, "weight", "bias")?;
        if gemma {
            n.w.iter_mut().for_each(|w| *w += 1.0);
        }
        Ok(n)
    };
    let rms = |name: &str| rms_of(name, d);
    let fused = |name: &str, rows: usize, parts: &[(usize, usize)]| -> Result<Vec<Linear>> {
        parts
            .iter()
            .map(|&(first, count)| {
                Ok(Linear {
                    w: src
                        .gather(&format!("{name}.weight"), &[rows, d], &[(first, count)])?
                        .into(),
                    b: None,
                    out_dim: count,
                    in_dim: d,
                })
            })
            .collect()
    };
    let mut layers = Vec::with_capacity(c.layers);
    for l in 0..c.layers {
        let q = format!("{p}layers.{l}");
        let a = format!("{q}.self_attn");
        let (wq, wk, wv) = if c.arch == Arch::Phi3 {
            let mut v = fused(
                &format!("{a}.qkv_proj"),
                qd + 2 * kvd,
                &[(0, qd), (qd, kvd), (qd + kvd, kvd)],
            )?;
            let wv = v.pop();
            let wk = v.pop();
            let wq = v.pop();
            match (wq, wk, wv) {
                (Some(q), Some(k), Some(v)) => (q, k, v),
                _ => return Err(Error::Internal("fused qkv split".into())),
            }
        } else {
            let bias = src.has(&format!("{a}.q_proj.bias"));
            (
                linear(src, &format!("{a}.q_proj"), qd, d, bias)?,
                linear(src, &format!("{a}.k_proj"), kvd, d, bias)?,
                linear(src, &format!("{a}.v_proj"), kvd, d, bias)?,
            )
        };
        let o_bias = src.has(&format!("{a}.o_proj.bias"));
        let m = format!("{q}.mlp");
        let mlp = if c.arch == Arch::Phi3 {
            let mut v = fused(
                &format!("{m}.gate_up_proj"),
                2 * c.d_ff,
                &[(0, c.d_ff), (c.d_ff, c.d_ff)],
            )?;
            let (up, gate) = (v.pop(), v.pop());
            match (gate, up) {
                (Some(gate), Some(up)) => Mlp::Gated {
                    gate,
                    up,
                    down: linear(src, &format!("{m}.down_proj"), d, c.d_ff, false)?,
                },
                _ => return Err(Error::Internal("fused gate/up split".into())),
            }
        } else {
            Mlp::Gated {
                gate: linear(src, &format!("{m}.gate_proj"), c.d_ff, d, false)?,
                up: linear(src, &format!("{m}.up_proj"), c.d_ff, d, false)?,
                down: linear(src, &format!("{m}.down_proj"), d, c.d_ff, false)?,
            }
        };
        let head_norms = matches!(c.arch, Arch::Qwen3 | Arch::Gemma3);
        let head_norm = |name: &str| -> Result<Option<Norm>> {
            if head_norms {
                rms_of(&format!("{a}.{name}"), c.d_head).map(Some)
            } else {
                Ok(None)
            }
        };
        let (mlp_norm, extra) = if gemma {
            (
                rms(&format!("{q}.pre_feedforward_layernorm"))?,
                ExtraNorms {
                    q_norm: head_norm("q_norm")?,
                    k_norm: head_norm("k_norm")?,
                    post_attn: Some(rms(&format!("{q}.post_attention_layernorm"))?),
                    post_mlp: Some(rms(&format!("{q}.post_feedforward_layernorm"))?),
                },
            )
        } else {
            (
                rms(&format!("{q}.post_attention_layernorm"))?,
                ExtraNorms {
                    q_norm: head_norm("q_norm")?,
                    k_norm: head_norm("k_norm")?,
                    post_attn: None,
                    post_mlp: None,
                },
            )
        };
        layers.push(LayerWeights {
            attn_norm: rms(&format!("{q}.input_layernorm"))?,
            wq,
            wk,
            wv,
            wo: linear(src, &format!("{a}.o_proj"), d, qd, o_bias)?,
            mlp_norm,
            mlp,
            extra,
        });
    }
    let lm_head = if c.tied_embeddings {
        None
    } else {
        Some(linear(src, "lm_head", c.vocab, d, false)?)
    };
    Ok(Weights {
        tok_embed: tok_embed.into(),
        pos_embed: None,
        type_embed: None,
        embed_norm: None,
        layers,
        final_norm: Some(rms(&format!("{p}norm"))?),
        lm_head,
    })
}

/// GPT-NeoX / Pythia: LayerNorms with biases, one fused QKV whose rows run per head
/// (q, k, v of head 0, then of head 1, ...), an untied `embed_out`.
fn gpt_neox(src: &Source, c: &ModelConfig) -> Result<Weights> {
    let (d, dh, h) = (c.d_model, c.d_head, c.heads);
    let p = prefix(src, "embed_in.weight", "gpt_neox.");
    let tok_embed = src.get(
        &format!("{p}embed_in.weight"),
        &[c.vocab, d],
        "vocab_size, hidden_size",
    )?;
    let ln = |name: &str| norm(src, name, d, true, "weight", "bias");
    let mut layers = Vec::with_capacity(c.layers);
    for l in 0..c.layers {
        let q = format!("{p}layers.{l}");
        let qkv = format!("{q}.attention.query_key_value");
        let part = |k: usize| -> Result<Linear> {
            let blocks: Vec<(usize, usize)> =
                (0..h).map(|head| ((3 * head + k) * dh, dh)).collect();
            Ok(Linear {
                w: src
                    .gather(&format!("{qkv}.weight"), &[3 * h * dh, d], &blocks)?
                    .into(),
                b: Some(src.gather(&format!("{qkv}.bias"), &[3 * h * dh], &blocks)?),
                out_dim: h * dh,
                in_dim: d,
            })
        };
        layers.push(LayerWeights {
            attn_norm: ln(&format!("{q}.input_layernorm"))?,
            wq: part(0)?,
            wk: part(1)?,
            wv: part(2)?,
            wo: linear(src, &format!("{q}.attention.dense"), d, h * dh, true)?,
            mlp_norm: ln(&format!("{q}.post_attention_layernorm"))?,
            mlp: Mlp::Plain {
                up: linear(src, &format!("{q}.mlp.dense_h_to_4h"), c.d_ff, d, true)?,
                down: linear(src, &format!("{q}.mlp.dense_4h_to_h"), d, c.d_ff, true)?,
            },
            extra: ExtraNorms::default(),
        });
    }
    let lm_head = if c.tied_embeddings {
        None
    } else {
        Some(linear(src, "embed_out", c.vocab, d, false)?)
    };
    Ok(Weights {
        tok_embed: tok_embed.into(),
        pos_embed: None,
        type_embed: None,
        embed_norm: None,
        layers,
        final_norm: Some(ln(&format!("{p}final_layer_norm"))?),
        lm_head,
    })
}
