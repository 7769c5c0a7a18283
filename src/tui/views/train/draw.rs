//! Drawing the train view: the progress line on top; the loss curve on the left; the
//! head-score grids and every head's map of the probe on the right. Everything comes
//! from the trainer's snapshot; nothing is computed here but layout and colour.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, LegendPosition, Widget};

use super::lab::TrainLab;
use crate::model::scores::HeadScores;
use crate::train::CIRCUIT_SCORE;
use crate::tui::context::Context;
use crate::widgets::minimap::MiniMap;
use crate::widgets::pooled::{Pool, Viewport, pool};
use crate::widgets::{ValueScale, text};

/// Columns of a layer label ("L1 ").
const LABEL_W: u16 = 3;
/// Columns of one score cell (" .42").
const SCORE_W: u16 = 4;

pub fn render(ctx: &Context, lab: &TrainLab, area: Rect, buf: &mut Buffer) {
    let [top, body] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
    render_progress(ctx, lab, top, buf);
    let [left, _, right] = Layout::horizontal([
        Constraint::Percentage(50),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(body);
    render_losses(ctx, lab, left, buf);
    let heads = lab.snapshot.scores.first().map_or(0, Vec::len) as u16;
    let layers = lab.snapshot.scores.len() as u16;
    let grid_w = LABEL_W + heads * SCORE_W;
    // The two grids side by side when they fit, else one above the other.
    let side_by_side = 2 * grid_w + 2 <= right.width;
    let grids_h = if side_by_side {
        2 + layers
    } else {
        2 * (2 + layers)
    };
    let [grids, _, maps] = Layout::vertical([
        Constraint::Length(grids_h),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(right);
    render_scores(ctx, lab, grids, side_by_side, buf);
    render_maps(ctx, lab, maps, buf);
}

pub fn render_missing(ctx: &Context, why: &str, area: Rect, buf: &mut Buffer) {
    for (i, l) in text::wrap(why, area.width.max(1) as usize)
        .iter()
        .enumerate()
    {
        if i as u16 >= area.height {
            break;
        }
        buf.set_stringn(
            area.x,
            area.y + i as u16,
            l,
            area.width as usize,
            ctx.theme.dim,
        );
    }
}

/// "step 340 / 600 ███░░ 57% · 40 steps/s · 7 s left · training".
fn render_progress(ctx: &Context, lab: &TrainLab, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let s = &lab.snapshot;
    let frac = s.step as f64 / s.steps.max(1) as f64;
    let bar_w = 20usize;
    let full = (frac * bar_w as f64).round() as usize;
    let (on, off) = if ctx.glyphs.ascii {
        ("#", "-")
    } else {
        ("█", "░")
    };
    let mut spans = vec![
        Span::styled(format!("step {} / {} ", s.step, s.steps), t.value),
        Span::styled(on.repeat(full.min(bar_w)), t.good),
        Span::styled(off.repeat(bar_w - full.min(bar_w)), t.dim),
        Span::styled(format!(" {:>3.0}%", frac * 100.0), t.value),
    ];
    let mut rest = Vec::new();
    if let Some(rate) = lab.steps_per_second(ctx.options.timings) {
        rest.push(format!("{} steps/s", fmt_rate(rate)));
        let left = (s.steps - s.step.min(s.steps)) as f64 / rate;
        if s.step < s.steps {
            rest.push(format!("{} left", fmt_duration(left)));
        }
    }
    let (state, style) = match (&lab.failed, lab.done(), lab.paused) {
        (Some(_), _, _) => ("failed", t.error),
        (None, true, _) => ("done", t.good),
        (None, false, true) => ("paused", t.warn),
        (None, false, false) => ("training", t.label_active),
    };
    for r in rest {
        spans.push(Span::styled(format!(" · {r}"), t.label));
    }
    spans.push(Span::styled(" · ", t.label));
    spans.push(Span::styled(state, style));
    if let Some(e) = &lab.failed {
        spans.push(Span::styled(format!(": {e}"), t.error));
    }
    Line::from(spans).render(area, buf);
}

fn fmt_rate(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

fn fmt_duration(secs: f64) -> String {
    let s = secs.ceil() as u64;
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{}:{:02} min", s / 60, s % 60)
    } else {
        format!("{}:{:02} h", s / 3600, (s % 3600) / 60)
    }
}

/// Loss on the repeated targets and on the rest, against the step, with ln(vocab) (a
/// uniform guess) as the ceiling.
fn render_losses(ctx: &Context, lab: &TrainLab, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let s = &lab.snapshot;
    let rep: Vec<(f64, f64)> = s
        .history
        .iter()
        .map(|r| (r.step as f64, r.loss_repeated))
        .collect();
    let other: Vec<(f64, f64)> = s
        .history
        .iter()
        .map(|r| (r.step as f64, r.loss_other))
        .collect();
    let chance = (lab.vocab.max(2) as f64).ln();
    let top = s
        .history
        .iter()
        .map(|r| r.loss_repeated.max(r.loss_other))
        .fold(chance, f64::max)
        .ceil();
    let marker = if ctx.glyphs.ascii {
        Marker::Dot
    } else {
        Marker::Braille
    };
    // Where each kind of head first passed the circuit score, on the repeated tokens'
    // curve: the phase change is where the curve leaves its plateau.
    let passed = |score: fn(&crate::train::EvalRecord) -> f64| -> Vec<(f64, f64)> {
        s.history
            .iter()
            .find(|r| score(r) >= CIRCUIT_SCORE)
            .map(|r| (r.step as f64, r.loss_repeated))
            .into_iter()
            .collect()
    };
    let prev_at = passed(|r| r.prev_token_max);
    let induction_at = passed(|r| r.induction_max);
    let (point, ge) = if ctx.glyphs.ascii {
        (Marker::Block, ">=")
    } else {
        (Marker::Dot, "≥")
    };
    let other_name = if lab.other_untrained {
        "other (no gradient)"
    } else {
        "other tokens"
    };
    let mut datasets = vec![
        Dataset::default()
            .name(other_name)
            .marker(marker)
            .graph_type(GraphType::Line)
            .style(t.groups[1])
            .data(&other),
        Dataset::default()
            .name("repeated tokens")
            .marker(marker)
            .graph_type(GraphType::Line)
            .style(t.groups[0])
            .data(&rep),
    ];
    for (at, name, style) in [
        (
            &prev_at,
            format!("prev-token {ge} {CIRCUIT_SCORE}"),
            t.groups[2],
        ),
        (
            &induction_at,
            format!("induction {ge} {CIRCUIT_SCORE}"),
            t.groups[3],
        ),
    ] {
        if !at.is_empty() {
            datasets.push(
                Dataset::default()
                    .name(name)
                    .marker(point)
                    .graph_type(GraphType::Scatter)
                    .style(style)
                    .data(at),
            );
        }
    }
    let steps = s.steps.max(1) as f64;
    let x_labels = vec![
        Span::styled("0", t.label),
        Span::styled(format!("{}", s.steps / 2), t.label),
        Span::styled(format!("step {}", s.steps), t.label),
    ];
    let y_labels = vec![
        Span::styled("0", t.label),
        Span::styled(format!("{:.1}", top / 2.0), t.label),
        Span::styled(format!("{top:.0}"), t.label),
    ];
    let title = format!("loss (ln {} = {chance:.2} is a guess)", lab.vocab);
    let [head, chart] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
    buf.set_stringn(
        head.x,
        head.y,
        text::fit(&title, head.width as usize, ctx.glyphs.ellipsis),
        head.width as usize,
        t.panel_title,
    );
    Chart::new(datasets)
        .style(t.base)
        .x_axis(
            Axis::default()
                .bounds([0.0, steps])
                .labels(x_labels)
                .style(t.dim),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, top])
                .labels(y_labels)
                .style(t.dim),
        )
        .legend_position(Some(LegendPosition::TopRight))
        .hidden_legend_constraints((Constraint::Percentage(60), Constraint::Percentage(40)))
        .render(chart, buf);
}

/// The previous-token and induction score of every head, coloured 0..1; a head at or
/// over the circuit's threshold is bold.
fn render_scores(ctx: &Context, lab: &TrainLab, area: Rect, side: bool, buf: &mut Buffer) {
    let s = &lab.snapshot;
    let layers = s.scores.len() as u16;
    let grid_w = LABEL_W + s.scores.first().map_or(0, Vec::len) as u16 * SCORE_W;
    let (a, b) = if side {
        (
            Rect::new(area.x, area.y, grid_w.min(area.width), area.height),
            Rect::new(
                area.x + grid_w + 2,
                area.y,
                area.width.saturating_sub(grid_w + 2),
                area.height,
            ),
        )
    } else {
        let h = 2 + layers;
        (
            Rect::new(area.x, area.y, area.width, h.min(area.height)),
            Rect::new(
                area.x,
                area.y + h,
                area.width,
                area.height.saturating_sub(h),
            ),
        )
    };
    score_grid(ctx, &s.scores, "prev-token", |h| h.prev_token, a, buf);
    score_grid(ctx, &s.scores, "induction", |h| h.induction, b, buf);
}

fn score_grid(
    ctx: &Context,
    scores: &[Vec<HeadScores>],
    name: &str,
    get: impl Fn(&HeadScores) -> f64,
    area: Rect,
    buf: &mut Buffer,
) {
    let t = &ctx.theme;
    if area.height == 0 || area.width == 0 {
        return;
    }
    buf.set_stringn(area.x, area.y, name, area.width as usize, t.panel_title);
    let heads = scores.first().map_or(0, Vec::len);
    let mut header = " ".repeat(LABEL_W as usize);
    for h in 0..heads {
        header.push_str(&format!("{:>4}", format!("h{}", h + 1)));
    }
    if area.height > 1 {
        buf.set_stringn(area.x, area.y + 1, &header, area.width as usize, t.label);
    }
    for (l, row) in scores.iter().enumerate() {
        let y = area.y + 2 + l as u16;
        if y >= area.bottom() {
            break;
        }
        buf.set_stringn(area.x, y, format!("L{}", l + 1), LABEL_W as usize, t.label);
        for (h, hs) in row.iter().enumerate() {
            let x = area.x + LABEL_W + h as u16 * SCORE_W;
            if x + SCORE_W > area.right() {
                break;
            }
            let v = get(hs).clamp(0.0, 1.0);
            let mut style: Style = t.heat.cell_style(v, false);
            if v >= CIRCUIT_SCORE {
                style = style.add_modifier(t.highlight);
            }
            buf.set_stringn(x, y, " ", 1, t.base);
            buf.set_stringn(x + 1, y, score_text(v), 3, style);
        }
    }
}

/// A score in three columns: ".42", "1.0".
fn score_text(v: f64) -> String {
    if v >= 0.995 {
        "1.0".into()
    } else {
        format!("{:.2}", v)[1..].to_string()
    }
}

/// Every head's attention map of the probe, layers down and heads across, one scale
/// 0..1 for all; a cell holds the mean of a block of weights when the probe is longer
/// than a map is wide.
fn render_maps(ctx: &Context, lab: &TrainLab, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let s = &lab.snapshot;
    let n = s.probe.len().max(1);
    let layers = s.maps.len();
    let heads = s.maps.first().map_or(0, Vec::len).max(1);
    if area.height < 3 || layers == 0 {
        return;
    }
    let [head, maps, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    buf.set_stringn(
        head.x,
        head.y,
        "attention on the probe (query down, key across)",
        head.width as usize,
        t.panel_title,
    );
    let per_row = if t.heat.is_mono() { 1 } else { 2 };
    let room_w = (maps.width.saturating_sub(LABEL_W) / heads as u16).saturating_sub(1) as usize;
    // Each layer's row of maps needs a one-line gap below it.
    let room_h = (maps.height / layers as u16).saturating_sub(1) as usize * per_row;
    let widest = room_w.min(room_h).max(2);
    let per_cell = n.div_ceil(widest).max(1);
    let cells = n.div_ceil(per_cell);
    let (map_w, map_h) = (cells as u16, cells.div_ceil(per_row) as u16);
    let vp = Viewport {
        row0: 0,
        col0: 0,
        per_cell,
    };
    let scale = ValueScale::Sequential { lo: 0.0, hi: 1.0 };
    for (l, row) in s.maps.iter().enumerate() {
        let y = maps.y + l as u16 * (map_h + 1);
        if y + map_h > maps.bottom() {
            break;
        }
        buf.set_stringn(maps.x, y, format!("L{}", l + 1), LABEL_W as usize, t.label);
        for (h, map) in row.iter().enumerate() {
            let x = maps.x + LABEL_W + 1 + h as u16 * (map_w + 1);
            if x + map_w > maps.right() {
                break;
            }
            let values = pool(map, n, n, &vp, cells, cells, Pool::Mean);
            (&MiniMap {
                values: &values,
                rows: cells,
                cols: cells,
                scale,
                painter: &t.heat,
                glyphs: &ctx.glyphs,
                base: t.base,
            })
                .render(Rect::new(x, y, map_w, map_h), buf);
        }
    }
    let note = if per_cell > 1 {
        format!("{n} tokens; a cell is the mean of {per_cell}x{per_cell} weights · scale 0..1")
    } else {
        format!("{n} tokens, one weight a cell · scale 0..1")
    };
    buf.set_stringn(
        foot.x,
        foot.y,
        text::fit(&note, foot.width as usize, ctx.glyphs.ellipsis),
        foot.width as usize,
        t.dim,
    );
}
