//! The parts both passes of the flash view draw with: the tile grid, the SRAM panel's
//! blocks (placed in bands, cells narrowed before blocks are dropped) and right-aligned
//! tables.

use ndarray::ArrayView2;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Widget;

use super::controls::current_tile;
use super::lab::FlashLab;
use crate::engine::mask::TileClass;
use crate::tui::context::Context;
use crate::widgets::heatmap::MaskFn;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::{fit_number, significant};
use crate::widgets::{Heatmap, TileGlyphs, TileGrid, TileGridStyle, TileMark, ValueScale, text};

/// Columns between panels.
pub(super) const GAP: u16 = 2;

pub(super) fn tile_labels(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

pub(super) fn marks(lab: &FlashLab, k: usize) -> Vec<TileMark> {
    let mut out = Vec::with_capacity(lab.tr() * lab.tc());
    for i in 0..lab.tr() {
        for j in 0..lab.tc() {
            let at = lab.index_of((i, j));
            out.push(match (lab.class(i, j), at <= k) {
                (TileClass::Empty, reached) => TileMark::Skipped { reached },
                (TileClass::Partial, true) => TileMark::DonePartial,
                (TileClass::Partial, false) => TileMark::TodoPartial,
                (TileClass::Full, true) => TileMark::Done,
                (TileClass::Full, false) => TileMark::Todo,
            });
        }
    }
    out
}

pub(super) fn grid_widget<'a>(
    state: &'a Context,
    marks: &'a [TileMark],
    rows: &'a [String],
    cols: &'a [String],
    lab: &FlashLab,
) -> TileGrid<'a> {
    let t = &state.theme;
    TileGrid {
        marks,
        rows: lab.tr(),
        cols: lab.tc(),
        row_labels: rows,
        col_labels: cols,
        current: Some(current_tile(state, lab)),
        highlight: &state.tiles,
        glyphs: TileGlyphs::new(state.glyphs.ascii),
        style: TileGridStyle {
            label: t.label,
            label_active: t.label_active,
            todo: t.dim,
            done: t.good,
            skipped: t.masked,
            current: t.cursor,
            highlight: t.highlight,
        },
        ellipsis: state.glyphs.ellipsis,
    }
}

/// A small number: "0", 3 decimals, or scientific when tiny.
pub(super) fn small(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() < 1e-3 {
        format!("{x:.1e}")
    } else {
        significant(x, 3)
    }
}

/// One matrix of the SRAM panel.
pub(super) struct Block<'a> {
    pub title: String,
    pub data: ArrayView2<'a, f64>,
    pub rows: &'a [String],
    pub cols: &'a [String],
    pub masked: bool,
}

/// Widest row label of a block (longer tokens are cut).
pub(super) const BLOCK_LABEL_W: usize = 8;

/// The width that gives every column `cell` columns, with the label gutter the heatmap
/// will choose for that width (the widest label, at most a fifth of the width).
pub(super) fn block_width(
    title_w: usize,
    label_w: usize,
    ncols: usize,
    cell: u16,
    max: u16,
) -> u16 {
    let cells = ncols as u16 * cell;
    let guess = label_w.min(BLOCK_LABEL_W) as u16 + 1 + cells;
    let gutter = label_w.min((guess as usize / 5).max(4).max(label_w.min(BLOCK_LABEL_W))) as u16;
    (gutter + 1 + cells).max(title_w as u16).min(max)
}

impl Block<'_> {
    fn width(&self, cell: u16, max: u16) -> u16 {
        let lw = self.rows.iter().map(|l| text::width(l)).max().unwrap_or(1);
        block_width(text::width(&self.title), lw, self.data.ncols(), cell, max)
    }

    fn height(&self) -> u16 {
        self.data.nrows() as u16 + 2
    }
}

/// Narrowest block cell: a gap and a 4-character number.
pub(super) const MIN_CELL: u16 = 5;

pub(super) fn cell_width(area_w: u16) -> u16 {
    if area_w >= 100 { 7 } else { 6 }
}

/// Lines a block needs at least: its title, column labels and one row.
pub(super) const BLOCK_MIN_H: u16 = 3;

/// Place blocks of (width, height) left to right in bands, cutting the rows of blocks
/// in a band that reaches the bottom; None if some block gets fewer than
/// [`BLOCK_MIN_H`] lines.
pub(super) fn pack(sizes: &[(u16, u16)], area: Rect) -> Option<Vec<Rect>> {
    let (mut x, mut y, mut band_h) = (area.x, area.y, 0);
    let mut out = Vec::with_capacity(sizes.len());
    for &(w, h) in sizes {
        if x > area.x && x + w > area.right() {
            y += band_h + 1;
            band_h = 0;
            x = area.x;
        }
        let h = h.min(area.bottom().saturating_sub(y));
        if h < BLOCK_MIN_H {
            return None;
        }
        out.push(Rect::new(x, y, w, h));
        band_h = band_h.max(h);
        x += w + GAP;
    }
    Some(out)
}

pub(super) fn render_block(state: &Context, b: &Block, area: Rect, cell: u16, buf: &mut Buffer) {
    let t = &state.theme;
    let g = &state.glyphs;
    buf.set_stringn(
        area.x,
        area.y,
        text::fit(&g.text(&b.title), area.width as usize, g.ellipsis),
        area.width as usize,
        t.label_active,
    );
    let data = b.data;
    let is_masked = |r: usize, c: usize| data[[r, c]] == f64::NEG_INFINITY;
    let masked: Option<MaskFn> = if b.masked { Some(&is_masked) } else { None };
    let heat = Heatmap {
        data: b.data,
        row_labels: b.rows,
        col_labels: b.cols,
        scale: ValueScale::fit(b.data.iter().copied()),
        painter: &t.heat,
        glyphs: g,
        style: t.heatmap_style(),
        cursor: None,
        highlight: &[],
        masked,
        max_cell: cell,
    };
    let grid = Rect::new(area.x, area.y + 1, area.width, area.height - 1);
    (&heat).render(grid, buf);
}

/// A table column: header and one cell per row, right-aligned.
pub(super) struct Col {
    pub head: String,
    pub cells: Vec<String>,
    pub style: Style,
}

pub(super) fn draw_table(cols: &[Col], head_style: Style, w: &mut LineWriter) {
    let widths: Vec<usize> = cols
        .iter()
        .map(|c| {
            c.cells
                .iter()
                .map(|s| text::width(s))
                .chain([text::width(&c.head)])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<(String, Style)>| -> Vec<Span<'static>> {
        cells
            .into_iter()
            .zip(&widths)
            .flat_map(|((s, st), &cw)| {
                [Span::styled(text::right(&s, cw, "~"), st), Span::raw("  ")]
            })
            .collect()
    };
    w.line(line(
        cols.iter().map(|c| (c.head.clone(), head_style)).collect(),
    ));
    let n = cols.first().map_or(0, |c| c.cells.len());
    for r in 0..n {
        w.line(line(
            cols.iter()
                .map(|c| (c.cells.get(r).cloned().unwrap_or_default(), c.style))
                .collect(),
        ));
    }
}

pub(super) fn vector(values: &[f64], width: usize, unicode: bool) -> String {
    values
        .iter()
        .map(|v| text::right(&fit_number(*v, width, unicode), width, ""))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Place `blocks` under the title line of `area`: the widest cells that fit, dropping
/// blocks from the front only when even [`MIN_CELL`]-column cells do not. Returns the
/// first block drawn, the cell width and the blocks' rectangles.
pub(super) fn place(blocks: &[Block<'_>], area: Rect) -> (usize, u16, Vec<Rect>) {
    let widest = cell_width(area.width);
    let body = Rect::new(
        area.x,
        area.y + 1,
        area.width,
        area.height.saturating_sub(1),
    );
    for drop in 0..blocks.len() {
        for c in (MIN_CELL..=widest).rev() {
            let sizes: Vec<(u16, u16)> = blocks[drop..]
                .iter()
                .map(|b| (b.width(c, area.width), b.height()))
                .collect();
            if let Some(r) = pack(&sizes, body) {
                return (drop, c, r);
            }
        }
    }
    (blocks.len(), widest, Vec::new())
}
