//! The tokens view's difference of two texts (`x` with `--compare`): for the selected
//! query token, each key token's weight in the first text's run, in the second's, and
//! their signed difference (first minus second), for the focused head or the mean over the
//! heads, in the layer on screen. A key whose token differs between the texts shows both
//! (`␣France→␣Italy`). The weights are the two forward passes' own (`ModelSession`); this
//! module only subtracts and draws.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::model::session::ModelSession;
use crate::tui::context::Context;
use crate::widgets::text;
use crate::widgets::token_links::show;

/// Columns of the key token.
const TOKEN_W: usize = 18;
/// Columns of the bar of the largest difference, each side of its axis.
const BAR_W: usize = 12;

/// Row `i` of `layer` in `s`: head `focus`'s weights, or the mean over the heads.
fn row(s: &ModelSession, layer: usize, focus: Option<usize>, i: usize) -> Vec<f32> {
    let heads = s.config().heads;
    match focus {
        Some(h) => s.row_weights(layer, h.min(heads - 1), i),
        None => {
            let mut sum = vec![0.0f32; s.n()];
            for h in 0..heads {
                for (a, w) in sum.iter_mut().zip(s.row_weights(layer, h, i)) {
                    *a += w;
                }
            }
            sum.iter().map(|v| v / heads as f32).collect()
        }
    }
}

pub fn render(
    ctx: &Context,
    first: &ModelSession,
    second: &ModelSession,
    focus: Option<usize>,
    area: Rect,
    buf: &mut Buffer,
) {
    let t = &ctx.theme;
    let n = first.n().min(second.n());
    if n == 0 || area.height == 0 {
        return;
    }
    let layer = ctx.layer().min(first.config().layers - 1);
    let i = ctx.cursor.0.min(n - 1);
    let (a, b) = (row(first, layer, focus, i), row(second, layer, focus, i));
    let label = |j: usize| {
        let (p, q) = (show(&first.pieces[j]), show(&second.pieces[j]));
        ctx.glyphs
            .text(&if p == q { p } else { format!("{p}→{q}") })
            .into_owned()
    };
    let what = match focus {
        Some(h) => format!("head {}", h + 1),
        None => "mean of the heads".to_string(),
    };
    let biggest = (0..n)
        .max_by(|&x, &y| (a[x] - b[x]).abs().total_cmp(&(a[y] - b[y]).abs()))
        .unwrap_or(0);
    Line::from(vec![
        Span::styled(
            format!(
                "first minus second text · token {}/{n} '{}' · {what} · largest change: ",
                i + 1,
                label(i)
            ),
            t.panel_title,
        ),
        Span::styled(
            format!("'{}' {:+.3}", label(biggest), a[biggest] - b[biggest]),
            t.field_value,
        ),
    ])
    .render(Rect::new(area.x, area.y, area.width, 1), buf);
    if area.height < 2 {
        return;
    }
    let header = format!(
        "{}  {:>6}  {:>6}  {:>7}  bars: against the largest change",
        text::left("key", TOKEN_W, "…"),
        "first",
        "second",
        "change"
    );
    buf.set_stringn(area.x, area.y + 1, header, area.width as usize, t.dim);
    // Bars relative to the largest change, so that small changes still show.
    let scale = (0..n).map(|j| (a[j] - b[j]).abs()).fold(1e-6f32, f32::max);
    let rows = area.height.saturating_sub(2) as usize;
    let first_row = if n <= rows {
        0
    } else {
        i.saturating_sub(rows / 2).min(n - rows)
    };
    for (k, j) in (first_row..n).take(rows).enumerate() {
        let y = area.y + 2 + k as u16;
        let d = a[j] - b[j];
        let style = if j == i { t.label_active } else { t.label };
        let mut spans = vec![
            Span::styled(text::left(&label(j), TOKEN_W, ctx.glyphs.ellipsis), style),
            Span::styled(format!("  {:>6.3}  {:>6.3}  ", a[j], b[j]), t.value),
            Span::styled(
                format!("{d:>+7.3} "),
                t.heat.cell_style(d.clamp(-1.0, 1.0) as f64, true),
            ),
        ];
        // A bar each side of an axis: left for less weight in the first text, right for more.
        let len = ((d.abs() / scale * BAR_W as f32).round() as usize).min(BAR_W);
        let (left, right) = if d < 0.0 {
            (
                format!("{}{}", " ".repeat(BAR_W - len), "█".repeat(len)),
                " ".repeat(BAR_W),
            )
        } else {
            (" ".repeat(BAR_W), "█".repeat(len))
        };
        spans.push(Span::styled(
            ctx.glyphs.text(&left).into_owned(),
            t.field_value,
        ));
        spans.push(Span::styled("│", t.dim));
        spans.push(Span::styled(
            ctx.glyphs.text(&right).into_owned(),
            t.field_value,
        ));
        Line::from(spans).render(Rect::new(area.x, y, area.width, 1), buf);
    }
}
