//! The position view on a real model: the model's own position encoding, as
//! [`PositionInfo`] reads it off the session.
//!
//! - RoPE (Llama, SmolLM2): the base in force (the model's own or `--rope-base`), each
//!   pair's frequency and wavelength, the angle of the selected token's position, and
//!   the chosen layer's q of that token before and after the turn (from the block's
//!   pipeline); beside it cos(angle) for every position of the text and every pair;
//! - learned absolute positions (BERT, MiniLM, GPT-2): the table's rows for the text's
//!   positions, read from the loaded weights, and how alike the rows are.
//!
//! The cursor row is the token (its position); the head is the app's.

use std::sync::Arc;

use ndarray::Array2;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Span;

use super::angle::angle_glyph;
use crate::engine::pipeline::{Matrix, StageId};
use crate::model::config::RopeStyle;
use crate::model::positions::{LearnedRows, PositionInfo, RopeInfo};
use crate::model::session::ModelSession;
use crate::tui::action::PositionData;
use crate::tui::context::{Context, Source};
use crate::tui::view_kind::ViewKind;
use crate::tui::views::panel::{MAX_CELL, MatrixPanel};
use crate::widgets::ValueScale;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::fit_number;
use crate::widgets::text::{escape_controls, width};

/// What the position view keeps for a real model: the encoding, and the panels' matrices
/// built once (a 1,024-token text's n x n similarity is too big to rebuild every frame),
/// by a worker thread (`tui::lens_worker`); None until its report comes.
#[derive(Debug)]
pub struct RealPositionLab {
    key: String,
    pub data: Option<Arc<PositionData>>,
    /// Esc stopped the worker: not asked again until the view is opened again.
    pub stopped: bool,
}

fn position_labels(s: &ModelSession, n: usize) -> Vec<String> {
    s.pieces
        .iter()
        .take(n)
        .enumerate()
        .map(|(p, t)| format!("{} {p}", show(t)))
        .collect()
}

/// The panels' matrices for `info`.
fn matrices(s: &ModelSession, info: &PositionInfo) -> (Option<Matrix>, Option<Matrix>) {
    match info {
        PositionInfo::Rope(r) => {
            let (n, pairs) = (s.n(), r.pairs.len());
            let data = Array2::from_shape_fn((n, pairs), |(p, k)| r.angle(k, p).cos());
            let cols = (0..pairs).map(|k| k.to_string()).collect();
            let m = Matrix::new(
                "cos(angle) [position x pair]",
                data,
                position_labels(s, n),
                cols,
            );
            (Some(m), None)
        }
        PositionInfo::Learned(l) => {
            let n = l.n();
            let rows = Array2::from_shape_fn((n, l.d_model), |(p, c)| l.row(p)[c] as f64);
            let table = Matrix::new(
                format!("{} rows 0..{n} [position x dim]", l.tensor),
                rows,
                position_labels(s, n),
                (0..l.d_model).map(|c| c.to_string()).collect(),
            );
            let sim = Array2::from_shape_fn((n, n), |(a, b)| l.similarity[a * n + b]);
            let m = Matrix::new(
                "cosine similarity of the rows [position x position]",
                sim,
                position_labels(s, n),
                (0..n).map(|p| p.to_string()).collect(),
            );
            (Some(table), Some(m))
        }
        _ => (None, None),
    }
}

/// How the view names a model session.
pub fn session_key(s: &ModelSession) -> String {
    format!("{:p} {:?} {:?}", s, s.ids, s.options)
}

pub fn lab(state: &Context) -> Option<&RealPositionLab> {
    state.views.get::<RealPositionLab>(ViewKind::Position)
}

fn data(state: &Context) -> Option<&PositionData> {
    lab(state)?.data.as_deref()
}

/// The session's position encoding and the panels' matrices (for the worker).
pub fn compute(s: &ModelSession) -> PositionData {
    let info = PositionInfo::of(s);
    let (table, similarity) = matrices(s, &info);
    PositionData {
        info,
        table,
        similarity,
    }
}

/// Wait for the session's position encoding, unless it is read for this model session
/// already.
pub fn ensure(state: &mut Context) {
    let Some(session) = state.source.session() else {
        return;
    };
    let key = session_key(session);
    if let Some(l) = state.views.get_mut::<RealPositionLab>(ViewKind::Position)
        && l.key == key
    {
        l.stopped = false;
        return;
    }
    state.views.set(
        ViewKind::Position,
        RealPositionLab {
            key,
            data: None,
            stopped: false,
        },
    );
}

/// Esc: stop waiting for the worker, if the view waits.
pub fn cancel(state: &mut Context) {
    if wanted(state).is_some()
        && let Some(l) = state.views.get_mut::<RealPositionLab>(ViewKind::Position)
    {
        l.stopped = true;
    }
}

/// The session the open view waits for the position encoding of, by its key.
pub fn wanted(state: &Context) -> Option<String> {
    let l = lab(state)?;
    let s = state.source.session()?;
    (state.view == ViewKind::Position && l.data.is_none() && !l.stopped && l.key == session_key(s))
        .then(|| l.key.clone())
}

/// A worker's report: kept if it is of the session the view waits for.
pub fn report(state: &mut Context, key: String, data: Arc<PositionData>) {
    if let Some(l) = state.views.get_mut::<RealPositionLab>(ViewKind::Position)
        && l.key == key
    {
        l.data = Some(data);
    }
}

/// The header line under the tabs: which encoding the model uses.
pub fn subtitle(state: &Context) -> String {
    let name = state
        .source
        .session()
        .map(|s| s.model.name.clone())
        .unwrap_or_default();
    match data(state).map(|d| &d.info) {
        Some(PositionInfo::Rope(r)) => format!(
            "{name} uses RoPE, base {}{}: q and k turned pair by pair",
            num(r.base),
            if r.changed() { " (--rope-base)" } else { "" }
        ),
        Some(PositionInfo::RopeDropped { .. }) => {
            format!("{name} uses RoPE; --no-pe drops it here")
        }
        Some(PositionInfo::Learned(l)) => format!(
            "{name} uses learned absolute positions: a trained table [{} x {}] added to the embeddings",
            l.context, l.d_model
        ),
        Some(PositionInfo::Missing) | None => name,
    }
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        crate::engine::memory::group_digits(x as u64)
    } else {
        format!("{x}")
    }
}

/// A frequency in 8 columns: four decimals, or three significant digits below 0.01.
fn small(x: f64) -> String {
    if x >= 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.2e}")
    }
}

fn show(s: &str) -> String {
    escape_controls(s).into_owned()
}

fn layer(state: &Context) -> usize {
    match &state.source {
        Source::Real { layer, .. } => *layer,
        _ => 0,
    }
}

pub fn render(state: &Context, area: Rect, buf: &mut Buffer) {
    let Some(session) = state.source.session() else {
        return;
    };
    let th = &state.theme;
    let Some(lab) = data(state) else {
        let mut w = LineWriter::new(area, buf);
        if self::lab(state).is_some_and(|l| l.stopped) {
            w.text(
                "stopped (Esc): open the view again to read the model's position encoding",
                th.warn,
            );
        } else {
            w.text("reading the model's position encoding…", th.dim);
        }
        return;
    };
    match &lab.info {
        PositionInfo::Rope(r) => render_rope(state, session, lab, r, area, buf),
        PositionInfo::Learned(l) => render_learned(state, session, lab, l, area, buf),
        PositionInfo::RopeDropped { model_base } => {
            let mut w = LineWriter::new(area, buf);
            w.text(
                &format!(
                    "{} uses RoPE with base {}, but --no-pe drops it: q and k are not turned, so attention sees no order but the causal mask's",
                    session.model.name,
                    num(*model_base)
                ),
                th.warn,
            );
        }
        PositionInfo::Missing => {
            LineWriter::new(area, buf).text(
                "the model has learned positions but its weights hold no position table",
                th.warn,
            );
        }
    }
}

fn render_rope(
    state: &Context,
    s: &ModelSession,
    lab: &PositionData,
    r: &RopeInfo,
    area: Rect,
    buf: &mut Buffer,
) {
    let th = &state.theme;
    let n = s.n();
    let i = state.cursor.0.min(n.saturating_sub(1));
    let mut w = LineWriter::new(area, buf);
    let base = if r.changed() {
        format!(
            "base {} (--rope-base; the model's own is {})",
            num(r.base),
            num(r.model_base)
        )
    } else {
        format!("base {} (the model's own)", num(r.base))
    };
    w.line(vec![
        Span::styled(format!("{}: RoPE, ", s.model.name), th.panel_title),
        Span::styled(base, th.field_value),
    ]);
    let layout = match r.style {
        RopeStyle::Interleaved => "pairs (2i, 2i+1), the GGUF layout".to_string(),
        RopeStyle::Half => format!(
            "pairs (i, i+{}), transformers' rotate-half layout",
            r.d_head / 2
        ),
    };
    w.text(
        &format!(
            "pair i of q and k turns by position x base^(-2i/{}) rad; d_head {}, {} pairs, {layout}; no position table is added",
            r.d_head,
            r.d_head,
            r.pairs.len()
        ),
        th.base,
    );
    let slow = r.pairs.last().map_or(0.0, |p| p.wavelength);
    w.text(
        &format!(
            "freq in rad per position; period = positions per full turn: the fastest pair turns every {}, the slowest every {} (the model's context is {})",
            fit_number(std::f64::consts::TAU, 6, true),
            fit_number(slow, 8, true),
            s.config().context
        ),
        th.dim,
    );
    let body = w.take(w.rows_left());
    // cos(angle) of every position of the text and every pair: one column per pair is
    // enough for its colour, the rest of the width goes to the pairs' numbers.
    let pairs = r.pairs.len();
    let label_w = s.pieces.iter().map(|t| width(&show(t))).max().unwrap_or(0) + 4;
    let left_w = ((label_w + pairs + 4).max(40) as u16).min(body.width * 45 / 100);
    let [left, right] = Layout::horizontal([Constraint::Length(left_w), Constraint::Fill(1)])
        .spacing(2)
        .areas(body);
    let Some(m) = &lab.table else {
        return;
    };
    MatrixPanel {
        matrix: m,
        title: m.name.clone(),
        title_style: th.panel_title,
        cursor: Some((i, 0)),
        highlight: &[],
        masked: None,
        scale: ValueScale::Diverging { abs: 1.0 },
        legend: true,
        max_cell: MAX_CELL,
    }
    .render(state, left, buf);
    render_pairs(state, s, r, i, right, buf);
}

/// Pair by pair for the selected token: frequency, wavelength, angle, and the chosen
/// layer's q before and after the turn when the block's stages are at hand.
fn render_pairs(
    state: &Context,
    s: &ModelSession,
    r: &RopeInfo,
    i: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let th = &state.theme;
    let g = &state.glyphs;
    let h = state.head.min(s.config().heads.saturating_sub(1));
    let l = layer(state);
    let p = &state.pipeline;
    // The block pipeline shows head dimensions in RoPE's pairs, (2i, 2i+1).
    let before = p
        .stage(StageId::SplitHeads)
        .and_then(|st| st.matrices.get(h));
    let after = p.stage(StageId::Rope).and_then(|st| st.matrices.get(h));
    // The q columns need the room of a wide screen.
    let q = before
        .zip(after)
        .filter(|(b, _)| b.data.nrows() > i && area.width >= 70);
    let token = s.pieces.get(i).map(|t| show(t)).unwrap_or_default();
    let mut w = LineWriter::new(area, buf);
    w.text(
        &match q {
            Some(_) => format!(
                "'{token}' at position {i}: q of head {}, layer {}, pair by pair",
                h + 1,
                l + 1
            ),
            None => format!("'{token}' at position {i}, pair by pair"),
        },
        th.panel_title,
    );
    w.line(vec![Span::styled(
        format!(
            "{:<9} {:>8} {:>9} {:>8}{}",
            "dims",
            "freq",
            "period",
            "angle",
            if q.is_some() {
                "   q before -> after"
            } else {
                ""
            }
        ),
        th.label,
    )]);
    let room = w.rows_left().saturating_sub(1) as usize;
    let shown = r.pairs.len().min(room);
    let f = |v: f64| fit_number(v, 5, !g.ascii);
    for (k, pair) in r.pairs.iter().enumerate().take(shown) {
        let theta = r.angle(k, i);
        let mut spans = vec![
            Span::styled(
                format!("{:<9}", format!("({},{})", pair.dims.0, pair.dims.1)),
                th.label,
            ),
            Span::styled(format!(" {:>8}", small(pair.freq)), th.formula),
            Span::styled(
                format!(" {:>9}", fit_number(pair.wavelength, 9, !g.ascii)),
                th.dim,
            ),
            Span::styled(format!(" {:>7} ", fit_number(theta, 7, !g.ascii)), th.base),
            Span::styled(angle_glyph(state, theta), th.key),
        ];
        if let Some((b, a)) = q {
            let (c0, c1) = (2 * k, 2 * k + 1);
            if c1 < b.data.ncols() {
                spans.push(Span::styled(
                    format!(
                        "  {:>5},{:>5} {} {:>5},{:>5}",
                        f(b.data[[i, c0]]),
                        f(b.data[[i, c1]]),
                        g.right,
                        f(a.data[[i, c0]]),
                        f(a.data[[i, c1]])
                    ),
                    th.base,
                ));
            }
        }
        w.line(spans);
    }
    if r.pairs.len() > shown {
        w.text(
            &format!("{} more pairs, turning ever slower", r.pairs.len() - shown),
            th.dim,
        );
    }
}

fn render_learned(
    state: &Context,
    s: &ModelSession,
    lab: &PositionData,
    l: &LearnedRows,
    area: Rect,
    buf: &mut Buffer,
) {
    let th = &state.theme;
    let n = l.n();
    let i = state.cursor.0.min(n.saturating_sub(1));
    let mut w = LineWriter::new(area, buf);
    w.line(vec![
        Span::styled(
            format!("{}: learned absolute positions", s.model.name),
            th.panel_title,
        ),
        Span::styled(
            format!("  {} [{} x {}]", l.tensor, l.context, l.d_model),
            th.field_value,
        ),
    ]);
    w.text(
        &if l.dropped {
            "row p of the table would be added to the embedding of the token at position p; --no-pe drops it here (the rows below are not used), so only the tokens reach attention".to_string()
        } else {
            format!(
                "row p of the table is added to the embedding of the token at position p, before the first block: a trained table, not a formula; texts end at {} tokens",
                l.context
            )
        },
        if l.dropped { th.warn } else { th.base },
    );
    // The most similar other position of the selected one.
    let nearest = (0..n)
        .filter(|&j| j != i)
        .max_by(|&a, &b| l.similarity[i * n + a].total_cmp(&l.similarity[i * n + b]));
    let token = s.pieces.get(i).map(|t| show(t)).unwrap_or_default();
    w.text(
        &match nearest {
            Some(j) => format!(
                "row {i} ('{token}'): norm {}; most like row {j} (cos {:.3})",
                fit_number(l.norms[i], 6, true),
                l.similarity[i * n + j]
            ),
            None => format!(
                "row {i} ('{token}'): norm {}",
                fit_number(l.norms[i], 6, true)
            ),
        },
        th.dim,
    );
    let body = w.take(w.rows_left());
    let [left, right] = Layout::horizontal([Constraint::Percentage(50), Constraint::Fill(1)])
        .spacing(2)
        .areas(body);
    let (Some(table), Some(m)) = (&lab.table, &lab.similarity) else {
        return;
    };
    MatrixPanel {
        matrix: table,
        title: table.name.clone(),
        title_style: th.panel_title,
        cursor: Some((i, 0)),
        highlight: &[],
        masked: None,
        scale: ValueScale::fit(table.data.iter().copied()),
        legend: true,
        max_cell: MAX_CELL,
    }
    .render(state, left, buf);
    MatrixPanel {
        matrix: m,
        title: m.name.clone(),
        title_style: th.panel_title,
        cursor: Some((i, state.cursor.1.min(n.saturating_sub(1)))),
        highlight: &[],
        masked: None,
        scale: ValueScale::Diverging { abs: 1.0 },
        legend: true,
        max_cell: MAX_CELL,
    }
    .render(state, right, buf);
}
