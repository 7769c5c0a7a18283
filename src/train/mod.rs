//! Training a small GPT-2-style model from scratch on the CPU (DESIGN.md, "Training a
//! small model"), every gradient computed here. No terminal code.
//!
//! - [`params`]: the model's shape and its parameters, one flat vector in named ranges;
//! - [`ops`]: LayerNorm, GELU, softmax cross-entropy, embeddings and their gradients;
//! - [`linear`]: a linear layer's forward and backward on the model forward's fast GEMM;
//! - [`model`]: the forward over a batch (attention by the flash kernel with its
//!   log-sum-exp) and the backward (attention by the flash backward);
//! - [`optim`]: AdamW, gradient clipping, the learning-rate schedule;
//! - [`data`]: the induction task and byte-level text, seeded; [`defaults`]: the default run;
//! - [`trainer`]: a run step by step, its evaluations and a snapshot for a view;
//! - [`export`]: the result as a Hugging Face GPT-2 folder.
//!
//! Determinism: the data and the init come from ChaCha8 seeded by the run's seed, and
//! every kernel sums in an order that does not depend on the thread count, so the same
//! seed gives the same weights bit for bit (for any thread count, which the contract's
//! "same seed and thread count" allows for).

pub mod data;
pub mod defaults;
pub mod export;
pub mod linear;
pub mod model;
pub mod ops;
pub mod optim;
pub mod params;
pub mod shards;
pub mod trainer;

pub use data::{Batch, Sampler, Source};
pub use optim::AdamW;
pub use params::{Layout, ModelShape};
pub use trainer::{
    AblationRecord, CIRCUIT_SCORE, EvalRecord, HeadAblation, Snapshot, StepInfo, TrainConfig,
    Trainer,
};
