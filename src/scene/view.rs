//! The views a scene can open, in the scene's own terms (the names scene files use).
//! The app names its views with the same type (`tui::ViewKind`), so the two lists
//! cannot drift apart; a scene never depends on the app.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SceneView {
    /// The stages one at a time, with the cell inspector.
    #[default]
    Pipeline,
    /// Every head's weights side by side.
    Heads,
    /// Position encodings and their experiments.
    Position,
    /// FlashAttention tile by tile.
    Flash,
    /// KV-cache decoding and GQA groups.
    Decode,
    /// Sliding window, BigBird, linear attention.
    Variants,
    /// Time and memory against n.
    Scaling,
    /// A real model: every layer x head as a small map at once.
    Model,
    /// A real model: where one token looks, in every head of the layer.
    Tokens,
    /// A real causal model: the logit lens, each layer's guess at the next token.
    Lens,
    /// A real causal model: direct logit attribution of its answer, head by head.
    Attribution,
    /// A real causal model and two texts: activation patching from one into the other.
    Patch,
    /// A small model training: its loss curve, head scores and maps, live.
    Train,
}

impl SceneView {
    pub const ALL: [SceneView; 13] = [
        SceneView::Pipeline,
        SceneView::Heads,
        SceneView::Position,
        SceneView::Flash,
        SceneView::Decode,
        SceneView::Variants,
        SceneView::Scaling,
        SceneView::Model,
        SceneView::Tokens,
        SceneView::Lens,
        SceneView::Attribution,
        SceneView::Patch,
        SceneView::Train,
    ];

    /// The name scene files write (`view = "flash"`).
    pub fn name(self) -> &'static str {
        match self {
            SceneView::Pipeline => "pipeline",
            SceneView::Heads => "heads",
            SceneView::Position => "position",
            SceneView::Flash => "flash",
            SceneView::Decode => "decode",
            SceneView::Variants => "variants",
            SceneView::Scaling => "scaling",
            SceneView::Model => "model",
            SceneView::Tokens => "tokens",
            SceneView::Lens => "lens",
            SceneView::Attribution => "attribution",
            SceneView::Patch => "patch",
            SceneView::Train => "train",
        }
    }
}

impl fmt::Display for SceneView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SceneView {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SceneView::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = SceneView::ALL.iter().map(|v| v.name()).collect();
                format!("unknown view '{s}'; expected one of {}", names.join(", "))
            })
    }
}

/// What the model view shows on a trained model (`show` in a step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelShow {
    /// Every layer x head as a small attention map.
    Maps,
    PrevToken,
    FirstToken,
    Duplicate,
    Induction,
    Entropy,
    /// Attention rollout through every layer.
    Rollout,
}

impl ModelShow {
    pub const ALL: [ModelShow; 7] = [
        ModelShow::Maps,
        ModelShow::PrevToken,
        ModelShow::FirstToken,
        ModelShow::Duplicate,
        ModelShow::Induction,
        ModelShow::Entropy,
        ModelShow::Rollout,
    ];

    /// The name scene files write (`show = "induction"`), as `heads --sort` names scores.
    pub fn name(self) -> &'static str {
        match self {
            ModelShow::Maps => "maps",
            ModelShow::PrevToken => "prev-token",
            ModelShow::FirstToken => "first-token",
            ModelShow::Duplicate => "duplicate",
            ModelShow::Induction => "induction",
            ModelShow::Entropy => "entropy",
            ModelShow::Rollout => "rollout",
        }
    }
}

impl FromStr for ModelShow {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelShow::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ModelShow::ALL.iter().map(|v| v.name()).collect();
                format!(
                    "unknown display '{s}'; expected one of {}",
                    names.join(", ")
                )
            })
    }
}
