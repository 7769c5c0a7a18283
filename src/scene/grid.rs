//! What a scene plays on the flash and decode views: the flash view's tile grid and a
//! step's animation through the tiles or tokens. Shared by the checked scene
//! ([`super::lesson`]) and its steps for one language ([`super::script`]).

/// Block sizes of the flash view's tile grid: `br` query rows by `bc` key columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashBlocks {
    pub br: usize,
    pub bc: usize,
}

/// A step's animation: positions `from..=to` of the view's playback order (the flash
/// view's tiles in loop order, the decode view's decoding steps), `rate` a second at
/// speed 1, the first shown as the step begins. It fits in the step's dwell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Animation {
    pub from: usize,
    pub to: usize,
    pub rate: f64,
}

impl Animation {
    /// The position shown `elapsed_ms` of scene time into the step.
    pub fn position_at(&self, elapsed_ms: f64) -> usize {
        // A hair of slack: the clock lands exactly on a frame's time, give or take the
        // rounding of the sum of its ticks.
        let k = (elapsed_ms.max(0.0) * self.rate / 1000.0 + 1e-9).floor();
        (self.from as f64 + k).min(self.to as f64) as usize
    }

    /// Scene milliseconds into the step at which position `k` is shown.
    pub fn time_of(&self, k: usize) -> f64 {
        k.saturating_sub(self.from) as f64 * 1000.0 / self.rate
    }

    /// Scene milliseconds from the first position to the last.
    pub fn duration_ms(&self) -> f64 {
        self.time_of(self.to)
    }
}

#[cfg(test)]
mod tests {
    use super::Animation;

    #[test]
    fn positions_follow_the_rate_and_stop_at_the_last() {
        let a = Animation {
            from: 4,
            to: 15,
            rate: 3.0,
        };
        assert_eq!(a.position_at(0.0), 4);
        assert_eq!(a.position_at(333.0), 4);
        // The time of a position shows that position, however the ticks added up to it.
        assert_eq!(a.position_at(a.time_of(5)), 5);
        assert_eq!(a.position_at(0.1 + 0.2 + 333.0333333333), 5);
        assert_eq!(a.position_at(1e9), 15);
        assert_eq!(a.time_of(4), 0.0);
        assert!((a.duration_ms() - 11_000.0 / 3.0).abs() < 1e-9);
    }
}
