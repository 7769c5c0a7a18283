//! Which pass of FlashAttention the flash view plays (`pass = "backward"` on a lesson
//! step), in the scene's own terms. The flash view maps it onto its mode.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FlashPass {
    /// The forward: the online softmax, tile by tile.
    #[default]
    Forward,
    /// The backward: dQ, dK, dV tile by tile, key blocks outer.
    Backward,
}

impl FlashPass {
    pub const ALL: [FlashPass; 2] = [FlashPass::Forward, FlashPass::Backward];

    /// The name scene files write (`pass = "backward"`).
    pub fn name(self) -> &'static str {
        match self {
            FlashPass::Forward => "forward",
            FlashPass::Backward => "backward",
        }
    }
}

impl fmt::Display for FlashPass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FlashPass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FlashPass::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown pass '{s}'; expected forward or backward"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for p in FlashPass::ALL {
            assert_eq!(p.name().parse::<FlashPass>(), Ok(p));
        }
        assert!("Backward".parse::<FlashPass>().is_err());
    }
}
