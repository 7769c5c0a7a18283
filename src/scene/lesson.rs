//! A checked scene: its texts in both languages, its model, the view it opens, the
//! flash view's block sizes and its steps.

pub use super::grid::{Animation, FlashBlocks};
use super::pass::FlashPass;
use super::pretrained::{Intervention, Pretrained};
use super::script::ScriptStep;
use super::train::{Condition, TrainLesson};
use super::variant::Variant;
use super::view::{ModelShow, SceneView};
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

/// The model a lesson runs on.
#[derive(Debug, Clone, PartialEq)]
pub enum SceneModel {
    /// A small model with seeded random weights (`[model]`).
    Toy(ModelConfig),
    /// A trained model (`[pretrained]`).
    Pretrained(Pretrained),
    /// A small model trained as the lesson plays (`[train]`).
    Train(TrainLesson),
}

/// One checked step of a lesson. `None` fields leave what the app shows unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub view: Option<SceneView>,
    pub stage: Option<StageId>,
    pub head: Option<usize>,
    /// A trained model's layer, from 0.
    pub layer: Option<usize>,
    /// What the model view shows.
    pub show: Option<ModelShow>,
    /// The model and tokens views draw contributions (true) or weights (None: stay).
    pub contributions: Option<bool>,
    /// The lens view's cells show the target (true) or the top token (None: stay).
    pub lens_target: Option<bool>,
    /// The patch view's sites (None: stay).
    pub patch: Option<crate::model::patching::PatchWhat>,
    /// The model view lists the heads writing into the cursor's head (None: stay).
    pub writers: Option<bool>,
    /// Interventions in force from this step on.
    pub intervene: Option<Intervention>,
    pub highlight: Vec<(usize, usize)>,
    pub tiles: Vec<(usize, usize)>,
    /// The variants view's panel.
    pub variant: Option<Variant>,
    /// The flash view's pass.
    pub pass: Option<FlashPass>,
    pub narration: Localized,
    pub dwell_ms: u64,
    pub marker: Option<String>,
    pub animate: Option<Animation>,
    /// A `[train]` lesson's step waits for this (skipped if the run ends without it).
    pub when: Option<Condition>,
}

/// A checked scene, ready to play.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    /// The built-in name, or the file stem of a scene read from disk.
    pub name: String,
    /// Where it came from, as errors name it: `scenes/NAME.toml` or the user's path.
    pub source: String,
    pub title: Localized,
    pub model: SceneModel,
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
                layer: s.layer,
                show: s.show,
                contributions: s.contributions,
                lens_target: s.lens_target,
                patch: s.patch,
                writers: s.writers,
                intervene: s.intervene.clone(),
                highlight: s.highlight.clone(),
                tiles: s.tiles.clone(),
                variant: s.variant,
                pass: s.pass,
                narration: s.narration.get(lang).to_string(),
                dwell_ms: s.dwell_ms,
                marker: s.marker.clone(),
                animate: s.animate,
                flash_blocks: None,
                when: s.when,
            })
            .collect();
        if let Some(first) = steps.first_mut() {
            first.view.get_or_insert(self.view);
            // Replaying from the first step must also undo a later step's layer, display
            // and interventions.
            if self.pretrained().is_some() {
                first.layer.get_or_insert(0);
                first.show.get_or_insert(ModelShow::Maps);
                first.contributions.get_or_insert(false);
                first.lens_target.get_or_insert(false);
                first.writers.get_or_insert(false);
                first.intervene.get_or_insert_with(Intervention::default);
            }
            // Replaying from the first step must undo a later step's backward pass.
            first.pass.get_or_insert(FlashPass::Forward);
            // The tile grid the scene chose.
            first.flash_blocks = self.flash_set.then_some(self.flash);
        }
        steps
    }

    /// The seeded model of a lesson on the mechanics; `None` for a trained model's.
    pub fn toy(&self) -> Option<&ModelConfig> {
        match &self.model {
            SceneModel::Toy(c) => Some(c),
            _ => None,
        }
    }

    /// The trained model a lesson runs on, if it runs on one.
    pub fn pretrained(&self) -> Option<&Pretrained> {
        match &self.model {
            SceneModel::Pretrained(p) => Some(p),
            _ => None,
        }
    }

    /// The run a lesson trains as it plays, if it trains one.
    pub fn train(&self) -> Option<&TrainLesson> {
        match &self.model {
            SceneModel::Train(t) => Some(t),
            _ => None,
        }
    }

    /// Total time at speed 1, in milliseconds (a [train] lesson's at most: its steps'
    /// dwell and the whole run, some of which they overlap).
    pub fn duration_ms(&self) -> u64 {
        let run = self.train().map_or(0, TrainLesson::duration_ms);
        self.steps.iter().map(|s| s.dwell_ms).sum::<u64>() + run
    }
}
