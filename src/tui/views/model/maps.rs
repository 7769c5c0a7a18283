//! Every layer x head as a small attention map. A map has fewer cells than the text has
//! tokens once n outgrows it: each cell then summarises a block of weights by its mean
//! or its maximum (`b` switches; `z` `Z` make the maps smaller or larger), and the
//! footer says which. Every map shares the scale 0..1, so bright means a large weight
//! in every head; with `w`, a large contribution (rows of both sum to 1).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::widgets::Widget;

use crate::model::session::{Measure, ModelSession};
use crate::tui::context::Context;
use crate::widgets::minimap::MiniMap;
use crate::widgets::pooled::{Viewport, pool_rows};
use crate::widgets::{ValueScale, text};

/// Columns of the layer labels ("L30").
const LABEL_W: u16 = 3;
/// Narrowest map worth drawing.
const MIN_MAP_W: u16 = 3;

/// Where the maps go.
#[derive(Debug, Clone, Copy)]
struct Grid {
    map_w: u16,
    map_h: u16,
    /// Matrix cells across and down a map, and the entries each covers each way.
    cells: usize,
    per_cell: usize,
    first_layer: usize,
    rows: usize,
    origin: (u16, u16),
}

fn grid(ctx: &Context, s: &ModelSession, maps: Rect) -> Grid {
    let (layers, heads) = (s.config().layers, s.config().heads.max(1));
    let n = s.n().max(1);
    let mono = ctx.theme.heat.is_mono();
    // Each map has a one-column gap on its left (where the cursor's bracket goes).
    let room = maps.width.saturating_sub(LABEL_W) / heads as u16;
    let widest = room.saturating_sub(1).max(MIN_MAP_W) as usize;
    // Entries per cell: enough for the text to fit the width, or more when zoomed out.
    let per_cell = n.div_ceil(widest).max(ctx.zoom.per_cell).max(1);
    let cells = n.div_ceil(per_cell);
    // Square in weights: two weights per row in colour (half blocks), one in mono.
    let per_row = if mono { 1 } else { 2 };
    let map_w = cells as u16;
    let map_h = cells.div_ceil(per_row).max(1) as u16;
    // A row of head numbers on top, then layer rows with a one-line gap.
    let rows = (maps.height.saturating_sub(1) + 1) / (map_h + 1);
    let rows = (rows.max(1) as usize).min(layers);
    let cursor_layer = ctx.cursor.0.min(layers.saturating_sub(1));
    let first_layer = cursor_layer
        .saturating_sub(rows / 2)
        .min(layers.saturating_sub(rows));
    Grid {
        map_w,
        map_h,
        cells,
        per_cell,
        first_layer,
        rows,
        origin: (maps.x + LABEL_W + 1, maps.y + 1),
    }
}

impl Grid {
    fn map_rect(&self, layer: usize, head: usize) -> Option<Rect> {
        if layer < self.first_layer || layer >= self.first_layer + self.rows {
            return None;
        }
        let r = (layer - self.first_layer) as u16;
        Some(Rect::new(
            self.origin.0 + head as u16 * (self.map_w + 1),
            self.origin.1 + r * (self.map_h + 1),
            self.map_w,
            self.map_h,
        ))
    }
}

/// The maps and the footer line under them.
fn split(area: Rect) -> [Rect; 2] {
    Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(area)
}

/// The maps of `s`; with `minus`, each weight of `s` minus the same weight of the second
/// text's run (a signed scale, -1..1).
pub fn render(
    ctx: &Context,
    s: &ModelSession,
    minus: Option<&ModelSession>,
    m: Measure,
    area: Rect,
    buf: &mut Buffer,
) {
    let Some(shown) = s.maps(m) else {
        return;
    };
    let other = minus.and_then(|o| o.maps(Measure::Weights));
    let shown_w = s.maps(Measure::Weights);
    // The difference is of the weights (the second run keeps no contributions).
    let (shown, other) = match (other, shown_w) {
        (Some(o), Some(w)) if o.n() == w.n() => (w, Some(o)),
        _ => (shown, None),
    };
    let t = &ctx.theme;
    let [maps, foot] = split(area);
    let g = grid(ctx, s, maps);
    let (heads, n) = (s.config().heads, s.n());
    let (cur_l, cur_h) = ctx.cursor;
    // Head numbers over the columns.
    for h in 0..heads {
        let x = g.origin.0 + h as u16 * (g.map_w + 1);
        if x + g.map_w > maps.right() {
            break;
        }
        let label = text::fit(&format!("h{}", h + 1), g.map_w as usize, "");
        let style = if h == cur_h { t.label_active } else { t.label };
        buf.set_stringn(x, maps.y, label, g.map_w as usize, style);
    }
    let vp = Viewport {
        row0: 0,
        col0: 0,
        per_cell: g.per_cell,
    };
    let how = ctx.zoom.pool;
    let scale = match other {
        Some(_) => ValueScale::Diverging { abs: 1.0 },
        None => ValueScale::Sequential { lo: 0.0, hi: 1.0 },
    };
    let ablated = &s.options.ablate;
    // Keyed by the maps drawn: the weights and the contributions each have theirs, and a
    // difference its own.
    let id = (shown as *const _ as usize)
        ^ other.map_or(0, |o| (o as *const _ as usize).rotate_left(17));
    let key = |layer: usize, h: usize| (id, layer, h, g.per_cell, how);
    // Row i of the map drawn: the weights, or the first run's minus the second's (the
    // second's row read into `b`, one buffer per map).
    let fill = |layer: usize, h: usize, i: usize, row: &mut [f32], b: &mut Vec<f32>| {
        let len = shown.row_prefix_into(layer, h, i, row);
        let Some(o) = other else {
            return len;
        };
        b.clear();
        b.resize(row.len(), 0.0);
        let lb = o.row_prefix_into(layer, h, i, b);
        let len = len.max(lb);
        for (a, b) in row[..len].iter_mut().zip(&b[..len]) {
            *a -= b;
        }
        len
    };
    let fits = |layer: usize, h: usize| {
        g.map_rect(layer, h)
            .is_some_and(|r| r.y < maps.bottom() && r.intersection(maps).width >= g.map_w)
    };
    let visible: Vec<_> = (g.first_layer..g.first_layer + g.rows)
        .flat_map(|layer| (0..heads).map(move |h| (layer, h)))
        .filter(|&(layer, h)| fits(layer, h))
        .map(|(layer, h)| key(layer, h))
        .collect();
    ctx.cache.fill_maps(&visible, |&(_, layer, h, _, _)| {
        let mut b = Vec::new();
        pool_rows(n, n, &vp, g.cells, g.cells, how, |i, row| {
            fill(layer, h, i, row, &mut b)
        })
    });
    for layer in g.first_layer..g.first_layer + g.rows {
        let y = g.origin.1 + (layer - g.first_layer) as u16 * (g.map_h + 1);
        if y >= maps.bottom() {
            break;
        }
        let style = if layer == cur_l {
            t.label_active
        } else {
            t.label
        };
        buf.set_stringn(
            maps.x,
            y,
            format!("L{}", layer + 1),
            LABEL_W as usize,
            style,
        );
        for h in 0..heads {
            let Some(rect) = g.map_rect(layer, h) else {
                continue;
            };
            let rect = rect.intersection(maps);
            if rect.width < g.map_w {
                break;
            }
            let values = ctx.cache.map(key(layer, h), || {
                let mut b = Vec::new();
                pool_rows(n, n, &vp, g.cells, g.cells, how, |i, row| {
                    fill(layer, h, i, row, &mut b)
                })
            });
            (&MiniMap {
                values: &values,
                rows: g.cells,
                cols: g.cells,
                scale,
                painter: &t.heat,
                glyphs: &ctx.glyphs,
                base: t.base,
            })
                .render(rect, buf);
            if ablated.contains(&(layer, h)) {
                // An ablated head's output is zeroed: cross it out.
                buf.set_stringn(rect.x, rect.y, "╳", 1, t.error);
            }
            if (layer, h) == (cur_l, cur_h) {
                // Brackets either side of the head under the cursor.
                let mark = t.label_active.add_modifier(t.highlight);
                for dy in 0..rect.height {
                    if rect.x > maps.x + LABEL_W {
                        buf.set_stringn(rect.x - 1, rect.y + dy, "▐", 1, mark);
                    }
                    if rect.right() < maps.right() {
                        buf.set_stringn(rect.right(), rect.y + dy, "▌", 1, mark);
                    }
                }
            }
        }
    }
    let per = g.per_cell;
    let (one, many) = match m {
        Measure::Weights => ("weight", "weights"),
        Measure::Contributions => ("contribution", "contributions"),
    };
    let summary = if per > 1 {
        format!(
            "each cell: the {} of a {per}x{per} block of {many} (b: {})",
            how.name(),
            how.toggled().name()
        )
    } else {
        format!("each cell: one {one}")
    };
    let summary = match other {
        Some(_) => format!("the first text's weights minus the second's · {summary}"),
        None => summary,
    };
    let shown = format!(
        "layers {}-{} of {} · {summary} · scale {} · z/Z: smaller/larger maps",
        g.first_layer + 1,
        g.first_layer + g.rows,
        s.config().layers,
        if other.is_some() { "-1..1" } else { "0..1" }
    );
    buf.set_stringn(
        foot.x,
        foot.y,
        text::fit(&shown, foot.width as usize, ctx.glyphs.ellipsis),
        foot.width as usize,
        t.dim,
    );
}

/// The (layer, head) of the map under (x, y).
pub fn hit(ctx: &Context, s: &ModelSession, area: Rect, x: u16, y: u16) -> Option<(usize, usize)> {
    let g = grid(ctx, s, split(area)[0]);
    let pos = Position::new(x, y);
    for layer in g.first_layer..g.first_layer + g.rows {
        for h in 0..s.config().heads {
            if g.map_rect(layer, h).is_some_and(|r| r.contains(pos)) {
                return Some((layer, h));
            }
        }
    }
    None
}
