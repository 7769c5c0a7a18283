//! A small heatmap with no labels or numbers: two matrix cells per terminal cell, one
//! above the other (an upper half block with its foreground for the top cell and its
//! background for the bottom one). Without colour, one cell per terminal cell from the
//! glyph ramp. Used for overviews where many maps share the screen (every layer x head).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use super::glyphs::Glyphs;
use super::heat::{HeatPainter, ValueScale, adapt};

/// Matrix cells a minimap shows in `area`: (rows, cols).
pub fn minimap_cells(area: Rect, mono: bool) -> (usize, usize) {
    let rows = if mono { 1 } else { 2 };
    (area.height as usize * rows, area.width as usize)
}

pub struct MiniMap<'a> {
    /// rows x cols values, row-major, as [`minimap_cells`] of the area; None is empty.
    pub values: &'a [Option<f64>],
    pub rows: usize,
    pub cols: usize,
    pub scale: ValueScale,
    pub painter: &'a HeatPainter,
    pub glyphs: &'a Glyphs,
    /// Style of empty cells (and of the glyphs in mono).
    pub base: Style,
}

impl Widget for &MiniMap<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        let get = |r: usize, c: usize| {
            (r < self.rows && c < self.cols)
                .then(|| self.values.get(r * self.cols + c).copied().flatten())
                .flatten()
        };
        let diverging = self.scale.is_diverging();
        let color = |v: f64| {
            adapt(
                self.painter.depth,
                self.painter.rgb(self.scale.norm(v), diverging),
            )
        };
        for y in 0..area.height {
            for x in 0..area.width {
                let (c, r) = (x as usize, y as usize);
                let cell = &mut buf[(area.x + x, area.y + y)];
                if self.painter.is_mono() {
                    let s =
                        get(r, c).map_or(" ", |v| self.glyphs.ramp_glyph(self.scale.norm(v).abs()));
                    cell.set_symbol(s).set_style(self.base);
                    continue;
                }
                let (top, bottom) = (get(2 * r, c), get(2 * r + 1, c));
                let mut style = self.base;
                if let Some(fg) = top.and_then(color) {
                    style = style.fg(fg);
                }
                if let Some(bg) = bottom.and_then(color) {
                    style = style.bg(bg);
                }
                let symbol = if top.is_some() { "▀" } else { " " };
                cell.set_symbol(symbol).set_style(style);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widgets::heat::ColorDepth;
    use ratatui::style::Color;

    const SEQ: &[(u8, u8, u8)] = &[(0, 0, 0), (255, 255, 255)];

    #[test]
    fn two_rows_per_cell_in_colour() {
        let painter = HeatPainter {
            depth: ColorDepth::TrueColor,
            sequential: SEQ,
            diverging: SEQ,
        };
        let glyphs = Glyphs::new(false);
        let values = [Some(1.0), Some(0.0), Some(0.0), None];
        let map = MiniMap {
            values: &values,
            rows: 2,
            cols: 2,
            scale: ValueScale::Sequential { lo: 0.0, hi: 1.0 },
            painter: &painter,
            glyphs: &glyphs,
            base: Style::default(),
        };
        let area = Rect::new(0, 0, 2, 1);
        let mut buf = Buffer::empty(area);
        (&map).render(area, &mut buf);
        let a = &buf[(0, 0)];
        assert_eq!(a.symbol(), "▀");
        assert_eq!(a.fg, Color::Rgb(255, 255, 255));
        assert_eq!(a.bg, Color::Rgb(0, 0, 0));
        // The bottom of column 1 is empty: no background set.
        assert_eq!(buf[(1, 0)].bg, Color::Reset);
        assert_eq!(minimap_cells(area, false), (2, 2));
    }

    #[test]
    fn mono_uses_the_glyph_ramp() {
        let painter = HeatPainter {
            depth: ColorDepth::Mono,
            sequential: SEQ,
            diverging: SEQ,
        };
        let glyphs = Glyphs::new(true);
        let values = [Some(1.0), Some(0.0)];
        let map = MiniMap {
            values: &values,
            rows: 1,
            cols: 2,
            scale: ValueScale::Sequential { lo: 0.0, hi: 1.0 },
            painter: &painter,
            glyphs: &glyphs,
            base: Style::default(),
        };
        let area = Rect::new(0, 0, 2, 1);
        let mut buf = Buffer::empty(area);
        (&map).render(area, &mut buf);
        assert_eq!(buf[(0, 0)].symbol(), glyphs.ramp_glyph(1.0));
        assert_eq!(buf[(1, 0)].symbol(), glyphs.ramp_glyph(0.0));
        assert_ne!(glyphs.ramp_glyph(1.0), glyphs.ramp_glyph(0.0));
    }
}
