//! A scene's steps for one language: what a lesson shows at each step, in the scene's
//! own terms. The app turns these into its own playback steps.

use super::grid::{Animation, FlashBlocks};
use super::pass::FlashPass;
use super::pretrained::Intervention;
use super::train::Condition;
use super::variant::Variant;
use super::view::{ModelShow, SceneView};
use crate::engine::pipeline::StageId;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptStep {
    /// Switch to this view (None: stay).
    pub view: Option<SceneView>,
    /// Show this stage of the pipeline (None: stay).
    pub stage: Option<StageId>,
    /// Select this query head, from 0 (None: stay).
    pub head: Option<usize>,
    /// Select this layer of a trained model, from 0 (None: stay).
    pub layer: Option<usize>,
    /// What the model view shows (None: stay).
    pub show: Option<ModelShow>,
    /// The model and tokens views draw contributions (true) or weights (None: stay).
    pub contributions: Option<bool>,
    /// The lens view's cells show the target (true) or the top token (None: stay).
    pub lens_target: Option<bool>,
    /// The patch view's sites (None: stay).
    pub patch: Option<crate::model::patching::PatchWhat>,
    /// The model view lists the heads writing into the cursor's head (None: stay).
    pub writers: Option<bool>,
    /// Interventions on a trained model from this step on (None: keep the current ones).
    pub intervene: Option<Intervention>,
    /// Cells (row, col) of the main matrix to highlight; the first also gets the cursor.
    pub highlight: Vec<(usize, usize)>,
    /// Tiles (query block, key block) of the flash view to highlight.
    pub tiles: Vec<(usize, usize)>,
    /// Show this panel of the variants view (None: stay).
    pub variant: Option<Variant>,
    /// Play this pass in the flash view (None: stay).
    pub pass: Option<FlashPass>,
    /// The narration line, in the chosen language.
    pub narration: String,
    /// How long the step stays on screen at speed 1, in milliseconds.
    pub dwell_ms: u64,
    /// A label for the recording's marker at this step.
    pub marker: Option<String>,
    /// Play the view's tiles or decoding steps during the step.
    pub animate: Option<Animation>,
    /// The flash view's block sizes (set on the first step: the scene's grid).
    pub flash_blocks: Option<FlashBlocks>,
    /// A `[train]` lesson's step waits until the run meets this.
    pub when: Option<Condition>,
}
