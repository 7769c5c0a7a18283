//! The default run of `attnviz train`, chosen so the induction circuit forms within five
//! minutes on 2 cores (see the README's training section for how they were found).

pub const VOCAB: usize = 64;
pub const STEPS: usize = 3000;
pub const BATCH: usize = 32;
pub const LR: f32 = 3e-3;
pub const WARMUP: usize = 100;
pub const EVAL_EVERY: usize = 100;
pub const EVAL_BATCH: usize = 64;
pub const CLIP: f32 = 1.0;
