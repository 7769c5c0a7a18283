//! The arguments of the commands that read a real model: `model run`, `model info`,
//! `generate`, `heads`, `lens`, `attribute` and `patch`, and the input and intervention
//! flags they share.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::parse::{layer_head, real, threads, whole};
use crate::engine::config::MaskKind;

#[derive(Debug, Clone, Args)]
pub struct ModelRunArgs {
    /// A .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists.
    pub model: String,
    #[command(flatten)]
    pub input: ModelInput,
    #[arg(long)]
    pub json: bool,
    /// Write every layer's attention weights [layers, heads, n, n] as f32 .npy.
    #[arg(long, value_name = "A.npy")]
    pub attn_out: Option<PathBuf>,
    /// How many of the most likely next tokens to show (causal models).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 5)]
    pub top_k: usize,
    #[command(flatten)]
    pub forward: ModelForwardArgs,
    /// Attention rollout (Abnar & Zuidema 2020) over all layers, n x n.
    #[arg(long)]
    pub rollout: bool,
    /// Per layer, each head's contributions ||A[i,j] v_j W_O^h|| normalised per row.
    #[arg(long)]
    pub contrib: bool,
}

/// The text or token ids a model reads.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct ModelInput {
    /// Text, tokenized by the model's own tokenizer (special tokens added as it adds them).
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// Token ids, used exactly as given.
    #[arg(long, value_name = "1,2,..", value_delimiter = ',', value_parser = whole::<u32>, allow_negative_numbers = true)]
    pub ids: Option<Vec<u32>>,
}

/// Interventions on the forward pass, and threads.
#[derive(Debug, Clone, Args)]
pub struct ModelForwardArgs {
    /// Zero these heads' outputs before W_O: LAYER.HEAD,.. from 0 (e.g. 3.4,5.0).
    #[arg(long, value_name = "L.H,..", value_delimiter = ',', value_parser = layer_head)]
    pub ablate: Vec<(usize, usize)>,
    /// Replace the model's own mask: none, causal, window:W, window:W,S (the first S keys
    /// always visible too), ...
    #[arg(long, value_name = "KIND")]
    pub mask: Option<MaskKind>,
    /// Replace the model's RoPE base (RoPE models).
    #[arg(allow_negative_numbers = true, value_parser = real::<f64>, long, value_name = "B")]
    pub rope_base: Option<f64>,
    /// Drop position information (no RoPE, no learned position embeddings).
    #[arg(long)]
    pub no_pe: bool,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    /// A .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists.
    pub model: String,
    /// The text to continue (tokenized by the model's own tokenizer).
    #[arg(
        long,
        value_name = "TEXT",
        required_unless_present = "chat",
        conflicts_with = "chat"
    )]
    pub prompt: Option<String>,
    /// A message to an instruct model: wrapped in the model's chat template (one user
    /// turn, the generation prompt added); generation stops at its end-of-turn token.
    #[arg(long, value_name = "TEXT")]
    pub chat: Option<String>,
    /// New tokens at most (generation also stops at the model's end-of-sequence token).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 32)]
    pub max_tokens: usize,
    /// 0 is greedy (the default); otherwise sample from softmax(logits / T).
    #[arg(allow_negative_numbers = true, value_parser = real::<f64>, long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Sample among the K most likely tokens only.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub top_k: Option<usize>,
    /// Seed of the sampler.
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum HeadSort {
    PrevToken,
    FirstToken,
    Duplicate,
    #[default]
    Induction,
    Entropy,
}

#[derive(Debug, Clone, Args)]
pub struct HeadsArgs {
    /// A .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists.
    pub model: String,
    /// Text, tokenized by the model's own tokenizer (default: a seeded repeated random sequence).
    #[arg(long, value_name = "TEXT", conflicts_with = "ids")]
    pub text: Option<String>,
    /// Token ids, used exactly as given.
    #[arg(long, value_name = "1,2,..", value_delimiter = ',', value_parser = whole::<u32>, allow_negative_numbers = true)]
    pub ids: Option<Vec<u32>>,
    /// Seed of the repeated random sequence (without --text/--ids).
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 0)]
    pub seed: u64,
    /// The score the table is sorted by, descending.
    #[arg(long, value_enum, default_value_t)]
    pub sort: HeadSort,
    /// Composition scores (q, k, v) of every pair of heads in different layers, from the weights.
    #[arg(long, conflicts_with_all = ["text", "ids"])]
    pub composition: bool,
    /// With --composition: only pairs among these layers (from 0).
    #[arg(long, value_name = "A,B,..", value_delimiter = ',', value_parser = whole::<usize>, allow_negative_numbers = true, requires = "composition")]
    pub layers: Option<Vec<usize>>,
    #[arg(long)]
    pub json: bool,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, Args)]
pub struct ModelInfoArgs {
    /// A .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists.
    pub model: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct LensArgs {
    /// A .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists.
    pub model: String,
    #[command(flatten)]
    pub input: ModelInput,
    /// How many of the most likely tokens each cell lists.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 5)]
    pub top: usize,
    /// Also give this token's rank and probability in every cell: one token (" Paris") or #ID.
    #[arg(long, value_name = "TOKEN")]
    pub target: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, Args)]
pub struct AttributeArgs {
    /// A .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists.
    pub model: String,
    #[command(flatten)]
    pub input: ModelInput,
    /// The token whose logit is split: one token of the model's tokenizer (" Mary") or #ID.
    #[arg(long, value_name = "TOKEN")]
    pub target: String,
    /// Subtract this token's logit (logit difference): one token or #ID.
    #[arg(long, value_name = "TOKEN")]
    pub foil: Option<String>,
    /// The position whose prediction is split, from 0 (default: the last).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub pos: Option<usize>,
    #[arg(long)]
    pub json: bool,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum WhatArg {
    #[default]
    Resid,
    Heads,
    AttnOut,
    MlpOut,
}

#[derive(Debug, Clone, Args)]
pub struct PatchArgs {
    /// A .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists.
    pub model: String,
    /// The clean text (the run whose activations are copied).
    #[arg(long, value_name = "TEXT")]
    pub clean: String,
    /// The corrupt text (the run they are copied into); as many tokens as --clean.
    #[arg(long, value_name = "TEXT")]
    pub corrupt: String,
    /// The clean answer: one token's text (" Paris") or #ID.
    #[arg(long, value_name = "TOKEN", allow_hyphen_values = true)]
    pub target: String,
    /// The corrupt answer it is measured against: one token's text or #ID.
    #[arg(long, value_name = "TOKEN", allow_hyphen_values = true)]
    pub foil: String,
    /// The sites patched one at a time.
    #[arg(long, value_enum, default_value_t)]
    pub what: WhatArg,
    #[arg(long)]
    pub json: bool,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
}
