//! Attention rollout (Abnar & Zuidema 2020) as one map: how much of each token's final
//! representation traces back to each input token through every layer's attention,
//! with the residual stream counted as half of each layer (0.5 A + 0.5 I). Computed by
//! `model::scores::rollout`; O(L n^3), so the app computes it for texts of up to
//! [`MAX_TOKENS`] tokens (`attnviz model run --rollout` takes any length).

use ndarray::Array2;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};

use crate::engine::pipeline::Matrix;
use crate::model::scores;
use crate::model::session::{Measure, ModelSession};
use crate::tui::context::Context;
use crate::tui::views::panel::{MAX_CELL, MatrixPanel};
use crate::widgets::token_links::show;
use crate::widgets::{ValueScale, text};

/// Longest text the app rolls out (256 tokens: 30 layers take about a second).
pub const MAX_TOKENS: usize = 256;

const ABOUT_EN: &str = "Rollout multiplies the layers' head-averaged weights, each mixed half and half with the identity for the residual stream: row i says where token i's final state came from. In causal models most of it drains to the first tokens.";
const ABOUT_ZH: &str = "Rollout 把各层按头平均后的权重连乘，每层都与单位矩阵各占一半以代表残差连接：第 i 行表示词元 i 的最终状态来自哪里。在因果模型里，大部分会流向开头的几个词元。";

/// Is the text short enough for the app to roll it out?
pub fn fits(s: &ModelSession) -> bool {
    s.n() <= MAX_TOKENS
}

/// The rollout of this model session's weights or contributions (n x n, row-major), if
/// the text is short enough and the session keeps them (on a worker thread: about a
/// second at [`MAX_TOKENS`]).
pub fn compute(s: &ModelSession, m: Measure) -> Option<Vec<f64>> {
    let maps = s.maps(m)?;
    fits(s).then(|| {
        let mut r = scores::Rollout::new(s.n());
        for l in 0..maps.layers() {
            r.push_layer(&maps.layer(l), s.config().heads);
        }
        r.finish()
    })
}

pub fn render(
    ctx: &Context,
    s: &ModelSession,
    m: Measure,
    rollout: Option<&[f64]>,
    area: Rect,
    buf: &mut Buffer,
) {
    let t = &ctx.theme;
    let [about, map] = Layout::vertical([Constraint::Length(2), Constraint::Fill(1)]).areas(area);
    let about_text = match ctx.options.lang {
        crate::cli::Lang::En => ABOUT_EN,
        crate::cli::Lang::Zh => ABOUT_ZH,
    };
    for (i, l) in text::wrap(about_text, about.width as usize)
        .iter()
        .take(about.height as usize)
        .enumerate()
    {
        buf.set_stringn(about.x, about.y + i as u16, l, about.width as usize, t.dim);
    }
    let n = s.n();
    let Some(r) = rollout else {
        if fits(s) {
            buf.set_stringn(
                map.x,
                map.y,
                "computing the rollout through every layer…",
                map.width as usize,
                t.dim,
            );
            return;
        }
        buf.set_stringn(
            map.x,
            map.y,
            format!(
                "the app rolls out texts of up to {MAX_TOKENS} tokens; this one has {n}: attnviz model run MODEL --text .. --rollout computes it"
            ),
            map.width as usize,
            t.warn,
        );
        return;
    };
    let labels: Vec<String> = s
        .pieces
        .iter()
        .map(|p| ctx.glyphs.text(&show(p)).into_owned())
        .collect();
    let Ok(data) = Array2::from_shape_vec((n, n), r.to_vec()) else {
        return;
    };
    let m = Matrix::new(
        match m {
            Measure::Weights => format!("rollout over {} layers", s.config().layers),
            Measure::Contributions => format!(
                "rollout of the contributions over {} layers",
                s.config().layers
            ),
        },
        data,
        labels.clone(),
        labels,
    );
    (MatrixPanel {
        matrix: &m,
        title: m.name.clone(),
        title_style: t.panel_title,
        cursor: None,
        highlight: &[],
        masked: None,
        scale: ValueScale::fit(r.iter().copied()),
        legend: true,
        max_cell: MAX_CELL,
    })
    .render(ctx, map, buf);
}
