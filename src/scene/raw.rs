//! The scene file as written: serde structs that mirror the TOML one to one.
//!
//! Every table refuses unknown keys, and every value a semantic check may complain about
//! keeps its byte span ([`Spanned`]) so the complaint can point at `file:line:column`.
//! Strings with structure (view, stage, pe, mask) stay strings here and are parsed in
//! [`super::validate`], where the span is at hand.
//!
//! `scenes/scene.schema.json` describes the same fields for editors; a test keeps the two
//! in step.

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScene {
    /// Format version; only 1 exists. Optional in serde so a missing version gets our
    /// own message (what to write) rather than serde's.
    pub version: Option<Spanned<i64>>,
    pub title: Spanned<RawText>,
    /// The view the scene opens in.
    pub view: Option<Spanned<String>>,
    /// A small seeded model (every lesson but those on trained models).
    pub model: Option<Spanned<RawModel>>,
    /// A trained model the lesson runs (instead of `[model]`).
    pub pretrained: Option<Spanned<RawPretrained>>,
    /// A small model trained while the lesson plays (instead of `[model]`).
    pub train: Option<Spanned<RawTrain>>,
    /// Block sizes of the flash view's tile grid.
    pub flash: Option<Spanned<RawFlash>>,
    pub steps: Spanned<Vec<Spanned<RawStep>>>,
}

/// A text in both languages.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawText {
    pub en: Spanned<String>,
    pub zh: Spanned<String>,
}

/// The model the lesson runs on.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// A sentence; the engine splits it into tokens.
    pub tokens: Spanned<String>,
    pub d_model: Spanned<i64>,
    pub heads: Spanned<i64>,
    /// Defaults to `heads` (plain multi-head attention).
    pub kv_heads: Option<Spanned<i64>>,
    pub seed: Option<Spanned<i64>>,
    /// `none`, `sinusoidal`, `learned`, `rope[:base]`, `alibi`.
    pub pe: Option<Spanned<String>>,
    /// `none`, `causal`, `window:W[,S]`, `padding:L1,..`, `bigbird[:w,g,r[,block]]`.
    pub mask: Option<Spanned<String>>,
    /// Apply 1/sqrt(d_k) to the scores (default true).
    pub scale: Option<Spanned<bool>>,
}

/// A trained model and what it reads.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPretrained {
    /// A MODEL as the command line takes it: a name `attnviz models` lists, or a path.
    pub model: Spanned<String>,
    /// The text the model reads, tokenized by its own tokenizer.
    pub text: Option<Spanned<String>>,
    /// Instead of `text`: T random tokens, then the same T again (`heads`' probe).
    pub repeat: Option<Spanned<i64>>,
    /// Seed of the random tokens of `repeat` (default 0).
    pub seed: Option<Spanned<i64>>,
    /// Append the tokenizer's padding token until the sequence has this many tokens, and
    /// mask the padding keys as a batch's attention mask does.
    pub pad_to: Option<Spanned<i64>>,
    /// A second text with as many tokens as `text` (the corrupt run of the patch view).
    pub compare: Option<Spanned<String>>,
    /// With `repeat`: the second input is another T random tokens (from this seed), then
    /// the first input's second copy: no earlier copy to find.
    pub compare_seed: Option<Spanned<i64>>,
}

/// The run a `[train]` lesson trains on the induction task.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrain {
    pub layers: Spanned<i64>,
    pub heads: Spanned<i64>,
    pub d_model: Spanned<i64>,
    /// Sequence length (and the probe's length).
    pub context: Spanned<i64>,
    pub vocab: Spanned<i64>,
    pub steps: Spanned<i64>,
    pub batch: Spanned<i64>,
    /// Peak learning rate.
    pub lr: Spanned<f64>,
    /// Warm-up steps (default: a tenth of the steps).
    pub warmup: Option<Spanned<i64>>,
    pub seed: Option<Spanned<i64>>,
    /// Evaluate every this many steps.
    pub eval_every: Spanned<i64>,
    /// Training steps per second of lesson time at speed 1.
    pub rate: Spanned<f64>,
}

/// Interventions on a trained model's forward pass, in force from the step that sets them;
/// an empty table brings the model back as it is.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIntervene {
    /// Heads `[layer, head]` (from 0) whose outputs are zeroed before W_O.
    #[serde(default)]
    pub ablate: Vec<Spanned<Vec<Spanned<i64>>>>,
    /// Replaces the model's mask: `none`, `causal`, `window:W[,S]`.
    pub mask: Option<Spanned<String>>,
    /// Replaces the model's RoPE base.
    pub rope_base: Option<Spanned<f64>>,
    /// Drops position information (RoPE not applied, learned positions not added).
    pub no_pe: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlash {
    /// Query rows per block.
    pub br: Spanned<i64>,
    /// Key columns per block.
    pub bc: Spanned<i64>,
}

/// One step of the lesson.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub view: Option<Spanned<String>>,
    pub stage: Option<Spanned<String>>,
    pub head: Option<Spanned<i64>>,
    /// A trained model's layer, from 0.
    pub layer: Option<Spanned<i64>>,
    /// What the model view shows: `maps`, a head score (`prev-token`, `first-token`,
    /// `duplicate`, `induction`, `entropy`) or `rollout`.
    pub show: Option<Spanned<String>>,
    /// What the model and tokens views draw: `weights` (A) or `contributions`
    /// (||A v W_O||, rows summing to 1).
    pub measure: Option<Spanned<String>>,
    /// The patch view's sites: `resid`, `heads`, `attn-out` or `mlp-out`.
    pub patch: Option<Spanned<String>>,
    /// The model view lists the earlier heads writing into the cursor's head.
    pub writers: Option<Spanned<bool>>,
    /// What the lens view's cells show: `top` (each layer's top token) or `target` (the
    /// rank and probability of the position's target).
    pub lens: Option<Spanned<String>>,
    /// Interventions on a trained model, from this step on.
    pub intervene: Option<Spanned<RawIntervene>>,
    /// Cells `[row, col]` of the main matrix.
    #[serde(default)]
    pub highlight: Vec<Spanned<Vec<Spanned<i64>>>>,
    /// Tiles `[q_block, k_block]` of the flash view.
    #[serde(default)]
    pub tiles: Vec<Spanned<Vec<Spanned<i64>>>>,
    /// The variants view's panel: `window`, `bigbird` or `linear`.
    pub variant: Option<Spanned<String>>,
    /// The flash view's pass: `forward` or `backward`.
    pub pass: Option<Spanned<String>>,
    pub narration: Spanned<RawText>,
    /// Seconds on screen at speed 1.
    pub dwell: Option<Spanned<f64>>,
    pub marker: Option<Spanned<String>>,
    /// Play the view's tiles (flash) or decoding steps (decode) during the step.
    pub animate: Option<Spanned<RawAnimate>>,
    /// In a `[train]` lesson: wait until the run meets this (`done`, `NAME >= X`,
    /// `NAME <= X`); a step the run never reaches is skipped.
    pub when: Option<Spanned<String>>,
}

/// `animate = { from = 0, to = 15, rate = 2.0 }`: positions of the view's playback order
/// (the flash view's tiles in loop order, the decode view's tokens), from 0.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAnimate {
    /// First position shown (default 0).
    pub from: Option<Spanned<i64>>,
    /// Last position shown (default: the last of the view).
    pub to: Option<Spanned<i64>>,
    /// Positions per second at speed 1 (default 2).
    pub rate: Option<Spanned<f64>>,
}
