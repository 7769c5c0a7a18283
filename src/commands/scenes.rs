//! `attnviz scenes` (list the built-ins) and `attnviz scene check FILE...`.

use std::fmt::Write as _;
use std::path::PathBuf;

use unicode_width::UnicodeWidthStr;

use crate::cli::ScenesArgs;
use crate::error::{Error, Result};
use crate::scene::{self, DEFAULT_SCENE, Scene};

/// One built-in as `scenes --json` prints it.
#[derive(serde::Serialize)]
struct Listing<'a> {
    name: &'a str,
    title: Title<'a>,
    steps: usize,
    seconds: f64,
    view: &'a str,
    default: bool,
    /// The trained model a `[pretrained]` lesson runs (null: a seeded model).
    model: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct Title<'a> {
    en: &'a str,
    zh: &'a str,
}

pub fn list(args: &ScenesArgs) -> Result<()> {
    let scenes = scene::builtins()?;
    let out = if args.json {
        json(&scenes)?
    } else {
        table(&scenes)
    };
    crate::output::print(&out)
}

fn json(scenes: &[Scene]) -> Result<String> {
    let listing: Vec<Listing> = scenes
        .iter()
        .map(|s| Listing {
            name: &s.name,
            title: Title {
                en: &s.title.en,
                zh: &s.title.zh,
            },
            steps: s.steps.len(),
            seconds: s.duration_ms() as f64 / 1000.0,
            view: s.view.name(),
            default: s.name == DEFAULT_SCENE,
            model: s.pretrained().map(|p| p.model.as_str()),
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&listing)
        .map_err(|e| Error::Internal(format!("cannot write JSON: {e}")))?;
    s.push('\n');
    Ok(s)
}

fn table(scenes: &[Scene]) -> String {
    let name_w = scenes
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let en_w = scenes
        .iter()
        .map(|s| s.title.en.width())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<name_w$}  {:>5}  {:>5}  {:<en_w$}  TITLE (zh)",
        "NAME", "STEPS", "SECS", "TITLE"
    );
    for s in scenes {
        let pad = en_w - s.title.en.width();
        let star = if s.name == DEFAULT_SCENE {
            " *"
        } else if s.pretrained().is_some() {
            " +"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:<name_w$}  {:>5}  {:>5.0}  {}{}  {}{star}",
            s.name,
            s.steps.len(),
            s.duration_ms() as f64 / 1000.0,
            s.title.en,
            " ".repeat(pad),
            s.title.zh,
        );
    }
    let _ = writeln!(
        out,
        "\n* the default scene; + runs on a trained model (attnviz models lists those found). Play one: attnviz play NAME [--lang zh]"
    );
    out
}

pub fn check(files: &[PathBuf]) -> Result<()> {
    let mut bad = 0;
    for file in files {
        match scene::load_file(file) {
            Ok(s) => crate::output::println(&format!(
                "{}: ok ({} steps, {:.0} s)",
                file.display(),
                s.steps.len(),
                s.duration_ms() as f64 / 1000.0
            ))?,
            Err(e) => {
                bad += 1;
                eprintln!("{e}");
            }
        }
    }
    if bad > 0 {
        return Err(Error::usage(format!(
            "{bad} of {} scene files are invalid",
            files.len()
        )));
    }
    Ok(())
}
