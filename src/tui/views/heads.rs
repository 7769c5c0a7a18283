//! The heads view: every head's matrices of one per-head stage side by side (the
//! weights by default), on one shared colour scale, GQA groups marked by colour, and
//! the cursor cell's value in every head as bars.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::panel::{MAX_CELL, MatrixPanel, label_width};
use crate::engine::config::MaskKind;
use crate::engine::pipeline::{Matrix, Stage, StageId};
use crate::tui::component::Hit;
use crate::tui::component::View;
use crate::tui::context::Context;
use crate::tui::view_kind::ViewKind;
use crate::widgets::{HBars, Legend, ValueScale};

pub struct HeadsView;

/// Width of the side column (GQA groups and the per-head bars) when there is room.
const SIDE_W: u16 = 32;

fn head_matrices(state: &Context) -> Vec<&Matrix> {
    state
        .current_stage()
        .filter(|s| s.per_head)
        .map(|s| s.matrices.iter().collect())
        .unwrap_or_default()
}

/// Every head's matrix as drawn: pooled when the app is zoomed out.
fn drawn(state: &Context) -> Vec<super::panel::Shown<'_>> {
    head_matrices(state)
        .into_iter()
        .map(|m| super::panel::at_zoom(state, m))
        .collect()
}

fn zoomed(state: &Context) -> bool {
    head_matrices(state)
        .first()
        .is_some_and(|m| super::panel::is_zoomed(state, m))
}

struct Areas {
    heads: Vec<Rect>,
    legend: Rect,
    side: Option<Rect>,
}

/// Choose the arrangement (columns x rows of heads) that shows every row of each
/// matrix with the widest cells.
fn areas(state: &Context, area: Rect) -> Areas {
    let side_w = if area.width >= 100 { SIDE_W } else { 0 };
    let [main, side] = Layout::horizontal([Constraint::Fill(1), Constraint::Length(side_w)])
        .spacing(u16::from(side_w > 0))
        .areas(area);
    let [grid, legend] = Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(main);
    let mats = drawn(state);
    let n = mats.len().max(1);
    let (rows_needed, cols, lw) = mats.first().map_or((1, 1, 4), |m| {
        (m.data.nrows(), m.data.ncols(), label_width(m))
    });
    // Prefer showing every row, then wider cells, then more heads side by side.
    let best = (1..=n)
        .map(|across| {
            let down = n.div_ceil(across);
            let pw = (grid.width as usize / across).saturating_sub(1);
            let ph = grid.height as usize / down;
            let lw = lw.min((pw / 5).max(4));
            let cell = (pw.saturating_sub(lw + 1) / cols.max(1)).min(MAX_CELL as usize);
            (ph >= rows_needed + 2, cell, across)
        })
        .max()
        .unwrap_or((true, 1, 1));
    let across = best.2;
    let down = n.div_ceil(across);
    let row_rects = Layout::vertical(vec![Constraint::Ratio(1, down as u32); down]).split(grid);
    let mut heads = Vec::with_capacity(n);
    for r in row_rects.iter() {
        let cells = Layout::horizontal(vec![Constraint::Ratio(1, across as u32); across])
            .spacing(1)
            .split(*r);
        heads.extend(cells.iter().copied());
    }
    heads.truncate(mats.len());
    Areas {
        heads,
        legend,
        side: (side_w > 0).then_some(side),
    }
}

fn shared_scale(state: &Context, mats: &[&Matrix]) -> ValueScale {
    let fit = || ValueScale::fit(mats.iter().flat_map(|m| m.data.iter().copied()));
    match mats.first() {
        // Pooled matrices are made once per zoom and live in the cache: key by them.
        Some(first) => state.cache.scale(first, mats.len(), fit),
        None => fit(),
    }
}

fn title(state: &Context, h: usize) -> (String, Style) {
    let g = state.pipeline.kv_group_for(h);
    let grouped = state.pipeline.shape.kv_heads < state.heads();
    let mark = if h == state.head {
        state.glyphs.marker
    } else {
        " "
    };
    let text = if grouped {
        format!("{mark}head {} · kv {}", h + 1, g + 1)
    } else {
        format!("{mark}head {}", h + 1)
    };
    let mut style = state.theme.group(g);
    if h == state.head {
        style = style.add_modifier(state.theme.highlight);
    }
    (text, style)
}

fn panel<'a>(
    state: &'a Context,
    h: usize,
    m: &'a Matrix,
    scale: ValueScale,
    masked: &'a dyn Fn(usize, usize) -> bool,
) -> MatrixPanel<'a> {
    let (title, title_style) = title(state, h);
    let zoomed = zoomed(state);
    let shows_mask = !zoomed
        && matches!(state.stage, StageId::Mask | StageId::Softmax)
        && m.data.dim() == (state.pipeline.shape.n_q, state.pipeline.shape.n_k)
        && *state.pipeline.mask.kind() != MaskKind::None;
    let (title, cursor) = if zoomed {
        let z = state.zoom;
        (
            format!("{title} · {} {p}x{p}", z.pool.name(), p = z.per_cell),
            super::panel::zoomed_cell(state, state.cursor),
        )
    } else {
        (title, state.cursor)
    };
    MatrixPanel {
        matrix: m,
        title,
        title_style,
        cursor: Some(cursor),
        highlight: if zoomed { &[] } else { &state.highlight },
        masked: shows_mask.then_some(masked),
        scale,
        legend: false,
        max_cell: MAX_CELL,
    }
}

/// The cursor cell, its axes named by what they are: query and key for the scores and
/// weights, token and dimension for the vectors (q, k, v slices and outputs).
fn cell_axes(stage: StageId, c: usize, row: &str, col: &str) -> String {
    if stage.has_key_columns() {
        format!("query '{row}' -> key '{col}'")
    } else {
        format!("token '{row}', dim {c}")
    }
}

fn render_side(state: &Context, mats: &[&Matrix], area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let (r, c) = state.cursor;
    let mut y = area.y;
    let mut line = |spans: Vec<Span>, buf: &mut Buffer| {
        if y < area.bottom() {
            Line::from(spans).render(Rect::new(area.x, y, area.width, 1), buf);
            y += 1;
        }
    };
    let (h, g) = (state.heads(), state.pipeline.shape.kv_heads);
    let kind = if state.pipeline.source == crate::engine::pipeline::Source::Weights {
        format!("{h} heads, weights from a file")
    } else if g == h {
        "MHA: every head has its own K/V".to_string()
    } else if g == 1 {
        format!("MQA: {h} heads share one K/V")
    } else {
        format!("GQA: {h} heads in {g} K/V groups")
    };
    line(vec![Span::styled(kind, t.panel_title)], buf);
    if g < h {
        for group in 0..g {
            let members: Vec<String> = (0..h)
                .filter(|&q| state.pipeline.kv_group_for(q) == group)
                .map(|q| (q + 1).to_string())
                .collect();
            line(
                vec![Span::styled(
                    format!("kv {} <- heads {}", group + 1, members.join(" ")),
                    t.group(group),
                )],
                buf,
            );
        }
    }
    line(vec![], buf);
    let (q, k) = mats
        .first()
        .map(|m| {
            (
                m.row_labels.get(r).cloned().unwrap_or_default(),
                m.col_labels.get(c).cloned().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
    line(
        vec![Span::styled(format!("cell [{r},{c}]"), t.panel_title)],
        buf,
    );
    line(
        vec![Span::styled(
            cell_axes(state.stage, c, &q, &k),
            t.panel_title,
        )],
        buf,
    );
    let items: Vec<(String, f64, Style)> = mats
        .iter()
        .enumerate()
        .map(|(hh, m)| {
            let v = m.data.get((r, c)).copied().unwrap_or(0.0);
            (
                format!("h{}", hh + 1),
                v,
                t.group(state.pipeline.kv_group_for(hh)),
            )
        })
        .collect();
    let rest = Rect::new(area.x, y, area.width, area.bottom().saturating_sub(y));
    (&HBars {
        items: &items,
        max: None,
        glyphs: &state.glyphs,
        label: t.dim,
        value_w: 6,
    })
        .render(rest, buf);
}

impl View for HeadsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Heads
    }

    fn steps_stage(&self, stage: &Stage) -> bool {
        stage.per_head && stage.active && !stage.matrices.is_empty()
    }

    fn shows_stages(&self) -> bool {
        true
    }

    fn zooms(&self) -> bool {
        true
    }

    /// Opening the view on a stage without heads shows the weights.
    fn refresh(&self, state: &mut Context) {
        let ok = state
            .current_stage()
            .is_some_and(|s| s.per_head && !s.matrices.is_empty());
        if !ok {
            state.stage = StageId::Softmax;
            state.sub = 0;
        }
    }

    fn grid(&self, state: &Context) -> (usize, usize) {
        head_matrices(state)
            .first()
            .map_or((0, 0), |m| m.data.dim())
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        let mats = head_matrices(state);
        if mats.is_empty() {
            buf.set_stringn(
                area.x,
                area.y,
                "no per-head data at this stage",
                area.width as usize,
                state.theme.dim,
            );
            return;
        }
        let a = areas(state, area);
        let shown = drawn(state);
        let shown: Vec<&Matrix> = shown.iter().map(|m| &**m).collect();
        let scale = shared_scale(state, &shown);
        let mask = &state.pipeline.mask;
        for (h, rect) in a.heads.iter().enumerate() {
            let masked = move |i: usize, j: usize| mask.is_masked(0, h, i, j);
            panel(state, h, shown[h], scale, &masked).render(state, *rect, buf);
        }
        let has_mask = matches!(state.stage, StageId::Mask | StageId::Softmax)
            && *mask.kind() != MaskKind::None;
        (&Legend {
            scale,
            painter: &state.theme.heat,
            glyphs: &state.glyphs,
            label: state.theme.dim,
            masked_style: state.theme.masked,
            masked: has_mask.then_some("masked"),
        })
            .render(a.legend, buf);
        if let Some(side) = a.side {
            render_side(state, &mats, side, buf);
        }
    }

    fn hit_test(&self, state: &Context, area: Rect, x: u16, y: u16) -> Option<Hit> {
        let shown = drawn(state);
        let mats: Vec<&Matrix> = shown.iter().map(|m| &**m).collect();
        let a = areas(state, area);
        let scale = shared_scale(state, &mats);
        let mask = &state.pipeline.mask;
        let zoomed = zoomed(state);
        for (h, rect) in a.heads.iter().enumerate() {
            if !rect.contains(Position::new(x, y)) {
                continue;
            }
            let masked = move |i: usize, j: usize| mask.is_masked(0, h, i, j);
            let p = panel(state, h, mats[h], scale, &masked);
            return Some(match p.geometry(state, *rect).cell_at(x, y) {
                Some(cell) => {
                    let (row, col) = if zoomed {
                        super::panel::full_cell(state, cell)
                    } else {
                        cell
                    };
                    Hit::HeadCell { head: h, row, col }
                }
                None => Hit::Head(h),
            });
        }
        None
    }
}
