//! A scripted step of a lesson, as the app plays it. A scene's steps (in the scene's
//! own terms, `crate::scene::ScriptStep`) are mapped onto these for one language; the
//! app applies them through `update`, and the headless recorder drives the same
//! `update` and draw.

use crate::cli::Lang;
use crate::engine::pipeline::StageId;
use crate::scene::{
    self, Animation, Condition, FlashBlocks, FlashPass, Intervention, ModelShow, Scene, Variant,
};
use crate::tui::view_kind::ViewKind;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptStep {
    /// Switch to this view (None: stay).
    pub view: Option<ViewKind>,
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
    /// The narration line, already in the chosen language.
    pub narration: String,
    /// How long the step stays on screen at speed 1, in milliseconds.
    pub dwell_ms: u64,
    /// A label for the recording's marker at this step.
    pub marker: Option<String>,
    /// Play the view's tiles (flash) or decoding steps (decode) during the step.
    pub animate: Option<Animation>,
    /// Use these block sizes in the flash view (the scene's grid, on its first step).
    pub flash_blocks: Option<FlashBlocks>,
    /// A training lesson's step waits until the run meets this (skipped if it ends
    /// without).
    pub when: Option<Condition>,
}

impl From<scene::ScriptStep> for ScriptStep {
    fn from(s: scene::ScriptStep) -> ScriptStep {
        ScriptStep {
            view: s.view,
            stage: s.stage,
            head: s.head,
            layer: s.layer,
            show: s.show,
            contributions: s.contributions,
            lens_target: s.lens_target,
            patch: s.patch,
            writers: s.writers,
            intervene: s.intervene,
            highlight: s.highlight,
            tiles: s.tiles,
            variant: s.variant,
            pass: s.pass,
            narration: s.narration,
            dwell_ms: s.dwell_ms,
            marker: s.marker,
            animate: s.animate,
            flash_blocks: s.flash_blocks,
            when: s.when,
        }
    }
}

/// A scene's steps as the app plays them, narration in `lang`.
pub fn lesson(scene: &Scene, lang: Lang) -> Vec<ScriptStep> {
    scene
        .script(lang)
        .into_iter()
        .map(ScriptStep::from)
        .collect()
}
