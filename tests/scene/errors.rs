//! Invalid scene files: each fixture's messages (file:line:column: field: message) are
//! snapshotted, and `attnviz scene check` exits with 2 on them.

use std::path::Path;

use assert_cmd::Command;

const DIR: &str = "tests/fixtures/scenes";

fn problems(name: &str) -> String {
    let path = format!("{DIR}/{name}.toml");
    match attnviz::scene::load_file(Path::new(&path)) {
        Ok(_) => panic!("{path} should be invalid"),
        Err(e) => e.to_string(),
    }
}

macro_rules! fixture {
    ($test:ident, $name:literal) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!($name, problems($name));
        }
    };
}

fixture!(unknown_key, "unknown-key");
fixture!(unknown_key_in_step, "unknown-key-in-step");
fixture!(wrong_type, "wrong-type");
fixture!(bad_mask, "bad-mask");
fixture!(d_model_not_divisible, "d-model-not-divisible");
fixture!(kv_heads_not_dividing, "kv-heads-not-dividing");
fixture!(highlight_outside, "highlight-outside");
fixture!(tile_outside, "tile-outside");
fixture!(missing_version, "missing-version");
fixture!(version_2, "version-2");
fixture!(unknown_names, "unknown-names");
fixture!(syntax_error, "syntax-error");
fixture!(many_problems, "many-problems");
fixture!(missing_field, "missing-field");
fixture!(bad_variant, "bad-variant");
fixture!(animate_wrong, "animate-wrong");
fixture!(bad_pass, "bad-pass");

#[test]
fn the_valid_fixture_is_valid() {
    let scene = attnviz::scene::load_file(Path::new(&format!("{DIR}/valid.toml"))).unwrap();
    assert_eq!(scene.steps.len(), 2);
    assert_eq!(scene.toy().unwrap().tokens.len(), 6);
    assert_eq!(scene.steps[0].highlight, vec![(1, 2)]);
    assert_eq!(scene.steps[1].tiles, vec![(0, 1), (2, 2)]);
    assert_eq!(scene.steps[0].dwell_ms, 3000);
}

#[test]
fn every_problem_names_file_line_column() {
    for entry in std::fs::read_dir(DIR).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if name == "valid" {
            continue;
        }
        for line in problems(&name).lines() {
            let mut parts = line.splitn(4, ':');
            let file = parts.next().unwrap();
            let row: usize = parts.next().unwrap().parse().expect(line);
            let col: usize = parts.next().unwrap().parse().expect(line);
            assert_eq!(file, path.to_str().unwrap(), "{line}");
            assert!(row >= 1 && col >= 1, "{line}");
        }
    }
}

#[test]
fn scene_check_exits_2_and_reports_every_file() {
    let out = Command::cargo_bin("attnviz")
        .unwrap()
        .args(["scene", "check"])
        .arg(format!("{DIR}/valid.toml"))
        .arg(format!("{DIR}/bad-mask.toml"))
        .arg(format!("{DIR}/tile-outside.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stdout.contains("valid.toml: ok (2 steps"), "{stdout}");
    assert!(
        stderr.contains("bad-mask.toml:15:8: model.mask: unknown mask 'diagonal'"),
        "{stderr}"
    );
    assert!(
        stderr.contains("tile-outside.toml:30:18: steps[1].tiles[1]"),
        "{stderr}"
    );
    assert!(
        stderr.contains("2 of 3 scene files are invalid"),
        "{stderr}"
    );
}

#[test]
fn scene_check_accepts_the_built_ins() {
    let mut cmd = Command::cargo_bin("attnviz").unwrap();
    cmd.args(["scene", "check"]);
    for (name, _) in attnviz::scene::BUILTIN_SOURCES {
        cmd.arg(format!("scenes/{name}.toml"));
    }
    cmd.assert().success();
}

#[test]
fn a_missing_file_is_a_problem_not_a_panic() {
    Command::cargo_bin("attnviz")
        .unwrap()
        .args(["scene", "check", "tests/fixtures/scenes/no-such-file.toml"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "no-such-file.toml: cannot read the scene",
        ));
}
