//! What the model commands share: the token ids a model reads (text or `--ids`), the
//! forward options from the intervention flags, token JSON and model-file paths.

use std::path::PathBuf;

use serde::Serialize;

use crate::cli::ModelForwardArgs;
use crate::error::{Error, Result};
use crate::model::forward::ForwardOptions;
use crate::model::load::LoadedModel;

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
