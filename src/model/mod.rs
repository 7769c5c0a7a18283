//! Real pretrained Transformers: loading (GGUF, Hugging Face folders), tokenizers, and the
//! f32 forward pass on attnviz's own kernels. No terminal code here.
//!
//! - [`config`]: what a model is (architecture, sizes, norms, positions), format-free;
//! - [`weights`]: its tensors in one canonical layout, whatever file they came from;
//! - [`gemm`]: the dense products y = x w^T + b, threaded;
//!
//! Loaders turn a file into a [`config::ModelConfig`] and [`weights::Weights`]; the forward
//! pass reads only those two, so nothing format-specific leaks past the loaders.

pub mod config;
pub mod gemm;
pub mod weights;

pub use config::{Act, Arch, ModelConfig, NormKind, NormPlace, PosKind, RopeStyle};
pub use weights::{LayerWeights, Linear, Mlp, Norm, Weights};
