//! `scene check` on hostile files: thousands of errors are reported as the first 50 and
//! a count; a scene too long to record is refused with exit 2 naming the limit; and
//! mutations of every built-in scene give a scene or a clear error, never a panic.

use assert_cmd::Command;
use attnviz::scene::{self, BUILTIN_SOURCES};
use proptest::prelude::*;

fn check(src: &str) -> assert_cmd::assert::Assert {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, src).unwrap();
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["scene", "check"])
        .arg(&path)
        .assert()
}

fn intro() -> &'static str {
    BUILTIN_SOURCES
        .iter()
        .find(|(n, _)| *n == "intro")
        .unwrap()
        .1
}

#[test]
fn thousands_of_errors_are_reported_as_fifty_and_a_count() {
    // The intro with 3,000 steps that each name an unknown stage.
    let mut src = intro().to_string();
    for _ in 0..3000 {
        src.push_str(
            "\n[[steps]]\nstage = \"nowhere\"\nnarration.en = \"x\"\nnarration.zh = \"x\"\n",
        );
    }
    let out = check(&src).code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let problems = err.lines().filter(|l| l.contains("s.toml:")).count();
    assert!(problems <= 52, "{problems} lines:\n{err}");
    assert!(
        err.contains("more problems (the first 50 are shown)"),
        "{err}"
    );
}

#[test]
fn a_scene_too_long_to_record_is_refused_naming_the_limit() {
    // 200 steps of 120 s: 6 h 40 min, over the 6 hours a recording may last.
    let mut src = intro().to_string();
    for _ in 0..200 {
        src.push_str("\n[[steps]]\ndwell = 120\nnarration.en = \"x\"\nnarration.zh = \"x\"\n");
    }
    let out = check(&src).code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("MAX_DURATION_MS") && err.contains("6 hours"),
        "{err}"
    );
}

/// A mutation of a scene's source: cut, duplicate or overwrite a span of lines or
/// bytes.
fn mutate(src: &str, kind: u8, a: usize, b: usize, byte: u8) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let n = lines.len().max(1);
    // j stays within the lines there are (none, after an earlier cut of everything).
    let (i, j) = (a % n, (a % n + b % 8).min(lines.len()));
    match kind % 5 {
        0 => [&lines[..i], &lines[j..]].concat().join("\n"),
        1 => [&lines[..j], &lines[i..]].concat().join("\n"),
        2 => {
            let mut bytes = src.as_bytes().to_vec();
            if !bytes.is_empty() {
                let k = a % bytes.len();
                bytes[k] = byte;
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
        3 => {
            // A number made huge, negative or fractional.
            let values = [
                "-1",
                "0",
                "1e308",
                "99999999999999999999",
                "0.5",
                "\"x\"",
                "nan",
            ];
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            if let Some(l) = out.get_mut(i)
                && let Some((k, _)) = l.split_once('=')
            {
                *l = format!("{k}= {}", values[b % values.len()]);
            }
            out.join("\n")
        }
        _ => {
            let cut = (a % src.len().max(1)).min(src.len());
            let mut cut = cut;
            while !src.is_char_boundary(cut) {
                cut -= 1;
            }
            src[..cut].to_string()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_builtins_give_a_scene_or_an_error(
        which in 0..BUILTIN_SOURCES.len(),
        kinds in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let (name, src) = BUILTIN_SOURCES[which];
        let mut text = src.to_string();
        for (kind, a, b, byte) in kinds {
            text = mutate(&text, kind, a, b, byte);
        }
        // A panic fails the case; an error must say where, in the file's words.
        match scene::parse(name, "m.toml", &text) {
            Ok(s) => prop_assert!(!s.steps.is_empty()),
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("m.toml:"), "{}", msg);
                prop_assert!(!e.problems.is_empty());
            }
        }
    }
}
