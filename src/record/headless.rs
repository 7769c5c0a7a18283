//! A scene played without a terminal: the app's [`State`] driven through [`update`] and
//! drawn by [`draw`] on ratatui's `TestBackend`, with time from a virtual clock that the
//! recorder advances itself. Nothing here reads the wall clock or the environment, so a
//! recording is the same bytes on every run.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

use super::ansi::{AnsiEncoder, FINISH};
use super::asciicast::{CastHeader, CastWriter};
use crate::cli::{Lang, TermSize, ThemeName};
use crate::error::{Error, Result};
use crate::scene::Scene;
use crate::scene::validate::MAX_DURATION_MS;
use crate::tui::{Action, AppOptions, State, draw, update};

/// How a scene is played headless.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadlessOptions {
    pub lang: Lang,
    pub size: TermSize,
    /// Playback speed factor; dwell times are divided by it.
    pub speed: f64,
    pub theme: Option<ThemeName>,
    pub ascii: bool,
}

/// The app on a scene, with a screen in memory.
pub struct Headless {
    state: State,
    terminal: Terminal<TestBackend>,
}

fn internal(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("{what}: {e}"))
}

impl Headless {
    /// Load `scene` and show its first step; `autoplay` lets virtual time move it on.
    pub fn new(scene: &Scene, opts: &HeadlessOptions, autoplay: bool) -> Result<Headless> {
        let title = scene.title.get(opts.lang).to_string();
        let app = AppOptions::headless(opts.lang, opts.theme, opts.ascii, title);
        let mut state = crate::tui::lesson::lesson_state(
            scene,
            crate::tui::script::lesson(scene, opts.lang),
            app,
            autoplay,
            opts.speed,
        )?;
        let TermSize { cols, rows } = opts.size;
        update(&mut state, Action::Resize { cols, rows });
        let terminal = Terminal::new(TestBackend::new(cols, rows))
            .map_err(|e| internal("cannot make the in-memory screen", e))?;
        Ok(Headless { state, terminal })
    }

    /// Show step `k` (from 0) of the scene.
    pub fn goto(&mut self, k: usize) {
        update(&mut self.state, Action::GotoStep(k));
    }

    /// Let `ms` of virtual time pass.
    pub fn tick(&mut self, ms: u64) {
        update(&mut self.state, Action::Tick { ms });
    }

    /// The step on screen, from 0.
    pub fn step_index(&self) -> Option<usize> {
        self.state.script.as_ref().map(|p| p.index)
    }

    /// Virtual milliseconds until the screen next changes by itself; `None` when the
    /// scene has finished (or is paused).
    pub fn next_change_in_ms(&self) -> Option<u64> {
        self.state.next_change_in_ms()
    }

    /// Draw the current state and return the screen.
    pub fn frame(&mut self) -> Result<Buffer> {
        let state = &self.state;
        let completed = self
            .terminal
            .draw(|f| draw(state, f))
            .map_err(|e| internal("cannot draw the frame", e))?;
        Ok(completed.buffer.clone())
    }

    pub fn state(&self) -> &State {
        &self.state
    }
}

/// The label of step `k`'s marker: the scene's, or `step N`.
fn marker_label(scene: &Scene, k: usize) -> String {
    match scene.steps.get(k).and_then(|s| s.marker.as_deref()) {
        Some(m) => format!("{}. {m}", k + 1),
        None => format!("step {}", k + 1),
    }
}

/// Play `scene` from start to end in virtual time and return it as asciicast v2: one
/// frame of output whenever the screen changes, a marker where each step begins.
pub fn record(scene: &Scene, opts: &HeadlessOptions) -> Result<Vec<u8>> {
    let mut player = Headless::new(scene, opts, true)?;
    let header = CastHeader {
        width: opts.size.cols,
        height: opts.size.rows,
        title: Some(format!("attnviz: {}", scene.title.get(opts.lang))),
    };
    let io = |e: std::io::Error| internal("cannot write the recording", e);
    let mut cast = CastWriter::new(Vec::new(), &header).map_err(io)?;
    let mut encoder = AnsiEncoder::new();
    let mut now_ms = 0u64;
    let mut shown = None;
    loop {
        let index = player.step_index();
        if index != shown {
            if let Some(k) = index {
                cast.marker(now_ms, &marker_label(scene, k)).map_err(io)?;
            }
            shown = index;
        }
        let screen = player.frame()?;
        cast.output(now_ms, &encoder.frame(&screen)).map_err(io)?;
        let Some(wait) = player.next_change_in_ms() else {
            break;
        };
        // A zero wait would not move the clock: let at least a millisecond pass.
        let wait = wait.max(1);
        player.tick(wait);
        now_ms += wait;
        // `scene check` keeps a scene within MAX_DURATION_MS at speed 1, so a recording
        // that runs on past it (with a minute's slack for rounding) is a bug.
        let limit_ms = (MAX_DURATION_MS as f64 / opts.speed.max(1e-3)) as u64 + 60_000;
        if now_ms > limit_ms {
            return Err(Error::Internal(format!(
                "the recording of scene '{}' did not end within {} hours of virtual time",
                scene.name,
                limit_ms / 3_600_000
            )));
        }
    }
    cast.output(now_ms, FINISH).map_err(io)?;
    Ok(cast.into_inner())
}

/// The screen at step `step` (from 1) of `scene`, as it looks when the step begins.
pub fn still(scene: &Scene, opts: &HeadlessOptions, step: usize) -> Result<Buffer> {
    let count = scene.steps.len();
    if step == 0 || step > count {
        return Err(Error::usage(format!(
            "--step {step}: scene '{}' has steps 1..={count}",
            scene.name
        )));
    }
    let mut player = Headless::new(scene, opts, true)?;
    player.goto(step - 1);
    player.frame()
}
