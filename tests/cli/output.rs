//! Where the output goes wrong: a reader that closes stdout early ends every printing
//! command quietly (exit 0, no panic), and a write that fails (/dev/full) is reported
//! with exit 2 naming where the output went, for stdout and for files alike.

use std::io::Read;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin_cmd;
use predicates::str::contains;

/// Every command that prints to stdout, with arguments that make it print a lot or
/// at least something.
fn printing_commands() -> Vec<Vec<&'static str>> {
    vec![
        vec![
            "trace", "--n", "200", "--d", "8", "--br", "4", "--bc", "4", "--json",
        ],
        vec!["scenes"],
        vec!["scenes", "--json"],
        vec!["kv-cache", "--preset", "llama2-7b", "--seq", "4096"],
        vec![
            "kv-cache",
            "--preset",
            "llama2-7b",
            "--seq",
            "4096",
            "--json",
        ],
        vec!["memory", "--n", "8192"],
        vec!["memory", "--n", "8192", "--json"],
        vec![
            "bench",
            "--n",
            "16",
            "--d",
            "8",
            "--heads",
            "1",
            "--kernels",
            "flash",
            "--threads",
            "1",
        ],
    ]
}

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin!("attnviz").to_path_buf()
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_every_printing_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("s.toml");
    std::fs::write(&scene, builtin_scene_text()).unwrap();
    let mut cmds = printing_commands();
    let scene_arg: &'static str = Box::leak(scene.display().to_string().into_boxed_str());
    cmds.push(vec!["scene", "check", scene_arg, scene_arg, scene_arg]);
    for args in cmds {
        let mut child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte at most, then close the pipe while the command still writes.
        let mut stdout = child.stdout.take().unwrap();
        let mut byte = [0u8; 1];
        let _ = stdout.read(&mut byte);
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

fn builtin_scene_text() -> String {
    let out = cargo_bin_cmd!("attnviz")
        .args(["scenes", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let name = v[0]["name"].as_str().unwrap().to_string();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenes")
        .join(format!("{name}.toml"));
    std::fs::read_to_string(path).unwrap()
}

/// /dev/full as a device, checked before and after: a command that renamed a file over
/// it would turn it into a regular file (and break it for every other program).
#[cfg(target_os = "linux")]
fn dev_full() -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let ok = std::fs::metadata("/dev/full").is_ok_and(|m| m.file_type().is_char_device());
    if !ok {
        eprintln!("skipped: /dev/full is not a character device here");
    }
    ok.then_some("/dev/full")
}

#[cfg(target_os = "linux")]
fn assert_dev_full_intact() {
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::metadata("/dev/full").unwrap();
    assert!(m.file_type().is_char_device(), "/dev/full was replaced");
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_reported_by_every_printing_command() {
    let Some(full) = dev_full() else { return };
    for args in printing_commands() {
        let f = std::fs::OpenOptions::new().write(true).open(full).unwrap();
        let out = Command::new(bin()).args(&args).stdout(f).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("stdout") && stderr.contains("No space left"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert_dev_full_intact();
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_reported_for_recordings_and_stills() {
    let Some(full) = dev_full() else { return };
    for args in [
        vec!["snapshot", "intro", "--step", "1", "--txt", full],
        vec!["snapshot", "intro", "--step", "1", "--svg", full],
    ] {
        cargo_bin_cmd!("attnviz")
            .args(&args)
            .assert()
            .code(2)
            .stderr(contains("/dev/full").and(contains("No space left")));
        assert_dev_full_intact();
    }
    // A recording's format follows its extension: a link named for each format leads
    // to the full device.
    let dir = tempfile::tempdir().unwrap();
    for ext in ["cast", "svg", "gif"] {
        let link = dir.path().join(format!("full.{ext}"));
        std::os::unix::fs::symlink(full, &link).unwrap();
        cargo_bin_cmd!("attnviz")
            .args(["play", "intro", "--size", "80x24", "--record"])
            .arg(&link)
            .assert()
            .code(2)
            .stderr(contains(format!("full.{ext}")).and(contains("No space left")));
        assert_dev_full_intact();
    }
}

use predicates::prelude::PredicateBooleanExt;
