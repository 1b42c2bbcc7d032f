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
//!
//! Three more times of E2B's API sit inside and after the decision ([`StageDraws`]):
//! the lag between reading the scores and committing to the choice, the time a
//! create's success takes to reach the placement once the node answered, and the time
//! a sync's reply takes from the node to being applied. Each is drawn from a stream of
//! its own and is off (draws nothing) when set to zero.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use stampede_dist::{LatencyDist, Quantile};

/// Salt of the stage's RNG (`seed ^ STAGE_SALT`): its draws are a stream of their own,
/// so the Best-of-K draws of the placer's seed are the same with the stage on or off.
const STAGE_SALT: u64 = 0xA915_7A6E_0000_0001;

/// Salts of the three drawn times' streams ([`StageDraws`]), apart from the placer's
/// and the queue's.
const COMMIT_LAG_SALT: u64 = 0xA915_7A6E_0000_0002;
const CREATE_RETURN_SALT: u64 = 0xA915_7A6E_0000_0003;
const SYNC_TRANSIT_SALT: u64 = 0xA915_7A6E_0000_0004;

/// Most workers a stage may have (a bound on its memory: one time per worker).
pub const MAX_STAGE_WORKERS: u32 = 100_000;

/// Time before the placement decision, and how many requests the API works on at once.
///
/// The default is E2B's own API as measured on loopback with `stampede e2b` (see
/// [`ApiStage::measured`]); [`ApiStage::off`] decides each request the instant it
/// arrives. A profile or `stampede serve` that sets only one field keeps the other's
/// default; `time: {dist: constant, value: 0ms}` turns the stage off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ApiStage {
    /// Time each request holds a worker before its placement decision. Default
    /// [`MEASURED_TIME_MEDIAN`], lognormal with sigma [`MEASURED_TIME_SIGMA`].
    pub time: LatencyDist,
    /// Requests in the stage at once, at most; the rest wait in arrival order. Default
    /// [`MEASURED_WORKERS`]; absent (`null`): every request starts its time at once.
    pub workers: Option<u32>,
    /// From a Best-of-K decision reading its K scores to the choice counting on its
    /// node: the age of the figures a choice rests on when it counts. E2B reads the K
    /// scores one after another (each `Score` copying its node's in-progress map, which
    /// waits under a burst), then `PlacementMetrics.StartPlacing` marks the choice; no
    /// lock is held across them, so the others decide on the view as it was.
    /// A resume's origin node and a settled retry draw none. Default
    /// [`measured_commit_lag`].
    pub commit_lag: LatencyDist,
    /// From the node answering a Create with success to the placement learning it (the
    /// reply through the API's gRPC client and its goroutine): the node runs the
    /// sandbox, and the create stays in progress in the placement until then. Refusals
    /// and errors are learnt at once. Default [`measured_create_return`].
    pub create_return: LatencyDist,
    /// From a node building its `ServiceInfo` reply to the placement applying it,
    /// drawn per reply, each node on its own (a node's replies are applied in the
    /// order they were built). Default [`measured_sync_transit`].
    pub sync_transit: LatencyDist,
}

/// Median of E2B's own time per create: the client's p50 on one create at a time
/// (`profiles/e2b-api-alone.yaml` through `stampede e2b`, E2B's HEAD as shipped, 7 runs
/// of 30 creates: 8.4-11.4 ms, median 9.8) less the mock node's 1-5 ms create (3 ms
/// mean), on this 2-core host at load 1-8 (docs/fidelity.md). It is the API's whole own
/// part of a create, taken as spent before the decision.
pub const MEASURED_TIME_MEDIAN: Duration = Duration::from_millis(7);
/// Sigma of that time's lognormal: from the alone runs' p90/p50 of 1.2-1.6
/// (docs/fidelity.md).
pub const MEASURED_TIME_SIGMA: f64 = 0.3;
/// How many creates E2B's API decides at once under a burst of 500
/// (`profiles/burst-500.yaml` through `stampede e2b`, 12 runs of four builds): with
/// `workers` servers the decisions spread evenly over `500 x mean time / workers`, and
/// the Creates reached the nodes over a 5th-to-95th-percentile width of 82-872 ms,
/// median 168, so `0.9 x 500 x 7.3 ms / 168 ms` = 19.6 (docs/fidelity.md).
pub const MEASURED_WORKERS: u32 = 20;

impl Default for ApiStage {
    fn default() -> Self {
        Self::measured()
    }
}

impl ApiStage {
    /// E2B's API as measured here (the default): see [`MEASURED_TIME_MEDIAN`],
    /// [`MEASURED_TIME_SIGMA`] and [`MEASURED_WORKERS`]. A deployment's own API replaces
    /// them with its own figures.
    pub fn measured() -> Self {
        Self {
            time: LatencyDist::Lognormal {
                median: MEASURED_TIME_MEDIAN,
                sigma: MEASURED_TIME_SIGMA,
            },
            workers: Some(MEASURED_WORKERS),
            commit_lag: measured_commit_lag(),
            create_return: measured_create_return(),
            sync_transit: measured_sync_transit(),
        }
    }

    /// No API time at all: each request is decided the instant it arrives, commits at
    /// once, learns its create's success at the node's instant, and every sync is
    /// applied as the node answers it.
    pub fn off() -> Self {
        Self {
            time: zero(),
            workers: None,
            commit_lag: zero(),
            create_return: zero(),
            sync_transit: zero(),
        }
    }

    /// Whether the stage delays anything: a time that is not always zero.
    pub fn is_active(&self) -> bool {
        match &self.time {
            LatencyDist::Constant { value } => !value.is_zero(),
            _ => true,
        }
    }

    /// Whether the stage is off: no request waits.
    pub fn is_off(&self) -> bool {
        !self.is_active()
    }

    /// Whether this is the default stage (serialisers leave it out).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Every semantic problem, as `(field, message)` under the stage's own path.
    pub fn validate(&self) -> Vec<(&'static str, String)> {
        let mut errs = Vec::new();
        for (field, dist) in [
            ("time", &self.time),
            ("commit_lag", &self.commit_lag),
            ("create_return", &self.create_return),
            ("sync_transit", &self.sync_transit),
        ] {
            if let Err(m) = dist.check() {
                errs.push((field, m));
            }
        }
        if let Some(w) = self.workers {
            if !(1..=MAX_STAGE_WORKERS).contains(&w) {
                errs.push((
                    "workers",
                    format!("must be in [1, {MAX_STAGE_WORKERS}] (null for no bound)"),
                ));
            }
        }
        errs
    }
}

fn zero() -> LatencyDist {
    LatencyDist::Constant {
        value: Duration::ZERO,
    }
}

fn ms(points: &[(f64, f64)]) -> LatencyDist {
    LatencyDist::Quantiles {
        points: points
            .iter()
            .map(|&(p, v)| Quantile {
                p,
                value: Duration::from_secs_f64(v / 1e3),
            })
            .collect(),
    }
}

/// E2B's choose-to-commit lag as measured (see [`ApiStage::commit_lag`]).
pub fn measured_commit_lag() -> LatencyDist {
    ms(COMMIT_LAG_MS)
}

/// E2B's create return time as measured (see [`ApiStage::create_return`]).
pub fn measured_create_return() -> LatencyDist {
    ms(CREATE_RETURN_MS)
}

/// E2B's sync reply transit as measured (see [`ApiStage::sync_transit`]).
pub fn measured_sync_transit() -> LatencyDist {
    ms(SYNC_TRANSIT_MS)
}

/// The choose-to-commit lag's percentiles (p, ms): the figure age a probe build of E2B's
/// HEAD measured under `profiles/burst-500.yaml` on a quiet 2-core host (24 bursts,
/// 2026-12-07; medians over the runs of each run's p5 / p50 / p95 / max, p95 10.8-31.9
/// and max 59-186 across runs; docs/fidelity.md). A decision's K scores are read one
/// after another, each `Score` copying its node's in-progress map (`Items()`), which
/// waits under a burst; the choice then counts at once (read-to-mark p95 0.01 ms). The
/// figure age, per decision the mean over its K scores of each one's age at the mark,
/// is the single lag that leaves each figure as many of the others' marks unseen.
pub const COMMIT_LAG_MS: &[(f64, f64)] = &[
    (0.0, 0.0),
    (5.0, 0.16),
    (50.0, 0.55),
    (95.0, 19.0),
    (100.0, 96.0),
];
/// The create return time's percentiles (p, ms): the same 24 bursts' `StartPlacing` to
/// Create returned (medians over the runs: p5 24.7, p50 72.2, p95 172.3, max 239.9) less
/// the mock node's create (uniform 1-5 ms, mean 3); the floor stays 5 ms (the runs' spreads
/// record no minimum).
pub const CREATE_RETURN_MS: &[(f64, f64)] = &[
    (0.0, 5.0),
    (5.0, 22.0),
    (50.0, 69.0),
    (95.0, 169.0),
    (100.0, 237.0),
];
/// The sync reply transit's percentiles (p, ms).
pub const SYNC_TRANSIT_MS: &[(f64, f64)] = &[(0.0, 0.25), (50.0, 1.0), (100.0, 8.0)];

/// The three drawn times of one placement instance ([`ApiStage::commit_lag`],
/// [`ApiStage::create_return`], [`ApiStage::sync_transit`]), each with its own stream;
/// a time set to zero is `None` and draws nothing.
#[derive(Debug, Clone)]
pub struct StageDraws {
    commit_lag: Option<Drawn>,
    create_return: Option<Drawn>,
    sync_transit: Option<Drawn>,
}

#[derive(Debug, Clone)]
struct Drawn {
    dist: LatencyDist,
    rng: ChaCha8Rng,
}

impl Drawn {
    fn new(dist: &LatencyDist, seed: u64, salt: u64) -> Option<Self> {
        (!dist.is_zero()).then(|| Self {
            dist: dist.clone(),
            rng: ChaCha8Rng::seed_from_u64(seed ^ salt),
        })
    }

    fn draw(&mut self) -> Duration {
        self.dist.sample(&mut self.rng)
    }
}

impl StageDraws {
    /// The draws of `stage` for a placer seeded `seed`.
    pub fn new(stage: &ApiStage, seed: u64) -> Self {
        Self {
            commit_lag: Drawn::new(&stage.commit_lag, seed, COMMIT_LAG_SALT),
            create_return: Drawn::new(&stage.create_return, seed, CREATE_RETURN_SALT),
            sync_transit: Drawn::new(&stage.sync_transit, seed, SYNC_TRANSIT_SALT),
        }
    }

    /// The next choose-to-commit lag, `None` when the lag is off.
    pub fn commit_lag(&mut self) -> Option<Duration> {
        self.commit_lag.as_mut().map(Drawn::draw)
    }

    /// The next create return time, `None` when it is off.
    pub fn create_return(&mut self) -> Option<Duration> {
        self.create_return.as_mut().map(Drawn::draw)
    }

    /// The next sync reply transit, `None` when it is off.
    pub fn sync_transit(&mut self) -> Option<Duration> {
        self.sync_transit.as_mut().map(Drawn::draw)
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
            time: stage.time.clone(),
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
            time: LatencyDist::Constant { value: v },
            workers,
            ..ApiStage::off()
        }
    }

    #[test]
    fn measured_by_default_and_off_at_zero() {
        assert!(ApiStage::default().is_active());
        assert!(ApiStage::off().is_off());
        assert!(StageQueue::new(&ApiStage::off(), 1).is_none());
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
            time: LatencyDist::Uniform {
                min: ms(1),
                max: ms(100),
            },
            workers: None,
            ..ApiStage::off()
        };
        let mut a = StageQueue::new(&stage, 7).unwrap();
        let mut b = StageQueue::new(&stage, 7).unwrap();
        let xs: Vec<_> = (0..50).map(|_| a.admit(Duration::ZERO)).collect();
        let ys: Vec<_> = (0..50).map(|_| b.admit(Duration::ZERO)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().any(|x| *x != xs[0]), "a uniform draw varies");
        // The placer's own stream (seed 7, unsalted) gives other numbers.
        let mut own = ChaCha8Rng::seed_from_u64(7);
        let zs: Vec<_> = (0..50).map(|_| stage.time.sample(&mut own)).collect();
        assert_ne!(xs, zs);
    }

    #[test]
    fn validation_names_the_field() {
        let bad = ApiStage {
            time: LatencyDist::Uniform {
                min: ms(5),
                max: ms(1),
            },
            workers: Some(0),
            ..ApiStage::off()
        };
        let fields: Vec<_> = bad.validate().into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec!["time", "workers"]);
        assert!(ApiStage::default().validate().is_empty());
        assert!(ApiStage::off().validate().is_empty());
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
