//! The command-line contract of DESIGN.md, as clap derive definitions.
//!
//! Values with structure (masks, position encodings, sizes) are parsed here with the
//! engine's own `FromStr` impls, so a bad value is refused by clap with exit code 2 and a
//! message that names the flag.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::engine::config::{MaskKind, PeKind};

pub mod model;
pub mod parse;

pub use model::{
    AttributeArgs, GenerateArgs, HeadSort, HeadsArgs, LensArgs, ModelForwardArgs, ModelInfoArgs,
    ModelInput, ModelRunArgs, PatchArgs, WhatArg,
};
pub use parse::{layer_head, num_bounds, real, threads, whole};

#[derive(Debug, Parser)]
#[command(
    name = "attnviz",
    version,
    about = "Transformer self-attention, stage by stage, in the terminal",
    long_about = "attnviz steps through every stage of self-attention on real numbers, lets you \
                  switch masks and position encodings live, animates FlashAttention tile by \
                  tile, and runs a SIMD FlashAttention kernel on the CPU.\n\n\
                  Run without a subcommand to open the app on the default built-in scene.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub tui: TuiArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the interactive app (the default when no subcommand is given).
    Tui(TuiArgs),
    /// Open the app on your own tensors (e.g. dumped from PyTorch).
    View(ViewArgs),
    /// Compute attention on .npy tensors, no terminal.
    Compute(ComputeArgs),
    /// FlashAttention's block events as JSON.
    Trace(TraceArgs),
    /// Kernel throughput in GFLOP/s and % of this CPU's measured FMA peak.
    Bench(BenchArgs),
    /// List the built-in scenes.
    Scenes(ScenesArgs),
    /// Work with scene files.
    #[command(subcommand)]
    Scene(SceneCommand),
    /// Autoplay a scene; with --record, headless and deterministic.
    Play(PlayArgs),
    /// Write one still frame of a scene as SVG or text.
    Snapshot(SnapshotArgs),
    /// KV cache size: MHA against GQA/MQA, with the formula.
    KvCache(KvCacheArgs),
    /// Attention-matrix size and HBM traffic: standard against FlashAttention.
    Memory(MemoryArgs),
    /// List the real models found (GGUF files, Hugging Face folders, ollama, caches).
    Models(ModelsArgs),
    /// Work with one real model.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Text generation with a KV cache, streamed as each token is chosen.
    Generate(GenerateArgs),
    /// Head scores (previous token, attention sink, duplicate, induction, entropy).
    Heads(HeadsArgs),
    /// The logit lens: every layer's residual stream read through the final norm and the unembedding.
    Lens(crate::cli::LensArgs),
    /// Direct logit attribution: a target's logit (minus a foil's) split over heads, MLPs and embeddings.
    Attribute(crate::cli::AttributeArgs),
    /// Activation patching: which activations of a clean text restore its answer in a corrupt one.
    Patch(PatchArgs),
    /// Train a small GPT-2-style model from scratch on the CPU and watch its heads form.
    Train(TrainArgs),
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Zh,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ThemeName {
    #[default]
    Dark,
    Light,
    Mono,
}

/// Options of the interactive app.
#[derive(Debug, Clone, Default, Args)]
pub struct TuiArgs {
    /// A built-in scene name or a path to a scene .toml file.
    pub scene: Option<String>,
    /// The sentence to attend over (overrides the scene's tokens).
    #[arg(long)]
    pub tokens: Option<String>,
    /// A real model (a .gguf file, a Hugging Face folder or a name `attnviz models` lists):
    /// the app shows its computation of --tokens, layer by layer.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// With --model: a message to an instruct model, wrapped in its chat template (one
    /// user turn); the app shows the template's tokens and the decode view answers.
    #[arg(
        long,
        value_name = "TEXT",
        requires = "model",
        conflicts_with = "tokens"
    )]
    pub chat: Option<String>,
    /// With --model: a second text with as many tokens as --tokens (the corrupt run); the
    /// patch view patches the first text's activations into it, one at a time.
    #[arg(long, value_name = "TEXT", requires = "model", conflicts_with = "chat")]
    pub compare: Option<String>,
    /// Number of query heads.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub heads: Option<usize>,
    /// Number of key/value heads (GQA; 1 = MQA). Must divide --heads.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub kv_heads: Option<usize>,
    /// Model width; must be divisible by --heads.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub d_model: Option<usize>,
    /// Seed of the embeddings and weights.
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub seed: Option<u64>,
    /// Position encoding: none, sinusoidal, learned, rope[:base], alibi.
    #[arg(long, value_name = "KIND")]
    pub pe: Option<PeKind>,
    /// Mask: none, causal, window:W[,S], padding:L1,L2,.., bigbird[:w,g,r], file:PATH.npy.
    #[arg(long, value_name = "KIND")]
    pub mask: Option<MaskKind>,
    /// Language of the narration.
    #[arg(long, value_enum, default_value_t)]
    pub lang: Lang,
    /// Colour theme; NO_COLOR in the environment also selects mono.
    #[arg(long, value_enum)]
    pub theme: Option<ThemeName>,
    /// Draw with ASCII only, for terminals without Unicode block glyphs.
    #[arg(long)]
    pub ascii: bool,
    /// Do not capture the mouse (leaves terminal text selection alone).
    #[arg(long)]
    pub no_mouse: bool,
}

/// Options of `attnviz view`.
#[derive(Debug, Clone, Args)]
pub struct ViewArgs {
    /// Queries, [N,d], [H,N,d] or [B,H,N,d].
    #[arg(long, requires_all = ["k", "v"], conflicts_with = "attn")]
    pub q: Option<PathBuf>,
    #[arg(long)]
    pub k: Option<PathBuf>,
    #[arg(long)]
    pub v: Option<PathBuf>,
    /// Attention weights [layers?, heads, n, n], e.g. output_attentions of a model.
    #[arg(long, required_unless_present = "q")]
    pub attn: Option<PathBuf>,
    /// One token per line, used as row and column labels.
    #[arg(long)]
    pub tokens_file: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub lang: Lang,
    #[arg(long, value_enum)]
    pub theme: Option<ThemeName>,
    #[arg(long)]
    pub ascii: bool,
    #[arg(long)]
    pub no_mouse: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum KernelChoice {
    /// The f64 reference path (the truth every other path is tested against).
    Reference,
    /// Materialises the full score matrix in f32 with ndarray.
    Naive,
    /// The tiled SIMD FlashAttention kernel.
    Flash,
    /// flash or naive, chosen by size.
    #[default]
    Auto,
}

/// Options of `attnviz compute`.
#[derive(Debug, Clone, Args)]
pub struct ComputeArgs {
    #[arg(long)]
    pub q: PathBuf,
    #[arg(long)]
    pub k: PathBuf,
    #[arg(long)]
    pub v: PathBuf,
    /// Where to write the output O (in Q's dtype, shaped like Q but with V's last dimension).
    #[arg(long)]
    pub out: PathBuf,
    /// Where to write the log-sum-exp per row (Q's dtype and shape without its last axis).
    #[arg(long)]
    pub lse: Option<PathBuf>,
    /// none, causal, window:W[,S] (sliding window, plus S first keys always visible),
    /// padding:L1,L2,.., bigbird[:w,g,r], file:PATH.npy.
    #[arg(long, value_name = "KIND", default_value = "none")]
    pub mask: MaskKind,
    /// Add ALiBi biases (slopes per the ALiBi paper).
    #[arg(long)]
    pub alibi: bool,
    /// Rotate q and k with RoPE (interleaved pairs); base 10000 unless given.
    #[arg(allow_negative_numbers = true, value_parser = real::<f64>, long, value_name = "BASE", num_args = 0..=1, require_equals = true, default_missing_value = "10000")]
    pub rope: Option<f64>,
    /// Score scale; 1/sqrt(d) unless given.
    #[arg(allow_negative_numbers = true, value_parser = real::<f64>, long)]
    pub scale: Option<f64>,
    #[arg(long, value_enum, default_value_t)]
    pub kernel: KernelChoice,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
    /// dO, the gradient of a loss with respect to O (shaped like the output): with
    /// --dq/--dk/--dv, compute the gradients of sum(O * dO) (the backward pass).
    #[arg(long, value_name = "dO.npy")]
    pub grad_out: Option<PathBuf>,
    /// Where to write dQ (shaped like Q; with respect to Q before RoPE). Needs --grad-out.
    #[arg(long, value_name = "dQ.npy")]
    pub dq: Option<PathBuf>,
    /// Where to write dK (shaped like K, summed over a GQA group's heads). Needs --grad-out.
    #[arg(long, value_name = "dK.npy")]
    pub dk: Option<PathBuf>,
    /// Where to write dV (shaped like V, summed over a GQA group's heads). Needs --grad-out.
    #[arg(long, value_name = "dV.npy")]
    pub dv: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoopOrder {
    /// FlashAttention-1: key/value blocks outer, query blocks inner.
    Fa1,
    /// FlashAttention-2: query blocks outer, key/value blocks inner.
    #[default]
    Fa2,
}

/// Options of `attnviz trace`.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// Sequence length of generated inputs (queries and keys).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, required_unless_present = "q")]
    pub n: Option<usize>,
    /// Key length of generated inputs, if different from --n.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub nk: Option<usize>,
    /// Head dimension of generated inputs.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 8)]
    pub d: usize,
    /// Query block rows.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 4)]
    pub br: usize,
    /// Key/value block columns.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 4)]
    pub bc: usize,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, value_name = "KIND", default_value = "none")]
    pub mask: MaskKind,
    #[arg(long = "loop", value_enum, default_value_t)]
    pub loop_order: LoopOrder,
    #[arg(allow_negative_numbers = true, value_parser = real::<f64>, long)]
    pub scale: Option<f64>,
    /// One head's queries [N,d] (instead of generated inputs).
    #[arg(long, requires_all = ["k", "v"])]
    pub q: Option<PathBuf>,
    #[arg(long)]
    pub k: Option<PathBuf>,
    #[arg(long)]
    pub v: Option<PathBuf>,
    /// Trace the backward pass (key blocks outer) instead of the forward.
    #[arg(long)]
    pub backward: bool,
    /// dO [N, dv] for --backward (generated from --seed if not given).
    #[arg(long, value_name = "dO.npy", requires = "backward")]
    pub grad_out: Option<PathBuf>,
    /// Print JSON (the only format; the flag is accepted for clarity in scripts).
    #[arg(long)]
    pub json: bool,
}

/// Options of `attnviz bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Sequence lengths.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, value_delimiter = ',', default_value = "256,1024,4096")]
    pub n: Vec<usize>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 64)]
    pub d: usize,
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 8)]
    pub heads: usize,
    /// KV heads (default: same as --heads).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub kv_heads: Option<usize>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub batch: Option<usize>,
    /// Causal mask (tiles above the diagonal are skipped).
    #[arg(long)]
    pub causal: bool,
    /// Thread counts to run, e.g. 1,2 (default: 1 and all cores).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Kernels: flash, naive, reference.
    #[arg(long, value_delimiter = ',', default_value = "flash,naive")]
    pub kernels: Vec<String>,
    /// Timed runs per case (median reported; at least 5).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 5)]
    pub reps: usize,
    /// Measure the backward pass (dQ, dK, dV from the saved log-sum-exp) instead of the
    /// forward: 10*B*H*N^2*d flops per call (halved for causal).
    #[arg(long)]
    pub backward: bool,
    /// Measure the frame time of every view instead of the kernels.
    #[arg(long)]
    pub ui: bool,
    /// With --ui: also time every view on this real model's computation of a long text
    /// (a .gguf file, a Hugging Face folder, or a name `attnviz models` lists).
    #[arg(long, value_name = "MODEL", requires = "ui")]
    pub model: Option<String>,
    /// With --ui --model: tokens of the text the model runs on (1..=1024).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 1024, requires = "model")]
    pub ui_tokens: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ScenesArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ModelsArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// One model's shape, parameters, tokenizer and special tokens (reads headers only).
    Info(ModelInfoArgs),
    /// One forward pass: tokens, next-token predictions, loss, attention weights.
    Run(ModelRunArgs),
}

/// What `attnviz train` learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum TrainTask {
    /// A block of random tokens at the start, then the block again; the loss only on the
    /// second copy's predictable tokens: a two-layer model forms an induction circuit.
    #[default]
    Induction,
    /// A span copied to a random later offset in random tokens, the loss on every token:
    /// a two-layer model learns a fixed-distance shortcut instead of the circuit.
    CopySpan,
}

#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    /// The synthetic task (default: induction).
    #[arg(long, value_enum, conflicts_with = "text")]
    pub task: Option<TrainTask>,
    /// Byte-level next-token prediction on this UTF-8 file instead (vocabulary 256).
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 2)]
    pub layers: usize,
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 4)]
    pub heads: usize,
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 64)]
    pub d_model: usize,
    /// Sequence length (and rows of the learned position table).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 64)]
    pub context: usize,
    /// Vocabulary of the induction task (with --text it is 256 bytes).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long)]
    pub vocab: Option<usize>,
    /// Training steps.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = crate::train::defaults::STEPS)]
    pub steps: usize,
    /// Sequences per step.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = crate::train::defaults::BATCH)]
    pub batch: usize,
    /// Peak learning rate (linear warm-up, then cosine decay to a tenth).
    #[arg(allow_negative_numbers = true, value_parser = real::<f32>, long, default_value_t = crate::train::defaults::LR)]
    pub lr: f32,
    /// Warm-up steps.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = crate::train::defaults::WARMUP)]
    pub warmup: usize,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 0)]
    pub seed: u64,
    /// Worker threads (default: all cores).
    #[arg(allow_negative_numbers = true, value_parser = threads, long)]
    pub threads: Option<usize>,
    /// Evaluate every N steps.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = crate::train::defaults::EVAL_EVERY)]
    pub eval_every: usize,
    /// Write the trained model here as a Hugging Face GPT-2 folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// One JSON object per evaluation on stdout.
    #[arg(long)]
    pub json: bool,
    /// Language of the train view.
    #[arg(long, value_enum, default_value_t)]
    pub lang: Lang,
    /// Time N training steps after 3 warm-up steps and print the median ms per step
    /// (no training run, no output folder).
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, value_name = "N", conflicts_with = "out")]
    pub bench_steps: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum SceneCommand {
    /// Validate scene files; every problem is reported with file:line:column.
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// A terminal size written COLSxROWS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    pub cols: u16,
    pub rows: u16,
}

impl std::str::FromStr for TermSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("'{s}' is not a size; write COLSxROWS, e.g. 120x40 (each 10..=1000)");
        let (c, r) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let cols: u16 = c.trim().parse().map_err(|_| bad())?;
        let rows: u16 = r.trim().parse().map_err(|_| bad())?;
        for (what, v) in [("columns", cols), ("rows", rows)] {
            if !(10..=1000).contains(&v) {
                return Err(format!(
                    "'{s}': {what} {v} is out of range; each of COLSxROWS must be 10..=1000, e.g. 120x40"
                ));
            }
        }
        Ok(TermSize { cols, rows })
    }
}

#[derive(Debug, Clone, Args)]
pub struct PlayArgs {
    /// A built-in scene name or a path to a scene .toml file.
    pub scene: String,
    /// Record instead of playing (headless, deterministic); the format follows the
    /// extension: .cast (asciicast v2), .svg (animated SVG), .gif (animated GIF).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// A font for the GIF's CJK characters (TTF/OTF; default: one found on the system).
    #[arg(long)]
    pub font: Option<PathBuf>,
    /// Size of the recording.
    #[arg(long, default_value = "100x30")]
    pub size: TermSize,
    /// Playback speed factor.
    #[arg(allow_negative_numbers = true, value_parser = real::<f64>, long, default_value_t = 1.0)]
    pub speed: f64,
    #[arg(long, value_enum, default_value_t)]
    pub lang: Lang,
    #[arg(long, value_enum)]
    pub theme: Option<ThemeName>,
    #[arg(long)]
    pub ascii: bool,
}

#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("format").required(true).args(["svg", "txt"])))]
pub struct SnapshotArgs {
    pub scene: String,
    /// Step to draw, from 1.
    #[arg(allow_negative_numbers = true, value_parser = whole::<usize>, long, default_value_t = 1)]
    pub step: usize,
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[arg(long)]
    pub txt: Option<PathBuf>,
    #[arg(long, default_value = "100x30")]
    pub size: TermSize,
    #[arg(long, value_enum, default_value_t)]
    pub lang: Lang,
    #[arg(long, value_enum)]
    pub theme: Option<ThemeName>,
    #[arg(long)]
    pub ascii: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    #[default]
    F16,
    Bf16,
    Int8,
}

impl Dtype {
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::Int8 => 1,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct KvCacheArgs {
    /// A real model's configuration: llama2-7b, llama2-13b, llama2-70b, llama3-8b,
    /// llama3-70b, mistral-7b (flags given beside it override its fields).
    #[arg(long)]
    pub preset: Option<String>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub layers: Option<u64>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub d_model: Option<u64>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub heads: Option<u64>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub kv_heads: Option<u64>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub seq: Option<u64>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 1)]
    pub batch: u64,
    #[arg(long, value_enum, default_value_t)]
    pub dtype: Dtype,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct MemoryArgs {
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub n: u64,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 1)]
    pub heads: u64,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 64)]
    pub d: u64,
    #[arg(long, value_enum, default_value = "f32")]
    pub dtype: Dtype,
    /// On-chip memory (SRAM) in KiB; FlashAttention's block sizes follow from it.
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long, default_value_t = 192)]
    pub sram_kib: u64,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub br: Option<u64>,
    #[arg(allow_negative_numbers = true, value_parser = whole::<u64>, long)]
    pub bc: Option<u64>,
    #[arg(long)]
    pub json: bool,
}
