//! `attnviz kv-cache` and `attnviz memory` end to end: the figures of DESIGN.md's
//! errata, the JSON contract, presets and overrides, and exit code 2 for bad input.

use assert_cmd::cargo::cargo_bin_cmd;
use predicates::str::contains;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let out = cargo_bin_cmd!("attnviz")
        .args(args)
        .arg("--json")
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).expect("stdout is JSON")
}

fn fails_with(args: &[&str], needle: &str) {
    cargo_bin_cmd!("attnviz")
        .args(args)
        .assert()
        .code(2)
        .stderr(contains(needle));
}

#[test]
fn llama2_70b_at_4096_fp16_is_1_34_gb_and_10_7_gb_for_mha() {
    for args in [
        &[
            "kv-cache",
            "--preset",
            "llama2-70b",
            "--seq",
            "4096",
            "--dtype",
            "f16",
        ][..],
        &[
            "kv-cache",
            "--layers",
            "80",
            "--d-model",
            "8192",
            "--heads",
            "64",
            "--kv-heads",
            "8",
            "--seq",
            "4096",
        ][..],
    ] {
        let v = json(args);
        assert_eq!(v["bytes"], 1_342_177_280u64, "{args:?}");
        assert_eq!(v["mha_bytes"], 10_737_418_240u64);
        assert_eq!(v["per_token_bytes"], 327_680);
        assert_eq!(v["bytes_human"], "1.34 GB");
        assert_eq!(v["mha_bytes_human"], "10.7 GB");
        assert_eq!(v["gqa_ratio"], 8);
        assert!(
            v["formula"]
                .as_str()
                .unwrap()
                .contains("kv_heads 8 x d_head 128")
        );
    }
}

#[test]
fn table_shows_both_figures_and_the_formula() {
    cargo_bin_cmd!("attnviz")
        .args(["kv-cache", "--preset", "llama2-70b"])
        .assert()
        .success()
        .stdout(contains("1.34 GB"))
        .stdout(contains("10.7 GB"))
        .stdout(contains("2 (K and V) x batch 1 x seq 4096"))
        .stdout(contains("<- this config"));
}

#[test]
fn presets_carry_their_real_shapes_and_flags_override_them() {
    let v = json(&["kv-cache", "--preset", "llama3-8b"]);
    assert_eq!(v["config"]["layers"], 32);
    assert_eq!(v["config"]["kv_heads"], 8);
    assert_eq!(
        v["config"]["seq"], 8192,
        "a preset's seq defaults to its context"
    );
    // 2 x 8192 x 32 x 8 x 128 x 2 B
    assert_eq!(v["bytes"], 1_073_741_824u64);

    let mqa = json(&[
        "kv-cache",
        "--preset",
        "llama2-7b",
        "--kv-heads",
        "1",
        "--seq",
        "100",
    ]);
    assert_eq!(mqa["sharing"], "MQA");
    assert_eq!(mqa["bytes"], 2 * 100 * 32 * 128 * 2);
    assert_eq!(mqa["mha_bytes"], 2 * 100 * 32 * 32 * 128 * 2);

    let batch = json(&[
        "kv-cache",
        "--preset",
        "llama2-13b",
        "--batch",
        "4",
        "--dtype",
        "int8",
    ]);
    assert_eq!(batch["bytes"], 2u64 * 4 * 4096 * 40 * 40 * 128);

    let mistral = json(&["kv-cache", "--preset", "mistral-7b", "--seq", "32768"]);
    assert_eq!(mistral["config"]["sliding_window"], 4096);
    assert_eq!(
        mistral["rolling_buffer_bytes"].as_u64().unwrap() * 8,
        mistral["bytes"].as_u64().unwrap()
    );
    for name in [
        "llama2-7b",
        "llama2-13b",
        "llama2-70b",
        "llama3-8b",
        "llama3-70b",
        "mistral-7b",
    ] {
        json(&["kv-cache", "--preset", name]);
    }
}

#[test]
fn kv_cache_refuses_bad_input_with_exit_2() {
    fails_with(
        &[
            "kv-cache",
            "--layers",
            "2",
            "--d-model",
            "64",
            "--heads",
            "8",
            "--kv-heads",
            "3",
            "--seq",
            "4",
        ],
        "--kv-heads 3 does not divide --heads 8",
    );
    fails_with(
        &[
            "kv-cache",
            "--layers",
            "2",
            "--d-model",
            "100",
            "--heads",
            "8",
            "--kv-heads",
            "8",
            "--seq",
            "4",
        ],
        "--d-model 100 is not divisible by --heads 8",
    );
    fails_with(
        &[
            "kv-cache",
            "--layers",
            "2",
            "--d-model",
            "64",
            "--heads",
            "8",
        ],
        "--kv-heads G, --seq N",
    );
    fails_with(&["kv-cache"], "--layers L");
    fails_with(&["kv-cache", "--preset", "gpt-9"], "llama2-7b");
    fails_with(
        &["kv-cache", "--preset", "llama2-70b", "--seq", "0"],
        "--seq is 0",
    );
    fails_with(
        &["kv-cache", "--preset", "llama2-70b", "--dtype", "f8"],
        "f8",
    );
}

#[test]
fn n_8192_fp32_scores_are_268_mb_per_head() {
    let v = json(&["memory", "--n", "8192"]);
    assert_eq!(v["matrix_bytes"], 268_435_456u64);
    assert_eq!(v["matrix_bytes_human"], "268 MB");
    let n = 8192u64;
    let d = 64u64;
    assert_eq!(v["standard_hbm_accesses"], 4 * n * d + 4 * n * n);
    // M = 192 KiB / 4 B = 49152; Bc = ceil(M / 4d) = 192; Br = min(Bc, d) = 64; Tc = 43.
    assert_eq!(v["blocks"]["bc"], 192);
    assert_eq!(v["blocks"]["br"], 64);
    let tc = 43;
    assert_eq!(
        v["flash_hbm_accesses"],
        n * d + 2 * n + 2 * n * d + tc * (3 * n * d + 4 * n)
    );
    let f = v["formula"].as_str().unwrap();
    assert!(
        f.contains("Theta(N d + N^2)") && f.contains("Theta(N^2 d^2 / M)"),
        "{f}"
    );
    assert!(
        !f.contains("N^2 d / M)"),
        "the erratum's O(N^2 d / M) must not appear"
    );
    assert_eq!(
        v["flash_theta"].as_f64().unwrap(),
        (n * n * d * d) as f64 / 49152.0
    );
    let fp16 = json(&["memory", "--n", "8192", "--dtype", "f16"]);
    assert_eq!(fp16["matrix_bytes"], 134_217_728u64);
}

#[test]
fn memory_takes_blocks_heads_and_sram_from_flags() {
    let v = json(&[
        "memory", "--n", "1000", "--d", "16", "--br", "10", "--bc", "100", "--heads", "2",
    ]);
    assert_eq!(v["blocks"]["tc"], 10);
    assert_eq!(v["blocks"]["tr"], 100);
    let (n, d) = (1000u64, 16u64);
    let per_head = n * d + 2 * n + 2 * n * d + 10 * (3 * n * d + 4 * n);
    assert_eq!(v["flash_hbm_accesses"], 2 * per_head);
    let small = json(&["memory", "--n", "4096", "--sram-kib", "16"]);
    let large = json(&["memory", "--n", "4096", "--sram-kib", "256"]);
    assert!(small["flash_hbm_accesses"].as_u64() > large["flash_hbm_accesses"].as_u64());
    assert_eq!(
        small["standard_hbm_accesses"],
        large["standard_hbm_accesses"]
    );
}

#[test]
fn memory_table_and_errors() {
    cargo_bin_cmd!("attnviz")
        .args(["memory", "--n", "8192"])
        .assert()
        .success()
        .stdout(contains("268,435,456 B (268 MB, 256 MiB)"))
        .stdout(contains("Bc = ceil(M / 4d) = 192"))
        .stdout(contains("load Q_i, O_i, l_i, m_i (line 8)"));
    fails_with(&["memory", "--n", "0"], "--n is 0");
    fails_with(&["memory", "--n", "64", "--br", "0"], "--br is 0");
    fails_with(
        &["memory", "--n", "64", "--sram-kib", "0"],
        "--sram-kib is 0",
    );
    fails_with(&["memory", "--n", "4294967296000"], "64 bits");
    fails_with(&["memory"], "--n");
}
