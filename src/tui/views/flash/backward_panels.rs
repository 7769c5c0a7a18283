//! Drawing the flash view's backward mode: the tile grid lit in the backward's order
//! (key blocks outer), what is on chip for the tile (the recomputed S, P = exp(S - L)
//! and dS = P (dP - D), and the dK_j, dV_j accumulators), each row's L, D and dQ so far,
//! and the HBM traffic of the backward beside the forward's. Every number is read from
//! the lab: the kernel's own backward, recorded through its observer.

use ndarray::Array2;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::backward_lab::BackwardLab;
use super::blocks::{
    Block, Col, GAP, draw_table, grid_widget, marks, place, render_block, small, tile_labels,
    vector,
};
use super::controls::current_tile;
use super::lab::FlashLab;
use crate::engine::mask::TileClass;
use crate::engine::memory::group_digits;
use crate::engine::memory_backward::BACKWARD_FORMULA;
use crate::tui::context::Context;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::{fit_number, significant};
use crate::widgets::{TileGridGeometry, text};

/// From this width on the status and traffic lines use their long forms.
const WIDE: u16 = 110;
/// Lines of the traffic table: header, backward, forward, standard backward, formula.
const TRAFFIC_H: u16 = 5;
/// Lines under the grid: the legend and the accumulation note.
const LEGEND_H: u16 = 2;
const LEFT_MIN_W: u16 = 24;

struct Areas {
    status: Rect,
    grid: Rect,
    legend: Rect,
    sram: Rect,
    rows: Rect,
    traffic: Rect,
}

fn areas(lab: &FlashLab, area: Rect) -> Areas {
    let status = Rect::new(area.x, area.y, area.width, 1.min(area.height));
    let traffic_h = TRAFFIC_H.min(area.height.saturating_sub(1));
    let traffic = Rect::new(area.x, area.bottom() - traffic_h, area.width, traffic_h);
    let top_h = area.height.saturating_sub(1 + traffic_h);
    let top = Rect::new(area.x, area.y + 1, area.width, top_h);
    let label_w = format!("Q{}", lab.tr().saturating_sub(1)).len() as u16 + 1;
    let left_w = (label_w + 3 * lab.tc() as u16)
        .max(LEFT_MIN_W)
        .min(area.width * 2 / 5);
    let grid_h = (lab.tr() as u16 + 1).min(top.height.saturating_sub(LEGEND_H));
    let grid = Rect::new(top.x, top.y, left_w, grid_h);
    let legend_h = top.height.saturating_sub(grid_h);
    let legend = Rect::new(top.x, grid.bottom(), left_w, legend_h);
    let right = Rect::new(
        top.x + left_w + GAP,
        top.y,
        top.width.saturating_sub(left_w + GAP),
        top.height,
    );
    // The per-row table: title, header, one line per row of the block, the final line.
    let table = (lab.key.br.min(lab.trace.n_q) as u16 + 3).min(right.height / 2);
    let sram = Rect::new(right.x, right.y, right.width, right.height - table);
    let rows = Rect::new(right.x, sram.bottom(), right.width, table);
    Areas {
        status,
        grid,
        legend,
        sram,
        rows,
        traffic,
    }
}

/// The tile under a click.
pub fn tile_at(
    state: &Context,
    lab: &FlashLab,
    area: Rect,
    x: u16,
    y: u16,
) -> Option<(usize, usize)> {
    let a = areas(lab, area);
    let (rows, cols) = (tile_labels("Q", lab.tr()), tile_labels("K", lab.tc()));
    let m = marks(lab, 0);
    let g: TileGridGeometry = grid_widget(state, &m, &rows, &cols, lab).geometry(a.grid);
    g.cell_at(x, y)
}

pub fn render(state: &Context, lab: &FlashLab, bw: &BackwardLab, area: Rect, buf: &mut Buffer) {
    if area.height < 4 || area.width < 20 {
        return;
    }
    let a = areas(lab, area);
    let tile = current_tile(state, lab);
    let k = lab.index_of(tile);
    render_status(state, lab, tile, k, a.status, buf);
    let (rows, cols) = (tile_labels("Q", lab.tr()), tile_labels("K", lab.tc()));
    let m = marks(lab, k);
    (&grid_widget(state, &m, &rows, &cols, lab)).render(a.grid, buf);
    render_legend(state, bw, k, a.legend, buf);
    let below = render_sram(state, lab, bw, k, a.sram, buf);
    let rows = if below + 1 < a.rows.y {
        Rect::new(
            a.rows.x,
            below + 1,
            a.rows.width,
            a.rows.bottom() - below - 1,
        )
    } else {
        a.rows
    };
    render_rows(state, lab, bw, k, rows, buf);
    render_traffic(state, lab, bw, k, a.traffic, buf);
}

fn render_status(
    state: &Context,
    lab: &FlashLab,
    tile: (usize, usize),
    k: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let t = &state.theme;
    let c = &state.flash;
    let what = match lab.class(tile.0, tile.1) {
        TileClass::Empty => "skipped (all masked)",
        TileClass::Partial => "partly masked",
        TileClass::Full => "computed",
    };
    let (play, rate, lit) = match state.animation_rate {
        Some(r) => ("lesson", r, true),
        None if c.playing => ("playing", c.tiles_per_second(), true),
        None => ("paused", c.tiles_per_second(), false),
    };
    let wide = area.width >= WIDE;
    let sep = format!(" {} ", state.glyphs.sep);
    let order = if wide {
        "BACKWARD, key blocks outer"
    } else {
        "BACKWARD"
    };
    let spans = vec![
        Span::styled(order, t.value),
        Span::styled(sep.clone(), t.dim),
        Span::styled(
            format!(
                "Br {} Bc {} ({}x{})",
                lab.key.br,
                lab.key.bc,
                lab.tr(),
                lab.tc()
            ),
            t.base,
        ),
        Span::styled(sep.clone(), t.dim),
        Span::styled(format!("tile {}/{}", k + 1, lab.tiles()), t.value),
        Span::styled(format!(" (Q{}, K{}) {what}", tile.0, tile.1), t.base),
        Span::styled(sep, t.dim),
        Span::styled(
            format!("{play} {}/s", significant(rate, 3)),
            if lit { t.key } else { t.dim },
        ),
    ];
    Line::from(spans).render(area, buf);
}

/// The legend, then how far dK_j, dV_j have summed.
fn render_legend(state: &Context, bw: &BackwardLab, k: usize, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let g = crate::widgets::TileGlyphs::new(state.glyphs.ascii);
    let mut w = LineWriter::new(area, buf);
    w.line(vec![
        Span::styled(g.current, t.value),
        Span::styled(" now ", t.dim),
        Span::styled(g.done, t.good),
        Span::styled(" done ", t.dim),
        Span::styled(g.skipped, t.masked),
        Span::styled(" skipped", t.dim),
    ]);
    let ev = bw.event(k);
    let j = ev.k_block;
    let note = format!(
        "dK{j}, dV{j}: sum of {} query block(s) so far",
        bw.summed_over(k)
    );
    let lines = text::wrap(&note, area.width as usize);
    for l in lines {
        w.line(vec![Span::styled(l, t.formula)]);
    }
}

/// Draw what is on chip for the tile at position `k`: S, P, dS and dK_j, dV_j after it.
/// Returns the first line below what it drew.
fn render_sram(
    state: &Context,
    lab: &FlashLab,
    bw: &BackwardLab,
    k: usize,
    area: Rect,
    buf: &mut Buffer,
) -> u16 {
    if area.height == 0 {
        return area.y;
    }
    let t = &state.theme;
    let g = &state.glyphs;
    let ev = bw.event(k);
    let (i, j) = (ev.q_block, ev.k_block);
    let q_rows = &lab.query_labels[ev.rows.clone()];
    let k_rows = &lab.key_labels[ev.cols.clone()];
    let mats = bw.tile_matrices(k);
    let dk = bw.key_grads(k, false);
    let dv = bw.key_grads(k, true);
    let mut blocks = Vec::new();
    if let Some([s, p, ds]) = &mats {
        let dims = format!("[{} x {}]", q_rows.len(), k_rows.len());
        for (name, m) in [("S", s), ("P", p), ("dS", ds)] {
            blocks.push(Block {
                title: format!("{name}{i},{j} {dims}"),
                data: m.view(),
                rows: q_rows,
                cols: k_rows,
                masked: name == "S",
            });
        }
    }
    blocks.push(Block {
        title: format!("dK{j} [{} x {}]", k_rows.len(), dk.ncols()),
        data: dk.view(),
        rows: k_rows,
        cols: &lab.dim_labels,
        masked: false,
    });
    blocks.push(Block {
        title: format!("dV{j} [{} x {}]", k_rows.len(), dv.ncols()),
        data: dv.view(),
        rows: k_rows,
        cols: &lab.value_labels,
        masked: false,
    });
    let (first, cell, placed) = place(&blocks, area);
    let title = if ev.skipped {
        format!(
            "SRAM: K{j}, V{j}, dK{j}, dV{j} stay; tile (Q{i}, K{j}) masked: Q{i}, dO{i}, L, D, dQ{i} not loaded"
        )
    } else {
        format!(
            "SRAM: K{j}, V{j}, dK{j}, dV{j} stay; Q{i}, dO{i}, L, D, dQ{i} in: S recomputed, P = exp(S - L), dS = P (dP - D) x scale, dP = dO V{j}ᵀ"
        )
    };
    let title = if first > 0 {
        let hidden: Vec<&str> = blocks[..first]
            .iter()
            .map(|b| b.title.split(' ').next().unwrap_or(""))
            .collect();
        format!("({} not drawn) {title}", hidden.join(", "))
    } else {
        title
    };
    buf.set_stringn(
        area.x,
        area.y,
        text::fit(&g.text(&title), area.width as usize, g.ellipsis),
        area.width as usize,
        t.panel_title,
    );
    let bottom = placed
        .iter()
        .map(|r| r.bottom())
        .max()
        .unwrap_or(area.y + 1);
    for (b, rect) in blocks[first..].iter().zip(placed) {
        render_block(state, b, rect, cell, buf);
    }
    bottom
}

/// Each row of the tile's query block: L (the forward's log-sum-exp), D and dQ so far.
fn render_rows(
    state: &Context,
    lab: &FlashLab,
    bw: &BackwardLab,
    k: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.height < 3 {
        return;
    }
    let t = &state.theme;
    let g = &state.glyphs;
    let uni = !g.ascii;
    let ev = bw.event(k);
    let nw = 6;
    let d = bw.trace.d;
    let fixed = 3 + 6 + 2 * nw + 10 + 2 * 5;
    let room = (area.width as usize).saturating_sub(fixed);
    let shown = ((room + 1) / (nw + 1)).clamp(1, d);
    let elide = |v: &[f64]| {
        let mut s = vector(&v[..shown.min(v.len())], nw, uni);
        if shown < v.len() {
            s.push(' ');
            s.push_str(g.ellipsis);
        }
        s
    };
    let num = |x: f64| fit_number(x, nw, uni);
    let rows = ev.rows.clone();
    let dq_ref: Array2<f64> = bw.ref_dq.slice(ndarray::s![rows.clone(), ..]).to_owned();
    let mut cols = vec![
        Col {
            head: "row".into(),
            cells: rows.clone().map(|r| r.to_string()).collect(),
            style: t.label,
        },
        Col {
            head: "token".into(),
            cells: rows
                .clone()
                .map(|r| text::fit(&lab.query_labels[r], 6, g.ellipsis))
                .collect(),
            style: t.label,
        },
        Col {
            head: "L".into(),
            cells: rows.clone().map(|r| num(bw.trace.lse[r])).collect(),
            style: t.dim,
        },
        Col {
            head: "D".into(),
            cells: rows.clone().map(|r| num(bw.trace.d_rows[r])).collect(),
            style: t.formula,
        },
        Col {
            head: format!("dQ{} so far", ev.q_block),
            cells: ev.dq.iter().map(|x| elide(x)).collect(),
            style: t.base,
        },
    ];
    // dQ_i sums over the key blocks: it is final after the last key block.
    let final_now = ev.k_block + 1 == lab.tc();
    cols.push(Col {
        head: "max|dQ-ref|".into(),
        cells: ev
            .dq
            .iter()
            .zip(dq_ref.rows())
            .map(|(a, b)| {
                let dist = a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0, f64::max);
                if final_now {
                    small(dist)
                } else {
                    "partial".into()
                }
            })
            .collect(),
        style: t.warn,
    });
    let mut w = LineWriter::new(area, buf);
    let title = format!(
        "{} after (Q{}, K{}): L from the forward, D = rowsum(dO ∘ O), dQ{} += dS K{}",
        super::panels::row_range(&rows),
        ev.q_block,
        ev.k_block,
        ev.q_block,
        ev.k_block
    );
    w.line(vec![Span::styled(
        text::fit(&g.text(&title), area.width as usize, g.ellipsis),
        t.panel_title,
    )]);
    let left = w.rows_left().saturating_sub(2) as usize;
    for c in &mut cols {
        c.cells.truncate(left);
    }
    draw_table(&cols, t.field_name, &mut w);
    let line = if k + 1 == bw.tiles() {
        let (q, kk, v) = bw.final_distances();
        format!(
            "last tile: dQ, dK, dV final; max |x - x_ref| dQ {}, dK {}, dV {} (f32 kernel vs f64 reference)",
            small(q),
            small(kk),
            small(v)
        )
    } else {
        let j = ev.k_block;
        format!(
            "dK{j}, dV{j} += over query blocks (on chip); dQ{} += over key blocks (in HBM)",
            ev.q_block
        )
    };
    w.line(vec![Span::styled(
        text::fit(&g.text(&line), area.width as usize, g.ellipsis),
        if k + 1 == bw.tiles() { t.good } else { t.dim },
    )]);
}

/// The elements the backward moves between HBM and SRAM, beside the forward's.
fn render_traffic(
    state: &Context,
    lab: &FlashLab,
    bw: &BackwardLab,
    k: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let t = &state.theme;
    let g = &state.glyphs;
    let wide = area.width >= WIDE;
    let tr = &bw.traffic;
    let now = tr.after[k.min(tr.after.len() - 1)];
    let rows = [
        (
            format!("{} backward (Dao 2023, Alg 2)", g.marker),
            group_digits(now.total()),
            group_digits(tr.total().total()),
            group_digits(tr.dense.total()),
        ),
        (
            "  forward FA2 (Alg 1)".to_string(),
            "-".into(),
            group_digits(lab.fa2.total().total()),
            group_digits(lab.fa2.dense.total()),
        ),
        (
            "  standard backward (P, dP, dS in HBM)".to_string(),
            "-".into(),
            group_digits(tr.standard.total()),
            group_digits(tr.standard.total()),
        ),
    ];
    let heads = [
        "HBM <-> SRAM, elements",
        "after this tile",
        "this run",
        "no skipping",
    ];
    let cols: Vec<Col> = (0..4)
        .map(|c| Col {
            head: heads[c].into(),
            cells: rows
                .iter()
                .map(|r| match c {
                    0 => text::left(&r.0, if wide { 38 } else { 30 }, g.ellipsis),
                    1 => r.1.clone(),
                    2 => r.2.clone(),
                    _ => r.3.clone(),
                })
                .collect(),
            style: if c == 1 { t.value } else { t.base },
        })
        .collect();
    let mut w = LineWriter::new(area, buf);
    draw_table(&cols, t.panel_title, &mut w);
    let ratio = tr.total().total() as f64 / lab.fa2.total().total().max(1) as f64;
    let note = format!(
        "backward/forward {}x; dense = {BACKWARD_FORMULA}",
        significant(ratio, 3)
    );
    w.line(vec![Span::styled(
        text::fit(&g.text(&note), area.width as usize, g.ellipsis),
        t.dim,
    )]);
}
