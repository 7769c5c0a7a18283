//! The heads that write into the head under the cursor: for its queries, keys and values,
//! the earlier heads ranked by their composition score (Elhage et al. 2021,
//! `model::composition`: how much of what head a writes the head b reads, from the
//! weights alone). The scores of every pair are computed once per model on a worker
//! thread (`tui::lens_worker`); until they arrive the panel says so.

use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::effects::head_name;
use super::lab::{WritersState, lab};
use crate::cli::Lang;
use crate::model::composition::Composition;
use crate::model::session::ModelSession;
use crate::tui::context::Context;
use crate::widgets::text;

/// Lines the panel takes: its title and one line each for q, k and v.
pub const HEIGHT: u16 = 4;

/// What a head reads from the residual stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Q,
    K,
    V,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Q, Kind::K, Kind::V];

    pub fn of(self, c: &Composition) -> f64 {
        match self {
            Kind::Q => c.q,
            Kind::K => c.k,
            Kind::V => c.v,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Q => "q",
            Kind::K => "k",
            Kind::V => "v",
        }
    }
}

/// The model the panel waits for the scores of, if it waits.
pub fn wanted(ctx: &Context) -> Option<usize> {
    let s = ctx.source.session()?;
    let w = &lab(ctx)?.writers;
    (w.shown && w.state == WritersState::Pending && w.model == model_key(s)).then_some(w.model)
}

pub fn model_key(s: &ModelSession) -> usize {
    Arc::as_ptr(&s.model) as usize
}

/// The earlier heads (layer, head, score) writing into (layer, head)'s `kind`, strongest
/// first.
pub fn ranked(
    scores: &[Composition],
    layer: usize,
    head: usize,
    kind: Kind,
) -> Vec<(usize, usize, f64)> {
    let mut out: Vec<_> = scores
        .iter()
        .filter(|c| c.layer_b == layer && c.head_b == head)
        .map(|c| (c.layer_a, c.head_a, kind.of(c)))
        .collect();
    out.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
    out
}

fn say(lang: Lang, en: &'static str, zh: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

pub fn render(ctx: &Context, area: Rect, buf: &mut Buffer) {
    let Some(l) = lab(ctx) else {
        return;
    };
    if area.height == 0 {
        return;
    }
    let t = &ctx.theme;
    let lang = ctx.options.lang;
    let (layer, head) = ctx.cursor;
    let w = area.width as usize;
    let mut put = |y: u16, spans: Vec<Span>| {
        if y < area.height {
            Line::from(spans).render(Rect::new(area.x, area.y + y, area.width, 1), buf);
        }
    };
    let title = match lang {
        Lang::En => format!(
            "writing into {}'s q, k, v (composition from the weights, strongest first) · i: hide",
            head_name(layer, head)
        ),
        Lang::Zh => format!(
            "写入 {} 的 q、k、v 的头（由权重算出的组合分数，从强到弱）· i：隐藏",
            head_name(layer, head)
        ),
    };
    put(
        0,
        vec![Span::styled(
            text::fit(&title, w, ctx.glyphs.ellipsis),
            t.panel_title,
        )],
    );
    let scores = match &l.writers.state {
        WritersState::Ready(s) => s,
        WritersState::Failed(e) => {
            put(
                1,
                vec![Span::styled(text::fit(e, w, ctx.glyphs.ellipsis), t.error)],
            );
            return;
        }
        _ => {
            let msg = say(
                lang,
                "computing the composition scores of every pair of heads…",
                "正在计算每一对头的组合分数……",
            );
            put(1, vec![Span::styled(msg, t.dim)]);
            return;
        }
    };
    if layer == 0 {
        let msg = say(
            lang,
            "no earlier heads: the first layer reads the embeddings",
            "前面没有头：第一层读的是嵌入",
        );
        put(1, vec![Span::styled(msg, t.dim)]);
        return;
    }
    for (i, kind) in Kind::ALL.into_iter().enumerate() {
        let mut spans = vec![Span::styled(format!("{} ", kind.name()), t.field_name)];
        let mut used = 2;
        for (la, ha, v) in ranked(scores, layer, head, kind) {
            let item = format!("{} {:.3}  ", head_name(la, ha), v);
            let width = text::width(&item);
            if used + width > w {
                break;
            }
            used += width;
            spans.push(Span::styled(item, t.field_value));
        }
        put(1 + i as u16, spans);
    }
}
