//! The command line of scenes and recording: `attnviz scenes`, `snapshot`, and the
//! errors of `play --record`.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn attnviz() -> Command {
    Command::cargo_bin("attnviz").unwrap()
}

#[test]
fn scenes_lists_every_built_in() {
    let out = attnviz().arg("scenes").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for (name, _) in attnviz::scene::BUILTIN_SOURCES {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{text}"
        );
    }
    assert!(text.contains("FlashAttention: tiles and the online softmax"));
    assert!(text.contains("FlashAttention：分块与在线 softmax"));
}

#[test]
fn scenes_json_has_names_titles_and_steps() {
    let out = attnviz().args(["scenes", "--json"]).output().unwrap();
    assert!(out.status.success());
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), attnviz::scene::BUILTIN_SOURCES.len());
    assert!(list.len() >= 14);
    for s in list {
        assert!(
            s["name"].is_string() && s["title"]["en"].is_string() && s["title"]["zh"].is_string()
        );
        assert!(s["steps"].as_u64().unwrap() >= 1);
        assert!(s["seconds"].as_f64().unwrap() > 0.0);
    }
    let defaults: Vec<&str> = list
        .iter()
        .filter(|s| s["default"] == true)
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(defaults, ["intro"]);
}

#[test]
fn snapshot_writes_an_svg_with_colours_and_a_text_still() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("s.svg");
    attnviz()
        .args(["snapshot", "intro", "--step", "6", "--svg"])
        .arg(&svg)
        .assert()
        .success();
    let body = std::fs::read_to_string(&svg).unwrap();
    assert!(
        body.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\"720\"")
    );
    assert!(body.contains("<title>attnviz intro, step 6: Self-attention, stage by stage</title>"));
    // Heatmap cells keep their colours: many distinct fills.
    let fills: std::collections::BTreeSet<&str> = body
        .match_indices("fill=\"#")
        .map(|(i, _)| &body[i + 6..i + 13])
        .collect();
    assert!(fills.len() > 10, "{} colours", fills.len());

    let txt = dir.path().join("s.txt");
    attnviz()
        .args([
            "snapshot",
            "causal-mask",
            "--step",
            "2",
            "--lang",
            "zh",
            "--size",
            "120x40",
            "--txt",
        ])
        .arg(&txt)
        .assert()
        .success();
    let text = std::fs::read_to_string(&txt).unwrap();
    assert_eq!(text.lines().count(), 40);
    assert!(text.contains("第一个词元只能看到自己"), "{text}");
}

#[test]
fn bad_requests_exit_2_and_say_what_is_right() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.cast");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["snapshot", "intro", "--step", "99", "--txt", "x.txt"],
            "scene 'intro' has steps 1..=9",
        ),
        (vec!["snapshot", "intro", "--step", "2"], "--svg"),
        (
            vec!["play", "nosuch", "--record", "x.cast"],
            "built-ins: intro, qkv",
        ),
        (
            vec!["play", "intro", "--speed", "0", "--record", "x.cast"],
            "--speed 0: give a factor from 0.1 to 16",
        ),
        (
            vec!["play", "intro", "--size", "5x5", "--record", "x.cast"],
            "COLSxROWS",
        ),
        (
            vec![
                "play",
                "tests/fixtures/scenes/bad-mask.toml",
                "--record",
                "x.cast",
            ],
            "bad-mask.toml:15:8: model.mask",
        ),
        (
            vec!["play", "intro", "--record", "/nonexistent-dir/x.cast"],
            "cannot write",
        ),
    ];
    for (args, says) in cases {
        attnviz()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
    }
    assert!(!out.exists());
}
