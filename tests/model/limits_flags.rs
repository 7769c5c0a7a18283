//! Flags whose values would exhaust memory or time, and outputs that would destroy a file
//! or a run: each exits 2 naming the flag and the limit, at once, before any work, and
//! leaves every file as it was.

use std::path::Path;
use std::time::Duration;

use crate::support;

use support::attnviz;
use support::gguf::{Meta, Quant, Tiny, tiny_llama};
use support::measure;

/// `attnviz ARGS` exits 2 within 15 s, under 1 GiB of memory, with every needle in its
/// message; its stdout and stderr.
fn refused(args: &[&str], needles: &[&str]) -> (String, String) {
    let m = measure::refused_within(args, needles, 15);
    (m.stdout, m.stderr)
}

fn as_refs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

fn tiny(dir: &Path) -> String {
    let p = dir.join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::Q8_0).write(&p);
    p.to_str().unwrap().to_string()
}

#[test]
fn token_counts_past_the_context_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = tiny(dir.path());
    refused(
        &[
            "generate",
            &m,
            "--prompt",
            "The cat",
            "--max-tokens",
            "1000000000",
        ],
        &["--max-tokens 1000000000", "context of 64"],
    );
    // A RoPE model runs past its stated context (64 here) up to 1,024 tokens.
    let ids = vec!["3"; 1025].join(",");
    refused(
        &["model", "run", &m, "--ids", &ids],
        &["--ids", "1025", "at most 1024"],
    );
    refused(&["heads", &m, "--ids", &ids], &["--ids", "1024"]);
    refused(
        &["model", "run", &m, "--ids", "3,4", "--threads", "1000"],
        &["--threads", "1000", "MAX_THREADS"],
    );
}

#[test]
fn long_inputs_are_refused_or_run_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let m = tiny(dir.path());
    // About 8,000 tokens of text, and 60,000 ids (near the 128 KiB one argument may hold).
    let text = "the cat sat. ".repeat(2000);
    let ids = vec!["3"; 60_000].join(",");
    for cmd in [&["model", "run"][..], &["heads"]] {
        let with = |flag: &str, value: &str| {
            let mut a = cmd.to_vec();
            a.extend([m.as_str(), flag, value]);
            a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        };
        refused(
            &as_refs(&with("--text", &text)),
            &["--text", "at most 1024"],
        );
        refused(
            &as_refs(&with("--ids", &ids)),
            &["--ids", "60000", "at most 1024"],
        );
    }
    // A model whose context holds the 8,000 tokens: `model run` keeps one layer's weights
    // at a time; `heads` would hold a layer's weights for every head, 1 GB, and says how
    // many tokens fit instead.
    let mut t = Tiny::new();
    t.context = 8192;
    let long = dir.path().join("long.gguf");
    tiny_llama(t, Quant::Q8_0).write(&long);
    let long = long.to_str().unwrap();
    let r = measure::run(
        &["model", "run", long, "--text", &text, "--json"],
        Duration::from_secs(120),
    );
    eprintln!("{}", r.report());
    assert_eq!(r.code, Some(0), "{}\n{}", r.report(), r.stderr);
    measure::within(&r, 30);
    refused(
        &["heads", long, "--text", &text],
        &["8002 tokens", "give at most"],
    );
}

#[test]
fn an_immediate_end_of_turn_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = tiny_llama(Tiny::new(), Quant::Q8_0);
    let p = dir.path().join("t.gguf");
    g.write(&p);
    let first = |p: &Path| -> u64 {
        let out = attnviz()
            .args(["generate", p.to_str().unwrap(), "--prompt", "the cat"])
            .args(["--max-tokens", "1", "--json"])
            .assert()
            .success();
        let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        v["new_tokens"][0]["id"].as_u64().unwrap()
    };
    // The model's greedy first token becomes its end-of-sequence token.
    let id = first(&p);
    g.set("tokenizer.ggml.eos_token_id", Meta::U32(id as u32));
    g.write(&p);
    let out = attnviz()
        .args(["generate", p.to_str().unwrap(), "--prompt", "the cat"])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        err.contains("end-of-turn token") && err.contains(&format!("#{id}")),
        "{err}"
    );
}

const SMALL: [&str; 12] = [
    "--layers",
    "1",
    "--heads",
    "1",
    "--d-model",
    "8",
    "--context",
    "8",
    "--batch",
    "2",
    "--steps",
    "2",
];

#[test]
fn train_sizes_past_memory_are_refused_before_allocating() {
    refused(
        &["train", "--layers", "64", "--d-model", "4096", "--json"],
        &["--layers 64", "--d-model 4096", "GiB", "8 GiB"],
    );
    refused(
        &[
            "train",
            "--batch",
            "9223372036854775808",
            "--context",
            "2",
            "--json",
        ],
        &["--batch 9223372036854775808"],
    );
    refused(
        &["train", "--text", "/dev/zero", "--json"],
        &["/dev/zero", "larger than"],
    );
}

#[test]
fn train_out_is_checked_before_training_and_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let train = |out: &Path| {
        let mut a: Vec<String> = vec!["train".into(), "--json".into(), "--out".into()];
        a.push(out.to_str().unwrap().into());
        a.extend(SMALL.iter().map(|s| s.to_string()));
        a
    };
    // An existing file, a folder of someone else's files, an unwritable place: refused
    // before the first step (no evaluation printed), nothing touched.
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let (out, _) = refused(&as_refs(&train(&file)), &["--out", "not a folder"]);
    assert!(out.is_empty(), "{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("thesis.tex"), "keep me").unwrap();
    let (out, _) = refused(&as_refs(&train(&other)), &["thesis.tex"]);
    assert!(out.is_empty(), "{out}");
    let nowhere = dir.path().join("no/such/parent/model");
    let (out, _) = refused(&as_refs(&train(&nowhere)), &["--out"]);
    assert!(out.is_empty(), "{out}");
    // A new folder is written whole, and an earlier model is replaced; nothing else is
    // left beside it.
    let model = dir.path().join("model");
    for _ in 0..2 {
        attnviz()
            .args(train(&model))
            .timeout(Duration::from_secs(120))
            .assert()
            .success();
        let mut names: Vec<String> = std::fs::read_dir(&model)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["config.json", "model.safetensors", "tokenizer.json"]
        );
    }
    let mut beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    beside.sort();
    assert_eq!(beside, ["model", "notes.txt", "other"]);
}

#[test]
fn attn_out_anywhere_inside_a_model_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("minilm");
    support::hf::llama().write(&m, 1);
    let sub = m.join("1_Pooling");
    std::fs::create_dir(&sub).unwrap();
    let cfg = sub.join("config.json");
    std::fs::write(&cfg, "{\"pooling\": true}").unwrap();
    for out in [cfg.clone(), sub.join("new.npy"), m.join("attn.npy")] {
        refused(
            &[
                "model",
                "run",
                m.to_str().unwrap(),
                "--ids",
                "3,4",
                "--attn-out",
                out.to_str().unwrap(),
            ],
            &["--attn-out", "inside the model folder"],
        );
        assert!(out == cfg || !out.exists(), "{}", out.display());
    }
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        "{\"pooling\": true}"
    );
}
