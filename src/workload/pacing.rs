//! When each request is meant to leave: pacing as a value, slots claimed by workers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How requests are paced.
#[derive(Debug, Clone, PartialEq)]
pub enum Pacing {
    /// `count` requests, all released at once when every worker has reached the gate.
    Burst {
        /// Number of requests (and workers).
        count: usize,
    },
    /// Open model: request `i` is meant to leave at `t0 + i / per_second`, whatever the
    /// latency of earlier ones; `workers` bounds how many are open at once.
    Rate {
        /// Requests per second.
        per_second: f64,
        /// Sending window.
        duration: Duration,
        /// Concurrent workers.
        workers: usize,
    },
    /// goose test plan (closed model): each user sends back to back.
    Plan {
        /// goose test-plan syntax, e.g. `10,5s;10,20s;0,5s`.
        steps: String,
    },
}

impl Pacing {
    /// Total requests for open shapes; `None` for a plan (bounded by its duration).
    pub fn total(&self) -> Option<usize> {
        match self {
            Pacing::Burst { count } => Some(*count),
            Pacing::Rate {
                per_second,
                duration,
                ..
            } => Some((per_second * duration.as_secs_f64()).floor() as usize),
            Pacing::Plan { .. } => None,
        }
    }

    /// goose users to launch for open shapes.
    pub fn workers(&self) -> usize {
        match self {
            Pacing::Burst { count } => *count,
            Pacing::Rate { workers, .. } => (*workers).min(self.total().unwrap_or(0)).max(1),
            Pacing::Plan { .. } => 0,
        }
    }

    /// Offset from the gate at which slot `i` is meant to be sent.
    pub fn intended_offset(&self, i: usize) -> Duration {
        match self {
            Pacing::Rate { per_second, .. } => Duration::from_secs_f64(i as f64 / per_second),
            Pacing::Burst { .. } | Pacing::Plan { .. } => Duration::ZERO,
        }
    }
}

/// Hands out slot indices to workers; every slot is given exactly once.
#[derive(Debug, Default)]
pub struct SlotCounter {
    next: AtomicUsize,
}

impl SlotCounter {
    /// The next unclaimed slot below `total`, if any (`total = None`: unbounded).
    pub fn claim(&self, total: Option<usize>) -> Option<usize> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        match total {
            Some(t) if i >= t => None,
            _ => Some(i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_slots_are_evenly_spaced() {
        let p = Pacing::Rate {
            per_second: 20.0,
            duration: Duration::from_secs(25),
            workers: 64,
        };
        assert_eq!(p.total(), Some(500));
        assert_eq!(p.intended_offset(20), Duration::from_secs(1));
        assert_eq!(p.workers(), 64);
    }

    #[test]
    fn counter_gives_each_slot_once() {
        let c = SlotCounter::default();
        let got: Vec<_> = std::iter::from_fn(|| c.claim(Some(3))).collect();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(c.claim(Some(3)), None);
    }
}
