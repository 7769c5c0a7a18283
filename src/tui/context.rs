//! What every view reads: where the numbers come from, the engine's pipeline built from
//! them, the selection (view, stage, head, cursor, highlights), the status line and the
//! look (theme, glyphs, options), and one slot per view for the data it derives.
//!
//! This is the part of the app's state that views see. The app's own state
//! ([`State`](super::state::State)) holds a [`Context`] and adds what only the app
//! handles (overlays, the script being played, quitting); views never import it.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ndarray::{Array2, Array3};

use crate::cli::{Lang, ThemeName};
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::pipeline::{Matrix, ModelConfig, Pipeline, RowStats, Stage, StageId};
use crate::error::Result;
use crate::tui::theme::Theme;
use crate::tui::view_kind::ViewKind;
use crate::tui::views::flash::settings::FlashControls;
use crate::widgets::pooled::Pool;
use crate::widgets::text::escape_controls;
use crate::widgets::{ColorDepth, Glyphs, ValueScale};

/// How the app looks and behaves, independent of the data.
#[derive(Debug, Clone, PartialEq)]
pub struct AppOptions {
    pub lang: Lang,
    pub theme: Option<ThemeName>,
    pub depth: ColorDepth,
    pub ascii: bool,
    pub mouse: bool,
    /// Shown in the header: the scene's name or the files' names (control characters
    /// escaped).
    pub title: String,
    /// The kernel's SIMD tier, shown in the header; None in recordings and snapshots,
    /// which must be the same on every machine.
    pub simd: Option<&'static str>,
    /// Show wall-clock timings (how long a decode step took); off in recordings and
    /// snapshots, which must be the same bytes on every run.
    pub timings: bool,
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
            title: escape_controls(&title.into()).into_owned(),
            simd: Some(crate::kernel::Tier::detect().name()),
            timings: true,
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
            title: escape_controls(&title.into()).into_owned(),
            simd: None,
            timings: false,
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
    /// A real model's computation of a text (`attnviz --model MODEL --tokens TEXT`): the
    /// pipeline is block `layer`'s, recomputed by the engine from the model's tensors.
    Real {
        session: std::sync::Arc<crate::model::session::ModelSession>,
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
            Source::Real { session, layer } => {
                if session.block_fits() {
                    return session.block_pipeline(*layer);
                }
                // Too long for every stage in f64: the layer's weights alone.
                let (h, n) = (session.config().heads, session.n());
                let heads = (0..h)
                    .map(|hh| {
                        let w = session.head_weights(*layer, hh);
                        Array2::from_shape_fn((n, n), |(i, j)| w[i * n + j] as f64)
                    })
                    .collect();
                Pipeline::from_head_weights(session.pieces.clone(), heads)
            }
        }
    }

    pub fn is_model(&self) -> bool {
        matches!(self, Source::Model(_))
    }

    /// True if the app computes attention (so masks, PE and scale can change).
    pub fn is_computed(&self) -> bool {
        !matches!(self, Source::Weights { .. } | Source::Real { .. })
    }

    /// The real model's session, when the numbers come from one.
    pub fn session(&self) -> Option<&crate::model::session::ModelSession> {
        match self {
            Source::Real { session, .. } => Some(session),
            _ => None,
        }
    }

    /// Layers of a weights file (1 otherwise).
    pub fn layers(&self) -> usize {
        match self {
            Source::Weights { layers, .. } => layers.len(),
            Source::Real { session, .. } => session.config().layers,
            _ => 1,
        }
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

/// How the n x n maps are zoomed: entries per screen cell each way (1: full detail) and
/// how a cell summarises its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zoom {
    pub per_cell: usize,
    pub pool: Pool,
}

impl Default for Zoom {
    fn default() -> Zoom {
        Zoom {
            per_cell: 1,
            pool: Pool::Mean,
        }
    }
}

/// What views derive for drawing that costs too much to redo every frame at 1,024
/// tokens (pooled maps, colour scales), kept until the pipeline or the source changes
/// (`clear`, called by the app whenever it replaces them). Interior mutability because
/// views draw from a shared `&Context`; entries are keyed by the address of what they
/// were derived from, which is stable while the pipeline and the session live.
#[derive(Default)]
pub struct DrawCache {
    matrices: Mutex<HashMap<(usize, usize, Pool), Arc<Matrix>>>,
    maps: Mutex<HashMap<MapKey, Arc<Vec<Option<f64>>>>>,
    scales: Mutex<HashMap<(usize, usize), ValueScale>>,
}

/// (address of the maps drawn, layer, head, entries per cell, pool).
pub type MapKey = (usize, usize, usize, usize, Pool);

/// Entries past which a cache starts again (a bound on memory across zoom levels).
const CACHE_ENTRIES: usize = 4096;

fn memo<K: std::hash::Hash + Eq, V: Clone>(
    map: &Mutex<HashMap<K, V>>,
    key: K,
    make: impl FnOnce() -> V,
) -> V {
    let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = m.get(&key) {
        return v.clone();
    }
    if m.len() >= CACHE_ENTRIES {
        m.clear();
    }
    let v = make();
    m.insert(key, v.clone());
    v
}

impl DrawCache {
    /// The pooled form of `m` at this zoom, made once.
    pub fn matrix(
        &self,
        m: &Matrix,
        per_cell: usize,
        pool: Pool,
        make: impl FnOnce() -> Matrix,
    ) -> Arc<Matrix> {
        let key = (m as *const Matrix as usize, per_cell, pool);
        memo(&self.matrices, key, || Arc::new(make()))
    }

    /// A pooled attention map of a real model's head, made once.
    pub fn map(
        &self,
        key: MapKey,
        make: impl FnOnce() -> Vec<Option<f64>>,
    ) -> Arc<Vec<Option<f64>>> {
        memo(&self.maps, key, || Arc::new(make()))
    }

    /// Makes the maps of `keys` not made yet, all at once on every core (a view's first
    /// frame pools dozens of maps of n x n weights), then keeps them for [`Self::map`].
    pub fn fill_maps(&self, keys: &[MapKey], make: impl Fn(&MapKey) -> Vec<Option<f64>> + Sync) {
        use rayon::prelude::*;
        let missing: Vec<MapKey> = {
            let m = self.maps.lock().unwrap_or_else(|e| e.into_inner());
            keys.iter()
                .filter(|k| !m.contains_key(k))
                .copied()
                .collect()
        };
        if missing.len() < 2 {
            return;
        }
        let made: Vec<_> = missing
            .par_iter()
            .map(|k| (*k, Arc::new(make(k))))
            .collect();
        let mut m = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() + made.len() > CACHE_ENTRIES {
            m.clear();
        }
        m.extend(made);
    }

    /// A colour scale of the matrices starting at `first` (`count` of them), made once.
    pub fn scale(
        &self,
        first: &Matrix,
        count: usize,
        make: impl FnOnce() -> ValueScale,
    ) -> ValueScale {
        memo(&self.scales, (first as *const Matrix as usize, count), make)
    }

    pub fn clear(&self) {
        self.matrices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.maps.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.scales
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl std::fmt::Debug for DrawCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DrawCache")
    }
}

/// Texts at least this long get the zoom keys (a real model's always do).
pub const ZOOM_TOKENS: usize = 48;

/// Something a view asks of the app that only the app can do (rebuild the pipeline for
/// another layer, open another view); the app takes it after the view's `update`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Show head `head` of layer `layer` in `view` (its weights).
    OpenHead {
        layer: usize,
        head: usize,
        view: ViewKind,
    },
    /// Run the real model again with these heads (layer, head) ablated: added to (or,
    /// already ablated, taken out of) the current set if `toggle`, else the whole set.
    Ablate {
        heads: Vec<(usize, usize)>,
        toggle: bool,
    },
    /// Run the real model again keeping every layer's contributions beside its weights
    /// (once: later runs keep them).
    KeepContributions,
}

/// What the views draw and the selection they act on. Public fields are read by views
/// and recorders; the app changes them through `update`, views in their own `update`.
#[derive(Debug)]
pub struct Context {
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
    /// The variants view's panel a script step asked for, until that view takes it.
    pub variant: Option<crate::scene::Variant>,
    /// Positions a second of the scripted animation while it moves (the step's
    /// `animate`); the flash view shows it in place of its own speed.
    pub animation_rate: Option<f64>,
    /// A script's narration; None shows the stage's own.
    pub narration: Option<String>,
    pub status: Option<Status>,
    pub scale_change: Option<ScaleChange>,
    /// What the flash view is set to: block sizes, loop order, playback of the tiles.
    pub flash: FlashControls,
    /// The terminal size, for mouse hit-testing (the draw itself uses the frame's size).
    pub screen: (u16, u16),
    pub options: AppOptions,
    pub theme: Theme,
    pub glyphs: Glyphs,
    /// One slot per view for what it derives from the pipeline.
    pub views: ViewStore,
    /// What the open view asked the app to do (taken by the app after `update`).
    pub request: Option<Request>,
    pub zoom: Zoom,
    /// Derived drawing data (see [`DrawCache`]).
    pub cache: DrawCache,
    /// A second text on the real model (`--compare`, or typed with `e`), as many tokens
    /// as the first: the patch view patches between the two, the tokens view sets them
    /// side by side.
    pub compare: Option<Compare>,
}

/// The second text of a real model's session: its tokens, and its run once a worker
/// made it (the patch view's job runs it).
#[derive(Debug, Clone)]
pub struct Compare {
    pub text: String,
    pub ids: Vec<u32>,
    pub pieces: Vec<String>,
    pub session: Option<Arc<crate::model::session::ModelSession>>,
}

impl Context {
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

    /// Keep the cursor inside a grid of `rows` x `cols`.
    pub fn clamp_cursor(&mut self, (rows, cols): (usize, usize)) {
        self.cursor.0 = self.cursor.0.min(rows.saturating_sub(1));
        self.cursor.1 = self.cursor.1.min(cols.saturating_sub(1));
    }

    /// Do the zoom keys apply (a long text, or a real model)?
    pub fn zoomable(&self) -> bool {
        self.source.session().is_some() || self.pipeline.shape.n_k >= ZOOM_TOKENS
    }

    /// The layer on screen, for data with layers (0 otherwise).
    pub fn layer(&self) -> usize {
        match &self.source {
            Source::Weights { layer, .. } | Source::Real { layer, .. } => *layer,
            _ => 0,
        }
    }

    pub fn set_status(&mut self, kind: StatusKind, text: impl Into<String>) {
        self.status = Some(Status {
            kind,
            text: text.into(),
        });
    }
}
