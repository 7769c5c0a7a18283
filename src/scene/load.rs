//! Finding a scene: a built-in by name, or a file by path.

use std::path::Path;

use super::builtin;
use super::lesson::Scene;
use super::validate::parse;
use crate::error::{Error, Result};

/// A built-in scene by name, or a scene file by path.
///
/// A name that is neither gets an error listing the built-ins.
pub fn load(name_or_path: &str) -> Result<Scene> {
    if let Some(scene) = builtin::source(name_or_path) {
        return builtin::builtin(scene.0);
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

/// Bytes of a scene file: the longest built-in lesson is some tens of KB.
const MAX_SCENE_BYTES: u64 = 4 << 20;

/// Read and check a scene file.
pub fn load_file(path: &Path) -> Result<Scene> {
    std::fs::metadata(path)
        .map_err(|e| Error::file(path, format!("cannot read the scene: {e}")))?;
    let src = crate::input::read_text_limited(path, MAX_SCENE_BYTES, "a scene file")?;
    let name = path
        .file_stem()
        .map_or_else(|| "scene".into(), |s| s.to_string_lossy().into_owned());
    Ok(parse(&name, &path.display().to_string(), &src)?)
}
