//! A titled heatmap of one engine matrix with its legend: the building block of the
//! pipeline and heads views. Layout and drawing share [`MatrixPanel::heatmap`], so a
//! click maps back to the cell that was drawn.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use std::sync::Arc;

use ndarray::Array2;

use crate::engine::pipeline::Matrix;
use crate::tui::context::{Context, Zoom};
use crate::widgets::heatmap::MaskFn;
use crate::widgets::pooled::{Pool, Viewport, pool};
use crate::widgets::{Heatmap, HeatmapGeometry, Legend, ValueScale, text};

/// Widest cell wanted: a number of 6 characters and its gap.
pub const MAX_CELL: u16 = 7;

pub struct MatrixPanel<'a> {
    pub matrix: &'a Matrix,
    pub title: String,
    pub title_style: Style,
    pub cursor: Option<(usize, usize)>,
    pub highlight: &'a [(usize, usize)],
    pub masked: Option<MaskFn<'a>>,
    pub scale: ValueScale,
    pub legend: bool,
    pub max_cell: u16,
}

/// The title line, the grid (no taller than the matrix needs) and the legend line
/// right under it.
pub fn split(area: Rect, legend: bool, rows: usize) -> [Rect; 3] {
    let grid_h = (rows as u16 + 1).min(area.height.saturating_sub(1 + u16::from(legend)));
    let [title, grid, legend, _] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(grid_h),
        Constraint::Length(u16::from(legend)),
        Constraint::Fill(1),
    ])
    .areas(area);
    [title, grid, legend]
}

impl<'a> MatrixPanel<'a> {
    pub fn heatmap(&'a self, state: &'a Context) -> Heatmap<'a> {
        Heatmap {
            data: self.matrix.data.view(),
            row_labels: &self.matrix.row_labels,
            col_labels: &self.matrix.col_labels,
            scale: self.scale,
            painter: &state.theme.heat,
            glyphs: &state.glyphs,
            style: state.theme.heatmap_style(),
            cursor: self.cursor,
            highlight: self.highlight,
            masked: self.masked,
            max_cell: self.max_cell,
        }
    }

    pub fn geometry(&self, state: &Context, area: Rect) -> HeatmapGeometry {
        let [_, grid, _] = split(area, self.legend, self.matrix.data.nrows());
        self.heatmap(state).geometry(grid)
    }

    pub fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        let [title, grid, legend] = split(area, self.legend, self.matrix.data.nrows());
        let heatmap = self.heatmap(state);
        let g = heatmap.geometry(grid);
        let (r, c) = self.matrix.data.dim();
        let mut spans = vec![
            Span::styled(
                state.glyphs.text(&self.title).into_owned(),
                self.title_style,
            ),
            Span::styled(format!("  [{r} x {c}]"), state.theme.dim),
        ];
        if g.is_clipped() {
            spans.push(Span::styled(
                format!(
                    "  rows {}-{} cols {}-{}",
                    g.row0,
                    g.row0 + g.vis_rows.saturating_sub(1),
                    g.col0,
                    g.col0 + g.vis_cols.saturating_sub(1)
                ),
                state.theme.warn,
            ));
        }
        Line::from(spans).render(title, buf);
        (&heatmap).render(grid, buf);
        if self.legend {
            (&Legend {
                scale: self.scale,
                painter: &state.theme.heat,
                glyphs: &state.glyphs,
                label: state.theme.dim,
                masked_style: state.theme.masked,
                masked: self.masked.is_some().then_some("masked"),
            })
                .render(legend, buf);
        }
    }
}

/// The widest row label of a matrix, in columns.
pub fn label_width(m: &Matrix) -> usize {
    m.row_labels
        .iter()
        .map(|l| text::width(l))
        .max()
        .unwrap_or(0)
}

/// A token x token matrix (n_q x n_k) at the app's zoom: itself at full detail, or each
/// block of `per_cell` x `per_cell` entries summarised by its mean or maximum, with
/// labels naming the positions a block covers and a name that says how. Other matrices
/// (n x d) are never pooled.
pub fn at_zoom<'m>(state: &Context, m: &'m Matrix) -> Shown<'m> {
    let Zoom {
        per_cell: p,
        pool: how,
    } = state.zoom;
    if !is_zoomed(state, m) {
        return Shown::Full(m);
    }
    Shown::Pooled(state.cache.matrix(m, p, how, || pooled(m, p, how)))
}

/// A matrix as a panel draws it: itself, or its pooled form.
pub enum Shown<'m> {
    Full(&'m Matrix),
    Pooled(Arc<Matrix>),
}

impl std::ops::Deref for Shown<'_> {
    type Target = Matrix;
    fn deref(&self) -> &Matrix {
        match self {
            Shown::Full(m) => m,
            Shown::Pooled(m) => m,
        }
    }
}

fn pooled(m: &Matrix, p: usize, how: Pool) -> Matrix {
    let (r, c) = m.data.dim();
    let (pr, pc) = (r.div_ceil(p), c.div_ceil(p));
    let data = m.data.as_standard_layout();
    let vp = Viewport {
        row0: 0,
        col0: 0,
        per_cell: p,
    };
    let values = match data.as_slice() {
        Some(d) => pool(d, r, c, &vp, pr, pc, how),
        None => vec![None; pr * pc],
    };
    let values: Vec<f64> = values
        .into_iter()
        .map(|v| v.unwrap_or(f64::NEG_INFINITY))
        .collect();
    let data = Array2::from_shape_vec((pr, pc), values)
        .unwrap_or_else(|_| Array2::from_elem((pr, pc), f64::NEG_INFINITY));
    let ranges = |n: usize, k: usize| -> Vec<String> {
        (0..k)
            .map(|b| {
                let (lo, hi) = (b * p, ((b + 1) * p).min(n) - 1);
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })
            .collect()
    };
    Matrix::new(
        format!("{} · {} of {p}x{p}", m.name, how.name()),
        data,
        ranges(r, pr),
        ranges(c, pc),
    )
}

/// Is this matrix drawn pooled at the app's zoom (a token x token matrix, zoomed out)?
/// The cursor and clicks then go through [`zoomed_cell`] and [`full_cell`].
pub fn is_zoomed(state: &Context, m: &Matrix) -> bool {
    let (r, c) = m.data.dim();
    let tokens = (state.pipeline.shape.n_q, state.pipeline.shape.n_k);
    state.zoom.per_cell > 1 && (r, c) == tokens && r.max(c) >= 2
}

/// The screen cell of entry (row, col) when zoomed.
pub fn zoomed_cell(state: &Context, (r, c): (usize, usize)) -> (usize, usize) {
    let p = state.zoom.per_cell.max(1);
    (r / p, c / p)
}

/// The first entry of the block under screen cell (row, col) when zoomed.
pub fn full_cell(state: &Context, (r, c): (usize, usize)) -> (usize, usize) {
    let p = state.zoom.per_cell.max(1);
    (r * p, c * p)
}
