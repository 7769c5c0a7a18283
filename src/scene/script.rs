//! A scene's steps for one language: what a lesson shows at each step, in the scene's
//! own terms. The app turns these into its own playback steps.

use super::grid::{Animation, FlashBlocks};
use super::view::SceneView;
use crate::engine::pipeline::StageId;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptStep {
    /// Switch to this view (None: stay).
    pub view: Option<SceneView>,
    /// Show this stage of the pipeline (None: stay).
    pub stage: Option<StageId>,
    /// Select this query head, from 0 (None: stay).
    pub head: Option<usize>,
    /// Cells (row, col) of the main matrix to highlight; the first also gets the cursor.
    pub highlight: Vec<(usize, usize)>,
    /// Tiles (query block, key block) of the flash view to highlight.
    pub tiles: Vec<(usize, usize)>,
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
}
