//! `compute` on the numbers that used to come out wrong: scores that overflow f32, huge
//! finite mask biases, f64 inputs outside f32's range. Every kernel gives the right
//! answer or exit 2 naming the limit; `auto` gives the right answer.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;
use ndarray::{Array2, ArrayD};
use ndarray_npy::ReadNpyExt;
use predicates::str::contains;

fn save64(dir: &Path, name: &str, rows: &[&[f64]]) -> PathBuf {
    let a = Array2::from_shape_fn((rows.len(), rows[0].len()), |(i, j)| rows[i][j]);
    let p = dir.join(name);
    ndarray_npy::write_npy(&p, &a).unwrap();
    p
}

fn save32(dir: &Path, name: &str, rows: &[&[f64]]) -> PathBuf {
    let a = Array2::from_shape_fn((rows.len(), rows[0].len()), |(i, j)| rows[i][j] as f32);
    let p = dir.join(name);
    ndarray_npy::write_npy(&p, &a).unwrap();
    p
}

/// Run compute; Ok(out, lse) as f64 on success, Err(stderr) on exit 2.
fn compute(q: &Path, k: &Path, v: &Path, extra: &[&str]) -> Result<(Vec<f64>, Vec<f64>), String> {
    let dir = q.parent().unwrap();
    let (out, lse) = (dir.join("o.npy"), dir.join("lse.npy"));
    let _ = std::fs::remove_file(&out);
    let r = cargo_bin_cmd!("attnviz")
        .arg("compute")
        .arg("--q")
        .arg(q)
        .arg("--k")
        .arg(k)
        .arg("--v")
        .arg(v)
        .arg("--out")
        .arg(&out)
        .arg("--lse")
        .arg(&lse)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    match r.status.code() {
        Some(0) => Ok((read(&out), read(&lse))),
        Some(2) => Err(stderr),
        c => panic!("exit {c:?}: {stderr}"),
    }
}

fn read(p: &Path) -> Vec<f64> {
    let f = std::fs::File::open(p).unwrap();
    if let Ok(a) = ArrayD::<f64>::read_npy(std::fs::File::open(p).unwrap()) {
        return a.iter().copied().collect();
    }
    ArrayD::<f32>::read_npy(f)
        .unwrap()
        .iter()
        .map(|&x| x as f64)
        .collect()
}

#[test]
fn scores_that_overflow_f32_are_right_in_auto_and_refused_by_the_f32_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Q in f64, so the output and the lse (9e38, beyond f32) are written in f64.
    let q = save64(d, "q.npy", &[&[3e19]]);
    let v = save32(d, "v.npy", &[&[1.0], &[2.0]]);
    for (k_rows, want) in [([3e19, 1e19], 1.0), ([-3e19, 1e19], 2.0)] {
        let k = save32(d, "k.npy", &[&[k_rows[0]], &[k_rows[1]]]);
        for kernel in ["auto", "reference"] {
            let (out, lse) = compute(&q, &k, &v, &["--kernel", kernel]).unwrap();
            assert_eq!(out, vec![want], "{kernel}");
            assert!(lse[0].is_finite(), "{kernel}: lse {lse:?}");
        }
        for kernel in ["naive", "flash"] {
            let err = compute(&q, &k, &v, &["--kernel", kernel]).unwrap_err();
            assert!(
                err.contains("scores") && err.contains("beyond"),
                "{kernel}: {err}"
            );
            assert!(err.contains("--kernel reference"), "{kernel}: {err}");
        }
    }
    // With Q in f32 the lse of 9e38 cannot be written: refused, naming the file.
    let q32 = save32(d, "q32.npy", &[&[3e19]]);
    let k = save32(d, "k.npy", &[&[3e19], &[1e19]]);
    let err = compute(&q32, &k, &v, &[]).unwrap_err();
    assert!(err.contains("lse.npy") && err.contains("float32"), "{err}");
}

#[test]
fn huge_finite_mask_biases_keep_the_real_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let q = save32(d, "q.npy", &[&[1.0], &[1.0]]);
    let k = save32(d, "k.npy", &[&[0.0], &[1.0]]);
    let v = save32(d, "v.npy", &[&[1.0], &[2.0]]);
    let e = std::f64::consts::E;
    // Row 0: -3e38 on every key (the same as no bias at all); row 1: the float32
    // minimum on key 1, as PyTorch masks.
    let mask = save64(d, "m.npy", &[&[-3e38, -3e38], &[0.0, f32::MIN as f64]]);
    let kind = format!("file:{}", mask.display());
    for kernel in ["auto", "reference", "naive", "flash"] {
        let (out, lse) = compute(
            &q,
            &k,
            &v,
            &["--kernel", kernel, "--scale", "1", "--mask", &kind],
        )
        .unwrap();
        let want0 = (1.0 + 2.0 * e) / (1.0 + e);
        assert!((out[0] - want0).abs() < 1e-5, "{kernel}: {out:?}");
        assert!((out[1] - 1.0).abs() < 1e-6, "{kernel}: {out:?}");
        let lse0 = -3e38 + (1.0 + e).ln();
        assert!(((lse[0] - lse0) / lse0).abs() < 1e-6, "{kernel}: {lse:?}");
        assert!(lse[1].abs() < 1e-6, "{kernel}: {lse:?}");
    }
    // A row whose every key is -1e300 (an f64 mask) is right where its lse fits (f64),
    // and refused, naming the limit, where it would not.
    let mask = save64(d, "m2.npy", &[&[-1e300, -1e300], &[0.0, 0.0]]);
    let kind = format!("file:{}", mask.display());
    let q64 = save64(d, "q64.npy", &[&[1.0], &[1.0]]);
    let (out, lse) = compute(&q64, &k, &v, &["--kernel", "reference", "--mask", &kind]).unwrap();
    assert!(out.iter().all(|x| x.is_finite()) && (lse[0] / -1e300 - 1.0).abs() < 1e-9);
    let err = compute(&q64, &k, &v, &["--kernel", "flash", "--mask", &kind]).unwrap_err();
    assert!(err.contains("log-sum-exp"), "{err}");
}

#[test]
fn f64_inputs_outside_the_f32_range_are_right_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Huge Q against tiny K: the scores are ordinary, so every kernel gets them right.
    let q = save64(d, "q.npy", &[&[1e100, 0.0]]);
    let k = save64(d, "k.npy", &[&[1e-100, 0.0], &[0.0, 1e-100]]);
    let v = save64(d, "v.npy", &[&[1e300], &[-1e300]]);
    let e = std::f64::consts::E;
    let want = 1e300 * (e - 1.0) / (e + 1.0);
    for kernel in ["auto", "reference", "naive", "flash"] {
        let (out, lse) = compute(&q, &k, &v, &["--kernel", kernel, "--scale", "1"]).unwrap();
        assert!(((out[0] - want) / want).abs() < 1e-5, "{kernel}: {out:?}");
        assert!((lse[0] - (e + 1.0).ln()).abs() < 1e-5, "{kernel}: {lse:?}");
    }
    // Q of 1e100 against ordinary K: scores of 1e100. auto and reference are right; the
    // f32 kernels refuse, naming the limit.
    let k = save64(d, "k.npy", &[&[1.0, 0.0], &[0.0, 1.0]]);
    let v = save64(d, "v.npy", &[&[1.0], &[2.0]]);
    for kernel in ["auto", "reference"] {
        let (out, _) = compute(&q, &k, &v, &["--kernel", kernel]).unwrap();
        assert_eq!(out, vec![1.0], "{kernel}");
    }
    for kernel in ["naive", "flash"] {
        let err = compute(&q, &k, &v, &["--kernel", kernel]).unwrap_err();
        assert!(err.contains("beyond"), "{kernel}: {err}");
    }
    // An f32 Q makes the output f32: 1e300 cannot be written, and is refused.
    let q32 = save32(d, "q32.npy", &[&[1.0, 0.0]]);
    let v = save64(d, "v.npy", &[&[1e300], &[1e300]]);
    let err = compute(&q32, &k, &v, &["--kernel", "reference"]).unwrap_err();
    assert!(err.contains("float32") && err.contains("o.npy"), "{err}");
    // Tiny f64 V survives the f32 kernels too.
    let v = save64(d, "v.npy", &[&[1e-300], &[1e-300]]);
    let q = save64(d, "q.npy", &[&[1.0, 0.0]]);
    for kernel in ["naive", "flash"] {
        let (out, _) = compute(&q, &k, &v, &["--kernel", kernel]).unwrap();
        assert!((out[0] / 1e-300 - 1.0).abs() < 1e-6, "{kernel}: {out:?}");
    }
    // And scores that overflow even f64 are refused by the reference too.
    let q = save64(d, "q.npy", &[&[1e200, 0.0]]);
    let k = save64(d, "k.npy", &[&[1e200, 0.0], &[0.0, 1.0]]);
    cargo_bin_cmd!("attnviz")
        .args(["compute", "--kernel", "reference", "--out"])
        .arg(d.join("x.npy"))
        .arg("--q")
        .arg(&q)
        .arg("--k")
        .arg(&k)
        .arg("--v")
        .arg(d.join("v.npy"))
        .assert()
        .code(2)
        .stderr(contains("f64 reference"));
}
