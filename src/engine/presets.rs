//! Real model configurations for the calculators and the decode view.
//!
//! The numbers are the published ones: LLaMA 2 (Touvron et al. 2023, Table 1 and the
//! released `params.json`), Llama 3 (Meta's model cards and `config.json`), Mistral 7B
//! v0.1 (Jiang et al. 2023, Table 1). Only the fields that size attention are kept.

use crate::error::{Error, Result};

/// The attention-relevant shape of one published model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ModelPreset {
    /// The name a user types, e.g. `llama2-70b`.
    pub name: &'static str,
    /// The model as its authors name it, e.g. "LLaMA 2 70B".
    pub title: &'static str,
    pub layers: u64,
    pub d_model: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads: `heads` for MHA, fewer for GQA.
    pub kv_heads: u64,
    /// The context length the model was trained for (the default `--seq` with a preset).
    pub context: u64,
    /// Sliding-window size if the model attends through a window (Mistral), which caps
    /// its cache with a rolling buffer of this many positions.
    pub sliding_window: Option<u64>,
}

impl ModelPreset {
    /// Width of one head: d_model / heads.
    pub fn d_head(&self) -> u64 {
        self.d_model / self.heads
    }
}

/// Every preset, smallest family member first.
pub const PRESETS: [ModelPreset; 6] = [
    ModelPreset {
        name: "llama2-7b",
        title: "LLaMA 2 7B",
        layers: 32,
        d_model: 4096,
        heads: 32,
        kv_heads: 32,
        context: 4096,
        sliding_window: None,
    },
    ModelPreset {
        name: "llama2-13b",
        title: "LLaMA 2 13B",
        layers: 40,
        d_model: 5120,
        heads: 40,
        kv_heads: 40,
        context: 4096,
        sliding_window: None,
    },
    ModelPreset {
        name: "llama2-70b",
        title: "LLaMA 2 70B",
        layers: 80,
        d_model: 8192,
        heads: 64,
        kv_heads: 8,
        context: 4096,
        sliding_window: None,
    },
    ModelPreset {
        name: "llama3-8b",
        title: "Llama 3 8B",
        layers: 32,
        d_model: 4096,
        heads: 32,
        kv_heads: 8,
        context: 8192,
        sliding_window: None,
    },
    ModelPreset {
        name: "llama3-70b",
        title: "Llama 3 70B",
        layers: 80,
        d_model: 8192,
        heads: 64,
        kv_heads: 8,
        context: 8192,
        sliding_window: None,
    },
    ModelPreset {
        name: "mistral-7b",
        title: "Mistral 7B v0.1",
        layers: 32,
        d_model: 4096,
        heads: 32,
        kv_heads: 8,
        context: 8192,
        sliding_window: Some(4096),
    },
];

/// The preset called `name`. Case, dashes, underscores and dots are ignored, so
/// `Llama-2-70B` finds `llama2-70b`.
pub fn find(name: &str) -> Result<&'static ModelPreset> {
    let key = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '-' | '_' | '.' | ' '))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let wanted = key(name);
    PRESETS
        .iter()
        .find(|p| key(p.name) == wanted)
        .ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            Error::usage(format!(
                "--preset '{name}' is not a known model; expected one of {}",
                names.join(", ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_consistent() {
        for p in PRESETS {
            assert_eq!(p.d_model % p.heads, 0, "{}", p.name);
            assert_eq!(p.heads % p.kv_heads, 0, "{}", p.name);
            assert_eq!(
                p.d_head(),
                128,
                "{}: every preset has 128-wide heads",
                p.name
            );
        }
    }

    #[test]
    fn names_are_found_loosely_and_unknown_names_listed() {
        assert_eq!(find("Llama-2-70B").unwrap().kv_heads, 8);
        assert_eq!(find("mistral_7b").unwrap().sliding_window, Some(4096));
        let err = find("gpt5").unwrap_err().to_string();
        assert!(err.contains("gpt5") && err.contains("llama3-70b"), "{err}");
    }
}
