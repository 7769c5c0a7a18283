//! The kinds of position encoding and mask a user can choose, as parsed from the command
//! line and from scene files (`--pe KIND`, `--mask KIND`).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Default RoPE base (Su et al.; LLaMA).
pub const ROPE_BASE: f64 = 10000.0;

/// Position encoding kinds: `none`, `sinusoidal`, `learned`, `rope[:base]`, `alibi`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum PeKind {
    None,
    #[default]
    Sinusoidal,
    /// A seeded table of position vectors, standing in for trained ones.
    Learned,
    /// Rotary embedding of interleaved pairs (2i, 2i+1) with this base.
    Rope {
        base: f64,
    },
    /// No vector added; a per-head linear bias on the scores instead.
    Alibi,
}

impl PeKind {
    /// All kinds in the order the app cycles through them.
    pub const CYCLE: [PeKind; 5] = [
        PeKind::None,
        PeKind::Sinusoidal,
        PeKind::Learned,
        PeKind::Rope { base: ROPE_BASE },
        PeKind::Alibi,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            PeKind::None => "none",
            PeKind::Sinusoidal => "sinusoidal",
            PeKind::Learned => "learned",
            PeKind::Rope { .. } => "rope",
            PeKind::Alibi => "alibi",
        }
    }
}

impl fmt::Display for PeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeKind::Rope { base } if *base != ROPE_BASE => write!(f, "rope:{base}"),
            other => f.write_str(other.name()),
        }
    }
}

impl FromStr for PeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (head, arg) = match s.split_once(':') {
            Some((h, a)) => (h, Some(a)),
            None => (s, None),
        };
        let no_arg = |k: PeKind| match arg {
            None => Ok(k),
            Some(_) => Err(format!("position encoding '{head}' takes no ':' argument")),
        };
        match head.to_ascii_lowercase().as_str() {
            "none" => no_arg(PeKind::None),
            "sinusoidal" | "sin" => no_arg(PeKind::Sinusoidal),
            "learned" => no_arg(PeKind::Learned),
            "alibi" => no_arg(PeKind::Alibi),
            "rope" => {
                let base = match arg {
                    None => ROPE_BASE,
                    Some(a) => a
                        .parse::<f64>()
                        .ok()
                        .filter(|b| b.is_finite() && *b > 1.0)
                        .ok_or_else(|| {
                            format!(
                                "RoPE base '{a}' is not a number above 1; write e.g. rope:10000"
                            )
                        })?,
                };
                Ok(PeKind::Rope { base })
            }
            _ => Err(format!(
                "unknown position encoding '{s}'; expected one of none, sinusoidal, learned, rope[:base], alibi"
            )),
        }
    }
}

/// BigBird's defaults: 1 block each side, 1 global block, 1 random block per row.
pub const BIGBIRD_DEFAULT: BigBird = BigBird {
    window: 1,
    globals: 1,
    random: 1,
    block: 1,
};

/// BigBird's block-sparse pattern (Zaheer et al. 2020), in units of `block` tokens:
/// a query block sees the key blocks within `window` of its own, the first `globals`
/// blocks (which in turn see everything), and `random` seeded random blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BigBird {
    pub window: usize,
    pub globals: usize,
    pub random: usize,
    pub block: usize,
}

/// Mask kinds: `none`, `causal`, `window:W`, `window:W,S`, `padding:L1,L2,..`,
/// `bigbird[:w,g,r[,block]]`, `file:PATH.npy`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MaskKind {
    #[default]
    None,
    /// Bottom-right aligned: query i sees keys j <= i + Nk - Nq.
    Causal,
    /// Causal sliding window: query i' sees keys i' - W < j <= i'.
    Window(usize),
    /// The causal sliding window plus the first `sinks` keys, always visible
    /// (StreamingLLM's attention sinks, Xiao et al. 2023): query i' sees keys j <= i' with
    /// j > i' - W or j < S. `window:W,0` parses as `window:W`, so `sinks` is >= 1.
    WindowSinks {
        window: usize,
        sinks: usize,
    },
    /// Valid key lengths, one per batch entry.
    Padding(Vec<usize>),
    BigBird(BigBird),
    /// A [Nq, Nk] (or [H,Nq,Nk], [B,H,Nq,Nk]) array: 0/1 keep-mask, or additive biases.
    File(PathBuf),
}

impl MaskKind {
    pub fn name(&self) -> &'static str {
        match self {
            MaskKind::None => "none",
            MaskKind::Causal => "causal",
            MaskKind::Window(_) | MaskKind::WindowSinks { .. } => "window",
            MaskKind::Padding(_) => "padding",
            MaskKind::BigBird(_) => "bigbird",
            MaskKind::File(_) => "file",
        }
    }
}

impl fmt::Display for MaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaskKind::None => f.write_str("none"),
            MaskKind::Causal => f.write_str("causal"),
            MaskKind::Window(w) => write!(f, "window:{w}"),
            MaskKind::WindowSinks { window, sinks } => write!(f, "window:{window},{sinks}"),
            MaskKind::Padding(ls) => {
                let ls: Vec<String> = ls.iter().map(|l| l.to_string()).collect();
                write!(f, "padding:{}", ls.join(","))
            }
            MaskKind::BigBird(b) => write!(
                f,
                "bigbird:{},{},{},{}",
                b.window, b.globals, b.random, b.block
            ),
            MaskKind::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

fn parse_count(what: &str, s: &str, min: usize) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(v) if v >= min => Ok(v),
        _ => Err(format!(
            "{what} '{}' must be a whole number >= {min}",
            s.trim()
        )),
    }
}

impl FromStr for MaskKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (head, arg) = match s.split_once(':') {
            Some((h, a)) => (h, Some(a)),
            None => (s, None),
        };
        match (head.to_ascii_lowercase().as_str(), arg) {
            ("none", None) => Ok(MaskKind::None),
            ("causal", None) => Ok(MaskKind::Causal),
            ("window", Some(a)) => {
                let (w, sinks) = match a.split_once(',') {
                    Some((w, s)) => (w, parse_count("window sinks S", s, 0)?),
                    None => (a, 0),
                };
                let window = parse_count("window size W", w, 1)?;
                Ok(match sinks {
                    0 => MaskKind::Window(window),
                    sinks => MaskKind::WindowSinks { window, sinks },
                })
            }
            ("window", None) => Err("window needs a size: write window:W with W >= 1, e.g. window:4, or window:W,S to keep the first S keys visible too".into()),
            ("padding", Some(ls)) => {
                let lens = ls
                    .split(',')
                    .map(|l| parse_count("padding length", l, 0))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(MaskKind::Padding(lens))
            }
            ("padding", None) => Err(
                "padding needs the valid length of each sequence: write padding:L1,L2,.. e.g. padding:5,3".into(),
            ),
            ("bigbird", None) => Ok(MaskKind::BigBird(BIGBIRD_DEFAULT)),
            ("bigbird", Some(a)) => {
                let parts: Vec<&str> = a.split(',').collect();
                if !(3..=4).contains(&parts.len()) {
                    return Err(format!(
                        "bigbird takes window,globals,random[,block], e.g. bigbird:1,1,1; got '{a}'"
                    ));
                }
                Ok(MaskKind::BigBird(BigBird {
                    window: parse_count("bigbird window", parts[0], 0)?,
                    globals: parse_count("bigbird globals", parts[1], 0)?,
                    random: parse_count("bigbird random", parts[2], 0)?,
                    block: match parts.get(3) {
                        Some(b) => parse_count("bigbird block", b, 1)?,
                        None => 1,
                    },
                }))
            }
            ("file", Some(p)) if !p.is_empty() => Ok(MaskKind::File(PathBuf::from(p))),
            ("file", _) => Err("file mask needs a path: write file:PATH.npy".into()),
            ("none" | "causal", Some(_)) => Err(format!("mask '{head}' takes no ':' argument")),
            _ => Err(format!(
                "unknown mask '{s}'; expected none, causal, window:W[,S], padding:L1,L2,.., bigbird[:w,g,r], file:PATH.npy"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip_through_display() {
        for s in [
            "none",
            "causal",
            "window:4",
            "window:6,1",
            "padding:5,3",
            "bigbird:1,1,1,1",
            "file:m.npy",
        ] {
            let m: MaskKind = s.parse().unwrap();
            assert_eq!(m.to_string(), s);
        }
    }

    #[test]
    fn bad_masks_say_what_is_right() {
        assert!("window:0".parse::<MaskKind>().unwrap_err().contains(">= 1"));
        assert!(
            "window"
                .parse::<MaskKind>()
                .unwrap_err()
                .contains("window:W")
        );
        assert!(
            "diagonal"
                .parse::<MaskKind>()
                .unwrap_err()
                .contains("expected")
        );
        assert!(
            "padding:3,x"
                .parse::<MaskKind>()
                .unwrap_err()
                .contains("padding length")
        );
        assert!(
            "window:6,x"
                .parse::<MaskKind>()
                .unwrap_err()
                .contains("window sinks S")
        );
        assert!(
            "window:0,1"
                .parse::<MaskKind>()
                .unwrap_err()
                .contains("window size W")
        );
        assert_eq!("window:6,0".parse(), Ok(MaskKind::Window(6)));
        assert_eq!(
            "window:6,1".parse(),
            Ok(MaskKind::WindowSinks {
                window: 6,
                sinks: 1
            })
        );
    }

    #[test]
    fn pe_kinds_parse() {
        assert_eq!(
            "rope".parse::<PeKind>().unwrap(),
            PeKind::Rope { base: ROPE_BASE }
        );
        assert_eq!(
            "rope:500000".parse::<PeKind>().unwrap(),
            PeKind::Rope { base: 500000.0 }
        );
        assert!("rope:-1".parse::<PeKind>().is_err());
        assert!(
            "fourier"
                .parse::<PeKind>()
                .unwrap_err()
                .contains("expected")
        );
    }
}
