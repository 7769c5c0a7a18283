//! `compute --grad-out` against PyTorch float64 autograd: every mask (none, causal,
//! window, padding, a file keep-mask with a fully masked row), ALiBi with a head count
//! that is not a power of two, RoPE, GQA, MQA and decode shapes (Nq != Nk), with the
//! flash kernel and the f64 reference. The expected O, dQ, dK and dV were written once by
//! tests/data/backward/make_expected.py (torch never runs here); each must agree to 1e-4
//! of its largest entry.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;
use ndarray::ArrayD;
use ndarray_npy::ReadNpyExt;
use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/backward")
}

fn read(path: &Path) -> ArrayD<f64> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ArrayD::<f64>::read_npy(f)
        .or_else(|_| {
            let f = std::fs::File::open(path).unwrap();
            ArrayD::<f32>::read_npy(f).map(|a| a.mapv(f64::from))
        })
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Largest |got - want| relative to the largest |want|.
fn rel_err(got: &ArrayD<f64>, want: &ArrayD<f64>) -> f64 {
    assert_eq!(got.shape(), want.shape());
    let big = want.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f64, f64::max)
        / big
}

#[test]
fn gradients_match_float64_autograd_for_every_mask_and_shape() {
    let dir = data();
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    let cases = cases["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    let tmp = tempfile::tempdir().unwrap();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let input = |t: &str| dir.join(format!("{name}_{t}.npy"));
        for kernel in ["flash", "reference"] {
            for threads in ["1", "2"] {
                let out = |t: &str| {
                    tmp.path()
                        .join(format!("{name}_{kernel}_{threads}_{t}.npy"))
                };
                let mut cmd = cargo_bin_cmd!("attnviz");
                cmd.arg("compute")
                    .arg("--q")
                    .arg(input("q"))
                    .arg("--k")
                    .arg(input("k"))
                    .arg("--v")
                    .arg(input("v"))
                    .arg("--grad-out")
                    .arg(input("do"))
                    .arg("--out")
                    .arg(out("o"))
                    .arg("--dq")
                    .arg(out("dq"))
                    .arg("--dk")
                    .arg(out("dk"))
                    .arg("--dv")
                    .arg(out("dv"))
                    .args(["--kernel", kernel, "--threads", threads]);
                for flag in case["flags"].as_array().unwrap() {
                    let flag = flag.as_str().unwrap();
                    // A file mask is named relative to the data folder.
                    match flag.strip_prefix("--mask=file:") {
                        Some(file) => cmd.arg(format!("--mask=file:{}", dir.join(file).display())),
                        None => cmd.arg(flag),
                    };
                }
                cmd.assert().success();
                for t in ["o", "dq", "dk", "dv"] {
                    let want = read(&dir.join(format!("{name}_expected_{t}.npy")));
                    let got = read(&out(t));
                    let err = rel_err(&got, &want);
                    assert!(
                        err < 1e-4,
                        "{name} ({kernel}, {threads} threads): {t} differs from autograd by {err:.2e} of its largest entry"
                    );
                }
            }
        }
    }
}

/// The fully masked row of the file-mask case: zeros in O and dQ, as autograd gives.
#[test]
fn a_fully_masked_row_has_zero_output_and_gradient() {
    let dir = data();
    for t in ["o", "dq"] {
        let want = read(&dir.join(format!("file_keep_expected_{t}.npy")));
        let row = want.index_axis(ndarray::Axis(2), 3);
        assert!(row.iter().all(|&x| x == 0.0), "{t} row 3 is not zero");
    }
}
