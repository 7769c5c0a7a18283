//! Flags that would run for minutes, print nothing useful or replace a file: each exits
//! 2 at once with a message naming the flag, and leaves every file as it was.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

use crate::support::measure;

/// `attnviz ARGS` exits 2 within 15 s, under 1 GiB of memory, with every needle in its
/// message.
fn refused(args: &[&str], needles: &[&str]) -> String {
    measure::refused_within(args, needles, 15).stderr
}

#[test]
fn bench_refuses_what_it_cannot_time() {
    refused(
        &["bench", "--backward", "--kernels", "naive", "--n", "64"],
        &["nothing to time", "naive", "no backward pass"],
    );
    refused(&["bench", "--ui", "--backward"], &["--ui", "--backward"]);
    refused(
        &["bench", "--backward", "--n", "100000", "--kernels", "flash"],
        &["--n 100000", "flops", "smaller --n"],
    );
    refused(
        &["bench", "--n", "64", "--threads", "1000"],
        &["--threads 1000", "MAX_THREADS"],
    );
}

#[cfg(target_os = "linux")]
#[test]
fn gradients_are_written_all_or_none() {
    use std::os::unix::fs::FileTypeExt;
    let full = Path::new("/dev/full");
    if !std::fs::metadata(full).is_ok_and(|m| m.file_type().is_char_device()) {
        eprintln!("skipped: /dev/full is not a character device here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let a = ndarray::Array2::<f32>::from_shape_fn((4, 3), |(i, j)| (i + 2 * j) as f32 * 0.25);
    for n in ["q.npy", "k.npy", "v.npy", "do.npy"] {
        ndarray_npy::write_npy(p(n), &a).unwrap();
    }
    let (q, k, v, d_o, o) = (p("q.npy"), p("k.npy"), p("v.npy"), p("do.npy"), p("o.npy"));
    let (dq, dk) = (p("dq.npy"), p("dk.npy"));
    let args = [
        "compute",
        "--q",
        &q,
        "--k",
        &k,
        "--v",
        &v,
        "--out",
        &o,
        "--grad-out",
        &d_o,
        "--dq",
        &dq,
        "--dk",
        &dk,
        "--dv",
        "/dev/full",
    ];
    refused(&args, &["/dev/full"]);
    for left in [&o, &dq, &dk] {
        assert!(!Path::new(left).exists(), "{left} was left behind");
    }
    // Nothing but the four inputs is in the folder (no temporary file either).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
    // With a writable --dv all four outputs are written.
    let mut ok = args;
    let dv = p("dv.npy");
    ok[16] = &dv;
    cargo_bin_cmd!("attnviz").args(ok).assert().success();
    for written in [&o, &dq, &dk, &dv] {
        assert!(Path::new(written).exists(), "{written}");
    }
}

#[test]
fn a_recording_neither_replaces_its_scene_nor_takes_gigabytes() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("lesson.cast");
    let text = std::fs::read_to_string("scenes/alibi.toml").unwrap();
    std::fs::write(&scene, &text).unwrap();
    let s = scene.to_str().unwrap();
    refused(
        &["play", s, "--record", s],
        &["--record", "SCENE", "overwrite"],
    );
    let dotted = dir.path().join(".").join("lesson.cast");
    refused(
        &["play", s, "--record", dotted.to_str().unwrap()],
        &["overwrite"],
    );
    assert_eq!(std::fs::read_to_string(&scene).unwrap(), text);
    let gif = dir.path().join("x.gif");
    refused(
        &[
            "play",
            "alibi",
            "--record",
            gif.to_str().unwrap(),
            "--size",
            "1000x1000",
        ],
        &["--size 1000x1000", "30000"],
    );
    assert!(!gif.exists());
}

#[cfg(unix)]
#[test]
fn a_fifo_given_as_a_scene_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("lesson.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let f = fifo.to_str().unwrap();
    refused(&["scene", "check", f], &[f, "not a regular file"]);
}
