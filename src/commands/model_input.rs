//! What the model commands share: the token ids a model reads (text or `--ids`), the
//! forward options from the intervention flags, token JSON and model-file paths.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cli::ModelForwardArgs;
use crate::error::{Error, Result};
use crate::model::PosKind;
use crate::model::forward::ForwardOptions;
use crate::model::load::LoadedModel;

/// Tokens a RoPE model reads even when it states a shorter context.
pub const MIN_TOKEN_CEILING: usize = 1024;

/// One token as the JSON outputs show it: its id and decoded piece.
#[derive(Debug, Clone, Serialize)]
pub struct TokenJson {
    pub id: u32,
    pub text: String,
}

pub fn tokens_json(m: &LoadedModel, ids: &[u32]) -> Vec<TokenJson> {
    ids.iter()
        .map(|&id| TokenJson {
            id,
            text: m.tokenizer.piece(id),
        })
        .collect()
}

/// The ids of `--text` (the model's tokenizer, its special tokens added) or `--ids`
/// (checked against the vocabulary, used as given).
pub fn input_ids(m: &LoadedModel, text: Option<&str>, ids: Option<&[u32]>) -> Result<Vec<u32>> {
    let out = match (text, ids) {
        (Some(t), _) => {
            let v = m.tokenizer.encode(t)?;
            if v.is_empty() {
                return Err(Error::usage(format!(
                    "--text {t:?} gives no tokens; give a word or two"
                )));
            }
            v
        }
        (None, Some(ids)) => {
            let vocab = m.config.vocab;
            if let Some(&bad) = ids.iter().find(|&&id| id as usize >= vocab) {
                return Err(Error::usage(format!(
                    "--ids: token id {bad} is out of range; {} has {vocab} ids (0..{})",
                    m.name,
                    vocab - 1
                )));
            }
            if ids.is_empty() {
                return Err(Error::usage("--ids is empty; give ids such as --ids 1,2,3"));
            }
            ids.to_vec()
        }
        (None, None) => return Err(Error::usage("give --text TEXT or --ids 1,2,..")),
    };
    // Memory grows with n^2 (every layer's weights): a learned position table ends at
    // the model's context; a RoPE model runs past it, up to at least
    // MIN_TOKEN_CEILING (small models state short contexts), and no further.
    let context = m.config.context;
    let most = match m.config.pos {
        PosKind::Learned => context,
        PosKind::Rope { .. } => context.max(MIN_TOKEN_CEILING),
    };
    if out.len() > most {
        let flag = if text.is_some() { "--text" } else { "--ids" };
        return Err(Error::usage(format!(
            "{flag} gives {} tokens but {} reads at most {most} (its context length is {context}); give a shorter input",
            out.len(),
            m.name
        )));
    }
    Ok(out)
}

/// Forward options from the intervention flags; attention kept, all logits.
pub fn forward_options(a: &ModelForwardArgs) -> ForwardOptions {
    ForwardOptions {
        threads: a.threads,
        ablate: a.ablate.clone(),
        mask: a.mask.clone(),
        rope_base: a.rope_base,
        no_pe: a.no_pe,
        ..ForwardOptions::default()
    }
}

/// Refuse an output `flag` `out` that would overwrite the model: its file, or any path
/// inside its folder (subfolders too: MiniLM keeps `1_Pooling/config.json`).
pub fn refuse_model_output(flag: &str, out: &Path, m: &LoadedModel) -> Result<()> {
    if m.path.is_dir()
        && let Ok(dir) = std::fs::canonicalize(&m.path)
        && crate::output::future_path(out).starts_with(&dir)
    {
        return Err(Error::file(
            out,
            format!(
                "{flag} is inside the model folder {}; write the output outside it, so no file of the model is replaced",
                m.path.display()
            ),
        ));
    }
    let files = model_files(m);
    let inputs: Vec<(&str, &Path)> = files.iter().map(|p| ("MODEL", p.as_path())).collect();
    crate::output::refuse_overwrite(flag, out, &inputs)
}

/// The files a model was read from (an output must not overwrite any of them).
pub fn model_files(m: &LoadedModel) -> Vec<PathBuf> {
    if m.path.is_dir() {
        match std::fs::read_dir(&m.path) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(_) => vec![m.path.clone()],
        }
    } else {
        vec![m.path.clone()]
    }
}

pub fn to_json<T: Serialize>(v: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(v)
        .map_err(|e| Error::Internal(format!("cannot write JSON: {e}")))?;
    s.push('\n');
    Ok(s)
}
