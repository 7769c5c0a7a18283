//! A recording as an animated GIF: each frame of the [`Recording`] drawn in pixels
//! (cells of [`CELL_W`] x [`CELL_H`], glyphs from [`fonts`]), one GIF frame per
//! recorded frame, held for its time on the virtual clock, looping.
//!
//! Each GIF frame after the first holds only the rectangle that changed (kept over the
//! previous one), with its own palette: the exact colours when there are at most 256 of
//! them (a terminal frame has few: cell colours and the few edge shades of each glyph),
//! else NeuQuant's (the `gif` crate's quantiser). Block glyphs and box-drawing lines are
//! drawn as rectangles, as a terminal does, so bars, heatmaps and borders join up.

use std::path::Path;

use ratatui::buffer::{Buffer, Cell};
use unicode_width::UnicodeWidthStr;

use super::fonts::{self, CELL_H, CELL_W, CjkFont, Fonts, LEVELS};
use super::headless::Recording;
use super::palette::Defaults;
use super::still::{block, look};
use crate::error::{Error, Result};

type Rgb = (u8, u8, u8);
/// A rectangle of pixels: x, y, width, height.
type Rect = (u32, u32, u32, u32);

/// Shortest delay a GIF frame gets, in centiseconds: browsers show 0 and 1 as 10.
const MIN_DELAY_CS: u16 = 2;
/// NeuQuant's speed when a frame has more than 256 colours (1 best .. 30 fastest).
const QUANT_SPEED: i32 = 10;

/// The GIF and what to tell the person about its fonts.
pub struct Gif {
    pub bytes: Vec<u8>,
    pub cjk: CjkFont,
    /// Characters no font had, drawn as boxes (at most a few, for the message).
    pub missing: Vec<char>,
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("cannot write the GIF: {e}"))
}

/// The recording as a GIF; `font` is the CJK font to use instead of the system's.
pub fn gif(rec: &Recording, defaults: Defaults, font: Option<&Path>) -> Result<Gif> {
    gif_with(rec, defaults, font, fonts::CJK_CANDIDATES)
}

/// [`gif`] looking for a CJK font at `candidates` (path, face in a collection).
pub fn gif_with(
    rec: &Recording,
    defaults: Defaults,
    font: Option<&Path>,
    candidates: &'static [(&'static str, u32)],
) -> Result<Gif> {
    let mut w = GifWriter::new(rec.cols, rec.rows, defaults, font, candidates)?;
    for f in &rec.frames {
        w.push(f.at_ms, &f.screen)?;
    }
    w.finish(rec.end_ms)
}

/// A GIF written a frame at a time, as the scene plays: it keeps the pixels of the last
/// frame only (to find what the next one changes), so a recording's memory does not
/// grow with its length. A frame is written when the next one arrives, which says how
/// long it is shown.
pub struct GifWriter {
    enc: gif::Encoder<Vec<u8>>,
    fonts: Fonts,
    defaults: Defaults,
    missing: Vec<char>,
    size: (u32, u32),
    /// The last frame's pixels, its time and the rectangle it changed.
    last: Option<(Vec<u8>, u64, Rect)>,
}

impl GifWriter {
    /// A GIF of `cols` x `rows` cells; `font` is the CJK font to use instead of the
    /// system's (one of `candidates`, looked for when a frame first needs it).
    pub fn new(
        cols: u16,
        rows: u16,
        defaults: Defaults,
        font: Option<&Path>,
        candidates: &'static [(&'static str, u32)],
    ) -> Result<GifWriter> {
        let fonts = Fonts::load_from(font, candidates)?;
        let (w, h) = (u32::from(cols) * CELL_W, u32::from(rows) * CELL_H);
        let (gw, gh) = (
            u16::try_from(w).map_err(|_| {
                Error::usage(format!(
                    "--size: a GIF is at most 65535 px wide; {cols} columns make {w}"
                ))
            })?,
            u16::try_from(h).map_err(|_| {
                Error::usage(format!(
                    "--size: a GIF is at most 65535 px high; {rows} rows make {h}"
                ))
            })?,
        );
        let mut enc = gif::Encoder::new(Vec::new(), gw, gh, &[]).map_err(internal)?;
        enc.set_repeat(gif::Repeat::Infinite).map_err(internal)?;
        Ok(GifWriter {
            enc,
            fonts,
            defaults,
            missing: Vec::new(),
            size: (w, h),
            last: None,
        })
    }

    /// The screen shown from `at_ms` on (times strictly increase).
    pub fn push(&mut self, at_ms: u64, screen: &Buffer) -> Result<()> {
        let px = raster(screen, self.defaults, &mut self.fonts, &mut self.missing);
        let (w, h) = self.size;
        let rect = match &self.last {
            Some((p, _, _)) => changed(p, &px, w, h).unwrap_or((0, 0, 1, 1)),
            None => (0, 0, w, h),
        };
        self.write_last(at_ms)?;
        self.last = Some((px, at_ms, rect));
        Ok(())
    }

    /// Write the last frame, shown until `until_ms`.
    fn write_last(&mut self, until_ms: u64) -> Result<()> {
        let Some((px, start, rect)) = &self.last else {
            return Ok(());
        };
        let mut delay = centis(until_ms) - centis(*start);
        let mut first = true;
        // A GIF delay is at most 655.35 s: a longer screen is held by empty frames.
        loop {
            let d = delay.min(u64::from(u16::MAX)) as u16;
            delay -= u64::from(d);
            let r = if first { *rect } else { (0, 0, 1, 1) };
            self.enc
                .write_frame(&sub_frame(px, self.size.0, r, d.max(MIN_DELAY_CS)))
                .map_err(internal)?;
            first = false;
            if delay == 0 {
                return Ok(());
            }
        }
    }

    /// Write the last frame, shown until `end_ms` (the end of the scene), and the GIF's
    /// trailer.
    pub fn finish(mut self, end_ms: u64) -> Result<Gif> {
        self.write_last(end_ms)?;
        let bytes = self.enc.into_inner().map_err(internal)?;
        let mut missing = self.missing;
        missing.truncate(8);
        Ok(Gif {
            bytes,
            cjk: self.fonts.cjk_source().clone(),
            missing,
        })
    }
}

/// Milliseconds as whole centiseconds, rounded to nearest, so that delays add up to the
/// recording's times instead of drifting.
fn centis(ms: u64) -> u64 {
    (ms + 5) / 10
}

/// The smallest rectangle (x, y, w, h) where `a` and `b` differ; `None` if they do not.
fn changed(a: &[u8], b: &[u8], w: u32, h: u32) -> Option<(u32, u32, u32, u32)> {
    let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
    let row = (w * 3) as usize;
    for y in 0..h {
        let (ra, rb) = (
            &a[y as usize * row..(y as usize + 1) * row],
            &b[y as usize * row..(y as usize + 1) * row],
        );
        if ra == rb {
            continue;
        }
        let first = (0..w).find(|&x| {
            ra[x as usize * 3..x as usize * 3 + 3] != rb[x as usize * 3..x as usize * 3 + 3]
        })?;
        let last = (0..w).rev().find(|&x| {
            ra[x as usize * 3..x as usize * 3 + 3] != rb[x as usize * 3..x as usize * 3 + 3]
        })?;
        x0 = x0.min(first);
        x1 = x1.max(last + 1);
        y0 = y0.min(y);
        y1 = y + 1;
    }
    (x1 > x0).then(|| (x0, y0, x1 - x0, y1 - y0))
}

/// The pixels of rectangle `r` of `px` as a GIF frame kept under the next one.
fn sub_frame(px: &[u8], w: u32, r: (u32, u32, u32, u32), delay: u16) -> gif::Frame<'static> {
    let (x, y, rw, rh) = r;
    let mut rgb = Vec::with_capacity((rw * rh * 3) as usize);
    for yy in y..y + rh {
        let start = ((yy * w + x) * 3) as usize;
        rgb.extend_from_slice(&px[start..start + (rw * 3) as usize]);
    }
    let mut frame = match exact_palette(&rgb) {
        Some((palette, indices)) => gif::Frame {
            palette: Some(palette),
            buffer: indices.into(),
            width: rw as u16,
            height: rh as u16,
            ..gif::Frame::default()
        },
        None => gif::Frame::from_rgb_speed(rw as u16, rh as u16, &rgb, QUANT_SPEED),
    };
    frame.left = x as u16;
    frame.top = y as u16;
    frame.delay = delay;
    frame.dispose = gif::DisposalMethod::Keep;
    frame
}

/// The colours of `rgb` in order of first use, and each pixel's index, if there are at
/// most 256.
fn exact_palette(rgb: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut index: std::collections::HashMap<[u8; 3], u8> = std::collections::HashMap::new();
    let mut palette = Vec::new();
    let mut out = Vec::with_capacity(rgb.len() / 3);
    for p in rgb.chunks_exact(3) {
        let key = [p[0], p[1], p[2]];
        let i = match index.get(&key) {
            Some(&i) => i,
            None => {
                let i = u8::try_from(index.len()).ok()?;
                index.insert(key, i);
                palette.extend_from_slice(&key);
                i
            }
        };
        out.push(i);
    }
    Some((palette, out))
}

fn blend(fg: Rgb, bg: Rgb, num: u32, den: u32) -> Rgb {
    let mix =
        |f: u8, b: u8| ((u32::from(f) * num + u32::from(b) * (den - num) + den / 2) / den) as u8;
    (mix(fg.0, bg.0), mix(fg.1, bg.1), mix(fg.2, bg.2))
}

/// A frame buffer being drawn.
struct Canvas {
    px: Vec<u8>,
    w: u32,
}

impl Canvas {
    fn fill(&mut self, x: u32, y: u32, w: u32, h: u32, c: Rgb) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, c);
            }
        }
    }

    fn set(&mut self, x: u32, y: u32, c: Rgb) {
        if x >= self.w {
            return;
        }
        let i = ((y * self.w + x) * 3) as usize;
        if i + 2 < self.px.len() {
            self.px[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
        }
    }
}

/// The screen in RGB pixels, row-major.
fn raster(buf: &Buffer, defaults: Defaults, fonts: &mut Fonts, missing: &mut Vec<char>) -> Vec<u8> {
    let area = buf.area;
    let w = u32::from(area.width) * CELL_W;
    let h = u32::from(area.height) * CELL_H;
    let mut c = Canvas {
        px: vec![0; (w * h * 3) as usize],
        w,
    };
    c.fill(0, 0, w, h, defaults.bg);
    for y in area.top()..area.bottom() {
        let mut x = area.left();
        while x < area.right() {
            let cell = &buf[(x, y)];
            let cells = cell.symbol().width().max(1) as u32;
            let (px, py) = (
                u32::from(x - area.left()) * CELL_W,
                u32::from(y - area.top()) * CELL_H,
            );
            let cells_w = cells.min(u32::from(area.right() - x));
            draw_cell(&mut c, cell, defaults, fonts, missing, (px, py), cells_w);
            x += cells as u16;
        }
    }
    c.px
}

fn draw_cell(
    c: &mut Canvas,
    cell: &Cell,
    defaults: Defaults,
    fonts: &mut Fonts,
    missing: &mut Vec<char>,
    (px, py): (u32, u32),
    cells: u32,
) {
    let l = look(cell, defaults);
    let width = cells * CELL_W;
    c.fill(px, py, width, CELL_H, l.bg);
    let fg = if l.dim { blend(l.fg, l.bg, 3, 5) } else { l.fg };
    let symbol = cell.symbol();
    if let Some(f) = block(symbol) {
        let colour = match f.opacity {
            Some("0.25") => blend(fg, l.bg, 1, 4),
            Some("0.5") => blend(fg, l.bg, 1, 2),
            Some(_) => blend(fg, l.bg, 3, 4),
            None => fg,
        };
        let (x0, x1) = (f.left * CELL_W / 8, f.right * CELL_W / 8);
        let (y0, y1) = (f.top * CELL_H / 8, f.bottom * CELL_H / 8);
        c.fill(px + x0, py + y0, x1 - x0, y1 - y0, colour);
        return;
    }
    let Some(ch) = symbol.chars().next() else {
        return;
    };
    if let Some(q) = quadrants(ch) {
        let (hw, hh) = (CELL_W / 2, CELL_H / 2);
        for (bit, (dx, dy)) in [(0, 0), (hw, 0), (0, hh), (hw, hh)].into_iter().enumerate() {
            if q & (1 << bit) != 0 {
                c.fill(px + dx, py + dy, hw, hh, fg);
            }
        }
    } else if let Some(arms) = box_arms(ch) {
        draw_box(c, (px, py), arms, fg);
    } else if !ch.is_whitespace() {
        match fonts.glyph(ch, l.bold, cells) {
            Some(g) => {
                for gy in 0..g.height {
                    for gx in 0..g.width {
                        let cov = g.coverage[(gy * g.width + gx) as usize];
                        let (x, y) = (g.left + gx as i32, g.top + gy as i32);
                        if cov == 0 || x < 0 || y < 0 || x as u32 >= width || y as u32 >= CELL_H {
                            continue;
                        }
                        let colour = blend(fg, l.bg, u32::from(cov), u32::from(LEVELS));
                        c.set(px + x as u32, py + y as u32, colour);
                    }
                }
            }
            None => {
                if !missing.contains(&ch) {
                    missing.push(ch);
                }
                // A box where the glyph would be, as terminals draw what they lack.
                let (x0, y0, bw, bh) = (px + 1, py + 3, width - 2, CELL_H - 6);
                c.fill(x0, y0, bw, 1, fg);
                c.fill(x0, y0 + bh - 1, bw, 1, fg);
                c.fill(x0, y0, 1, bh, fg);
                c.fill(x0 + bw - 1, y0, 1, bh, fg);
            }
        }
    }
    let line = |c: &mut Canvas, y: u32| c.fill(px, py + y, width, 1, fg);
    if l.underline {
        line(c, CELL_H - 3);
    }
    if l.strike {
        line(c, CELL_H / 2);
    }
}

/// The quarters a quadrant block fills: bits upper left, upper right, lower left, lower
/// right (the flash view marks partly masked tiles with one).
fn quadrants(c: char) -> Option<u8> {
    Some(match c {
        '▘' => 0b0001,
        '▝' => 0b0010,
        '▖' => 0b0100,
        '▗' => 0b1000,
        '▚' => 0b1001,
        '▞' => 0b0110,
        '▙' => 0b1101,
        '▛' => 0b0111,
        '▜' => 0b1011,
        '▟' => 0b1110,
        _ => return None,
    })
}

/// The arms of a box-drawing character: up, right, down, left, each 0 (none), 1 (light)
/// or 2 (heavy). Rounded corners are drawn square, as most terminals at this size do.
fn box_arms(c: char) -> Option<[u8; 4]> {
    Some(match c {
        '─' => [0, 1, 0, 1],
        '│' => [1, 0, 1, 0],
        '━' => [0, 2, 0, 2],
        '┃' => [2, 0, 2, 0],
        '┌' | '╭' => [0, 1, 1, 0],
        '┐' | '╮' => [0, 0, 1, 1],
        '└' | '╰' => [1, 1, 0, 0],
        '┘' | '╯' => [1, 0, 0, 1],
        '├' => [1, 1, 1, 0],
        '┤' => [1, 0, 1, 1],
        '┬' => [0, 1, 1, 1],
        '┴' => [1, 1, 0, 1],
        '┼' => [1, 1, 1, 1],
        '┏' => [0, 2, 2, 0],
        '┓' => [0, 0, 2, 2],
        '┗' => [2, 2, 0, 0],
        '┛' => [2, 0, 0, 2],
        '╴' => [0, 0, 0, 1],
        '╵' => [1, 0, 0, 0],
        '╶' => [0, 1, 0, 0],
        '╷' => [0, 0, 1, 0],
        _ => return None,
    })
}

fn draw_box(c: &mut Canvas, (px, py): (u32, u32), [up, right, down, left]: [u8; 4], fg: Rgb) {
    let (cx, cy) = (CELL_W / 2, CELL_H / 2);
    let t = |weight: u8| u32::from(weight.max(1));
    let hw = t(left.max(right));
    let vw = t(up.max(down));
    if up > 0 {
        c.fill(px + cx, py, t(up), cy + hw, fg);
    }
    if down > 0 {
        c.fill(px + cx, py + cy, t(down), CELL_H - cy, fg);
    }
    if left > 0 {
        c.fill(px, py + cy, cx + vw, t(left), fg);
    }
    if right > 0 {
        c.fill(px + cx, py + cy, CELL_W - cx, t(right), fg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_changed_rectangle_is_tight() {
        let (w, h) = (4, 3);
        let a = vec![0u8; (w * h * 3) as usize];
        let mut b = a.clone();
        assert_eq!(changed(&a, &b, w, h), None);
        b[((w + 2) * 3) as usize] = 9;
        b[((2 * w + 1) * 3 + 2) as usize] = 9;
        assert_eq!(changed(&a, &b, w, h), Some((1, 1, 2, 2)));
    }

    #[test]
    fn centiseconds_round_to_nearest() {
        assert_eq!(centis(0), 0);
        assert_eq!(centis(4), 0);
        assert_eq!(centis(5), 1);
        assert_eq!(centis(13_000), 1300);
        assert_eq!(centis(13_333) - centis(12_500), 83);
    }

    #[test]
    fn an_exact_palette_keeps_first_use_order_and_gives_up_past_256() {
        let (p, i) = exact_palette(&[1, 2, 3, 4, 5, 6, 1, 2, 3]).unwrap();
        assert_eq!(p, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(i, vec![0, 1, 0]);
        let many: Vec<u8> = (0..300u32)
            .flat_map(|k| [k as u8, (k >> 8) as u8, 0])
            .collect();
        assert!(exact_palette(&many).is_none());
    }
}
