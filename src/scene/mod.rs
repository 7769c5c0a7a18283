//! Scenes: the lessons. A scene file (TOML, `version = 1`) sets a model, the view to
//! open, and a list of steps with narration in English and Chinese. This module reads
//! them ([`raw`]), checks them with `file:line:column` errors ([`validate`], `steps`,
//! [`problem`]), holds the built-in library ([`builtin`]) and gives a scene's steps for
//! one language ([`ScriptStep`]), in its own terms: the app maps them onto its views.
//!
//! The format is documented in `docs/lessons.md`; `scenes/scene.schema.json` is its JSON
//! Schema for editors.

pub mod builtin;
pub mod grid;
pub mod lesson;
mod load;
pub mod names;
pub mod pass;
pub mod pretrained;
pub mod problem;
pub mod raw;
pub mod script;
mod steps;
pub mod train;
mod train_check;
pub mod validate;
pub mod variant;
pub mod view;

pub use builtin::{BUILTIN_SOURCES, DEFAULT_SCENE, builtin, builtins};
pub use lesson::{Animation, FlashBlocks, Localized, Scene, SceneModel, Step};
pub use load::{load, load_file};
pub use pass::FlashPass;
pub use pretrained::{CompareInput, Intervention, Pretrained, PretrainedInput};
pub use problem::{Problem, SceneError};
pub use script::ScriptStep;
pub use train::{Condition, Metric, TrainLesson};
pub use validate::parse;
pub use variant::Variant;
pub use view::{ModelShow, SceneView};
