//! Layers x heads coloured by one head score, the value in each cell, and beside every
//! layer its attention sink: the share of all its attention that goes to the first
//! token (the mean over heads of the first-token score), with why models do this.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use super::lab::{Score, measure, score, scores_ready};
use crate::model::session::{Measure, ModelSession};
use crate::tui::context::Context;
use crate::widgets::text;

/// Columns of the layer labels ("L30 ").
const LABEL_W: u16 = 4;
/// Columns of one head's cell (" .91 ").
const CELL_W: u16 = 5;
/// Columns of the sink bar.
const SINK_W: u16 = 12;

const SINK_EN: &str = "Attention sink (Xiao et al. 2023): softmax makes every row's weights sum to 1, so a head with nothing useful to look at must still put its weight somewhere, and trained models put it on the first token, which every row can see. Dropping those first tokens from a sliding-window KV cache makes perplexity explode; keeping four of them restores it (StreamingLLM).";
const SINK_ZH: &str = "注意力汇聚点（Xiao 等 2023）：softmax 让每一行的权重之和为 1，所以没有有用目标的头也必须把权重放在某处；训练过的模型把它放在每一行都能看到的第一个词元上。从滑动窗口 KV 缓存里删掉这些开头的词元，困惑度会暴涨；保留其中四个就能恢复（StreamingLLM）。";

struct Layout {
    first_layer: usize,
    rows: usize,
    origin: (u16, u16),
    side: Option<Rect>,
}

fn layout(ctx: &Context, s: &ModelSession, area: Rect) -> Layout {
    let (layers, heads) = (s.config().layers, s.config().heads);
    // A header row, then a row per layer.
    let rows = (area.height.saturating_sub(1) as usize).clamp(1, layers.max(1));
    let cur = ctx.cursor.0.min(layers.saturating_sub(1));
    let first_layer = cur
        .saturating_sub(rows / 2)
        .min(layers.saturating_sub(rows));
    let grid_w = LABEL_W + heads as u16 * CELL_W + SINK_W + 8;
    let side = (area.width >= grid_w + 30).then(|| {
        Rect::new(
            area.x + grid_w + 2,
            area.y,
            area.width - grid_w - 2,
            area.height,
        )
    });
    Layout {
        first_layer,
        rows,
        origin: (area.x + LABEL_W, area.y + 1),
        side,
    }
}

/// Mean over heads of the first-token score: the layer's attention on the first token.
pub fn sink(ctx: &Context, s: &ModelSession, layer: usize) -> f64 {
    let heads = s.config().heads.max(1);
    (0..heads)
        .filter_map(|h| score(ctx, layer, h))
        .map(|sc| sc.first_token)
        .sum::<f64>()
        / heads as f64
}

pub fn render(ctx: &Context, s: &ModelSession, k: Score, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    if !scores_ready(ctx) {
        buf.set_stringn(
            area.x,
            area.y,
            "computing every head's scores…",
            area.width as usize,
            t.dim,
        );
        return;
    }
    let g = layout(ctx, s, area);
    let heads = s.config().heads;
    let (cur_l, cur_h) = ctx.cursor;
    for h in 0..heads {
        let x = g.origin.0 + h as u16 * CELL_W;
        let style = if h == cur_h { t.label_active } else { t.label };
        buf.set_stringn(x, area.y, format!(" h{:<3}", h + 1), CELL_W as usize, style);
    }
    let sink_x = g.origin.0 + heads as u16 * CELL_W + 1;
    buf.set_stringn(
        sink_x,
        area.y,
        "on 1st token",
        area.right().saturating_sub(sink_x) as usize,
        t.label,
    );
    for (r, layer) in (g.first_layer..g.first_layer + g.rows).enumerate() {
        let y = g.origin.1 + r as u16;
        if y >= area.bottom() {
            break;
        }
        let style = if layer == cur_l {
            t.label_active
        } else {
            t.label
        };
        buf.set_stringn(
            area.x,
            y,
            format!("L{}", layer + 1),
            LABEL_W as usize,
            style,
        );
        for h in 0..heads {
            let x = g.origin.0 + h as u16 * CELL_W;
            if x + CELL_W > area.right() {
                break;
            }
            let Some(sc) = score(ctx, layer, h) else {
                continue;
            };
            let v = k.of(sc);
            let mut style = t.heat.cell_style(v.clamp(0.0, 1.0), false);
            if (layer, h) == (cur_l, cur_h) {
                style = style.add_modifier(t.cursor);
            }
            let num = format!("{v:.2}");
            let num = num.strip_prefix('0').unwrap_or(&num);
            let ablated = s.options.ablate.contains(&(layer, h));
            let cell = if ablated {
                format!(" ╳{num:<3}")
            } else {
                format!(" {num:>3} ")
            };
            let cell = if ctx.glyphs.ascii {
                cell.replace('╳', "x")
            } else {
                cell
            };
            buf.set_stringn(x, y, cell, CELL_W as usize, style);
        }
        // The layer's sink: a bar and its share.
        let v = sink(ctx, s, layer);
        if sink_x + SINK_W + 6 <= area.right() {
            let full = (v.clamp(0.0, 1.0) * SINK_W as f64).round() as usize;
            let bar = ctx.glyphs.text("█").repeat(full);
            buf.set_stringn(sink_x, y, bar, SINK_W as usize, t.value);
            buf.set_stringn(
                sink_x + SINK_W + 1,
                y,
                format!("{:>3.0}%", v * 100.0),
                5,
                t.field_value,
            );
        }
    }
    if let Some(side) = g.side {
        // The scores are of what the maps show: weights, or contributions (`w`).
        let (one, many) = match measure(ctx) {
            Measure::Weights => ("weight", "weights"),
            Measure::Contributions => ("contribution", "contributions"),
        };
        let mut lines = vec![(
            format!(
                "{}: {}",
                k.name(),
                match k {
                    Score::PrevToken => format!("mean {one} on the token just before"),
                    Score::FirstToken => format!("mean {one} on the first token (the sink)"),
                    Score::Duplicate => format!("{one} on earlier copies of the same token"),
                    Score::Induction => {
                        format!("{one} on the token after an earlier copy (copying)")
                    }
                    Score::Entropy => {
                        format!("how spread the {many} are, 0 (one key) to 1 (uniform)")
                    }
                }
            ),
            t.panel_title,
        )];
        lines.push((String::new(), t.dim));
        let sink_text = match ctx.options.lang {
            crate::cli::Lang::En => SINK_EN,
            crate::cli::Lang::Zh => SINK_ZH,
        };
        for l in text::wrap(sink_text, side.width as usize) {
            lines.push((l, t.dim));
        }
        for (i, (l, st)) in lines.iter().enumerate() {
            let y = side.y + i as u16;
            if y >= side.bottom() {
                break;
            }
            buf.set_stringn(side.x, y, l, side.width as usize, *st);
        }
    }
}

/// The (layer, head) of the cell under (x, y).
pub fn hit(ctx: &Context, s: &ModelSession, area: Rect, x: u16, y: u16) -> Option<(usize, usize)> {
    let g = layout(ctx, s, area);
    let heads = s.config().heads;
    let grid = Rect::new(g.origin.0, g.origin.1, heads as u16 * CELL_W, g.rows as u16);
    if !grid.contains(Position::new(x, y)) {
        return None;
    }
    let layer = g.first_layer + (y - g.origin.1) as usize;
    let head = ((x - g.origin.0) / CELL_W) as usize;
    Some((layer, head))
}
