//! A matrix drawn as a heatmap: row and column labels, one coloured cell per value, the
//! number written in the cell where it fits, masked cells marked, a cursor and
//! highlighted cells. Without colour the cells carry a glyph ramp beside the number.
//!
//! [`HeatmapGeometry`] is the layout alone (cell width, scrolling, where each cell is):
//! the widget draws with it and the app maps mouse clicks back to cells with it.

use ndarray::ArrayView2;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use super::glyphs::Glyphs;
use super::heat::{HeatPainter, ValueScale};
use super::numfmt::fit_number;
use super::text;

/// Narrowest cell that still holds a number (one gap column and three characters).
const MIN_NUMBER_CELL: u16 = 4;
/// Cell width used when not every column fits and the view scrolls instead.
const SCROLL_CELL: u16 = 6;

/// Where the rows, columns and cells of a heatmap fall inside an area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeatmapGeometry {
    pub area: Rect,
    pub n_rows: usize,
    pub n_cols: usize,
    /// Columns of the row-label gutter.
    pub label_w: u16,
    /// Width of one cell, including its leading gap column when `gap` is 1.
    pub cell_w: u16,
    pub gap: u16,
    /// True if numbers are written in the cells.
    pub numbers: bool,
    /// First visible row and column (the view scrolls to keep the cursor visible).
    pub row0: usize,
    pub col0: usize,
    pub vis_rows: usize,
    pub vis_cols: usize,
}

impl HeatmapGeometry {
    /// Lay out `n_rows` x `n_cols` cells in `area`; `label_width` is the widest row
    /// label in columns, `max_cell` the widest cell wanted, `cursor` the cell to keep
    /// in view.
    pub fn new(
        area: Rect,
        n_rows: usize,
        n_cols: usize,
        label_width: usize,
        max_cell: u16,
        cursor: Option<(usize, usize)>,
    ) -> HeatmapGeometry {
        let label_cap = (area.width / 5).max(4) as usize;
        let label_w = label_width.min(label_cap) as u16;
        let avail = area.width.saturating_sub(label_w + 1) as usize;
        let max_cell = max_cell.max(MIN_NUMBER_CELL);
        let (cell_w, gap) = if n_cols == 0 {
            (max_cell, 1)
        } else if n_cols * MIN_NUMBER_CELL as usize <= avail {
            ((avail / n_cols).min(max_cell as usize) as u16, 1)
        } else if n_cols <= avail {
            // Colour (or glyph) only, every column visible.
            ((avail / n_cols).clamp(1, 3) as u16, 0)
        } else {
            (SCROLL_CELL.min(max_cell), 1)
        };
        let vis_cols = (avail / cell_w as usize).min(n_cols);
        let vis_rows = (area.height.saturating_sub(1) as usize).min(n_rows);
        let (cr, cc) = cursor.unwrap_or((0, 0));
        let scroll = |c: usize, vis: usize, n: usize| {
            if vis == 0 || n <= vis {
                0
            } else {
                c.saturating_sub(vis - 1).min(n - vis)
            }
        };
        HeatmapGeometry {
            area,
            n_rows,
            n_cols,
            label_w,
            cell_w,
            gap,
            numbers: cell_w >= MIN_NUMBER_CELL && gap == 1,
            row0: scroll(cr, vis_rows, n_rows),
            col0: scroll(cc, vis_cols, n_cols),
            vis_rows,
            vis_cols,
        }
    }

    fn grid_x(&self) -> u16 {
        // One blank column between the labels and the cells (the gap column of the first
        // cell may carry a glyph).
        self.area.x + self.label_w + 1
    }

    /// The screen rectangle of cell (r, c) if it is visible.
    pub fn cell_rect(&self, r: usize, c: usize) -> Option<Rect> {
        if r < self.row0 || r >= self.row0 + self.vis_rows {
            return None;
        }
        if c < self.col0 || c >= self.col0 + self.vis_cols {
            return None;
        }
        let x = self.grid_x() + (c - self.col0) as u16 * self.cell_w;
        let y = self.area.y + 1 + (r - self.row0) as u16;
        Some(Rect::new(x, y, self.cell_w, 1))
    }

    /// The cell under screen position (x, y), if any.
    pub fn cell_at(&self, x: u16, y: u16) -> Option<(usize, usize)> {
        let gx = self.grid_x();
        if x < gx || y <= self.area.y {
            return None;
        }
        let c = ((x - gx) / self.cell_w) as usize;
        let r = (y - self.area.y - 1) as usize;
        (r < self.vis_rows && c < self.vis_cols).then_some((self.row0 + r, self.col0 + c))
    }

    /// True if some rows or columns are scrolled out of view.
    pub fn is_clipped(&self) -> bool {
        self.vis_rows < self.n_rows || self.vis_cols < self.n_cols
    }
}

/// The styles a heatmap draws with (cells themselves come from the [`HeatPainter`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatmapStyle {
    pub label: Style,
    pub label_active: Style,
    pub masked: Style,
    /// Added to the cursor cell.
    pub cursor: Modifier,
    /// Added to highlighted cells.
    pub highlight: Modifier,
}

/// A predicate telling which cells are masked.
pub type MaskFn<'a> = &'a dyn Fn(usize, usize) -> bool;

pub struct Heatmap<'a> {
    pub data: ArrayView2<'a, f64>,
    pub row_labels: &'a [String],
    pub col_labels: &'a [String],
    pub scale: ValueScale,
    pub painter: &'a HeatPainter,
    pub glyphs: &'a Glyphs,
    pub style: HeatmapStyle,
    pub cursor: Option<(usize, usize)>,
    pub highlight: &'a [(usize, usize)],
    pub masked: Option<MaskFn<'a>>,
    pub max_cell: u16,
}

impl<'a> Heatmap<'a> {
    pub fn geometry(&self, area: Rect) -> HeatmapGeometry {
        let label_width = self
            .row_labels
            .iter()
            .map(|l| text::width(l))
            .max()
            .unwrap_or(0);
        let (r, c) = self.data.dim();
        HeatmapGeometry::new(area, r, c, label_width, self.max_cell, self.cursor)
    }

    fn is_masked(&self, r: usize, c: usize) -> bool {
        self.masked.is_some_and(|m| m(r, c))
    }

    fn render_labels(&self, g: &HeatmapGeometry, buf: &mut Buffer) {
        let ell = self.glyphs.ellipsis;
        let (cr, cc) = self.cursor.map_or((usize::MAX, usize::MAX), |c| c);
        for vr in 0..g.vis_rows {
            let r = g.row0 + vr;
            let label = self.row_labels.get(r).map_or("", String::as_str);
            let style = if r == cr {
                self.style.label_active
            } else {
                self.style.label
            };
            let s = text::right(label, g.label_w as usize, ell);
            buf.set_stringn(
                g.area.x,
                g.area.y + 1 + vr as u16,
                s,
                g.label_w as usize,
                style,
            );
        }
        // Column labels: over every cell if they fit, else every k-th column.
        let content_w = (g.cell_w - g.gap) as usize;
        let widest = self
            .col_labels
            .iter()
            .map(|l| text::width(l))
            .max()
            .unwrap_or(1);
        let every = if widest <= content_w && (g.gap == 1 || widest < content_w) {
            1
        } else {
            (widest + 1).div_ceil(g.cell_w as usize).max(1)
        };
        for vc in (0..g.vis_cols).step_by(every) {
            let c = g.col0 + vc;
            let Some(rect) = g.cell_rect(g.row0, c) else {
                continue;
            };
            let label = self.col_labels.get(c).map_or("", String::as_str);
            let style = if c == cc {
                self.style.label_active
            } else {
                self.style.label
            };
            let (x, w) = if every == 1 {
                (rect.x + g.gap, content_w)
            } else {
                let w = (every * g.cell_w as usize).min((g.area.right() - rect.x) as usize);
                (rect.x, w)
            };
            let s = if every == 1 {
                text::center(label, w, ell)
            } else {
                text::left(label, w.saturating_sub(1), ell)
            };
            buf.set_stringn(x, g.area.y, s, w, style);
        }
    }

    fn render_cell(&self, g: &HeatmapGeometry, r: usize, c: usize, buf: &mut Buffer) {
        let Some(rect) = g.cell_rect(r, c) else {
            return;
        };
        let v = self.data[[r, c]];
        let content_w = (g.cell_w - g.gap) as usize;
        let mono = self.painter.is_mono();
        let (mut style, body, gap_glyph) = if self.is_masked(r, c) {
            let body = text::center(self.glyphs.masked, content_w, "");
            (self.style.masked, body, " ")
        } else {
            let t = self.scale.norm(v);
            let style = self.painter.cell_style(t, self.scale.is_diverging());
            let glyph = self.glyphs.ramp_glyph(t.abs());
            let body = if g.numbers {
                text::right(&fit_number(v, content_w, !self.glyphs.ascii), content_w, "")
            } else if mono {
                glyph.repeat(content_w)
            } else {
                " ".repeat(content_w)
            };
            // Without colour the gap column carries the intensity glyph.
            (style, body, if mono { glyph } else { " " })
        };
        let mut gap_style = if mono { style } else { Style::default() };
        if Some((r, c)) == self.cursor {
            style = style.add_modifier(self.style.cursor);
            gap_style = gap_style.add_modifier(self.style.cursor);
        } else if self.highlight.contains(&(r, c)) {
            style = style.add_modifier(self.style.highlight);
        }
        if g.gap == 1 {
            buf.set_stringn(rect.x, rect.y, gap_glyph, 1, gap_style);
        }
        buf.set_stringn(rect.x + g.gap, rect.y, body, content_w, style);
    }
}

impl Widget for &Heatmap<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        let g = self.geometry(area);
        self.render_labels(&g, buf);
        for r in g.row0..g.row0 + g.vis_rows {
            for c in g.col0..g.col0 + g.vis_cols {
                self.render_cell(&g, r, c, buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widgets::heat::ColorDepth;
    use ndarray::array;

    fn geometry(w: u16, cols: usize) -> HeatmapGeometry {
        HeatmapGeometry::new(Rect::new(0, 0, w, 10), 8, cols, 5, 7, Some((0, 0)))
    }

    #[test]
    fn numbers_when_they_fit_colour_only_when_not_scroll_last() {
        let g = geometry(60, 8);
        assert!(g.numbers && g.vis_cols == 8 && g.cell_w == 6);
        let g = geometry(60, 32);
        assert!(!g.numbers && g.vis_cols == 32 && g.gap == 0);
        let g = geometry(60, 200);
        assert!(g.numbers && g.vis_cols < 200 && g.is_clipped());
    }

    #[test]
    fn cursor_stays_visible_and_clicks_map_back() {
        let g = HeatmapGeometry::new(Rect::new(2, 3, 40, 6), 20, 100, 4, 7, Some((15, 90)));
        let rect = g.cell_rect(15, 90).expect("cursor cell visible");
        assert_eq!(g.cell_at(rect.x + 1, rect.y), Some((15, 90)));
        assert_eq!(g.cell_at(0, 0), None);
    }

    #[test]
    fn mono_cells_carry_glyphs_and_masked_cells_a_mark() {
        let data = array![[0.0, 1.0], [0.5, 0.25]];
        let labels = vec!["a".to_string(), "b".to_string()];
        let painter = HeatPainter {
            depth: ColorDepth::Mono,
            sequential: &[(0, 0, 0), (255, 255, 255)],
            diverging: &[(0, 0, 255), (0, 0, 0), (255, 0, 0)],
        };
        let masked = |r: usize, c: usize| r == 0 && c == 1;
        let h = Heatmap {
            data: data.view(),
            row_labels: &labels,
            col_labels: &labels,
            scale: ValueScale::fit(data.iter().copied()),
            painter: &painter,
            glyphs: &Glyphs::UNICODE,
            style: HeatmapStyle {
                label: Style::default(),
                label_active: Style::default(),
                masked: Style::default(),
                cursor: Modifier::REVERSED,
                highlight: Modifier::UNDERLINED,
            },
            cursor: None,
            highlight: &[],
            masked: Some(&masked),
            max_cell: 6,
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, 14, 3));
        (&h).render(buf.area, &mut buf);
        let line = |y: u16| {
            (0..14)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        };
        assert_eq!(line(0), "     a     b  ");
        assert_eq!(line(1), "a  0.000   ×  ");
        assert_eq!(line(2), "b ▒0.500░0.250");
    }
}
