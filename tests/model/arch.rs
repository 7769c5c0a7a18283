//! Eight architectures against transformers: tiny random Llama 3, Mistral, Qwen 2, Qwen 3,
//! Gemma 2, Gemma 3, Phi-3 and GPT-NeoX models, each as a Hugging Face folder and as the
//! GGUF file llama.cpp's converter writes for it (`tests/data/models/arch/`, made by
//! `tests/data/models/make_arch_models.py`). For both files: every attention weight within
//! 1e-4 of transformers' float64 eager attention, the mean next-token loss within 1e-4,
//! the same top-5 next tokens and the same 6 greedy tokens.
//!
//! Where a GGUF cannot carry what the folder says (llama.cpp's converter writes no key and
//! llama.cpp fixes the value in code: Mistral's sliding window, Gemma's
//! query_pre_attn_scalar), expected.json gives the values of what the file means to
//! llama.cpp under "gguf", and the GGUF is held to those.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use attnviz::model::generate::{GenerateOptions, generate};
use attnviz::model::{ForwardOptions, LoadedModel, forward, load, token_loss, top_k};
use serde_json::Value;

const ATTN_TOL: f64 = 1e-4;
const LOSS_TOL: f64 = 1e-4;
/// Attention mismatches listed in a failure message (the count and the worst are always).
const SHOW: usize = 12;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/arch")
}

fn expected() -> &'static Value {
    static E: OnceLock<Value> = OnceLock::new();
    E.get_or_init(|| {
        let p = dir().join("expected.json");
        let text = std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    })
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("an array of ids")
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

/// Runs `f`, turning an error or a panic into a message that says what was being done.
fn attempt<T>(what: &str, f: impl FnOnce() -> attnviz::error::Result<T>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what} failed: {e}")),
        Err(p) => Err(format!("{what} panicked: {}", panic_text(p.as_ref()))),
    }
}

/// Every difference between attnviz on `file` and the expected values `want`; empty when
/// they agree. `label` names the model and the file in each line.
fn differences(label: &str, m: &LoadedModel, ids: &[u32], want: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let n = ids.len();
    let opts = ForwardOptions {
        keep_attention: true,
        ..ForwardOptions::default()
    };
    let out = match attempt("forward", || forward(&m.config, &m.weights, ids, &opts)) {
        Ok(o) => o,
        Err(e) => return vec![format!("{label}: {e}")],
    };

    // attention [layer][head][query][key]
    let att = want["attention"].as_array().expect("attention");
    if out.attention.len() != att.len() {
        bad.push(format!(
            "{label}: {} layers of attention, want {}",
            out.attention.len(),
            att.len()
        ));
    }
    let mut over = Vec::new();
    let mut worst = (0.0f64, String::new());
    for (l, (ours, layer)) in out.attention.iter().zip(att).enumerate() {
        let layer = layer.as_array().expect("layer");
        if ours.len() != layer.len() * n * n {
            bad.push(format!(
                "{label}: layer {l} has {} attention weights, want {} heads x {n} x {n}",
                ours.len(),
                layer.len()
            ));
            continue;
        }
        for (h, head) in layer.iter().enumerate() {
            for (i, row) in head.as_array().expect("head").iter().enumerate() {
                for (j, w) in row.as_array().expect("row").iter().enumerate() {
                    let w = w.as_f64().expect("a weight");
                    let got = ours[(h * n + i) * n + j] as f64;
                    let d = (got - w).abs();
                    if d.is_nan() || d > ATTN_TOL {
                        let at = format!(
                            "layer {l} head {h} query {i} key {j}: got {got:.7}, want {w:.7} (diff {d:.2e})"
                        );
                        if d.is_nan() || d > worst.0 {
                            worst = (d, at.clone());
                        }
                        over.push(at);
                    }
                }
            }
        }
    }
    if !over.is_empty() {
        let total = over.len();
        let mut msg = format!(
            "{label}: {total} attention weights differ by more than {ATTN_TOL:e}; worst at {}",
            worst.1
        );
        for at in over.iter().take(SHOW) {
            msg.push_str(&format!("\n    {at}"));
        }
        if total > SHOW {
            msg.push_str(&format!("\n    ... and {} more", total - SHOW));
        }
        bad.push(msg);
    }

    // loss and top 5 from the logits
    let v = m.config.vocab;
    match &out.logits {
        None => bad.push(format!("{label}: the forward gave no logits")),
        Some(logits) if logits.len() != n * v => bad.push(format!(
            "{label}: {} logits, want {n} x vocab {v}",
            logits.len()
        )),
        Some(logits) => {
            let loss = token_loss(logits, v, ids);
            let mean = loss.iter().sum::<f64>() / loss.len() as f64;
            let want_loss = want["loss"].as_f64().expect("loss");
            let d = (mean - want_loss).abs();
            if d.is_nan() || d > LOSS_TOL {
                bad.push(format!(
                    "{label}: loss {mean:.7}, want {want_loss:.7} (diff {d:.2e})"
                ));
            }
            let top: Vec<u32> = top_k(&logits[(n - 1) * v..], 5)
                .iter()
                .map(|t| t.id)
                .collect();
            let want_top = ids_of(&want["top5"]);
            if top != want_top {
                bad.push(format!(
                    "{label}: top-5 next tokens {top:?}, want {want_top:?}"
                ));
            }
        }
    }

    // greedy generation
    let want_greedy = ids_of(&want["greedy"]);
    let gopts = GenerateOptions {
        max_tokens: want_greedy.len(),
        ..GenerateOptions::default()
    };
    match attempt("greedy generation", || {
        generate(&m.config, &m.weights, ids, &gopts, |_| true).map(|g| g.tokens())
    }) {
        Ok(got) if got != want_greedy => bad.push(format!(
            "{label}: greedy tokens {got:?}, want {want_greedy:?}"
        )),
        Ok(_) => {}
        Err(e) => bad.push(format!("{label}: {e}")),
    }
    bad
}

/// Loads `rel` (under tests/data/models/arch) and checks it against `name`'s values.
fn check(name: &str, rel: &str, gguf: bool) {
    let exp = &expected()[name];
    assert!(
        exp.is_object(),
        "{name}: no entry in tests/data/models/arch/expected.json"
    );
    let ids = ids_of(&exp["ids"]);
    let (want, label) = match (gguf, exp.get("gguf")) {
        (true, Some(g)) => (
            g,
            format!(
                "{name} ({rel}, as llama.cpp reads it: {})",
                exp["why"].as_str().unwrap_or("")
            ),
        ),
        _ => (exp, format!("{name} ({rel})")),
    };
    let path = dir().join(rel);
    let m = match attempt("load", || load(path.to_str().expect("a UTF-8 path"))) {
        Ok(m) => m,
        Err(e) => panic!("{label}: {e}"),
    };
    let bad = differences(&label, &m, &ids, want);
    assert!(
        bad.is_empty(),
        "{} check(s) failed:\n{}",
        bad.len(),
        bad.join("\n")
    );
    eprintln!("{label}: attention, loss, top 5 and greedy tokens match transformers");
}

macro_rules! arch_tests {
    ($($name:ident),* $(,)?) => {
        mod hf_folder {
            $(
                #[test]
                fn $name() {
                    super::check(stringify!($name), stringify!($name), false);
                }
            )*
        }
        mod gguf_file {
            $(
                #[test]
                fn $name() {
                    super::check(stringify!($name), &format!("{}.gguf", stringify!($name)), true);
                }
            )*
        }
        /// Every model in expected.json has its two tests above.
        #[test]
        fn every_expected_model_is_tested() {
            let tested = [$(stringify!($name)),*];
            let listed: Vec<&str> = expected()
                .as_object()
                .expect("an object")
                .keys()
                .map(|k| k.as_str())
                .collect();
            for k in &listed {
                assert!(tested.contains(k), "{k} is in expected.json but has no test");
            }
            for t in tested {
                assert!(listed.contains(&t), "{t} has a test but no entry in expected.json");
            }
        }
    };
}

arch_tests!(
    llama3, mistral, qwen2, qwen3, gemma2, gemma3, phi3, gpt_neox
);
