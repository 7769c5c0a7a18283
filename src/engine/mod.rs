//! The math of attention, with no terminal code.
//!
//! - [`config`]: the mask and position-encoding kinds a user can choose;
//! - [`mask`]: what each mask means, for every path;
//! - [`pe`]: sinusoidal, RoPE, ALiBi;
//! - [`problem`]: shapes and options of one attention computation;
//! - [`embed`]: seeded embeddings and weights, the same on every platform;
//! - [`limits`]: the documented size limits;
//! - [`naive`]: the f32 path that materialises the score matrix;
//! - [`reference`]: the f64 truth on tensors;
//! - [`reference_backward`]: the f64 truth of the gradients (and RoPE taken back);
//! - [`pipeline`]: tokens to output, every stage named and inspectable;
//! - [`npy`]: tensors in and out;
//! - [`tensors`]: Q, K, V from .npy as checked [B,H,N,d] arrays, and outputs back.
//! - [`kv_cache`], [`gqa`], [`variants`]: decoding, KV groups, sliding window, BigBird, linear attention;
//! - [`memory`], [`presets`]: sizes and HBM traffic; real model configurations;
//! - [`scaling`]: time and peak heap of the naive and flash paths against n, measured.
//! - [`flash`]: FlashAttention's tiles recorded from the kernel's own tiled code;
//! - [`flash_backward`]: the same for the backward pass.

pub mod config;
pub mod embed;
pub mod flash;
pub mod flash_backward;
pub mod gqa;
pub mod kv_cache;
pub mod limits;
pub mod mask;
pub mod memory;
pub mod naive;
pub mod npy;
pub mod pe;
pub mod pipeline;
pub mod presets;
pub mod problem;
pub mod reference;
pub mod reference_backward;
pub mod scaling;
pub mod tensors;
pub mod variants;
