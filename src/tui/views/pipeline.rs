//! The pipeline view: one stage at a time, its matrices as heatmaps, and the inspector
//! with the arithmetic of the cell under the cursor.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::inspector;
use super::panel::{self, MAX_CELL, MatrixPanel};
use crate::engine::pipeline::{Matrix, Stage, StageId};
use crate::tui::component::Hit;
use crate::tui::component::View;
use crate::tui::context::Context;
use crate::tui::view_kind::ViewKind;
use crate::widgets::{ValueScale, text};

pub struct PipelineView;

/// Where the parts of the pipeline view go.
struct Areas {
    formula: Rect,
    /// The names of the stage's matrices, when it has several.
    tabs: Rect,
    /// Everything below the tabs.
    matrices: Rect,
    /// (pane index, area) of the matrices shown.
    panes: Vec<(usize, Rect)>,
    inspector: Rect,
}

fn areas(state: &Context, area: Rect) -> Areas {
    let insp_w = (area.width * 3 / 8).clamp(28, 48).min(area.width / 2);
    let [left, _, inspector] = Layout::horizontal([
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(insp_w),
    ])
    .areas(area);
    let [formula, tabs, matrices] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(left);
    Areas {
        formula,
        tabs,
        matrices,
        panes: pane_areas(state, matrices),
        inspector,
    }
}

/// Cells of at least this width carry numbers (see the heatmap widget).
const NUMBER_CELL: usize = 4;

/// Place the stage's matrices side by side, always including the one with the cursor.
/// If that one can show its numbers, add only neighbours that can too; otherwise show
/// as many as fit in colour alone. Each gets room in proportion to what it would like.
fn pane_areas(state: &Context, area: Rect) -> Vec<(usize, Rect)> {
    let panes = state.panes();
    if panes.is_empty() {
        return Vec::new();
    }
    let label_cap = (area.width / 5).max(4) as usize;
    let need = |i: usize, cell: usize| -> usize {
        let m = panel::at_zoom(state, panes[i]);
        panel::label_width(&m).min(label_cap) + 2 + m.data.ncols() * cell
    };
    let width = area.width as usize;
    let sub = state.sub.min(panes.len() - 1);
    let cell = if need(sub, NUMBER_CELL) <= width {
        NUMBER_CELL
    } else {
        1
    };
    let (mut lo, mut hi) = (sub, sub);
    let mut used = need(sub, cell);
    loop {
        if hi + 1 < panes.len() && used + need(hi + 1, cell) <= width {
            hi += 1;
            used += need(hi, cell);
        } else if lo > 0 && used + need(lo - 1, cell) <= width {
            lo -= 1;
            used += need(lo, cell);
        } else {
            break;
        }
    }
    // A pane is at least as wide as its title line ("weights (head 1)  [1 x 1]"), so a
    // narrow matrix (one token) does not cut its own title short.
    let title_w = |i: usize| {
        let (r, c) = panes[i].data.dim();
        text::width(&panes[i].name) + format!("  [{r} x {c}]").len() + 1
    };
    let wants: Vec<usize> = (lo..=hi)
        .map(|i| need(i, MAX_CELL as usize).max(title_w(i)))
        .collect();
    let total: usize = wants.iter().sum();
    let constraints: Vec<Constraint> = if total <= width {
        wants
            .iter()
            .map(|&w| Constraint::Length(w as u16))
            .collect()
    } else {
        wants.iter().map(|&w| Constraint::Fill(w as u16)).collect()
    };
    let rects = Layout::horizontal(constraints).split(area);
    (lo..=hi).zip(rects.iter().copied()).collect()
}

/// The names of the stage's matrices with their positions on the tab line.
fn pane_tabs(state: &Context, area: Rect) -> Vec<(Rect, usize, String)> {
    let panes = state.panes();
    if panes.len() < 2 {
        return Vec::new();
    }
    let mut x = area.x + "matrices:".len() as u16 + 1;
    let mut out = Vec::new();
    for (i, m) in panes.iter().enumerate() {
        let label = format!(" {} ", m.name);
        let w = text::width(&label) as u16;
        if x + w > area.right() {
            break;
        }
        out.push((Rect::new(x, area.y, w, 1), i, label));
        x += w + 1;
    }
    out
}

fn render_tabs(state: &Context, area: Rect, buf: &mut Buffer) {
    let tabs = pane_tabs(state, area);
    if tabs.is_empty() {
        return;
    }
    let t = &state.theme;
    buf.set_stringn(area.x, area.y, "matrices:", area.width as usize, t.dim);
    let mut end = area.x;
    for (rect, i, label) in &tabs {
        let style = if *i == state.sub { t.tab_active } else { t.tab };
        buf.set_stringn(rect.x, rect.y, label, rect.width as usize, style);
        end = rect.right();
    }
    let hint = "  (o, or walk past the edge)";
    if end + hint.len() as u16 <= area.right() {
        buf.set_stringn(end, area.y, hint, hint.len(), t.dim);
    }
}

/// The stage's matrix `i` as drawn: pooled when the app is zoomed out.
fn drawn<'a>(state: &'a Context, i: usize) -> Option<panel::Shown<'a>> {
    let m = *state.panes().get(i)?;
    Some(panel::at_zoom(state, m))
}

fn make_panel<'a>(
    state: &'a Context,
    i: usize,
    m: &'a Matrix,
    masked: &'a dyn Fn(usize, usize) -> bool,
) -> Option<MatrixPanel<'a>> {
    let panes = state.panes();
    let zoomed = panel::is_zoomed(state, panes.get(i)?);
    let focused = i == state.sub;
    let cursor = if zoomed {
        panel::zoomed_cell(state, state.cursor)
    } else {
        state.cursor
    };
    let shows_mask = !zoomed
        && matches!(state.stage, StageId::Mask | StageId::Softmax)
        && i == 0
        && m.data.dim() == (state.pipeline.shape.n_q, state.pipeline.shape.n_k)
        && *state.pipeline.mask.kind() != crate::engine::config::MaskKind::None;
    Some(MatrixPanel {
        matrix: m,
        title: m.name.clone(),
        title_style: if focused || panes.len() == 1 {
            state.theme.panel_title
        } else {
            state.theme.dim
        },
        cursor: focused.then_some(cursor),
        highlight: if focused && !zoomed {
            &state.highlight
        } else {
            &[]
        },
        masked: shows_mask.then_some(masked),
        scale: ValueScale::fit(m.data.iter().copied()),
        legend: true,
        max_cell: MAX_CELL,
    })
}

/// The tokens stage as a table: position, token, id and the columns it takes on screen.
fn render_tokens(state: &Context, stage: &Stage, area: Rect, buf: &mut Buffer) {
    let Some(ids) = stage.matrices.first() else {
        return;
    };
    let t = &state.theme;
    let tok_w = ids
        .row_labels
        .iter()
        .map(|l| text::width(l))
        .max()
        .unwrap_or(5)
        .clamp(5, 24);
    let header = format!(
        "{:>4}  {}  {:>6}  {}",
        "pos",
        text::left("token", tok_w, ""),
        "id",
        "width"
    );
    buf.set_stringn(area.x, area.y, header, area.width as usize, t.panel_title);
    let rows = area.height.saturating_sub(1) as usize;
    let first = state.cursor.0.saturating_sub(rows.saturating_sub(1));
    for (k, i) in (first..ids.row_labels.len()).take(rows).enumerate() {
        let label = &ids.row_labels[i];
        let line = format!(
            "{i:>4}  {}  {:>6}  {}",
            text::left(label, tok_w, state.glyphs.ellipsis),
            ids.data[[i, 0]],
            text::width(label)
        );
        let style = if i == state.cursor.0 {
            t.label_active.add_modifier(t.cursor)
        } else {
            t.base
        };
        buf.set_stringn(
            area.x,
            area.y + 1 + k as u16,
            line,
            area.width as usize,
            style,
        );
    }
}

impl View for PipelineView {
    fn kind(&self) -> ViewKind {
        ViewKind::Pipeline
    }

    fn steps_stage(&self, stage: &Stage) -> bool {
        stage.active && !stage.matrices.is_empty()
    }

    fn shows_stages(&self) -> bool {
        true
    }

    fn zooms(&self) -> bool {
        true
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        let a = areas(state, area);
        let t = &state.theme;
        let Some(stage) = state.current_stage() else {
            return;
        };
        let formula = state.glyphs.text(&stage.formula);
        let mut lines: Vec<Line> = text::wrap(&formula, a.formula.width as usize)
            .into_iter()
            .take(a.formula.height as usize)
            .map(|l| Line::from(Span::styled(l, t.formula)))
            .collect();
        let says_why =
            stage.formula.starts_with("inactive") || stage.formula.starts_with("not available");
        if !stage.active
            && !says_why
            && let Some(first) = lines.first_mut()
        {
            first.spans.insert(0, Span::styled("(inactive) ", t.warn));
        }
        for (i, line) in lines.into_iter().enumerate() {
            line.render(
                Rect::new(a.formula.x, a.formula.y + i as u16, a.formula.width, 1),
                buf,
            );
        }
        if stage.matrices.is_empty() {
            let msg = "no data at this stage (see the formula line); Shift+Left/Right steps to one with data";
            for (i, l) in text::wrap(msg, a.formula.width as usize).iter().enumerate() {
                buf.set_stringn(
                    a.formula.x,
                    a.formula.y + 3 + i as u16,
                    l,
                    a.formula.width as usize,
                    t.dim,
                );
            }
        } else if stage.id == StageId::Tokens {
            render_tokens(state, stage, a.matrices, buf);
        } else {
            render_tabs(state, a.tabs, buf);
            let head = state.head;
            let mask = &state.pipeline.mask;
            let masked = move |i: usize, j: usize| mask.is_masked(0, head, i, j);
            for &(i, rect) in &a.panes {
                let Some(m) = drawn(state, i) else {
                    continue;
                };
                if let Some(p) = make_panel(state, i, &m, &masked) {
                    p.render(state, rect, buf);
                }
            }
        }
        inspector::render(state, a.inspector, buf);
    }

    fn hit_test(&self, state: &Context, area: Rect, x: u16, y: u16) -> Option<Hit> {
        let a = areas(state, area);
        let pos = ratatui::layout::Position::new(x, y);
        if let Some((_, i, _)) = pane_tabs(state, a.tabs)
            .into_iter()
            .find(|(r, _, _)| r.contains(pos))
        {
            return Some(Hit::Cell {
                sub: i,
                row: state.cursor.0,
                col: 0,
            });
        }
        if state.stage == StageId::Tokens {
            let rect = a.matrices;
            if rect.contains(pos) && y > rect.y {
                let rows = rect.height.saturating_sub(1) as usize;
                let first = state.cursor.0.saturating_sub(rows.saturating_sub(1));
                let row = first + (y - rect.y - 1) as usize;
                return Some(Hit::Cell {
                    sub: 0,
                    row,
                    col: 0,
                });
            }
            return None;
        }
        let head = state.head;
        let mask = &state.pipeline.mask;
        let masked = move |i: usize, j: usize| mask.is_masked(0, head, i, j);
        for &(i, rect) in &a.panes {
            if !rect.contains(pos) {
                continue;
            }
            let m = drawn(state, i)?;
            let p = make_panel(state, i, &m, &masked)?;
            let g = p.geometry(state, rect);
            let zoomed = panel::is_zoomed(state, state.panes()[i]);
            return g.cell_at(x, y).map(|cell| {
                let (row, col) = if zoomed {
                    panel::full_cell(state, cell)
                } else {
                    cell
                };
                Hit::Cell { sub: i, row, col }
            });
        }
        None
    }
}
