//! The panels of the variants view a lesson step can choose (`variant = "linear"`), in
//! the scene's own terms. The variants view maps them onto its modes.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Sliding-window attention and its receptive field over layers.
    Window,
    /// BigBird's band, global and random blocks.
    BigBird,
    /// Linear attention beside softmax attention.
    Linear,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Window, Variant::BigBird, Variant::Linear];

    /// The name scene files write (`variant = "bigbird"`).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Window => "window",
            Variant::BigBird => "bigbird",
            Variant::Linear => "linear",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Variant::ALL.iter().map(|v| v.name()).collect();
                format!(
                    "unknown variant '{s}'; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>(), Ok(v));
        }
        let err = "sliding".parse::<Variant>().unwrap_err();
        assert!(
            err.contains("expected one of window, bigbird, linear"),
            "{err}"
        );
    }
}
