//! Every numeric flag of every command says what it takes when given a negative number
//! (`--seed -1`, `kv-cache --seq=-1`), instead of clap's bare "unexpected argument" or
//! "invalid digit". The flags are found by walking the command tree, so a flag added
//! later is covered without a new test.

use std::any::TypeId;

use assert_cmd::cargo::cargo_bin_cmd;
use attnviz::cli::Cli;
use clap::{CommandFactory, Parser};
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;

struct Flag {
    /// Subcommand path, e.g. ["scene", "check"]; empty for the top-level app flags.
    path: Vec<String>,
    long: String,
    whole: bool,
    require_equals: bool,
}

fn walk(cmd: &clap::Command, path: &[String], out: &mut Vec<Flag>) {
    let wholes = [
        TypeId::of::<usize>(),
        TypeId::of::<u64>(),
        TypeId::of::<u32>(),
        TypeId::of::<u16>(),
    ];
    let reals = [TypeId::of::<f64>(), TypeId::of::<f32>()];
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if !arg.get_action().takes_values() {
            continue;
        }
        let ty = arg.get_value_parser().type_id();
        let whole = wholes.iter().any(|t| ty == *t);
        if whole || reals.iter().any(|t| ty == *t) {
            out.push(Flag {
                path: path.to_vec(),
                long: format!("--{long}"),
                whole,
                require_equals: arg.is_require_equals_set(),
            });
        }
    }
    for sub in cmd.get_subcommands() {
        let mut p = path.to_vec();
        p.push(sub.get_name().to_string());
        walk(sub, &p, out);
    }
}

fn numeric_flags() -> Vec<Flag> {
    let mut flags = Vec::new();
    walk(&Cli::command(), &[], &mut flags);
    flags
}

#[test]
fn every_numeric_flag_says_what_it_takes_for_a_negative_number() {
    let flags = numeric_flags();
    assert!(
        flags.len() >= 30,
        "only {} numeric flags found",
        flags.len()
    );
    for f in &flags {
        let spellings: Vec<Vec<String>> = if f.require_equals {
            vec![vec![format!("{}=-1", f.long)]]
        } else {
            vec![
                vec![f.long.clone(), "-1".into()],
                vec![format!("{}=-1", f.long)],
            ]
        };
        for spelling in spellings {
            let mut argv = vec!["attnviz".to_string()];
            argv.extend(f.path.iter().cloned());
            argv.extend(spelling.iter().cloned());
            let what = argv.join(" ");
            let err = Cli::try_parse_from(&argv).err().map(|e| e.to_string());
            let msg = err.clone().unwrap_or_default();
            assert!(
                !msg.contains("unexpected argument") && !msg.contains("invalid digit"),
                "{what}: {msg}"
            );
            if f.whole {
                assert!(
                    msg.contains(&f.long) && msg.contains("cannot be negative"),
                    "{what}: {msg}"
                );
            } else {
                // A negative real number is read as a number; the command checks its range.
                assert!(!msg.contains("invalid value"), "{what}: {msg}");
            }
        }
    }
}

#[test]
fn negative_numbers_end_to_end() {
    for args in [
        &["kv-cache", "--preset", "llama2-7b", "--seq=-1"][..],
        &["trace", "--n", "4", "--seed", "-1"],
        &["memory", "--n", "-8"],
        &["bench", "--threads", "1,-2"],
    ] {
        cargo_bin_cmd!("attnviz")
            .args(args)
            .assert()
            .code(2)
            .stderr(contains("cannot be negative").and(contains("unexpected").not()));
    }
    // A negative scale is a number: trace takes it (softmax of the negated scores).
    cargo_bin_cmd!("attnviz")
        .args(["trace", "--n", "4", "--d", "2", "--scale", "-1"])
        .assert()
        .success();
    cargo_bin_cmd!("attnviz")
        .args([
            "play",
            "intro",
            "--speed",
            "-1",
            "--record",
            "/nonexistent/x.cast",
        ])
        .assert()
        .code(2)
        .stderr(contains("--speed -1"));
}
