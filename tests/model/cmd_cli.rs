//! `attnviz model run`, `generate` and `heads` on tiny written models: JSON fields present
//! and consistent with each other, the --attn-out file, head scores recomputed here from
//! the written weights, and bad flags (exit 2, naming the flag).

use crate::support;

use std::path::{Path, PathBuf};

use ndarray::ArrayD;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use support::gguf::{Quant, Tiny, tiny_llama};
use support::{attnviz, hf};

fn llama(dir: &Path) -> PathBuf {
    let p = dir.join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::F32).write(&p);
    p
}

fn json(args: &[&str]) -> Value {
    let out = attnviz().args(args).assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = attnviz().args(args).assert().code(2);
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn ids_of(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect()
}

fn join(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

#[test]
fn model_run_json_is_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(dir.path());
    let m = m.to_str().unwrap();
    let v = json(&[
        "model",
        "run",
        m,
        "--text",
        "The cat sat on the mat",
        "--json",
        "--top-k",
        "7",
        "--rollout",
    ]);
    assert_eq!(v["model"], "tiny");
    assert_eq!(v["arch"], "llama");
    let n = v["n"].as_u64().unwrap() as usize;
    assert_eq!(v["tokens"].as_array().unwrap().len(), n);
    assert!(n >= 4, "{v}");
    assert_eq!(v["tokens"][1]["text"], " cat");
    assert_eq!(
        (
            v["layers"].as_u64(),
            v["heads"].as_u64(),
            v["kv_heads"].as_u64()
        ),
        (Some(2), Some(4), Some(2))
    );
    let top = v["top_next"].as_array().unwrap();
    assert_eq!(top.len(), 7);
    let probs: Vec<f64> = top.iter().map(|t| t["prob"].as_f64().unwrap()).collect();
    assert!(probs.windows(2).all(|w| w[0] >= w[1]), "{probs:?}");
    assert!(probs.iter().all(|&p| p > 0.0 && p < 1.0));
    assert!(
        top.iter()
            .all(|t| t["text"].is_string() && t["logit"].is_number())
    );
    let tl = f64s(&v["token_loss"]);
    assert_eq!(tl.len(), n - 1);
    let mean = tl.iter().sum::<f64>() / tl.len() as f64;
    assert!((v["loss"].as_f64().unwrap() - mean).abs() < 1e-9);
    let r = v["rollout"].as_array().unwrap();
    assert_eq!(r.len(), n);
    for row in r {
        let row = f64s(row);
        assert_eq!(row.len(), n);
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    }
    assert!(v["timing"]["load_ms"].as_f64().unwrap() >= 0.0);
    assert!(v["timing"]["forward_ms"].as_f64().unwrap() >= 0.0);

    // --ids are used as given: the same ids give the same loss; the table names the tokens.
    let ids = join(&ids_of(&v["tokens"]));
    let w = json(&["model", "run", m, "--ids", &ids, "--json"]);
    assert_eq!(w["token_loss"], v["token_loss"]);
    let out = attnviz()
        .args(["model", "run", m, "--text", "The cat sat"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("\" cat\"") && text.contains("loss"), "{text}");
}

#[test]
fn interventions_change_the_pass() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(dir.path());
    let m = m.to_str().unwrap();
    let base = json(&["model", "run", m, "--ids", "5,40,41,42,43", "--json"]);
    for extra in [
        &["--ablate", "1.2"][..],
        &["--mask", "none"],
        &["--rope-base", "10"],
        &["--no-pe"],
    ] {
        let mut a = vec!["model", "run", m, "--ids", "5,40,41,42,43", "--json"];
        a.extend_from_slice(extra);
        let v = json(&a);
        assert_ne!(v["loss"], base["loss"], "{extra:?}");
    }
}

fn read_attn(p: &Path) -> ArrayD<f32> {
    ndarray_npy::read_npy(p).unwrap()
}

#[test]
fn attn_out_has_every_layer_and_rows_sum_to_one() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(dir.path());
    let m = m.to_str().unwrap();
    let a_path = dir.path().join("a.npy");
    let v = json(&[
        "model",
        "run",
        m,
        "--ids",
        "3,50,60,70,80,90,100",
        "--json",
        "--attn-out",
        a_path.to_str().unwrap(),
    ]);
    let a = read_attn(&a_path);
    assert_eq!(a.shape(), &[2, 4, 7, 7]);
    assert_eq!(v["n"], 7);
    for l in 0..2 {
        for h in 0..4 {
            for i in 0..7 {
                let s: f32 = (0..7).map(|j| a[[l, h, i, j]]).sum();
                assert!((s - 1.0).abs() < 1e-5, "{l} {h} {i}: {s}");
                for j in i + 1..7 {
                    assert_eq!(a[[l, h, i, j]], 0.0, "causal");
                }
            }
        }
    }
    // Never over the model file.
    let before = std::fs::read(m).unwrap();
    let err = fails(&["model", "run", m, "--ids", "3,4", "--attn-out", m]);
    assert!(err.contains("--attn-out"), "{err}");
    assert_eq!(std::fs::read(m).unwrap(), before);
}

/// The scores of DESIGN.md, written again here from their definitions.
fn scores_here(a: &ArrayD<f32>, l: usize, h: usize, s: &[u64], causal: bool) -> [f64; 5] {
    let n = s.len();
    let at = |i: usize, j: usize| a[[l, h, i, j]] as f64;
    let avg = |v: Vec<f64>| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let prev = avg((1..n).map(|i| at(i, i - 1)).collect());
    let first = avg((1..n).map(|i| at(i, 0)).collect());
    let mut dup = vec![];
    let mut ind = vec![];
    let mut ent = vec![];
    for i in 0..n {
        if (0..i).any(|j| s[j] == s[i]) {
            dup.push((0..i).filter(|&j| s[j] == s[i]).map(|j| at(i, j)).sum());
        }
        if (1..i).any(|j| s[j - 1] == s[i]) {
            ind.push((1..i).filter(|&j| s[j - 1] == s[i]).map(|j| at(i, j)).sum());
        }
        let keys = if causal { i + 1 } else { n };
        if keys >= 2 {
            let e: f64 = (0..keys)
                .map(|j| at(i, j))
                .filter(|&p| p > 0.0)
                .map(|p| -p * p.ln())
                .sum();
            ent.push(e / (keys as f64).ln());
        }
    }
    [prev, first, avg(dup), avg(ind), avg(ent)]
}

fn check_heads(model: &str, ids: &[u64], causal: bool, dir: &Path) {
    let a_path = dir.join("h.npy");
    let list = join(ids);
    json(&[
        "model",
        "run",
        model,
        "--ids",
        &list,
        "--json",
        "--attn-out",
        a_path.to_str().unwrap(),
    ]);
    let a = read_attn(&a_path);
    let v = json(&["heads", model, "--ids", &list, "--json"]);
    let rows = v.as_array().unwrap();
    let (layers, heads) = (a.shape()[0], a.shape()[1]);
    assert_eq!(rows.len(), layers * heads);
    for r in rows {
        let (l, h) = (
            r["layer"].as_u64().unwrap() as usize,
            r["head"].as_u64().unwrap() as usize,
        );
        assert!(r["kv_head"].is_u64());
        let want = scores_here(&a, l, h, ids, causal);
        for (k, w) in [
            "prev_token",
            "first_token",
            "duplicate",
            "induction",
            "entropy",
        ]
        .iter()
        .zip(want)
        {
            let got = r[*k].as_f64().unwrap();
            assert!((got - w).abs() < 1e-6, "{l}.{h} {k}: {got} vs {w}");
        }
    }
}

#[test]
fn heads_scores_match_the_written_attention() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(dir.path());
    let ids = [5u64, 60, 70, 80, 60, 70, 80, 9, 60, 70, 11];
    check_heads(m.to_str().unwrap(), &ids, true, dir.path());
    let b = dir.path().join("bert");
    hf::bert(false).write(&b, 1);
    check_heads(
        b.to_str().unwrap(),
        &[2, 5, 6, 7, 5, 6, 3],
        false,
        dir.path(),
    );
}

#[test]
fn heads_default_is_the_seeded_repeated_random_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(dir.path());
    let m = m.to_str().unwrap();
    // The tiny llama adds no BOS; specials are ids 0..3; ChaCha8 from the seed.
    let vocab = support::vocab::bpe_tokens().len() as u32;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut half = vec![];
    while half.len() < 50 {
        let id = rng.random_range(0..vocab);
        if id >= 3 {
            half.push(id as u64);
        }
    }
    let seq: Vec<u64> = half.iter().chain(&half).copied().collect();
    let default = json(&["heads", m, "--seed", "7", "--json"]);
    let given = json(&["heads", m, "--ids", &join(&seq), "--json"]);
    assert_eq!(default, given);
    let out = attnviz()
        .args(["heads", m, "--sort", "prev_token"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let prev: Vec<f64> = text
        .lines()
        .skip_while(|l| !l.starts_with("LAYER"))
        .skip(1)
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    assert_eq!(prev.len(), 8);
    assert!(prev.windows(2).all(|w| w[0] >= w[1]), "{text}");
}

#[test]
fn generate_is_greedy_by_default_and_matches_repeated_forward_passes() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(dir.path());
    let m = m.to_str().unwrap();
    let g = json(&[
        "generate",
        m,
        "--prompt",
        "The cat",
        "--max-tokens",
        "4",
        "--json",
    ]);
    let prompt = ids_of(&g["prompt_tokens"]);
    let new = ids_of(&g["new_tokens"]);
    assert!(!new.is_empty() && new.len() <= 4);
    assert!(g["ms_per_token"].as_f64().unwrap() >= 0.0);
    let mut seq = prompt.clone();
    for &t in &new {
        let v = json(&[
            "model",
            "run",
            m,
            "--ids",
            &join(&seq),
            "--json",
            "--top-k",
            "1",
        ]);
        assert_eq!(v["top_next"][0]["id"].as_u64().unwrap(), t);
        seq.push(t);
    }
    // Streamed text: the same as the JSON's, and a newline.
    let out = attnviz()
        .args(["generate", m, "--prompt", "The cat", "--max-tokens", "4"])
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stdout),
        format!("{}\n", g["text"].as_str().unwrap())
    );
    // Sampling: same seed, same tokens.
    let s = [
        "generate",
        m,
        "--prompt",
        "The cat",
        "--max-tokens",
        "6",
        "--temperature",
        "1.5",
        "--seed",
        "3",
        "--json",
    ];
    assert_eq!(json(&s)["new_tokens"], json(&s)["new_tokens"]);
}

#[test]
fn encoders_run_but_do_not_generate() {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("bert");
    hf::bert(false).write(&b, 1);
    let b = b.to_str().unwrap();
    let v = json(&["model", "run", b, "--text", "the cat", "--json"]);
    let t = v["tokens"].as_array().unwrap();
    assert_eq!(t[0]["text"], "[CLS]");
    assert_eq!(t[t.len() - 1]["text"], "[SEP]");
    assert!(v.get("top_next").is_none() && v.get("loss").is_none());
    let err = fails(&["generate", b, "--prompt", "the cat"]);
    assert!(err.contains("encoder"), "{err}");
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama(dir.path());
    let m = m.to_str().unwrap();
    for (args, flag) in [
        (
            &["model", "run", m, "--ids", "1,2", "--ablate", "99.0"][..],
            "--ablate",
        ),
        (
            &["model", "run", m, "--ids", "1,2", "--ablate", "x"],
            "--ablate",
        ),
        (&["model", "run", m, "--ids", "1,999999"], "--ids"),
        (
            &["model", "run", m, "--ids", "1,2", "--text", "a"],
            "--text",
        ),
        (&["model", "run", m], "--text"),
        (&["heads", m, "--ids", "1,2", "--text", "a"], "--text"),
        (&["heads", m, "--ids", "999999"], "--ids"),
        (
            &["generate", m, "--prompt", "a", "--temperature", "-1"],
            "--temperature",
        ),
        (
            &["model", "run", m, "--ids", "1,2", "--threads", "0"],
            "--threads",
        ),
    ] {
        let err = fails(args);
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

/// A long text: `model run` needs no n x n weights and gives every token's loss; the
/// commands that read attention weights refuse a text whose one layer of weights passes
/// their limit, naming it and the longest text that fits, before any forward pass.
#[test]
fn long_texts_run_without_weights_and_weight_readers_name_their_limit() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("long.gguf");
    tiny_llama(
        Tiny {
            context: 8192,
            ..Tiny::new()
        },
        Quant::F32,
    )
    .write(&m);
    let m = m.to_str().unwrap();
    let ids: Vec<u64> = (0..6000u64).map(|i| 3 + i * 7 % 90).collect();
    let list = join(&ids);
    let v = json(&["model", "run", m, "--ids", &list, "--json"]);
    assert_eq!(v["n"], 6000);
    let losses = f64s(&v["token_loss"]);
    assert_eq!(losses.len(), 5999);
    assert!(losses.iter().all(|l| l.is_finite() && *l >= 0.0));

    // 4 heads x 6000 x 6000 f32 = 576 MB a layer, over 512 MiB.
    let err = fails(&["heads", m, "--ids", &list]);
    assert!(err.contains("heads: 6000 tokens"), "{err}");
    assert!(err.contains("give at most 5792 tokens"), "{err}");
    let out = dir.path().join("a.npy");
    let err = fails(&[
        "model",
        "run",
        m,
        "--ids",
        &list,
        "--attn-out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("--attn-out: 6000 tokens"), "{err}");
    assert!(!out.exists(), "nothing written");
    let long = join(&ids[..1100]);
    let err = fails(&["model", "run", m, "--ids", &long, "--rollout"]);
    assert!(
        err.contains("--rollout") && err.contains("at most 1024 tokens"),
        "{err}"
    );
}

/// The ablation test at the end of a run: with one head a layer there is no other head,
/// and the "induction heads" are at least the best one (so removing them all is removing
/// it).
#[test]
fn train_ends_with_the_ablation_test() {
    let args = [
        "train",
        "--layers",
        "2",
        "--heads",
        "1",
        "--d-model",
        "8",
        "--context",
        "8",
        "--vocab",
        "4",
        "--steps",
        "4",
        "--batch",
        "2",
        "--eval-every",
        "2",
        "--threads",
        "1",
    ];
    let out = attnviz().args(args).arg("--json").assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let a = &last["ablation"];
    assert_eq!(a["prev_token_head"]["layer"], 0);
    assert_eq!(a["induction_head"]["layer"], 1);
    assert_eq!(a["other_heads"].as_array().unwrap().len(), 0);
    assert_eq!(a["induction_heads"], serde_json::json!([[1, 0]]));
    assert_eq!(
        a["induction_heads_probe_loss"],
        a["induction_head"]["probe_loss"]
    );
    assert_eq!(a["prev_token_heads"], serde_json::json!([[0, 0]]));
    assert_eq!(
        a["prev_token_heads_probe_loss"],
        a["prev_token_head"]["probe_loss"]
    );
    // One head a layer: the circuit is the best pair.
    assert_eq!(a["circuit_probe_loss"], a["both_probe_loss"]);
    let both = a["both_probe_loss"].as_f64().unwrap();
    assert!(both.is_finite() && both > 0.0, "{a}");
}
