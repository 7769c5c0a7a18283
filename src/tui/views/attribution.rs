//! The attribution view: direct logit attribution (`model::attribution`) of a real causal
//! model's answer at the last position. The answer is the model's own top-1 after the
//! text (the target) against its top-2 (the foil); logit(target) - logit(foil) splits into
//! the embeddings', every head's, every attention bias's and MLP's, and the final norm's
//! parts. Layers run down and heads across, each head's cell its signed part, coloured
//! by its share; the MLP's part ends each row. The lines above add the parts up and set
//! the sum beside the model's own logit difference, read from its logits.
//!
//! The attribution is one forward pass over the text: the view asks for it when it opens
//! (its lab is `Pending`), the event loop's worker computes it off the UI thread (as it
//! does the lens), and the view folds the report in.

use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::cli::Lang;
use crate::model::attribution::Attribution;
use crate::model::predict::TopToken;
use crate::model::session::ModelSession;
use crate::tui::action::Action;
use crate::tui::component::{Hit, View};
use crate::tui::context::Context;
use crate::tui::view_kind::ViewKind;
use crate::tui::views::lens::{LensKey, first_shown, lens_key, token_label};
use crate::widgets::text;

pub struct AttributionView;

/// Columns of the layer labels ("L30 ").
const LABEL_W: u16 = 5;
/// Columns of a cell (" +0.86").
const CELL_W: u16 = 7;
/// Lines above the grid.
const HEAD_H: u16 = 3;

/// What the view shows: the attribution and the answer it splits.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub attribution: Arc<Attribution>,
    pub target: TopToken,
    pub foil: TopToken,
}

impl Answer {
    /// logit(target) - logit(foil) as the model's own logits give it.
    pub fn own(&self) -> f64 {
        self.target.logit as f64 - self.foil.logit as f64
    }

    /// The attribution's total as it compares with the logits (after a soft cap).
    pub fn total(&self) -> f64 {
        self.attribution
            .capped_total
            .unwrap_or(self.attribution.total)
    }

    /// Do the parts add up to the model's own difference (within 1e-3 of its size, plus
    /// 1e-3)?
    pub fn adds_up(&self) -> bool {
        let own = self.own();
        let sum = if self.attribution.capped_total.is_some() {
            // A soft cap bends the sum; the parts add up to the uncapped total.
            self.attribution.total
        } else {
            self.attribution.sum()
        };
        let total_ok = (self.total() - own).abs() <= 1e-3 * own.abs() + 1e-3;
        let sum_ok = (sum - self.attribution.total).abs() <= 1e-3 * own.abs() + 1e-3;
        total_ok && sum_ok
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttributionState {
    /// Asked for: the answer (the model's top-1) and the foil (its top-2) to split.
    Pending {
        target: TopToken,
        foil: TopToken,
    },
    Ready(Answer),
    Failed(String),
}

/// The view's own data: the answer of the text on screen, or why there is none.
#[derive(Debug, Clone)]
pub struct AttributionLab {
    pub key: LensKey,
    pub state: AttributionState,
}

pub fn lab(ctx: &Context) -> Option<&AttributionLab> {
    ctx.views.get::<AttributionLab>(ViewKind::Attribution)
}

fn answer(ctx: &Context) -> Option<&Answer> {
    match &lab(ctx)?.state {
        AttributionState::Ready(a) => Some(a),
        _ => None,
    }
}

/// The attribution the view waits for, if it waits for one of the session on screen:
/// its key, target and foil.
pub fn wanted(ctx: &Context) -> Option<(LensKey, u32, u32)> {
    let s = ctx.source.session()?;
    let l = lab(ctx)?;
    let AttributionState::Pending { target, foil } = &l.state else {
        return None;
    };
    (l.key == lens_key(s)).then(|| (l.key.clone(), target.id, foil.id))
}

fn say(lang: Lang, en: &'static str, zh: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

/// What the view asks for: the model's own answer after the text (its top-1 against its
/// top-2), or why it cannot split one.
fn request(s: &ModelSession, lang: Lang) -> AttributionState {
    if !s.config().causal {
        return AttributionState::Failed(say(
            lang,
            "Direct logit attribution splits the model's next-token logits into the parts each head and MLP wrote; it needs a causal model with an LM head (GPT-2, Llama, SmolLM2 ...), and this model is an encoder (BERT-like).",
            "直接 logit 归因把模型下一个词元的 logit 拆成每个头和 MLP 写入的部分；它需要带语言模型头的因果模型（GPT-2、Llama、SmolLM2 等），而这个模型是编码器（类似 BERT）。",
        )
        .to_string());
    }
    // The model's own run, before any ablation.
    let top = s.baseline.as_ref().map_or(&s.top_next, |b| &b.top_next);
    match (top.first(), top.get(1)) {
        (Some(&target), Some(&foil)) => AttributionState::Pending { target, foil },
        _ => AttributionState::Failed("the model gave no next-token predictions".into()),
    }
}

struct Grid {
    body: Rect,
    rows: (usize, usize),
    cols: (usize, usize),
}

/// Heads across (then the MLP's column), layers down.
fn grid(ctx: &Context, s: &ModelSession, area: Rect) -> Grid {
    let body = Rect::new(
        area.x,
        area.y.saturating_add(HEAD_H).min(area.bottom()),
        area.width,
        area.height.saturating_sub(HEAD_H),
    );
    let (layers, heads) = (s.config().layers, s.config().heads);
    let shown_rows = (body.height.saturating_sub(1) as usize).min(layers);
    // One column kept for the MLP when the heads do not all fit.
    let fit = (body.width.saturating_sub(LABEL_W) / CELL_W) as usize;
    let shown_cols = if fit > heads {
        heads
    } else {
        fit.saturating_sub(1)
    };
    Grid {
        body,
        rows: (first_shown(ctx.cursor.0, shown_rows, layers), shown_rows),
        cols: (first_shown(ctx.cursor.1, shown_cols, heads), shown_cols),
    }
}

/// A part as a cell shows it: signed, two decimals.
pub fn part(v: f64) -> String {
    format!("{v:+.2}")
}

fn render_head(ctx: &Context, s: &ModelSession, ans: &Answer, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let lang = ctx.options.lang;
    let a = &ans.attribution;
    let piece = |id: u32| token_label(&s.model.tokenizer.piece(id));
    let line = |y: u16| Rect::new(area.x, area.y + y, area.width, 1);
    if area.height == 0 {
        return;
    }
    let n = s.n();
    let last = s.pieces.last().map_or(String::new(), |p| token_label(p));
    Line::from(vec![
        Span::styled(
            format!(
                "logit({}) - logit({}) {} {n}/{n} {last} = {:.3} ",
                piece(ans.target.id),
                piece(ans.foil.id),
                say(lang, "at position", "位置"),
                ans.total()
            ),
            t.panel_title,
        ),
        Span::styled(
            say(
                lang,
                "· target: the model's top-1, foil: its top-2",
                "· 目标：模型的首选，对照：它的第二选择",
            ),
            t.field_name,
        ),
    ])
    .render(line(0), buf);
    if area.height < 2 {
        return;
    }
    let heads: f64 = a.heads.iter().flatten().sum();
    let bias: f64 = a.attn_bias.iter().sum();
    let mlp: f64 = a.mlp.iter().sum();
    let (mark, style) = if ans.adds_up() {
        ("✓", t.good)
    } else {
        ("✗", t.error)
    };
    // The whole line, or where it does not fit the width, without the parts that are
    // exactly zero (a model without biases) and with a shorter label, so the check at its
    // end stays on screen.
    let build = |short: bool| {
        let mut spans = Vec::new();
        for (name, v) in [
            (say(lang, "embed", "嵌入"), a.embed),
            (say(lang, "heads", "头"), heads),
            (say(lang, "attn bias", "注意力偏置"), bias),
            ("MLP", mlp),
            (say(lang, "norm bias", "归一化偏置"), a.norm_bias),
        ] {
            if short && v == 0.0 {
                continue;
            }
            spans.push(Span::styled(format!("{name} "), t.field_name));
            spans.push(Span::styled(format!("{v:+.3}  "), t.field_value));
        }
        spans.push(Span::styled(format!("= {:.3} · ", a.sum()), t.field_value));
        let label = match short {
            false => say(lang, "the model's own logits: ", "模型自己的 logit："),
            true => say(lang, "own logits: ", "自身 logit："),
        };
        spans.push(Span::styled(label.to_string(), t.field_name));
        spans.push(Span::styled(format!("{:.3} ", ans.own()), t.field_value));
        spans.push(Span::styled(ctx.glyphs.text(mark).into_owned(), style));
        Line::from(spans)
    };
    let full = build(false);
    let spans = if full.width() <= area.width as usize {
        full
    } else {
        build(true)
    };
    spans.render(line(1), buf);
    if area.height < 3 {
        return;
    }
    let (layer, head) = ctx.cursor;
    if let Some(v) = a.heads.get(layer).and_then(|r| r.get(head)) {
        let share = if a.total != 0.0 {
            format!(" ({:+.0}%)", 100.0 * v / a.total)
        } else {
            String::new()
        };
        let mut spans = vec![
            Span::styled(
                format!(
                    "{} {}/{} {} {}: ",
                    say(lang, "layer", "层"),
                    layer + 1,
                    s.config().layers,
                    say(lang, "head", "头"),
                    head + 1
                ),
                t.field_name,
            ),
            Span::styled(format!("{v:+.3}{share}"), t.field_value),
        ];
        let (b, m) = (a.attn_bias[layer], a.mlp[layer]);
        spans.push(Span::styled(
            format!("  {} ", say(lang, "attn bias", "注意力偏置")),
            t.field_name,
        ));
        spans.push(Span::styled(format!("{b:+.3}"), t.field_value));
        spans.push(Span::styled("  MLP ", t.field_name));
        spans.push(Span::styled(format!("{m:+.3}"), t.field_value));
        Line::from(spans).render(line(2), buf);
    }
}

fn render_grid(ctx: &Context, s: &ModelSession, ans: &Answer, area: Rect, buf: &mut Buffer) {
    let t = &ctx.theme;
    let g = grid(ctx, s, area);
    let body = g.body;
    if body.height == 0 || body.width == 0 {
        return;
    }
    let a = &ans.attribution;
    // Colours: each part against the largest head's, so the heads that matter stand out.
    let scale = a
        .heads
        .iter()
        .flatten()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(1e-9);
    let (cur_l, cur_h) = ctx.cursor;
    let (first_col, cols) = g.cols;
    let (first_row, rows) = g.rows;
    let layers = a.heads.len();
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
    for (i, h) in (first_col..first_col + cols).enumerate() {
        let x = body.x + LABEL_W + i as u16 * CELL_W;
        let style = if h == cur_h { t.label_active } else { t.label };
        let label = text::right(&format!("h{}", h + 1), CELL_W as usize, "…");
        buf.set_stringn(x, body.y, label, CELL_W as usize, style);
    }
    let mlp_x = body.x + LABEL_W + cols as u16 * CELL_W;
    if mlp_x + CELL_W <= body.right() {
        let label = text::right("MLP", CELL_W as usize, "…");
        buf.set_stringn(mlp_x, body.y, label, CELL_W as usize, t.label);
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
        buf.set_stringn(
            body.x,
            y,
            format!("L{}", layer + 1),
            LABEL_W as usize,
            style,
        );
        let Some(row) = a.heads.get(layer) else {
            continue;
        };
        for (i, h) in (first_col..first_col + cols).enumerate() {
            let Some(&v) = row.get(h) else {
                continue;
            };
            let x = body.x + LABEL_W + i as u16 * CELL_W;
            let mut style = t.heat.cell_style((v / scale).clamp(-1.0, 1.0), true);
            if (layer, h) == (cur_l, cur_h) {
                style = style.add_modifier(t.cursor);
            }
            let shown = text::right(&part(v), CELL_W as usize, "…");
            buf.set_stringn(x, y, shown, CELL_W as usize, style);
        }
        if mlp_x + CELL_W <= body.right()
            && let Some(&m) = a.mlp.get(layer)
        {
            let style = t.heat.cell_style((m / scale).clamp(-1.0, 1.0), true);
            let shown = text::right(&part(m), CELL_W as usize, "…");
            buf.set_stringn(mlp_x, y, shown, CELL_W as usize, style);
        }
    }
}

impl View for AttributionView {
    fn kind(&self) -> ViewKind {
        ViewKind::Attribution
    }

    fn available(&self, ctx: &Context) -> bool {
        ctx.source.session().is_some()
    }

    fn unavailable(&self) -> &'static str {
        "the attribution view splits a real causal model's answer: attnviz --model MODEL --tokens TEXT"
    }

    fn grid(&self, ctx: &Context) -> (usize, usize) {
        ctx.source
            .session()
            .map_or((0, 0), |s| (s.config().layers, s.config().heads))
    }

    fn subtitle(&self, ctx: &Context) -> String {
        match ctx.options.lang {
            Lang::En => {
                "direct logit attribution: what each head and MLP wrote toward the answer".into()
            }
            Lang::Zh => "直接 logit 归因：每个头和 MLP 对答案各写了多少".into(),
        }
    }

    /// Opening the view on a text it has no attribution of makes it and puts the cursor
    /// on the head with the largest part.
    fn refresh(&self, ctx: &mut Context) {
        let Some(s) = ctx.source.session() else {
            return;
        };
        let key = lens_key(s);
        if lab(ctx).is_some_and(|l| l.key == key) {
            return;
        }
        let state = request(s, ctx.options.lang);
        ctx.views
            .set(ViewKind::Attribution, AttributionLab { key, state });
    }

    /// A report of the worker: the answer, and the cursor on the head with the largest
    /// part.
    fn update(&self, ctx: &mut Context, action: Action) {
        let Action::Attribution(report) = action else {
            return;
        };
        let Some(l) = ctx.views.get_mut::<AttributionLab>(ViewKind::Attribution) else {
            return;
        };
        if (l.key.model, &l.key.ids) != (report.key.0, &report.key.1) {
            return;
        }
        let AttributionState::Pending { target, foil } = l.state else {
            return;
        };
        match report.attribution {
            Ok(a) => {
                let heads = &a.heads;
                let biggest = (0..heads.len())
                    .flat_map(|l| (0..heads[l].len()).map(move |h| (l, h)))
                    .max_by(|x, y| heads[x.0][x.1].abs().total_cmp(&heads[y.0][y.1].abs()));
                l.state = AttributionState::Ready(Answer {
                    attribution: a,
                    target,
                    foil,
                });
                // A lesson's highlight keeps the cursor where the lesson put it.
                if let Some(c) = biggest
                    && ctx.highlight.is_empty()
                {
                    ctx.cursor = c;
                }
            }
            Err(e) => l.state = AttributionState::Failed(e),
        }
    }

    fn render(&self, ctx: &Context, area: Rect, buf: &mut Buffer) {
        let Some(s) = ctx.source.session() else {
            return;
        };
        let msg = match lab(ctx).map(|l| &l.state) {
            Some(AttributionState::Ready(ans)) => {
                render_head(ctx, s, ans, area, buf);
                render_grid(ctx, s, ans, area, buf);
                return;
            }
            Some(AttributionState::Failed(msg)) => msg.clone(),
            Some(AttributionState::Pending { .. }) | None => match ctx.options.lang {
                Lang::En => format!(
                    "Computing the attribution: one forward pass over {} tokens, keeping every head's output ...",
                    s.n()
                ),
                Lang::Zh => format!(
                    "正在计算归因：对 {} 个词元做一次前向计算，保留每个头的输出……",
                    s.n()
                ),
            },
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
        let s = ctx.source.session()?;
        answer(ctx)?;
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
