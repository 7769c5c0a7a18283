//! `attnviz bench --ui`: how long a frame takes. Every view is drawn at 200x60 into a
//! ratatui TestBackend (the same draw and diff a terminal gets, without the terminal's
//! own I/O), for the default lesson and for a longer one, and with `--model` on a real
//! model's computation of a long text (1,024 tokens by default) at full detail and
//! zoomed out; the cursor moves every frame so each frame differs.

use std::sync::Arc;
use std::time::Instant;

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::cli::{BenchArgs, Lang};
use crate::engine::pipeline::ModelConfig;
use crate::error::{Error, Result};
use crate::model::forward::ForwardOptions;
use crate::model::session::{MAX_APP_TOKENS, ModelSession};
use crate::tui::action::Action;
use crate::tui::context::Source;
use crate::tui::render::draw;
use crate::tui::state::{AppOptions, State};
use crate::tui::update::update;
use crate::tui::views;

pub const COLS: u16 = 200;
pub const ROWS: u16 = 60;
/// Frames drawn before timing (caches, first allocations).
const WARMUP_FRAMES: usize = 20;
/// Frames timed per view.
const TIMED_FRAMES: usize = 300;

#[derive(Debug, Clone, serde::Serialize)]
pub struct FrameRecord {
    pub view: String,
    /// Tokens of the text drawn.
    pub tokens: usize,
    /// Entries per screen cell each way (1: full detail).
    pub zoom: usize,
    pub cols: u16,
    pub rows: u16,
    /// Mean over the timed frames.
    pub ms_per_frame: f64,
    /// The slowest 5% start here.
    pub p95_ms: f64,
    pub frames: usize,
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("frame benchmark: {e}"))
}

/// One frame's worth of change: walk the cursor (and, in views with stages, the stages)
/// so the diff has work to do.
fn next_frame(state: &mut State, k: usize) {
    let action = match k % 12 {
        0 if views::current(state).shows_stages() => Action::StageNext,
        1..=4 => Action::Move { rows: 0, cols: 1 },
        5..=8 => Action::Move { rows: 1, cols: 0 },
        9 => Action::Move { rows: -3, cols: -3 },
        _ => Action::HeadNext,
    };
    update(state, action);
    if k % 48 == 47 {
        update(state, Action::StageFirst);
    }
}

/// The lessons timed: the default one, and one four times as long and wide.
fn lessons() -> Vec<ModelConfig> {
    let small = ModelConfig::example();
    let mut large = ModelConfig::example();
    let words = ModelConfig::tokens_from_text(
        "Attention lets every token look at every other token, weigh what it finds by \
         how well its query matches their keys, and mix their values into a new vector",
    );
    large.tokens = words.iter().cycle().take(32).cloned().collect();
    large.d_model = 64;
    vec![small, large]
}

/// Time every view at `cols` x `rows`.
pub fn measure(cols: u16, rows: u16) -> Result<Vec<FrameRecord>> {
    let mut out = Vec::new();
    for config in lessons() {
        let source = Source::Model(config);
        for view in views::VIEWS {
            let make = || State::new(source.clone(), options());
            if view.available(&*make()?) {
                out.push(measure_view(make, view.kind(), cols, rows, 1)?);
            }
        }
    }
    Ok(out)
}

/// Time every view on a real model's computation of a text of `tokens` tokens, at full
/// detail and zoomed out (4x4 entries per cell).
pub fn measure_model(model: &str, tokens: usize, cols: u16, rows: u16) -> Result<Vec<FrameRecord>> {
    if tokens == 0 || tokens > MAX_APP_TOKENS {
        return Err(Error::usage(format!(
            "--ui-tokens {tokens}: the app opens texts of 1..={MAX_APP_TOKENS} tokens"
        )));
    }
    let loaded = crate::model::load::load(model)?;
    let sentence = "The cat sat on the mat, and the dog watched it from the door. ";
    let mut ids = loaded.tokenizer.encode(&sentence.repeat(tokens / 8 + 2))?;
    ids.truncate(tokens);
    let session = ModelSession::from_ids(loaded, ids, ForwardOptions::default())?;
    let n = session.n();
    let source = Source::Real {
        session: Arc::new(session),
        layer: 0,
    };
    let mut out = Vec::new();
    for view in views::VIEWS {
        for zoom in [1, 4] {
            let make = || State::new(source.clone(), options());
            if !view.available(&*make()?) || (zoom > 1 && !view.zooms()) {
                continue;
            }
            let mut r = measure_view(make, view.kind(), cols, rows, zoom)?;
            r.tokens = n;
            out.push(r);
        }
    }
    Ok(out)
}

fn options() -> AppOptions {
    AppOptions::headless(Lang::En, None, false, "bench")
}

fn measure_view(
    make: impl Fn() -> Result<State>,
    kind: crate::tui::view_kind::ViewKind,
    cols: u16,
    rows: u16,
    zoom: usize,
) -> Result<FrameRecord> {
    let mut state = make()?;
    update(&mut state, Action::Resize { cols, rows });
    update(&mut state, Action::SetView(kind));
    if kind == crate::tui::view_kind::ViewKind::Decode {
        // A real model's decoding, which the event loop computes on a worker: here and
        // now, so the frames timed are the decoding's.
        crate::tui::lens_worker::run_pending(&mut state);
    }
    while state.zoom.per_cell < zoom {
        let before = state.zoom.per_cell;
        update(&mut state, Action::ZoomOut);
        if state.zoom.per_cell == before {
            break;
        }
    }
    let mut term = Terminal::new(TestBackend::new(cols, rows)).map_err(internal)?;
    let mut times = Vec::with_capacity(TIMED_FRAMES);
    for k in 0..WARMUP_FRAMES + TIMED_FRAMES {
        next_frame(&mut state, k);
        let t0 = Instant::now();
        term.draw(|f| draw(&state, f)).map_err(internal)?;
        if k >= WARMUP_FRAMES {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    times.sort_by(f64::total_cmp);
    let p95 = times[(times.len() * 95 / 100).min(times.len() - 1)];
    Ok(FrameRecord {
        view: kind.name().to_string(),
        tokens: state.pipeline.shape.n_k,
        zoom: state.zoom.per_cell,
        cols,
        rows,
        ms_per_frame: mean,
        p95_ms: p95,
        frames: TIMED_FRAMES,
    })
}

/// `attnviz bench --ui [--json]`.
pub fn bench_ui(args: &BenchArgs) -> Result<()> {
    let mut records = measure(COLS, ROWS)?;
    if let Some(model) = &args.model {
        records.extend(measure_model(model, args.ui_tokens, COLS, ROWS)?);
    }
    let mut text = String::new();
    if args.json {
        text = serde_json::to_string_pretty(&records).map_err(internal)?;
        text.push('\n');
    } else {
        text.push_str(&format!(
            "{:<10} {:>7} {:>5} {:>9} {:>10} {:>9}\n",
            "view", "tokens", "zoom", "size", "ms/frame", "p95 ms"
        ));
        for r in &records {
            text.push_str(&format!(
                "{:<10} {:>7} {:>5} {:>9} {:>10.3} {:>9.3}\n",
                r.view,
                r.tokens,
                r.zoom,
                format!("{}x{}", r.cols, r.rows),
                r.ms_per_frame,
                r.p95_ms
            ));
        }
    }
    crate::output::print(&text)
}
