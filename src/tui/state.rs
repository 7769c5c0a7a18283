//! The app's state: where the data comes from, the engine's pipeline built from it, and
//! what the person is looking at. No terminal in here: a recorder or a test builds a
//! [`State`], feeds it [`Action`](super::action::Action)s through
//! [`update`](super::update::update) and draws it on any backend.

use std::any::Any;
use std::collections::HashMap;

use ndarray::Array3;

use crate::cli::{Lang, ThemeName};
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::pipeline::{Matrix, ModelConfig, Pipeline, RowStats, Stage, StageId};
use crate::error::Result;
use crate::tui::ViewKind;
use crate::tui::script::ScriptStep;
use crate::tui::theme::Theme;
use crate::widgets::{ColorDepth, Glyphs};

/// The smallest terminal the app draws in; below it a message says so.
pub const MIN_COLS: u16 = 80;
pub const MIN_ROWS: u16 = 24;

/// How the app looks and behaves, independent of the data.
#[derive(Debug, Clone, PartialEq)]
pub struct AppOptions {
    pub lang: Lang,
    pub theme: Option<ThemeName>,
    pub depth: ColorDepth,
    pub ascii: bool,
    pub mouse: bool,
    /// Shown in the header: the scene's name or the files' names.
    pub title: String,
    /// The kernel's SIMD tier, shown in the header; None in recordings and snapshots,
    /// which must be the same on every machine.
    pub simd: Option<&'static str>,
}

impl AppOptions {
    /// For a person at a terminal: the colour depth comes from the environment.
    pub fn interactive(
        lang: Lang,
        theme: Option<ThemeName>,
        ascii: bool,
        no_mouse: bool,
        title: impl Into<String>,
    ) -> AppOptions {
        AppOptions {
            lang,
            theme,
            depth: ColorDepth::from_env(),
            ascii,
            mouse: !no_mouse,
            title: title.into(),
            simd: Some(crate::kernel::Tier::detect().name()),
        }
    }

    /// For recordings, snapshots and tests: truecolour (or none with `--theme mono`)
    /// whatever the environment says, so output is the same on every machine.
    pub fn headless(
        lang: Lang,
        theme: Option<ThemeName>,
        ascii: bool,
        title: impl Into<String>,
    ) -> AppOptions {
        AppOptions {
            lang,
            theme,
            depth: ColorDepth::TrueColor,
            ascii,
            mouse: false,
            title: title.into(),
            simd: None,
        }
    }
}

/// q [H,Nq,d], k [G,Nk,d], v [G,Nk,dv] from files, and the options the app applies
/// to them (a mask, a PE that acts inside attention, the scale).
#[derive(Debug, Clone)]
pub struct LoadedTensors {
    /// Key labels (empty: t0, t1, ...).
    pub tokens: Vec<String>,
    pub q: Array3<f64>,
    pub k: Array3<f64>,
    pub v: Array3<f64>,
    pub mask: MaskKind,
    pub pe: PeKind,
    pub scaled: bool,
}

/// Where the numbers come from. The app rebuilds the pipeline from this whenever an
/// option changes.
#[derive(Debug, Clone)]
pub enum Source {
    /// A seeded lesson model (bare `attnviz`, scenes).
    Model(ModelConfig),
    /// q, k, v loaded from files (`attnviz view --q --k --v`).
    Tensors(Box<LoadedTensors>),
    /// Attention weights loaded from a file (`attnviz view --attn`): one [heads, Nq, Nk]
    /// array per layer.
    Weights {
        tokens: Vec<String>,
        layers: Vec<Array3<f64>>,
        layer: usize,
    },
}

impl Source {
    /// Compute the pipeline through the engine.
    pub fn build(&self) -> Result<Pipeline> {
        match self {
            Source::Model(config) => Pipeline::build(config),
            Source::Tensors(t) => Pipeline::from_qkv(
                t.tokens.clone(),
                t.q.clone(),
                t.k.clone(),
                t.v.clone(),
                &t.mask,
                t.pe,
                t.scaled,
            ),
            Source::Weights {
                tokens,
                layers,
                layer,
            } => {
                let attn = layers.get(*layer).ok_or_else(|| {
                    crate::Error::usage(format!(
                        "layer {} does not exist; the file has {} layer(s)",
                        layer + 1,
                        layers.len()
                    ))
                })?;
                Pipeline::from_weights(tokens.clone(), attn.clone())
            }
        }
    }

    pub fn is_model(&self) -> bool {
        matches!(self, Source::Model(_))
    }

    /// True if the app computes attention (so masks, PE and scale can change).
    pub fn is_computed(&self) -> bool {
        !matches!(self, Source::Weights { .. })
    }

    /// Layers of a weights file (1 otherwise).
    pub fn layers(&self) -> usize {
        match self {
            Source::Weights { layers, .. } => layers.len(),
            _ => 1,
        }
    }
}

/// What covers the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help { scroll: u16 },
    Edit(LineEditor),
}

/// A one-line text editor (the sentence of `e`). `cursor` counts characters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LineEditor {
    pub text: String,
    pub cursor: usize,
}

impl LineEditor {
    pub fn new(text: impl Into<String>) -> LineEditor {
        let text = text.into();
        let cursor = text.chars().count();
        LineEditor { text, cursor }
    }

    fn byte_at(&self, char_idx: usize) -> usize {
        self.text
            .char_indices()
            .nth(char_idx)
            .map_or(self.text.len(), |(b, _)| b)
    }

    pub fn insert(&mut self, c: char) {
        let b = self.byte_at(self.cursor);
        self.text.insert(b, c);
        self.cursor += 1;
    }

    pub fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            let b = self.byte_at(self.cursor);
            self.text.remove(b);
        }
    }

    pub fn delete(&mut self) {
        if self.cursor < self.text.chars().count() {
            let b = self.byte_at(self.cursor);
            self.text.remove(b);
        }
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.text.chars().count());
    }

    pub fn home(&mut self) {
        self.cursor = 0;
    }

    pub fn end(&mut self) {
        self.cursor = self.text.chars().count();
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
    }

    /// Display columns before the cursor (CJK characters count two).
    pub fn cursor_column(&self) -> usize {
        crate::widgets::text::width(&self.text[..self.byte_at(self.cursor)])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKind {
    Info,
    Warn,
    Error,
}

/// A message for the person, shown until the next key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub kind: StatusKind,
    pub text: String,
}

/// What the last `s` (scale toggle) did to one head's weights, as the engine computed
/// them before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleChange {
    pub head: usize,
    /// Was the scale on before the toggle?
    pub was_scaled: bool,
    pub before: Vec<RowStats>,
    pub after: Vec<RowStats>,
}

/// A loaded lesson script and where playback stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Playback {
    pub steps: Vec<ScriptStep>,
    /// The step on screen.
    pub index: usize,
    pub playing: bool,
    /// Playback speed factor (1 = the scene's dwell times).
    pub speed: f64,
    /// Milliseconds of scene time spent on the current step.
    pub elapsed_ms: f64,
}

/// Speeds that `]` and `[` step through.
pub const SPEEDS: [f64; 8] = [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0];

/// Dwell of a step with none given.
pub const DEFAULT_DWELL_MS: u64 = 4000;

impl Playback {
    pub fn dwell_ms(&self, index: usize) -> u64 {
        match self.steps.get(index).map(|s| s.dwell_ms) {
            Some(0) | None => DEFAULT_DWELL_MS,
            Some(d) => d,
        }
    }

    /// True when the last step has been shown for its whole dwell time.
    pub fn finished(&self) -> bool {
        self.index + 1 >= self.steps.len() && self.elapsed_ms >= self.dwell_ms(self.index) as f64
    }
}

/// Per-view data that a view derives from the pipeline (through the engine) and keeps
/// between frames, e.g. the extra pipelines of the position experiments.
#[derive(Default)]
pub struct ViewStore {
    data: HashMap<ViewKind, Box<dyn Any + Send>>,
}

impl std::fmt::Debug for ViewStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.data.keys()).finish()
    }
}

impl ViewStore {
    pub fn get<T: 'static>(&self, kind: ViewKind) -> Option<&T> {
        self.data.get(&kind).and_then(|b| b.downcast_ref())
    }

    pub fn get_mut<T: 'static>(&mut self, kind: ViewKind) -> Option<&mut T> {
        self.data.get_mut(&kind).and_then(|b| b.downcast_mut())
    }

    pub fn set<T: Any + Send>(&mut self, kind: ViewKind, value: T) {
        self.data.insert(kind, Box::new(value));
    }

    pub fn clear(&mut self) {
        self.data.clear();
    }
}

/// Everything the app shows. Public fields are read by views and by recorders; change
/// them through `update` so derived data stays consistent.
#[derive(Debug)]
pub struct State {
    pub source: Source,
    /// The engine's computation for `source`: every number on screen comes from here.
    pub pipeline: Pipeline,
    pub view: ViewKind,
    pub stage: StageId,
    pub head: usize,
    /// Which of the stage's matrices has the cursor (e.g. 0 = Q, 1 = K, 2 = V).
    pub sub: usize,
    /// (row, column) of the cursor in that matrix.
    pub cursor: (usize, usize),
    /// Cells a script highlights.
    pub highlight: Vec<(usize, usize)>,
    /// Tiles (query block, key block) a script highlights, for the flash view.
    pub tiles: Vec<(usize, usize)>,
    /// A script's narration; None shows the stage's own.
    pub narration: Option<String>,
    pub overlay: Overlay,
    pub status: Option<Status>,
    pub scale_change: Option<ScaleChange>,
    /// What the flash view is set to: block sizes, loop order, playback of the tiles.
    pub flash: crate::tui::views::flash::FlashControls,
    pub script: Option<Playback>,
    /// The terminal size, for mouse hit-testing (the draw itself uses the frame's size).
    pub screen: (u16, u16),
    pub options: AppOptions,
    pub theme: Theme,
    pub glyphs: Glyphs,
    pub quit: bool,
    pub views: ViewStore,
    /// Tokens taken off by `-`, given back by `+`.
    pub(crate) reserve: Vec<String>,
    /// The sentence as first given, repeated by `+` when nothing is in reserve.
    pub(crate) original_tokens: Vec<String>,
}

impl State {
    /// Build the pipeline for `source` and open the pipeline view on its first stage.
    pub fn new(source: Source, options: AppOptions) -> Result<State> {
        let pipeline = source.build()?;
        let theme = Theme::choose(options.theme, options.depth);
        let glyphs = Glyphs::new(options.ascii);
        let stage = pipeline
            .stages
            .iter()
            .find(|s| s.active)
            .map_or(StageId::Tokens, |s| s.id);
        let original_tokens = pipeline.config.tokens.clone();
        let mut state = State {
            source,
            pipeline,
            view: ViewKind::Pipeline,
            stage,
            head: 0,
            sub: 0,
            cursor: (0, 0),
            highlight: Vec::new(),
            tiles: Vec::new(),
            narration: None,
            overlay: Overlay::None,
            status: None,
            scale_change: None,
            flash: Default::default(),
            script: None,
            screen: (MIN_COLS, MIN_ROWS),
            options,
            theme,
            glyphs,
            quit: false,
            views: ViewStore::default(),
            reserve: Vec::new(),
            original_tokens,
        };
        state.clamp();
        Ok(state)
    }

    /// A lesson model with these options.
    pub fn for_model(config: ModelConfig, options: AppOptions) -> Result<State> {
        State::new(Source::Model(config), options)
    }

    /// Load a script and show its first step; `autoplay` starts playing at once.
    pub fn with_script(mut self, steps: Vec<ScriptStep>, autoplay: bool, speed: f64) -> State {
        if steps.is_empty() {
            return self;
        }
        let first = steps[0].clone();
        self.script = Some(Playback {
            steps,
            index: 0,
            playing: autoplay,
            speed: if speed.is_finite() && speed > 0.0 {
                speed
            } else {
                1.0
            },
            elapsed_ms: 0.0,
        });
        crate::tui::update::apply_step(&mut self, &first);
        self
    }

    pub fn current_stage(&self) -> Option<&Stage> {
        self.pipeline.stage(self.stage)
    }

    pub fn heads(&self) -> usize {
        self.pipeline.shape.heads
    }

    /// The matrices the current stage shows for the current head: for a per-head stage
    /// the head's own matrix first, then its KV group's (k, v) where the stage has them;
    /// otherwise the stage's alternatives (e.g. Q, K, V, W_qkv).
    pub fn panes(&self) -> Vec<&Matrix> {
        self.pipeline.head_matrices(self.stage, self.head)
    }

    /// The matrix with the cursor.
    pub fn focused(&self) -> Option<&Matrix> {
        self.panes().get(self.sub).copied()
    }

    /// The model's options, if the data is a lesson model.
    pub fn model(&self) -> Option<&ModelConfig> {
        match &self.source {
            Source::Model(c) => Some(c),
            _ => None,
        }
    }

    /// Keep head, pane and cursor inside what the current stage and view have.
    pub fn clamp(&mut self) {
        let heads = self.heads().max(1);
        self.head = self.head.min(heads - 1);
        let panes = self.panes().len();
        self.sub = self.sub.min(panes.saturating_sub(1));
        let (rows, cols) = crate::tui::views::current(self).grid(self);
        self.cursor.0 = self.cursor.0.min(rows.saturating_sub(1));
        self.cursor.1 = self.cursor.1.min(cols.saturating_sub(1));
    }

    /// The narration line: a script's, or the current view's or stage's own.
    pub fn narration_text(&self) -> String {
        if let Some(n) = &self.narration {
            return n.clone();
        }
        if let Some(n) = crate::tui::narration::view(self.view, self.options.lang) {
            return n.to_string();
        }
        crate::tui::narration::stage(self.stage, self.options.lang).to_string()
    }

    pub fn set_status(&mut self, kind: StatusKind, text: impl Into<String>) {
        self.status = Some(Status {
            kind,
            text: text.into(),
        });
    }

    /// Milliseconds of scene time until autoplay changes the step, if it is playing.
    pub fn next_change_in_ms(&self) -> Option<u64> {
        let script = self
            .script
            .as_ref()
            .filter(|p| p.playing && !p.finished())
            .map(|p| {
                let left = p.dwell_ms(p.index) as f64 - p.elapsed_ms;
                (left.max(0.0) / p.speed).ceil() as u64
            });
        // The flash view's tiles animate on their own clock.
        let tiles = crate::tui::views::flash::next_tile_in_ms(self);
        match (script, tiles) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
