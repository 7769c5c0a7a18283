//! The tokens view (BertViz's head view): for the selected token of a real model's text,
//! where it looks in every head of the layer. Tokens run down the page as the tokenizer
//! split them (` cat`, `##ing`, spaces shown); beside each key token one coloured cell
//! per head, as strong as that head's weight from the selected token to it, then the
//! weight of the focused head (or the mean over heads, `a`) as a number and a bar.
//!
//! Up and Down choose the token; the head keys (1-9, n/N) choose the focused head; `<` `>`
//! the layer; `w` shows the contributions ||A v W_O|| in place of the weights (cells,
//! numbers and bars). With a second text (`--compare`), `x` shows its run instead, then
//! the signed difference of the two runs' weights (`tokens_compare`). The numbers are the
//! forward pass's own (`ModelSession`).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::model::session::{Measure, ModelSession};
use crate::tui::action::Action;
use crate::tui::compare::{Side, next_side, second};
use crate::tui::component::{Hit, View};
use crate::tui::context::{Context, Request};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::tui::views::contrib;
use crate::tui::views::tokens_compare;
use crate::widgets::heat::adapt;
use crate::widgets::text;
use crate::widgets::token_links::{TokenLinks, head_rgb, show};

pub struct TokensView;

const CMD_MEAN: u8 = 0;
const CMD_CONTRIB: u8 = 1;
const CMD_SIDE: u8 = 2;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Char('a')],
        action: Action::ViewCommand(CMD_MEAN),
        desc: "bars: the focused head's weights / the mean over all heads",
        hint: Some("head/mean"),
        hint_keys: Some("a"),
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
        keys: &[KeyPat::Char('x')],
        action: Action::ViewCommand(CMD_SIDE),
        desc: "with a second text (--compare): the first text / the second / their difference",
        hint: Some("1st/2nd/diff"),
        hint_keys: Some("x"),
        group: Group::ThisView,
        when: When::Always,
    },
];

/// The view's own settings: do the bars show the mean over heads, do cells and bars show
/// the contributions, which run?
#[derive(Debug, Clone, Copy, Default)]
struct TokensLab {
    mean: bool,
    contrib: bool,
    side: Side,
}

/// What the view shows now: a side that needs the second run falls back to the first.
pub fn side(ctx: &Context) -> Side {
    match second(ctx) {
        Some(_) => settings(ctx).side,
        None => Side::First,
    }
}

/// A lesson step's `measure`: cells and bars show contributions (`true`) or weights.
pub fn contrib_in_lesson(ctx: &mut Context, contrib: bool) {
    let mut l = settings(ctx);
    l.contrib = contrib;
    ctx.views.set(ViewKind::Tokens, l);
}

fn settings(ctx: &Context) -> TokensLab {
    ctx.views
        .get::<TokensLab>(ViewKind::Tokens)
        .copied()
        .unwrap_or_default()
}

fn mean(ctx: &Context) -> bool {
    settings(ctx).mean
}

/// Weights, or contributions once asked for and kept.
fn measure(ctx: &Context, s: &ModelSession) -> Measure {
    contrib::shown(s, settings(ctx).contrib)
}

fn areas(area: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Length(2),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// rows[h][j]: head h's weight (or contribution) from token `i` to token j in `layer`.
fn rows(s: &ModelSession, m: Measure, layer: usize, i: usize) -> Vec<Vec<f32>> {
    let Some(maps) = s.maps(m) else {
        return Vec::new();
    };
    (0..s.config().heads)
        .map(|h| maps.row(layer, h, i))
        .collect()
}

/// First token row on screen: the selected token kept near the middle.
fn scroll(selected: usize, rows: usize, n: usize) -> usize {
    if n <= rows {
        0
    } else {
        selected.saturating_sub(rows / 2).min(n - rows)
    }
}

impl View for TokensView {
    fn kind(&self) -> ViewKind {
        ViewKind::Tokens
    }

    fn available(&self, ctx: &Context) -> bool {
        ctx.source.session().is_some()
    }

    fn unavailable(&self) -> &'static str {
        "the tokens view shows a real model's heads: attnviz --model MODEL --tokens TEXT"
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn grid(&self, ctx: &Context) -> (usize, usize) {
        ctx.source.session().map_or((0, 0), |s| (s.n(), 1))
    }

    fn subtitle(&self, ctx: &Context) -> String {
        ctx.source.session().map_or_else(String::new, |s| {
            format!(
                "layer {}/{}: where one token looks in each of its {} heads",
                ctx.layer() + 1,
                s.config().layers,
                s.config().heads
            )
        })
    }

    fn update(&self, ctx: &mut Context, action: Action) {
        let mut l = settings(ctx);
        match action {
            Action::ViewCommand(CMD_MEAN) => l.mean = !l.mean,
            Action::ViewCommand(CMD_SIDE) => match next_side(ctx, l.side) {
                Some(side) => l.side = side,
                None => return,
            },
            Action::ViewCommand(CMD_CONTRIB) => {
                l.contrib = !l.contrib;
                if l.contrib
                    && ctx
                        .source
                        .session()
                        .is_some_and(|s| s.contributions.is_none())
                {
                    ctx.request = Some(Request::KeepContributions);
                }
            }
            _ => return,
        }
        ctx.views.set(ViewKind::Tokens, l);
    }

    fn render(&self, ctx: &Context, area: Rect, buf: &mut Buffer) {
        let Some(first) = ctx.source.session() else {
            return;
        };
        let s = match (side(ctx), second(ctx)) {
            (Side::Diff, Some(other)) => {
                let focus = (!mean(ctx)).then_some(ctx.head);
                tokens_compare::render(ctx, first, other, focus, area, buf);
                return;
            }
            (Side::Second, Some(other)) => other,
            _ => first,
        };
        let t = &ctx.theme;
        let [top, body, foot] = areas(area);
        let (n, heads) = (s.n(), s.config().heads);
        let i = ctx.cursor.0.min(n.saturating_sub(1));
        let layer = ctx.layer();
        let m = measure(ctx, s);
        let weights = rows(s, m, layer, i);
        let focus = (!mean(ctx)).then_some(ctx.head.min(heads.saturating_sub(1)));
        // Line 1: the selected token and what the bars show; line 2: the head colours.
        let bars = match focus {
            Some(h) => format!("bars: head {}", h + 1),
            None => "bars: mean of the heads".to_string(),
        };
        let mut strongest: Vec<(usize, f32)> = match focus {
            Some(h) => weights[h].iter().copied().enumerate().collect(),
            None => (0..n)
                .map(|j| {
                    let m = weights.iter().map(|w| w[j]).sum::<f32>() / heads.max(1) as f32;
                    (j, m)
                })
                .collect(),
        };
        strongest.sort_by(|a, b| b.1.total_cmp(&a.1));
        let best: Vec<String> = strongest
            .iter()
            .take(3)
            .map(|(j, w)| format!("'{}' {w:.2}", ctx.glyphs.text(&show(&s.pieces[*j]))))
            .collect();
        let which = match side(ctx) {
            Side::Second => "the second text · ",
            _ if second(ctx).is_some() => "the first text · ",
            _ => "",
        };
        let line1 = vec![
            Span::styled(
                format!(
                    "{which}token {}/{n} '{}' · {bars} · strongest: ",
                    i + 1,
                    ctx.glyphs.text(&show(&s.pieces[i]))
                ),
                t.panel_title,
            ),
            Span::styled(best.join(", "), t.field_value),
        ];
        Line::from(line1).render(Rect::new(top.x, top.y, top.width, 1), buf);
        let mut legend = vec![Span::styled("heads ", t.dim)];
        for h in 0..heads {
            let style = adapt(t.depth, head_rgb(h, heads)).map_or(t.label, |c| t.label.fg(c));
            let style = if Some(h) == focus {
                style.add_modifier(t.highlight)
            } else {
                style
            };
            legend.push(Span::styled(format!("{} ", h + 1), style));
        }
        legend.push(Span::styled(
            format!("· {}", contrib::line(m, ctx.options.lang, false)),
            match m {
                Measure::Weights => t.dim,
                Measure::Contributions => t.field_value,
            },
        ));
        if top.height > 1 {
            Line::from(legend).render(Rect::new(top.x, top.y + 1, top.width, 1), buf);
        }
        let rows = TokenLinks::visible_rows(body);
        let background = t.heat.rgb(0.0, false);
        (&TokenLinks {
            tokens: &s.pieces,
            selected: i,
            weights: &weights,
            focus_head: focus,
            scroll: scroll(i, rows, n),
            depth: t.depth,
            background,
            glyphs: &ctx.glyphs,
            text: t.value,
            selected_style: t.label_active,
            dim: t.dim,
        })
            .render(body, buf);
        let foot_text = format!(
            "query tokens on the left, keys on the right; a cell per head, brighter = more {} · tokens {}-{} of {n}",
            match m {
                Measure::Weights => "weight",
                Measure::Contributions => "contribution",
            },
            scroll(i, rows, n) + 1,
            (scroll(i, rows, n) + rows).min(n)
        );
        buf.set_stringn(
            foot.x,
            foot.y,
            text::fit(&foot_text, foot.width as usize, ctx.glyphs.ellipsis),
            foot.width as usize,
            t.dim,
        );
    }

    fn hit_test(&self, ctx: &Context, area: Rect, _x: u16, y: u16) -> Option<Hit> {
        let s = ctx.source.session()?;
        let [_, body, _] = areas(area);
        if y < body.y || y >= body.bottom() {
            return None;
        }
        let n = s.n();
        let rows = TokenLinks::visible_rows(body);
        let row = scroll(ctx.cursor.0.min(n.saturating_sub(1)), rows, n) + (y - body.y) as usize;
        (row < n).then_some(Hit::Cell {
            sub: 0,
            row,
            col: 0,
        })
    }
}
