//! The inspector: the engine's explanation of the cell under the cursor, the weights'
//! row statistics, and what the last scale toggle did.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Widget};

use crate::engine::pipeline::{Explanation, RowStats, StageId};
use crate::tui::context::Context;
use crate::widgets::numfmt::{fit_number, significant};
use crate::widgets::text;

/// The engine's explanation of the focused cell. For a per-head stage only the head's
/// own matrix is explained by the engine; the K/V group matrices beside it are
/// described from their labels.
pub fn explanation(state: &Context) -> Option<Explanation> {
    let stage = state.current_stage()?;
    let (r, c) = state.cursor;
    if stage.per_head {
        if state.sub == 0 {
            return state.pipeline.explain(state.stage, state.head, r, c);
        }
        let m = state.focused()?;
        let value = *m.data.get((r, c))?;
        let g = state.pipeline.kv_group_for(state.head);
        let readers: Vec<String> = (0..state.heads())
            .filter(|&h| state.pipeline.kv_group_for(h) == g)
            .map(|h| (h + 1).to_string())
            .collect();
        return Some(Explanation {
            title: format!("{}[{r},{c}]", m.name),
            lines: vec![
                format!(
                    "KV group {}, read by query heads {}",
                    g + 1,
                    readers.join(", ")
                ),
                format!(
                    "token '{}', dimension {c}",
                    m.row_labels.get(r).map_or("", |s| s)
                ),
            ],
            value,
        });
    }
    state.pipeline.explain(state.stage, state.sub, r, c)
}

fn stats_line(label: &str, s: &RowStats) -> String {
    format!(
        "{label}: entropy {} nats, max weight {}",
        fit_number(s.entropy, 5, true),
        fit_number(s.max_weight, 5, true)
    )
}

fn mean(v: &[RowStats]) -> RowStats {
    let n = v.len().max(1) as f64;
    RowStats {
        entropy: v.iter().map(|s| s.entropy).sum::<f64>() / n,
        max_weight: v.iter().map(|s| s.max_weight).sum::<f64>() / n,
        visible: v.iter().map(|s| s.visible).max().unwrap_or(0),
    }
}

/// Lines of the inspector, before wrapping: (text, style).
pub fn lines(state: &Context) -> Vec<(String, Style)> {
    let t = &state.theme;
    let mut out: Vec<(String, Style)> = Vec::new();
    let (r, c) = state.cursor;
    match explanation(state) {
        Some(e) => {
            out.push((e.title.clone(), t.panel_title));
            for l in &e.lines {
                out.push((l.clone(), t.formula));
            }
            // The engine's last line usually ends with the value; repeat it with more
            // digits only when that adds something.
            let value = significant(e.value, 6);
            let said = e
                .lines
                .last()
                .is_some_and(|l| l.ends_with(&format!("= {value}")));
            if !said {
                out.push((format!("= {value}"), t.value));
            }
        }
        None => out.push(("no cell here".into(), t.dim)),
    }
    let per_head = state.current_stage().is_some_and(|s| s.per_head);
    if let Some(m) = state.focused()
        && per_head
        && m.data.dim() == (state.pipeline.shape.n_q, state.pipeline.shape.n_k)
    {
        let q = m.row_labels.get(r).map_or("", |s| s);
        let k = m.col_labels.get(c).map_or("", |s| s);
        out.push((format!("query '{q}' looks at key '{k}'"), t.dim));
    }
    let after_scores = state.stage.index() >= StageId::Scores.index()
        && state.stage.index() <= StageId::WeightedSum.index();
    if after_scores {
        let stats = state.pipeline.row_stats(state.head);
        if let Some(s) = stats.get(r) {
            out.push((String::new(), t.base));
            out.push((
                format!("weights of row {r}, head {}", state.head + 1),
                t.panel_title,
            ));
            out.push((stats_line("now", s), t.base));
            // The most a row can spread is uniformly over the keys it may see: a masked
            // key takes no weight, so it is no part of the comparison.
            let n = state.pipeline.shape.n_k;
            let v = s.visible;
            let over = if v == n {
                format!("its {v} keys")
            } else {
                format!("its {v} visible keys (of {n})")
            };
            let line = if v == 0 {
                "(every key of this row is masked)".to_string()
            } else {
                format!(
                    "(uniform over {over} would be ln {v} = {} nats)",
                    fit_number((v as f64).ln(), 5, true)
                )
            };
            out.push((line, t.dim));
        }
    }
    if let Some(sc) = &state.scale_change
        && sc.head == state.head
    {
        let (from, to) = if sc.was_scaled {
            ("on", "off")
        } else {
            ("off", "on")
        };
        out.push((String::new(), t.base));
        out.push((
            format!("1/sqrt(d_k) {from} -> {to}, head {}", sc.head + 1),
            t.panel_title,
        ));
        if let (Some(b), Some(a)) = (sc.before.get(r), sc.after.get(r)) {
            out.push((stats_line(&format!("row {r} before"), b), t.base));
            out.push((stats_line(&format!("row {r} after"), a), t.base));
        }
        let (mb, ma) = (mean(&sc.before), mean(&sc.after));
        out.push((stats_line("mean before", &mb), t.dim));
        out.push((stats_line("mean after", &ma), t.dim));
        let verdict = if ma.max_weight > mb.max_weight {
            "the weights got sharper: softmax leans on fewer keys"
        } else if ma.max_weight < mb.max_weight {
            "the weights got flatter: softmax spreads over more keys"
        } else {
            "the weights did not change"
        };
        out.push((verdict.into(), t.good));
    }
    out
}

pub fn render(state: &Context, area: Rect, buf: &mut Buffer) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_set(state.glyphs.border)
        .border_style(state.theme.border)
        .title(Span::styled(" inspector ", state.theme.panel_title));
    let inner = block.inner(area);
    block.render(area, buf);
    let w = inner.width as usize;
    let mut y = inner.y;
    for (line, style) in lines(state) {
        let line = state.glyphs.text(&line).into_owned();
        for piece in text::wrap(&line, w) {
            if y >= inner.bottom() {
                return;
            }
            Line::from(Span::styled(piece, style))
                .render(Rect::new(inner.x, y, inner.width, 1), buf);
            y += 1;
        }
    }
}
