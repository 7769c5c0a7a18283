//! Real-model formats and architectures: loading, forward against transformers' recorded
//! values, generation, interventions, and training.

mod model_common;
#[path = "../support/mod.rs"]
mod support;
mod train_common;

mod analysis_cli;
mod arch;
mod cli;
mod cmd_cli;
mod contrib_real;
mod contrib_tiny;
mod damaged;
mod expected;
mod forward;
mod gemma;
mod generate;
mod interventions;
mod limits_flags;
mod load;
mod patch_real;
mod patching;
mod real;
mod train_grads;
mod train_run;
