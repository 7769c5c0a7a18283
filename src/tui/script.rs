//! A scripted step of a lesson, as the app plays it. Scene files (crate::scene) are
//! turned into these for one language; the app applies them through `update`, and the
//! headless recorder drives the same `update` and draw.

use crate::engine::pipeline::StageId;
use crate::tui::ViewKind;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptStep {
    /// Switch to this view (None: stay).
    pub view: Option<ViewKind>,
    /// Show this stage of the pipeline (None: stay).
    pub stage: Option<StageId>,
    /// Select this query head, from 0 (None: stay).
    pub head: Option<usize>,
    /// Cells (row, col) of the main matrix to highlight; the first also gets the cursor.
    pub highlight: Vec<(usize, usize)>,
    /// Tiles (query block, key block) of the flash view to highlight.
    pub tiles: Vec<(usize, usize)>,
    /// The narration line, already in the chosen language.
    pub narration: String,
    /// How long the step stays on screen at speed 1, in milliseconds.
    pub dwell_ms: u64,
    /// A label for the recording's marker at this step.
    pub marker: Option<String>,
}
