//! What an intervention does to the model's predictions: the loss on the text and the
//! top next tokens before and after, side by side, and under the tokens a strip of each
//! token's loss change (red: the model predicts it worse now; blue: better). Before any
//! intervention, the loss and the predictions themselves. The numbers are the forward
//! passes' own (`ModelSession` and its `Baseline`).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::model::predict::TopToken;
use crate::model::session::ModelSession;
use crate::tui::context::Context;
use crate::widgets::heat::ValueScale;
use crate::widgets::text;
use crate::widgets::token_links::show;

/// Next tokens listed per line.
const TOP: usize = 5;

/// Lines the panel takes in a view `area_h` tall (0: the model predicts nothing).
pub fn height(s: &ModelSession, area_h: u16) -> u16 {
    if s.token_loss.is_empty() || area_h < 16 {
        0
    } else {
        4
    }
}

fn tops(ctx: &Context, s: &ModelSession, top: &[TopToken]) -> String {
    top.iter()
        .take(TOP)
        .map(|tk| {
            let piece = s.model.tokenizer.piece(tk.id);
            format!(
                "'{}' {:.0}%",
                ctx.glyphs.text(&show(&piece)),
                tk.prob * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// "L19 h7" for (18, 6): counted from 1 on screen.
pub fn head_name(layer: usize, head: usize) -> String {
    format!("L{} h{}", layer + 1, head + 1)
}

pub fn render(ctx: &Context, s: &ModelSession, area: Rect, buf: &mut Buffer) {
    if area.height < 4 {
        return;
    }
    let t = &ctx.theme;
    let line = |y: u16, spans: Vec<Span>, buf: &mut Buffer| {
        Line::from(spans).render(Rect::new(area.x, area.y + y, area.width, 1), buf);
    };
    let loss = s.loss().unwrap_or(f64::NAN);
    match &s.baseline {
        None => {
            line(
                0,
                vec![
                    Span::styled("loss ", t.field_name),
                    Span::styled(format!("{loss:.3} nats/token"), t.field_value),
                    Span::styled(
                        "   d: ablate the head under the cursor and see what changes",
                        t.dim,
                    ),
                ],
                buf,
            );
            line(
                1,
                vec![
                    Span::styled("next  ", t.field_name),
                    Span::styled(tops(ctx, s, &s.top_next), t.value),
                ],
                buf,
            );
        }
        Some(b) => {
            let before = b.loss.unwrap_or(f64::NAN);
            let delta = loss - before;
            let changes = interventions(s);
            let delta_style = if delta > 0.0 { t.error } else { t.good };
            line(
                0,
                vec![
                    Span::styled("loss ", t.field_name),
                    Span::styled(format!("{before:.3} -> {loss:.3} "), t.field_value),
                    Span::styled(format!("({delta:+.3})"), delta_style),
                    Span::styled(format!("  {}  (D: restore)", changes.join(" · ")), t.dim),
                ],
                buf,
            );
            line(
                1,
                vec![
                    Span::styled("before ", t.field_name),
                    Span::styled(tops(ctx, s, &b.top_next), t.value),
                ],
                buf,
            );
            line(
                2,
                vec![
                    Span::styled("after  ", t.field_name),
                    Span::styled(tops(ctx, s, &s.top_next), t.value),
                ],
                buf,
            );
        }
    }
    strip(ctx, s, Rect::new(area.x, area.y + 3, area.width, 1), buf);
}

/// Each predicted token coloured by its loss change (or, before an intervention, its
/// loss), around the cursor's end of the text when it does not all fit.
fn strip(ctx: &Context, s: &ModelSession, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let (label, values): (&str, Vec<f64>) = match &s.baseline {
        Some(b) if b.token_loss.len() == s.token_loss.len() => (
            "Δloss ",
            s.token_loss
                .iter()
                .zip(&b.token_loss)
                .map(|(a, b)| a - b)
                .collect(),
        ),
        _ => ("loss  ", s.token_loss.clone()),
    };
    let scale = if s.baseline.is_some() {
        let abs = values.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-6);
        ValueScale::Diverging { abs }
    } else {
        ValueScale::fit(values.iter().copied())
    };
    let label = ctx.glyphs.text(label).into_owned();
    buf.set_stringn(area.x, area.y, &label, area.width as usize, t.field_name);
    let mut x = area.x + text::width(&label) as u16;
    // token_loss[i - 1] is the loss of token i (token 0 is not predicted); show the
    // last tokens that fit.
    let pieces: Vec<String> = s.pieces[1..]
        .iter()
        .map(|p| ctx.glyphs.text(&show(p)).into_owned())
        .collect();
    let mut start = pieces.len();
    let mut used = 0usize;
    while start > 0 {
        let w = text::width(&pieces[start - 1]).min(12) + 1;
        if used + w > area.right().saturating_sub(x) as usize {
            break;
        }
        used += w;
        start -= 1;
    }
    for (piece, v) in pieces.iter().zip(&values).skip(start) {
        let shown = text::fit(piece, 12, ctx.glyphs.ellipsis);
        let w = text::width(&shown) as u16;
        let style: Style = t.heat.cell_style(scale.norm(*v), scale.is_diverging());
        buf.set_stringn(x, area.y, &shown, w as usize, style);
        x += w + 1;
    }
}

/// What this run changed against the one it is compared with, in words.
fn interventions(s: &ModelSession) -> Vec<String> {
    let (now, base) = (&s.options, s.base_options());
    let mut out = Vec::new();
    if !now.ablate.is_empty() {
        let heads: Vec<String> = now.ablate.iter().map(|&(l, h)| head_name(l, h)).collect();
        out.push(format!("ablated: {}", heads.join(", ")));
    }
    if now.mask != base.mask {
        let mask = now
            .mask
            .as_ref()
            .map_or("the model's own".to_string(), |m| m.to_string());
        out.push(format!("mask {mask}"));
    }
    if let Some(b) = now.rope_base {
        out.push(format!("RoPE base {b}"));
    }
    if now.no_pe {
        out.push("no position information".into());
    }
    out
}
