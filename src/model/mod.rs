//! Real pretrained Transformers: loading (GGUF, Hugging Face folders), tokenizers, and the
//! f32 forward pass on attnviz's own kernels. No terminal code here.
//!
//! - [`config`]: what a model is (architecture, sizes, norms, positions), format-free;
//! - [`weights`]: its tensors in one canonical layout, whatever file they came from;
//! - [`scores`]: what a head does, measured: head scores and attention rollout;
//! - [`gemm`]: the dense products y = x w^T + b, threaded;
//! - [`forward`]: the f32 forward pass (blocks in `block`, norms in `norm`, RoPE in `rope`,
//!   MLPs in `mlp`) with interventions, attention weights and a block's [`trace`];
//! - [`predict`]: per-token loss and top next tokens from logits;
//! - [`cache`]: the KV cache of a decoding session;
//! - [`generate`]: prefill, then token by token over the cache; greedy or seeded sampling;
//!
//! Loaders turn a file into a [`config::ModelConfig`] and [`weights::Weights`]; the forward
//! pass reads only those two, so nothing format-specific leaks past the loaders.

mod block;
pub mod cache;
pub mod config;
pub mod forward;
pub mod gemm;
pub mod generate;
mod mlp;
mod norm;
pub mod predict;
mod rope;
pub mod scores;
pub mod trace;
pub mod weights;

pub use config::{Act, Arch, ModelConfig, NormKind, NormPlace, PosKind, RopeStyle};
pub use forward::{ForwardOptions, ForwardOutput, LogitRows, forward};
pub use predict::{TopToken, token_loss, top_k};
pub use trace::{LayerTrace, Stage};
pub use weights::{LayerWeights, Linear, Mlp, Norm, Weights};
