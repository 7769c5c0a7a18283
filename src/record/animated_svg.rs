//! A recording as one animated SVG that plays by itself, looping, wherever SVG is shown
//! as an image (a browser, a README on GitHub).
//!
//! The frames stand side by side on a strip one screen wide each; a CSS animation moves
//! the strip by one screen at each frame's time (`steps(1, end)` holds every position
//! until the next). CSS animations run inside an SVG shown through `<img>`, where
//! scripts never do and SMIL is not shown everywhere; a viewer without animation (an
//! image converter) shows the first frame.
//!
//! Rows are drawn by [`still`]'s code. Every distinct row is drawn once, in `<defs>`,
//! and a frame is a list of `<use>` of its rows, so a frame that changes three rows costs
//! three new rows and thirty references; a frame that repeats an earlier one is one
//! reference to it. CJK text is left to the viewer's fonts, as in a still.
//!
//! Written here rather than taken from a crate: the SVG recorders people use (svg-term,
//! asciinema's) are JavaScript and start from a cast, and this needs only the frames we
//! already hold and a few lines of CSS.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::headless::Recording;
use super::palette::{Defaults, hex};
use super::still::{self, CELL_H, CELL_W, FONT_PX, FONTS};

/// The recording as an SVG document.
pub fn svg(rec: &Recording, defaults: Defaults) -> String {
    let (w, h) = (u32::from(rec.cols) * CELL_W, u32::from(rec.rows) * CELL_H);
    let mut rows: HashMap<String, usize> = HashMap::new();
    let mut row_defs = String::new();
    let mut frame_ids: HashMap<Vec<Option<usize>>, usize> = HashMap::new();
    let mut frame_defs = String::new();
    let mut strip = String::new();
    for (i, frame) in rec.frames.iter().enumerate() {
        let area = frame.screen.area;
        // The frame's rows by their number in `row_defs`; None: a blank row.
        let mut ids = Vec::with_capacity(area.height as usize);
        for y in area.top()..area.bottom() {
            let (mut shapes, mut texts) = (String::new(), String::new());
            still::draw_row(&frame.screen, y, 0, defaults, &mut shapes, &mut texts);
            if shapes.is_empty() && texts.is_empty() {
                ids.push(None);
                continue;
            }
            let body = if shapes.is_empty() {
                texts
            } else {
                format!("<g shape-rendering=\"crispEdges\">\n{shapes}</g>\n{texts}")
            };
            let next = rows.len();
            let id = *rows.entry(body).or_insert_with_key(|body| {
                let _ = write!(row_defs, "<g id=\"r{next}\">\n{body}</g>\n");
                next
            });
            ids.push(Some(id));
        }
        let x = i as u64 * u64::from(w);
        let next = frame_ids.len();
        let mut fresh = false;
        let id = *frame_ids.entry(ids.clone()).or_insert_with(|| {
            fresh = true;
            next
        });
        if fresh {
            let _ = writeln!(frame_defs, "<g id=\"f{id}\">");
            for (y, row) in ids.iter().enumerate() {
                if let Some(r) = row {
                    let _ = writeln!(
                        frame_defs,
                        "<use href=\"#r{r}\" y=\"{}\"/>",
                        y as u32 * CELL_H
                    );
                }
            }
            frame_defs.push_str("</g>\n");
        }
        let _ = writeln!(strip, "<use href=\"#f{id}\" x=\"{x}\"/>");
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">"
    );
    out.push_str("<title>");
    still::escape(&crate::widgets::text::escape_controls(&rec.title), &mut out);
    out.push_str("</title>\n<style>\n");
    let _ = writeln!(
        out,
        "text{{font-family:{FONTS};font-size:{FONT_PX}px;white-space:pre}}"
    );
    let _ = writeln!(
        out,
        "#strip{{animation:play {} steps(1,end) infinite}}",
        seconds(rec.end_ms.max(1))
    );
    out.push_str(&keyframes(rec, w));
    out.push_str("</style>\n<defs>\n");
    out.push_str(&row_defs);
    out.push_str(&frame_defs);
    out.push_str("</defs>\n");
    let _ = writeln!(
        out,
        "<rect width=\"{w}\" height=\"{h}\" fill=\"{}\"/>",
        hex(defaults.bg)
    );
    let _ = write!(out, "<g id=\"strip\">\n{strip}</g>\n</svg>\n");
    out
}

/// `@keyframes play`: at each frame's share of the whole time, the strip moves to it.
fn keyframes(rec: &Recording, w: u32) -> String {
    let total = rec.end_ms.max(1);
    let mut k = String::from("@keyframes play{");
    let shift = |i: usize| i as u64 * u64::from(w);
    for (i, f) in rec.frames.iter().enumerate() {
        let _ = write!(
            k,
            "{}{{transform:translateX(-{}px)}}",
            percent(f.at_ms, total),
            shift(i)
        );
    }
    let last = rec.frames.len().saturating_sub(1);
    let _ = writeln!(k, "100%{{transform:translateX(-{}px)}}}}", shift(last));
    k
}

/// `part` of `total` as a percentage with four decimals, by integer arithmetic (the
/// same text on every machine).
fn percent(part: u64, total: u64) -> String {
    let v = u128::from(part) * 1_000_000 / u128::from(total.max(1));
    format!("{}.{:04}%", v / 10_000, v % 10_000)
}

fn seconds(ms: u64) -> String {
    format!("{}.{:03}s", ms / 1000, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_and_seconds_are_exact() {
        assert_eq!(percent(0, 78_000), "0.0000%");
        assert_eq!(percent(13_000, 78_000), "16.6666%");
        assert_eq!(percent(78_000, 78_000), "100.0000%");
        assert_eq!(seconds(78_000), "78.000s");
        assert_eq!(seconds(1_250), "1.250s");
    }
}
