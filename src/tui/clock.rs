//! Time for autoplay. The app never reads the wall clock inside `update`: the event loop
//! asks a [`Clock`] how much time passed and sends `Action::Tick`. A recorder uses a
//! [`ManualClock`] (or sends ticks itself), so playback is deterministic.

use std::time::Instant;

pub trait Clock {
    /// Milliseconds since the clock started.
    fn now_ms(&self) -> u64;
}

/// Wall-clock time, for interactive use.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

/// Time that moves only when told to: recordings and tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct ManualClock {
    now: u64,
}

impl ManualClock {
    pub fn new() -> ManualClock {
        ManualClock { now: 0 }
    }

    pub fn advance(&mut self, ms: u64) {
        self.now += ms;
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now
    }
}

/// Turns clock readings into tick lengths.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ticker {
    last: u64,
}

impl Ticker {
    /// Milliseconds since the previous call (the first call counts from 0).
    pub fn elapsed(&mut self, clock: &dyn Clock) -> u64 {
        let now = clock.now_ms();
        let dt = now.saturating_sub(self.last);
        self.last = now;
        dt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_ticks_only_when_advanced() {
        let mut c = ManualClock::new();
        let mut t = Ticker::default();
        assert_eq!(t.elapsed(&c), 0);
        c.advance(250);
        assert_eq!(t.elapsed(&c), 250);
        assert_eq!(t.elapsed(&c), 0);
    }
}
