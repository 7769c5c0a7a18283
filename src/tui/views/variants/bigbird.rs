//! BigBird: local, global and random blocks cell by cell, and the tiles a tiled kernel
//! skips.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;

use super::grid::{CellGrid, cell_glyph, kind_name, split, tiles_line, token};
use super::lab::VariantsLab;
use crate::engine::variants::CellKind;
use crate::tui::context::Context;
use crate::widgets::lines::LineWriter;

pub(super) fn render_bigbird(state: &Context, lab: &VariantsLab, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let bb = match &lab.bigbird {
        Ok(b) => b,
        Err(e) => return LineWriter::new(area, buf).text(e, th.error),
    };
    let n = bb.n;
    let (ci, cj) = (
        state.cursor.0.min(n.saturating_sub(1)),
        state.cursor.1.min(n.saturating_sub(1)),
    );
    let labels: Vec<String> = (0..n).map(|k| token(lab, k)).collect();
    let [left, right] = split(area, CellGrid::width(&labels, n).max(34));
    let cell = |r: usize, c: usize| -> (String, Style) {
        let (g, style) = cell_glyph(state, bb.cells[[r, c]]);
        (g.to_string(), style)
    };
    let legend: Vec<Span> = [
        CellKind::Global,
        CellKind::Local,
        CellKind::Random,
        CellKind::Masked,
    ]
    .into_iter()
    .flat_map(|k| {
        let (g, style) = cell_glyph(state, k);
        [
            Span::styled(g, style),
            Span::styled(format!(" {} ", kind_name(k)), th.label),
        ]
    })
    .collect();
    CellGrid {
        title: "BigBird pattern [query x key]".into(),
        labels: &labels,
        n_rows: n,
        n_cols: n,
        cell: &cell,
        cursor: (ci, cj),
        legend,
    }
    .render(state, left, buf);

    let c = bb.config;
    let mut w = LineWriter::new(right, buf);
    w.line(vec![Span::styled(
        format!(
            "bigbird:{},{},{},{}: blocks of {} token(s)",
            c.window, c.globals, c.random, c.block, c.block
        ),
        th.panel_title,
    )]);
    w.text(
        &format!(
            "local: {} block(s) each side of the diagonal; global: the first {} block(s) see and are seen by all; random: {} seeded block(s) per block row",
            c.window, c.globals, c.random
        ),
        th.base,
    );
    let total = n * n;
    let pct = |x: usize| 100.0 * x as f64 / total.max(1) as f64;
    for (k, count) in [
        (CellKind::Global, bb.global),
        (CellKind::Local, bb.local),
        (CellKind::Random, bb.random),
        (CellKind::Masked, bb.masked),
    ] {
        let (g, style) = cell_glyph(state, k);
        w.line(vec![
            Span::styled(g, style),
            Span::styled(
                format!(
                    " {:<7} {:>6} cells {:>5.1}%",
                    kind_name(k),
                    count,
                    pct(count)
                ),
                th.base,
            ),
        ]);
    }
    w.text(
        &format!(
            "scored {} of {} pairs: density {:.1}%",
            total - bb.masked,
            total,
            bb.density * 100.0
        ),
        th.field_value,
    );
    w.text(&tiles_line(&bb.tiles), th.field_value);
    w.text(
        &format!(
            "a tiled kernel skips the {} all-masked tiles; with n growing the pattern stays O(n) per row block while full attention is O(n^2)",
            bb.tiles.skipped
        ),
        th.dim,
    );
    let kind = bb.cells[[ci, cj]];
    let why = match kind {
        CellKind::Global => "a global block: it attends everywhere and everything attends to it",
        CellKind::Local => "within the local window of the diagonal",
        CellKind::Random => "one of the random blocks",
        CellKind::Masked => "masked: neither local, global nor random",
    };
    w.text(
        &format!("'{}' -> '{}': {why}", token(lab, ci), token(lab, cj)),
        th.dim,
    );
}
