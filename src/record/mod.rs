//! Playback of scenes: `attnviz play` (interactive, or headless with `--record`) and
//! `attnviz snapshot`.
//!
//! - [`headless`]: the app driven without a terminal, on a virtual clock;
//! - [`asciicast`]: the cast file, with times from that clock;
//! - [`ansi`]: a frame as the terminal output that draws it;
//! - [`still`]: a frame as SVG or text;
//! - [`palette`]: terminal colours as RGB.

pub mod ansi;
pub mod asciicast;
pub mod headless;
pub mod palette;
pub mod still;

use std::path::Path;

use crate::cli::{PlayArgs, SnapshotArgs, ThemeName};
use crate::error::{Error, Result};
use crate::scene;
use crate::tui::{AppOptions, ScriptOptions};

pub use headless::{Headless, HeadlessOptions, record, still};

/// Speeds `--speed` accepts: slower than a tenth or faster than 16x is not a lesson.
const SPEED_RANGE: std::ops::RangeInclusive<f64> = 0.1..=16.0;

fn check_speed(speed: f64) -> Result<()> {
    if speed.is_finite() && SPEED_RANGE.contains(&speed) {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "--speed {speed}: give a factor from {} to {} (1 = the scene's own timing, 2 = twice as fast)",
            SPEED_RANGE.start(),
            SPEED_RANGE.end()
        )))
    }
}

/// Write `bytes` to `path` whole or not at all (see [`crate::output::write_file`]:
/// a device such as /dev/full is written in place, and its errors are reported).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::output::write_file(path, bytes)
}

pub fn play(args: &PlayArgs) -> Result<()> {
    check_speed(args.speed)?;
    let scene = scene::load(&args.scene)?;
    match &args.record {
        Some(path) => {
            let opts = HeadlessOptions {
                lang: args.lang,
                size: args.size,
                speed: args.speed,
                theme: args.theme,
                ascii: args.ascii,
            };
            let cast = record(&scene, &opts)?;
            write_atomically(path, &cast)?;
            eprintln!(
                "recorded '{}' ({} steps, {:.1} s at speed {}) to {}; play it with: asciinema play {}",
                scene.name,
                scene.steps.len(),
                scene.duration_ms() as f64 / 1000.0 / args.speed,
                args.speed,
                path.display(),
                path.display()
            );
            Ok(())
        }
        None => {
            let title = format!("{}: {}", scene.name, scene.title.get(args.lang));
            let opts = ScriptOptions {
                app: AppOptions::interactive(args.lang, args.theme, args.ascii, false, title),
                speed: args.speed,
                autoplay: true,
            };
            crate::tui::run_script(&scene, crate::tui::script::lesson(&scene, args.lang), opts)
        }
    }
}

/// The colours a still gives the terminal's own foreground and background.
fn still_defaults(theme: Option<ThemeName>) -> palette::Defaults {
    match theme {
        Some(ThemeName::Light) => palette::Defaults::LIGHT,
        _ => palette::Defaults::DARK,
    }
}

pub fn snapshot(args: &SnapshotArgs) -> Result<()> {
    let scene = scene::load(&args.scene)?;
    let opts = HeadlessOptions {
        lang: args.lang,
        size: args.size,
        speed: 1.0,
        theme: args.theme,
        ascii: args.ascii,
    };
    let screen = still(&scene, &opts, args.step)?;
    let (path, body) = match (&args.svg, &args.txt) {
        (Some(p), _) => {
            let title = format!(
                "attnviz {}, step {}: {}",
                scene.name,
                args.step,
                scene.title.get(args.lang)
            );
            (
                p,
                still::svg(&screen, still_defaults(args.theme), Some(&title)),
            )
        }
        (None, Some(p)) => (p, still::text(&screen)),
        (None, None) => return Err(Error::usage("give --svg OUT.svg or --txt OUT.txt")),
    };
    write_atomically(path, body.as_bytes())?;
    eprintln!(
        "wrote step {} of '{}' to {}",
        args.step,
        scene.name,
        path.display()
    );
    Ok(())
}
