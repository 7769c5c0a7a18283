//! Drawing the flash view: the layout, the tile grid and its legend, the SRAM panel,
//! the per-row online-softmax table, the output so far and the HBM traffic table. Every
//! number is read from the lab (the engine's trace, the pipeline, the traffic walk).

use ndarray::Array2;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::blocks::{
    Block, Col, GAP, draw_table, grid_widget, marks, place, render_block, small, tile_labels,
    vector,
};
use super::controls::current_tile;
use super::lab::FlashLab;
use crate::engine::flash::LoopOrder;
use crate::engine::mask::TileClass;
use crate::engine::memory::group_digits;
use crate::tui::context::Context;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::{fit_number, significant};
use crate::widgets::{Heatmap, TileGlyphs, TileGridGeometry, ValueScale, text};

/// Lines of the HBM traffic table (narrow screens leave out its note).
const TRAFFIC_H: u16 = 5;
const TRAFFIC_NARROW_H: u16 = 4;
/// Lines of the grid's legend.
const LEGEND_H: u16 = 2;
/// Narrowest left column (the legend's width).
const LEFT_MIN_W: u16 = 24;
/// From this width on the per-row table sits beside the grid, with the reference
/// output and the convergence of the block; below it the table spans the screen.
pub(super) const WIDE: u16 = 110;

struct Areas {
    status: Rect,
    grid: Rect,
    legend: Rect,
    /// Every row's output so far (empty when it does not fit).
    output: Rect,
    sram: Rect,
    /// The per-row online-softmax table, and below it the block's convergence.
    rows: Rect,
    traffic: Rect,
}

/// Lines the per-row table needs: title, header, one per row, the distance line.
fn rows_height(lab: &FlashLab) -> u16 {
    lab.key.br.min(lab.trace.n_q) as u16 + 3
}

fn areas(lab: &FlashLab, area: Rect) -> Areas {
    let wide = area.width >= WIDE;
    let status = Rect::new(area.x, area.y, area.width, 1.min(area.height));
    let traffic_h = if wide { TRAFFIC_H } else { TRAFFIC_NARROW_H };
    let traffic_h = traffic_h.min(area.height.saturating_sub(1));
    let traffic = Rect::new(area.x, area.bottom() - traffic_h, area.width, traffic_h);
    let top_h = area.height.saturating_sub(1 + traffic_h + u16::from(wide));
    // Narrow screens put the per-row table under the grid and SRAM, full width.
    let rows_h = if wide {
        0
    } else {
        rows_height(lab).min(top_h.saturating_sub(LEGEND_H + 2))
    };
    let top = Rect::new(area.x, area.y + 1, area.width, top_h - rows_h);
    let label_w = format!("Q{}", lab.tr().saturating_sub(1)).len() as u16 + 1;
    let grid_need = label_w + 3 * lab.tc() as u16;
    let left_w = grid_need.max(LEFT_MIN_W).min(area.width * 2 / 5);
    let grid_h = (lab.tr() as u16 + 1).min(top.height.saturating_sub(LEGEND_H));
    let grid = Rect::new(top.x, top.y, left_w, grid_h);
    let legend = Rect::new(
        top.x,
        grid.bottom(),
        left_w,
        LEGEND_H.min(top.height - grid_h),
    );
    let out_y = legend.bottom() + 1;
    let out_h = top.bottom().saturating_sub(out_y);
    // The output panel only when all its rows fit.
    let output = if out_h as usize >= lab.trace.n_q + 2 {
        Rect::new(top.x, out_y, left_w, out_h)
    } else {
        Rect::default()
    };
    let right = Rect::new(
        top.x + left_w + GAP,
        top.y,
        top.width.saturating_sub(left_w + GAP),
        top.height,
    );
    let (sram, rows) = if wide {
        // The per-row table keeps its lines (up to half the column); the SRAM blocks
        // get the rest, and the table moves up under them when they need less.
        let table = rows_height(lab).min(right.height / 2).max(4);
        let sram_h = right.height.saturating_sub(table);
        let sram = Rect::new(right.x, right.y, right.width, sram_h);
        let rows = Rect::new(right.x, sram.bottom(), right.width, table);
        (sram, rows)
    } else {
        (right, Rect::new(area.x, top.bottom(), area.width, rows_h))
    };
    Areas {
        status,
        grid,
        legend,
        output,
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

pub fn render(state: &Context, lab: &FlashLab, area: Rect, buf: &mut Buffer) {
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
    render_legend(state, lab, a.legend, buf);
    if !a.output.is_empty() {
        render_output(state, lab, k, a.output, buf);
    }
    let below = render_sram(state, lab, tile, a.sram, buf);
    // On wide screens the table moves up under the blocks when they leave room.
    let rows = if a.rows.x == a.sram.x && below + 1 < a.rows.y {
        Rect::new(
            a.rows.x,
            below + 1,
            a.rows.width,
            a.rows.bottom() - below - 1,
        )
    } else {
        a.rows
    };
    render_rows(state, lab, k, rows, buf);
    render_traffic(state, lab, k, a.traffic, buf);
}

fn order_name(order: LoopOrder) -> &'static str {
    match order {
        LoopOrder::Fa2 => "FA2 query blocks outer",
        LoopOrder::Fa1 => "FA1 key/value blocks outer",
    }
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
    let sep = if wide {
        format!(" {} ", state.glyphs.sep)
    } else {
        state.glyphs.sep.to_string()
    };
    let (order, blocks) = if wide {
        (
            order_name(lab.key.order).to_string(),
            format!(
                "Br {} x Bc {}: {} x {} tiles",
                lab.key.br,
                lab.key.bc,
                lab.tr(),
                lab.tc()
            ),
        )
    } else {
        (
            format!("{:?}", lab.key.order).to_uppercase(),
            format!(
                "Br {} Bc {} ({}x{})",
                lab.key.br,
                lab.key.bc,
                lab.tr(),
                lab.tc()
            ),
        )
    };
    let spans = vec![
        Span::styled(order, t.value),
        Span::styled(sep.clone(), t.dim),
        Span::styled(blocks, t.base),
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

fn render_legend(state: &Context, lab: &FlashLab, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let g = TileGlyphs::new(state.glyphs.ascii);
    let mut w = LineWriter::new(area, buf);
    w.line(vec![
        Span::styled(g.current, t.value),
        Span::styled(" now ", t.dim),
        Span::styled(g.done, t.good),
        Span::styled(" done ", t.dim),
        Span::styled(g.todo, t.dim),
        Span::styled(" to do", t.dim),
    ]);
    let mut spans = vec![
        Span::styled(g.skipped, t.masked),
        Span::styled(" skipped", t.dim),
    ];
    if lab.classes.contains(&TileClass::Partial) {
        spans.push(Span::styled(" ", t.dim));
        spans.push(Span::styled(g.done_partial, t.good));
        spans.push(Span::styled("/", t.dim));
        spans.push(Span::styled(g.todo_partial, t.dim));
        spans.push(Span::styled(" partial", t.dim));
    }
    w.line(spans);
}

/// Draw the SRAM panel: what is on chip for tile (i, j). Returns the first line below
/// what it drew.
fn render_sram(
    state: &Context,
    lab: &FlashLab,
    (i, j): (usize, usize),
    area: Rect,
    buf: &mut Buffer,
) -> u16 {
    if area.height == 0 {
        return area.y;
    }
    let t = &state.theme;
    let g = &state.glyphs;
    let skipped = lab.class(i, j) == TileClass::Empty;
    let fa1 = lab.key.order == LoopOrder::Fa1;
    let q_rows = &lab.query_labels[lab.rows(i)];
    let k_rows = &lab.key_labels[lab.cols(j)];
    let mut blocks = Vec::new();
    if !(skipped && fa1) {
        blocks.push(Block {
            title: format!("Q{i} [{} x {}]", q_rows.len(), lab.q.ncols()),
            data: lab.q_block(i),
            rows: q_rows,
            cols: &lab.dim_labels,
            masked: false,
        });
    }
    if !skipped || fa1 {
        blocks.push(Block {
            title: format!("K{j} [{} x {}]", k_rows.len(), lab.k.ncols()),
            data: lab.k_block(j),
            rows: k_rows,
            cols: &lab.dim_labels,
            masked: false,
        });
        blocks.push(Block {
            title: format!("V{j} [{} x {}]", k_rows.len(), lab.v.ncols()),
            data: lab.v_block(j),
            rows: k_rows,
            cols: &lab.value_labels,
            masked: false,
        });
    }
    // The scores as the kernel computed them in SRAM for this tile.
    let s_data = lab.s_block(lab.index_of((i, j)));
    if let Some(s) = &s_data {
        blocks.push(Block {
            title: format!("S{i},{j} [{} x {}]", q_rows.len(), k_rows.len()),
            data: s.view(),
            rows: q_rows,
            cols: k_rows,
            masked: true,
        });
    }
    // Narrower numbers before fewer blocks: drop blocks from the front (Q first) only
    // when even 5-column cells do not fit, and say which are not drawn.
    let (first, cell, placed) = place(&blocks, area);
    let hidden: Vec<&str> = blocks[..first]
        .iter()
        .map(|b| b.title.split(' ').next().unwrap_or(""))
        .collect();
    let mask_note = match (lab.alibi, lab.classes.iter().any(|c| *c != TileClass::Full)) {
        (true, true) => " + ALiBi + mask",
        (true, false) => " + ALiBi",
        (false, true) => " + mask",
        (false, false) => "",
    };
    let title = if skipped && fa1 {
        format!("SRAM: K{j}, V{j}; skipped: Q{i}, O{i}, l, m stay in HBM")
    } else if skipped {
        format!("SRAM: Q{i}, O{i}, l, m; skipped: K{j}, V{j} not loaded")
    } else if hidden.is_empty() || first == blocks.len() {
        format!("SRAM: Q{i}, K{j}, V{j}, O{i}, l, m and S = Q{i} K{j}ᵀ x scale{mask_note}")
    } else {
        let shown: Vec<&str> = blocks[first..]
            .iter()
            .filter(|b| !b.masked)
            .map(|b| b.title.split(' ').next().unwrap_or(""))
            .collect();
        let shown = if shown.is_empty() {
            String::new()
        } else {
            format!("{}; ", shown.join(", "))
        };
        format!(
            "SRAM ({} not drawn): {shown}S = Q{i} K{j}ᵀ x scale{mask_note}",
            hidden.join(", ")
        )
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

/// The online softmax of each row of the tile's query block, and how close O is.
fn render_rows(state: &Context, lab: &FlashLab, k: usize, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    let t = &state.theme;
    let g = &state.glyphs;
    let uni = !g.ascii;
    let wide = area.width + GAP + LEFT_MIN_W >= WIDE;
    let ev = lab.event(k);
    let before = lab.before(k);
    let n = ev.rows.len();
    let nw = if wide { 6 } else { 5 };
    let dv = lab.trace.dv;
    // Room for the output vectors: as many values as fit, the rest elided.
    // row, token, m old, m new, rescale, l, distance, and two columns between each.
    let fixed = 3 + 6 + 3 * nw + 7 + 10 + 2 * 8;
    let vec_w = |k: usize| k * (nw + 1) - 1;
    let want_ref = wide && area.width as usize >= fixed + 2 + 2 * vec_w(dv.min(4));
    let per_vec = if want_ref {
        (area.width as usize).saturating_sub(fixed + 2) / 2
    } else {
        (area.width as usize).saturating_sub(fixed)
    };
    let shown = ((per_vec + 1) / (nw + 1)).clamp(1, dv);
    let elide = |v: &[f64]| {
        let mut s = vector(&v[..shown.min(v.len())], nw, uni);
        if shown < v.len() {
            s.push(' ');
            s.push_str(g.ellipsis);
        }
        s
    };
    let num = |x: f64| fit_number(x, nw, uni);
    let m_old: Vec<f64> = (0..n)
        .map(|r| before.map_or(f64::NEG_INFINITY, |b| b.m[r]))
        .collect();
    let mut cols = vec![
        Col {
            head: "row".into(),
            cells: ev.rows.clone().map(|r| r.to_string()).collect(),
            style: t.label,
        },
        Col {
            head: "token".into(),
            cells: ev
                .rows
                .clone()
                .map(|r| text::fit(&lab.query_labels[r], 6, g.ellipsis))
                .collect(),
            style: t.label,
        },
        Col {
            head: "m old".into(),
            cells: m_old.iter().map(|&x| num(x)).collect(),
            style: t.dim,
        },
        Col {
            head: "m new".into(),
            cells: ev.m.iter().map(|&x| num(x)).collect(),
            style: t.value,
        },
        Col {
            head: "rescale".into(),
            cells: ev.alpha.iter().map(|&x| num(x)).collect(),
            style: t.formula,
        },
        Col {
            head: "l".into(),
            cells: ev.l.iter().map(|&x| num(x)).collect(),
            style: t.value,
        },
        Col {
            head: format!("O{} so far", ev.q_block),
            cells: ev.o.iter().map(|o| elide(o)).collect(),
            style: t.base,
        },
    ];
    if want_ref {
        let cells = ev
            .rows
            .clone()
            .map(|r| elide(&lab.reference.row(r).to_vec()))
            .collect();
        cols.push(Col {
            head: "O reference (f64)".into(),
            cells,
            style: t.dim,
        });
    }
    cols.push(Col {
        head: "max|O-ref|".into(),
        cells: (0..n).map(|r| small(lab.row_distance(k, r))).collect(),
        style: t.warn,
    });
    let mut w = LineWriter::new(area, buf);
    let title = format!(
        "{} after (Q{}, K{}): m new = max(m old, row max of S), rescale = exp(m old - m new), l = rescale l + row sum of exp(S - m new)",
        row_range(&ev.rows),
        ev.q_block,
        ev.k_block
    );
    w.line(vec![Span::styled(
        text::fit(&g.text(&title), area.width as usize, g.ellipsis),
        t.panel_title,
    )]);
    // Keep the distance line: drop rows that do not fit.
    let room = w.rows_left().saturating_sub(2) as usize;
    for c in &mut cols {
        c.cells.truncate(room);
    }
    draw_table(&cols, t.field_name, &mut w);
    let (line, style) = distance_line(lab, k);
    w.line(vec![Span::styled(
        text::fit(&g.text(&line), area.width as usize, g.ellipsis),
        style.pick(t),
    )]);
    if wide && w.rows_left() >= 3 {
        w.y += 1;
        render_convergence(state, lab, k, &mut w);
    }
}

/// "row 6" or "rows 2-3".
pub(super) fn row_range(rows: &std::ops::Range<usize>) -> String {
    if rows.len() == 1 {
        format!("row {}", rows.start)
    } else {
        format!("rows {}-{}", rows.start, rows.end - 1)
    }
}

/// Which theme style a line takes.
#[derive(Clone, Copy)]
enum Tone {
    Good,
    Pending,
}

impl Tone {
    fn pick(self, t: &crate::tui::theme::Theme) -> Style {
        match self {
            Tone::Good => t.good,
            Tone::Pending => t.warn,
        }
    }
}

/// How far the tile's block (and at the end the whole head) is from the reference.
fn distance_line(lab: &FlashLab, k: usize) -> (String, Tone) {
    let ev = lab.event(k);
    let (b, rows) = (ev.q_block, &ev.rows);
    let d = small(lab.block_distance(k));
    if k + 1 == lab.tiles() {
        let rows = match lab.trace.n_q {
            1 => "the row is final".to_string(),
            n => format!("all {n} rows final"),
        };
        (
            format!(
                "last tile done: {rows}, max |O - O_ref| = {} over the head (f32 kernel vs f64 reference)",
                small(lab.final_distance())
            ),
            Tone::Good,
        )
    } else if lab.block_final[b] <= k {
        let rest = if lab.trace.events[k + 1..].iter().any(|e| e.q_block == b) {
            " (rest masked)"
        } else {
            ""
        };
        (
            format!("{} final{rest}: max |O{b} - O_ref| = {d}", row_range(rows)),
            Tone::Good,
        )
    } else {
        let last_key = lab.cols(ev.k_block).end - 1;
        (
            format!("O{b} after keys 0-{last_key}, not final yet: max |O{b} - O_ref| = {d}"),
            Tone::Pending,
        )
    }
}

/// The block's distance from the reference after each of its tiles so far, on a log
/// scale: the online softmax converging.
fn render_convergence(state: &Context, lab: &FlashLab, k: usize, w: &mut LineWriter) {
    let t = &state.theme;
    let g = &state.glyphs;
    let b = lab.event(k).q_block;
    let mut chain = vec![k];
    while let Some(p) = lab.prev_in_block[*chain.last().unwrap_or(&k)] {
        chain.push(p);
    }
    chain.reverse();
    w.line(vec![Span::styled(
        format!("max |O{b} - O_ref| tile by tile (log scale, 1e-9 to 1):"),
        t.panel_title,
    )]);
    let room = w.rows_left() as usize;
    let skip = chain.len().saturating_sub(room);
    if skip > 0 {
        chain.drain(..skip);
    }
    let bar_w = w.area.width.saturating_sub(22) as f64;
    for e in chain {
        let ev = lab.event(e);
        let label = format!("  after K{:<3}", ev.k_block);
        if ev.skipped {
            w.line(vec![
                Span::styled(label, t.label),
                Span::styled("skipped (masked): O unchanged", t.dim),
            ]);
            continue;
        }
        let d = lab.block_distance(e);
        let f = if d > 0.0 {
            ((d.log10() + 9.0) / 9.0).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let cells = (f * bar_w).round() as usize;
        w.line(vec![
            Span::styled(label, t.label),
            Span::styled(format!("{:>8} ", small(d)), t.value),
            Span::styled(g.eighths[7].repeat(cells), t.formula),
        ]);
    }
}

/// Every row's output so far: finished blocks are final, others partial.
fn render_output(state: &Context, lab: &FlashLab, k: usize, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let g = &state.glyphs;
    let (o, done): (Array2<f64>, Vec<bool>) = lab.output_after(k);
    let final_rows = done.iter().filter(|d| **d).count();
    let title = format!("O so far ({final_rows}/{} final)", o.nrows());
    buf.set_stringn(
        area.x,
        area.y,
        text::fit(&title, area.width as usize, g.ellipsis),
        area.width as usize,
        t.panel_title,
    );
    let ev = lab.event(k);
    let lit: Vec<(usize, usize)> = ev
        .rows
        .clone()
        .flat_map(|r| (0..o.ncols()).map(move |c| (r, c)))
        .collect();
    let heat = Heatmap {
        data: o.view(),
        row_labels: &lab.query_labels,
        col_labels: &lab.value_labels,
        scale: ValueScale::fit(lab.reference.iter().copied()),
        painter: &t.heat,
        glyphs: g,
        style: t.heatmap_style(),
        cursor: None,
        highlight: &lit,
        masked: None,
        max_cell: 7,
    };
    (&heat).render(
        Rect::new(area.x, area.y + 1, area.width, area.height - 1),
        buf,
    );
}

/// The elements each algorithm moves between HBM and SRAM, from the engine's walk.
fn render_traffic(state: &Context, lab: &FlashLab, k: usize, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let g = &state.glyphs;
    let wide = area.width >= 110;
    let running = lab.key.order;
    let r = &lab.report;
    let now = lab.traffic().after[k];
    let name = |o: LoopOrder| match (o, wide) {
        (LoopOrder::Fa2, true) => "FA2 (Dao 2023, Algorithm 1)",
        (LoopOrder::Fa2, false) => "FA2 (2023, Alg 1)",
        (LoopOrder::Fa1, true) => "FA1 (Dao et al. 2022, Algorithm 1)",
        (LoopOrder::Fa1, false) => "FA1 (2022, Alg 1)",
    };
    let mark = |o: LoopOrder| if o == running { g.marker } else { " " };
    let so_far = |o: LoopOrder| {
        if o == running {
            group_digits(now.total())
        } else {
            "-".into()
        }
    };
    let theta = |th: &str, v: f64| format!("Theta({th}) = {}", significant(v, 3));
    let rows = [
        (
            format!("{} {}", mark(LoopOrder::Fa2), name(LoopOrder::Fa2)),
            so_far(LoopOrder::Fa2),
            group_digits(lab.fa2.total().total()),
            group_digits(lab.fa2.dense.total()),
            theta(r.flash2.theta, r.flash2.theta_value),
        ),
        (
            format!("{} {}", mark(LoopOrder::Fa1), name(LoopOrder::Fa1)),
            so_far(LoopOrder::Fa1),
            group_digits(lab.fa1.total().total()),
            group_digits(lab.fa1.dense.total()),
            theta(r.flash.theta, r.flash.theta_value),
        ),
        (
            format!(
                "  {}",
                if wide {
                    "standard (Algorithm 0)"
                } else {
                    "standard (Alg 0)"
                }
            ),
            "-".into(),
            group_digits(lab.fa1.standard.total()),
            group_digits(lab.fa1.standard.total()),
            theta(r.standard.theta, r.standard.theta_value),
        ),
    ];
    let narrow_head = format!("HBM<->SRAM, M={}", group_digits(lab.sram_elements));
    let heads = if wide {
        [
            "HBM <-> SRAM, elements",
            "after this tile",
            "this run",
            "no skipping",
            "order of growth",
        ]
    } else {
        [narrow_head.as_str(), "so far", "run", "dense", "growth"]
    };
    let cols: Vec<Col> = (0..5)
        .map(|c| Col {
            head: heads[c].into(),
            cells: rows
                .iter()
                .map(|row| match c {
                    0 => text::left(&row.0, if wide { 36 } else { 19 }, g.ellipsis),
                    1 => row.1.clone(),
                    2 => row.2.clone(),
                    3 => row.3.clone(),
                    _ => text::left(&row.4, if wide { 30 } else { 26 }, g.ellipsis),
                })
                .collect(),
            style: if c == 1 { t.value } else { t.base },
        })
        .collect();
    let mut w = LineWriter::new(area, buf);
    draw_table(&cols, t.panel_title, &mut w);
    if !wide {
        return;
    }
    let std_total = lab.fa1.standard.total() as f64;
    let ratio = |x: u64| std_total / x.max(1) as f64;
    let note = format!(
        "M = 2(Br+Bc)d + Br Bc = {} on chip; N = {}, d = {}; standard moves {}x FA2's, {}x FA1's",
        group_digits(lab.sram_elements),
        lab.trace.n_k,
        lab.trace.d,
        significant(ratio(lab.fa2.total().total()), 3),
        significant(ratio(lab.fa1.total().total()), 3),
    );
    w.line(vec![Span::styled(
        text::fit(&g.text(&note), area.width as usize, g.ellipsis),
        t.dim,
    )]);
}
