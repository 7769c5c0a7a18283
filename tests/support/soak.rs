//! The time budget of a long soak (the `--ignored` tier): a soak checks as much as fits
//! in its budget, in a fixed order, and says how much that was. What it checked must
//! hold: a failure inside the budget fails the test as it would without one.
//!
//! `ATTNVIZ_SOAK_SECONDS=N` sets every soak's budget (`0`: no budget, check everything).

use std::time::{Duration, Instant};

pub struct Budget {
    what: &'static str,
    start: Instant,
    limit: Option<Duration>,
}

impl Budget {
    /// A budget of `ATTNVIZ_SOAK_SECONDS`, else `default_secs`, starting now.
    pub fn start(what: &'static str, default_secs: u64) -> Budget {
        let secs = match std::env::var("ATTNVIZ_SOAK_SECONDS") {
            Ok(v) => v.trim().parse::<u64>().unwrap_or_else(|_| {
                panic!("ATTNVIZ_SOAK_SECONDS={v:?}: give whole seconds (0: no budget)")
            }),
            Err(_) => default_secs,
        };
        Budget {
            what,
            start: Instant::now(),
            limit: (secs > 0).then(|| Duration::from_secs(secs)),
        }
    }

    /// True once the budget is spent.
    pub fn spent(&self) -> bool {
        self.limit.is_some_and(|l| self.start.elapsed() >= l)
    }

    /// Says how much of the soak ran: `done` of `total` `unit`s.
    pub fn report(&self, done: usize, total: usize, unit: &str) {
        let secs = self.start.elapsed().as_secs_f64();
        let limit = match self.limit {
            Some(l) => format!("a budget of {} s", l.as_secs()),
            None => "no budget".to_string(),
        };
        let rest = if done < total {
            "; the budget ran out first (ATTNVIZ_SOAK_SECONDS=0 checks everything)"
        } else {
            ""
        };
        eprintln!(
            "{}: {done} of {total} {unit} checked in {secs:.0} s ({limit}){rest}",
            self.what
        );
    }
}
