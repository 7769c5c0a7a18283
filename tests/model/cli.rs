//! `attnviz models` and `attnviz model info` on tiny written models, and every bad-file
//! case: exit code 2 and a message naming the file and the key or tensor.

use crate::support;

use std::path::Path;

use support::gguf::{Meta, Quant, Tiny, s, tiny_llama};
use support::{attnviz, hf};

fn info_json(model: &Path) -> serde_json::Value {
    let out = attnviz()
        .args(["model", "info", model.to_str().unwrap(), "--json"])
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn model_info_json_names_shape_tokenizer_and_special_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::Q8_0).write(&p);
    let v = info_json(&p);
    for (k, want) in [
        ("format", "gguf"),
        ("arch", "llama"),
        ("name", "tiny"),
        ("tokenizer", "bpe"),
    ] {
        assert_eq!(v[k], want, "{k}");
    }
    for (k, want) in [
        ("layers", 2),
        ("heads", 4),
        ("kv_heads", 2),
        ("d_model", 32),
        ("d_head", 8),
        ("context", 64),
    ] {
        assert_eq!(v[k], want, "{k}");
    }
    assert_eq!(v["rope_base"], 100000.0);
    assert_eq!(v["vocab"], support::vocab::bpe_tokens().len());
    assert!(v["params"].as_u64().unwrap() > 0);
    assert_eq!(v["file_bytes"], std::fs::metadata(&p).unwrap().len());
    assert_eq!(v["special_tokens"][1]["text"], "<|im_start|>");
    assert_eq!(v["special_tokens"][1]["id"], 1);

    let b = dir.path().join("bert");
    hf::bert(false).write(&b, 1);
    let v = info_json(&b);
    assert_eq!(v["format"], "hf");
    assert_eq!(v["arch"], "bert");
    assert_eq!(v["tokenizer"], "wordpiece");
    assert!(v["rope_base"].is_null());
    assert_eq!(v["special_tokens"][2]["text"], "[CLS]");
}

#[test]
fn models_lists_what_attnviz_models_points_at() {
    let dir = tempfile::tempdir().unwrap();
    tiny_llama(Tiny::new(), Quant::F32).write(&dir.path().join("tiny-llama.gguf"));
    hf::gpt2().write(&dir.path().join("tiny-gpt2"), 1);
    // A broken file is skipped with a note, not fatal.
    std::fs::write(dir.path().join("broken.gguf"), b"nope").unwrap();
    let out = attnviz()
        .env("ATTNVIZ_MODELS", dir.path())
        .args(["models", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tiny-gpt2", "tiny-llama"]);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(stderr.contains("broken.gguf"), "{stderr}");
    // By name, through discovery.
    attnviz()
        .env("ATTNVIZ_MODELS", dir.path())
        .args(["model", "info", "tiny-llama"])
        .assert()
        .success()
        .stdout(predicates::str::contains("4 heads, 2 KV heads"));
    attnviz()
        .env("ATTNVIZ_MODELS", dir.path())
        .args(["model", "info", "no-such-model"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no-such-model"));
}

/// `model info` on `path` exits 2 and its message contains the path and every `needles`.
fn refused(path: &Path, needles: &[&str]) {
    let out = attnviz()
        .args(["model", "info", path.to_str().unwrap()])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains(&path.display().to_string()), "{err}");
    for n in needles {
        assert!(err.contains(n), "message lacks {n:?}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_gguf_files_exit_2_naming_file_and_key_or_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let good = tiny_llama(Tiny::new(), Quant::Q4_1);
    let bytes = good.bytes();
    let put = |name: &str, b: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    let mut wrong_magic = bytes.clone();
    wrong_magic[..4].copy_from_slice(b"GGML");
    refused(
        &put("magic.gguf", &wrong_magic),
        &["not a GGUF file", "GGML"],
    );
    let mut v1 = bytes.clone();
    v1[4..8].copy_from_slice(&1u32.to_le_bytes());
    refused(
        &put("v1.gguf", &v1),
        &["unsupported GGUF version 1", "2 and 3"],
    );
    refused(
        &put("short.gguf", &bytes[..300]),
        &["truncated GGUF header"],
    );
    refused(
        &put("cut.gguf", &bytes[..bytes.len() - 10]),
        &["output.weight", "past the end of the file"],
    );

    let write = |name: &str, g: &support::gguf::Gguf| {
        let p = dir.path().join(name);
        g.write(&p);
        p
    };
    let mut g = good.clone();
    g.tensor_mut("blk.0.attn_q.weight").ty = 16;
    refused(
        &write("iq2xxs.gguf", &g),
        &[
            "blk.0.attn_q.weight",
            "IQ2_XXS",
            "supported: F32, F16, BF16, Q8_0",
        ],
    );
    let mut g = good.clone();
    g.remove("llama.block_count");
    refused(&write("nokey.gguf", &g), &["llama.block_count"]);
    let mut g = good.clone();
    g.tensors.retain(|t| t.name != "blk.1.ffn_up.weight");
    refused(
        &write("notensor.gguf", &g),
        &["missing required tensor blk.1.ffn_up.weight"],
    );
    let mut g = good.clone();
    g.set("llama.feed_forward_length", Meta::U32(96));
    refused(
        &write("shape.gguf", &g),
        &["blk.0.ffn_gate.weight", "[32, 64]", "expected [32, 96]"],
    );
    let mut g = good.clone();
    g.set("general.architecture", s("mamba"));
    refused(
        &write("arch.gguf", &g),
        &["\"mamba\"", "supported: gemma2", "llama", "qwen3"],
    );
    let mut g = good.clone();
    g.set("tokenizer.ggml.pre", s("klingon"));
    refused(
        &write("pre.gguf", &g),
        &["tokenizer.ggml.pre", "klingon", "smollm"],
    );
    let mut g = good.clone();
    let mut nine = 4u64.to_le_bytes().to_vec();
    nine.extend(b"nine");
    g.set("llama.attention.head_count", Meta::Raw(8, nine));
    refused(
        &write("badtype.gguf", &g),
        &["llama.attention.head_count", "string"],
    );
    let mut g = good;
    g.version = 2;
    let p = write("v2.gguf", &g);
    attnviz()
        .args(["model", "info", p.to_str().unwrap()])
        .assert()
        .success();
}

#[test]
fn bad_hf_folders_exit_2_naming_file_and_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = hf::bert(false);
    f.config["hidden_size"] = 8.into();
    f.config["num_attention_heads"] = 2.into();
    let p = dir.path().join("shape");
    f.write(&p, 1);
    let v = support::vocab::wordpiece_tokens().len();
    refused(
        &p,
        &[
            "embeddings.word_embeddings.weight",
            &format!("[{v}, 16]"),
            &format!("expected [{v}, 8]"),
        ],
    );
    let mut f = hf::gpt2();
    f.config["model_type"] = "t5".into();
    let p = dir.path().join("t5");
    f.write(&p, 1);
    refused(
        &p,
        &[
            "config.json",
            "\"t5\"",
            "bert, gemma2, gemma3, gemma3_text, gpt2, gpt_neox, llama, mistral, phi3, qwen2, qwen3",
        ],
    );
    let mut f = hf::llama();
    f.tensors.remove("model.layers.1.mlp.up_proj.weight");
    let p = dir.path().join("missing");
    f.write(&p, 2);
    refused(&p, &["model.layers.1.mlp.up_proj.weight"]);
    let p = dir.path().join("empty");
    std::fs::create_dir(&p).unwrap();
    refused(&p, &["no config.json"]);
}

#[test]
fn models_finds_the_hugging_face_cache_and_ollama_blobs_by_name() {
    let dir = tempfile::tempdir().unwrap();
    // HF cache: hub/models--org--name/snapshots/<rev>/ with refs/main naming the revision.
    let repo = dir.path().join("hf/hub/models--tinyorg--tiny-bert");
    hf::bert(true).write(&repo.join("snapshots/abc123"), 1);
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "abc123").unwrap();
    // ollama: manifests/<registry>/library/<model>/<tag> -> blobs/sha256-<hex>.
    let ol = dir.path().join("ollama");
    let manifest = ol.join("manifests/registry.ollama.ai/library/tinyllama");
    std::fs::create_dir_all(&manifest).unwrap();
    std::fs::create_dir_all(ol.join("blobs")).unwrap();
    tiny_llama(Tiny::new(), Quant::F32).write(&ol.join("blobs/sha256-0123abcd"));
    let m = serde_json::json!({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:0123abcd"}]});
    std::fs::write(manifest.join("latest"), m.to_string()).unwrap();
    let run = |args: &[&str]| {
        attnviz()
            .env("HF_HOME", dir.path().join("hf"))
            .env("OLLAMA_MODELS", &ol)
            .args(args)
            .assert()
            .success()
    };
    let out = run(&["models", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tinyorg/tiny-bert", "tinyllama:latest"]);
    run(&["model", "info", "tinyorg/tiny-bert"])
        .stdout(predicates::str::contains("arch        bert"));
    run(&["model", "info", "tinyllama:latest"])
        .stdout(predicates::str::contains("arch        llama"));
}
