//! Arguments of the contribution commands: `lens` and `attribute` (DESIGN.md
//! "Contributions, attribution and the logit lens").

use clap::Args;

use crate::cli::{ModelInput, threads, whole};

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
