//! What a lesson on a trained model names: the model and what it reads (`[pretrained]`),
//! and the interventions a step runs it with (`intervene`).

use crate::engine::config::MaskKind;

/// What a lesson on a trained model runs: the model, as the command line names it, and
/// the tokens it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Pretrained {
    /// A MODEL argument: a name `attnviz models` lists, or a path.
    pub model: String,
    pub input: PretrainedInput,
    /// Pad the sequence with the tokenizer's padding token to this many tokens, masking
    /// the padding keys.
    pub pad_to: Option<usize>,
    /// The patch view's corrupt run, as many tokens as the first input.
    pub compare: Option<CompareInput>,
}

/// The second input of a lesson on a trained model.
#[derive(Debug, Clone, PartialEq)]
pub enum CompareInput {
    /// A text, beside `text`.
    Text(String),
    /// Beside `repeat`: T random tokens drawn from `seed`, then the first input's second
    /// copy of its T tokens.
    FirstHalf { seed: u64 },
}

#[derive(Debug, Clone, PartialEq)]
pub enum PretrainedInput {
    /// A text, tokenized by the model's own tokenizer.
    Text(String),
    /// `t` random tokens then the same `t` again, from `seed` (`attnviz heads`' probe).
    Repeat { t: usize, seed: u64 },
}

/// Interventions on a trained model's forward pass (`intervene` in a step). Fields left
/// out keep the model (and the lesson's padding mask) as they are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Intervention {
    /// (layer, head), from 0.
    pub ablate: Vec<(usize, usize)>,
    pub mask: Option<MaskKind>,
    pub rope_base: Option<f64>,
    pub no_pe: bool,
}
