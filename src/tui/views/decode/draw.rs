//! The upper band of the decode view: the step's heading, the K and V caches of the
//! selected head's KV head, and the weights of every step so far.

use ndarray::{Array2, s};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Span;

use super::cost::{render_cost, render_groups};
use super::lab::{DecodeLab, label};
use crate::engine::kv_cache::CacheLayout;
use crate::engine::pipeline::Matrix;
use crate::tui::context::Context;
use crate::tui::views::panel::{MAX_CELL, MatrixPanel};
use crate::widgets::ValueScale;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::significant;

/// The step on screen and the selected position (at most the step).
fn focus(state: &Context, lab: &DecodeLab) -> (usize, usize) {
    let n = lab.decoding.steps.len();
    let t = state.cursor.0.min(n.saturating_sub(1));
    (t, state.cursor.1.min(t))
}

pub(super) fn render_lab(state: &Context, lab: &DecodeLab, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let (t, j) = focus(state, lab);
    let Some(step) = lab.decoding.steps.get(t) else {
        return;
    };
    let n = lab.decoding.steps.len();
    let h = state.head.min(lab.inputs.heads().saturating_sub(1));
    let choice = &lab.groups.choices[lab.choice];
    let g = choice.kv_head_of[h];
    let mut w = LineWriter::new(area, buf);
    w.line(vec![
        Span::styled(format!("step {}/{n}", t + 1), th.value),
        Span::styled(
            format!("  decoding '{}' (position {t})", label(&lab.tokens, t)),
            th.field_value,
        ),
        Span::styled(
            format!(
                "  its k, v {} slot {}{}",
                if state.glyphs.ascii { "->" } else { "→" },
                step.written_slot,
                step.evicted
                    .map(|e| format!(", overwriting position {e}"))
                    .unwrap_or_default()
            ),
            th.base,
        ),
        Span::styled(
            format!(
                "  cache {} row{} x {} KV head{}",
                step.cache_len,
                if step.cache_len == 1 { "" } else { "s" },
                choice.kv_heads,
                if choice.kv_heads == 1 { "" } else { "s" }
            ),
            th.dim,
        ),
    ]);
    for note in &lab.notes {
        w.text(note, th.dim);
    }
    // The cache and weights need a title, a column header, a row per step and the
    // legend; the detail line under the weights comes when there is room.
    let rows = w.rows_left();
    let want_upper = n as u16 + 5;
    let lower_min = 4;
    let upper_h = want_upper
        .min(rows.saturating_sub(lower_min))
        .max(rows.min(6));
    let upper = w.take(upper_h);
    let lower = w.take(w.rows_left());

    // Upper band: the cache (K, V of the selected head's KV head) and the weights.
    let [k_area, v_area, w_area] = Layout::horizontal([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .spacing(2)
    .areas(upper);
    let slot_rows: Vec<usize> = step.slot_positions.clone();
    let slot_labels: Vec<String> = slot_rows
        .iter()
        .enumerate()
        .map(|(s, &pos)| match lab.layout {
            CacheLayout::Full => label(&lab.tokens, pos),
            CacheLayout::Rolling { .. } => format!("{s} {}", label(&lab.tokens, pos)),
        })
        .collect();
    let newest = [(step.written_slot, 0usize)];
    for (area, name, data) in [(k_area, "K", &choice.k), (v_area, "V", &choice.v)] {
        let width = data.dim().2;
        let rows = Array2::from_shape_fn((slot_rows.len(), width), |(r, c)| {
            data[[g, slot_rows[r], c]]
        });
        let what = match lab.layout {
            CacheLayout::Full => format!("{name} cache (kv {})", g + 1),
            CacheLayout::Rolling { .. } => format!("{name} cache (kv {}), by slot", g + 1),
        };
        let m = Matrix::new(
            what,
            rows,
            slot_labels.clone(),
            (0..width).map(|c| c.to_string()).collect(),
        );
        let selected_slot = slot_rows.iter().position(|&p| p == j);
        MatrixPanel {
            matrix: &m,
            title: m.name.clone(),
            title_style: th.group(g),
            cursor: selected_slot.map(|s| (s, 0)),
            highlight: &newest,
            masked: None,
            scale: ValueScale::fit(data.slice(s![g, .., ..]).iter().copied()),
            legend: false,
            max_cell: MAX_CELL,
        }
        .render(state, area, w.buf);
    }
    render_weights(state, lab, (t, j), h, w_area, w.buf);

    // Lower band: cost on the left, KV groups on the right.
    let [cost, groups] = Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)])
        .spacing(2)
        .areas(lower);
    render_cost(state, lab, t, cost, w.buf);
    render_groups(state, lab, h, groups, w.buf);
}

/// Every step so far, one row each: step r's weights over the positions it saw.
fn render_weights(
    state: &Context,
    lab: &DecodeLab,
    (t, j): (usize, usize),
    h: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let steps = &lab.decoding.steps[..=t];
    let mut data = Array2::zeros((t + 1, t + 1));
    let mut seen = Array2::from_elem((t + 1, t + 1), false);
    for (r, st) in steps.iter().enumerate() {
        for (c, &pos) in st.cache_positions.iter().enumerate() {
            data[[r, pos]] = st.weights[[h, c]];
            seen[[r, pos]] = true;
        }
    }
    let labels: Vec<String> = (0..=t).map(|i| label(&lab.tokens, i)).collect();
    let m = Matrix::new(
        format!("weights per step (head {})", h + 1),
        data,
        labels.clone(),
        labels,
    );
    let masked = |r: usize, c: usize| !seen[[r, c]];
    let panel_h = t as u16 + 4;
    let detail_h = if area.height >= panel_h + 2 { 2 } else { 0 };
    let [panel, detail, _] = Layout::vertical([
        Constraint::Length(panel_h.min(area.height)),
        Constraint::Length(detail_h),
        Constraint::Fill(1),
    ])
    .areas(area);
    MatrixPanel {
        matrix: &m,
        title: m.name.clone(),
        title_style: state.theme.panel_title,
        cursor: Some((t, j)),
        highlight: &[],
        masked: Some(&masked),
        scale: ValueScale::Sequential { lo: 0.0, hi: 1.0 },
        legend: true,
        max_cell: MAX_CELL,
    }
    .render(state, panel, buf);
    let step = &lab.decoding.steps[t];
    let weight = step
        .cache_positions
        .iter()
        .position(|&p| p == j)
        .map(|c| step.weights[[h, c]]);
    let text = match weight {
        Some(wt) => format!(
            "'{}' attends to '{}' with {} (head {})",
            label(&lab.tokens, t),
            label(&lab.tokens, j),
            significant(wt, 4),
            h + 1
        ),
        // A key after the query is not decoded yet; one before it that is missing was
        // overwritten in the rolling buffer. Either way the query (row t) cannot see it.
        None if j > t => format!(
            "'{}' (position {j}) comes after '{}': not decoded yet",
            label(&lab.tokens, j),
            label(&lab.tokens, t)
        ),
        None => format!(
            "'{}' (position {j}) has left the rolling buffer: '{}' cannot see it",
            label(&lab.tokens, j),
            label(&lab.tokens, t)
        ),
    };
    LineWriter::new(detail, buf).text(&text, state.theme.dim);
}
