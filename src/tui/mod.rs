//! The interactive app: attention, stage by stage, on the engine's numbers.
//!
//! # Structure
//! - [`state`]: [`State`] — the data source, the engine's [`Pipeline`] built from it,
//!   and what is on screen (view, stage, head, cursor, overlays, script playback).
//! - [`action`]: [`Action`] — everything that can happen, as data.
//! - [`update`](update::update): the only function that changes a `State`. Pure: no
//!   terminal, no clock, no environment; model changes rebuild the pipeline through
//!   the engine. Lesson playback (steps, animations, virtual time) is in `playback`,
//!   and a rebuilt source or a real model run again in `change`, both called by `update`.
//! - [`lesson`]: a lesson's first state, on its seeded model or the trained model it names.
//! - [`keymap`]: the one key table behind key handling, the help overlay and the hint bar
//!   (its entries are [`keys`] types, which views use for their own tables).
//! - [`render`]: [`draw`] and `impl Widget for &State`, overlays.
//! - [`layout`]: the frame's regions and mouse hit-testing against them.
//! - [`component`]: the [`View`](component::View) trait every view implements, and
//!   [`Hit`](component::Hit); [`context`]: the [`Context`](context::Context) views read
//!   (the data, the selection, the look, one slot per view). [`State`] holds a `Context`
//!   (through `Deref`) plus what only the app handles. Views import neither `state`,
//!   `update`, `render` nor `keymap` (`tests/cli/imports.rs` checks it).
//! - [`views`]: one module per view and the registry that Tab cycles.
//! - [`measure`]: the event loop's side of the scaling view's measuring thread.
//! - [`theme`]: one table of semantic styles; colour depth from COLORTERM/TERM, mono for
//!   NO_COLOR or `--theme mono`.
//! - [`terminal`], [`app`]: the real terminal (restored on exit, error and panic) and the
//!   event loop.
//! - [`clock`]: time for autoplay ([`clock::SystemClock`], [`clock::ManualClock`]).
//! - [`frame_bench`]: `attnviz bench --ui`.
//!
//! # Headless API (scripted playback, recording, snapshots, tests)
//! ```no_run
//! use attnviz::engine::pipeline::{ModelConfig, StageId};
//! use attnviz::tui::{Action, AppOptions, State, ScriptStep, draw, update};
//! use attnviz::cli::Lang;
//! use ratatui::{Terminal, backend::TestBackend};
//!
//! let options = AppOptions::headless(Lang::En, None, false, "my scene");
//! let steps = vec![ScriptStep { stage: Some(StageId::Softmax), dwell_ms: 3000, ..Default::default() }];
//! let mut state = State::for_model(ModelConfig::example(), options)?
//!     .with_script(steps, true, 1.0); // autoplay at speed 1; step 0 is applied
//! update(&mut state, Action::Resize { cols: 100, rows: 30 });
//! let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
//! term.draw(|f| draw(&state, f)).unwrap();
//! // Virtual time: the recorder decides how much passes.
//! let wait = state.next_change_in_ms();        // Some(ms) until the next step, None when done
//! update(&mut state, Action::Tick { ms: 3000 }); // advances to the next step when due
//! let on_screen = state.script.as_ref().map(|p| p.index); // the step shown (for markers)
//! # Ok::<(), attnviz::Error>(())
//! ```
//! A step can also be applied directly with `Action::ApplyStep(Box::new(step))`, or
//! jumped to with `Action::GotoStep(k)`; `PlayPause`, `StepNext`, `StepPrev`, `Faster`
//! and `Slower` act on a loaded script. Interactive playback is [`run_script`].

pub mod action;
pub mod app;
mod change;
pub mod clock;
pub mod compare;
pub mod component;
pub mod context;
mod derived;
pub mod frame_bench;
pub mod keymap;
pub mod keys;
pub mod layout;
pub mod lens_worker;
pub mod lesson;
pub mod measure;
pub mod narration;
mod playback;
pub mod render;
pub mod script;
pub mod state;
pub mod terminal;
pub mod theme;
pub mod train_runner;
pub mod train_worker;
pub mod training;
pub mod update;
pub mod view_kind;
pub mod views;

use std::path::Path;

pub use action::{Action, EditAction};
pub use render::draw;
pub use script::ScriptStep;
pub use state::{AppOptions, LoadedTensors, Source, State};
pub use update::update;
pub use view_kind::ViewKind;

use crate::cli::{TuiArgs, ViewArgs};
use crate::engine::pipeline::ModelConfig;
use crate::engine::tensors;
use crate::error::{Error, Result};
use crate::scene::Scene;

/// True if the command line changes the scene's model (then its script, written for
/// the scene's own model, is not played).
pub fn overrides_model(args: &TuiArgs) -> bool {
    args.tokens.is_some()
        || args.heads.is_some()
        || args.kv_heads.is_some()
        || args.d_model.is_some()
        || args.seed.is_some()
        || args.pe.is_some()
        || args.mask.is_some()
}

/// The default lesson's model with the command line's overrides applied.
pub fn config_from_args(args: &TuiArgs) -> Result<ModelConfig> {
    config_with_overrides(ModelConfig::example(), args)
}

/// `base` with the command line's overrides (--tokens, --heads, ...) applied.
pub fn config_with_overrides(base: ModelConfig, args: &TuiArgs) -> Result<ModelConfig> {
    let mut c = base;
    if let Some(t) = &args.tokens {
        c.tokens = ModelConfig::tokens_from_text(t);
    }
    if let Some(h) = args.heads {
        c.heads = h;
        // Without --kv-heads, more heads means plain multi-head attention.
        c.kv_heads = h;
    }
    if let Some(g) = args.kv_heads {
        c.kv_heads = g;
    }
    if let Some(d) = args.d_model {
        c.d_model = d;
    }
    if let Some(s) = args.seed {
        c.seed = s;
    }
    if let Some(pe) = args.pe {
        c.pe = pe;
    }
    if let Some(m) = &args.mask {
        c.mask = m.clone();
    }
    c.validate()?;
    Ok(c)
}

/// Bare `attnviz` (and `attnviz tui [SCENE]`): the app on a scene, by default the
/// built-in `intro`.
pub fn run(args: &TuiArgs) -> Result<()> {
    if let Some(model) = &args.model {
        return run_model(model, args);
    }
    let name = args.scene.as_deref().unwrap_or(crate::scene::DEFAULT_SCENE);
    let scene = crate::scene::load(name)?;
    let title = format!("{}: {}", scene.name, scene.title.get(args.lang));
    let options = AppOptions::interactive(args.lang, args.theme, args.ascii, args.no_mouse, title);
    if overrides_model(args) {
        let Some(config) = scene.toy() else {
            return Err(Error::usage(format!(
                "scene '{}' runs on a trained model: --tokens, --heads, --pe and the other model flags are for lessons on a seeded model",
                scene.name
            )));
        };
        let config = config_with_overrides(config.clone(), args)?;
        terminal::ensure_terminal()?;
        return app::run(State::for_model(config, options)?);
    }
    terminal::ensure_terminal()?;
    // The scene's script, paused on its first step: Space plays, n/p step, and every
    // other key explores the same numbers freely.
    let opts = ScriptOptions {
        app: options,
        speed: 1.0,
        autoplay: false,
    };
    run_script(&scene, script::lesson(&scene, args.lang), opts)
}

/// The sentence the app runs a real model on when `--tokens` is not given: a repeat, so
/// that induction heads have something to copy.
pub const MODEL_TEXT: &str = "The cat sat on the mat. The cat sat on the";

/// `attnviz --model MODEL [--tokens TEXT]`: the app on a real model's computation.
pub fn run_model(model: &str, args: &TuiArgs) -> Result<()> {
    let options = AppOptions::interactive(
        args.lang,
        args.theme,
        args.ascii,
        args.no_mouse,
        String::new(),
    );
    let state = match &args.chat {
        Some(message) => chat_state(model, message, options)?,
        None => model_state(model, args.tokens.as_deref(), options)?,
    };
    let state = match &args.compare {
        Some(text) => with_compare(state, text)?,
        None => state,
    };
    terminal::ensure_terminal()?;
    app::run(state)
}

/// The app's state on a real model (also for tests and recordings): the model loaded,
/// the text run through it, the pipeline view on its first layer.
pub fn model_state(model: &str, text: Option<&str>, options: AppOptions) -> Result<State> {
    let loaded = crate::model::load::load(model)?;
    let session = crate::model::session::ModelSession::new(
        loaded,
        text.unwrap_or(MODEL_TEXT),
        crate::model::forward::ForwardOptions::default(),
    )?;
    real_state(session, options)
}

/// The app on a real model with a second text (`--compare`): as many tokens as the
/// first (else exit 2 naming both counts and pieces), for the patch and tokens views.
pub fn with_compare(mut state: State, text: &str) -> Result<State> {
    let Some(s) = state.source.session() else {
        return Err(Error::usage(
            "--compare needs --model: it is a second text for a real model",
        ));
    };
    let mut compare =
        compare::compare_of(s, text).map_err(|e| Error::usage(format!("--compare: {e}")))?;
    // Run before the terminal opens, as the first text was: the tokens view shows it.
    compare.session = Some(compare::second_run(&s.model, &compare.ids)?);
    state.compare = Some(compare);
    Ok(state)
}

/// The app on a real model's computation of `message` in its chat template (`--chat`):
/// the template's tokens on screen, and the decode view stops at its end-of-turn token.
pub fn chat_state(model: &str, message: &str, options: AppOptions) -> Result<State> {
    let loaded = crate::model::load::load(model)?;
    let session = crate::model::session::ModelSession::chat(
        loaded,
        message,
        crate::model::forward::ForwardOptions::default(),
    )?;
    real_state(session, options)
}

fn real_state(
    session: crate::model::session::ModelSession,
    mut options: AppOptions,
) -> Result<State> {
    options.title = session.describe();
    State::new(
        Source::Real {
            session: std::sync::Arc::new(session),
            layer: 0,
        },
        options,
    )
}

/// Options of interactive playback (`attnviz play` without `--record`).
#[derive(Debug, Clone)]
pub struct ScriptOptions {
    pub app: AppOptions,
    /// Playback speed factor.
    pub speed: f64,
    /// Start playing at once (otherwise paused on the first step).
    pub autoplay: bool,
}

/// Play a lesson script in the terminal: autoplay with pause (Space), step (n / N),
/// speed (] / [), and everything else the app offers.
pub fn run_script(scene: &Scene, steps: Vec<ScriptStep>, opts: ScriptOptions) -> Result<()> {
    // Load (a trained model can take a second) before the terminal changes mode, so an
    // error is printed on a normal terminal.
    let state = lesson::lesson_state(scene, steps, opts.app, opts.autoplay, opts.speed)?;
    terminal::ensure_terminal()?;
    app::run(state)
}

/// `attnviz view`: the app on the user's own tensors.
pub fn run_view(args: &ViewArgs) -> Result<()> {
    let tokens = match &args.tokens_file {
        Some(p) => read_tokens(p)?,
        None => Vec::new(),
    };
    let (source, title) = view_source(args, tokens)?;
    if let (Some(path), Source::Weights { layers, .. }) = (&args.attn, &source)
        && let Some(warning) = tensors::attention_rows_warning(layers)
    {
        eprintln!("attnviz: warning: {}: {warning}", path.display());
    }
    let options = AppOptions::interactive(args.lang, args.theme, args.ascii, args.no_mouse, title);
    let state = State::new(source, options)?;
    terminal::ensure_terminal()?;
    app::run(state)
}

/// The data source `attnviz view` opens and a title naming its files.
pub fn view_source(args: &ViewArgs, tokens: Vec<String>) -> Result<(Source, String)> {
    let name = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    if let Some(path) = &args.attn {
        let layers = tensors::load_attention(path)?;
        // Check the first layer now so a bad file fails before the terminal opens.
        let source = Source::Weights {
            tokens,
            layers,
            layer: 0,
        };
        source.build()?;
        return Ok((source, format!("view: {}", name(path))));
    }
    let (Some(q), Some(k), Some(v)) = (&args.q, &args.k, &args.v) else {
        return Err(Error::usage(
            "attnviz view needs either --attn A.npy or all of --q Q.npy --k K.npy --v V.npy",
        ));
    };
    let qkv = tensors::load_qkv(q, k, v)?;
    let source = Source::Tensors(Box::new(LoadedTensors {
        tokens,
        q: qkv.q.single_sequence("--q")?,
        k: qkv.k.single_sequence("--k")?,
        v: qkv.v.single_sequence("--v")?,
        mask: crate::engine::config::MaskKind::None,
        pe: crate::engine::config::PeKind::None,
        scaled: true,
    }));
    // Check the shapes now so a bad file fails before the terminal opens.
    source.build()?;
    Ok((source, format!("view: {} {} {}", name(q), name(k), name(v))))
}

/// One token per line; a trailing empty line is ignored, an empty line inside is not.
pub fn read_tokens(path: &Path) -> Result<Vec<String>> {
    // One label per token of at most MAX_VIEW_TOKENS: 4 MiB is far more than they take.
    std::fs::metadata(path)
        .map_err(|e| Error::file(path, format!("cannot read the tokens file: {e}")))?;
    let text = crate::input::read_text_limited(path, 4 << 20, "a tokens file")?;
    let lines: Vec<&str> = text.lines().collect();
    let lines = match lines.split_last() {
        Some((last, rest)) if last.trim().is_empty() => rest.to_vec(),
        _ => lines,
    };
    if lines.is_empty() {
        return Err(Error::file(
            path,
            "the tokens file is empty; write one token per line, one line per query row",
        ));
    }
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let t = l.trim_end_matches('\r');
            if t.is_empty() {
                Err(Error::file(
                    path,
                    format!("line {}: empty token; write one token per line", i + 1),
                ))
            } else {
                Ok(t.to_string())
            }
        })
        .collect()
}
