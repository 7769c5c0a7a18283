//! The position view: the sinusoidal table, RoPE's rotation of the selected token's
//! pairs, ALiBi's bias per head, and two live experiments whose every number comes
//! from extra pipelines built by the engine:
//! - shuffle the tokens with no position encoding: the outputs are shuffled the same
//!   way (and with sinusoidal PE they are not);
//! - shift every position by k under RoPE (by putting k tokens in front): the scores
//!   between the original tokens stay the same (and with sinusoidal PE they do not).
//!
//! On a real model (`attnviz --model`) it shows the model's own encoding instead: RoPE
//! with its base, or the learned position table's rows ([`real`]).

mod angle;
pub mod real;

use angle::angle_glyph;

use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;

use super::panel::{MAX_CELL, MatrixPanel};
use crate::engine::config::{MaskKind, PeKind, ROPE_BASE};
use crate::engine::limits;
use crate::engine::mask::Mask;
use crate::engine::pe;
use crate::engine::pipeline::{Matrix, ModelConfig, Pipeline, StageId};
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::tui::action::{Action, DerivedReport};
use crate::tui::component::Hit;
use crate::tui::component::View;
use crate::tui::context::{Context, StatusKind};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::{fit_number, significant};
use crate::widgets::{ValueScale, text};

pub struct PositionView;

/// Filler put in front of the sentence to shift its positions.
const FILLER: &str = "<pad>";
/// Below this a difference is rounding, not a change.
const SAME: f64 = 1e-9;
const DEFAULT_SHIFT: usize = 3;
const MAX_SHIFT: usize = 64;
const _: () = assert!(MAX_SHIFT < limits::MAX_MODEL_TOKENS);

const CMD_SHUFFLE: u8 = 0;
const CMD_SHIFT_UP: u8 = 1;
const CMD_SHIFT_DOWN: u8 = 2;
const CMD_PAGE: u8 = 3;

/// Below this width the view shows its panels on two pages (`o` flips).
const TWO_PAGES_BELOW: u16 = 110;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Char('x')],
        action: Action::ViewCommand(CMD_SHUFFLE),
        desc: "shuffle the tokens another way",
        hint: Some("shuffle"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Model,
    },
    Binding {
        keys: &[KeyPat::Char('t')],
        action: Action::ViewCommand(CMD_SHIFT_UP),
        desc: "shift the positions one further",
        hint: Some("shift"),
        hint_keys: Some("t/T"),
        group: Group::ThisView,
        when: When::Model,
    },
    Binding {
        keys: &[KeyPat::Char('o')],
        action: Action::ViewCommand(CMD_PAGE),
        desc: "other page (tables / experiments) on narrow screens",
        hint: Some("page"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Model,
    },
    Binding {
        keys: &[KeyPat::Char('T')],
        action: Action::ViewCommand(CMD_SHIFT_DOWN),
        desc: "shift the positions one less",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Model,
    },
];

/// One experiment: the same model on the original and on changed tokens, and the
/// largest difference between what should agree.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub base: Pipeline,
    pub changed: Pipeline,
    pub max_diff: f64,
}

/// What the position view derives (through the engine) from the lesson model.
#[derive(Debug, Clone)]
pub struct PositionLab {
    /// The lesson it was built for (rebuilt when that changes).
    pub config: ModelConfig,
    pub sinusoidal: Matrix,
    /// Row k of the shuffled sentence holds token perm[k].
    pub perm: Vec<usize>,
    pub shuffle_seed: u64,
    pub shift: usize,
    /// Tokens of the sentence in the shifted run: all of them, or as many as fit beside
    /// the filler within the lesson limit (scores of a pair do not depend on the other
    /// tokens, so the first ones compare the same).
    pub shift_compared: usize,
    /// No PE, tokens shuffled: outputs compared row by row through the permutation.
    pub shuffle_nope: Comparison,
    /// The same with sinusoidal PE (it should differ).
    pub shuffle_sin: Comparison,
    /// RoPE, positions shifted: scores among the original tokens compared.
    pub shift_rope: Comparison,
    /// The same with sinusoidal PE (it should differ).
    pub shift_sin: Comparison,
    pub alibi_slopes: Vec<f64>,
    pub alibi: AttnSpec,
    /// On narrow screens: 0 shows the tables, 1 the experiments.
    pub page: usize,
}

fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..=i);
        p.swap(i, j);
    }
    if n > 1 && p.iter().enumerate().all(|(i, &x)| i == x) {
        p.rotate_left(1);
    }
    p
}

fn output(p: &Pipeline) -> Option<&Array2<f64>> {
    p.stage(StageId::OutputProjection)
        .and_then(|s| s.matrices.first())
        .map(|m| &m.data)
}

fn scores(p: &Pipeline, head: usize) -> Option<&Array2<f64>> {
    p.stage(StageId::Scores)
        .and_then(|s| s.matrices.get(head))
        .map(|m| &m.data)
}

impl PositionLab {
    fn build(config: &ModelConfig, shuffle_seed: u64, shift: usize) -> crate::Result<PositionLab> {
        let n = config.tokens.len();
        let plain = ModelConfig {
            mask: MaskKind::None,
            ..config.clone()
        };
        let with_pe = |pe: PeKind| ModelConfig {
            pe,
            ..plain.clone()
        };
        let rope_base = match config.pe {
            PeKind::Rope { base } => base,
            _ => ROPE_BASE,
        };
        let perm = permutation(n, shuffle_seed);
        let shuffled: Vec<String> = perm.iter().map(|&i| config.tokens[i].clone()).collect();
        let compared = n.min(limits::MAX_MODEL_TOKENS.saturating_sub(shift)).max(1);
        let mut shifted = vec![FILLER.to_string(); shift];
        shifted.extend(config.tokens.iter().take(compared).cloned());

        let shuffle = |pe: PeKind| -> crate::Result<Comparison> {
            let base = Pipeline::build(&with_pe(pe))?;
            let changed = Pipeline::build(&ModelConfig {
                tokens: shuffled.clone(),
                ..with_pe(pe)
            })?;
            // Row k of the shuffled run holds token perm[k]: compare with that row.
            let (o, o2) = (output(&base), output(&changed));
            let max_diff = match (o, o2) {
                (Some(o), Some(o2)) => (0..n)
                    .flat_map(|k| {
                        let src = perm[k];
                        o2.row(k)
                            .iter()
                            .zip(o.row(src).iter())
                            .map(|(a, b)| (a - b).abs())
                            .collect::<Vec<_>>()
                    })
                    .fold(0.0, f64::max),
                _ => f64::NAN,
            };
            Ok(Comparison {
                base,
                changed,
                max_diff,
            })
        };
        let shift_cmp = |pe: PeKind| -> crate::Result<Comparison> {
            let base = Pipeline::build(&with_pe(pe))?;
            let changed = Pipeline::build(&ModelConfig {
                tokens: shifted.clone(),
                ..with_pe(pe)
            })?;
            let mut max_diff: f64 = 0.0;
            for h in 0..config.heads {
                if let (Some(s), Some(s2)) = (scores(&base, h), scores(&changed, h)) {
                    for i in 0..compared {
                        for j in 0..compared {
                            max_diff = max_diff.max((s[[i, j]] - s2[[i + shift, j + shift]]).abs());
                        }
                    }
                }
            }
            Ok(Comparison {
                base,
                changed,
                max_diff,
            })
        };
        let sin = pe::sinusoidal(n, config.d_model);
        let dims = (0..config.d_model).map(|c| c.to_string()).collect();
        let rows = config
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{t} {i}"))
            .collect();
        let shape = ProblemShape {
            batch: 1,
            heads: config.heads,
            kv_heads: config.kv_heads,
            n_q: n,
            n_k: n,
            d: config.d_head(),
            dv: config.d_head(),
        };
        let mask = Mask::resolve(&MaskKind::None, 1, config.heads, n, n)?;
        Ok(PositionLab {
            config: config.clone(),
            sinusoidal: Matrix::new("sinusoidal PE [position x dim]", sin, rows, dims),
            perm: perm.clone(),
            shuffle_seed,
            shift,
            shift_compared: compared,
            shuffle_nope: shuffle(PeKind::None)?,
            shuffle_sin: shuffle(PeKind::Sinusoidal)?,
            shift_rope: shift_cmp(PeKind::Rope { base: rope_base })?,
            shift_sin: shift_cmp(PeKind::Sinusoidal)?,
            alibi_slopes: pe::alibi_slopes(config.heads),
            alibi: AttnSpec::new(&shape, mask, true, None),
            page: 0,
        })
    }
}

/// (Re)build the lab if the lesson changed or an experiment setting did.
fn ensure_lab(state: &mut Context, seed: Option<u64>, shift: Option<usize>) {
    let Some(config) = state.model().cloned() else {
        return;
    };
    let old = state.views.get::<PositionLab>(ViewKind::Position);
    let seed = seed.or(old.map(|l| l.shuffle_seed)).unwrap_or(config.seed);
    let shift = shift.or(old.map(|l| l.shift)).unwrap_or(DEFAULT_SHIFT);
    let fresh =
        old.is_some_and(|l| l.config == config && l.shuffle_seed == seed && l.shift == shift);
    if fresh {
        return;
    }
    let page = old.map_or(0, |l| l.page);
    match PositionLab::build(&config, seed, shift) {
        Ok(lab) => state
            .views
            .set(ViewKind::Position, PositionLab { page, ..lab }),
        Err(e) => state.set_status(StatusKind::Error, format!("position experiments: {e}")),
    }
}

fn verdict(state: &Context, diff: f64, want_same: bool) -> (String, Style) {
    let same = diff < SAME;
    let (ok, bad) = if state.glyphs.ascii {
        ("ok", "no")
    } else {
        ("✓", "✗")
    };
    let mark = if same == want_same { ok } else { bad };
    let what = if same { "same" } else { "differ" };
    let style = if same == want_same {
        state.theme.good
    } else {
        state.theme.error
    };
    (format!("max|diff| {} {mark} {what}", sci(diff)), style)
}

fn sci(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() < 1e-3 {
        format!("{x:.1e}")
    } else {
        fit_number(x, 6, true)
    }
}

fn row_preview(m: Option<&Array2<f64>>, row: usize, k: usize) -> String {
    let Some(m) = m else {
        return String::new();
    };
    let mut parts: Vec<String> = m
        .row(row)
        .iter()
        .take(k)
        .map(|v| fit_number(*v, 6, true))
        .collect();
    if m.ncols() > k {
        parts.push("..".into());
    }
    format!("[{}]", parts.join(" "))
}

fn render_rope(state: &Context, lab: &PositionLab, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let g = &state.glyphs;
    let mut w = LineWriter::new(area, buf);
    let p = &lab.shift_rope.base;
    let (i, h) = (state.cursor.0, state.head);
    let base = p.rope_base.unwrap_or(ROPE_BASE);
    let token = p.query_labels.get(i).cloned().unwrap_or_default();
    w.text(
        &format!(
            "RoPE turns q of '{token}' (pos {i}, head {}), pair by pair",
            h + 1
        ),
        t.panel_title,
    );
    let before = p.stage(StageId::SplitHeads).and_then(|s| s.matrices.get(h));
    let after = p.stage(StageId::Rope).and_then(|s| s.matrices.get(h));
    let (Some(before), Some(after)) = (before, after) else {
        return;
    };
    let d = before.data.ncols();
    let pairs = d / 2;
    let room = area.height.saturating_sub(3) as usize;
    for pair in 0..pairs.min(room) {
        let theta = pe::rope_angle(p.mask.query_pos(i) as f64, pair, d, base);
        let (a, b) = (before.data[[i, 2 * pair]], before.data[[i, 2 * pair + 1]]);
        let (a2, b2) = (after.data[[i, 2 * pair]], after.data[[i, 2 * pair + 1]]);
        let f = |v: f64| fit_number(v, 5, !g.ascii);
        w.line(vec![
            Span::styled(format!("({},{}) ", 2 * pair, 2 * pair + 1), t.label),
            Span::styled(angle_glyph(state, theta), t.key),
            Span::styled(
                format!(" t={:<5} ", fit_number(theta, 5, !g.ascii)),
                t.formula,
            ),
            Span::styled(
                format!(
                    "{:>5},{:>5} {} {:>5},{:>5}",
                    f(a),
                    f(b),
                    g.right,
                    f(a2),
                    f(b2)
                ),
                t.base,
            ),
        ]);
    }
    if pairs > room {
        w.text(&format!("{} more pairs", pairs - room), t.dim);
    }
    w.text(
        &format!("t = pos * {base}^(-2i/d): first pairs turn fast, last slowly"),
        t.dim,
    );
}

fn render_alibi(state: &Context, lab: &PositionLab, area: Rect, buf: &mut Buffer) {
    let i = state.cursor.0;
    let n = lab.config.tokens.len();
    let heads = lab.alibi_slopes.len();
    let data = Array2::from_shape_fn((heads, n), |(h, j)| lab.alibi.alibi_bias(h, i, j));
    let rows = lab
        .alibi_slopes
        .iter()
        .enumerate()
        .map(|(h, m)| format!("h{} {}", h + 1, significant(*m, 2)))
        .collect();
    let token = lab.config.tokens.get(i).cloned().unwrap_or_default();
    let m = Matrix::new(
        format!("ALiBi bias -m|i-j| of query '{token}', per head (slope m)"),
        data,
        rows,
        lab.config.tokens.clone(),
    );
    MatrixPanel {
        matrix: &m,
        title: m.name.clone(),
        title_style: state.theme.panel_title,
        cursor: Some((state.head.min(heads.saturating_sub(1)), state.cursor.1)),
        highlight: &[],
        masked: None,
        scale: ValueScale::fit(m.data.iter().copied()),
        legend: true,
        max_cell: MAX_CELL,
    }
    .render(state, area, buf);
}

fn render_experiments(state: &Context, lab: &PositionLab, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let mut w = LineWriter::new(area, buf);
    let n = lab.config.tokens.len();
    let (i, j) = state.cursor;
    w.text("1. shuffle the tokens (no PE, no mask)", t.panel_title);
    let order: Vec<&str> = lab
        .perm
        .iter()
        .map(|&k| lab.config.tokens[k].as_str())
        .collect();
    w.text(&format!("   order: {}", order.join(" ")), t.base);
    if let Some(k) = lab.perm.iter().position(|&src| src == i) {
        let token = &lab.config.tokens[i];
        let o = output(&lab.shuffle_nope.base);
        let o2 = output(&lab.shuffle_nope.changed);
        w.text(
            &format!("   '{token}' at {i}: out {}", row_preview(o, i, 3)),
            t.dim,
        );
        w.text(
            &format!("   '{token}' at {k}: out {}", row_preview(o2, k, 3)),
            t.dim,
        );
    }
    let (s, st) = verdict(state, lab.shuffle_nope.max_diff, true);
    w.text(&format!("   no PE: {s}, outputs permute too"), st);
    let (s, st) = verdict(state, lab.shuffle_sin.max_diff, false);
    w.text(&format!("   sinusoidal: {s}"), st);
    w.line(vec![]);
    let first = if lab.shift_compared < n {
        format!(
            "; the first {} tokens, to stay within the limit",
            lab.shift_compared
        )
    } else {
        String::new()
    };
    w.text(
        &format!(
            "2. shift positions by {} ({} {FILLER} in front{first})",
            lab.shift, lab.shift
        ),
        t.panel_title,
    );
    if i < lab.shift_compared && j < lab.shift_compared {
        let head = state.head;
        let s0 = scores(&lab.shift_rope.base, head).map(|s| s[[i, j]]);
        let s1 = scores(&lab.shift_rope.changed, head).map(|s| s[[i + lab.shift, j + lab.shift]]);
        if let (Some(s0), Some(s1)) = (s0, s1) {
            let (a, b) = (&lab.config.tokens[i], &lab.config.tokens[j]);
            w.text(
                &format!(
                    "   q'{a}'.k'{b}': {} at ({i},{j}), {} at ({},{})",
                    fit_number(s0, 7, true),
                    fit_number(s1, 7, true),
                    i + lab.shift,
                    j + lab.shift
                ),
                t.dim,
            );
        }
    }
    let (s, st) = verdict(state, lab.shift_rope.max_diff, true);
    w.text(&format!("   RoPE: {s}, only i-j counts"), st);
    let (s, st) = verdict(state, lab.shift_sin.max_diff, false);
    w.text(&format!("   sinusoidal: {s}"), st);
}

/// Where the panels go. On narrow screens one page holds the tables, the other the
/// experiments (the areas of the hidden page are empty).
struct Areas {
    sinusoidal: Rect,
    alibi: Rect,
    rope: Rect,
    experiments: Rect,
}

fn areas(lab: &PositionLab, area: Rect) -> Areas {
    let narrow = area.width < TWO_PAGES_BELOW;
    if narrow && lab.page == 1 {
        return Areas {
            sinusoidal: Rect::default(),
            alibi: Rect::default(),
            rope: Rect::default(),
            experiments: area,
        };
    }
    let left_pct = if narrow { 42 } else { 48 };
    let [left, right] = Layout::horizontal([
        Constraint::Percentage(left_pct),
        Constraint::Percentage(100 - left_pct),
    ])
    .spacing(2)
    .areas(area);
    let n = lab.config.tokens.len() as u16;
    let heads = lab.alibi_slopes.len() as u16;
    let gap = u16::from(left.height >= n + heads + 7);
    let [sinusoidal, _, alibi, _] = Layout::vertical([
        Constraint::Length(n + 3),
        Constraint::Length(gap),
        Constraint::Length(heads + 3),
        Constraint::Fill(1),
    ])
    .areas(left);
    let pairs = (lab.config.d_head() / 2) as u16;
    let [rope, experiments] = if narrow {
        [right, Rect::default()]
    } else {
        Layout::vertical([Constraint::Length(pairs + 4), Constraint::Fill(1)]).areas(right)
    };
    Areas {
        sinusoidal,
        alibi,
        rope,
        experiments,
    }
}

impl View for PositionView {
    fn kind(&self) -> ViewKind {
        ViewKind::Position
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn update(&self, state: &mut Context, action: Action) {
        if action == Action::CancelWork {
            real::cancel(state);
            return;
        }
        if let Action::Derived(report) = action {
            if let DerivedReport::Position { key, data } = *report {
                real::report(state, key, data.0);
            }
            return;
        }
        let Action::ViewCommand(id) = action else {
            return;
        };
        let Some(lab) = state.views.get::<PositionLab>(ViewKind::Position) else {
            return;
        };
        let (seed, shift) = (lab.shuffle_seed, lab.shift);
        match id {
            CMD_SHUFFLE => ensure_lab(state, Some(seed.wrapping_add(1)), None),
            CMD_SHIFT_UP => ensure_lab(state, None, Some((shift + 1).min(MAX_SHIFT))),
            CMD_SHIFT_DOWN => ensure_lab(state, None, Some(shift.saturating_sub(1).max(1))),
            CMD_PAGE => {
                if let Some(lab) = state.views.get_mut::<PositionLab>(ViewKind::Position) {
                    lab.page = 1 - lab.page.min(1);
                }
            }
            _ => {}
        }
    }

    fn refresh(&self, state: &mut Context) {
        if state.source.session().is_some() {
            real::ensure(state);
        } else {
            ensure_lab(state, None, None);
        }
    }

    fn grid(&self, state: &Context) -> (usize, usize) {
        let n = state.pipeline.shape.n_k;
        (state.pipeline.shape.n_q, n)
    }

    fn subtitle(&self, state: &Context) -> String {
        if state.source.session().is_some() {
            return real::subtitle(state);
        }
        let narrow = state.screen.0 < TWO_PAGES_BELOW;
        match state.views.get::<PositionLab>(ViewKind::Position) {
            Some(lab) if narrow && lab.page == 0 => {
                "page 1/2: sinusoidal table · ALiBi bias · RoPE rotation (o: experiments)".into()
            }
            Some(_) if narrow => "page 2/2: permutation and shift experiments (o: tables)".into(),
            _ => {
                "sinusoidal table · RoPE rotation · ALiBi bias · permutation and shift experiments"
                    .into()
            }
        }
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        if state.source.session().is_some() {
            return real::render(state, area, buf);
        }
        let Some(lab) = state.views.get::<PositionLab>(ViewKind::Position) else {
            let msg = if state.source.is_model() {
                "the experiments could not be built (see the status line)"
            } else {
                "the position experiments rebuild a lesson model; they are not available for tensors loaded from files"
            };
            for (k, l) in text::wrap(msg, area.width as usize).iter().enumerate() {
                buf.set_stringn(
                    area.x,
                    area.y + k as u16,
                    l,
                    area.width as usize,
                    state.theme.dim,
                );
            }
            return;
        };
        let a = areas(lab, area);
        if a.sinusoidal.is_empty() {
            render_experiments(state, lab, a.experiments, buf);
            return;
        }
        let (sin_area, alibi_area, rope_area, exp_area) =
            (a.sinusoidal, a.alibi, a.rope, a.experiments);
        MatrixPanel {
            matrix: &lab.sinusoidal,
            title: lab.sinusoidal.name.clone(),
            title_style: state.theme.panel_title,
            cursor: Some((state.cursor.0, 0)),
            highlight: &[],
            masked: None,
            scale: ValueScale::Diverging { abs: 1.0 },
            legend: true,
            max_cell: MAX_CELL,
        }
        .render(state, sin_area, buf);
        render_alibi(state, lab, alibi_area, buf);
        render_rope(state, lab, rope_area, buf);
        if !exp_area.is_empty() {
            render_experiments(state, lab, exp_area, buf);
        }
    }

    fn hit_test(&self, state: &Context, area: Rect, x: u16, y: u16) -> Option<Hit> {
        let lab = state.views.get::<PositionLab>(ViewKind::Position)?;
        let sin_area = areas(lab, area).sinusoidal;
        if sin_area.is_empty() {
            return None;
        }
        let p = MatrixPanel {
            matrix: &lab.sinusoidal,
            title: String::new(),
            title_style: Style::default(),
            cursor: Some((state.cursor.0, 0)),
            highlight: &[],
            masked: None,
            scale: ValueScale::Diverging { abs: 1.0 },
            legend: true,
            max_cell: MAX_CELL,
        };
        let (row, _) = p.geometry(state, sin_area).cell_at(x, y)?;
        Some(Hit::Cell {
            sub: 0,
            row,
            col: state.cursor.1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::permutation;

    #[test]
    fn permutations_are_never_the_identity() {
        for seed in 0..50 {
            let p = permutation(5, seed);
            let mut sorted = p.clone();
            sorted.sort();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
            assert_ne!(p, vec![0, 1, 2, 3, 4]);
        }
    }
}
