//! Real pretrained Transformers: loading (GGUF, Hugging Face folders), tokenizers, and the
//! f32 forward pass on attnviz's own kernels. No terminal code here.
//!
//! - [`config`]: what a model is (architecture, sizes, norms, positions), format-free;
//! - [`weights`]: its tensors in one canonical layout, whatever file they came from;
//! - [`gguf`], [`quant`]: llama.cpp's GGUF files and their dequantization; [`gguf_llama`]
//!   maps a GGUF `llama` model onto the canonical types;
//! - [`hf`], [`hf_config`]: Hugging Face folders (config.json, safetensors);
//! - [`tokenizer`]: the model's own tokenizer (tokenizer.json or GGUF metadata);
//! - [`load`], [`find`]: a MODEL argument -> a loaded model; where models are found;
//!
//! Loaders turn a file into a [`config::ModelConfig`] and [`weights::Weights`]; the forward
//! pass reads only those two, so nothing format-specific leaks past the loaders.

pub mod config;
pub mod find;
pub mod gguf;
pub mod gguf_llama;
pub mod hf;
pub mod hf_config;
pub mod load;
pub mod quant;
pub mod tokenizer;
mod tokenizer_gguf;
pub mod weights;

pub use config::{Act, Arch, ModelConfig, NormKind, NormPlace, PosKind, RopeStyle};
pub use load::{Format, LoadedModel, ModelInfo, inspect, load};
pub use tokenizer::ModelTokenizer;
pub use weights::{LayerWeights, Linear, Mlp, Norm, Weights};
