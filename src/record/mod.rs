//! Playback of scenes: `attnviz play` (interactive, or headless with `--record`) and
//! `attnviz snapshot`.
//!
//! - [`headless`]: the app driven without a terminal, on a virtual clock;
//! - [`asciicast`]: the cast file, with times from that clock;
//! - [`ansi`]: a frame as the terminal output that draws it;
//! - [`still`]: a frame as SVG or text;
//! - [`animated_svg`], [`gif`]: a whole recording as an animated SVG or GIF, drawn from
//!   the same list of frames as the cast ([`headless::Recording`]);
//! - [`fonts`]: the GIF's fonts;
//! - [`palette`]: terminal colours as RGB.

pub mod animated_svg;
pub mod ansi;
pub mod asciicast;
pub mod fonts;
pub mod gif;
pub mod headless;
pub mod palette;
pub mod still;

use std::path::Path;

use crate::cli::{PlayArgs, SnapshotArgs, ThemeName};
use crate::error::{Error, Result};
use crate::scene;
use crate::tui::{AppOptions, ScriptOptions};

pub use headless::{
    Frame, Headless, HeadlessOptions, Played, Recording, cast, play_each, play_through,
    play_watching, record, still,
};

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

/// The formats `--record` writes, by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    Cast,
    Svg,
    Gif,
}

impl RecordFormat {
    pub fn from_path(path: &Path) -> Result<RecordFormat> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("cast") => Ok(RecordFormat::Cast),
            Some("svg") => Ok(RecordFormat::Svg),
            Some("gif") => Ok(RecordFormat::Gif),
            other => Err(Error::usage(format!(
                "--record {}: {}; the format follows the extension: .cast (asciicast v2), .svg (animated SVG) or .gif (animated GIF)",
                path.display(),
                match other {
                    Some(e) => format!("'.{e}' is not a format attnviz records"),
                    None => "the file has no extension".to_string(),
                }
            ))),
        }
    }
}

/// Play `scene` headless and write it to `path` in the format its extension names.
/// Returns what to say about the file.
fn record_to(
    scene: &scene::Scene,
    opts: &HeadlessOptions,
    path: &Path,
    font: Option<&Path>,
) -> Result<String> {
    let svg = match RecordFormat::from_path(path)? {
        RecordFormat::Gif => return record_gif(scene, opts, path, font),
        RecordFormat::Cast => false,
        RecordFormat::Svg => true,
    };
    let rec = play_through(scene, opts)?;
    let (bytes, how) = if svg {
        (
            animated_svg::svg(&rec, still_defaults(opts.theme)).into_bytes(),
            "open it in a browser, or show it in a README with ![](FILE.svg)".to_string(),
        )
    } else {
        (
            cast(&rec)?,
            format!("play it with: asciinema play {}", path.display()),
        )
    };
    write_atomically(path, &bytes)?;
    Ok(format!(
        "{} frames, {} bytes; {how}",
        rec.frames.len(),
        bytes.len()
    ))
}

/// [`record_to`] for a GIF: a GIF frame is drawn in pixels, so each is encoded as the
/// scene plays and only the last one is held.
fn record_gif(
    scene: &scene::Scene,
    opts: &HeadlessOptions,
    path: &Path,
    font: Option<&Path>,
) -> Result<String> {
    let mut g = gif::GifWriter::new(
        opts.size.cols,
        opts.size.rows,
        still_defaults(opts.theme),
        font,
        fonts::CJK_CANDIDATES,
    )?;
    let played = play_each(scene, opts, |f| g.push(f.at_ms, &f.screen))?;
    let g = g.finish(played.end_ms)?;
    report_fonts(&g, path);
    write_atomically(path, &g.bytes)?;
    Ok(format!(
        "{} frames, {} bytes; open it in a browser or an image viewer",
        played.frames,
        g.bytes.len()
    ))
}

/// Say which CJK font drew the GIF, or that none did, and which characters no font had.
fn report_fonts(g: &gif::Gif, path: &Path) {
    match &g.cjk {
        fonts::CjkFont::Missing => eprintln!(
            "warning: no CJK font found, so CJK characters are drawn as boxes in {}; {}",
            path.display(),
            fonts::CJK_HINT
        ),
        fonts::CjkFont::Found(p) | fonts::CjkFont::Given(p) => {
            eprintln!("CJK characters drawn with {}", p.display())
        }
        fonts::CjkFont::NotNeeded => {}
    }
    let missing: Vec<char> = g
        .missing
        .iter()
        .copied()
        .filter(|&c| {
            // Wide characters are CJK: the warning above covers them.
            let wide = unicode_width::UnicodeWidthChar::width(c) == Some(2);
            !(wide && g.cjk == fonts::CjkFont::Missing)
        })
        .collect();
    if !missing.is_empty() {
        let list: String = missing
            .iter()
            .map(|c| format!(" U+{:04X} {c}", *c as u32))
            .collect();
        eprintln!("warning: no font has{list}; drawn as boxes (--font FILE can add one)");
    }
}

/// Cells of one recorded frame (`--size` COLS x ROWS). A GIF is written frame by frame
/// but each frame is drawn in pixels (3,000 x 2,000 at 300 x 100), and a cast or SVG
/// recording holds every frame before writing it: 300 x 100 (six times the default
/// 120 x 40) keeps both within a few hundred MB; 1000 x 1000 took 3.1 GB and minutes.
pub const MAX_RECORD_CELLS: u32 = 300 * 100;

pub fn play(args: &PlayArgs) -> Result<()> {
    check_speed(args.speed)?;
    if let Some(path) = &args.record {
        // A wrong extension, a size too large or the scene file itself as the output
        // are found before the scene is played.
        RecordFormat::from_path(path)?;
        let cells = u32::from(args.size.cols) * u32::from(args.size.rows);
        if cells > MAX_RECORD_CELLS {
            return Err(Error::usage(format!(
                "--size {}x{} is {cells} cells a frame; a recording takes at most {MAX_RECORD_CELLS} (e.g. 300x100 or 120x40)",
                args.size.cols, args.size.rows
            )));
        }
        crate::output::refuse_overwrite("--record", path, &[("SCENE", Path::new(&args.scene))])?;
    }
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
            let what = record_to(&scene, &opts, path, args.font.as_deref())?;
            eprintln!(
                "recorded '{}' ({} steps, {:.1} s at speed {}) to {}: {what}",
                scene.name,
                scene.steps.len(),
                scene.duration_ms() as f64 / 1000.0 / args.speed,
                args.speed,
                path.display(),
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
