//! The app's state: where the data comes from, the engine's pipeline built from it, and
//! what the person is looking at. No terminal in here: a recorder or a test builds a
//! [`State`], feeds it [`Action`](super::action::Action)s through
//! [`update`](super::update::update) and draws it on any backend.

use std::ops::{Deref, DerefMut};

use crate::engine::pipeline::{ModelConfig, StageId};
use crate::error::Result;
use crate::tui::script::ScriptStep;
use crate::tui::theme::Theme;
use crate::tui::view_kind::ViewKind;
use crate::tui::views;
use crate::widgets::Glyphs;

pub use crate::tui::context::{
    AppOptions, Context, LoadedTensors, ScaleChange, Source, Status, StatusKind, ViewStore,
};
pub use crate::tui::layout::{MIN_COLS, MIN_ROWS};

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
    /// The position of the current step's animation on screen, if it animates.
    pub frame: Option<usize>,
    /// A training lesson's evaluation as of when the current step began: its narration
    /// quotes these numbers, not the live ones, so what a step says stays true while the
    /// run trains on during its dwell.
    pub quoted: Option<crate::train::EvalRecord>,
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

    /// The current step's animation and the position it should show now.
    pub fn animation_now(&self) -> Option<(crate::scene::Animation, usize)> {
        let a = self.steps.get(self.index)?.animate?;
        Some((a, a.position_at(self.elapsed_ms)))
    }

    /// True when the last step has been shown for its whole dwell time.
    pub fn finished(&self) -> bool {
        self.index + 1 >= self.steps.len() && self.elapsed_ms >= self.dwell_ms(self.index) as f64
    }
}

/// Everything the app shows: the [`Context`] the views read (reached through `Deref`,
/// so `state.pipeline`, `state.cursor`, ... read as before), and what only the app
/// handles. Change it through `update` so derived data stays consistent.
#[derive(Debug)]
pub struct State {
    pub ctx: Context,
    pub overlay: Overlay,
    pub script: Option<Playback>,
    pub quit: bool,
    /// What steps the training run, when the app shows one (the train view).
    pub(crate) training: Option<crate::tui::train_runner::Runner>,
    /// Tokens taken off by `-`, given back by `+`.
    pub(crate) reserve: Vec<String>,
    /// The sentence as first given, repeated by `+` when nothing is in reserve.
    pub(crate) original_tokens: Vec<String>,
    /// The run of the real model with other interventions a worker computes (`d`, `D`).
    pub rerun: Option<PendingRerun>,
    /// The line the screen shows while workers compute (what, how far, Esc stops).
    pub progress: Option<String>,
}

/// A run of the real model the app waits for: the same text as the session `base` (see
/// [`session_key`](crate::tui::views::decode::session_key)) with `options`, perhaps
/// keeping the contributions.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRerun {
    pub base: String,
    pub options: crate::model::forward::ForwardOptions,
    /// Keep every layer's contributions too (`w`, the first time they are shown).
    pub contributions: bool,
    /// Asked for by a lesson step: once shown, the step's narration stays (no status).
    pub for_lesson: bool,
}

impl Deref for State {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl DerefMut for State {
    fn deref_mut(&mut self) -> &mut Context {
        &mut self.ctx
    }
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
        let ctx = Context {
            source,
            pipeline,
            view: ViewKind::Pipeline,
            stage,
            head: 0,
            sub: 0,
            cursor: (0, 0),
            highlight: Vec::new(),
            tiles: Vec::new(),
            variant: None,
            animation_rate: None,
            narration: None,
            status: None,
            scale_change: None,
            flash: Default::default(),
            screen: (MIN_COLS, MIN_ROWS),
            options,
            theme,
            glyphs,
            views: ViewStore::default(),
            request: None,
            zoom: Default::default(),
            cache: Default::default(),
            compare: None,
        };
        let mut state = State {
            ctx,
            overlay: Overlay::None,
            script: None,
            quit: false,
            training: None,
            reserve: Vec::new(),
            original_tokens,
            rerun: None,
            progress: None,
        };
        state.clamp();
        Ok(state)
    }

    /// A lesson model with these options.
    pub fn for_model(config: ModelConfig, options: AppOptions) -> Result<State> {
        State::new(Source::Model(config), options)
    }

    /// Show a message in the status line (the context's, here so that the message may
    /// be formatted from the state itself).
    pub fn set_status(&mut self, kind: StatusKind, text: impl Into<String>) {
        self.ctx.set_status(kind, text);
    }

    /// Keep head, pane and cursor inside what the current stage and view have.
    pub fn clamp(&mut self) {
        let heads = self.heads().max(1);
        self.ctx.head = self.head.min(heads - 1);
        let panes = self.panes().len();
        self.ctx.sub = self.sub.min(panes.saturating_sub(1));
        let grid = views::current(&self.ctx).grid(&self.ctx);
        self.ctx.clamp_cursor(grid);
    }
}
