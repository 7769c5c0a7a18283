//! attnviz: Transformer self-attention, stage by stage, in the terminal.
//!
//! Data flows one way: command-line or scene options -> [`engine`] (f64 reference
//! pipeline and traces) or [`kernel`] (fast fp32 FlashAttention) -> [`tui`] views and
//! [`record`] outputs, which only read what the engine produced.

pub mod attn;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod error;
pub mod input;
pub mod kernel;
pub mod model;
pub mod output;
pub mod record;
pub mod scene;
pub mod train;
pub mod tui;
pub mod widgets;

pub use error::{Error, Result};
