//! Drawing the app into the frame's regions (header, view, narration, hint bar; see
//! [`layout`](super::layout)), the overlays (help, sentence editor) and the too-small
//! message.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};

use crate::engine::pipeline::Source as PipelineSource;
use crate::tui::keymap::{self, Group};
use crate::tui::layout::{MIN_COLS, MIN_ROWS, breadcrumb, header_title, tabs, tabs_left_out};
use crate::tui::state::{LineEditor, Overlay, Source, State, StatusKind};
use crate::tui::views;
use crate::widgets::text;

/// The frame's regions, for recorders and tests that read parts of a screen.
pub use crate::tui::layout::{Regions, regions};

/// Which engine computed the numbers on screen. The app's numbers are the f64
/// reference pipeline; the SIMD kernel's tier is named once a kernel is in the build.
pub fn compute_label(state: &State) -> String {
    match state.options.simd {
        Some(tier) => format!("numbers: f64 reference · kernel: {tier}"),
        None => "numbers: f64 reference".to_string(),
    }
}

/// Draw the whole app into a frame (the terminal's or a recorder's TestBackend).
pub fn draw(state: &State, frame: &mut Frame) {
    let area = frame.area();
    frame.render_widget(state, area);
    if let Some(pos) = edit_cursor(state, area) {
        frame.set_cursor_position(pos);
    }
}

impl Widget for &State {
    fn render(self, area: Rect, buf: &mut Buffer) {
        buf.set_style(area, self.theme.base);
        if area.width < MIN_COLS || area.height < MIN_ROWS {
            render_too_small(self, area, buf);
            return;
        }
        let r = regions(area);
        render_header(self, r.header, buf);
        views::current(self).render(self, r.body, buf);
        render_narration(self, r.narration, buf);
        render_hints(self, r.hints, buf);
        match &self.overlay {
            Overlay::None => {}
            Overlay::Help { scroll } => render_help(self, *scroll, r.body, buf),
            Overlay::Edit(_) => render_edit(self, r.body, buf),
        }
    }
}

fn render_too_small(state: &State, area: Rect, buf: &mut Buffer) {
    let msg = format!(
        "attnviz needs a terminal of at least {MIN_COLS}x{MIN_ROWS}; this one is {}x{}. Enlarge the window (it redraws at once) or press q to quit.",
        area.width, area.height
    );
    let lines = text::wrap(&msg, area.width.max(1) as usize);
    let top = area.y + area.height.saturating_sub(lines.len() as u16) / 2;
    for (i, l) in lines.iter().enumerate() {
        let y = top + i as u16;
        if y >= area.bottom() {
            break;
        }
        let x = area.x + (area.width.saturating_sub(text::width(l) as u16)) / 2;
        buf.set_stringn(x, y, l, area.width as usize, state.theme.warn);
    }
}

// ---- header -----------------------------------------------------------------------

fn render_header(state: &State, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let g = &state.glyphs;
    let [l1, l2, l3] = Layout::vertical([Constraint::Length(1); 3]).areas(area);
    // Line 1: name, title, view tabs, compute path.
    let mut spans = vec![
        Span::styled(" attnviz ", t.app_title),
        Span::styled(header_title(state, l1.width), t.field_value),
        Span::raw("   "),
    ];
    Line::from(std::mem::take(&mut spans)).render(l1, buf);
    for (rect, kind) in tabs(state, l1) {
        let style = if kind == state.view {
            t.tab_active
        } else {
            t.tab
        };
        buf.set_stringn(
            rect.x,
            rect.y,
            format!(" {kind} "),
            rect.width as usize,
            style,
        );
    }
    let right = views::current(state)
        .numbers(state)
        .unwrap_or_else(|| compute_label(state));
    let rw = unicode_width::UnicodeWidthStr::width(right.as_str()) as u16 + 1;
    let shown_tabs = tabs(state, l1);
    let (left_out, right_out) = tabs_left_out(state, l1);
    if let (true, Some((first, _))) = (left_out, shown_tabs.first()) {
        buf.set_stringn(first.x.saturating_sub(2), l1.y, g.ellipsis, 1, t.dim);
    }
    let mut tabs_end = shown_tabs.last().map_or(l1.x, |(r, _)| r.right());
    if right_out && tabs_end + 2 <= l1.right() {
        buf.set_stringn(tabs_end + 1, l1.y, g.ellipsis, 1, t.dim);
        tabs_end += 2;
    }
    if l1.right() >= tabs_end + rw + 2 {
        buf.set_stringn(l1.right() - rw, l1.y, &right, rw as usize, t.dim);
    }
    // Line 2: breadcrumb or subtitle.
    let view = views::current(state);
    if view.shows_stages() {
        let crumbs = breadcrumb(state, l2);
        let first = crumbs.first().map(|c| c.1);
        let last = crumbs.last().map(|c| c.1);
        if first != state.pipeline.stages.first().map(|s| s.id) {
            buf.set_stringn(l2.x, l2.y, g.ellipsis, 1, t.dim);
        }
        for (k, (rect, id)) in crumbs.iter().enumerate() {
            let Some(stage) = state.pipeline.stage(*id) else {
                continue;
            };
            let stoppable = view.steps_stage(stage);
            let style = if *id == state.stage {
                t.stage_active
            } else if stoppable {
                t.stage
            } else {
                t.stage_inactive
            };
            let label = format!(" {} ", g.text(stage.title));
            buf.set_stringn(rect.x, rect.y, label, rect.width as usize, style);
            if k + 1 < crumbs.len() {
                buf.set_stringn(rect.right(), rect.y, g.next, 1, t.dim);
            }
        }
        if last != state.pipeline.stages.last().map(|s| s.id)
            && let Some((rect, _)) = crumbs.last()
        {
            buf.set_stringn(rect.right() + 1, l2.y, g.ellipsis, 1, t.dim);
        }
    } else {
        let s = view.subtitle(state);
        buf.set_stringn(l2.x + 2, l2.y, g.text(&s), l2.width as usize - 2, t.dim);
    }
    // Line 3: the fields that shape the numbers.
    render_fields(state, l3, buf);
}

/// One header field: its name, its value, and a shorter value for narrow screens.
struct Field {
    name: &'static str,
    value: String,
    short: String,
}

fn field(name: &'static str, value: String) -> Field {
    Field {
        name,
        short: value.clone(),
        value,
    }
}

fn fields(state: &State) -> Vec<Field> {
    let p = &state.pipeline;
    let sh = &p.shape;
    let mut out = Vec::new();
    let group = p.kv_group_for(state.head);
    out.push(if sh.kv_heads < sh.heads {
        Field {
            name: "head",
            value: format!("{}/{} (kv {})", state.head + 1, sh.heads, group + 1),
            short: format!("{}/{} kv{}", state.head + 1, sh.heads, group + 1),
        }
    } else {
        field("head", format!("{}/{}", state.head + 1, sh.heads))
    });
    if p.source != PipelineSource::Weights {
        out.push(field("mask", p.mask.kind().to_string()));
        out.push(field("PE", pe_label(state)));
        out.push(match p.scale {
            Some(s) => Field {
                name: "scale",
                value: format!(
                    "1/sqrt({}) = {}",
                    sh.d,
                    crate::widgets::numfmt::fit_number(s, 5, true)
                ),
                short: format!("1/sqrt({})", sh.d),
            },
            None => field("scale", "off".into()),
        });
    }
    out.push(if sh.n_q == sh.n_k {
        field("n", sh.n_k.to_string())
    } else {
        field("n", format!("{}q x {}k", sh.n_q, sh.n_k))
    });
    match p.source {
        PipelineSource::Model => {
            out.push(field("d_model", p.config.d_model.to_string()));
            out.push(field("d_k", sh.d.to_string()));
            out.push(field("seed", p.config.seed.to_string()));
        }
        PipelineSource::Tensors => out.push(field("d", sh.d.to_string())),
        PipelineSource::Block => {
            if let Source::Real { layer, .. } = &state.source {
                out.push(field(
                    "layer",
                    format!("{}/{}", layer + 1, state.source.layers()),
                ));
            }
            out.push(field("d_model", p.config.d_model.to_string()));
            out.push(field("d_k", sh.d.to_string()));
        }
        PipelineSource::Weights => {
            if let Source::Weights { layer, .. } | Source::Real { layer, .. } = &state.source {
                out.push(field(
                    "layer",
                    format!("{}/{}", layer + 1, state.source.layers()),
                ));
            }
        }
    }
    out
}

/// The position encoding as the header names it. On a real model it is the model's own
/// (a block's pipeline only sees RoPE; learned positions were added before block 1),
/// with its RoPE base written out even when it is the default 10000.
fn pe_label(state: &State) -> String {
    use crate::model::config::PosKind;
    if let Some(s) = state.source.session() {
        return match (s.rope_base(), &s.config().pos) {
            (Some(base), _) => format!("rope:{base}"),
            (None, PosKind::Learned) if !s.options.no_pe => "learned".into(),
            _ => "none".into(),
        };
    }
    state.pipeline.config.pe.to_string()
}

fn render_fields(state: &State, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let script = state.script.as_ref().map(|p| {
        let mark = if p.playing { "playing" } else { "paused" };
        format!(
            "step {}/{} {mark} x{} ",
            p.index + 1,
            p.steps.len(),
            p.speed
        )
    });
    let room = area.width as usize - script.as_ref().map_or(0, |s| s.len() + 1);
    let sep = format!(" {} ", state.glyphs.sep);
    let list = fields(state);
    let width = |short: bool, k: usize| -> usize {
        1 + list
            .iter()
            .take(k)
            .map(|f| f.name.len() + 1 + text::width(if short { &f.short } else { &f.value }))
            .sum::<usize>()
            + k.saturating_sub(1) * text::width(&sep)
    };
    // Full values if they fit, else short ones, else as many fields as fit.
    let short = width(false, list.len()) > room;
    let mut k = list.len();
    while k > 1 && width(short, k) > room {
        k -= 1;
    }
    let mut spans = vec![Span::raw(" ")];
    for (i, f) in list.iter().take(k).enumerate() {
        if i > 0 {
            spans.push(Span::styled(sep.clone(), t.dim));
        }
        spans.push(Span::styled(format!("{} ", f.name), t.field_name));
        let v = if short { &f.short } else { &f.value };
        spans.push(Span::styled(v.clone(), t.field_value));
    }
    Line::from(spans).render(area, buf);
    if let Some(s) = script {
        let w = s.len() as u16;
        if area.width > w {
            buf.set_stringn(area.right() - w, area.y, s, w as usize, t.key);
        }
    }
}

// ---- narration and hints ------------------------------------------------------------

fn render_narration(state: &State, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let w = area.width.saturating_sub(2) as usize;
    let mut area = area;
    if let Some(p) = &state.progress {
        // A run's progress takes the last line, fitted to it, and the narration keeps
        // the lines above: a lesson step's text stays readable while its model runs.
        let last = area.y + area.height.saturating_sub(1);
        let line = fit_progress(&state.glyphs.text(p), w, state.glyphs.ellipsis);
        buf.set_stringn(area.x + 1, last, line, w, t.key);
        area.height = area.height.saturating_sub(1);
    }
    let (text_s, style) = match &state.status {
        Some(s) if state.progress.is_none() => {
            let style = match s.kind {
                StatusKind::Info => t.good,
                StatusKind::Warn => t.warn,
                StatusKind::Error => t.error,
            };
            (s.text.clone(), style)
        }
        _ => (state.narration_text(), t.narration),
    };
    let text_s = state.glyphs.text(&text_s).into_owned();
    let lines = text::wrap(&text_s, w);
    let n = lines.len();
    for (i, l) in lines.into_iter().take(area.height as usize).enumerate() {
        let last_shown = i + 1 == area.height as usize && n > area.height as usize;
        let l = if last_shown {
            text::fit(&format!("{l}{}", "  "), w.saturating_sub(1), "") + state.glyphs.ellipsis
        } else {
            l
        };
        buf.set_stringn(area.x + 1, area.y + i as u16, l, w, style);
    }
}

/// A progress line ("what · 1.2 s · Esc stops") in `w` columns: the description is cut
/// first, so the time and how to stop stay whole.
fn fit_progress(p: &str, w: usize, ellipsis: &str) -> String {
    if text::width(p) <= w {
        return p.to_string();
    }
    let mut parts: Vec<&str> = p.split(" · ").collect();
    let tail = parts
        .split_off(parts.len().saturating_sub(2).max(1))
        .join(" · ");
    let head = parts.join(" · ");
    let room = w.saturating_sub(text::width(&tail) + 3);
    if room < 8 {
        return text::fit(p, w, ellipsis);
    }
    format!("{} · {tail}", text::fit(&head, room, ellipsis))
}

fn render_hints(state: &State, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let mut items = keymap::hints(state);
    // Keep "? help" and "q quit" whatever else has to go.
    let width = |items: &[(String, &str)]| -> usize {
        items
            .iter()
            .map(|(k, d)| text::width(k) + 1 + d.len() + 2)
            .sum::<usize>()
    };
    let keep_tail = 2.min(items.len());
    while width(&items) > area.width as usize && items.len() > keep_tail {
        items.remove(items.len() - keep_tail - 1);
    }
    let mut spans = vec![Span::raw(" ")];
    for (k, d) in items {
        spans.push(Span::styled(k, t.key));
        spans.push(Span::styled(format!(" {d}  "), t.key_desc));
    }
    Line::from(spans).render(area, buf);
}

// ---- overlays -----------------------------------------------------------------------

/// One line of the help: a heading, prose, or a key with its description.
pub enum HelpLine {
    Heading(String),
    Text(String),
    Key(String, &'static str),
    Blank,
}

/// The help, generated from the key tables (global and the current view's).
pub fn help_lines(state: &State) -> Vec<HelpLine> {
    let g = &state.glyphs;
    let mut out = vec![
        HelpLine::Text(format!(
            "Plain arrows or h j k l move the cell cursor. With Shift they take bigger steps: {}{}/{}{} or H/L step through the stages, {}{}/{}{} or K/J change the head.",
            g.shift, g.left, g.shift, g.right, g.shift, g.up, g.shift, g.down
        )),
        HelpLine::Blank,
    ];
    let view_keys = views::current(state).commands();
    for group in Group::ORDER {
        let entries: Vec<&keymap::Binding> = keymap::BINDINGS
            .iter()
            .chain(view_keys.iter())
            .filter(|b| b.group == group && keymap::holds(b.when, state))
            .collect();
        if entries.is_empty() {
            continue;
        }
        out.push(HelpLine::Heading(if group == Group::ThisView {
            format!("{} ({})", group.title(), state.view)
        } else {
            group.title().to_string()
        }));
        for b in entries {
            out.push(HelpLine::Key(keymap::keys_label(b, g), b.desc));
        }
    }
    if state.options.mouse {
        out.push(HelpLine::Blank);
        out.push(HelpLine::Text(
            "Mouse: click a cell to inspect it, a stage or a view tab to open it (--no-mouse turns this off).".into(),
        ));
    }
    out
}

/// Width of the key column of the help.
const HELP_KEY_W: usize = 12;

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn render_help(state: &State, scroll: u16, body: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let rect = centered(body, 84, body.height);
    Clear.render(rect, buf);
    buf.set_style(rect, t.base);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_set(state.glyphs.border)
        .border_style(t.panel_title)
        .title(Span::styled(" help: keys ", t.panel_title))
        .title_bottom(Span::styled(" Esc or ? closes ", t.dim));
    let inner = block.inner(rect);
    block.render(rect, buf);
    let w = inner.width.saturating_sub(1) as usize;
    let mut wrapped: Vec<Line> = Vec::new();
    for line in help_lines(state) {
        match line {
            HelpLine::Blank => wrapped.push(Line::default()),
            HelpLine::Heading(h) => wrapped.push(Line::styled(h, t.panel_title)),
            HelpLine::Text(p) => {
                let p = state.glyphs.text(&p).into_owned();
                wrapped.extend(
                    text::wrap(&p, w)
                        .into_iter()
                        .map(|l| Line::styled(l, t.base)),
                );
            }
            HelpLine::Key(k, desc) => {
                // Keys in a column, descriptions wrapped beside them.
                let desc = state.glyphs.text(desc).into_owned();
                let rest = w.saturating_sub(HELP_KEY_W + 3).max(10);
                for (i, d) in text::wrap(&desc, rest).into_iter().enumerate() {
                    let key = if i == 0 { k.as_str() } else { "" };
                    wrapped.push(Line::from(vec![
                        Span::styled(format!("  {} ", text::left(key, HELP_KEY_W, "")), t.key),
                        Span::styled(d, t.base),
                    ]));
                }
            }
        }
    }
    let max_scroll = wrapped.len().saturating_sub(inner.height as usize);
    let first = (scroll as usize).min(max_scroll);
    for (i, l) in wrapped
        .iter()
        .skip(first)
        .take(inner.height as usize)
        .enumerate()
    {
        l.render(Rect::new(inner.x + 1, inner.y + i as u16, w as u16, 1), buf);
    }
}

fn edit_rect(body: Rect) -> Rect {
    let w = body.width.saturating_sub(4).min(100);
    Rect::new(
        body.x + (body.width - w) / 2,
        body.bottom().saturating_sub(5),
        w,
        4,
    )
}

/// Where the sentence editor's text starts and how wide it is.
fn edit_field(body: Rect) -> Rect {
    let r = edit_rect(body);
    Rect::new(r.x + 2, r.y + 1, r.width.saturating_sub(4), 1)
}

fn render_edit(state: &State, body: Rect, buf: &mut Buffer) {
    let Overlay::Edit(ed) = &state.overlay else {
        return;
    };
    let t = &state.theme;
    let rect = edit_rect(body);
    Clear.render(rect, buf);
    buf.set_style(rect, t.base);
    Block::default()
        .borders(Borders::ALL)
        .border_set(state.glyphs.border)
        .border_style(t.panel_title)
        .title(Span::styled(
            if state.source.session().is_some() {
                " the second text, for the patch view: as many tokens as the first "
            } else {
                " edit the sentence "
            },
            t.panel_title,
        ))
        .render(rect, buf);
    let field = edit_field(body);
    let (shown, _) = edit_window(ed, field.width as usize);
    buf.set_stringn(field.x, field.y, shown, field.width as usize, t.field_value);
    let hints: Vec<Span> = keymap::EDIT_BINDINGS
        .iter()
        .filter_map(|b| b.hint.map(|h| (keymap::keys_label(b, &state.glyphs), h)))
        .flat_map(|(k, h)| {
            [
                Span::styled(k, t.key),
                Span::styled(format!(" {h}  "), t.key_desc),
            ]
        })
        .collect();
    let mut spans = hints;
    let count = match state.source.session() {
        // A real model's tokenizer: how many of the first text's tokens.
        Some(s) => {
            let n = s
                .model
                .tokenizer
                .encode(&ed.text)
                .map_or(0, |ids| ids.len());
            format!("{n} of {} tokens", s.n())
        }
        None => {
            let n = crate::engine::pipeline::ModelConfig::tokens_from_text(&ed.text).len();
            format!("{n} token{}", if n == 1 { "" } else { "s" })
        }
    };
    spans.push(Span::styled(count, t.dim));
    Line::from(spans).render(Rect::new(field.x, field.y + 1, field.width, 1), buf);
}

/// The part of the editor's text that fits `w` columns with the cursor in view, and the
/// cursor's column in it.
fn edit_window(ed: &LineEditor, w: usize) -> (String, usize) {
    let col = ed.cursor_column();
    if text::width(&ed.text) < w {
        return (ed.text.clone(), col);
    }
    // Drop characters from the left until the cursor fits.
    let mut skipped = 0;
    let mut start = 0;
    for (b, ch) in ed.text.char_indices() {
        if col - skipped < w {
            start = b;
            break;
        }
        skipped += unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        start = b + ch.len_utf8();
    }
    let shown = text::fit(&ed.text[start..], w, "");
    (shown, col - skipped)
}

fn edit_cursor(state: &State, area: Rect) -> Option<Position> {
    let Overlay::Edit(ed) = &state.overlay else {
        return None;
    };
    if area.width < MIN_COLS || area.height < MIN_ROWS {
        return None;
    }
    let field = edit_field(regions(area).body);
    let (_, col) = edit_window(ed, field.width as usize);
    Some(Position::new(field.x + col as u16, field.y))
}
