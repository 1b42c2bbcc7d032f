//! The API stage: the time a request spends in the API before its placement decision.
//!
//! E2B's API is one Go process: before `PlaceSandbox` a create is authenticated, its team
//! and template are read through caches, and its reservation is taken in Redis, over
//! connection pools to Redis and PostgreSQL. A burst so reaches the Best-of-K decisions
//! spread over time, not all at once, and the accounting that only sees creates in
//! flight (`in-flight`) sees fewer of them together.
//!
//! The stage is a FIFO queue of `workers` servers, each request holding one for a time
//! drawn from [`ApiStage::time`]. [`StageQueue`] computes, at a request's arrival, when
//! it leaves the queue (the multi-server FIFO recursion: a request starts on the
//! worker that frees first, never before it arrives), so that a driver only waits until
//! the time the core gives: the service on its clock, the simulator in virtual time.
//! Timer lag in the service does not compound through the queue, and both drivers give
//! the same times for the same arrivals.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use stampede_dist::LatencyDist;

/// Salt of the stage's RNG (`seed ^ STAGE_SALT`): its draws are a stream of their own,
/// so the Best-of-K draws of the placer's seed are the same with the stage on or off.
const STAGE_SALT: u64 = 0xA915_7A6E_0000_0001;

/// Most workers a stage may have (a bound on its memory: one time per worker).
pub const MAX_STAGE_WORKERS: u32 = 100_000;

/// Time before the placement decision, and how many requests the API works on at once.
///
/// The default is no stage: each request is decided the instant it arrives. That stays
/// the default until E2B's own API has been measured (`stampede e2b`: the time from a
/// request's arrival to the node's Create, alone and under a burst); the measured figure
/// replaces [`ApiStage::default`], the one place it is written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ApiStage {
    /// Time each request holds a worker before its placement decision. Default none (no
    /// stage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<LatencyDist>,
    /// Requests in the stage at once, at most; the rest wait in arrival order. Default
    /// none: every request starts its time at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
}

impl ApiStage {
    /// Whether the stage delays anything: a time that is not always zero.
    pub fn is_active(&self) -> bool {
        match &self.time {
            None => false,
            Some(LatencyDist::Constant { value }) => !value.is_zero(),
            Some(_) => true,
        }
    }

    /// Whether the stage is off (the default): no request waits.
    pub fn is_off(&self) -> bool {
        !self.is_active()
    }

    /// Every semantic problem, as `(field, message)` under the stage's own path.
    pub fn validate(&self) -> Vec<(&'static str, String)> {
        let mut errs = Vec::new();
        if let Some(t) = &self.time {
            if let Err(m) = t.check() {
                errs.push(("time", m));
            }
        }
        if let Some(w) = self.workers {
            if !(1..=MAX_STAGE_WORKERS).contains(&w) {
                errs.push((
                    "workers",
                    format!("must be in [1, {MAX_STAGE_WORKERS}] (omit it for no bound)"),
                ));
            }
        }
        errs
    }
}

/// The stage's queue in one placement instance: its draws and its workers' free times.
#[derive(Debug, Clone)]
pub struct StageQueue {
    time: LatencyDist,
    workers: Option<usize>,
    rng: ChaCha8Rng,
    /// When each worker in use frees (at most `workers` entries).
    free_at: BinaryHeap<Reverse<Duration>>,
}

impl StageQueue {
    /// The queue of `stage` for a placer seeded `seed`; `None` when the stage is off.
    pub fn new(stage: &ApiStage, seed: u64) -> Option<Self> {
        if stage.is_off() {
            return None;
        }
        Some(Self {
            time: stage.time.clone()?,
            workers: stage.workers.map(|w| w.max(1) as usize),
            rng: ChaCha8Rng::seed_from_u64(seed ^ STAGE_SALT),
            free_at: BinaryHeap::new(),
        })
    }

    /// A request arrives at `now`: when it leaves the stage for its placement decision.
    /// Arrivals are fed in the order the driver sees them; one fed earlier than a
    /// previous one starts no earlier than its own arrival all the same.
    pub fn admit(&mut self, now: Duration) -> Duration {
        let time = self.time.sample(&mut self.rng);
        let Some(workers) = self.workers else {
            return now.saturating_add(time);
        };
        let start = if self.free_at.len() < workers {
            now
        } else {
            self.free_at.pop().map_or(now, |Reverse(f)| f.max(now))
        };
        let done = start.saturating_add(time);
        self.free_at.push(Reverse(done));
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn constant(v: Duration, workers: Option<u32>) -> ApiStage {
        ApiStage {
            time: Some(LatencyDist::Constant { value: v }),
            workers,
        }
    }

    #[test]
    fn off_by_default_and_at_zero() {
        assert!(ApiStage::default().is_off());
        assert!(StageQueue::new(&ApiStage::default(), 1).is_none());
        assert!(constant(Duration::ZERO, Some(1)).is_off());
        assert!(constant(ms(1), None).is_active());
    }

    #[test]
    fn one_worker_serialises_a_burst() {
        let mut q = StageQueue::new(&constant(ms(10), Some(1)), 0).unwrap();
        let out: Vec<_> = (0..4).map(|_| q.admit(Duration::ZERO)).collect();
        assert_eq!(out, vec![ms(10), ms(20), ms(30), ms(40)]);
        // An arrival after the queue drained starts at once.
        assert_eq!(q.admit(ms(100)), ms(110));
    }

    #[test]
    fn two_workers_take_the_burst_in_pairs() {
        let mut q = StageQueue::new(&constant(ms(10), Some(2)), 0).unwrap();
        let out: Vec<_> = (0..5).map(|_| q.admit(Duration::ZERO)).collect();
        assert_eq!(out, vec![ms(10), ms(10), ms(20), ms(20), ms(30)]);
    }

    #[test]
    fn draws_are_seeded_and_apart_from_the_placers_stream() {
        let stage = ApiStage {
            time: Some(LatencyDist::Uniform {
                min: ms(1),
                max: ms(100),
            }),
            workers: None,
        };
        let mut a = StageQueue::new(&stage, 7).unwrap();
        let mut b = StageQueue::new(&stage, 7).unwrap();
        let xs: Vec<_> = (0..50).map(|_| a.admit(Duration::ZERO)).collect();
        let ys: Vec<_> = (0..50).map(|_| b.admit(Duration::ZERO)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().any(|x| *x != xs[0]), "a uniform draw varies");
        // The placer's own stream (seed 7, unsalted) gives other numbers.
        let mut own = ChaCha8Rng::seed_from_u64(7);
        let zs: Vec<_> = (0..50)
            .map(|_| stage.time.as_ref().unwrap().sample(&mut own))
            .collect();
        assert_ne!(xs, zs);
    }

    #[test]
    fn validation_names_the_field() {
        let bad = ApiStage {
            time: Some(LatencyDist::Uniform {
                min: ms(5),
                max: ms(1),
            }),
            workers: Some(0),
        };
        let fields: Vec<_> = bad.validate().into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec!["time", "workers"]);
        assert!(ApiStage::default().validate().is_empty());
    }

    proptest! {
        /// At no instant are more than `workers` requests in the stage, no request
        /// leaves before its arrival plus the (constant) time, and requests leave in
        /// arrival order.
        #[test]
        fn never_more_than_workers_at_once(
            workers in 1u32..6,
            time_ms in 1u64..20,
            gaps in proptest::collection::vec(0u64..15, 1..60),
        ) {
            let mut q = StageQueue::new(&constant(ms(time_ms), Some(workers)), 3).unwrap();
            let mut now = Duration::ZERO;
            let mut spans = Vec::new();
            for g in gaps {
                now += ms(g);
                let done = q.admit(now);
                prop_assert!(done >= now + ms(time_ms));
                spans.push((done - ms(time_ms), done));
            }
            for w in spans.windows(2) {
                prop_assert!(w[0].1 <= w[1].1);
            }
            for &(s, _) in &spans {
                let busy = spans.iter().filter(|&&(a, b)| a <= s && s < b).count();
                prop_assert!(busy <= workers as usize);
            }
        }
    }
}
