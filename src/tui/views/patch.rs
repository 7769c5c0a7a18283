//! The patch view: activation patching (Meng et al. 2022; Wang et al. 2022) between the
//! text on screen (clean) and a second text of as many tokens (corrupt: `--compare`, or
//! typed with `e`). The answer is the clean run's top-1 (the target) against the corrupt
//! run's top-1 (the foil; the clean run's top-2 if both runs say the same). Each cell is
//! the corrupt run with one activation taken from the clean run, scored by
//! (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt): 1 brings the clean answer back,
//! 0 changes nothing. `p` cycles the sites: the residual stream entering each block and
//! the attention and MLP outputs (layers x positions), or each head's output (layers x
//! heads). The line above the grid shows the patched run under the cursor: its logit
//! difference and its top tokens. Enter opens the layer (and the head) in the tokens
//! view.
//!
//! A sweep is one partial forward pass per site: the view asks for it (its lab is
//! `Pending`), the event loop's worker computes it with a progress line (Esc stops it),
//! and the view folds the report in.

use std::sync::Arc;

use crossterm::event::KeyCode;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::cli::Lang;
use crate::model::patching::PatchWhat;
use crate::model::session::ModelSession;
use crate::tui::action::{Action, EditAction, PatchOutcome};
use crate::tui::component::{Hit, View};
use crate::tui::context::{Context, Request};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::tui::views::lens::{first_shown, token_label};
use crate::widgets::text;

pub struct PatchView;

const CMD_WHAT: u8 = 0;
const CMD_OPEN: u8 = 1;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Char('p')],
        action: Action::ViewCommand(CMD_WHAT),
        desc: "sites patched: the residual stream, each head's output, the attention output, the MLP output",
        hint: Some("sites"),
        hint_keys: Some("p"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('e')],
        action: Action::Edit(EditAction::Start),
        desc: "type the second text (the corrupt run), as many tokens as the first (Enter applies, Esc cancels)",
        hint: Some("second text"),
        hint_keys: Some("e"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Code(KeyCode::Enter)],
        action: Action::ViewCommand(CMD_OPEN),
        desc: "open the layer under the cursor (and its head) in the tokens view",
        hint: Some("open"),
        hint_keys: Some("Enter"),
        group: Group::ThisView,
        when: When::Always,
    },
];

/// Columns of the layer labels ("L30 ").
const LABEL_W: u16 = 5;
/// Columns of a cell (" +0.97").
const CELL_W: u16 = 7;
/// Lines above the grid.
const HEAD_H: u16 = 3;
/// Top tokens a patched run keeps.
pub const TOP: usize = 5;

/// What a sweep is for: the model (the address of its weights), both texts' ids and the
/// sites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchKey {
    pub model: usize,
    pub clean: Vec<u32>,
    pub corrupt: Vec<u32>,
    pub what: PatchWhat,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PatchState {
    /// Asked for; the worker computes it.
    Pending,
    Ready(Arc<PatchOutcome>),
    /// Why there is none (no second text, texts of different lengths, an encoder, a
    /// sweep stopped or failed).
    Failed(String),
}

/// The view's own data: the sites chosen and the sweep of the two texts on screen.
#[derive(Debug, Clone)]
pub struct PatchLab {
    pub what: PatchWhat,
    pub key: Option<PatchKey>,
    pub state: PatchState,
}

pub fn lab(ctx: &Context) -> Option<&PatchLab> {
    ctx.views.get::<PatchLab>(ViewKind::Patch)
}

fn outcome(ctx: &Context) -> Option<&PatchOutcome> {
    match &lab(ctx)?.state {
        PatchState::Ready(o) => Some(o),
        _ => None,
    }
}

/// The sweep the view waits for, if it waits for one of the texts on screen.
pub fn wanted(ctx: &Context) -> Option<PatchKey> {
    let l = lab(ctx)?;
    let key = l.key.as_ref()?;
    (l.state == PatchState::Pending && key_of(ctx, l.what).ok().as_ref() == Some(key))
        .then(|| key.clone())
}

fn say(lang: Lang, en: &'static str, zh: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

/// The sweep of the texts on screen at `what`, or why there can be none.
fn key_of(ctx: &Context, what: PatchWhat) -> Result<PatchKey, String> {
    let lang = ctx.options.lang;
    let Some(s) = ctx.source.session() else {
        return Err(String::new());
    };
    if !s.config().causal {
        return Err(say(
            lang,
            "Activation patching measures how much of a causal model's answer comes back; this model is an encoder (BERT-like).",
            "激活修补衡量因果模型的答案能恢复多少；这个模型是编码器（类似 BERT）。",
        )
        .into());
    }
    let Some(c) = &ctx.compare else {
        return Err(say(
            lang,
            "Patching needs a second text with as many tokens as this one (the corrupt run): open the app with --compare TEXT, or press e to type it.",
            "修补需要第二段文本（被破坏的运行），词元数与这一段相同：用 --compare TEXT 打开，或按 e 输入。",
        )
        .into());
    };
    if c.ids.len() != s.n() {
        return Err(match lang {
            Lang::En => format!(
                "The texts have {} and {} tokens; patching needs the same number (press e to change the second: {}).",
                s.n(),
                c.ids.len(),
                c.pieces.join("|")
            ),
            Lang::Zh => format!(
                "两段文本分别有 {} 和 {} 个词元；修补要求数量相同（按 e 修改第二段：{}）。",
                s.n(),
                c.ids.len(),
                c.pieces.join("|")
            ),
        });
    }
    Ok(PatchKey {
        model: Arc::as_ptr(&s.model) as usize,
        clean: s.ids.clone(),
        corrupt: c.ids.clone(),
        what,
    })
}

/// Ask for the sweep of the texts on screen at `what` (unless the lab has it), the
/// cursor on the first position where the texts differ.
fn ask(ctx: &mut Context, what: PatchWhat) {
    let key = key_of(ctx, what);
    if let Some(l) = lab(ctx)
        && l.what == what
        && l.key.is_some()
        && l.key.as_ref() == key.as_ref().ok()
    {
        return;
    }
    let (key, state) = match key {
        Ok(k) => (Some(k), PatchState::Pending),
        Err(e) => (None, PatchState::Failed(e)),
    };
    if let Some(k) = &key {
        let first = (0..k.clean.len())
            .find(|&i| k.clean[i] != k.corrupt[i])
            .unwrap_or(0);
        ctx.cursor = (0, if what == PatchWhat::Heads { 0 } else { first });
    }
    ctx.views
        .set(ViewKind::Patch, PatchLab { what, key, state });
}

/// The sites' name as the view says it.
fn what_name(what: PatchWhat, lang: Lang) -> &'static str {
    match what {
        PatchWhat::Resid => say(
            lang,
            "the residual stream entering each block, by position",
            "进入每个块的残差流，按位置",
        ),
        PatchWhat::Heads => say(
            lang,
            "each head's output at every position",
            "每个头在所有位置的输出",
        ),
        PatchWhat::AttnOut => say(
            lang,
            "each block's attention output, by position",
            "每个块的注意力输出，按位置",
        ),
        PatchWhat::MlpOut => say(
            lang,
            "each block's MLP output, by position",
            "每个块的 MLP 输出，按位置",
        ),
    }
}

fn next_what(w: PatchWhat) -> PatchWhat {
    match w {
        PatchWhat::Resid => PatchWhat::Heads,
        PatchWhat::Heads => PatchWhat::AttnOut,
        PatchWhat::AttnOut => PatchWhat::MlpOut,
        PatchWhat::MlpOut => PatchWhat::Resid,
    }
}

/// A lesson step's `patch`: patch these sites from now on.
pub(crate) fn what_in_lesson(ctx: &mut Context, what: PatchWhat) {
    ask(ctx, what);
}

/// A metric as a cell shows it: signed, two decimals.
pub fn metric(v: f64) -> String {
    format!("{v:+.2}")
}

struct Grid {
    body: Rect,
    rows: (usize, usize),
    cols: (usize, usize),
}

fn grid(ctx: &Context, o: &PatchOutcome, area: Rect) -> Grid {
    let body = Rect::new(
        area.x,
        area.y.saturating_add(HEAD_H).min(area.bottom()),
        area.width,
        area.height.saturating_sub(HEAD_H),
    );
    let layers = o.result.rows.len();
    let cols = o.result.rows.first().map_or(0, |r| r.len());
    let shown_rows = (body.height.saturating_sub(1) as usize).min(layers);
    let shown_cols = ((body.width.saturating_sub(LABEL_W) / CELL_W) as usize).min(cols);
    Grid {
        body,
        rows: (first_shown(ctx.cursor.0, shown_rows, layers), shown_rows),
        cols: (first_shown(ctx.cursor.1, shown_cols, cols), shown_cols),
    }
}

fn render_head(ctx: &Context, s: &ModelSession, o: &PatchOutcome, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let lang = ctx.options.lang;
    let piece = |id: u32| token_label(&s.model.tokenizer.piece(id));
    let line = |y: u16| Rect::new(area.x, area.y + y, area.width, 1);
    let r = &o.result;
    let what = r.what;
    Line::from(vec![
        Span::styled(format!("{} ", what_name(what, lang)), t.panel_title),
        Span::styled(
            say(
                lang,
                "· 1 = the clean answer back, 0 = no change · p: sites",
                "· 1 = 恢复干净运行的答案，0 = 无变化 · p：位置类型",
            ),
            t.field_name,
        ),
    ])
    .render(line(0), buf);
    if area.height < 2 {
        return;
    }
    Line::from(vec![
        Span::styled(
            format!(
                "logit({}) - logit({}): ",
                piece(o.target.id),
                piece(o.foil.id)
            ),
            t.field_name,
        ),
        Span::styled(say(lang, "clean ", "干净 "), t.field_name),
        Span::styled(format!("{:.3}", r.clean_ld), t.field_value),
        Span::styled(say(lang, "  corrupt ", "  破坏 "), t.field_name),
        Span::styled(format!("{:.3}", r.corrupt_ld), t.field_value),
    ])
    .render(line(1), buf);
    if area.height < 3 {
        return;
    }
    let (l, c) = ctx.cursor;
    let (Some(&m), Some(&ld)) = (
        r.rows.get(l).and_then(|row| row.get(c)),
        r.patched_ld.get(l).and_then(|row| row.get(c)),
    ) else {
        return;
    };
    let site = if what == PatchWhat::Heads {
        format!("{} {}", say(lang, "head", "头"), c + 1)
    } else {
        let clean = s.pieces.get(c).map_or(String::new(), |p| token_label(p));
        let corrupt = ctx
            .compare
            .as_ref()
            .and_then(|x| x.pieces.get(c))
            .map_or(String::new(), |p| token_label(p));
        if clean == corrupt {
            format!("{} {} {clean}", say(lang, "position", "位置"), c + 1)
        } else {
            format!(
                "{} {} {clean}→{corrupt}",
                say(lang, "position", "位置"),
                c + 1
            )
        }
    };
    let mut spans = vec![
        Span::styled(
            format!("{} {} · {site}: ", say(lang, "layer", "层"), l + 1),
            t.field_name,
        ),
        Span::styled(format!("{m:.3}"), t.field_value),
        Span::styled(format!(" · LD {ld:.3} · "), t.field_name),
    ];
    if let Some(top) = o.tops.get(l).and_then(|row| row.get(c)) {
        for tok in top {
            spans.push(Span::styled(
                format!("{} {:.0}%  ", piece(tok.id), tok.prob * 100.0),
                t.field_value,
            ));
        }
    }
    Line::from(spans).render(line(2), buf);
}

fn render_grid(ctx: &Context, s: &ModelSession, o: &PatchOutcome, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let g = grid(ctx, o, area);
    let body = g.body;
    if body.height == 0 || body.width == 0 {
        return;
    }
    let r = &o.result;
    let (cur_l, cur_c) = ctx.cursor;
    let (first_col, cols) = g.cols;
    let (first_row, rows) = g.rows;
    let layers = r.rows.len();
    let total_cols = r.rows.first().map_or(0, |x| x.len());
    let marks = format!(
        "{}{}{}",
        if first_col > 0 { "‹" } else { " " },
        if first_row > 0 { "↑" } else { " " },
        if first_row + rows < layers {
            "↓"
        } else {
            " "
        },
    );
    buf.set_stringn(body.x, body.y, marks, LABEL_W as usize, t.dim);
    let corrupt = ctx.compare.as_ref().map(|c| &c.ids);
    for (i, c) in (first_col..first_col + cols).enumerate() {
        let x = body.x + LABEL_W + i as u16 * CELL_W;
        let style = if c == cur_c { t.label_active } else { t.label };
        let label = if r.what == PatchWhat::Heads {
            format!("h{}", c + 1)
        } else {
            // A position where the texts differ is marked.
            let differs = corrupt.is_some_and(|ids| ids.get(c) != s.ids.get(c));
            let p = s.pieces.get(c).map_or(String::new(), |p| token_label(p));
            if differs { format!("*{p}") } else { p }
        };
        let label = text::right(
            &text::fit(&label, CELL_W as usize - 1, "…"),
            CELL_W as usize,
            "…",
        );
        buf.set_stringn(x, body.y, label, CELL_W as usize, style);
    }
    if first_col + cols < total_cols {
        let x = body.x + LABEL_W + cols as u16 * CELL_W;
        if x < body.right() {
            buf.set_stringn(x, body.y, "›", 1, t.dim);
        }
    }
    for (i, layer) in (first_row..first_row + rows).enumerate() {
        let y = body.y + 1 + i as u16;
        if y >= body.bottom() {
            break;
        }
        let style = if layer == cur_l {
            t.label_active
        } else {
            t.label
        };
        buf.set_stringn(
            body.x,
            y,
            format!("L{}", layer + 1),
            LABEL_W as usize,
            style,
        );
        for (j, c) in (first_col..first_col + cols).enumerate() {
            let Some(&v) = r.rows[layer].get(c) else {
                continue;
            };
            let x = body.x + LABEL_W + j as u16 * CELL_W;
            let mut style = t.heat.cell_style(v.clamp(-1.0, 1.0), true);
            if (layer, c) == (cur_l, cur_c) {
                style = style.add_modifier(t.cursor);
            }
            let shown = text::right(&metric(v), CELL_W as usize, "…");
            buf.set_stringn(x, y, shown, CELL_W as usize, style);
        }
    }
}

impl View for PatchView {
    fn kind(&self) -> ViewKind {
        ViewKind::Patch
    }

    fn available(&self, ctx: &Context) -> bool {
        ctx.source.session().is_some()
    }

    fn unavailable(&self) -> &'static str {
        "the patch view patches between two texts on a real causal model: attnviz --model MODEL --tokens TEXT --compare TEXT2"
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    /// Layers x positions (or heads), known before the sweep is, so that a cursor put
    /// on a site stays there while it is computed.
    fn grid(&self, ctx: &Context) -> (usize, usize) {
        match (ctx.source.session(), lab(ctx)) {
            (Some(s), Some(l)) if l.key.is_some() => {
                (s.config().layers, l.what.columns(s.config(), s.n()))
            }
            _ => (0, 0),
        }
    }

    fn subtitle(&self, ctx: &Context) -> String {
        match ctx.options.lang {
            Lang::En => {
                "activation patching: which activations of the first text bring its answer back in the second".into()
            }
            Lang::Zh => "激活修补：第一段文本的哪些激活能在第二段中恢复它的答案".into(),
        }
    }

    /// Opening the view (or a new second text) asks for the sweep of the texts on
    /// screen at the sites chosen.
    fn refresh(&self, ctx: &mut Context) {
        let what = lab(ctx).map_or(PatchWhat::Resid, |l| l.what);
        ask(ctx, what);
    }

    fn update(&self, ctx: &mut Context, action: Action) {
        match action {
            Action::ViewCommand(CMD_WHAT) => {
                let what = next_what(lab(ctx).map_or(PatchWhat::Resid, |l| l.what));
                ask(ctx, what);
            }
            Action::ViewCommand(CMD_OPEN) => {
                let Some(o) = outcome(ctx) else {
                    return;
                };
                let (layer, c) = ctx.cursor;
                let head = if o.result.what == PatchWhat::Heads {
                    c
                } else {
                    ctx.head
                };
                ctx.request = Some(Request::OpenHead {
                    layer,
                    head,
                    view: ViewKind::Tokens,
                });
            }
            Action::Patch(report) => {
                let Some(l) = ctx.views.get_mut::<PatchLab>(ViewKind::Patch) else {
                    return;
                };
                let Some(key) = &l.key else {
                    return;
                };
                if (key.model, &key.clean, &key.corrupt, key.what)
                    != (report.key.0, &report.key.1, &report.key.2, report.key.3)
                {
                    return;
                }
                l.state = match report.outcome {
                    Ok(o) => PatchState::Ready(o),
                    Err(e) => PatchState::Failed(e),
                };
                if let (Some(c), Some(run)) = (ctx.compare.as_mut(), report.compare)
                    && c.ids == report.key.2
                {
                    c.session = Some(run.0);
                }
            }
            Action::CancelWork => {
                if let Some(l) = ctx.views.get_mut::<PatchLab>(ViewKind::Patch)
                    && l.state == PatchState::Pending
                {
                    l.key = None;
                    l.state = PatchState::Failed(
                        say(
                            ctx.options.lang,
                            "The sweep was stopped (Esc); press p to choose sites and run it again.",
                            "修补已停止（Esc）；按 p 选择位置类型并重新运行。",
                        )
                        .into(),
                    );
                }
            }
            _ => {}
        }
    }

    fn render(&self, ctx: &Context, area: Rect, buf: &mut Buffer) {
        let Some(s) = ctx.source.session() else {
            return;
        };
        let lang = ctx.options.lang;
        let msg = match lab(ctx).map(|l| (&l.state, l.what)) {
            Some((PatchState::Ready(o), _)) => {
                render_head(ctx, s, o, area, buf);
                render_grid(ctx, s, o, area, buf);
                return;
            }
            Some((PatchState::Failed(msg), _)) => msg.clone(),
            Some((PatchState::Pending, what)) => match lang {
                Lang::En => format!(
                    "Patching {}: the second text's run with one activation at a time taken from the first's ...",
                    what_name(what, lang)
                ),
                Lang::Zh => format!(
                    "正在修补{}：第二段文本的运行，每次换入第一段的一个激活……",
                    what_name(what, lang)
                ),
            },
            None => String::new(),
        };
        for (i, l) in text::wrap(&msg, area.width.max(1) as usize)
            .iter()
            .take(area.height as usize)
            .enumerate()
        {
            buf.set_stringn(
                area.x,
                area.y + i as u16,
                l,
                area.width as usize,
                ctx.theme.dim,
            );
        }
    }

    fn hit_test(&self, ctx: &Context, area: Rect, x: u16, y: u16) -> Option<Hit> {
        let o = outcome(ctx)?;
        let g = grid(ctx, o, area);
        let cells = Rect::new(
            g.body.x + LABEL_W,
            g.body.y + 1,
            g.cols.1 as u16 * CELL_W,
            g.rows.1 as u16,
        );
        if !cells.contains(Position::new(x, y)) {
            return None;
        }
        let row = g.rows.0 + (y - cells.y) as usize;
        let col = g.cols.0 + ((x - cells.x) / CELL_W) as usize;
        Some(Hit::Cell { sub: 0, row, col })
    }
}
