//! The frame's layout: its regions (header, view, narration, hint bar), where the
//! header's view tabs and stage breadcrumb sit, and mouse hit-testing against the same
//! geometry. `render` draws into these rectangles and `update` hit-tests clicks with
//! them, so the two cannot disagree.

use ratatui::layout::{Constraint, Layout, Position, Rect};

use crate::engine::pipeline::StageId;
use crate::tui::component::Hit;
use crate::tui::context::Context;
use crate::tui::view_kind::ViewKind;
use crate::tui::views;
use crate::widgets::text;

/// The smallest terminal the app draws in; below it a message says so.
pub const MIN_COLS: u16 = 80;
pub const MIN_ROWS: u16 = 24;

/// The regions of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regions {
    pub header: Rect,
    pub body: Rect,
    pub narration: Rect,
    pub hints: Rect,
}

pub fn regions(area: Rect) -> Regions {
    let [header, _, body, narration, hints] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(2),
        Constraint::Length(1),
    ])
    .areas(area);
    Regions {
        header,
        body,
        narration,
        hints,
    }
}

/// The view tabs of the header's first line, with their positions.
pub fn tabs(state: &Context, area: Rect) -> Vec<(Rect, ViewKind)> {
    let mut x = area.x + tabs_start(state, area.width);
    let mut out = Vec::new();
    for v in views::VIEWS {
        let w = v.kind().name().len() as u16 + 2;
        if x + w > area.right() {
            break;
        }
        out.push((Rect::new(x, area.y, w, 1), v.kind()));
        x += w + 1;
    }
    out
}

/// The title as the header shows it: at most a third of the width, and never so wide
/// that it pushes view tabs off the line (at 80 columns it gives way to all seven tabs).
pub fn header_title(state: &Context, width: u16) -> String {
    let tabs_w: usize = views::VIEWS.iter().map(|v| v.kind().name().len() + 3).sum();
    let room = (width as usize).saturating_sub(" attnviz ".len() + 3 + tabs_w);
    let max = (width / 3) as usize;
    let w = if room >= 4 { room.min(max) } else { 0 };
    text::fit(&state.options.title, w, state.glyphs.ellipsis)
}

fn tabs_start(state: &Context, width: u16) -> u16 {
    (" attnviz ".len() + text::width(&header_title(state, width)) + 3) as u16
}

/// The stage breadcrumb: a window of stages around the current one that fits.
pub fn breadcrumb(state: &Context, area: Rect) -> Vec<(Rect, StageId)> {
    let stages = &state.pipeline.stages;
    let widths: Vec<u16> = stages
        .iter()
        .map(|s| text::width(&state.glyphs.text(s.title)) as u16 + 2)
        .collect();
    let sep = text::width(state.glyphs.next) as u16;
    let here = stages.iter().position(|s| s.id == state.stage).unwrap_or(0);
    // Grow a window around the current stage, leaving room for the ellipses.
    let room = area.width.saturating_sub(4);
    let (mut lo, mut hi) = (here, here);
    let mut used = widths[here];
    loop {
        let mut grew = false;
        if hi + 1 < stages.len() && used + sep + widths[hi + 1] <= room {
            hi += 1;
            used += sep + widths[hi];
            grew = true;
        }
        if lo > 0 && used + sep + widths[lo - 1] <= room {
            lo -= 1;
            used += sep + widths[lo];
            grew = true;
        }
        if !grew {
            break;
        }
    }
    let mut x = area.x + 2;
    let mut out = Vec::new();
    for (i, s) in stages.iter().enumerate().take(hi + 1).skip(lo) {
        out.push((Rect::new(x, area.y, widths[i], 1), s.id));
        x += widths[i] + sep;
    }
    out
}

/// What is under (x, y) on a screen of `state.screen` size (with no overlay open).
pub fn hit_test(state: &Context, x: u16, y: u16) -> Option<Hit> {
    let area = Rect::new(0, 0, state.screen.0, state.screen.1);
    if area.width < MIN_COLS || area.height < MIN_ROWS {
        return None;
    }
    let r = regions(area);
    let pos = Position::new(x, y);
    if r.header.contains(pos) {
        let [l1, l2, _] = Layout::vertical([Constraint::Length(1); 3]).areas(r.header);
        if y == l1.y {
            return tabs(state, l1)
                .into_iter()
                .find(|(rect, _)| rect.contains(pos))
                .map(|(_, k)| Hit::View(k));
        }
        if y == l2.y && views::current(state).shows_stages() {
            return breadcrumb(state, l2)
                .into_iter()
                .find(|(rect, _)| rect.contains(pos))
                .map(|(_, id)| Hit::Stage(id));
        }
        return None;
    }
    if r.body.contains(pos) {
        return views::current(state).hit_test(state, r.body, x, y);
    }
    None
}
