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
        // No worker thread here: the model runs a step asks for are computed in place.
        crate::tui::lens_worker::run_pending(&mut self.state);
    }

    /// Let `ms` of virtual time pass.
    pub fn tick(&mut self, ms: u64) {
        update(&mut self.state, Action::Tick { ms });
        crate::tui::lens_worker::run_pending(&mut self.state);
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
        // No worker thread here: a logit lens the lens view waits for is computed in
        // place, so the recording shows it.
        crate::tui::lens_worker::run_pending(&mut self.state);
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

/// One screen of a recording and when it appears, in virtual milliseconds.
#[derive(Debug, Clone)]
pub struct Frame {
    pub at_ms: u64,
    pub screen: Buffer,
}

/// A scene played from start to end in virtual time: the one list of frames every
/// format (cast, SVG, GIF) is written from, so they all show the same screens at the
/// same times.
#[derive(Debug, Clone)]
pub struct Recording {
    pub cols: u16,
    pub rows: u16,
    pub title: String,
    /// Times strictly increase, the first is 0, and no screen equals the one before it.
    pub frames: Vec<Frame>,
    /// Where each step begins: (time, label).
    pub markers: Vec<(u64, String)>,
    /// When the last frame's time is up: the end of the scene.
    pub end_ms: u64,
}

impl Recording {
    /// How long frame `i` stays on screen.
    pub fn shown_ms(&self, i: usize) -> u64 {
        let next = self.frames.get(i + 1).map_or(self.end_ms, |f| f.at_ms);
        next - self.frames[i].at_ms
    }
}

/// Play `scene` from start to end in virtual time: a frame whenever the screen changes
/// (a step begins, an animation shows its next tile or token), a marker where each step
/// begins.
pub fn play_through(scene: &Scene, opts: &HeadlessOptions) -> Result<Recording> {
    play_watching(scene, opts, |_, _| {})
}

/// [`play_through`] that also shows `on_step` the app's state as each step begins (its
/// index from 0), so a test can check what the step quoted from the same play it records.
pub fn play_watching(
    scene: &Scene,
    opts: &HeadlessOptions,
    on_step: impl FnMut(usize, &State),
) -> Result<Recording> {
    let mut frames = Vec::new();
    let played = play_inner(
        scene,
        opts,
        |f| {
            frames.push(f.clone());
            Ok(())
        },
        on_step,
    )?;
    Ok(Recording {
        cols: opts.size.cols,
        rows: opts.size.rows,
        title: played.title,
        frames,
        markers: played.markers,
        end_ms: played.end_ms,
    })
}

/// What [`play_each`] tells after the last frame: a [`Recording`] without its frames.
#[derive(Debug, Clone)]
pub struct Played {
    pub title: String,
    pub frames: usize,
    pub markers: Vec<(u64, String)>,
    pub end_ms: u64,
}

/// [`play_through`] handing each frame to `each` as it is drawn instead of keeping it:
/// only the screen before is held (to skip a screen equal to it), so a long or large
/// recording written frame by frame takes the memory of one frame.
pub fn play_each(
    scene: &Scene,
    opts: &HeadlessOptions,
    each: impl FnMut(&Frame) -> Result<()>,
) -> Result<Played> {
    play_inner(scene, opts, each, |_, _| {})
}

fn play_inner(
    scene: &Scene,
    opts: &HeadlessOptions,
    mut each: impl FnMut(&Frame) -> Result<()>,
    mut on_step: impl FnMut(usize, &State),
) -> Result<Played> {
    let mut player = Headless::new(scene, opts, true)?;
    let mut last: Option<Frame> = None;
    let mut frames = 0;
    let mut markers = Vec::new();
    let mut now_ms = 0u64;
    let mut shown = None;
    loop {
        let index = player.step_index();
        if index != shown {
            if let Some(k) = index {
                markers.push((now_ms, marker_label(scene, k)));
                on_step(k, player.state());
            }
            shown = index;
        }
        let screen = player.frame()?;
        if last.as_ref().is_none_or(|f| f.screen != screen) {
            let frame = Frame {
                at_ms: now_ms,
                screen,
            };
            each(&frame)?;
            frames += 1;
            last = Some(frame);
        }
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
    Ok(Played {
        title: format!("attnviz: {}", scene.title.get(opts.lang)),
        frames,
        markers,
        end_ms: now_ms,
    })
}

/// Play `scene` from start to end in virtual time and return it as asciicast v2.
pub fn record(scene: &Scene, opts: &HeadlessOptions) -> Result<Vec<u8>> {
    cast(&play_through(scene, opts)?)
}

/// A recording as asciicast v2: each frame as the output that draws it over the one
/// before, the markers at their times.
pub fn cast(rec: &Recording) -> Result<Vec<u8>> {
    let header = CastHeader {
        width: rec.cols,
        height: rec.rows,
        title: Some(rec.title.clone()),
    };
    let io = |e: std::io::Error| internal("cannot write the recording", e);
    let mut cast = CastWriter::new(Vec::new(), &header).map_err(io)?;
    let mut encoder = AnsiEncoder::new();
    let mut markers = rec.markers.iter().peekable();
    for f in &rec.frames {
        while let Some((at, label)) = markers.next_if(|(at, _)| *at <= f.at_ms) {
            cast.marker(*at, label).map_err(io)?;
        }
        cast.output(f.at_ms, &encoder.frame(&f.screen))
            .map_err(io)?;
    }
    for (at, label) in markers {
        cast.marker(*at, label).map_err(io)?;
    }
    cast.output(rec.end_ms, FINISH).map_err(io)?;
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
    if scene.train().is_some() {
        // A training lesson's step shows the run as it stands when the step begins:
        // train up to there on the virtual clock.
        while player.step_index() < Some(step - 1) {
            let Some(wait) = player.next_change_in_ms() else {
                break;
            };
            player.tick(wait.max(1));
        }
        return player.frame();
    }
    player.goto(step - 1);
    player.frame()
}

/// The screens of every step of `scene`, in order, each as `still` gives it. A training
/// lesson is played once on the virtual clock, so its run trains once for all its steps
/// rather than once per step.
pub fn stills(scene: &Scene, opts: &HeadlessOptions) -> Result<Vec<Buffer>> {
    let count = scene.steps.len();
    if scene.train().is_none() {
        return (1..=count).map(|k| still(scene, opts, k)).collect();
    }
    let mut player = Headless::new(scene, opts, true)?;
    let mut screens = Vec::with_capacity(count);
    for k in 0..count {
        while player.step_index() < Some(k) {
            let Some(wait) = player.next_change_in_ms() else {
                break;
            };
            player.tick(wait.max(1));
        }
        screens.push(player.frame()?);
    }
    Ok(screens)
}
