//! The math of attention, with no terminal code.
//!
//! - [`config`]: the mask and position-encoding kinds a user can choose;
//! - [`mask`]: what each mask means, for every path;
//! - [`pe`]: sinusoidal, RoPE, ALiBi;
//! - [`problem`]: shapes and options of one attention computation;
//! - [`naive`]: the f32 path that materialises the score matrix;
//! - [`reference`]: the f64 truth on tensors;
//! - [`pipeline`]: tokens to output, every stage named and inspectable;
//! - [`npy`]: tensors in and out;
//! - [`flash`]: FlashAttention's tiles recorded from the kernel's own tiled code.

pub mod config;
pub mod flash;
pub mod mask;
pub mod naive;
pub mod npy;
pub mod pe;
pub mod pipeline;
pub mod problem;
pub mod reference;
