//! The default run of `attnviz train --task induction`: the recipe of DESIGN.md
//! ("Training a small model"). With these settings the two-head circuit forms in every
//! seed tried (docs/training.md has the table): AdamW (betas 0.9 / 0.95, weight decay
//! 0.01), peak lr 3e-3 after 100 warm-up steps, cosine to a tenth, batches of 32
//! sequences of 64 tokens, and the curriculum below.

pub const VOCAB: usize = 64;
pub const STEPS: usize = 1000;
pub const BATCH: usize = 32;
pub const LR: f32 = 3e-3;
pub const WARMUP: usize = 100;
pub const EVAL_EVERY: usize = 25;
pub const EVAL_BATCH: usize = 64;
pub const CLIP: f32 = 1.0;

/// The cosine schedule reaches a tenth of the peak at max(steps, this): a 1,000-step run
/// ends with the learning rate still high, as the recipe's 3,000-step schedule has it.
pub const DECAY_STEPS: usize = 3000;

/// The curriculum: from this step on, [`OFFSET_SHARE`] of the induction task's sequences
/// have their repeated block after a random prefix. Trained only on copies at position 0
/// the circuit forms but stays tied to it (the layer-1 score on an offset copy stays near
/// 0.15); with offset copies mixed in after it has started to form it generalises (0.79
/// at step 1,000, seed 0), while offset copies from step 0 keep it from forming.
pub const OFFSET_FROM: usize = 200;
pub const OFFSET_SHARE: f64 = 0.5;
