//! One line that says how to read a heatmap: low end, the ramp, high end, and what a
//! masked cell looks like.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use super::glyphs::Glyphs;
use super::heat::{HeatPainter, ValueScale};
use super::numfmt::fit_number;
use super::text;

/// Ramp cells drawn between the two ends.
const RAMP_CELLS: usize = 10;

pub struct Legend<'a> {
    pub scale: ValueScale,
    pub painter: &'a HeatPainter,
    pub glyphs: &'a Glyphs,
    pub label: Style,
    pub masked_style: Style,
    /// Text after the masked mark, e.g. "masked"; None if the matrix has no masked cell.
    pub masked: Option<&'a str>,
}

impl Widget for &Legend<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        let (lo, hi) = self.scale.ends();
        let lo_s = fit_number(lo, 6, !self.glyphs.ascii);
        let hi_s = fit_number(hi, 6, !self.glyphs.ascii);
        let mut x = area.x;
        let right = area.right();
        let put = |x: &mut u16, s: &str, style: Style, buf: &mut Buffer| {
            if *x < right {
                let (nx, _) = buf.set_stringn(*x, area.y, s, (right - *x) as usize, style);
                *x = nx;
            }
        };
        put(&mut x, &lo_s, self.label, buf);
        put(&mut x, " ", self.label, buf);
        let div = self.scale.is_diverging();
        for i in 0..RAMP_CELLS {
            let f = i as f64 / (RAMP_CELLS - 1) as f64;
            let t = if div { 2.0 * f - 1.0 } else { f };
            let style = self.painter.cell_style(t, div);
            let glyph = if self.painter.is_mono() {
                self.glyphs.ramp_glyph(t.abs())
            } else {
                " "
            };
            put(&mut x, glyph, style, buf);
        }
        put(&mut x, " ", self.label, buf);
        put(&mut x, &hi_s, self.label, buf);
        if let Some(what) = self.masked {
            put(&mut x, "  ", self.label, buf);
            put(&mut x, self.glyphs.masked, self.masked_style, buf);
            let rest = format!(" {what}");
            let room = right.saturating_sub(x) as usize;
            put(
                &mut x,
                &text::fit(&rest, room, self.glyphs.ellipsis),
                self.label,
                buf,
            );
        }
    }
}
