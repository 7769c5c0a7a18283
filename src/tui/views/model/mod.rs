//! The model view: a real model's heads all at once, and what they do.
//!
//! - **maps** (BertViz's model view): every layer x head as a small attention map, layers
//!   down, heads across ([`maps`]);
//! - **scores**: the same layers x heads as a grid coloured by one head score
//!   (previous token, first token, duplicate, induction, entropy: `model::scores`), with
//!   each layer's attention sink, the share of its attention on the first token
//!   ([`grid`]);
//! - **rollout**: attention rollout across the layers (Abnar & Zuidema 2020) as one map
//!   ([`rollout`]).
//!
//! `c` cycles these, and `w` switches all three between the attention weights and the
//! contributions ||A v W_O|| (`model::contrib`: how much each key's value adds, where a
//! weight alone can point at a sink that adds little); the line over them says which.
//! The cursor is on a layer and head everywhere; Enter opens that
//! head's weights in the pipeline view, `d` ablates it (the forward pass runs again
//! without its output) and the panel under the maps compares the model's predictions
//! before and after ([`effects`]). `i` puts in its place the earlier heads that write
//! into the cursor's head's queries, keys and values, by composition score ([`writers`]).

mod effects;
mod grid;
mod lab;
mod maps;
mod rollout;
pub mod writers;

use crate::engine::config::MaskKind;
use lab::{ModelLab, Score, Show, Writers, WritersState, lab, measure, score, scores_ready, show};
pub use lab::{Wanted, scores_of, scores_until, session_key, wanted};

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::model::session::{Measure, ModelSession};
use crate::scene::ModelShow;
use crate::tui::action::{Action, DerivedReport};
use crate::tui::compare::{Side, next_side, second};
use crate::tui::component::{Hit, View};
use crate::tui::context::{Context, Request};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::tui::views::contrib;
use crate::widgets::text;

pub struct ModelView;

/// A lesson step's `show`: what the model view shows from then on (its kept data made
/// first if the view has not been open yet; a worker derives the scores it shows).
pub fn show_in_lesson(ctx: &mut Context, show: ModelShow) {
    let show = match show {
        ModelShow::Maps => Show::Maps,
        ModelShow::PrevToken => Show::Score(Score::PrevToken),
        ModelShow::FirstToken => Show::Score(Score::FirstToken),
        ModelShow::Duplicate => Show::Score(Score::Duplicate),
        ModelShow::Induction => Show::Score(Score::Induction),
        ModelShow::Entropy => Show::Score(Score::Entropy),
        ModelShow::Rollout => Show::Rollout,
    };
    if ctx.source.session().is_none() {
        return;
    }
    if lab(ctx).is_none() {
        let cursor = ctx.cursor;
        ModelView.refresh(ctx);
        ctx.cursor = cursor;
    }
    if let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) {
        l.show = show;
    }
}

/// A lesson step's `writers`: list (or not) the earlier heads that write into the
/// cursor's head (their composition scores, computed on the worker the first time).
pub fn writers_in_lesson(ctx: &mut Context, on: bool) {
    let Some(model) = ctx.source.session().map(writers::model_key) else {
        return;
    };
    if lab(ctx).is_none() {
        let cursor = ctx.cursor;
        ModelView.refresh(ctx);
        ctx.cursor = cursor;
    }
    let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) else {
        return;
    };
    let w = &mut l.writers;
    w.shown = on;
    if on && (w.model != model || w.state == WritersState::None) {
        w.model = model;
        w.state = WritersState::Pending;
    }
}

/// A lesson step's `measure`: the maps draw contributions (`true`) or weights.
pub fn contrib_in_lesson(ctx: &mut Context, contrib: bool) {
    if ctx.source.session().is_none() {
        return;
    }
    if lab(ctx).is_none() {
        let cursor = ctx.cursor;
        ModelView.refresh(ctx);
        ctx.cursor = cursor;
    }
    if let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) {
        l.contrib = contrib;
    }
}

/// The rollout of the session's weights or contributions, if the text is short enough
/// (for the worker that computes it).
pub fn rollout_of(s: &ModelSession, m: Measure) -> Option<Vec<f64>> {
    rollout::compute(s, m)
}

const CMD_OPEN: u8 = 0;
const CMD_SHOW: u8 = 1;
const CMD_ABLATE: u8 = 2;
const CMD_RESTORE: u8 = 3;
const CMD_CONTRIB: u8 = 4;
const CMD_WRITERS: u8 = 5;
const CMD_SIDE: u8 = 6;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Code(KeyCode::Enter)],
        action: Action::ViewCommand(CMD_OPEN),
        desc: "open the head under the cursor (its weights, in the pipeline view)",
        hint: Some("open head"),
        hint_keys: Some("Enter"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('c')],
        action: Action::ViewCommand(CMD_SHOW),
        desc: "show: maps, then each head score, then the rollout",
        hint: Some("maps/scores"),
        hint_keys: Some("c"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('d')],
        action: Action::ViewCommand(CMD_ABLATE),
        desc: "ablate the head under the cursor (or bring it back): the model runs again",
        hint: Some("ablate"),
        hint_keys: Some("d/D"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('D')],
        action: Action::ViewCommand(CMD_RESTORE),
        desc: "bring every ablated head back",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('w')],
        action: Action::ViewCommand(CMD_CONTRIB),
        desc: "show the attention weights / the contributions ||A v W_O|| (the first time, the model runs again)",
        hint: Some("weights/contrib"),
        hint_keys: Some("w"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('i')],
        action: Action::ViewCommand(CMD_WRITERS),
        desc: "show / hide the earlier heads that write into this head's q, k, v (composition scores)",
        hint: Some("writers"),
        hint_keys: Some("i"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('x')],
        action: Action::ViewCommand(CMD_SIDE),
        desc: "with a second text (--compare): the maps of the first text / the second / the first minus the second",
        hint: Some("1st/2nd/diff"),
        hint_keys: Some("x"),
        group: Group::ThisView,
        when: When::Always,
    },
];

/// Which run the maps show (the first when there is no second).
fn side(ctx: &Context) -> Side {
    match second(ctx) {
        Some(_) => lab(ctx).map_or(Side::First, |l| l.side),
        None => Side::First,
    }
}

/// The parts of the view: the line naming the head, the main area, the predictions.
fn areas(ctx: &Context, area: Rect) -> [Rect; 3] {
    let shown = lab(ctx).is_some_and(|l| l.writers.shown);
    let effects = ctx.source.session().map_or(0, |s| {
        if shown && area.height >= 8 {
            writers::HEIGHT
        } else {
            effects::height(s, area.height)
        }
    });
    Layout::vertical([
        Constraint::Length(2),
        Constraint::Fill(1),
        Constraint::Length(effects),
    ])
    .areas(area)
}

fn head_line(ctx: &Context, s: &ModelSession) -> Vec<Span<'static>> {
    let t = &ctx.theme;
    let heads = s.config().heads;
    let (layer, head) = ctx.cursor;
    let kv = head / (heads / s.config().kv_heads.max(1)).max(1);
    let ablated = s.options.ablate.contains(&(layer, head));
    let mut spans = vec![Span::styled(
        format!(
            "layer {}/{} · head {}/{heads} · kv {}{} ",
            layer + 1,
            s.config().layers,
            head + 1,
            kv + 1,
            if ablated { " (ablated)" } else { "" }
        ),
        t.panel_title,
    )];
    // A model whose layers differ (sliding and global, a RoPE base per kind): this
    // layer's own mask and base; the header above holds what every layer shares.
    let d = &s.config().details;
    if !d.windows.is_empty() || d.local_rope_base.is_some() {
        let kind = match s.layer_mask(layer) {
            MaskKind::Window(w) => format!("window:{w}"),
            MaskKind::Causal => "global".to_string(),
            other => other.to_string(),
        };
        spans.push(Span::styled(kind, t.field_value));
        if let Some(b) = s.layer_rope_base(layer) {
            spans.push(Span::styled(format!(" rope {b}"), t.field_value));
        }
    }
    if let Some(sc) = score(ctx, layer, head) {
        for k in Score::ALL {
            spans.push(Span::styled(format!(" {} ", k.name()), t.field_name));
            spans.push(Span::styled(format!("{:.2}", k.of(sc)), t.field_value));
        }
    } else if lab(ctx).is_some_and(|l| l.stopped) {
        spans.push(Span::styled(" head scores stopped (Esc)", t.warn));
    } else if !scores_ready(ctx) {
        spans.push(Span::styled(" computing every head's scores…", t.dim));
    }
    spans
}

impl View for ModelView {
    fn kind(&self) -> ViewKind {
        ViewKind::Model
    }

    fn available(&self, ctx: &Context) -> bool {
        ctx.source.session().is_some()
    }

    fn unavailable(&self) -> &'static str {
        "the model view shows a real model's heads: attnviz --model MODEL --tokens TEXT"
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn grid(&self, ctx: &Context) -> (usize, usize) {
        ctx.source
            .session()
            .map_or((0, 0), |s| (s.config().layers, s.config().heads))
    }

    fn subtitle(&self, ctx: &Context) -> String {
        let Some(s) = ctx.source.session() else {
            return String::new();
        };
        let what = match show(ctx) {
            Show::Maps => match measure(ctx) {
                Measure::Weights => "every head's weights".to_string(),
                Measure::Contributions => "every head's contributions".to_string(),
            },
            Show::Score(k) => format!("the {} score of every head", k.name()),
            Show::Rollout => "attention rollout through every layer".to_string(),
        };
        format!(
            "{} layers x {} heads over {} tokens: {what} · c: show · w: weights/contributions",
            s.config().layers,
            s.config().heads,
            s.n()
        )
    }

    /// Opening the view puts the cursor on the layer and head on screen and, once per
    /// session, asks a worker for every head's scores.
    fn refresh(&self, ctx: &mut Context) {
        let Some(s) = ctx.source.session() else {
            return;
        };
        let key = session_key(s);
        if lab(ctx).is_none_or(|l| l.session != key) {
            // What the view was set to show stays (a run after an ablation is a new
            // session); the scores of the new one come from a worker.
            let (show, contrib, writers, side) = lab(ctx).map_or_else(
                || (Show::Maps, false, Writers::default(), Side::First),
                |l| (l.show, l.contrib, l.writers.clone(), l.side),
            );
            ctx.views.set(
                ViewKind::Model,
                ModelLab {
                    session: key,
                    scores: [None, None],
                    show,
                    contrib,
                    rollout: [None, None],
                    writers,
                    stopped: false,
                    side,
                },
            );
        } else if let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) {
            l.stopped = false;
        }
        ctx.cursor = (ctx.layer(), ctx.head);
    }

    fn update(&self, ctx: &mut Context, action: Action) {
        let (layer, head) = ctx.cursor;
        match action {
            Action::ViewCommand(CMD_OPEN) => {
                ctx.request = Some(Request::OpenHead {
                    layer,
                    head,
                    view: ViewKind::Pipeline,
                });
            }
            Action::ViewCommand(CMD_SHOW) => {
                if let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) {
                    l.show = l.show.next();
                }
            }
            Action::ViewCommand(CMD_CONTRIB) => {
                let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) else {
                    return;
                };
                l.contrib = !l.contrib;
                let ask = l.contrib
                    && ctx
                        .source
                        .session()
                        .is_some_and(|s| s.contributions.is_none());
                if ask {
                    ctx.request = Some(Request::KeepContributions);
                }
            }
            Action::ViewCommand(CMD_SIDE) => {
                let side = lab(ctx).map_or(Side::First, |l| l.side);
                if let Some(next) = next_side(ctx, side)
                    && let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model)
                {
                    l.side = next;
                }
            }
            Action::ViewCommand(CMD_WRITERS) => {
                let Some(model) = ctx.source.session().map(writers::model_key) else {
                    return;
                };
                let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) else {
                    return;
                };
                let w = &mut l.writers;
                w.shown = !w.shown;
                if w.shown && (w.model != model || w.state == WritersState::None) {
                    w.model = model;
                    w.state = WritersState::Pending;
                }
            }
            Action::Composition(report) => {
                let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) else {
                    return;
                };
                let w = &mut l.writers;
                if w.model == report.model && w.state == WritersState::Pending {
                    w.state = match report.scores {
                        Ok(s) => WritersState::Ready(s),
                        Err(e) => WritersState::Failed(e),
                    };
                }
            }
            Action::CancelWork => {
                if wanted(ctx).is_some()
                    && let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model)
                {
                    l.stopped = true;
                }
            }
            Action::Derived(report) => {
                let Some(l) = ctx.views.get_mut::<ModelLab>(ViewKind::Model) else {
                    return;
                };
                match *report {
                    DerivedReport::HeadScores {
                        session,
                        measure,
                        scores,
                    } if session == l.session => l.scores[measure as usize] = Some(scores.0),
                    DerivedReport::Rollout {
                        session,
                        measure,
                        rollout,
                    } if session == l.session => l.rollout[measure as usize] = Some(rollout.0),
                    _ => {}
                }
            }
            Action::ViewCommand(CMD_ABLATE) => {
                ctx.request = Some(Request::Ablate {
                    heads: vec![(layer, head)],
                    toggle: true,
                });
            }
            Action::ViewCommand(CMD_RESTORE) => {
                ctx.request = Some(Request::Ablate {
                    heads: Vec::new(),
                    toggle: false,
                });
            }
            _ => {}
        }
    }

    fn render(&self, ctx: &Context, area: Rect, buf: &mut Buffer) {
        let Some(s) = ctx.source.session() else {
            return;
        };
        let [top, main, foot] = areas(ctx, area);
        Line::from(head_line(ctx, s)).render(Rect::new(top.x, top.y, top.width, 1), buf);
        let m = measure(ctx);
        if top.height > 1 {
            let style = match m {
                Measure::Weights => ctx.theme.dim,
                Measure::Contributions => ctx.theme.field_value,
            };
            // With a second text, which run the maps show (`x`).
            let which = match (side(ctx), show(ctx), second(ctx)) {
                (_, _, None) => "",
                (Side::First, Show::Maps, _) => "maps: the first text (x: second, difference) · ",
                (Side::Second, Show::Maps, _) => {
                    "maps: the second text's weights (x: difference) · "
                }
                (Side::Diff, Show::Maps, _) => {
                    "maps: first minus second text, weights (x: first) · "
                }
                _ => "",
            };
            buf.set_stringn(
                top.x,
                top.y + 1,
                text::fit(
                    &format!("{which}{}", contrib::line(m, ctx.options.lang, true)),
                    top.width as usize,
                    ctx.glyphs.ellipsis,
                ),
                top.width as usize,
                style,
            );
        }
        match show(ctx) {
            Show::Maps => match (side(ctx), second(ctx)) {
                (Side::Second, Some(o)) => maps::render(ctx, o, None, Measure::Weights, main, buf),
                (Side::Diff, Some(o)) => maps::render(ctx, s, Some(o), m, main, buf),
                _ => maps::render(ctx, s, None, m, main, buf),
            },
            Show::Score(k) => grid::render(ctx, s, k, main, buf),
            Show::Rollout => {
                rollout::render(ctx, s, m, lab(ctx).and_then(|l| l.rollout(m)), main, buf)
            }
        }
        if lab(ctx).is_some_and(|l| l.writers.shown) && foot.height == writers::HEIGHT {
            writers::render(ctx, foot, buf);
        } else {
            effects::render(ctx, s, foot, buf);
        }
    }

    fn hit_test(&self, ctx: &Context, area: Rect, x: u16, y: u16) -> Option<Hit> {
        let s = ctx.source.session()?;
        let [_, main, _] = areas(ctx, area);
        let (row, col) = match show(ctx) {
            Show::Maps => maps::hit(ctx, s, main, x, y)?,
            Show::Score(_) => grid::hit(ctx, s, main, x, y)?,
            Show::Rollout => return None,
        };
        Some(Hit::Cell { sub: 0, row, col })
    }
}
