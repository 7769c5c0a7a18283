//! Scenes: the lessons. A scene file (TOML, `version = 1`) sets a model, the view to
//! open, and a list of steps with narration in English and Chinese. This module reads
//! them ([`raw`]), checks them with `file:line:column` errors ([`validate`], `steps`,
//! [`problem`]), holds the built-in library ([`builtin`]) and turns a scene into the
//! app's [`ScriptStep`]s for one language.
//!
//! The format is documented in `scenes/README.md`; `scenes/scene.schema.json` is its JSON
//! Schema for editors.

use std::path::Path;

use crate::cli::Lang;
use crate::engine::pipeline::{ModelConfig, StageId};
use crate::error::{Error, Result};
use crate::tui::ViewKind;
use crate::tui::script::ScriptStep;

pub mod builtin;
pub mod names;
pub mod problem;
pub mod raw;
mod steps;
pub mod validate;

pub use builtin::{BUILTIN_SOURCES, DEFAULT_SCENE, builtin, builtins};
pub use problem::{Problem, SceneError};
pub use validate::parse;

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

/// Block sizes of the flash view's tile grid: `br` query rows by `bc` key columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashBlocks {
    pub br: usize,
    pub bc: usize,
}

/// One checked step of a lesson. `None` fields leave what the app shows unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub view: Option<ViewKind>,
    pub stage: Option<StageId>,
    pub head: Option<usize>,
    pub highlight: Vec<(usize, usize)>,
    pub tiles: Vec<(usize, usize)>,
    pub narration: Localized,
    pub dwell_ms: u64,
    pub marker: Option<String>,
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
    pub view: ViewKind,
    pub flash: FlashBlocks,
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
            })
            .collect();
        if let Some(first) = steps.first_mut() {
            first.view.get_or_insert(self.view);
        }
        steps
    }

    /// Total time at speed 1, in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.steps.iter().map(|s| s.dwell_ms).sum()
    }
}

/// A built-in scene by name, or a scene file by path.
///
/// A name that is neither gets an error listing the built-ins.
pub fn load(name_or_path: &str) -> Result<Scene> {
    if let Some(scene) = builtin::source(name_or_path) {
        return builtin(scene.0);
    }
    let path = Path::new(name_or_path);
    if path.exists() || name_or_path.ends_with(".toml") {
        return load_file(path);
    }
    Err(Error::usage(format!(
        "no built-in scene '{name_or_path}' and no file of that name; built-ins: {} (or give a path to a .toml file)",
        builtin::names().join(", ")
    )))
}

/// Read and check a scene file.
pub fn load_file(path: &Path) -> Result<Scene> {
    let src = std::fs::read_to_string(path)
        .map_err(|e| Error::file(path, format!("cannot read the scene: {e}")))?;
    let name = path
        .file_stem()
        .map_or_else(|| "scene".into(), |s| s.to_string_lossy().into_owned());
    Ok(parse(&name, &path.display().to_string(), &src)?)
}
