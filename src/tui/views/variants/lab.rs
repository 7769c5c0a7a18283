//! What the variants view derives from the lesson through `engine::variants`: the
//! sliding window's receptive field, the BigBird pattern and its tiles, and linear
//! attention beside softmax, for the settings a person chose.

use ndarray::Array2;

use crate::engine::config::{BIGBIRD_DEFAULT, BigBird, MaskKind};
use crate::engine::pipeline::Pipeline;
use crate::engine::variants::{self, BigBirdPattern, LinearVsSoftmax, SlidingWindow, TileCounts};
use crate::scene::Variant;
use crate::tui::views::decode::HeadInputs;

/// Layers the receptive-field panel goes up to when the window never covers the
/// sentence (W = 1).
pub(super) const MAX_LAYERS: usize = 16;

/// Which variant is on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Window,
    BigBird,
    Linear,
}

impl Mode {
    pub(super) fn next(self) -> Mode {
        match self {
            Mode::Window => Mode::BigBird,
            Mode::BigBird => Mode::Linear,
            Mode::Linear => Mode::Window,
        }
    }

    /// The panel a lesson step names.
    pub(super) fn from_scene(v: Variant) -> Mode {
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
pub(super) fn layers_to_cover(n: usize, window: usize) -> usize {
    if window <= 1 {
        MAX_LAYERS
    } else {
        n.saturating_sub(1).div_ceil(window - 1).max(1)
    }
}

impl Settings {
    pub(super) fn for_pipeline(p: &Pipeline) -> Settings {
        let n = p.shape.n_k;
        // A third of the sentence: narrow enough that the reach visibly grows.
        let third = n.div_ceil(3).max(2);
        let (window, bigbird) = match p.mask.kind() {
            MaskKind::Window(w) | MaskKind::WindowSinks { window: w, .. } => (*w, BIGBIRD_DEFAULT),
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
