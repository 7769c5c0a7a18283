//! `compute`'s outputs never replace an input (by name, through a symlink or a hard
//! link), are written whole or not at all, and a failed write is reported.

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin_cmd;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;

struct Inputs {
    dir: tempfile::TempDir,
    q: PathBuf,
    k: PathBuf,
    v: PathBuf,
    mask: PathBuf,
}

fn inputs() -> Inputs {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n);
    let a = ndarray::Array2::<f32>::from_shape_fn((3, 2), |(i, j)| (i + 2 * j) as f32 * 0.25);
    for n in ["q.npy", "k.npy", "v.npy"] {
        ndarray_npy::write_npy(path(n), &a).unwrap();
    }
    ndarray_npy::write_npy(path("mask.npy"), &ndarray::Array2::<f32>::ones((3, 3))).unwrap();
    Inputs {
        q: path("q.npy"),
        k: path("k.npy"),
        v: path("v.npy"),
        mask: path("mask.npy"),
        dir,
    }
}

fn compute(i: &Inputs, extra: &[&Path], flags: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = cargo_bin_cmd!("attnviz");
    cmd.arg("compute")
        .arg("--q")
        .arg(&i.q)
        .arg("--k")
        .arg(&i.k)
        .arg("--v")
        .arg(&i.v)
        .arg("--mask")
        .arg(format!("file:{}", i.mask.display()));
    for (f, p) in flags.iter().zip(extra) {
        cmd.arg(f).arg(p);
    }
    cmd.assert()
}

fn snapshot(i: &Inputs) -> Vec<Vec<u8>> {
    [&i.q, &i.k, &i.v, &i.mask]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

#[test]
fn an_output_that_is_an_input_is_refused_before_anything_is_written() {
    let i = inputs();
    let before = snapshot(&i);
    let sym = i.dir.path().join("sym.npy");
    std::os::unix::fs::symlink(&i.v, &sym).unwrap();
    let hard = i.dir.path().join("hard.npy");
    std::fs::hard_link(&i.k, &hard).unwrap();
    let fresh = i.dir.path().join("o.npy");
    let via_dots = i.dir.path().join(".").join("q.npy");
    let cases: Vec<(Vec<&Path>, Vec<&str>, &str)> = vec![
        (vec![&i.q], vec!["--out"], "--q"),
        (vec![&via_dots], vec!["--out"], "--q"),
        (vec![&sym], vec!["--out"], "--v"),
        (vec![&hard], vec!["--out"], "--k"),
        (vec![&i.mask], vec!["--out"], "--mask"),
        (vec![&fresh, &i.k], vec!["--out", "--lse"], "--k"),
        (vec![&fresh, &sym], vec!["--out", "--lse"], "--v"),
        (vec![&fresh, &i.mask], vec!["--out", "--lse"], "--mask"),
    ];
    for (paths, flags, input) in cases {
        compute(&i, &paths, &flags)
            .code(2)
            .stderr(contains("would overwrite the input").and(contains(input)));
        assert_eq!(snapshot(&i), before, "{paths:?}");
        assert!(!fresh.exists(), "{paths:?} left a fresh --out");
    }
    // --lse the same file as --out, by another spelling.
    let other_spelling = i.dir.path().join(".").join("o.npy");
    compute(&i, &[&fresh, &other_spelling], &["--out", "--lse"])
        .code(2)
        .stderr(contains("same file"));
    assert!(!fresh.exists());
    assert_eq!(std::fs::read_dir(i.dir.path()).unwrap().count(), 6);
}

#[test]
fn an_lse_that_cannot_be_created_leaves_no_fresh_out() {
    let i = inputs();
    let out = i.dir.path().join("o.npy");
    let lse = i.dir.path().join("no-such-folder").join("lse.npy");
    compute(&i, &[&out, &lse], &["--out", "--lse"])
        .code(2)
        .stderr(contains("lse.npy"));
    assert!(!out.exists());
    // Nothing else (no temporary file) is left in the folder either.
    assert_eq!(std::fs::read_dir(i.dir.path()).unwrap().count(), 4);
    // And with a good --lse both are written.
    let lse = i.dir.path().join("lse.npy");
    compute(&i, &[&out, &lse], &["--out", "--lse"]).success();
    assert!(out.exists() && lse.exists());
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_output_write_is_reported() {
    use std::os::unix::fs::FileTypeExt;
    let full = Path::new("/dev/full");
    if !std::fs::metadata(full).is_ok_and(|m| m.file_type().is_char_device()) {
        eprintln!("skipped: /dev/full is not a character device here");
        return;
    }
    let i = inputs();
    let lse = i.dir.path().join("lse.npy");
    compute(&i, &[full], &["--out"])
        .code(2)
        .stderr(contains("/dev/full").and(contains("No space left")));
    compute(
        &i,
        &[&i.dir.path().join("o.npy"), full],
        &["--out", "--lse"],
    )
    .code(2)
    .stderr(contains("/dev/full"));
    assert!(!i.dir.path().join("o.npy").exists());
    assert!(!lse.exists());
    assert!(
        std::fs::metadata(full)
            .unwrap()
            .file_type()
            .is_char_device()
    );
}
