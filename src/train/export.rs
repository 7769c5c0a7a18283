//! A trained model as a Hugging Face GPT-2 folder: `config.json` (`model_type` gpt2),
//! `model.safetensors` with GPT-2's tensor names (no `transformer.` prefix, as the
//! original checkpoints) and Conv1D's [in, out] layout, and `tokenizer.json`: a
//! word-level vocabulary "0" .. "V-1" for the induction task (tokens are typed as
//! numbers separated by spaces), GPT-2's byte-level alphabet with no merges for text
//! (token id = byte value). `attnviz --model DIR` and transformers both open it.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

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

/// The files a written folder holds; a folder with only these is an earlier attnviz
/// model, which `--out` may replace.
const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Check before training that `dir` can be written: its parent exists and takes a new
/// folder, and `dir` is new, empty, or an earlier attnviz model (nothing else is ever
/// replaced). A run is then never lost to an output found bad only at its end.
pub fn check_out(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::file(
                dir,
                "--out exists and is not a folder; --out names a folder to write the model into",
            ));
        }
        Ok(_) => {
            let entries = std::fs::read_dir(dir)
                .map_err(|e| Error::file(dir, format!("--out cannot be read: {e}")))?;
            for e in entries {
                let name = e
                    .map_err(|e| Error::file(dir, format!("--out cannot be read: {e}")))?
                    .file_name();
                if !FILES.iter().any(|f| name == *f) {
                    return Err(Error::file(
                        dir,
                        format!(
                            "--out is a folder that holds {name:?}, which attnviz did not write; give a new or empty folder (or one an earlier `attnviz train --out` wrote)"
                        ),
                    ));
                }
            }
        }
        Err(_) => {}
    }
    // Proves the parent takes a new folder (exists, writable) the way the end will write.
    let staging = Staging::create(dir)?;
    drop(staging);
    Ok(())
}

/// A folder being written beside its final name; removed unless [`Staging::commit`] runs.
struct Staging {
    target: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

impl Staging {
    fn create(target: &Path) -> Result<Staging> {
        let name = target
            .file_name()
            .ok_or_else(|| Error::file(target, "--out is not a folder name"))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".attnviz-{}.tmp", std::process::id()));
        let tmp = target.with_file_name(tmp_name);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir(&tmp)
            .map_err(|e| Error::file(target, format!("--out cannot be written: {e}")))?;
        Ok(Staging {
            target: target.to_path_buf(),
            tmp,
            committed: false,
        })
    }

    /// Put the written folder in place: a new name is one rename; an earlier model is
    /// moved aside first and removed once the new one is in place.
    fn commit(mut self) -> Result<()> {
        let fail = |e: std::io::Error| Error::file(&self.target, format!("cannot write: {e}"));
        if self.target.exists() {
            let mut old = self.tmp.clone().into_os_string();
            old.push(".old");
            let old = PathBuf::from(old);
            std::fs::rename(&self.target, &old).map_err(fail)?;
            if let Err(e) = std::fs::rename(&self.tmp, &self.target) {
                let _ = std::fs::rename(&old, &self.target);
                return Err(fail(e));
            }
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&self.tmp, &self.target).map_err(fail)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Writes the folder `dir` whole or not at all: into a folder beside it, then renamed
/// (an earlier attnviz model there is replaced; see [`check_out`]).
pub fn write_hf_gpt2(dir: &Path, layout: &Layout, params: &[f32], vocab: Vocab) -> Result<()> {
    check_out(dir)?;
    let staging = Staging::create(dir)?;
    write_files(&staging.tmp, layout, params, vocab)?;
    staging.commit()
}

fn write_files(dir: &Path, layout: &Layout, params: &[f32], vocab: Vocab) -> Result<()> {
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
    let bytes = safetensors::tensor::serialize(views, Some(meta))
        .map_err(|e| Error::Internal(format!("model.safetensors: {e}")))?;
    write(dir, "model.safetensors", &bytes)
}

/// One file of the staged folder, flushed to the disk (a full disk fails here, before
/// the rename).
fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let p = dir.join(name);
    let fail = |e: std::io::Error| Error::file(&p, format!("cannot write: {e}"));
    let mut f = std::fs::File::create(&p).map_err(fail)?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(fail)
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
