//! A grid of tiles (rows x columns of blocks), each drawn with a glyph for its state:
//! still to do, done, done with part of it masked, skipped, and the one being worked on
//! now. The glyphs alone tell the states apart, so the grid reads the same without
//! colour (NO_COLOR, `--theme mono`) and in ASCII (`--ascii`); styles add colour where
//! the terminal has it.
//!
//! [`TileGridGeometry`] is the layout alone, shared by drawing and mouse hit-testing.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use super::text;

/// What has happened to one tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileMark {
    /// Not reached yet; every element will be computed.
    Todo,
    /// Not reached yet; some elements are masked.
    TodoPartial,
    /// Computed.
    Done,
    /// Computed, some elements masked.
    DonePartial,
    /// Skipped because every element is masked; `reached` once the loop has passed it.
    Skipped { reached: bool },
}

/// The characters of each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileGlyphs {
    pub todo: &'static str,
    pub todo_partial: &'static str,
    pub done: &'static str,
    pub done_partial: &'static str,
    pub skipped: &'static str,
    /// The tile being worked on now.
    pub current: &'static str,
    /// Around a highlighted tile (when cells are three columns wide).
    pub open: &'static str,
    pub close: &'static str,
}

impl TileGlyphs {
    pub const UNICODE: TileGlyphs = TileGlyphs {
        todo: "·",
        todo_partial: "◦",
        done: "█",
        done_partial: "▞",
        skipped: "×",
        current: "◆",
        open: "[",
        close: "]",
    };

    pub const ASCII: TileGlyphs = TileGlyphs {
        todo: ".",
        todo_partial: ":",
        done: "#",
        done_partial: "%",
        skipped: "x",
        current: "@",
        open: "[",
        close: "]",
    };

    pub fn new(ascii: bool) -> TileGlyphs {
        if ascii {
            TileGlyphs::ASCII
        } else {
            TileGlyphs::UNICODE
        }
    }

    pub fn of(&self, mark: TileMark) -> &'static str {
        match mark {
            TileMark::Todo => self.todo,
            TileMark::TodoPartial => self.todo_partial,
            TileMark::Done => self.done,
            TileMark::DonePartial => self.done_partial,
            TileMark::Skipped { .. } => self.skipped,
        }
    }
}

/// Styles of the states (colour where there is colour; the glyphs carry the meaning).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TileGridStyle {
    pub label: Style,
    pub label_active: Style,
    pub todo: Style,
    pub done: Style,
    pub skipped: Style,
    /// Added to the current tile.
    pub current: Modifier,
    /// Added to highlighted tiles.
    pub highlight: Modifier,
}

/// Where the labels and tiles fall inside an area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileGridGeometry {
    pub area: Rect,
    pub rows: usize,
    pub cols: usize,
    /// Columns of the row-label gutter.
    pub label_w: u16,
    /// Columns per tile: 3 (glyph with room for brackets), 2 or 1.
    pub cell_w: u16,
    /// First visible row and column (scrolled to keep the current tile in view).
    pub row0: usize,
    pub col0: usize,
    pub vis_rows: usize,
    pub vis_cols: usize,
}

impl TileGridGeometry {
    /// `rows` x `cols` tiles with row labels `label_w` wide, the first line for column
    /// labels, `keep` the tile to keep in view.
    pub fn new(
        area: Rect,
        rows: usize,
        cols: usize,
        label_w: u16,
        keep: Option<(usize, usize)>,
    ) -> TileGridGeometry {
        let avail = area.width.saturating_sub(label_w) as usize;
        let cell_w = avail.checked_div(cols).map_or(3, |w| w.clamp(1, 3) as u16);
        let vis_cols = (avail / cell_w as usize).min(cols);
        let vis_rows = (area.height.saturating_sub(1) as usize).min(rows);
        let (kr, kc) = keep.unwrap_or((0, 0));
        let scroll = |k: usize, vis: usize, n: usize| {
            if vis == 0 || n <= vis {
                0
            } else {
                k.saturating_sub(vis / 2).min(n - vis)
            }
        };
        TileGridGeometry {
            area,
            rows,
            cols,
            label_w,
            cell_w,
            row0: scroll(kr, vis_rows, rows),
            col0: scroll(kc, vis_cols, cols),
            vis_rows,
            vis_cols,
        }
    }

    /// Screen rectangle of tile (r, c) if visible.
    pub fn cell_rect(&self, r: usize, c: usize) -> Option<Rect> {
        let visible = (self.row0..self.row0 + self.vis_rows).contains(&r)
            && (self.col0..self.col0 + self.vis_cols).contains(&c);
        visible.then(|| {
            Rect::new(
                self.area.x + self.label_w + (c - self.col0) as u16 * self.cell_w,
                self.area.y + 1 + (r - self.row0) as u16,
                self.cell_w,
                1,
            )
        })
    }

    /// The tile under screen position (x, y), if any.
    pub fn cell_at(&self, x: u16, y: u16) -> Option<(usize, usize)> {
        let gx = self.area.x + self.label_w;
        if x < gx || y <= self.area.y {
            return None;
        }
        let c = ((x - gx) / self.cell_w) as usize;
        let r = (y - self.area.y - 1) as usize;
        (r < self.vis_rows && c < self.vis_cols).then_some((self.row0 + r, self.col0 + c))
    }

    /// True if some tiles are scrolled out of view.
    pub fn is_clipped(&self) -> bool {
        self.vis_rows < self.rows || self.vis_cols < self.cols
    }
}

pub struct TileGrid<'a> {
    /// Row-major, `rows * cols` marks.
    pub marks: &'a [TileMark],
    pub rows: usize,
    pub cols: usize,
    /// Labels of the tile rows and columns, e.g. "Q0" and "K0".
    pub row_labels: &'a [String],
    pub col_labels: &'a [String],
    pub current: Option<(usize, usize)>,
    pub highlight: &'a [(usize, usize)],
    pub glyphs: TileGlyphs,
    pub style: TileGridStyle,
    pub ellipsis: &'a str,
}

impl TileGrid<'_> {
    pub fn geometry(&self, area: Rect) -> TileGridGeometry {
        let widest = self
            .row_labels
            .iter()
            .map(|l| text::width(l))
            .max()
            .unwrap_or(0);
        let label_w = (widest as u16 + 1).min(area.width / 3);
        TileGridGeometry::new(area, self.rows, self.cols, label_w, self.current)
    }

    fn mark(&self, r: usize, c: usize) -> TileMark {
        self.marks
            .get(r * self.cols + c)
            .copied()
            .unwrap_or(TileMark::Todo)
    }

    fn render_labels(&self, g: &TileGridGeometry, buf: &mut Buffer) {
        let (cr, cc) = self.current.unwrap_or((usize::MAX, usize::MAX));
        for vr in 0..g.vis_rows {
            let r = g.row0 + vr;
            let label = self.row_labels.get(r).map_or("", String::as_str);
            let style = if r == cr {
                self.style.label_active
            } else {
                self.style.label
            };
            let w = g.label_w.saturating_sub(1) as usize;
            let s = text::right(label, w, self.ellipsis);
            buf.set_stringn(g.area.x, g.area.y + 1 + vr as u16, s, w, style);
        }
        // Column labels over every tile if they fit with a space between, else over
        // every k-th tile.
        let widest = self
            .col_labels
            .iter()
            .map(|l| text::width(l))
            .max()
            .unwrap_or(1);
        let every = if widest < g.cell_w as usize {
            1
        } else {
            (widest + 1).div_ceil(g.cell_w as usize)
        };
        for vc in (0..g.vis_cols).step_by(every.max(1)) {
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
            let w = if every == 1 {
                g.cell_w as usize
            } else {
                (every * g.cell_w as usize - 1).min((g.area.right() - rect.x) as usize)
            };
            let s = if every == 1 {
                text::center(label, w, self.ellipsis)
            } else {
                text::left(label, w, self.ellipsis)
            };
            buf.set_stringn(rect.x, g.area.y, s, w, style);
        }
    }

    fn render_tile(&self, g: &TileGridGeometry, r: usize, c: usize, buf: &mut Buffer) {
        let Some(rect) = g.cell_rect(r, c) else {
            return;
        };
        let mark = self.mark(r, c);
        let now = self.current == Some((r, c));
        let lit = self.highlight.contains(&(r, c));
        let mut style = match mark {
            TileMark::Todo | TileMark::TodoPartial => self.style.todo,
            TileMark::Done | TileMark::DonePartial => self.style.done,
            TileMark::Skipped { .. } => self.style.skipped,
        };
        if now {
            style = style.add_modifier(self.style.current);
        } else if lit {
            style = style.add_modifier(self.style.highlight);
        }
        // The current tile keeps its own glyph when it was skipped, so "skipped" stays
        // readable where it is happening.
        let glyph = match mark {
            TileMark::Skipped { .. } => self.glyphs.skipped,
            _ if now => self.glyphs.current,
            _ => self.glyphs.of(mark),
        };
        let cell = match g.cell_w {
            3 if now => format!(">{glyph}<"),
            3 if lit => format!("{}{glyph}{}", self.glyphs.open, self.glyphs.close),
            3 => format!(" {glyph} "),
            2 => format!("{glyph} "),
            _ => glyph.to_string(),
        };
        buf.set_stringn(rect.x, rect.y, cell, g.cell_w as usize, style);
    }
}

impl Widget for &TileGrid<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        let g = self.geometry(area);
        self.render_labels(&g, buf);
        for r in g.row0..g.row0 + g.vis_rows {
            for c in g.col0..g.col0 + g.vis_cols {
                self.render_tile(&g, r, c, buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid<'a>(marks: &'a [TileMark], labels: &'a [String], glyphs: TileGlyphs) -> TileGrid<'a> {
        TileGrid {
            marks,
            rows: 2,
            cols: 2,
            row_labels: labels,
            col_labels: labels,
            current: Some((1, 0)),
            highlight: &[(1, 1)],
            glyphs,
            style: TileGridStyle {
                label: Style::default(),
                label_active: Style::default(),
                todo: Style::default(),
                done: Style::default(),
                skipped: Style::default(),
                current: Modifier::REVERSED,
                highlight: Modifier::UNDERLINED,
            },
            ellipsis: "~",
        }
    }

    fn lines(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_state_has_its_own_glyph_in_ascii_and_unicode() {
        for g in [TileGlyphs::UNICODE, TileGlyphs::ASCII] {
            let all = [
                g.todo,
                g.todo_partial,
                g.done,
                g.done_partial,
                g.skipped,
                g.current,
            ];
            for (i, a) in all.iter().enumerate() {
                assert!(all[i + 1..].iter().all(|b| b != a), "{a} repeats");
            }
        }
        assert!(TileGlyphs::ASCII.current.is_ascii() && TileGlyphs::ASCII.skipped.is_ascii());
    }

    #[test]
    fn current_skipped_and_highlighted_tiles_read_without_colour() {
        let marks = [
            TileMark::Done,
            TileMark::Skipped { reached: true },
            TileMark::DonePartial,
            TileMark::Todo,
        ];
        let labels = vec!["Q0".to_string(), "Q1".to_string()];
        let g = grid(&marks, &labels, TileGlyphs::ASCII);
        let mut buf = Buffer::empty(Rect::new(0, 0, 9, 3));
        (&g).render(buf.area, &mut buf);
        assert_eq!(lines(&buf), ["   Q0 Q1 ", "Q0  #  x ", "Q1 >@<[.]"]);
        let geo = g.geometry(buf.area);
        assert_eq!(geo.cell_at(7, 2), Some((1, 1)));
        assert_eq!(geo.cell_at(0, 0), None);
    }

    #[test]
    fn large_grids_shrink_then_scroll_to_the_current_tile() {
        let g = TileGridGeometry::new(Rect::new(0, 0, 20, 6), 40, 40, 4, Some((30, 35)));
        assert_eq!(g.cell_w, 1);
        assert!(g.is_clipped());
        assert!(g.cell_rect(30, 35).is_some());
        let g = TileGridGeometry::new(Rect::new(0, 0, 20, 6), 4, 8, 4, None);
        assert_eq!((g.cell_w, g.vis_cols, g.vis_rows), (2, 8, 4));
    }
}
