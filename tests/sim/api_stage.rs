//! The API stage (`placement.embedded.api_stage`): the embedded service and the
//! simulator apply the placer's one schedule, and spreading the decisions of a burst
//! moves `in-flight` toward `reported` while `reported` and `optimistic` place alike.

use stampede::profile::{parse, Source};
use stampede::run::{run_profile, RunOptions};
use stampede::sim::simulate_profile;

/// The profile, with the API's times inside and after a decision off: these tests are
/// of the stage's queue alone.
fn profile(text: &str) -> stampede::profile::Profile {
    crate::support::api_times::off(parse(&Source::inline("stage.yaml", text)).expect("parses"))
}

/// A burst through a stage of 4 workers, 10 ms each: 40 creates leave it over 100 ms.
/// No node refuses (no starting limit, room for all), no create fails and no periodic
/// sync lands during the run (20 s), so in `reported` and `optimistic` each decision
/// sees only the initial sync and the decisions before it: the nodes chosen depend on
/// the placer's draws alone, not on when the wire delivers what. (`in-flight` depends on
/// which creates are still open at each decision, which on the wire is scheduling: it is
/// not compared.)
const WIRE: &str = "name: stage-wire
seed: 38
cluster:
  nodes: 5
  node:
    cpu_count: 64
    max_sandboxes: 200
    max_starting: 0
    create_latency: {dist: constant, value: 1ms}
placement:
  embedded:
    accounting: [reported, optimistic]
    sync_interval: 20s
    api_stage:
      time: {dist: constant, value: 10ms}
      workers: 4
      commit_lag: {dist: constant, value: 0ms}
      create_return: {dist: constant, value: 0ms}
      sync_transit: {dist: constant, value: 0ms}
workload:
  shape:
    burst: {count: 40}
  sandbox: {template: base, vcpu: 1, ram_mb: 512, timeout: 300s}
collect:
  interval: 1s
";

/// The same seed and stage on the wire and in the simulator: the same sandboxes per
/// node in every mode compared, and the wire's latencies no shorter than the schedule
/// allows (the k-th create, 0-based, leaves the stage no sooner than
/// `(k / 4 + 1) x 10 ms` after the burst is released, so the median of 40 is at
/// least 50 ms and the slowest at least 100 ms; the simulator meets them exactly).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_and_the_simulator_place_alike_through_the_stage() {
    let sim = simulate_profile(&profile(WIRE)).expect("simulates");
    let real = {
        let dir = std::env::temp_dir().join(format!("stampede-stage-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stage.yaml");
        std::fs::write(&path, WIRE).unwrap();
        let opts = RunOptions {
            report_dir: Some(dir.join("reports")),
            quiet: true,
            ..RunOptions::default()
        };
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            run_profile(&path, opts),
        )
        .await
        .expect("the run ends within 2 minutes")
        .expect("real run")
        .report;
        let _ = std::fs::remove_dir_all(&dir);
        out
    };
    assert!(!real.incomplete, "{:?}", real.incomplete_reason);
    for s in &sim.runs {
        let r = real.run(&s.label).expect("same runs");
        println!(
            "{}: wire {:?} p50 {} max {} | sim {:?} p50 {} max {}",
            s.label,
            r.skew.counts,
            r.latency.p50_ms,
            r.latency.max_ms,
            s.skew.counts,
            s.latency.p50_ms,
            s.latency.max_ms
        );
        assert_eq!(s.ok, 40, "{}: the simulator placed every create", s.label);
        assert_eq!(r.ok, 40, "{}: the service placed every create", s.label);
        assert_eq!(
            r.skew.counts, s.skew.counts,
            "{}: the same nodes for the same draws",
            s.label
        );
        // Histogram buckets round a latency by well under 1%.
        for (who, l) in [("service", &r.latency), ("simulator", &s.latency)] {
            assert!(l.p50_ms >= 49.0, "{}: {who} p50 {}", s.label, l.p50_ms);
            assert!(l.max_ms >= 99.0, "{}: {who} max {}", s.label, l.max_ms);
        }
        assert!(
            s.latency.max_ms < 110.0,
            "{}: the simulator's slowest create is its stage exit plus 1 ms: {}",
            s.label,
            s.latency.max_ms
        );
    }
}

/// burst-500's fleet and burst (10 nodes, 500 creates at once, 1-5 ms creates), with
/// the stage as given: `STAGE` is replaced by the stage's YAML.
const BURST: &str = "name: stage-burst
seed: SEED
cluster:
  nodes: 10
  node:
    cpu_count: 64
    memory_mib: 262144
    max_sandboxes: 200
    max_starting: 0
    create_latency: {dist: uniform, min: 1ms, max: 5ms}
    baseline_vcpu: {min: 0, max: 8}
placement:
  embedded:
    accounting: [reported, in-flight, optimistic]
    sync_interval: 20sSTAGE
workload:
  shape:
    burst: {count: 500}
  sandbox: {template: base, vcpu: 1, ram_mb: 512, timeout: 300s}
collect:
  interval: 1s
";

/// `(reported, in-flight, optimistic)` per-node counts of the burst for `seed`, its 500
/// decisions spread evenly over `spread_ms` (one worker, `spread_ms / 500` each; 0: no
/// stage).
fn burst(seed: u64, spread_ms: u64) -> [stampede::report::SkewStats; 3] {
    let stage = if spread_ms == 0 {
        "\n    api_stage: {time: {dist: constant, value: 0ms}}".to_string()
    } else {
        format!(
            "\n    api_stage:\n      time: {{dist: constant, value: {}us}}\n      workers: 1",
            spread_ms * 1000 / 500
        )
    };
    let text = BURST
        .replace("SEED", &seed.to_string())
        .replace("STAGE", &stage);
    let sim = simulate_profile(&profile(&text)).expect("simulates");
    ["reported", "in-flight", "optimistic"].map(|m| sim.run(m).expect("mode").skew.clone())
}

/// Spreads of the burst's decisions, ms (0: none, the twin as it was).
const SPREADS: [u64; 5] = [0, 20, 50, 100, 200];

/// Seeds the claims below hold over (each its own fleet): burst-500's and four more.
const SEEDS: [u64; 5] = [500, 1, 2, 3, 4];

/// Spreading a burst's decisions (E2B's API takes 100-400 ms over a burst of 500 before
/// its decisions) moves `in-flight`, which sees only the creates open at the same
/// moment, toward `reported`: its CV grows with the spread, while `reported` and
/// `optimistic` place every sandbox on the same node whatever the spread (their
/// decisions see the sync and the decisions before them, not time). Over every seed of
/// [`SEEDS`]: in-flight's CV rises with each wider spread, and at 200 ms it is at least
/// half of reported's and at least five times its own unspread CV. The model gives
/// 0.78-0.84 of reported and 16-27x over these seeds (burst-500's seed 500: in-flight
/// 0.052 unspread, then 0.320 / 0.553 / 0.711 / 0.853 at 20 / 50 / 100 / 200 ms;
/// reported 1.022; optimistic 0.052), printed by this test with `--nocapture`.
#[test]
fn spreading_the_decisions_moves_in_flight_toward_reported() {
    for seed in SEEDS {
        let runs: Vec<_> = SPREADS.iter().map(|&s| burst(seed, s)).collect();
        let cv = |i: usize, m: usize| runs[i][m].cv;
        println!(
            "seed {seed}: in-flight CV {:?}, reported {:.3}, optimistic {:.3}",
            (0..SPREADS.len())
                .map(|i| format!("{:.3}", cv(i, 1)))
                .collect::<Vec<_>>(),
            cv(0, 0),
            cv(0, 2)
        );
        for (i, run) in runs.iter().enumerate().skip(1) {
            for (m, name) in [(0, "reported"), (2, "optimistic")] {
                assert_eq!(
                    run[m].counts, runs[0][m].counts,
                    "seed {seed}: {name} moved with a {} ms spread",
                    SPREADS[i]
                );
            }
            assert!(
                cv(i, 1) > cv(i - 1, 1),
                "seed {seed}: in-flight CV {} at {} ms, {} at {} ms",
                cv(i, 1),
                SPREADS[i],
                cv(i - 1, 1),
                SPREADS[i - 1]
            );
        }
        let last = SPREADS.len() - 1;
        assert!(
            cv(last, 1) >= 0.5 * cv(0, 0),
            "seed {seed}: in-flight CV {} at 200 ms, reported {}",
            cv(last, 1),
            cv(0, 0)
        );
        assert!(
            cv(last, 1) >= 5.0 * cv(0, 1),
            "seed {seed}: in-flight CV {} at 200 ms, unspread {}",
            cv(last, 1),
            cv(0, 1)
        );
    }
}
