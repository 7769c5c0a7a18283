//! Gemma 3 270M in Q4_K_M (a model people download) against transformers, which loads the
//! same GGUF with `gguf_file=` and runs it in float32 on the dequantized weights:
//! `tests/data/models/make_gemma_expected.py` wrote `gemma3_expected.json` once (10 texts:
//! English, German, Korean, Chinese, code, SQL, emoji). Skipped with a message when the
//! file is absent (`tests/data/models/fetch.sh` fetches it).

use std::sync::OnceLock;

use attnviz::model::find;
use attnviz::model::forward::{ForwardOptions, forward};
use attnviz::model::load::{LoadedModel, load};
use attnviz::model::predict::{token_loss, top_k};
use serde_json::Value;

use crate::model_common::assert_greedy_matches;

const GEMMA: &str = "gemma3_270m/gemma-3-270m-q4_k_m.gguf";

/// Tolerances for a quantized file (the issue's): products on quantized blocks may round
/// the activations, which transformers' dequantized float32 weights do not.
const ATTN_TOL: f64 = 2e-2;
const LOSS_REL: f64 = 0.02;

fn gemma() -> Option<&'static LoadedModel> {
    static M: OnceLock<Option<LoadedModel>> = OnceLock::new();
    M.get_or_init(|| {
        let p = find::test_models_dir().join(GEMMA);
        if !p.exists() {
            eprintln!(
                "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
                p.display()
            );
            return None;
        }
        Some(load(p.to_str().unwrap()).unwrap())
    })
    .as_ref()
}

fn cases() -> Vec<Value> {
    let path = format!(
        "{}/tests/data/models/gemma3_expected.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str::<Value>(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn gemma3_tokens_attention_loss_and_top_token_match_transformers() {
    let Some(m) = gemma() else { return };
    let mut worst_attn = 0.0f64;
    let mut worst_loss = 0.0f64;
    for case in cases() {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        assert_eq!(
            m.tokenizer.encode(text).unwrap(),
            want,
            "tokens of {text:?}"
        );
        let n = want.len();
        let out = forward(&m.config, &m.weights, &want, &ForwardOptions::default()).unwrap();
        for (l, layer) in case["attention"].as_array().unwrap().iter().enumerate() {
            for (h, head) in layer.as_array().unwrap().iter().enumerate() {
                for (i, row) in head.as_array().unwrap().iter().enumerate() {
                    for (j, w) in row.as_array().unwrap().iter().enumerate() {
                        let ours = out.attention[l][(h * n + i) * n + j] as f64;
                        let d = (ours - w.as_f64().unwrap()).abs();
                        assert!(
                            d <= ATTN_TOL,
                            "{text:?}: layer {l} head {h} [{i}, {j}]: ours {ours}, transformers {w}"
                        );
                        worst_attn = worst_attn.max(d);
                    }
                }
            }
        }
        let logits = out.logits.as_ref().unwrap();
        let losses = token_loss(logits, m.config.vocab, &want);
        let loss = losses.iter().sum::<f64>() / losses.len() as f64;
        let theirs = case["loss"].as_f64().unwrap();
        let rel = (loss - theirs).abs() / theirs;
        assert!(
            rel <= LOSS_REL,
            "{text:?}: loss {loss} vs transformers {theirs}"
        );
        worst_loss = worst_loss.max(rel);
        let last = &logits[(n - 1) * m.config.vocab..];
        let top = top_k(last, 5);
        let want_top = ids(&case["top5"]);
        assert_eq!(top[0].id, want_top[0], "{text:?}: top-1 next token");
    }
    eprintln!(
        "gemma3: worst attention difference {worst_attn:.2e}, worst loss difference {:.3}%",
        100.0 * worst_loss
    );
}

#[test]
fn gemma3_greedy_tokens_match_transformers() {
    let Some(m) = gemma() else { return };
    for case in cases().iter().filter(|c| c.get("greedy").is_some()) {
        let name = format!("greedy after {:?}", case["text"]);
        assert_greedy_matches(
            &m.config,
            &m.weights,
            &ids(&case["ids"]),
            &ids(&case["greedy"]),
            &name,
        );
    }
}
