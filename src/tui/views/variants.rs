//! The variants view: attention that trades its n x n cost for structure, on the
//! lesson's own inputs, beside standard attention. `v` switches between
//!
//! - sliding window (Mistral): the band, the receptive field growing layer by layer by
//!   W - 1 positions (L x W reach), and the rolling buffer where position i lives in
//!   slot i mod W;
//! - BigBird: local + global + random blocks cell by cell, and the tiles a tiled kernel
//!   skips;
//! - linear attention, phi(x) = elu(x) + 1: phi(Q) (phi(K)^T V) beside softmax attention,
//!   its d x dv state against the n x n matrix, and how far the outputs differ.
//!
//! Every number comes from `engine::variants`; the cursor is (query, key).

use ndarray::Array2;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;

use super::decode::HeadInputs;
use super::panel::{MAX_CELL, MatrixPanel};
use crate::engine::config::{BIGBIRD_DEFAULT, BigBird, MaskKind};
use crate::engine::memory::group_digits;
use crate::engine::pipeline::{Matrix, Pipeline};
use crate::engine::variants::{
    self, BigBirdPattern, CellKind, LinearVsSoftmax, SlidingWindow, TileCounts,
};
use crate::scene::Variant;
use crate::tui::action::Action;
use crate::tui::component::View;
use crate::tui::context::{Context, StatusKind};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::ValueScale;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::{fit_number, significant};
use crate::widgets::text;

pub struct VariantsView;

const CMD_MODE: u8 = 0;
const CMD_WIDER: u8 = 1;
const CMD_NARROWER: u8 = 2;
const CMD_DEEPER: u8 = 3;
const CMD_SHALLOWER: u8 = 4;
const CMD_CAUSAL: u8 = 5;

/// Layers the receptive-field panel goes up to when the window never covers the
/// sentence (W = 1).
const MAX_LAYERS: usize = 16;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Char('v')],
        action: Action::ViewCommand(CMD_MODE),
        desc: "next variant: sliding window, BigBird, linear attention",
        hint: Some("variant"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('w')],
        action: Action::ViewCommand(CMD_WIDER),
        desc: "wider window (sliding window W, or BigBird's local blocks)",
        hint: Some("window"),
        hint_keys: Some("w/W"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('W')],
        action: Action::ViewCommand(CMD_NARROWER),
        desc: "narrower window",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('d')],
        action: Action::ViewCommand(CMD_DEEPER),
        desc: "one layer more (sliding window's receptive field)",
        hint: Some("layers"),
        hint_keys: Some("d/D"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('D')],
        action: Action::ViewCommand(CMD_SHALLOWER),
        desc: "one layer fewer",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('c')],
        action: Action::ViewCommand(CMD_CAUSAL),
        desc: "linear attention: causal (prefix sums) or not",
        hint: Some("causal"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
];

/// Which variant is on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Window,
    BigBird,
    Linear,
}

impl Mode {
    fn next(self) -> Mode {
        match self {
            Mode::Window => Mode::BigBird,
            Mode::BigBird => Mode::Linear,
            Mode::Linear => Mode::Window,
        }
    }

    /// The panel a lesson step names.
    fn from_scene(v: Variant) -> Mode {
        match v {
            Variant::Window => Mode::Window,
            Variant::BigBird => Mode::BigBird,
            Variant::Linear => Mode::Linear,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Window => "sliding window",
            Mode::BigBird => "BigBird",
            Mode::Linear => "linear attention",
        }
    }
}

/// The settings a person changes; kept when the lesson changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub mode: Mode,
    pub window: usize,
    pub layers: usize,
    pub bigbird: BigBird,
    pub causal: bool,
}

/// What the variants view derived through the engine.
#[derive(Debug, Clone)]
pub struct VariantsLab {
    pub settings: Settings,
    pub tokens: Vec<String>,
    pub sliding: Result<SlidingWindow, String>,
    /// [n, n]: the first layer at which input j reaches output i (0: not within the
    /// layers shown).
    pub first_layer: Array2<f64>,
    pub bigbird: Result<BigBirdPattern, String>,
    /// Causal attention's tiles, for comparison with the patterns'.
    pub causal_tiles: Option<TileCounts>,
    /// One comparison per query head.
    pub linear: Result<Vec<LinearVsSoftmax>, String>,
}

/// The tile of a tiled kernel at the lesson's scale: a few tiles per side.
fn tile_for(n: usize) -> (usize, usize) {
    let t = match n {
        0..=16 => 2,
        17..=64 => 4,
        _ => 8,
    };
    (t, t)
}

/// The deepest layer worth showing: the one whose reach first covers the sentence.
fn layers_to_cover(n: usize, window: usize) -> usize {
    if window <= 1 {
        MAX_LAYERS
    } else {
        n.saturating_sub(1).div_ceil(window - 1).max(1)
    }
}

impl Settings {
    fn for_pipeline(p: &Pipeline) -> Settings {
        let n = p.shape.n_k;
        // A third of the sentence: narrow enough that the reach visibly grows.
        let third = n.div_ceil(3).max(2);
        let (window, bigbird) = match p.mask.kind() {
            MaskKind::Window(w) => (*w, BIGBIRD_DEFAULT),
            MaskKind::BigBird(b) => (third, *b),
            _ => (third, BIGBIRD_DEFAULT),
        };
        // A lesson on a BigBird mask opens on its pattern, not on the sliding window.
        let mode = match p.mask.kind() {
            MaskKind::BigBird(_) => Mode::BigBird,
            _ => Mode::Window,
        };
        Settings {
            mode,
            window,
            layers: 2,
            bigbird,
            causal: !matches!(p.mask.kind(), MaskKind::None),
        }
    }
}

impl VariantsLab {
    pub fn build(p: &Pipeline, settings: Settings) -> VariantsLab {
        let n = p.shape.n_k;
        let tile = tile_for(n);
        let sliding = variants::sliding_window(n, settings.window, settings.layers, tile)
            .map_err(|e| e.to_string());
        let mut first_layer = Array2::zeros((n, n));
        if let Ok(sw) = &sliding {
            for layer in sw.layers.iter().rev() {
                for ((i, j), &r) in layer.reach.indexed_iter() {
                    if r {
                        first_layer[[i, j]] = layer.layer as f64;
                    }
                }
            }
        }
        let bigbird =
            variants::bigbird_pattern(settings.bigbird, n, tile).map_err(|e| e.to_string());
        let causal_tiles = crate::engine::mask::Mask::resolve(&MaskKind::Causal, 1, 1, n, n)
            .ok()
            .and_then(|m| variants::tile_counts(&m, tile.0, tile.1).ok());
        let linear = HeadInputs::from_pipeline(p).and_then(|x| {
            (0..x.heads())
                .map(|h| {
                    let g = h / (x.heads() / x.kv_heads().max(1)).max(1);
                    variants::compare_linear(
                        x.q.index_axis(ndarray::Axis(0), h),
                        x.k.index_axis(ndarray::Axis(0), g),
                        x.v.index_axis(ndarray::Axis(0), g),
                        settings.causal,
                        Some(x.scale),
                    )
                    .map_err(|e| e.to_string())
                })
                .collect()
        });
        VariantsLab {
            settings,
            tokens: p.key_labels.clone(),
            sliding,
            first_layer,
            bigbird,
            causal_tiles,
            linear,
        }
    }
}

fn lab(state: &Context) -> Option<&VariantsLab> {
    state.views.get::<VariantsLab>(ViewKind::Variants)
}

fn rebuild(state: &mut Context, settings: Option<Settings>) {
    let n = state.pipeline.shape.n_k;
    let mut s = settings
        .or_else(|| lab(state).map(|l| l.settings))
        .unwrap_or_else(|| Settings::for_pipeline(&state.pipeline));
    // A script step's choice of panel, taken once so the v key still switches after it.
    if let Some(v) = state.variant.take() {
        s.mode = Mode::from_scene(v);
    }
    s.window = s.window.clamp(1, n.max(1));
    s.layers = s.layers.clamp(1, MAX_LAYERS);
    let lab = VariantsLab::build(&state.pipeline, s);
    state.views.set(ViewKind::Variants, lab);
}

fn change(state: &mut Context, id: u8) {
    let Some(mut s) = lab(state).map(|l| l.settings) else {
        return;
    };
    let n = state.pipeline.shape.n_k;
    let message = match (id, s.mode) {
        (CMD_MODE, _) => {
            s.mode = s.mode.next();
            format!("variant: {}", s.mode.name())
        }
        (CMD_WIDER | CMD_NARROWER, Mode::BigBird) => {
            let blocks = n.div_ceil(s.bigbird.block.max(1));
            let w = s.bigbird.window as isize + if id == CMD_WIDER { 1 } else { -1 };
            s.bigbird.window = w.clamp(0, blocks as isize) as usize;
            format!("BigBird: {} local block(s) each side", s.bigbird.window)
        }
        (CMD_WIDER | CMD_NARROWER, _) => {
            let w = s.window as isize + if id == CMD_WIDER { 1 } else { -1 };
            s.window = w.clamp(1, n.max(1) as isize) as usize;
            format!("window W = {}", s.window)
        }
        (CMD_DEEPER | CMD_SHALLOWER, _) => {
            let l = s.layers as isize + if id == CMD_DEEPER { 1 } else { -1 };
            s.layers = l.clamp(1, MAX_LAYERS as isize) as usize;
            format!("{} layer(s)", s.layers)
        }
        (CMD_CAUSAL, _) => {
            s.causal = !s.causal;
            format!(
                "linear and softmax attention: {}",
                if s.causal { "causal" } else { "no mask" }
            )
        }
        _ => return,
    };
    rebuild(state, Some(s));
    state.set_status(StatusKind::Info, message);
}

impl View for VariantsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Variants
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn update(&self, state: &mut Context, action: Action) {
        let Action::ViewCommand(id) = action else {
            return;
        };
        change(state, id);
    }

    fn refresh(&self, state: &mut Context) {
        rebuild(state, None);
    }

    fn grid(&self, state: &Context) -> (usize, usize) {
        let n = state.pipeline.shape.n_k;
        (n, n)
    }

    fn subtitle(&self, state: &Context) -> String {
        let mode = lab(state).map_or(Mode::Window, |l| l.settings.mode);
        format!(
            "sliding window · BigBird · linear attention: {} (v switches)",
            mode.name()
        )
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        let Some(lab) = lab(state) else {
            LineWriter::new(area, buf).text("preparing the variants...", state.theme.dim);
            return;
        };
        match lab.settings.mode {
            Mode::Window => render_window(state, lab, area, buf),
            Mode::BigBird => render_bigbird(state, lab, area, buf),
            Mode::Linear => render_linear(state, lab, area, buf),
        }
    }
}

// ---- drawing --------------------------------------------------------------------

fn token(lab: &VariantsLab, i: usize) -> String {
    lab.tokens
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("t{i}"))
}

/// Left: a panel as wide as its grid needs (`want` columns); right: the text.
fn split(area: Rect, want: u16) -> [Rect; 2] {
    let want = want.clamp(24, area.width / 2);
    Layout::horizontal([
        Constraint::Length(want.min(area.width)),
        Constraint::Fill(1),
    ])
    .spacing(2)
    .areas(area)
}

fn tiles_line(t: &TileCounts) -> String {
    format!(
        "{}x{} tiles: {} skipped, {} full, {} partial of {}",
        t.br, t.bc, t.skipped, t.full, t.partial, t.total
    )
}

/// A matrix of short symbols (a layer number, a pattern letter), two columns a cell:
/// narrower than a heatmap of numbers, and readable without colour.
struct CellGrid<'a> {
    title: String,
    labels: &'a [String],
    n_rows: usize,
    n_cols: usize,
    cell: &'a dyn Fn(usize, usize) -> (String, Style),
    cursor: (usize, usize),
    legend: Vec<Span<'a>>,
}

impl CellGrid<'_> {
    /// Columns the grid wants: labels, a gap and two per cell.
    fn width(labels: &[String], n_cols: usize) -> u16 {
        let label_w = labels
            .iter()
            .map(|t| text::width(t))
            .max()
            .unwrap_or(1)
            .min(8);
        (label_w + 1 + 2 * n_cols) as u16
    }

    fn render(self, state: &Context, area: Rect, buf: &mut Buffer) {
        let th = &state.theme;
        let g = &state.glyphs;
        let mut w = LineWriter::new(area, buf);
        w.line(vec![Span::styled(
            g.text(&self.title).into_owned(),
            th.panel_title,
        )]);
        let label_w = self
            .labels
            .iter()
            .map(|t| text::width(t))
            .max()
            .unwrap_or(1)
            .min(8);
        let cols = ((area.width as usize).saturating_sub(label_w + 1) / 2).min(self.n_cols);
        let col0 = self.cursor.1.saturating_sub(cols.saturating_sub(1));
        let rows = (w.rows_left() as usize).saturating_sub(2).min(self.n_rows);
        let row0 = self.cursor.0.saturating_sub(rows.saturating_sub(1));
        // Column numbers (the ones digit) to find a key by position.
        let mut head = vec![Span::raw(" ".repeat(label_w + 1))];
        for c in (col0..self.n_cols).take(cols) {
            let style = if c == self.cursor.1 {
                th.label_active
            } else {
                th.label
            };
            head.push(Span::styled(format!("{:<2}", c % 10), style));
        }
        w.line(head);
        for r in (row0..self.n_rows).take(rows) {
            let label = self.labels.get(r).map_or("", String::as_str);
            let mut spans = vec![Span::styled(
                format!("{} ", text::right(label, label_w, g.ellipsis)),
                if r == self.cursor.0 {
                    th.label_active
                } else {
                    th.label
                },
            )];
            for c in (col0..self.n_cols).take(cols) {
                let (sym, mut style) = (self.cell)(r, c);
                if (r, c) == self.cursor {
                    style = style.add_modifier(th.cursor);
                }
                spans.push(Span::styled(format!("{sym:<1}"), style));
                spans.push(Span::styled(" ", th.base));
            }
            w.line(spans);
        }
        w.line(self.legend);
    }
}

fn render_window(state: &Context, lab: &VariantsLab, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let sw = match &lab.sliding {
        Ok(sw) => sw,
        Err(e) => return LineWriter::new(area, buf).text(e, th.error),
    };
    let n = sw.n;
    let (i, _) = state.cursor;
    let i = i.min(n.saturating_sub(1));
    let labels: Vec<String> = (0..n).map(|k| token(lab, k)).collect();
    let [left, right] = split(area, CellGrid::width(&labels, n).max(34));
    let layers = sw.layers.len().max(1);
    let first = &lab.first_layer;
    let dot = if state.glyphs.ascii { "." } else { "·" };
    let cell = |r: usize, c: usize| -> (String, Style) {
        let l = first[[r, c]] as usize;
        if l == 0 {
            (dot.to_string(), th.masked)
        } else {
            let t = if layers == 1 {
                1.0
            } else {
                1.0 - (l - 1) as f64 / layers as f64
            };
            let sym = if l < 10 { l.to_string() } else { "+".into() };
            (sym, th.heat.cell_style(t, false))
        }
    };
    CellGrid {
        title: format!("layer where j first reaches i, W {}", sw.window),
        labels: &labels,
        n_rows: n,
        n_cols: n,
        cell: &cell,
        cursor: (i, state.cursor.1.min(n.saturating_sub(1))),
        legend: vec![
            Span::styled("1", th.heat.cell_style(1.0, false)),
            Span::styled(" band ", th.label),
            Span::styled("2..", th.heat.cell_style(0.5, false)),
            Span::styled(" deeper ", th.label),
            Span::styled(dot, th.masked),
            Span::styled(" not reached", th.label),
        ],
    }
    .render(state, left, buf);

    let mut w = LineWriter::new(right, buf);
    let wnd = sw.window;
    w.line(vec![Span::styled(
        format!("sliding window W = {wnd}, {} layer(s)", sw.layers.len()),
        th.panel_title,
    )]);
    w.text(
        &format!(
            "layer 1 is the band: query i sees keys i-{} .. i; each further layer reaches W-1 = {} more",
            wnd.saturating_sub(1),
            wnd.saturating_sub(1)
        ),
        th.base,
    );
    let spans: Vec<String> = sw
        .layers
        .iter()
        .map(|l| format!("L{} {}", l.layer, l.span))
        .collect();
    w.text(
        &format!("positions seen, L(W-1)+1 capped by n: {}", spans.join(", ")),
        th.formula,
    );
    if wnd > 1 {
        w.text(
            &format!(
                "the last token sees all n = {n} after {} layer(s)",
                layers_to_cover(n, wnd)
            ),
            th.dim,
        );
    }
    if let Some(last) = sw.layers.last() {
        let from = last.earliest.get(i).copied().unwrap_or(0);
        w.text(
            &format!(
                "after {} layer(s) '{}' (position {i}) depends on positions {from}..{i}",
                last.layer,
                token(lab, i)
            ),
            th.field_value,
        );
    }
    // The rolling buffer after writing position i.
    if let Some(frame) = sw.buffer.get(i) {
        w.line(vec![Span::styled(
            format!(
                "rolling buffer after position {i}: slot = i mod {wnd} = {}",
                frame.slot
            ),
            th.panel_title,
        )]);
        let mut spans = Vec::new();
        for (slot, held) in frame.slots.iter().enumerate() {
            let text = match held {
                Some(p) => format!("[{slot}: {}]", token(lab, *p)),
                None => format!("[{slot}: -]"),
            };
            let style = if slot == frame.slot {
                th.label_active.add_modifier(th.highlight)
            } else {
                th.base
            };
            spans.push(Span::styled(text, style));
            spans.push(Span::raw(" "));
        }
        // Wrap the slots by hand: each is a unit.
        let width = w.area.width as usize;
        let mut line: Vec<Span> = Vec::new();
        let mut used = 0;
        for sp in spans {
            let sw_ = text::width(&sp.content);
            if used + sw_ > width && !line.is_empty() {
                w.line(std::mem::take(&mut line));
                used = 0;
            }
            used += sw_;
            line.push(sp);
        }
        if !line.is_empty() {
            w.line(line);
        }
        let evicted = match frame.evicted {
            Some(e) => format!(
                "it overwrote position {e} ('{}'), which the window no longer sees",
                token(lab, e)
            ),
            None => "the buffer is still filling: nothing overwritten".into(),
        };
        w.text(&evicted, th.dim);
        w.text(
            &format!("the cache holds at most W = {wnd} positions however long the text grows"),
            th.dim,
        );
    }
    w.blank();
    w.text(
        &format!(
            "Mistral 7B, 32 layers of W 4096: {} positions",
            group_digits(variants::receptive_span(4096, 32, usize::MAX) as u64)
        ),
        th.dim,
    );
    let causal_pairs = n * (n + 1) / 2;
    w.text(
        &format!(
            "pairs scored: {} of {} (causal {}); {}",
            sw.seen,
            n * n,
            causal_pairs,
            tiles_line(&sw.tiles)
        ),
        th.base,
    );
    if let Some(ct) = &lab.causal_tiles {
        w.text(&format!("causal: {}", tiles_line(ct)), th.dim);
    }
}

fn cell_glyph(state: &Context, k: CellKind) -> (&'static str, Style) {
    let th = &state.theme;
    match k {
        CellKind::Global => ("G", th.group(0)),
        CellKind::Local => ("L", th.group(2)),
        CellKind::Random => ("R", th.group(1)),
        CellKind::Masked => (if state.glyphs.ascii { "." } else { "·" }, th.masked),
    }
}

fn kind_name(k: CellKind) -> &'static str {
    match k {
        CellKind::Global => "global",
        CellKind::Local => "local",
        CellKind::Random => "random",
        CellKind::Masked => "masked",
    }
}

fn render_bigbird(state: &Context, lab: &VariantsLab, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let bb = match &lab.bigbird {
        Ok(b) => b,
        Err(e) => return LineWriter::new(area, buf).text(e, th.error),
    };
    let n = bb.n;
    let (ci, cj) = (
        state.cursor.0.min(n.saturating_sub(1)),
        state.cursor.1.min(n.saturating_sub(1)),
    );
    let labels: Vec<String> = (0..n).map(|k| token(lab, k)).collect();
    let [left, right] = split(area, CellGrid::width(&labels, n).max(34));
    let cell = |r: usize, c: usize| -> (String, Style) {
        let (g, style) = cell_glyph(state, bb.cells[[r, c]]);
        (g.to_string(), style)
    };
    let legend: Vec<Span> = [
        CellKind::Global,
        CellKind::Local,
        CellKind::Random,
        CellKind::Masked,
    ]
    .into_iter()
    .flat_map(|k| {
        let (g, style) = cell_glyph(state, k);
        [
            Span::styled(g, style),
            Span::styled(format!(" {} ", kind_name(k)), th.label),
        ]
    })
    .collect();
    CellGrid {
        title: "BigBird pattern [query x key]".into(),
        labels: &labels,
        n_rows: n,
        n_cols: n,
        cell: &cell,
        cursor: (ci, cj),
        legend,
    }
    .render(state, left, buf);

    let c = bb.config;
    let mut w = LineWriter::new(right, buf);
    w.line(vec![Span::styled(
        format!(
            "bigbird:{},{},{},{}: blocks of {} token(s)",
            c.window, c.globals, c.random, c.block, c.block
        ),
        th.panel_title,
    )]);
    w.text(
        &format!(
            "local: {} block(s) each side of the diagonal; global: the first {} block(s) see and are seen by all; random: {} seeded block(s) per block row",
            c.window, c.globals, c.random
        ),
        th.base,
    );
    let total = n * n;
    let pct = |x: usize| 100.0 * x as f64 / total.max(1) as f64;
    for (k, count) in [
        (CellKind::Global, bb.global),
        (CellKind::Local, bb.local),
        (CellKind::Random, bb.random),
        (CellKind::Masked, bb.masked),
    ] {
        let (g, style) = cell_glyph(state, k);
        w.line(vec![
            Span::styled(g, style),
            Span::styled(
                format!(
                    " {:<7} {:>6} cells {:>5.1}%",
                    kind_name(k),
                    count,
                    pct(count)
                ),
                th.base,
            ),
        ]);
    }
    w.text(
        &format!(
            "scored {} of {} pairs: density {:.1}%",
            total - bb.masked,
            total,
            bb.density * 100.0
        ),
        th.field_value,
    );
    w.text(&tiles_line(&bb.tiles), th.field_value);
    w.text(
        &format!(
            "a tiled kernel skips the {} all-masked tiles; with n growing the pattern stays O(n) per row block while full attention is O(n^2)",
            bb.tiles.skipped
        ),
        th.dim,
    );
    let kind = bb.cells[[ci, cj]];
    let why = match kind {
        CellKind::Global => "a global block: it attends everywhere and everything attends to it",
        CellKind::Local => "within the local window of the diagonal",
        CellKind::Random => "one of the random blocks",
        CellKind::Masked => "masked: neither local, global nor random",
    };
    w.text(
        &format!("'{}' -> '{}': {why}", token(lab, ci), token(lab, cj)),
        th.dim,
    );
}

fn render_linear(state: &Context, lab: &VariantsLab, area: Rect, buf: &mut Buffer) {
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
