//! Linear attention, phi(x) = elu(x) + 1: phi(Q) (phi(K)^T V) beside softmax attention,
//! its d x dv state against the n x n matrix, and how far the outputs differ.

use ndarray::Array2;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};

use super::grid::token;
use super::lab::VariantsLab;
use crate::engine::memory::group_digits;
use crate::engine::pipeline::Matrix;
use crate::tui::context::Context;
use crate::tui::views::panel::{MAX_CELL, MatrixPanel};
use crate::widgets::ValueScale;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::{fit_number, significant};

pub(super) fn render_linear(state: &Context, lab: &VariantsLab, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let all = match &lab.linear {
        Ok(l) => l,
        Err(e) => return LineWriter::new(area, buf).text(e, th.warn),
    };
    let h = state.head.min(all.len().saturating_sub(1));
    let Some(cmp) = all.get(h) else {
        return;
    };
    let n = cmp.n_k;
    let (ci, cj) = (
        state.cursor.0.min(cmp.n_q.saturating_sub(1)),
        state.cursor.1.min(n.saturating_sub(1)),
    );
    // The panels as tall as their rows need (title, header, rows, legend); text below.
    let text_min = 7u16.min(area.height / 2);
    let panel_h = (cmp.n_q as u16 + 3).min(area.height.saturating_sub(text_min));
    let [panels, below] =
        Layout::vertical([Constraint::Length(panel_h), Constraint::Fill(1)]).areas(area);
    let [a, b] = Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)])
        .spacing(2)
        .areas(panels);
    let qlabels: Vec<String> = (n - cmp.n_q..n).map(|k| token(lab, k)).collect();
    let klabels: Vec<String> = (0..n).map(|k| token(lab, k)).collect();
    let causal = cmp.causal;
    let masked = |r: usize, c: usize| causal && c + cmp.n_q > r + cmp.n_k;
    // One scale for both, so equal weights look equal.
    let scale = ValueScale::fit(
        cmp.softmax_weights
            .iter()
            .chain(cmp.linear_weights.iter())
            .copied(),
    );
    for (rect, name, weights) in [
        (
            a,
            format!("softmax weights (head {})", h + 1),
            &cmp.softmax_weights,
        ),
        (
            b,
            format!("linear: phi(q).phi(k) / sum (head {})", h + 1),
            &cmp.linear_weights,
        ),
    ] {
        let m = Matrix::new(name, weights.clone(), qlabels.clone(), klabels.clone());
        MatrixPanel {
            matrix: &m,
            title: m.name.clone(),
            title_style: th.panel_title,
            cursor: Some((ci, cj)),
            highlight: &[],
            masked: causal.then_some(&masked),
            scale,
            legend: true,
            max_cell: MAX_CELL,
        }
        .render(state, rect, buf);
    }

    let mut w = LineWriter::new(below, buf);
    w.text(
        &format!(
            "phi(x) = elu(x) + 1 > 0; out = phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1){}",
            if causal {
                ", prefix sums for causal"
            } else {
                ""
            }
        ),
        th.formula,
    );
    w.text(
        &format!(
            "state phi(K)^T V: d x dv = {} x {} = {} numbers (+ {} normaliser) against softmax's n x n = {}",
            cmp.d, cmp.dv, cmp.state_elements, cmp.normaliser_elements, cmp.matrix_elements
        ),
        th.base,
    );
    w.text(
        &format!(
            "multiply-adds: linear {} (O(n d^2)), softmax {} (O(n^2 d))",
            group_digits(cmp.linear_madds),
            group_digits(cmp.softmax_madds)
        ),
        th.base,
    );
    w.text(
        &format!(
            "outputs differ: max|linear - softmax| {}, relative {} (head {})",
            significant(cmp.max_abs_diff, 3),
            significant(cmp.rel_diff, 3),
            h + 1
        ),
        th.warn,
    );
    let row = |m: &Array2<f64>| -> String {
        let k = 6.min(m.ncols());
        let mut parts: Vec<String> = (0..k)
            .map(|c| fit_number(m[[ci, c]], 6, !state.glyphs.ascii))
            .collect();
        if m.ncols() > k {
            parts.push("..".into());
        }
        parts.join(" ")
    };
    let q = qlabels.get(ci).cloned().unwrap_or_default();
    w.text(
        &format!("'{q}' softmax out: {}", row(&cmp.softmax_out)),
        th.dim,
    );
    w.text(
        &format!("'{q}' linear out:  {}", row(&cmp.linear.out)),
        th.dim,
    );
}
