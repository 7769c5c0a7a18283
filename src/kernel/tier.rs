//! SIMD tiers: which instruction sets this CPU offers, which one a run uses, and the
//! run-time dispatch of a kernel written once as a [`pulp::WithSimd`] to that tier.

use std::fmt;
use std::str::FromStr;

use pulp::WithSimd;

use crate::error::{Error, Result};

/// Environment variable that forces a tier (`scalar`, `avx2`, `avx512`, `neon`), so tests
/// and CI can cover every tier the machine has.
pub const SIMD_ENV: &str = "ATTNVIZ_SIMD";

/// An instruction set the kernel can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// One f32 per "vector"; runs everywhere.
    Scalar,
    /// x86-64-v3: AVX2 + FMA, 8 lanes, 16 registers.
    Avx2,
    /// x86-64-v4: AVX-512 F/BW/CD/DQ/VL, 16 lanes, 32 registers.
    Avx512,
    /// aarch64 NEON (ASIMD), 4 lanes, 32 registers.
    Neon,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Scalar, Tier::Avx2, Tier::Avx512, Tier::Neon];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Scalar => "scalar",
            Tier::Avx2 => "avx2",
            Tier::Avx512 => "avx512",
            Tier::Neon => "neon",
        }
    }

    /// f32 lanes of one vector register.
    pub fn lanes(self) -> usize {
        match self {
            Tier::Scalar => 1,
            Tier::Avx2 => 8,
            Tier::Avx512 => 16,
            Tier::Neon => 4,
        }
    }

    /// True if this CPU (and this build) can run the tier.
    pub fn is_available(self) -> bool {
        Isa::new(self).is_some()
    }

    /// The best tier this CPU offers, ignoring [`SIMD_ENV`].
    pub fn best() -> Tier {
        *available_tiers().last().unwrap_or(&Tier::Scalar)
    }

    /// The tier a run uses by default: the one [`SIMD_ENV`] names if it is set to a tier
    /// this CPU has, else the best available. [`Tier::from_env`] reports a bad setting;
    /// the kernel's entry point refuses one instead of ignoring it.
    pub fn detect() -> Tier {
        match Tier::from_env() {
            Ok(Some(t)) => t,
            _ => Tier::best(),
        }
    }

    /// The tier forced by [`SIMD_ENV`], if any; an error if the variable names no tier or
    /// one this CPU cannot run.
    pub fn from_env() -> Result<Option<Tier>> {
        let Ok(raw) = std::env::var(SIMD_ENV) else {
            return Ok(None);
        };
        if raw.trim().is_empty() {
            return Ok(None);
        }
        let tier: Tier = raw
            .parse()
            .map_err(|e: String| Error::usage(format!("{SIMD_ENV}: {e}")))?;
        tier.require_available(SIMD_ENV)?;
        Ok(Some(tier))
    }

    /// Pick the tier of a run: `requested`, else [`SIMD_ENV`], else the best. `what` names
    /// where a request came from, for the error message.
    pub fn resolve(requested: Option<Tier>, what: &str) -> Result<Tier> {
        match requested {
            Some(t) => {
                t.require_available(what)?;
                Ok(t)
            }
            None => Ok(Tier::from_env()?.unwrap_or_else(Tier::best)),
        }
    }

    fn require_available(self, what: &str) -> Result<()> {
        if self.is_available() {
            return Ok(());
        }
        let have: Vec<&str> = available_tiers().iter().map(|t| t.name()).collect();
        Err(Error::usage(format!(
            "{what}: this CPU cannot run the {self} tier; available here: {}",
            have.join(", ")
        )))
    }

    /// Run `op` with this tier's vector type. Falls back to scalar only if the tier is not
    /// available, which [`Tier::resolve`] has already ruled out for every caller.
    pub(crate) fn dispatch<Op: WithSimd>(self, op: Op) -> Op::Output {
        match Isa::new(self) {
            Some(isa) => isa.dispatch(op),
            None => Isa::Scalar.dispatch(op),
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let want = s.trim().to_ascii_lowercase();
        Tier::ALL
            .into_iter()
            .find(|t| t.name() == want)
            .ok_or_else(|| {
                format!("unknown SIMD tier '{s}'; expected one of scalar, avx2, avx512, neon")
            })
    }
}

/// Every tier this CPU can run, slowest first.
pub fn available_tiers() -> Vec<Tier> {
    Tier::ALL.into_iter().filter(|t| t.is_available()).collect()
}

/// A tier together with pulp's proof that the CPU has it.
#[derive(Clone, Copy)]
enum Isa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    V3(pulp::x86::V3),
    #[cfg(target_arch = "x86_64")]
    V4(pulp::x86::V4),
    #[cfg(target_arch = "aarch64")]
    Neon(pulp::aarch64::Neon),
}

impl Isa {
    fn new(tier: Tier) -> Option<Isa> {
        match tier {
            Tier::Scalar => Some(Isa::Scalar),
            #[cfg(target_arch = "x86_64")]
            Tier::Avx2 => pulp::x86::V3::try_new().map(Isa::V3),
            #[cfg(target_arch = "x86_64")]
            Tier::Avx512 => pulp::x86::V4::try_new().map(Isa::V4),
            #[cfg(target_arch = "aarch64")]
            Tier::Neon => pulp::aarch64::Neon::try_new().map(Isa::Neon),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    #[inline]
    fn dispatch<Op: WithSimd>(self, op: Op) -> Op::Output {
        use pulp::Simd;
        match self {
            Isa::Scalar => Simd::vectorize(pulp::Scalar::new(), op),
            #[cfg(target_arch = "x86_64")]
            Isa::V3(s) => Simd::vectorize(s, op),
            #[cfg(target_arch = "x86_64")]
            Isa::V4(s) => Simd::vectorize(s, op),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon(s) => Simd::vectorize(s, op),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in Tier::ALL {
            assert_eq!(t.to_string().parse::<Tier>().unwrap(), t);
        }
        assert!("sse9".parse::<Tier>().is_err());
    }

    #[test]
    fn scalar_is_always_available_and_best_is_available() {
        assert!(Tier::Scalar.is_available());
        assert!(Tier::best().is_available());
        assert_eq!(available_tiers()[0], Tier::Scalar);
    }

    #[test]
    fn requesting_an_unavailable_tier_is_an_error() {
        #[cfg(target_arch = "x86_64")]
        let missing = Tier::Neon;
        #[cfg(not(target_arch = "x86_64"))]
        let missing = Tier::Avx512;
        let err = Tier::resolve(Some(missing), "--simd").unwrap_err();
        assert!(err.to_string().contains("cannot run"), "{err}");
        assert_eq!(err.exit_code(), 2);
    }
}
