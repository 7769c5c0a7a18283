//! The backward pass end to end: `compute --grad-out` (flash against the reference, and
//! the reference against directional finite differences of `compute`'s own output, RoPE
//! included), `bench --backward --json` and `trace --backward --json`, and bad inputs
//! refused with exit 2 and a message naming the flag or shape.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;
use ndarray::{ArrayD, IxDyn};
use ndarray_npy::{ReadNpyExt, WriteNpyExt};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

fn write(path: &Path, a: &ArrayD<f64>) {
    a.write_npy(std::fs::File::create(path).unwrap()).unwrap();
}

fn read(path: &Path) -> ArrayD<f64> {
    ArrayD::<f64>::read_npy(std::fs::File::open(path).unwrap()).unwrap()
}

fn random(rng: &mut ChaCha8Rng, shape: &[usize]) -> ArrayD<f64> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| rng.random_range(-1.0..1.0))
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn s(&self, name: &str) -> String {
        self.p(name).display().to_string()
    }
}

/// Heads, KV heads, Nq, Nk, d, dv.
type Dims = (usize, usize, usize, usize, usize, usize);

/// Q [H,Nq,d], K and V [G,Nk,d|dv], dO [H,Nq,dv], written as q.npy ... do.npy.
fn inputs(f: &Files, (h, g, nq, nk, d, dv): Dims, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    write(&f.p("q.npy"), &random(&mut rng, &[h, nq, d]));
    write(&f.p("k.npy"), &random(&mut rng, &[g, nk, d]));
    write(&f.p("v.npy"), &random(&mut rng, &[g, nk, dv]));
    write(&f.p("do.npy"), &random(&mut rng, &[h, nq, dv]));
}

fn compute(f: &Files, extra: &[&str], tag: &str) {
    let out = cargo_bin_cmd!("attnviz")
        .arg("compute")
        .args([
            "--q",
            &f.s("q.npy"),
            "--k",
            &f.s("k.npy"),
            "--v",
            &f.s("v.npy"),
        ])
        .args(["--out", &f.s(&format!("o_{tag}.npy"))])
        .args(["--grad-out", &f.s("do.npy")])
        .args(["--dq", &f.s(&format!("dq_{tag}.npy"))])
        .args(["--dk", &f.s(&format!("dk_{tag}.npy"))])
        .args(["--dv", &f.s(&format!("dv_{tag}.npy"))])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn max_rel(a: &ArrayD<f64>, b: &ArrayD<f64>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let largest = a.iter().fold(0.0f64, |m, &x| m.max(x.abs())).max(1e-300);
    a.iter()
        .zip(b.iter())
        .fold(0.0f64, |m, (&x, &y)| m.max((x - y).abs()))
        / largest
}

#[test]
fn flash_gradients_match_the_reference() {
    let cases: [(&[&str], Dims); 6] = [
        (&["--mask", "none"], (2, 2, 70, 70, 16, 8)),
        (&["--mask", "causal", "--alibi"], (4, 2, 65, 65, 24, 24)),
        (&["--mask", "causal", "--rope"], (4, 1, 3, 130, 16, 16)),
        (
            &["--mask", "window:9", "--scale", "0.3"],
            (2, 1, 80, 50, 8, 12),
        ),
        (&["--mask", "padding:33"], (1, 1, 40, 40, 8, 8)),
        (
            &["--mask", "bigbird:1,1,1,8", "--rope=500"],
            (3, 3, 48, 48, 10, 6),
        ),
    ];
    for (i, (flags, (h, g, nq, nk, d, dv))) in cases.iter().enumerate() {
        let f = Files::new();
        inputs(&f, (*h, *g, *nq, *nk, *d, *dv), i as u64);
        let mut flash = flags.to_vec();
        flash.extend(["--kernel", "flash", "--threads", "2"]);
        compute(&f, &flash, "flash");
        let mut refr = flags.to_vec();
        refr.extend(["--kernel", "reference"]);
        compute(&f, &refr, "ref");
        for name in ["dq", "dk", "dv", "o"] {
            let a = read(&f.p(&format!("{name}_ref.npy")));
            let b = read(&f.p(&format!("{name}_flash.npy")));
            let e = max_rel(&a, &b);
            assert!(e < 1e-4, "{flags:?} {name}: {e:e}");
        }
        // Shapes follow the inputs: dq like Q, dk like K, dv like V.
        assert_eq!(read(&f.p("dk_flash.npy")).shape(), &[*g, *nk, *d]);
        assert_eq!(read(&f.p("dv_flash.npy")).shape(), &[*g, *nk, *dv]);
    }
}

/// sum(O * dO) from `compute --kernel reference` on perturbed inputs.
fn loss(f: &Files, flags: &[&str], which: &str, t: &ArrayD<f64>) -> f64 {
    let name = format!("{which}.npy");
    let saved = read(&f.p(&name));
    write(&f.p(&name), t);
    let out = cargo_bin_cmd!("attnviz")
        .arg("compute")
        .args([
            "--q",
            &f.s("q.npy"),
            "--k",
            &f.s("k.npy"),
            "--v",
            &f.s("v.npy"),
        ])
        .args(["--out", &f.s("o_fd.npy"), "--kernel", "reference"])
        .args(flags)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    write(&f.p(&name), &saved);
    let o = read(&f.p("o_fd.npy"));
    let g = read(&f.p("do.npy"));
    (&o * &g).sum()
}

#[test]
fn reference_gradients_match_finite_differences_through_compute() {
    // GQA, a decode shape (Nq < Nk), causal, ALiBi and RoPE all at once: the directional
    // derivative of sum(O * dO) along a random direction U equals <grad, U>.
    let flags = ["--mask", "causal", "--alibi", "--rope=100"];
    let f = Files::new();
    inputs(&f, (2, 1, 3, 5, 4, 3), 9);
    compute(
        &f,
        &[&flags[..], &["--kernel", "reference"]].concat(),
        "ref",
    );
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for which in ["q", "k", "v"] {
        let x = read(&f.p(&format!("{which}.npy")));
        let u = random(&mut rng, x.shape());
        let h = 1e-5;
        let plus = loss(&f, &flags, which, &(&x + &(&u * h)));
        let minus = loss(&f, &flags, which, &(&x - &(&u * h)));
        let numeric = (plus - minus) / (2.0 * h);
        let grad = read(&f.p(&format!("d{which}_ref.npy")));
        let analytic = (&grad * &u).sum();
        assert!(
            (numeric - analytic).abs() < 1e-6 * analytic.abs().max(1.0),
            "{which}: numeric {numeric}, analytic {analytic}"
        );
    }
}

fn fails(args: &[&str]) -> String {
    let out = cargo_bin_cmd!("attnviz").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn bad_gradient_requests_exit_2_naming_the_flag() {
    let f = Files::new();
    inputs(&f, (2, 1, 6, 6, 4, 3), 1);
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "compute",
            "--q",
            &f.s("q.npy"),
            "--k",
            &f.s("k.npy"),
            "--v",
            &f.s("v.npy"),
            "--out",
            &f.s("o.npy"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str]| {
        let v = base(extra);
        fails(&v.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let err = run(&["--dq", &f.s("dq.npy")]);
    assert!(err.contains("--dq needs --grad-out"), "{err}");
    let err = run(&["--grad-out", &f.s("do.npy")]);
    assert!(err.contains("no gradient is asked for"), "{err}");
    // dO of the wrong shape: V's last dimension is 3, not 4.
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    write(&f.p("bad.npy"), &random(&mut rng, &[2, 6, 4]));
    let err = run(&["--grad-out", &f.s("bad.npy"), "--dq", &f.s("dq.npy")]);
    assert!(
        err.contains("--grad-out")
            && err.contains("[2, 6, 4] (rank 3)")
            && err.contains("rank 3 with shape [2, 6, 3]"),
        "{err}"
    );
    let err = run(&["--grad-out", &f.s("do.npy"), "--dq", &f.s("q.npy")]);
    assert!(err.contains("--dq and --q"), "{err}");
    let err = run(&["--grad-out", &f.s("do.npy"), "--dk", &f.s("o.npy")]);
    assert!(err.contains("--dk and --out"), "{err}");
    let err = run(&[
        "--grad-out",
        &f.s("do.npy"),
        "--dv",
        &f.s("dq.npy"),
        "--kernel",
        "naive",
    ]);
    assert!(err.contains("naive has no backward"), "{err}");
    assert!(!f.p("dq.npy").exists());
}

#[test]
fn bench_backward_records_say_backward() {
    let out = cargo_bin_cmd!("attnviz")
        .args([
            "bench",
            "--backward",
            "--n",
            "70",
            "--d",
            "16",
            "--heads",
            "2",
        ])
        .args([
            "--threads",
            "1",
            "--kernels",
            "flash,reference,naive",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let recs = v.as_array().unwrap();
    let kernels: Vec<&str> = recs.iter().map(|r| r["kernel"].as_str().unwrap()).collect();
    assert_eq!(kernels, ["flash", "reference"], "naive has no backward");
    for r in recs {
        assert_eq!(r["pass"], "backward");
        let ms = r["ms"].as_f64().unwrap();
        let want = 10.0 * 2.0 * 70.0 * 70.0 * 16.0 / (ms * 1e6);
        assert!((r["gflops"].as_f64().unwrap() - want).abs() < 1e-6 * want);
    }
    let out = cargo_bin_cmd!("attnviz")
        .args([
            "bench",
            "--n",
            "40",
            "--d",
            "8",
            "--heads",
            "1",
            "--threads",
            "1",
        ])
        .args(["--kernels", "flash", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["pass"], "forward");
}

#[test]
fn trace_backward_follows_the_contract() {
    let out = cargo_bin_cmd!("attnviz")
        .args(["trace", "--backward", "--n", "5", "--nk", "7", "--d", "3"])
        .args(["--br", "2", "--bc", "3", "--mask", "causal", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(t["pass"], "backward");
    let events = t["events"].as_array().unwrap();
    assert_eq!(events.len(), 3 * 3);
    // Key blocks outer: the k_block sequence never goes back.
    let kbs: Vec<u64> = events
        .iter()
        .map(|e| e["k_block"].as_u64().unwrap())
        .collect();
    assert!(kbs.windows(2).all(|w| w[0] <= w[1]), "{kbs:?}");
    // Causal, bottom-right: query 0 stands at key 2, so tile (q 0..2, keys 6..7) is empty.
    let skipped = events
        .iter()
        .find(|e| e["q_block"] == 0 && e["k_block"] == 2)
        .unwrap();
    assert_eq!(skipped["skipped"], true);
    assert!(skipped["p"].is_null());
    // The last event touching each key block holds that block's final dK, dV.
    let dk = t["dk"].as_array().unwrap();
    let dv = t["dv"].as_array().unwrap();
    for kb in 0..3u64 {
        let last = events.iter().rev().find(|e| e["k_block"] == kb).unwrap();
        let c0 = last["cols"][0].as_u64().unwrap() as usize;
        for (jj, row) in last["dk"].as_array().unwrap().iter().enumerate() {
            assert_eq!(row, &dk[c0 + jj]);
        }
        for (jj, row) in last["dv"].as_array().unwrap().iter().enumerate() {
            assert_eq!(row, &dv[c0 + jj]);
        }
    }
    assert_eq!(t["dq"].as_array().unwrap().len(), 5);
    assert_eq!(t["D"].as_array().unwrap().len(), 5);
    let err = fails(&["trace", "--backward", "--n", "4", "--loop", "fa1"]);
    assert!(err.contains("--loop"), "{err}");
}
