//! The math of attention, with no terminal code.
//!
//! - [`config`]: the mask and position-encoding kinds a user can choose;
//! - [`mask`]: what each mask means, for every path;
//! - [`pe`]: sinusoidal, RoPE, ALiBi;
//! - [`problem`]: shapes and options of one attention computation;
//! - [`embed`]: seeded embeddings and weights, the same on every platform;
//! - [`limits`]: the documented size limits;
//! - [`naive`]: the f32 path that materialises the score matrix;
//! - [`fit_f32`]: f64 tensors brought exactly into the f32 paths' range;
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
//!
//! `config`, `mask`, `problem`, `npy` and `limits` live in [`crate::attn`], below the
//! engine and the kernel alike, and are re-exported here under their old paths.

pub mod embed;
pub mod fit_f32;
pub mod flash;
pub mod flash_backward;
pub mod gqa;
pub mod kv_cache;
pub mod memory;
pub mod memory_backward;
pub mod naive;
pub mod pe;
pub mod pipeline;
pub mod presets;
pub mod reference;
pub mod reference_backward;
pub mod scaling;
pub mod tensors;
pub mod variants;

pub use crate::attn::{config, limits, mask, npy, problem};
