//! What one attention computation is, below both the engine and the kernel, so that each
//! of them imports it and neither imports the other (the kernel never imports the engine;
//! the engine's flash trace imports the kernel):
//!
//! - [`config`]: the mask and position-encoding kinds a user can choose;
//! - [`mask`]: what each mask means, for every path;
//! - [`problem`]: shapes and options (mask, ALiBi, scale) of one computation;
//! - [`alibi`]: ALiBi's slopes;
//! - [`range`]: the range of numbers each path holds, checked before it runs;
//! - [`npy`]: tensors in and out (a `file:` mask is one);
//! - [`limits`]: the documented size limits.
//!
//! The engine re-exports these modules under their old paths (`engine::mask`, ...).

pub mod alibi;
pub mod config;
pub mod limits;
pub mod mask;
pub mod npy;
pub mod problem;
pub mod range;
