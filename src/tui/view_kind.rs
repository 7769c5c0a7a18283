//! The views of the app, by name (scene files name them the same way, in their own
//! terms: [`SceneView`] maps onto these).

use std::fmt;
use std::str::FromStr;

use crate::scene::SceneView;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ViewKind {
    /// The stages one at a time, with the cell inspector.
    #[default]
    Pipeline,
    /// Every head's weights side by side, GQA groups marked.
    Heads,
    /// Sinusoidal table, RoPE rotations, ALiBi biases, permutation and shift experiments.
    Position,
    /// FlashAttention tile by tile.
    Flash,
    /// KV-cache decoding and GQA groups.
    Decode,
    /// Sliding window, BigBird, linear attention.
    Variants,
    /// Time and memory against n, measured on this CPU.
    Scaling,
}

impl ViewKind {
    pub const ALL: [ViewKind; 7] = [
        ViewKind::Pipeline,
        ViewKind::Heads,
        ViewKind::Position,
        ViewKind::Flash,
        ViewKind::Decode,
        ViewKind::Variants,
        ViewKind::Scaling,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ViewKind::Pipeline => "pipeline",
            ViewKind::Heads => "heads",
            ViewKind::Position => "position",
            ViewKind::Flash => "flash",
            ViewKind::Decode => "decode",
            ViewKind::Variants => "variants",
            ViewKind::Scaling => "scaling",
        }
    }
}

impl fmt::Display for ViewKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ViewKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ViewKind::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ViewKind::ALL.iter().map(|v| v.name()).collect();
                format!("unknown view '{s}'; expected one of {}", names.join(", "))
            })
    }
}

impl From<SceneView> for ViewKind {
    fn from(v: SceneView) -> ViewKind {
        match v {
            SceneView::Pipeline => ViewKind::Pipeline,
            SceneView::Heads => ViewKind::Heads,
            SceneView::Position => ViewKind::Position,
            SceneView::Flash => ViewKind::Flash,
            SceneView::Decode => ViewKind::Decode,
            SceneView::Variants => ViewKind::Variants,
            SceneView::Scaling => ViewKind::Scaling,
        }
    }
}
