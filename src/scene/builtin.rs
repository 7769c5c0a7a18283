//! The built-in lessons: `scenes/*.toml`, embedded in the binary.

use super::{Scene, parse};
use crate::error::{Error, Result};

/// The scene the app opens when none is named.
pub const DEFAULT_SCENE: &str = "intro";

macro_rules! scenes {
    ($($name:literal),* $(,)?) => {
        /// Every built-in scene as (name, TOML source), in the order of the course.
        pub const BUILTIN_SOURCES: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../scenes/", $name, ".toml")))),*
        ];
    };
}

scenes![
    "intro",
    "qkv",
    "scaled-dot",
    "softmax-stability",
    "padding-mask",
    "causal-mask",
    "multi-head",
    "why-position",
    "sinusoidal",
    "rope",
    "alibi",
    "memory-wall",
    "flash-tiling",
    "flash2-loop-order",
    "flash-backward",
    "kv-cache",
    "gqa",
    "sliding-window",
    "bigbird",
    "linear-attention",
    // Trains its own small model as it plays (`[train]`).
    "induction-heads",
    // On trained models (`[pretrained]`): they need the model files to play.
    "attention-sinks",
    "weights-contributions",
    "logit-lens",
    "answer-heads",
    "fact-patching",
    "induction-real",
    "induction-circuit",
    "gqa-real",
    "rope-real",
    "bert-attention",
];

/// The names of the built-in scenes, in course order.
pub fn names() -> Vec<&'static str> {
    BUILTIN_SOURCES.iter().map(|(n, _)| *n).collect()
}

pub(crate) fn source(name: &str) -> Option<(&'static str, &'static str)> {
    BUILTIN_SOURCES.iter().copied().find(|(n, _)| *n == name)
}

/// A built-in scene by name.
pub fn builtin(name: &str) -> Result<Scene> {
    let (name, src) = source(name).ok_or_else(|| {
        Error::usage(format!(
            "no built-in scene '{name}'; built-ins: {}",
            names().join(", ")
        ))
    })?;
    // The built-ins are checked by the tests; a failure here is attnviz's own bug.
    parse(name, &format!("scenes/{name}.toml"), src)
        .map_err(|e| Error::Internal(format!("built-in scene is invalid: {e}")))
}

/// Every built-in scene, checked, in course order.
pub fn builtins() -> Result<Vec<Scene>> {
    names().into_iter().map(builtin).collect()
}
