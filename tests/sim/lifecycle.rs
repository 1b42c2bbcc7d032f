//! The simulator drives `workload.lifecycle` (pause, resume, kill) through the same
//! placer and node model as a real run: resumes go to their origin node first and wait
//! there for a starting slot up to E2B's acquire timeout (15 s); a small resume storm
//! agrees on the wire and in the simulator.

use std::collections::BTreeMap;
use std::time::Duration;

use stampede::profile::{parse, Source};
use stampede::report::{Report, RunResult};
use stampede::sim::simulate_profile;

use crate::support::inline_run::run_inline;

fn simulate(text: &str) -> Report {
    let p = parse(&Source::inline("life.yaml", text)).expect("parses");
    simulate_profile(&p).expect("simulates")
}

/// One node admitting one create at a time, creates taking 20 s. Sandbox A is created
/// at 20 s; B's create, refused until then and retried every 1 ms, takes the slot at
/// 20.001 s and holds it until 40.001 s. A, resumed at 21 s, waits 15 s, is refused
/// (ResourceExhausted), is sent again and gets the slot at 40.001 s. B, resumed at
/// 41.001 s behind A, waits the same way until 60.001 s. Each resume: 39 s (20 s if it
/// were refused at once and retried, as a fresh create is).
const WAIT: &str = "name: resume-wait
seed: 1
cluster:
  nodes: 1
  node: {cpu_count: 64, max_starting: 1, create_latency: {dist: constant, value: 20s}}
placement:
  embedded:
    accounting: optimistic
    best_of_k: {k: 1}
    request_timeout: 70s
workload:
  shape:
    burst: {count: 2}
  sandbox: {template: base, vcpu: 1, ram_mb: 512, timeout: 300s}
  lifecycle:
    steps: [{hold: {dist: constant, value: 1s}}, pause, resume]
collect:
  interval: 1s
";

#[test]
fn a_resume_waits_on_its_origin_for_a_starting_slot() {
    let report = simulate(WAIT);
    let run = &report.runs[0];
    let resumes = run.resumes.expect("resume figures");
    assert_eq!(
        (
            resumes.requests,
            resumes.placed,
            resumes.moved,
            resumes.failed
        ),
        (2, 2, 0, 0),
        "{resumes:?}"
    );
    // 19 s of waiting, a refusal at the 15 s acquire timeout, the rest of the wait on
    // the retry, then the 20 s start; the refusal's round trip is 1 ms.
    for ms in [resumes.latency.p50_ms, resumes.latency.max_ms] {
        assert!((38_950.0..39_100.0).contains(&ms), "{resumes:?}");
    }
    let by_kind = &run.placements_by_kind;
    assert_eq!(by_kind["create"]["node-00"], 2, "{by_kind:?}");
    assert_eq!(by_kind["resume"]["node-00"], 2, "{by_kind:?}");
}

/// With creates of 10 s, A's wait (11 s to 20.001 s) ends before the acquire timeout:
/// the resume takes 19 s and is never refused.
#[test]
fn a_wait_shorter_than_the_acquire_timeout_is_not_refused() {
    let report = simulate(&WAIT.replace("value: 20s", "value: 10s"));
    let resumes = report.runs[0].resumes.expect("resume figures");
    assert!(
        (18_950.0..19_100.0).contains(&resumes.latency.max_ms),
        "{resumes:?}"
    );
}

/// A small resume storm: 3 nodes admitting 3 creates at once, ~0.4 s creates; 120
/// sandboxes created in a burst, each paused at once and resumed 20 s later, after the
/// last create (under `reported` the burst herds onto one or two nodes and takes ~15
/// s), so the resumes come back to their origins as fast as the creates left them and
/// queue for the starting slots there. The seed also seeds the fleet.
const STORM: &str = "name: resume-storm-3
seed: SEED
cluster:
  nodes: 3
  node:
    cpu_count: 64
    max_starting: 3
    create_latency: {dist: lognormal, median: 400ms, sigma: 0.15}
placement:
  embedded:
    accounting: [reported, optimistic]
    best_of_k: {k: 3}
    sync_interval: 20s
    request_timeout: 70s
workload:
  shape:
    burst: {count: 120}
  sandbox: {template: base, vcpu: 1, ram_mb: 512, timeout: 300s}
  lifecycle:
    steps:
      - pause
      - hold: {dist: constant, value: 20s}
      - resume
      - hold: {dist: constant, value: 1s}
      - kill
collect:
  interval: 1s
";

/// Two simulations of one lifecycle profile write the same report.
#[test]
fn a_lifecycle_simulation_is_deterministic() {
    let text = STORM.replace("SEED", "7");
    let a = serde_json::to_string(&simulate(&text)).unwrap();
    let b = serde_json::to_string(&simulate(&text)).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("\"resumes\""), "{a}");
}

/// Seeds the simulator runs to find the spread of the figures.
const STORM_SEEDS: u64 = 100;

/// Placements a node's real count (by kind) may stray outside the simulated range: the
/// wire admits the burst's creates in another order than the simulator (scheduling on
/// a loaded machine), which moves a few sandboxes between nodes; 5% of the burst.
const SLACK: u64 = 6;

/// Added to the simulated resume latency for the real one: each resume crosses HTTP
/// and gRPC on loopback, and a mock node notices a freed starting slot on its 2 ms
/// poll, on a loaded 2-core machine running a debug build. An assumption with room:
/// the wait itself is seconds.
const WIRE_MS: f64 = 1_500.0;

/// What the simulator gives for `mode` over [`STORM_SEEDS`] seeds: per-node creates and
/// resumes ranked (`(min, max)` per rank), and the range of the resumes' median and
/// 90th percentile latency and of the resumes moved off their origin.
struct Spread {
    creates: Vec<(u64, u64)>,
    resumes: Vec<(u64, u64)>,
    p50_ms: (f64, f64),
    p90_ms: (f64, f64),
    moved: (u64, u64),
}

fn widen(b: &mut Vec<(u64, u64)>, counts: &[u64]) {
    if b.len() < counts.len() {
        b.resize(counts.len(), (u64::MAX, 0));
    }
    for (r, &c) in b.iter_mut().zip(counts) {
        *r = (r.0.min(c), r.1.max(c));
    }
}

fn ranked(run: &RunResult, kind: &str, nodes: usize) -> Vec<u64> {
    let empty = BTreeMap::new();
    let m = run.placements_by_kind.get(kind).unwrap_or(&empty);
    let mut c: Vec<u64> = m.values().copied().collect();
    c.resize(nodes.max(c.len()), 0);
    c.sort_unstable_by(|a, b| b.cmp(a));
    c
}

fn simulated_spread(mode: &str) -> Spread {
    let mut s = Spread {
        creates: Vec::new(),
        resumes: Vec::new(),
        p50_ms: (f64::MAX, 0.0),
        p90_ms: (f64::MAX, 0.0),
        moved: (u64::MAX, 0),
    };
    for seed in 0..STORM_SEEDS {
        let report = simulate(&STORM.replace("SEED", &seed.to_string()));
        let run = report.run(mode).expect("mode simulated");
        widen(&mut s.creates, &ranked(run, "create", 3));
        widen(&mut s.resumes, &ranked(run, "resume", 3));
        let r = run.resumes.expect("resume figures");
        s.p50_ms = (
            s.p50_ms.0.min(r.latency.p50_ms),
            s.p50_ms.1.max(r.latency.p50_ms),
        );
        s.p90_ms = (
            s.p90_ms.0.min(r.latency.p90_ms),
            s.p90_ms.1.max(r.latency.p90_ms),
        );
        s.moved = (s.moved.0.min(r.moved), s.moved.1.max(r.moved));
    }
    s
}

/// The storm on the wire and in the simulator: per-node placements by kind, ranked,
/// lie in the simulator's range per rank over many seeds (widened by [`SLACK`]); the
/// resumes' median and 90th percentile latency, where the starting-slot waits show, lie
/// in its range (the real one plus at most [`WIRE_MS`]); no more resumes move off their
/// origin than the simulator ever moves plus the slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_resume_storm_agrees_on_the_wire_and_in_the_simulator() {
    let (_dir, out) = run_inline(
        "resume-storm",
        &STORM.replace("SEED", "7"),
        Duration::from_secs(240),
    )
    .await;
    let real = out.report;
    assert!(!real.incomplete, "{:?}", real.incomplete_reason);
    for mode in ["reported", "optimistic"] {
        let s = simulated_spread(mode);
        let r = real.run(mode).expect("mode run");
        let resumes = r.resumes.expect("real resume figures");
        let (creates, resumed) = (ranked(r, "create", 3), ranked(r, "resume", 3));
        println!(
            "{mode}: real creates {creates:?} resumes {resumed:?} {resumes:?}\n  sim creates {:?} resumes {:?} p50 {:?} p90 {:?} moved {:?}",
            s.creates, s.resumes, s.p50_ms, s.p90_ms, s.moved
        );
        assert_eq!(r.ok, 120, "{mode}: every create placed");
        assert_eq!(
            resumes.placed, 120,
            "{mode}: every resume placed {resumes:?}"
        );
        for (kind, real, sim) in [
            ("create", &creates, &s.creates),
            ("resume", &resumed, &s.resumes),
        ] {
            for (rank, (&c, &(lo, hi))) in real.iter().zip(sim).enumerate() {
                assert!(
                    c + SLACK >= lo && c <= hi + SLACK,
                    "{mode}: {kind} rank {rank} has {c}, the simulator {lo}..{hi} (+-{SLACK})"
                );
            }
        }
        for (what, real, (lo, hi)) in [
            ("p50", resumes.latency.p50_ms, s.p50_ms),
            ("p90", resumes.latency.p90_ms, s.p90_ms),
        ] {
            assert!(
                real >= lo && real <= hi + WIRE_MS,
                "{mode}: resume {what} {real} ms, the simulator {lo}..{hi} ms (+{WIRE_MS})"
            );
        }
        assert!(
            resumes.moved <= s.moved.1 + SLACK,
            "{mode}: {} resumes moved, the simulator {:?}",
            resumes.moved,
            s.moved
        );
    }
}
