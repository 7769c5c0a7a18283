//! Sliding window (Mistral): the band, the receptive field growing layer by layer, and
//! the rolling buffer where position i lives in slot i mod W.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;

use super::grid::{CellGrid, split, tiles_line, token};
use super::lab::VariantsLab;
use super::lab::layers_to_cover;
use crate::engine::memory::group_digits;
use crate::engine::variants;
use crate::tui::context::Context;
use crate::widgets::lines::LineWriter;
use crate::widgets::text;

pub(super) fn render_window(state: &Context, lab: &VariantsLab, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let sw = match &lab.sliding {
        Ok(sw) => sw,
        Err(e) => return LineWriter::new(area, buf).text(e, th.error),
    };
    let n = sw.n;
    let (i, _) = state.cursor;
    let i = i.min(n.saturating_sub(1));
    let labels: Vec<String> = (0..n).map(|k| token(lab, k)).collect();
    let [left, right] = split(area, CellGrid::width(&labels, n).max(34));
    let layers = sw.layers.len().max(1);
    let first = &lab.first_layer;
    let dot = if state.glyphs.ascii { "." } else { "·" };
    let cell = |r: usize, c: usize| -> (String, Style) {
        let l = first[[r, c]] as usize;
        if l == 0 {
            (dot.to_string(), th.masked)
        } else {
            let t = if layers == 1 {
                1.0
            } else {
                1.0 - (l - 1) as f64 / layers as f64
            };
            let sym = if l < 10 { l.to_string() } else { "+".into() };
            (sym, th.heat.cell_style(t, false))
        }
    };
    CellGrid {
        title: format!("layer where j first reaches i, W {}", sw.window),
        labels: &labels,
        n_rows: n,
        n_cols: n,
        cell: &cell,
        cursor: (i, state.cursor.1.min(n.saturating_sub(1))),
        legend: vec![
            Span::styled("1", th.heat.cell_style(1.0, false)),
            Span::styled(" band ", th.label),
            Span::styled("2..", th.heat.cell_style(0.5, false)),
            Span::styled(" deeper ", th.label),
            Span::styled(dot, th.masked),
            Span::styled(" not reached", th.label),
        ],
    }
    .render(state, left, buf);

    let mut w = LineWriter::new(right, buf);
    let wnd = sw.window;
    w.line(vec![Span::styled(
        format!("sliding window W = {wnd}, {} layer(s)", sw.layers.len()),
        th.panel_title,
    )]);
    w.text(
        &format!(
            "layer 1 is the band: query i sees keys i-{} .. i; each further layer reaches W-1 = {} more",
            wnd.saturating_sub(1),
            wnd.saturating_sub(1)
        ),
        th.base,
    );
    let spans: Vec<String> = sw
        .layers
        .iter()
        .map(|l| format!("L{} {}", l.layer, l.span))
        .collect();
    w.text(
        &format!("positions seen, L(W-1)+1 capped by n: {}", spans.join(", ")),
        th.formula,
    );
    if wnd > 1 {
        w.text(
            &format!(
                "the last token sees all n = {n} after {} layer(s)",
                layers_to_cover(n, wnd)
            ),
            th.dim,
        );
    }
    if let Some(last) = sw.layers.last() {
        let from = last.earliest.get(i).copied().unwrap_or(0);
        w.text(
            &format!(
                "after {} layer(s) '{}' (position {i}) depends on positions {from}..{i}",
                last.layer,
                token(lab, i)
            ),
            th.field_value,
        );
    }
    // The rolling buffer after writing position i.
    if let Some(frame) = sw.buffer.get(i) {
        w.line(vec![Span::styled(
            format!(
                "rolling buffer after position {i}: slot = i mod {wnd} = {}",
                frame.slot
            ),
            th.panel_title,
        )]);
        let mut spans = Vec::new();
        for (slot, held) in frame.slots.iter().enumerate() {
            let text = match held {
                Some(p) => format!("[{slot}: {}]", token(lab, *p)),
                None => format!("[{slot}: -]"),
            };
            let style = if slot == frame.slot {
                th.label_active.add_modifier(th.highlight)
            } else {
                th.base
            };
            spans.push(Span::styled(text, style));
            spans.push(Span::raw(" "));
        }
        // Wrap the slots by hand: each is a unit.
        let width = w.area.width as usize;
        let mut line: Vec<Span> = Vec::new();
        let mut used = 0;
        for sp in spans {
            let sw_ = text::width(&sp.content);
            if used + sw_ > width && !line.is_empty() {
                w.line(std::mem::take(&mut line));
                used = 0;
            }
            used += sw_;
            line.push(sp);
        }
        if !line.is_empty() {
            w.line(line);
        }
        let evicted = match frame.evicted {
            Some(e) => format!(
                "it overwrote position {e} ('{}'), which the window no longer sees",
                token(lab, e)
            ),
            None => "the buffer is still filling: nothing overwritten".into(),
        };
        w.text(&evicted, th.dim);
        w.text(
            &format!("the cache holds at most W = {wnd} positions however long the text grows"),
            th.dim,
        );
    }
    w.blank();
    w.text(
        &format!(
            "Mistral 7B, 32 layers of W 4096: {} positions",
            group_digits(variants::receptive_span(4096, 32, usize::MAX) as u64)
        ),
        th.dim,
    );
    let causal_pairs = n * (n + 1) / 2;
    w.text(
        &format!(
            "pairs scored: {} of {} (causal {}); {}",
            sw.seen,
            n * n,
            causal_pairs,
            tiles_line(&sw.tiles)
        ),
        th.base,
    );
    if let Some(ct) = &lab.causal_tiles {
        w.text(&format!("causal: {}", tiles_line(ct)), th.dim);
    }
}
