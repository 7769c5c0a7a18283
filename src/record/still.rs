//! One frame as a still: an SVG that keeps every colour (for slides and READMEs), or
//! plain text (for diffs and docs).
//!
//! The SVG lays the terminal grid out in whole pixels, draws backgrounds as rectangles,
//! stretches each run of text to its exact cell width (so any monospace font lines up)
//! and draws block glyphs (the heatmaps' `█▀▄` and bars) as rectangles, which is how
//! they look in a terminal and not how most fonts draw them.

use std::fmt::Write as _;

use ratatui::buffer::{Buffer, Cell};
use ratatui::style::Modifier;
use unicode_width::UnicodeWidthStr;

use super::palette::{Defaults, hex, rgb};

/// One cell in pixels. The advance of a monospace glyph is about 0.6 em, so a 20 px
/// font fills 12 px; 24 px rows give the usual 1.2 line height.
pub(super) const CELL_W: u32 = 12;
pub(super) const CELL_H: u32 = 24;
pub(super) const FONT_PX: u32 = 20;
/// Baseline below the top of a row.
const BASELINE: u32 = 18;
pub(super) const FONTS: &str = "ui-monospace,'SF Mono','DejaVu Sans Mono',Menlo,Consolas,'Noto Sans Mono CJK SC','Noto Sans Mono',monospace";

/// The plain text of a frame: one line per row, trailing blanks removed.
pub fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        let mut x = area.left();
        while x < area.right() {
            let symbol = buf[(x, y)].symbol();
            line.push_str(symbol);
            x += symbol.width().max(1) as u16;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A cell's look once `Reset`, reversed and hidden are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Look {
    pub(super) fg: (u8, u8, u8),
    pub(super) bg: (u8, u8, u8),
    pub(super) bold: bool,
    pub(super) italic: bool,
    pub(super) underline: bool,
    pub(super) strike: bool,
    pub(super) dim: bool,
}

pub(super) fn look(cell: &Cell, d: Defaults) -> Look {
    let m = cell.modifier;
    let (mut fg, mut bg) = (rgb(cell.fg).unwrap_or(d.fg), rgb(cell.bg).unwrap_or(d.bg));
    if m.contains(Modifier::REVERSED) {
        std::mem::swap(&mut fg, &mut bg);
    }
    if m.contains(Modifier::HIDDEN) {
        fg = bg;
    }
    Look {
        fg,
        bg,
        bold: m.contains(Modifier::BOLD),
        italic: m.contains(Modifier::ITALIC),
        underline: m.contains(Modifier::UNDERLINED),
        strike: m.contains(Modifier::CROSSED_OUT),
        dim: m.contains(Modifier::DIM),
    }
}

/// The part of a cell a block glyph fills, in eighths of the cell, with an opacity for
/// the shades.
pub(super) struct Fill {
    pub(super) left: u32,
    pub(super) top: u32,
    pub(super) right: u32,
    pub(super) bottom: u32,
    pub(super) opacity: Option<&'static str>,
}

const fn fill(left: u32, top: u32, right: u32, bottom: u32) -> Fill {
    Fill {
        left,
        top,
        right,
        bottom,
        opacity: None,
    }
}

const fn shade(opacity: &'static str) -> Fill {
    Fill {
        opacity: Some(opacity),
        ..fill(0, 0, 8, 8)
    }
}

pub(super) fn block(symbol: &str) -> Option<Fill> {
    let c = symbol.chars().next()?;
    if symbol.chars().count() != 1 {
        return None;
    }
    Some(match c {
        '█' => fill(0, 0, 8, 8),
        '▀' => fill(0, 0, 8, 4),
        '▐' => fill(4, 0, 8, 8),
        '▔' => fill(0, 0, 8, 1),
        '▕' => fill(7, 0, 8, 8),
        // Lower eighths: ▁ (1/8) .. ▇ (7/8).
        '\u{2581}'..='\u{2587}' => {
            let k = c as u32 - 0x2580;
            fill(0, 8 - k, 8, 8)
        }
        // Left eighths: ▉ (7/8) .. ▏ (1/8).
        '\u{2589}'..='\u{258f}' => {
            let k = 0x2590 - c as u32;
            fill(0, 0, k, 8)
        }
        '░' => shade("0.25"),
        '▒' => shade("0.5"),
        '▓' => shade("0.75"),
        _ => return None,
    })
}

pub(super) fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
}

/// Text attributes of a look, as SVG attributes.
fn text_attrs(l: &Look) -> String {
    let mut a = format!(" fill=\"{}\"", hex(l.fg));
    if l.bold {
        a.push_str(" font-weight=\"bold\"");
    }
    if l.italic {
        a.push_str(" font-style=\"italic\"");
    }
    match (l.underline, l.strike) {
        (true, true) => a.push_str(" text-decoration=\"underline line-through\""),
        (true, false) => a.push_str(" text-decoration=\"underline\""),
        (false, true) => a.push_str(" text-decoration=\"line-through\""),
        (false, false) => {}
    }
    if l.dim {
        a.push_str(" opacity=\"0.6\"");
    }
    a
}

/// The frame as a standalone SVG document.
pub fn svg(buf: &Buffer, defaults: Defaults, title: Option<&str>) -> String {
    let area = buf.area;
    let (w, h) = (
        u32::from(area.width) * CELL_W,
        u32::from(area.height) * CELL_H,
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">"
    );
    if let Some(t) = title {
        out.push_str("<title>");
        // XML allows no control characters; they are shown as escapes.
        escape(&crate::widgets::text::escape_controls(t), &mut out);
        out.push_str("</title>\n");
    }
    let _ = writeln!(
        out,
        "<style>text{{font-family:{FONTS};font-size:{FONT_PX}px;white-space:pre}}</style>"
    );
    let _ = writeln!(
        out,
        "<rect width=\"{w}\" height=\"{h}\" fill=\"{}\"/>",
        hex(defaults.bg)
    );

    // Backgrounds and block glyphs first, text on top.
    let mut shapes = String::new();
    let mut texts = String::new();
    for y in area.top()..area.bottom() {
        let py = u32::from(y - area.top()) * CELL_H;
        draw_row(buf, y, py, defaults, &mut shapes, &mut texts);
    }
    let _ = writeln!(out, "<g shape-rendering=\"crispEdges\">\n{shapes}</g>");
    let _ = writeln!(out, "<g>\n{texts}</g>");
    out.push_str("</svg>\n");
    out
}

/// Row `y` of `buf` as SVG drawn at height `py`: its background rectangles and block
/// glyphs onto `shapes`, its text onto `texts` (drawn after every row's shapes, or
/// after the row's own). Cells of the terminal's own background draw nothing.
pub(super) fn draw_row(
    buf: &Buffer,
    y: u16,
    py: u32,
    defaults: Defaults,
    shapes: &mut String,
    texts: &mut String,
) {
    let area = buf.area;
    let cells: Vec<(u16, &Cell, usize)> = {
        let mut v = Vec::new();
        let mut x = area.left();
        while x < area.right() {
            let cell = &buf[(x, y)];
            let width = cell.symbol().width().max(1);
            v.push((x - area.left(), cell, width));
            x += width as u16;
        }
        v
    };

    // Background rectangles, merged along the row.
    let mut i = 0;
    while i < cells.len() {
        let bg = look(cells[i].1, defaults).bg;
        let start = cells[i].0;
        let mut end = start + cells[i].2 as u16;
        let mut j = i + 1;
        while j < cells.len() && look(cells[j].1, defaults).bg == bg {
            end = cells[j].0 + cells[j].2 as u16;
            j += 1;
        }
        if bg != defaults.bg {
            let _ = writeln!(
                shapes,
                "<rect x=\"{}\" y=\"{py}\" width=\"{}\" height=\"{CELL_H}\" fill=\"{}\"/>",
                u32::from(start) * CELL_W,
                u32::from(end - start) * CELL_W,
                hex(bg)
            );
        }
        i = j;
    }

    // Glyphs: block glyphs as rectangles, wide glyphs one by one, and runs of narrow
    // glyphs of one look stretched to their cells.
    let mut i = 0;
    while i < cells.len() {
        let (x, cell, width) = cells[i];
        let symbol = cell.symbol();
        let l = look(cell, defaults);
        let px = u32::from(x) * CELL_W;
        if symbol.trim().is_empty() {
            i += 1;
            continue;
        }
        if let Some(f) = block(symbol) {
            let _ = write!(
                shapes,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"",
                px + f.left * CELL_W / 8,
                py + f.top * CELL_H / 8,
                (f.right - f.left) * CELL_W / 8,
                (f.bottom - f.top) * CELL_H / 8,
                hex(l.fg)
            );
            if let Some(o) = f.opacity {
                let _ = write!(shapes, " fill-opacity=\"{o}\"");
            }
            shapes.push_str("/>\n");
            i += 1;
            continue;
        }
        if width > 1 {
            let _ = write!(
                texts,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\"{}>",
                px + CELL_W * width as u32 / 2,
                py + BASELINE,
                text_attrs(&l)
            );
            escape(symbol, texts);
            texts.push_str("</text>\n");
            i += 1;
            continue;
        }
        let mut j = i;
        let mut run = String::new();
        while j < cells.len() {
            let (_, c, wd) = cells[j];
            let s = c.symbol();
            if wd != 1 || s.trim().is_empty() || block(s).is_some() || look(c, defaults) != l {
                break;
            }
            run.push_str(s);
            j += 1;
        }
        let _ = write!(
            texts,
            "<text x=\"{px}\" y=\"{}\" textLength=\"{}\" lengthAdjust=\"spacingAndGlyphs\"{}>",
            py + BASELINE,
            (j - i) as u32 * CELL_W,
            text_attrs(&l)
        );
        escape(&run, texts);
        texts.push_str("</text>\n");
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Style};

    fn sample() -> Buffer {
        let mut buf = Buffer::empty(Rect::new(0, 0, 8, 2));
        buf.set_string(0, 0, "Q·K <x>", Style::new().fg(Color::Yellow).bold());
        buf.set_string(0, 1, "注意", Style::new().bg(Color::Blue));
        buf.set_string(4, 1, "█▀", Style::new().fg(Color::Rgb(255, 0, 0)));
        buf
    }

    #[test]
    fn text_skips_the_cells_under_wide_glyphs() {
        assert_eq!(text(&sample()), "Q·K <x>\n注意█▀\n");
    }

    #[test]
    fn svg_keeps_colours_weights_and_escapes() {
        let s = svg(&sample(), Defaults::DARK, Some("a & b"));
        assert!(
            s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"96\" height=\"48\"")
        );
        assert!(s.contains("<title>a &amp; b</title>"));
        // Yellow, bold, stretched over its three cells; the second word after the space.
        assert!(s.contains(
            "<text x=\"0\" y=\"18\" textLength=\"36\" lengthAdjust=\"spacingAndGlyphs\" fill=\"#cdcd00\" font-weight=\"bold\">Q·K</text>"
        ));
        assert!(s.contains(">&lt;x&gt;</text>"));
        // The blue background of the two wide glyphs: four cells.
        assert!(s.contains("<rect x=\"0\" y=\"24\" width=\"48\" height=\"24\" fill=\"#0000ee\"/>"));
        assert!(
            s.contains("<text x=\"12\" y=\"42\" text-anchor=\"middle\" fill=\"#d4d4d4\">注</text>")
        );
        // Block glyphs are rectangles: a full cell, then the upper half.
        assert!(
            s.contains("<rect x=\"48\" y=\"24\" width=\"12\" height=\"24\" fill=\"#ff0000\"/>")
        );
        assert!(
            s.contains("<rect x=\"60\" y=\"24\" width=\"12\" height=\"12\" fill=\"#ff0000\"/>")
        );
        assert!(s.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn reversed_cells_swap_colours() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 2, 1));
        buf.set_string(0, 0, "r", Style::new().fg(Color::Green).reversed());
        let s = svg(&buf, Defaults::LIGHT, None);
        assert!(s.contains("width=\"12\" height=\"24\" fill=\"#00cd00\"/>"));
        assert!(s.contains("fill=\"#fafaf7\">r</text>"));
    }
}
