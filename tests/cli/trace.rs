//! `attnviz trace`: the JSON contract of DESIGN.md, both loop orders, generated inputs
//! and one head's .npy files, and clear errors for bad input.

use assert_cmd::Command;
use ndarray::Array2;
use ndarray_npy::WriteNpyExt;
use serde_json::Value;

fn attnviz() -> Command {
    Command::cargo_bin("attnviz").unwrap()
}

fn trace_json(args: &[&str]) -> Value {
    let out = attnviz().arg("trace").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn generated_inputs_follow_the_schema() {
    for lo in ["fa1", "fa2"] {
        let t = trace_json(&[
            "--n", "6", "--nk", "7", "--d", "4", "--br", "2", "--bc", "3", "--seed", "5", "--mask",
            "causal", "--loop", lo, "--json",
        ]);
        for key in [
            "n_q", "n_k", "d", "br", "bc", "loop", "scale", "events", "out", "lse",
        ] {
            assert!(t.get(key).is_some(), "missing {key}");
        }
        assert_eq!(t["n_q"], 6);
        assert_eq!(t["n_k"], 7);
        assert_eq!(t["loop"], lo);
        assert!((t["scale"].as_f64().unwrap() - 0.5).abs() < 1e-12);
        let events = t["events"].as_array().unwrap();
        assert_eq!(events.len(), 3 * 3);
        let first = &events[0];
        assert_eq!(
            (first["q_block"].as_u64(), first["k_block"].as_u64()),
            (Some(0), Some(0))
        );
        // FA2 walks key blocks inside a query block; FA1 query blocks inside a key block.
        let second = &events[1];
        let inner = if lo == "fa2" { "k_block" } else { "q_block" };
        assert_eq!(second[inner], 1, "{lo}");
        for e in events {
            let rows = e["rows"].as_array().unwrap();
            let n = (rows[1].as_u64().unwrap() - rows[0].as_u64().unwrap()) as usize;
            assert_eq!(e["m"].as_array().unwrap().len(), n);
            assert_eq!(e["l"].as_array().unwrap().len(), n);
            let o = e["o"].as_array().unwrap();
            assert_eq!(o.len(), n);
            assert!(o.iter().all(|r| r.as_array().unwrap().len() == 4));
        }
        // Nk - Nq = 1: query 0 sees keys 0 and 1, so the tile of rows 0-1 x keys 3-5 is
        // skipped, and rows 4-5 x keys 0-2 are not.
        let tile = |q: u64, k: u64| {
            events
                .iter()
                .find(|e| e["q_block"] == q && e["k_block"] == k)
                .unwrap()
        };
        assert_eq!(tile(0, 1)["skipped"], true);
        assert_eq!(tile(2, 0)["skipped"], false);
        assert_eq!(t["out"].as_array().unwrap().len(), 6);
        assert!(t["lse"].as_array().unwrap().iter().all(|x| x.is_f64()));
    }
}

#[test]
fn rows_that_have_seen_no_key_write_null_m() {
    // causal with Nq > Nk: the first Nq - Nk queries see no key at all.
    let t = trace_json(&[
        "--n", "5", "--nk", "3", "--d", "2", "--br", "5", "--bc", "3", "--mask", "causal",
    ]);
    let e = &t["events"][0];
    assert!(e["m"][0].is_null() && e["m"][1].is_null() && e["m"][2].is_f64());
    assert_eq!(e["l"][0], 0.0);
    assert_eq!(e["o"][0], serde_json::json!([0.0, 0.0]));
    assert!(t["lse"][0].is_null());
}

fn write(
    dir: &std::path::Path,
    name: &str,
    rows: usize,
    cols: usize,
    data: &[f64],
) -> std::path::PathBuf {
    let p = dir.join(name);
    Array2::from_shape_vec((rows, cols), data.to_vec())
        .unwrap()
        .write_npy(std::fs::File::create(&p).unwrap())
        .unwrap();
    p
}

#[test]
fn npy_inputs_give_the_worked_example() {
    let dir = tempfile::tempdir().unwrap();
    let q = write(
        dir.path(),
        "q.npy",
        4,
        4,
        &[
            1., 0., 2., 0., 0., 1., 1., 0., 1., 1., 0., 1., 0., 2., 1., 1.,
        ],
    );
    let k = write(
        dir.path(),
        "k.npy",
        4,
        4,
        &[
            2., 1., 0., 0., 0., 1., 1., 0., 1., 0., 1., 1., 0., 0., 2., 1.,
        ],
    );
    let v = write(dir.path(), "v.npy", 4, 2, &[1., 0., 0., 1., 1., 1., 2., 1.]);
    let (q, k, v) = (
        q.to_str().unwrap(),
        k.to_str().unwrap(),
        v.to_str().unwrap(),
    );
    let t = trace_json(&[
        "--q", q, "--k", k, "--v", v, "--br", "4", "--bc", "2", "--scale", "0.5", "--json",
    ]);
    let ev = t["events"].as_array().unwrap();
    assert_eq!(ev.len(), 2);
    let close = |v: &Value, x: f64, tol: f64| (v.as_f64().unwrap() - x).abs() < tol;
    assert!(close(&ev[0]["m"][0], 1.0, 1e-6) && close(&ev[0]["l"][0], 2.0, 1e-6));
    assert!(close(&ev[1]["m"][0], 2.0, 1e-6) && close(&ev[1]["l"][0], 2.3423, 1e-4));
    assert!(close(&ev[1]["alpha"][0], (-1.0f64).exp(), 1e-6));
    assert!(close(&t["out"][0][0], 1.2699, 1e-4) && close(&t["out"][0][1], 0.8429, 1e-4));
}

#[test]
fn bad_input_is_exit_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("q3.npy");
    ndarray::Array3::<f64>::zeros((2, 3, 4))
        .write_npy(std::fs::File::create(&p).unwrap())
        .unwrap();
    let q = p.to_str().unwrap();
    let out = attnviz()
        .args(["trace", "--q", q, "--k", q, "--v", q])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("q3.npy") && err.contains("[N, d]"), "{err}");

    let out = attnviz()
        .args(["trace", "--n", "4", "--br", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--br"));

    let out = attnviz()
        .args(["trace", "--n", "4", "--mask", "padding:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
