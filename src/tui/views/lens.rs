//! The lens view: the logit lens (nostalgebraist 2020) of a real causal model's text.
//! Layers run down (emb: the embeddings entering block 1; L1 .. LL: the residual stream
//! after each block, the last row being the model's own output), positions across. Each
//! cell is that layer's residual at that position read through the final norm and the
//! unembedding as if it were the last layer: its top token and probability, coloured by
//! the probability. `t` shows instead, in every cell, the rank and probability of the
//! position's target: the text's next token, and at the last position (where the text
//! has none) the model's own top-1 (`model::lens::text_lens`).
//!
//! The lens costs an unembedding per cell, so the app computes it off the UI thread (the
//! event loop's lens worker); the view only asks for it (its lab is `Pending` for the
//! model and text on screen), says it is being computed, and folds the report in.

use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::cli::Lang;
use crate::model::lens::{LensCell, TextLens};
use crate::model::session::ModelSession;
use crate::tui::action::Action;
use crate::tui::component::{Hit, View};
use crate::tui::context::Context;
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::text;
use crate::widgets::token_links::show;

pub struct LensView;

/// Tokens each cell keeps (the detail line lists them all).
pub const TOP: usize = 5;

const CMD_TARGET: u8 = 0;

static KEYS: &[Binding] = &[Binding {
    keys: &[KeyPat::Char('t')],
    action: Action::ViewCommand(CMD_TARGET),
    desc: "cells: each layer's top token / the rank and probability of the target (the text's next token; at the last position the model's own top-1)",
    hint: Some("top/target"),
    hint_keys: Some("t"),
    group: Group::ThisView,
    when: When::Always,
}];

/// Columns of the layer labels ("L30 ").
const LABEL_W: u16 = 5;
/// Columns of a cell: a space, the token ([`TOKEN_W`]), a space, the probability ("41%").
const CELL_W: u16 = 12;
const TOKEN_W: usize = 6;
/// Lines above the grid: the cell under the cursor, its top tokens, what the target is.
const HEAD_H: u16 = 3;

/// What a lens is computed for: the model (the address of its weights, shared by every
/// run of it) and the text's token ids. The lens reads the model's own run, so running
/// it again with interventions keeps the same lens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LensKey {
    pub model: usize,
    pub ids: Vec<u32>,
}

pub fn lens_key(s: &ModelSession) -> LensKey {
    LensKey {
        model: Arc::as_ptr(&s.model) as usize,
        ids: s.ids.clone(),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum LensState {
    /// Asked for; the worker computes it.
    Pending,
    Ready(Arc<TextLens>),
    Failed(String),
}

/// The view's own data: the lens of the text on screen and what the cells show.
#[derive(Debug, Clone)]
pub struct LensLab {
    pub key: LensKey,
    pub state: LensState,
    /// Cells show the target's rank and probability instead of the top token.
    pub target: bool,
}

pub fn lab(ctx: &Context) -> Option<&LensLab> {
    ctx.views.get::<LensLab>(ViewKind::Lens)
}

/// The lens the view waits for, if it waits for one of the session on screen.
pub fn wanted(ctx: &Context) -> Option<LensKey> {
    let s = ctx.source.session()?;
    let l = lab(ctx)?;
    let key = lens_key(s);
    (l.state == LensState::Pending && l.key == key && s.config().causal).then_some(key)
}

/// The model's own top-1 after the text (before any intervention): the last
/// position's target.
pub fn final_top(s: &ModelSession) -> Option<u32> {
    let top = s.baseline.as_ref().map_or(&s.top_next, |b| &b.top_next);
    top.first().map(|t| t.id)
}

/// A lesson step's `lens`: the cells show the target (`on`) or the top token, now or
/// when the view opens (a lab for no text yet keeps the choice until then).
pub(crate) fn target_in_lesson(ctx: &mut Context, on: bool) {
    if let Some(l) = ctx.views.get_mut::<LensLab>(ViewKind::Lens) {
        l.target = on;
        return;
    }
    ctx.views.set(
        ViewKind::Lens,
        LensLab {
            key: LensKey {
                model: 0,
                ids: Vec::new(),
            },
            state: LensState::Pending,
            target: on,
        },
    );
}

fn say(lang: Lang, en: &'static str, zh: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

/// A token as the view shows it: whitespace made visible (`show`), and characters that
/// take no column (controls, combining marks, format characters, as some byte-level
/// pieces decode) written as escapes, so every cell keeps its width.
pub fn token_label(piece: &str) -> String {
    let mut out = String::new();
    for c in show(piece).chars() {
        if c.is_control() || unicode_width::UnicodeWidthChar::width(c).is_none_or(|w| w == 0) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A probability as a cell shows it: whole percent, 4 columns.
pub fn percent(p: f64) -> String {
    format!("{:>3.0}%", p * 100.0)
}

/// First of `total` rows (or columns) on screen when `shown` fit: the cursor kept near
/// the middle.
pub(crate) fn first_shown(cur: usize, shown: usize, total: usize) -> usize {
    if total <= shown {
        0
    } else {
        cur.saturating_sub(shown / 2).min(total - shown)
    }
}

/// Where the grid goes: the first row and column shown and how many fit.
struct Grid {
    body: Rect,
    rows: (usize, usize),
    cols: (usize, usize),
}

fn grid(ctx: &Context, s: &ModelSession, area: Rect) -> Grid {
    let body = Rect::new(
        area.x,
        area.y.saturating_add(HEAD_H).min(area.bottom()),
        area.width,
        area.height.saturating_sub(HEAD_H),
    );
    let (layers, n) = (s.config().layers + 1, s.n());
    let shown_rows = (body.height.saturating_sub(1) as usize).min(layers);
    let shown_cols = ((body.width.saturating_sub(LABEL_W) / CELL_W) as usize).min(n);
    Grid {
        body,
        rows: (first_shown(ctx.cursor.0, shown_rows, layers), shown_rows),
        cols: (first_shown(ctx.cursor.1, shown_cols, n), shown_cols),
    }
}

fn row_name(lang: Lang, layer: usize, layers: usize) -> String {
    match (layer, lang) {
        (0, Lang::En) => "the embeddings".to_string(),
        (0, Lang::Zh) => "嵌入".to_string(),
        (l, Lang::En) if l == layers => format!("after layer {l}/{layers} (the model's output)"),
        (l, Lang::Zh) if l == layers => format!("第 {l}/{layers} 层之后（模型的输出）"),
        (l, Lang::En) => format!("after layer {l}/{layers}"),
        (l, Lang::Zh) => format!("第 {l}/{layers} 层之后"),
    }
}

/// What a cell shows: its top token and probability, or the target's rank and
/// probability; the probability colours it.
fn cell_text(s: &ModelSession, cell: &LensCell, target: bool) -> (String, f64) {
    if target {
        return match cell.target {
            Some((rank, p)) => (
                format!(
                    " {} {}",
                    text::left(&format!("#{}", rank + 1), TOKEN_W, "…"),
                    percent(p)
                ),
                p,
            ),
            None => (format!(" {:<w$}", "·", w = CELL_W as usize - 1), 0.0),
        };
    }
    match cell.top.first() {
        Some(t) => (
            format!(
                " {} {}",
                text::left(&token_label(&s.model.tokenizer.piece(t.id)), TOKEN_W, "…"),
                percent(t.prob)
            ),
            t.prob,
        ),
        None => (String::new(), 0.0),
    }
}

/// The three lines over the grid: the cell under the cursor, its top tokens and its
/// target, and what the target is.
fn render_head(ctx: &Context, s: &ModelSession, lens: &TextLens, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let lang = ctx.options.lang;
    let (layer, pos) = ctx.cursor;
    let Some(cell) = lens.cells.get(layer).and_then(|r| r.get(pos)) else {
        return;
    };
    let target = lab(ctx).is_some_and(|l| l.target);
    let piece = |id: u32| token_label(&s.model.tokenizer.piece(id));
    let line = |y: u16| Rect::new(area.x, area.y + y, area.width, 1);
    if area.height == 0 {
        return;
    }
    let token = s.pieces.get(pos).map_or(String::new(), |p| token_label(p));
    let shows = if target {
        say(
            lang,
            "cells: the target's rank and probability",
            "格子：目标词元的排名和概率",
        )
    } else {
        say(lang, "cells: the top token", "格子：最可能的词元")
    };
    Line::from(vec![
        Span::styled(
            format!(
                "{} · {} {}/{} {token} ",
                row_name(lang, layer, s.config().layers),
                say(lang, "position", "位置"),
                pos + 1,
                s.n()
            ),
            t.panel_title,
        ),
        Span::styled(format!("· {shows}"), t.field_name),
    ])
    .render(line(0), buf);
    if area.height < 2 {
        return;
    }
    let mut spans = vec![Span::styled(
        say(lang, "top: ", "前几名：").to_string(),
        t.field_name,
    )];
    for tt in &cell.top {
        spans.push(Span::styled(format!("{} ", piece(tt.id)), t.value));
        spans.push(Span::styled(format!("{:.3}  ", tt.prob), t.field_value));
    }
    if let (Some(id), Some((rank, p))) = (lens.targets.get(pos).copied().flatten(), cell.target) {
        spans.push(Span::styled(
            format!("{} {} ", say(lang, "target", "目标"), piece(id)),
            t.field_name,
        ));
        spans.push(Span::styled(
            format!("#{} {p:.3}", rank + 1,),
            t.field_value,
        ));
    }
    Line::from(spans).render(line(1), buf);
    if area.height < 3 {
        return;
    }
    let mut note = say(
        lang,
        "target: the text's next token; at the last position the model's own top-1",
        "目标：文本里的下一个词元；最后一个位置用模型自己的首选",
    )
    .to_string();
    if s.baseline.is_some() {
        note.push_str(say(
            lang,
            " · the lens reads the model's own run, without the interventions",
            " · 透镜读的是模型自己的运行，不含干预",
        ));
    }
    buf.set_stringn(area.x, area.y + 2, note, area.width as usize, t.dim);
}

fn render_grid(ctx: &Context, s: &ModelSession, lens: &TextLens, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let g = grid(ctx, s, area);
    let body = g.body;
    if body.height == 0 || body.width == 0 {
        return;
    }
    let target = lab(ctx).is_some_and(|l| l.target);
    let (cur_l, cur_p) = ctx.cursor;
    let ellipsis = ctx.glyphs.text("…");
    // The header row: the tokens across, with marks where more columns or layers are
    // off screen.
    let (first_col, cols) = g.cols;
    let (first_row, rows) = g.rows;
    let layers = lens.cells.len();
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
    for (i, p) in (first_col..first_col + cols).enumerate() {
        let x = body.x + LABEL_W + i as u16 * CELL_W;
        let style = if p == cur_p { t.label_active } else { t.label };
        let token = s.pieces.get(p).map_or(String::new(), |p| token_label(p));
        let label = format!(" {}", text::left(&token, CELL_W as usize - 1, &ellipsis));
        buf.set_stringn(x, body.y, label, CELL_W as usize, style);
    }
    let right = body.x + LABEL_W + cols as u16 * CELL_W;
    if first_col + cols < s.n() && right < body.right() {
        buf.set_stringn(right, body.y, "›", 1, t.dim);
    }
    for (r, layer) in (first_row..first_row + rows).enumerate() {
        let y = body.y + 1 + r as u16;
        if y >= body.bottom() {
            break;
        }
        let style = if layer == cur_l {
            t.label_active
        } else {
            t.label
        };
        let label = if layer == 0 {
            "emb".to_string()
        } else {
            format!("L{layer}")
        };
        buf.set_stringn(body.x, y, label, LABEL_W as usize, style);
        let Some(row) = lens.cells.get(layer) else {
            continue;
        };
        for (i, p) in (first_col..first_col + cols).enumerate() {
            let Some(cell) = row.get(p) else {
                continue;
            };
            let x = body.x + LABEL_W + i as u16 * CELL_W;
            let (shown, prob) = cell_text(s, cell, target);
            let mut style = t.heat.cell_style(prob.clamp(0.0, 1.0), false);
            if (layer, p) == (cur_l, cur_p) {
                style = style.add_modifier(t.cursor);
            }
            buf.set_stringn(x, y, shown, CELL_W as usize, style);
        }
    }
}

/// A message in place of the grid, wrapped to the area.
fn render_message(ctx: &Context, msg: &str, area: Rect, buf: &mut Buffer) {
    for (i, l) in text::wrap(msg, area.width.max(1) as usize)
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

impl View for LensView {
    fn kind(&self) -> ViewKind {
        ViewKind::Lens
    }

    fn available(&self, ctx: &Context) -> bool {
        ctx.source.session().is_some()
    }

    fn unavailable(&self) -> &'static str {
        "the lens view shows a real causal model's logit lens: attnviz --model MODEL --tokens TEXT"
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn grid(&self, ctx: &Context) -> (usize, usize) {
        ctx.source
            .session()
            .map_or((0, 0), |s| (s.config().layers + 1, s.n()))
    }

    fn subtitle(&self, ctx: &Context) -> String {
        let Some(s) = ctx.source.session() else {
            return String::new();
        };
        match ctx.options.lang {
            Lang::En => format!(
                "logit lens: each of {} layers' guess at the next token, at {} positions · t: top/target",
                s.config().layers + 1,
                s.n()
            ),
            Lang::Zh => format!(
                "logit lens：{} 层各自对下一个词元的猜测，共 {} 个位置 · t：最可能/目标",
                s.config().layers + 1,
                s.n()
            ),
        }
    }

    /// Opening the view on a text it has no lens of asks for one and puts the cursor on
    /// the model's output at the last position.
    fn refresh(&self, ctx: &mut Context) {
        let Some(s) = ctx.source.session() else {
            return;
        };
        let key = lens_key(s);
        if lab(ctx).is_some_and(|l| l.key == key) {
            return;
        }
        let (layers, n) = (s.config().layers, s.n());
        let target = lab(ctx).is_some_and(|l| l.target);
        ctx.views.set(
            ViewKind::Lens,
            LensLab {
                key,
                state: LensState::Pending,
                target,
            },
        );
        ctx.cursor = (layers, n.saturating_sub(1));
    }

    fn update(&self, ctx: &mut Context, action: Action) {
        match action {
            Action::ViewCommand(CMD_TARGET) => {
                if let Some(l) = ctx.views.get_mut::<LensLab>(ViewKind::Lens) {
                    l.target = !l.target;
                }
            }
            Action::Lens(report) => {
                if let Some(l) = ctx.views.get_mut::<LensLab>(ViewKind::Lens)
                    && l.key.model == report.key.0
                    && l.key.ids == report.key.1
                {
                    l.state = match report.lens {
                        Ok(lens) => LensState::Ready(lens),
                        Err(e) => LensState::Failed(e),
                    };
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
        if !s.config().causal {
            let msg = say(
                lang,
                "The logit lens reads each layer's residual stream through the model's unembedding as if it were the last layer, to watch the next-token prediction form. It needs a causal model with an LM head (GPT-2, Llama, SmolLM2 ...); this model is an encoder (BERT-like), which predicts no next token.",
                "logit lens 把每一层的残差流当作最后一层，经过模型的反嵌入读出来，看下一个词元的预测如何逐层形成。它需要带语言模型头的因果模型（GPT-2、Llama、SmolLM2 等）；这个模型是编码器（类似 BERT），不预测下一个词元。",
            );
            render_message(ctx, msg, area, buf);
            return;
        }
        match lab(ctx).map(|l| &l.state) {
            Some(LensState::Ready(lens)) => {
                render_head(ctx, s, lens, area, buf);
                render_grid(ctx, s, lens, area, buf);
            }
            Some(LensState::Failed(e)) => {
                let msg = format!(
                    "{}{e}",
                    say(lang, "The logit lens failed: ", "logit lens 计算失败：")
                );
                render_message(ctx, &msg, area, buf);
            }
            Some(LensState::Pending) | None => {
                let msg = match lang {
                    Lang::En => format!(
                        "Computing the logit lens: {} layers x {} positions, each through the unembedding of {} tokens ...",
                        s.config().layers + 1,
                        s.n(),
                        s.config().vocab
                    ),
                    Lang::Zh => format!(
                        "正在计算 logit lens：{} 层 x {} 个位置，每格都要经过 {} 个词元的反嵌入……",
                        s.config().layers + 1,
                        s.n(),
                        s.config().vocab
                    ),
                };
                render_message(ctx, &msg, area, buf);
            }
        }
    }

    fn hit_test(&self, ctx: &Context, area: Rect, x: u16, y: u16) -> Option<Hit> {
        let s = ctx.source.session()?;
        if !matches!(lab(ctx).map(|l| &l.state), Some(LensState::Ready(_))) {
            return None;
        }
        let g = grid(ctx, s, area);
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
