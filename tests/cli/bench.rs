//! `attnviz bench`: the JSON fields of DESIGN.md, the table, tier forcing through
//! ATTNVIZ_SIMD, and usage errors. Small sizes only: no speed is asserted here.

use assert_cmd::Command;
use attnviz::tui::ViewKind;
use serde_json::Value;

fn bench(args: &[&str], simd: Option<&str>) -> std::process::Output {
    let mut c = Command::cargo_bin("attnviz").unwrap();
    c.arg("bench").args(args);
    match simd {
        Some(s) => c.env("ATTNVIZ_SIMD", s),
        None => c.env_remove("ATTNVIZ_SIMD"),
    };
    c.output().unwrap()
}

#[test]
fn json_records_carry_every_field() {
    let out = bench(
        &[
            "--n",
            "40,33",
            "--d",
            "16",
            "--heads",
            "2",
            "--kv-heads",
            "1",
            "--threads",
            "1,2",
            "--kernels",
            "flash,naive,reference",
            "--json",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let recs = v.as_array().unwrap();
    assert_eq!(recs.len(), 2 * 3 * 2);
    for r in recs {
        for key in [
            "kernel",
            "n",
            "d",
            "heads",
            "kv_heads",
            "causal",
            "threads",
            "ms",
            "gflops",
            "peak_gflops",
            "pct_peak",
            "simd",
        ] {
            assert!(r.get(key).is_some(), "missing {key} in {r}");
        }
        let (ms, gflops, peak) = (
            r["ms"].as_f64().unwrap(),
            r["gflops"].as_f64().unwrap(),
            r["peak_gflops"].as_f64().unwrap(),
        );
        let n = r["n"].as_f64().unwrap();
        assert!(ms > 0.0 && peak > 0.0);
        assert!((gflops - 4.0 * 2.0 * n * n * 16.0 / (ms * 1e6)).abs() < 1e-6 * gflops);
        assert!((r["pct_peak"].as_f64().unwrap() - 100.0 * gflops / peak).abs() < 1e-9);
        assert!(r["reps"].as_u64().unwrap() >= 5);
        assert_eq!(r["kv_heads"], 1);
        assert_eq!(r["causal"], false);
    }
    let flash = recs.iter().find(|r| r["kernel"] == "flash").unwrap();
    let best = attnviz::kernel::Tier::best().to_string();
    assert_eq!(flash["simd"], best.as_str());
}

#[test]
fn causal_halves_the_flops_and_the_table_is_the_default() {
    let out = bench(
        &[
            "--n",
            "32",
            "--d",
            "8",
            "--heads",
            "1",
            "--threads",
            "1",
            "--kernels",
            "flash",
            "--causal",
        ],
        None,
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FMA peak") && text.contains("GFLOP/s") && text.contains("% peak"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("flash") && l.contains("yes")),
        "{text}"
    );
}

#[test]
fn attnviz_simd_forces_a_tier_or_refuses_it() {
    let out = bench(
        &[
            "--n",
            "24",
            "--d",
            "8",
            "--heads",
            "1",
            "--threads",
            "1",
            "--kernels",
            "flash",
            "--json",
        ],
        Some("scalar"),
    );
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["simd"], "scalar");

    let out = bench(&["--n", "24", "--kernels", "flash"], Some("sse9"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ATTNVIZ_SIMD"));
    let missing = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx512"
    };
    let out = bench(&["--n", "24", "--kernels", "flash"], Some(missing));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run"));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["--reps", "3"],
        vec!["--kernels", "fast"],
        vec!["--heads", "8", "--kv-heads", "3"],
        vec!["--threads", "0"],
    ] {
        let out = bench(&args, None);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn ui_bench_times_every_view() {
    let out = bench(&["--ui", "--json"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    // Without --model, the views a lesson has (model, tokens, lens, attribution and patch need a
    // real model, the train view a training run).
    let lesson = [
        ViewKind::Model,
        ViewKind::Tokens,
        ViewKind::Lens,
        ViewKind::Attribution,
        ViewKind::Patch,
        ViewKind::Train,
    ];
    for view in ViewKind::ALL.into_iter().filter(|v| !lesson.contains(v)) {
        let r = records
            .iter()
            .find(|r| r["view"] == view.name())
            .unwrap_or_else(|| panic!("no record for the {view} view"));
        assert_eq!(
            (r["cols"].as_u64(), r["rows"].as_u64()),
            (Some(200), Some(60))
        );
        let ms = r["ms_per_frame"].as_f64().unwrap();
        assert!(ms.is_finite() && ms > 0.0, "{view}: {ms}");
    }
    assert!(records.iter().all(|r| r["zoom"] == 1));
}

#[test]
fn ui_bench_model_flags_need_ui() {
    let out = bench(&["--model", "x.gguf"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ui"));
}

#[test]
fn sizes_and_threads_past_compute_limits_are_refused() {
    for (args, needle) in [
        (&["bench", "--threads", "5000"][..], "MAX_THREADS"),
        (&["bench", "--threads", "1,0"], "MAX_THREADS"),
        (&["bench", "--n", "99999999999"], "MAX_TENSOR_ELEMENTS"),
        (
            &["bench", "--n", "16,99999999999", "--heads", "1"],
            "--n 99999999999",
        ),
    ] {
        assert_cmd::cargo::cargo_bin_cmd!("attnviz")
            .args(args)
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .code(2)
            .stderr(predicates::str::contains(needle));
    }
}
