//! A checked scene: its texts in both languages, its model, the view it opens, the
//! flash view's block sizes and its steps.

pub use super::grid::{Animation, FlashBlocks};
use super::script::ScriptStep;
use super::view::SceneView;
use crate::cli::Lang;
use crate::engine::pipeline::{ModelConfig, StageId};

/// A text in both languages of the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Localized {
    pub en: String,
    pub zh: String,
}

impl Localized {
    pub fn get(&self, lang: Lang) -> &str {
        match lang {
            Lang::En => &self.en,
            Lang::Zh => &self.zh,
        }
    }
}

/// One checked step of a lesson. `None` fields leave what the app shows unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub view: Option<SceneView>,
    pub stage: Option<StageId>,
    pub head: Option<usize>,
    pub highlight: Vec<(usize, usize)>,
    pub tiles: Vec<(usize, usize)>,
    pub narration: Localized,
    pub dwell_ms: u64,
    pub marker: Option<String>,
    pub animate: Option<Animation>,
}

/// A checked scene, ready to play.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    /// The built-in name, or the file stem of a scene read from disk.
    pub name: String,
    /// Where it came from, as errors name it: `scenes/NAME.toml` or the user's path.
    pub source: String,
    pub title: Localized,
    pub config: ModelConfig,
    /// The view the scene opens in.
    pub view: SceneView,
    pub flash: FlashBlocks,
    /// The file sets `[flash]`: the app plays on these blocks (otherwise it chooses its
    /// own from the sequence length, the same as `flash` for the scene's model, and
    /// keeps choosing when the length changes).
    pub flash_set: bool,
    pub steps: Vec<Step>,
}

impl Scene {
    /// The steps as the app plays them, narration in `lang`. The first step opens the
    /// scene's view unless it names one itself, so replaying from the start (or
    /// jumping back to step 1) shows what the scene opened with.
    pub fn script(&self, lang: Lang) -> Vec<ScriptStep> {
        let mut steps: Vec<ScriptStep> = self
            .steps
            .iter()
            .map(|s| ScriptStep {
                view: s.view,
                stage: s.stage,
                head: s.head,
                highlight: s.highlight.clone(),
                tiles: s.tiles.clone(),
                narration: s.narration.get(lang).to_string(),
                dwell_ms: s.dwell_ms,
                marker: s.marker.clone(),
                animate: s.animate,
                flash_blocks: None,
            })
            .collect();
        if let Some(first) = steps.first_mut() {
            first.view.get_or_insert(self.view);
            // The tile grid the scene chose.
            first.flash_blocks = self.flash_set.then_some(self.flash);
        }
        steps
    }

    /// Total time at speed 1, in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.steps.iter().map(|s| s.dwell_ms).sum()
    }
}
