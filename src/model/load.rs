//! MODEL argument -> a loaded model (config, f32 weights, tokenizer), or a cheap
//! header-only [`ModelInfo`] for listings.

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use super::find::Format;
use super::find::{self, Found};
use super::gguf::GgufFile;
use super::tokenizer::ModelTokenizer;
use super::{Linear, Mlp, ModelConfig, Norm, Weights, gguf_llama, hf, tokenizer_gguf};
use crate::error::{Error, Result};

/// A model ready to run.
#[derive(Debug)]
pub struct LoadedModel {
    pub name: String,
    pub path: PathBuf,
    pub format: Format,
    pub config: ModelConfig,
    pub weights: Weights,
    pub tokenizer: ModelTokenizer,
    /// Bytes of the model's weight file(s) on disk.
    pub file_bytes: u64,
}

impl LoadedModel {
    /// Parameters loaded (every f32 of the weights; a tied LM head counted once).
    pub fn params(&self) -> u64 {
        weight_params(&self.weights)
    }
}

fn lin(l: &Linear) -> u64 {
    (l.w.len() + l.b.as_ref().map_or(0, Vec::len)) as u64
}

fn norm(n: &Norm) -> u64 {
    (n.w.len() + n.b.as_ref().map_or(0, Vec::len)) as u64
}

/// Every f32 of a model's weights.
pub fn weight_params(w: &Weights) -> u64 {
    let opt = |v: &Option<Vec<f32>>| v.as_ref().map_or(0, |v| v.len() as u64);
    let mut n = w.tok_embed.len() as u64 + opt(&w.pos_embed) + opt(&w.type_embed);
    n += w.embed_norm.as_ref().map_or(0, norm) + w.final_norm.as_ref().map_or(0, norm);
    n += w.lm_head.as_ref().map_or(0, lin);
    for l in &w.layers {
        n += norm(&l.attn_norm) + norm(&l.mlp_norm);
        n += lin(&l.wq) + lin(&l.wk) + lin(&l.wv) + lin(&l.wo);
        n += match &l.mlp {
            Mlp::Gated { gate, up, down } => lin(gate) + lin(up) + lin(down),
            Mlp::Plain { up, down } => lin(up) + lin(down),
        };
    }
    n
}

/// What `models` and `model info` print, from headers and config only.
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub name: String,
    pub path: PathBuf,
    pub format: Format,
    pub arch: &'static str,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub d_model: usize,
    pub d_head: usize,
    pub vocab: usize,
    pub context: usize,
    pub rope_base: Option<f64>,
    /// Parameters stored in the file(s) (tensor element counts).
    pub params: u64,
    pub file_bytes: u64,
    #[serde(skip)]
    pub config: ModelConfig,
}

/// Load a model: a .gguf path, a Hugging Face folder, or a name from discovery.
pub fn load(model: &str) -> Result<LoadedModel> {
    load_found(find::resolve(model)?)
}

/// Where a GGUF model's quantized matrices are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// The file's memory map: only the pages a run touches come in (a forward over a
    /// short text, the app).
    Mapped,
    /// A copy of the tensor data on huge pages where the kernel offers them
    /// ([`super::resident`]): every weight is read at load, then each decode step streams
    /// them faster (`generate`).
    HugePages,
}

/// [`load`] with the matrices where `residency` says.
pub fn load_with(model: &str, residency: Residency) -> Result<LoadedModel> {
    load_found_with(find::resolve(model)?, residency)
}

/// Building a SentencePiece tokenizer from GGUF metadata takes scratch (Gemma's 262,144
/// pieces give millions of candidate merges, about 150 MB) that is freed at once; the
/// process keeps freed memory for the kernels' buffers (main.rs), so hand this back to
/// the system explicitly before the weights' pages come in.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Load a model found on disk, its matrices in the file's map.
pub fn load_found(f: Found) -> Result<LoadedModel> {
    load_found_with(f, Residency::Mapped)
}

/// [`load_found`] with the matrices where `residency` says (Hugging Face folders are
/// converted to f32 at load either way).
pub fn load_found_with(f: Found, residency: Residency) -> Result<LoadedModel> {
    match f.format {
        Format::Gguf => {
            let mut g = GgufFile::open(&f.path)?;
            let config = gguf_llama::config(&g)?;
            let tokenizer = tokenizer_gguf::build(&g)?;
            release_freed_memory();
            check_vocab(&f.path, &config, &tokenizer)?;
            if residency == Residency::HugePages {
                g.make_resident()?;
            }
            let weights = gguf_llama::weights(&g, &config)?;
            let file_bytes = g.file_bytes;
            // The header's parsed metadata (every token's text and score) is no longer needed.
            drop(g);
            release_freed_memory();
            Ok(LoadedModel {
                name: f.name,
                path: f.path,
                format: f.format,
                config,
                weights,
                tokenizer,
                file_bytes,
            })
        }
        Format::HfFolder => {
            let config = hf::config(&f.path)?;
            let tokenizer = ModelTokenizer::from_hf_dir(&f.path)?;
            check_vocab(&f.path, &config, &tokenizer)?;
            let files = hf::weight_files(&f.path)?;
            let file_bytes = files
                .iter()
                .map(|p| p.metadata().map(|m| m.len()).unwrap_or(0))
                .sum();
            let weights = hf::weights(&f.path, &config)?;
            Ok(LoadedModel {
                name: f.name,
                path: f.path,
                format: f.format,
                config,
                weights,
                tokenizer,
                file_bytes,
            })
        }
    }
}

/// Called when a run of `m` produced NaN or infinite numbers: the error naming the
/// tensor of its file that holds one, if any does. (Hugging Face weights are converted to
/// f32 and checked at load; GGUF matrices stay in their type and are checked only here.)
pub fn non_finite_culprit(m: &LoadedModel) -> Option<Error> {
    if m.format != Format::Gguf {
        return None;
    }
    GgufFile::open(&m.path).and_then(|g| g.check_finite()).err()
}

/// [`non_finite_culprit`], or an error saying that `what` came out non-finite from finite
/// weights (either way the numbers are wrong and are not printed).
pub fn non_finite_error(m: &LoadedModel, what: &str) -> Error {
    non_finite_culprit(m).unwrap_or_else(|| {
        Error::usage(format!(
            "{what} came out NaN or infinite although every weight of {} is finite; the input or an intervention (--rope-base, --mask) drove the numbers out of range",
            m.name
        ))
    })
}

fn check_vocab(path: &Path, c: &ModelConfig, t: &ModelTokenizer) -> Result<()> {
    let n = t.vocab_size();
    if n > c.vocab {
        return Err(Error::file(
            path,
            format!(
                "the tokenizer has {n} tokens but the model's embedding has only {} rows",
                c.vocab
            ),
        ));
    }
    Ok(())
}

/// Header and config only: every tensor's presence and shape is checked, none is read.
pub fn inspect(model: &str) -> Result<ModelInfo> {
    inspect_found(&find::resolve(model)?)
}

/// [`inspect`] for a model found on disk.
pub fn inspect_found(f: &Found) -> Result<ModelInfo> {
    let (config, params, file_bytes) = match f.format {
        Format::Gguf => {
            let g = GgufFile::open(&f.path)?;
            let c = gguf_llama::config(&g)?;
            gguf_llama::check(&g, &c)?;
            (c, gguf_llama::params(&g), g.file_bytes)
        }
        Format::HfFolder => {
            let c = hf::config(&f.path)?;
            hf::check(&f.path, &c)?;
            let (p, b) = hf::inspect_files(&hf::weight_files(&f.path)?)?;
            (c, p, b)
        }
    };
    Ok(ModelInfo {
        name: f.name.clone(),
        path: f.path.clone(),
        format: f.format,
        arch: config.arch.name(),
        layers: config.layers,
        heads: config.heads,
        kv_heads: config.kv_heads,
        d_model: config.d_model,
        d_head: config.d_head,
        vocab: config.vocab,
        context: config.context,
        rope_base: config.rope_base(),
        params,
        file_bytes,
        config,
    })
}

/// The tokenizer alone (for `model info`), without reading any tensor.
pub fn tokenizer(f: &Found) -> Result<ModelTokenizer> {
    match f.format {
        Format::Gguf => tokenizer_gguf::build(&GgufFile::open(&f.path)?),
        Format::HfFolder => ModelTokenizer::from_hf_dir(&f.path),
    }
}
