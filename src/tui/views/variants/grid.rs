//! What the variants view's panels share: token labels, the panel-and-text split, the
//! tile counts line, and [`CellGrid`], a matrix of one-letter cells.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;

use super::lab::VariantsLab;
use crate::engine::variants::{CellKind, TileCounts};
use crate::tui::context::Context;
use crate::widgets::lines::LineWriter;
use crate::widgets::text;

pub(super) fn token(lab: &VariantsLab, i: usize) -> String {
    lab.tokens
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("t{i}"))
}

/// Left: a panel as wide as its grid needs (`want` columns); right: the text.
pub(super) fn split(area: Rect, want: u16) -> [Rect; 2] {
    let want = want.clamp(24, area.width / 2);
    Layout::horizontal([
        Constraint::Length(want.min(area.width)),
        Constraint::Fill(1),
    ])
    .spacing(2)
    .areas(area)
}

pub(super) fn tiles_line(t: &TileCounts) -> String {
    format!(
        "{}x{} tiles: {} skipped, {} full, {} partial of {}",
        t.br, t.bc, t.skipped, t.full, t.partial, t.total
    )
}

/// A matrix of short symbols (a layer number, a pattern letter), two columns a cell:
/// narrower than a heatmap of numbers, and readable without colour.
pub(super) struct CellGrid<'a> {
    pub(super) title: String,
    pub(super) labels: &'a [String],
    pub(super) n_rows: usize,
    pub(super) n_cols: usize,
    pub(super) cell: &'a dyn Fn(usize, usize) -> (String, Style),
    pub(super) cursor: (usize, usize),
    pub(super) legend: Vec<Span<'a>>,
}

impl CellGrid<'_> {
    /// Columns the grid wants: labels, a gap and two per cell.
    pub(super) fn width(labels: &[String], n_cols: usize) -> u16 {
        let label_w = labels
            .iter()
            .map(|t| text::width(t))
            .max()
            .unwrap_or(1)
            .min(8);
        (label_w + 1 + 2 * n_cols) as u16
    }

    pub(super) fn render(self, state: &Context, area: Rect, buf: &mut Buffer) {
        let th = &state.theme;
        let g = &state.glyphs;
        let mut w = LineWriter::new(area, buf);
        w.line(vec![Span::styled(
            g.text(&self.title).into_owned(),
            th.panel_title,
        )]);
        let label_w = self
            .labels
            .iter()
            .map(|t| text::width(t))
            .max()
            .unwrap_or(1)
            .min(8);
        let cols = ((area.width as usize).saturating_sub(label_w + 1) / 2).min(self.n_cols);
        let col0 = self.cursor.1.saturating_sub(cols.saturating_sub(1));
        let rows = (w.rows_left() as usize).saturating_sub(2).min(self.n_rows);
        let row0 = self.cursor.0.saturating_sub(rows.saturating_sub(1));
        // Column numbers (the ones digit) to find a key by position.
        let mut head = vec![Span::raw(" ".repeat(label_w + 1))];
        for c in (col0..self.n_cols).take(cols) {
            let style = if c == self.cursor.1 {
                th.label_active
            } else {
                th.label
            };
            head.push(Span::styled(format!("{:<2}", c % 10), style));
        }
        w.line(head);
        for r in (row0..self.n_rows).take(rows) {
            let label = self.labels.get(r).map_or("", String::as_str);
            let mut spans = vec![Span::styled(
                format!("{} ", text::right(label, label_w, g.ellipsis)),
                if r == self.cursor.0 {
                    th.label_active
                } else {
                    th.label
                },
            )];
            for c in (col0..self.n_cols).take(cols) {
                let (sym, mut style) = (self.cell)(r, c);
                if (r, c) == self.cursor {
                    style = style.add_modifier(th.cursor);
                }
                spans.push(Span::styled(format!("{sym:<1}"), style));
                spans.push(Span::styled(" ", th.base));
            }
            w.line(spans);
        }
        w.line(self.legend);
    }
}

pub(super) fn cell_glyph(state: &Context, k: CellKind) -> (&'static str, Style) {
    let th = &state.theme;
    match k {
        CellKind::Global => ("G", th.group(0)),
        CellKind::Local => ("L", th.group(2)),
        CellKind::Random => ("R", th.group(1)),
        CellKind::Masked => (if state.glyphs.ascii { "." } else { "·" }, th.masked),
    }
}

pub(super) fn kind_name(k: CellKind) -> &'static str {
    match k {
        CellKind::Global => "global",
        CellKind::Local => "local",
        CellKind::Random => "random",
        CellKind::Masked => "masked",
    }
}
