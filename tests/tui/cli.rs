//! The app's command line without a terminal: refused with a hint, and bad input
//! refused before any terminal is touched.

use assert_cmd::Command;
use predicates::str::contains;

#[test]
fn without_a_terminal_it_says_what_to_use_instead() {
    Command::cargo_bin("attnviz")
        .unwrap()
        .assert()
        .code(2)
        .stderr(contains("not a terminal"))
        .stderr(contains("attnviz snapshot"))
        .stderr(contains("play SCENE --record"));
}

#[test]
fn bad_lesson_options_name_the_flag() {
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["--heads", "3", "--d-model", "16"])
        .assert()
        .code(2)
        .stderr(contains("--d-model"));
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["--heads", "4", "--kv-heads", "3"])
        .assert()
        .code(2)
        .stderr(contains("--kv-heads"));
}

#[test]
fn view_checks_its_files_first() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.npy");
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["view", "--attn"])
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(contains("nope.npy"));
    // A vector is not attention weights.
    let bad = dir.path().join("a.npy");
    ndarray_npy::write_npy(&bad, &ndarray::Array1::<f32>::zeros(3)).unwrap();
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["view", "--attn"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(contains("[n,n], [H,n,n] or [layers,H,n,n]"));
    // Good weights, but a tokens file with the wrong count.
    let good = dir.path().join("w.npy");
    ndarray_npy::write_npy(
        &good,
        &ndarray::Array3::<f32>::from_elem((2, 3, 3), 1.0 / 3.0),
    )
    .unwrap();
    let toks = dir.path().join("t.txt");
    std::fs::write(&toks, "a\nb\n").unwrap();
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["view", "--attn"])
        .arg(&good)
        .arg("--tokens-file")
        .arg(&toks)
        .assert()
        .code(2)
        .stderr(contains("one label per key"));
    // All good: only the missing terminal stops it.
    std::fs::write(&toks, "a\nb\nc\n").unwrap();
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["view", "--attn"])
        .arg(&good)
        .arg("--tokens-file")
        .arg(&toks)
        .assert()
        .code(2)
        .stderr(contains("not a terminal"));
}

#[test]
fn view_opens_q_k_v_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n);
    let q = ndarray::Array3::<f32>::from_shape_fn((4, 6, 8), |(h, i, c)| (h + i + c) as f32 * 0.01);
    let kv =
        ndarray::Array3::<f32>::from_shape_fn((2, 6, 8), |(h, i, c)| (h * i + c) as f32 * 0.02);
    ndarray_npy::write_npy(path("q.npy"), &q).unwrap();
    ndarray_npy::write_npy(path("k.npy"), &kv).unwrap();
    ndarray_npy::write_npy(path("v.npy"), &kv).unwrap();
    let run = |k: &str| {
        let mut c = Command::cargo_bin("attnviz").unwrap();
        c.arg("view")
            .arg("--q")
            .arg(path("q.npy"))
            .arg("--k")
            .arg(path(k))
            .arg("--v")
            .arg(path("v.npy"));
        c.assert()
    };
    // Everything fits (GQA: 4 query heads on 2 K/V heads): only the terminal is missing.
    run("k.npy").code(2).stderr(contains("not a terminal"));
    // 3 K heads do not divide 4 query heads.
    let bad = ndarray::Array3::<f32>::zeros((3, 6, 8));
    ndarray_npy::write_npy(path("k3.npy"), &bad).unwrap();
    run("k3.npy").code(2).stderr(contains("heads"));
}
