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

/// The view tabs of the header's first line, with their positions: every view that can
/// show the data, or, when they do not all fit, a run of them around the open one.
pub fn tabs(state: &Context, area: Rect) -> Vec<(Rect, ViewKind)> {
    let shown = views::shown(state);
    let widths: Vec<u16> = shown.iter().map(|v| tab_width(v.kind())).collect();
    let start = area.x + tabs_start(state, area.width);
    let room = area.right().saturating_sub(start);
    let here = shown
        .iter()
        .position(|v| v.kind() == state.view)
        .unwrap_or(0);
    let (lo, hi) = tab_window(&widths, here, room);
    // A tab left out on the left leaves room for the ellipsis that says so.
    let mut x = start + if lo > 0 { 2 } else { 0 };
    let mut out = Vec::new();
    for (v, w) in shown.iter().zip(&widths).take(hi).skip(lo) {
        out.push((Rect::new(x, area.y, *w, 1), v.kind()));
        x += w + 1;
    }
    out
}

/// Are there tabs left out to the left and to the right of [`tabs`]?
pub fn tabs_left_out(state: &Context, area: Rect) -> (bool, bool) {
    let shown = views::shown(state);
    let tabs = tabs(state, area);
    let first = tabs.first().map(|t| t.1);
    let last = tabs.last().map(|t| t.1);
    (
        first != shown.first().map(|v| v.kind()),
        last != shown.last().map(|v| v.kind()),
    )
}

fn tab_width(kind: ViewKind) -> u16 {
    kind.name().len() as u16 + 2
}

/// The widest run lo..hi of tabs around `here` that fits `room` columns (a gap of 1
/// between tabs; 2 columns for each ellipsis of a left-out side).
fn tab_window(widths: &[u16], here: usize, room: u16) -> (usize, usize) {
    let total: u16 = widths.iter().map(|w| w + 1).sum();
    if total <= room + 1 || widths.is_empty() {
        return (0, widths.len());
    }
    let here = here.min(widths.len() - 1);
    let fits = |lo: usize, hi: usize| {
        let used: u16 = widths[lo..hi].iter().map(|w| w + 1).sum();
        let marks = 2 * (u16::from(lo > 0) + u16::from(hi < widths.len()));
        used + marks <= room + 1
    };
    let (mut lo, mut hi) = (here, here + 1);
    loop {
        if hi < widths.len() && fits(lo, hi + 1) {
            hi += 1;
        } else if lo > 0 && fits(lo - 1, hi) {
            lo -= 1;
        } else {
            break;
        }
    }
    (lo, hi)
}

/// The title as the header shows it: at most a third of the width, and never so wide
/// that it pushes view tabs off the line (at 80 columns it gives way to all the tabs
/// of a lesson).
pub fn header_title(state: &Context, width: u16) -> String {
    let tabs_w: usize = views::shown(state)
        .iter()
        .map(|v| tab_width(v.kind()) as usize + 1)
        .sum();
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

#[cfg(test)]
mod tests {
    use super::tab_window;

    #[test]
    fn tabs_that_fit_are_all_shown() {
        assert_eq!(tab_window(&[5, 5, 5], 1, 17), (0, 3));
    }

    #[test]
    fn the_open_tab_is_always_in_the_window() {
        let w = [10u16; 9];
        for here in 0..9 {
            let (lo, hi) = tab_window(&w, here, 40);
            assert!(lo <= here && here < hi, "{here}: {lo}..{hi}");
            let used: u16 = w[lo..hi].iter().map(|w| w + 1).sum::<u16>()
                + 2 * (u16::from(lo > 0) + u16::from(hi < 9));
            assert!(used <= 41, "{here}: {used}");
            assert!(hi - lo >= 2, "{here}: only {lo}..{hi}");
        }
    }
}
