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
//! - [`maps`]: every layer's attention weights kept compactly for the app;
//! - [`matrix`]: a weight matrix, f32 or kept in its GGUF block type;
//! - [`gemm`]: the products y = x w^T + b, threaded (f32: many rows in `dense`, one in
//!   `gemv`; quantized: `qmatmul` on `qdot`'s block dot products);
//! - [`forward`]: the f32 forward pass (blocks in `block`, norms in `norm`, RoPE in `rope`,
//!   MLPs in `mlp`) with interventions, attention weights and a block's [`trace`];
//! - [`predict`]: per-token loss and top next tokens from logits;
//! - [`positions`]: the model's own position encoding (RoPE frequencies, learned rows) for the app;
//! - [`cache`]: the KV cache of a decoding session;
//! - [`generate`]: prefill, then token by token over the cache; greedy or seeded sampling;
//! - [`decode_steps`]: greedy decoding kept step by step for the app's decode view;
//! - [`probe`]: the repeated random sequence that shows induction heads;
//! - [`scores`]: what a head does, measured: head scores and attention rollout;
//! - [`session`]: one text through one model, kept for the app.
//!
//! Loaders turn a file into a [`config::ModelConfig`] and [`weights::Weights`]; the forward
//! pass reads only those two, so nothing format-specific leaks past the loaders.

#[cfg(target_arch = "x86_64")]
mod amx;
pub mod attribution;
mod block;
mod block_batch;
#[cfg(target_arch = "x86_64")]
mod i8panel;
#[cfg(target_arch = "x86_64")]
mod i8vec;
pub use block::{Hook, Site};
pub mod acts;
pub mod cache;
mod cache_attention;
pub mod chat;
mod checks;
pub mod composition;
pub mod config;
pub mod contrib;
pub mod decode_steps;
mod dense;
pub mod find;
pub mod forward;
pub mod gemm;
mod gemv;
pub mod generate;
pub mod gguf;
mod gguf_header;
mod gguf_layout;
pub mod gguf_llama;
pub mod hf;
pub mod hf_config;
pub mod lens;
pub mod load;
pub mod maps;
pub mod matrix;
mod mlp;
mod norm;
pub mod patching;
pub mod positions;
pub mod predict;
pub mod probe;
pub mod qdot;
pub mod qmatmul;
pub mod quant;
mod quant_scales;
pub mod resident;
mod rope;
mod rows;
pub mod scores;
pub mod session;
mod softcap;
pub mod tokenizer;
mod tokenizer_gguf;
pub mod trace;
pub mod weights;

pub use config::{Act, Arch, Details, ModelConfig, NormKind, NormPlace, PosKind, RopeStyle};
pub use forward::{
    ForwardOptions, ForwardOutput, LogitRows, PassHook, forward, forward_from, forward_hooked,
    forward_with,
};
pub use load::{Format, LoadedModel, ModelInfo, inspect, load};
pub use matrix::Matrix;
pub use predict::{TopToken, token_loss, top_k};
pub use tokenizer::ModelTokenizer;
pub use trace::{LayerTrace, Stage};
pub use weights::{LayerWeights, Linear, Mlp, Norm, Weights};
