//! The decode view on a real model: `generate` after the app's text, step by step, as
//! [`Decoding`] computed it once when the view opened (greedy, [`APP_NEW_TOKENS`] new
//! tokens at most, every layer's attention rows kept, so `<` `>` change the layer
//! without decoding again).
//!
//! - the text so far, the token fed and the token chosen, the top candidates with the
//!   model's probabilities;
//! - the model's KV cache: bytes per token per layer, per token, now, and what
//!   multi-head attention (one K/V head per query head) would need;
//! - the step's cost in multiply-adds with the cache against recomputing the prefix,
//!   and one bar per step;
//! - the chosen layer's attention of the newest token over the cache, one row per head.
//!
//! The cursor row is the step, its column a cached position; the head is the app's.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Widget;

use ndarray::Array2;

use crate::engine::memory::{decimal_bytes, group_digits};
use crate::engine::pipeline::Matrix;
use crate::model::decode_steps::Decoding;
use crate::model::session::ModelSession;
use crate::tui::context::{Context, Source, StatusKind};
use crate::tui::view_kind::ViewKind;
use crate::tui::views::panel::{MAX_CELL, MatrixPanel};
use crate::widgets::lines::LineWriter;
use crate::widgets::text::{escape_controls, fit, width};
use crate::widgets::{HBars, ValueScale};

/// What the decode view keeps for a real model: the decoding of one session.
#[derive(Debug)]
pub struct RealDecodeLab {
    /// Which session it was computed for (its address, ids and interventions).
    key: String,
    pub decoding: Result<Decoding, String>,
}

/// What the decode view keeps while a worker decodes (the event loop's, or
/// `lens_worker::run_pending` for headless drivers): which session it waits for, and
/// whether Esc stopped the wait.
#[derive(Debug)]
struct Pending {
    key: String,
    cancelled: bool,
}

/// Which model session a decoding is for: its address, token ids and interventions.
pub fn session_key(s: &ModelSession) -> String {
    format!("{:p} {:?} {:?}", s, s.ids, s.options)
}

pub fn lab(state: &Context) -> Option<&RealDecodeLab> {
    state.views.get::<RealDecodeLab>(ViewKind::Decode)
}

fn pending(state: &Context) -> Option<&Pending> {
    state.views.get::<Pending>(ViewKind::Decode)
}

/// Ask for the decoding after the session's text, unless the view has it for this model
/// session already (a layer change keeps the decoding: it holds every layer's rows) or
/// waits for it. A decoding Esc stopped is asked for again.
pub fn ensure(state: &mut Context) {
    let Source::Real { session, .. } = &state.source else {
        return;
    };
    let key = session_key(session);
    if lab(state).is_some_and(|l| l.key == key)
        || pending(state).is_some_and(|p| p.key == key && !p.cancelled)
    {
        return;
    }
    state.views.set(
        ViewKind::Decode,
        Pending {
            key,
            cancelled: false,
        },
    );
}

/// The session whose decoding the view waits for, with its key.
pub fn wanted(state: &Context) -> Option<(String, std::sync::Arc<ModelSession>)> {
    let Source::Real { session, .. } = &state.source else {
        return None;
    };
    let p = pending(state)?;
    let key = session_key(session);
    (!p.cancelled && p.key == key).then(|| (key, session.clone()))
}

/// Stop waiting for the decoding (Esc); true if the view was waiting.
pub fn cancel(state: &mut Context) -> bool {
    match state.views.get_mut::<Pending>(ViewKind::Decode) {
        Some(p) if !p.cancelled => {
            p.cancelled = true;
            true
        }
        _ => false,
    }
}

/// Take a worker's decoding if the view still waits for it.
pub fn receive(state: &mut Context, key: String, decoding: Result<Decoding, String>) {
    if wanted(state).is_none_or(|(k, _)| k != key) {
        return;
    }
    if let Ok(d) = &decoding
        && state.options.timings
    {
        let ms: f64 = d.steps.iter().map(|s| s.ms).sum();
        let text = format!(
            "decoded {} token{} after the text in {:.0} ms",
            d.steps.len(),
            if d.steps.len() == 1 { "" } else { "s" },
            ms
        );
        state.set_status(StatusKind::Info, text);
    }
    state
        .views
        .set(ViewKind::Decode, RealDecodeLab { key, decoding });
}

/// Rows: the steps; columns: the keys of the longest step.
pub fn grid(state: &Context) -> (usize, usize) {
    match lab(state).map(|l| &l.decoding) {
        Some(Ok(d)) => (d.steps.len(), d.steps.last().map_or(0, |s| s.pos)),
        _ => (0, 0),
    }
}

pub fn subtitle(state: &Context) -> String {
    let Some(session) = state.source.session() else {
        return String::new();
    };
    let name = &session.model.name;
    if !session.config().causal {
        return format!(
            "{name} is an encoder: it does not generate, so there is no decoding to show"
        );
    }
    format!(
        "generate on {name}, step by step: the KV cache growing · cost with and without it · the next tokens"
    )
}

/// A token's text as it can be shown (control characters escaped).
fn show(s: &str) -> String {
    escape_controls(s).into_owned()
}

/// A count in thousands, millions, billions: 163.0M.
fn short(x: u64) -> String {
    let x = x as f64;
    for (unit, div) in [("G", 1e9), ("M", 1e6), ("k", 1e3)] {
        if x >= div {
            return format!("{:.1}{unit}", x / div);
        }
    }
    format!("{x:.0}")
}

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}x", a as f64 / b as f64)
    }
}

pub fn render(state: &Context, area: Rect, buf: &mut Buffer) {
    match lab(state).map(|l| &l.decoding) {
        Some(Ok(d)) if !d.steps.is_empty() => render_decoding(state, d, area, buf),
        Some(Ok(_)) => LineWriter::new(area, buf).text("no token was decoded", state.theme.warn),
        Some(Err(e)) => LineWriter::new(area, buf).text(e, state.theme.warn),
        None if pending(state).is_some_and(|p| p.cancelled) => LineWriter::new(area, buf).text(
            "decoding stopped (Esc): open the view again to decode",
            state.theme.warn,
        ),
        None => LineWriter::new(area, buf).text("decoding... (Esc stops)", state.theme.dim),
    }
}

fn render_decoding(state: &Context, d: &Decoding, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let g = &state.glyphs;
    let t = state.cursor.0.min(d.steps.len() - 1);
    let step = &d.steps[t];
    let n = d.steps.len();
    let mut w = LineWriter::new(area, buf);
    let fed = if t == 0 {
        format!(
            "the prefill fed the {} prompt token{} at once",
            step.fed.len(),
            if step.fed.len() == 1 { "" } else { "s" }
        )
    } else {
        format!(
            "fed '{}' at position {}",
            show(&d.steps[t - 1].text),
            step.pos - 1
        )
    };
    let prob = step
        .candidates
        .iter()
        .find(|c| c.top.id == step.token)
        .map(|c| format!(", p {:.3}", c.top.prob))
        .unwrap_or_default();
    w.line(vec![
        Span::styled(format!("step {}/{n}", t + 1), th.value),
        Span::styled(format!("  {fed} {} ", g.right), th.base),
        Span::styled(format!("'{}'", show(&step.text)), th.field_value),
        Span::styled(
            format!(
                " (greedy: the most likely{prob}{}){}",
                if step.stop { "; end of text" } else { "" },
                if state.options.timings {
                    format!("  {:.1} ms", step.ms)
                } else {
                    String::new()
                }
            ),
            th.dim,
        ),
    ]);
    text_line(state, d, t, &mut w);
    if n < d.max_new && d.steps.last().is_some_and(|s| s.stop) {
        w.text(
            &format!("the model ended the text after {n} of {} tokens", d.max_new),
            th.dim,
        );
    }
    cache_lines(state, d, t, &mut w);
    // The candidates and the cost side by side (the cost's bars grow a row per step),
    // then the attention rows of every head.
    let rows = w.rows_left();
    let heads = d.geometry.heads as u16;
    let want = (1 + step.candidates.len() as u16).max(4 + t as u16 + 1);
    let middle_h = want.min(rows.saturating_sub(heads + 4).max(6)).min(rows);
    let middle = w.take(middle_h);
    let bottom = w.take(w.rows_left());
    let [left, right] = Layout::horizontal([Constraint::Percentage(40), Constraint::Fill(1)])
        .spacing(2)
        .areas(middle);
    render_next(state, d, t, left, buf);
    render_cost(state, d, t, right, buf);
    render_attention(state, d, t, bottom, buf);
}

/// The text so far on one line: the prompt dim, the decoded tokens bright, the one this
/// step chose marked; the start is cut when it does not fit.
fn text_line(state: &Context, d: &Decoding, t: usize, w: &mut LineWriter) {
    let th = &state.theme;
    let mut parts: Vec<(String, Style)> = d.prompt_text.iter().map(|p| (show(p), th.dim)).collect();
    for (k, s) in d.steps[..=t].iter().enumerate() {
        let style = if k == t {
            th.field_value.add_modifier(th.highlight)
        } else {
            th.value
        };
        parts.push((show(&s.text), style));
    }
    let room = w.area.width as usize;
    let mut used = 0;
    let mut first = parts.len();
    while first > 0 && used + width(&parts[first - 1].0) + 1 < room {
        first -= 1;
        used += width(&parts[first].0);
    }
    let mut spans = Vec::new();
    if first > 0 {
        spans.push(Span::styled(state.glyphs.ellipsis, th.dim));
    }
    spans.extend(
        parts[first..]
            .iter()
            .map(|(s, st)| Span::styled(s.clone(), *st)),
    );
    w.line(spans);
}

fn render_next(state: &Context, d: &Decoding, t: usize, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let step = &d.steps[t];
    let mut w = LineWriter::new(area, buf);
    w.text(
        &format!(
            "next token at step {}: top {}",
            t + 1,
            step.candidates.len()
        ),
        th.panel_title,
    );
    let items: Vec<(String, f64, Style)> = step
        .candidates
        .iter()
        .map(|c| {
            let chosen = c.top.id == step.token;
            let mark = if chosen { state.glyphs.marker } else { " " };
            (
                format!("{mark}'{}'", fit(&show(&c.text), 12, state.glyphs.ellipsis)),
                c.top.prob,
                if chosen { th.good } else { th.base },
            )
        })
        .collect();
    let bars = w.take(items.len() as u16);
    (&HBars {
        items: &items,
        max: Some(1.0),
        glyphs: &state.glyphs,
        label: th.label,
        value_w: 6,
    })
        .render(bars, w.buf);
}

/// The model's KV cache after this step: its bytes, how they add up, and what multi-head
/// attention would need.
fn cache_lines(state: &Context, d: &Decoding, t: usize, w: &mut LineWriter) {
    let th = &state.theme;
    let step = &d.steps[t];
    let geo = &d.geometry;
    let tokens = step.pos;
    w.line(vec![
        Span::styled(
            format!(
                "KV cache ({}): {} token{} x {} B = {}",
                geo.dtype,
                tokens,
                if tokens == 1 { "" } else { "s" },
                group_digits(geo.bytes_per_token() as u64),
                decimal_bytes(step.cache_bytes as u64)
            ),
            th.panel_title,
        ),
        Span::styled(
            format!(
                "  per token: {} layers x 2 (K, V) x {} KV heads x {} d_head x {} B = {} B",
                geo.layers,
                geo.kv_heads,
                geo.d_head,
                geo.elem_bytes,
                group_digits(geo.bytes_per_token() as u64),
            ),
            th.base,
        ),
    ]);
    let mha = geo.mha_bytes_per_token() * tokens;
    let sharing = if geo.kv_heads == geo.heads {
        format!(
            "{} KV heads, one per query head (MHA); {} B per token per layer",
            geo.kv_heads,
            group_digits(geo.layer_bytes_per_token() as u64)
        )
    } else {
        format!(
            "{} query heads share each K/V head (GQA); MHA ({} KV heads) would need {} ({}); {} B per token per layer",
            geo.heads / geo.kv_heads.max(1),
            geo.heads,
            decimal_bytes(mha as u64),
            ratio(mha as u64, step.cache_bytes as u64),
            group_digits(geo.layer_bytes_per_token() as u64)
        )
    };
    w.text(&sharing, th.dim);
}

fn render_cost(state: &Context, d: &Decoding, t: usize, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let step = &d.steps[t];
    let c = &step.cost;
    let mut w = LineWriter::new(area, buf);
    w.text(
        &format!("cost of step {} in multiply-adds", t + 1),
        th.panel_title,
    );
    let keys = step.pos;
    let what = if t == 0 {
        format!("the prefill, {} tokens", step.fed.len())
    } else {
        format!("1 token over {keys} keys")
    };
    let again = format!(
        "all {keys} positions again; {}",
        ratio(c.recompute.total(), c.cached.total())
    );
    // Narrow panels: the figures in short form, one line each.
    let (cached, recompute) = if area.width >= 64 {
        (
            format!(
                "cached:   {:>15} ({what}; attention {})",
                group_digits(c.cached.total()),
                short(c.cached.attention)
            ),
            format!(
                "no cache: {:>15} ({again})",
                group_digits(c.recompute.total())
            ),
        )
    } else {
        (
            format!("cached:   {:>7} ({what})", short(c.cached.total())),
            format!(
                "no cache: {:>7} ({}, all {keys} again)",
                short(c.recompute.total()),
                ratio(c.recompute.total(), c.cached.total())
            ),
        )
    };
    w.line(vec![Span::styled(cached, th.good)]);
    w.line(vec![Span::styled(recompute, th.warn)]);
    let (so_c, so_r) = d.cost_so_far(t);
    w.line(vec![Span::styled(
        format!(
            "so far {} / {} ({}); matrix products only",
            short(so_c),
            short(so_r),
            ratio(so_r, so_c)
        ),
        th.dim,
    )]);
    // One bar per step: the cached part solid, the rest of the recomputation shaded.
    let rows = w.rows_left() as usize;
    let first = (t + 1).saturating_sub(rows);
    let max = d.steps[..=t]
        .iter()
        .map(|s| s.cost.recompute.total())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let g = &state.glyphs;
    let shade = if g.ascii { ":" } else { "░" };
    for (r, st) in d.steps.iter().enumerate().take(t + 1).skip(first) {
        let head = format!("{:>3} {:<6} ", r + 1, fit(&show(&st.text), 6, g.ellipsis));
        let tail = format!(
            " {} / {}",
            short(st.cost.cached.total()),
            short(st.cost.recompute.total())
        );
        let bar_w = (area.width as usize).saturating_sub(width(&head) + width(&tail));
        let solid = ((st.cost.cached.total() as f64 / max) * bar_w as f64).round() as usize;
        let solid = solid.clamp(1, bar_w.max(1));
        let total = ((st.cost.recompute.total() as f64 / max) * bar_w as f64).round() as usize;
        let total = total.max(solid);
        w.line(vec![
            Span::styled(head, if r == t { th.label_active } else { th.label }),
            Span::styled(g.eighths[7].repeat(solid), th.good),
            Span::styled(shade.repeat(total - solid), th.warn),
            Span::styled(" ".repeat(bar_w.saturating_sub(total)), th.base),
            Span::styled(tail, th.dim),
        ]);
    }
}

/// The layer on screen (the header's `layer L/N`).
fn layer(state: &Context) -> usize {
    match &state.source {
        Source::Real { layer, .. } => *layer,
        _ => 0,
    }
}

fn render_attention(state: &Context, d: &Decoding, t: usize, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    let step = &d.steps[t];
    let l = layer(state);
    let geo = &d.geometry;
    let keys = step.pos;
    let data = Array2::from_shape_fn((geo.heads, keys), |(h, j)| {
        step.row(l, h).get(j).copied().unwrap_or(0.0) as f64
    });
    let per = geo.heads / geo.kv_heads.max(1);
    let rows: Vec<String> = (0..geo.heads)
        .map(|h| format!("h{} kv{}", h + 1, h / per.max(1) + 1))
        .collect();
    let cols: Vec<String> = d.key_texts(t).iter().map(|s| show(s)).collect();
    let query = if t == 0 {
        d.prompt_text.last().cloned().unwrap_or_default()
    } else {
        d.steps[t - 1].text.clone()
    };
    let m = Matrix::new(
        format!(
            "layer {}: attention of '{}' (the newest token) over the cache",
            l + 1,
            show(&query)
        ),
        data,
        rows,
        cols,
    );
    let h = state.head.min(geo.heads.saturating_sub(1));
    let j = state.cursor.1.min(keys.saturating_sub(1));
    let panel_h = (geo.heads as u16 + 3).min(area.height - 1);
    let [panel, detail, _] = Layout::vertical([
        Constraint::Length(panel_h),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(area);
    MatrixPanel {
        matrix: &m,
        title: m.name.clone(),
        title_style: state.theme.panel_title,
        cursor: Some((h, j)),
        highlight: &[],
        masked: None,
        scale: ValueScale::Sequential { lo: 0.0, hi: 1.0 },
        legend: true,
        max_cell: MAX_CELL,
    }
    .render(state, panel, buf);
    let text = format!(
        "head {} (KV head {}) of layer {}: '{}' attends to '{}' (position {j}) with {:.4}",
        h + 1,
        h / per.max(1) + 1,
        l + 1,
        show(&query),
        m.col_labels.get(j).cloned().unwrap_or_default(),
        m.data.get((h, j)).copied().unwrap_or(0.0)
    );
    LineWriter::new(detail, buf).text(&text, state.theme.dim);
}
