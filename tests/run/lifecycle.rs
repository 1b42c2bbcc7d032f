//! `stampede run` with a lifecycle: every sandbox pauses and resumes over the wire, and
//! the report counts its placements by kind.

use crate::support::inline_run;

use std::time::Duration;

use inline_run::run_inline;

const COUNT: u64 = 8;

const PROFILE: &str = "name: lifecycle-run
seed: 3
cluster:
  nodes: 3
placement:
  embedded:
    accounting: reconciled
    best_of_k: {k: 2}
    sync_interval: 2s
workload:
  shape:
    burst: {count: 8}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 60s}
  lifecycle:
    steps:
      - hold: {dist: uniform, min: 10ms, max: 50ms}
      - pause
      - hold: {dist: constant, value: 20ms}
      - resume
      - kill
collect:
  interval: 250ms
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reports_its_placements_by_kind() {
    let (_dir, out) = run_inline("lifecycle", PROFILE, Duration::from_secs(60)).await;
    let run = out.report.runs.first().expect("one run");
    assert_eq!(run.ok, COUNT, "{:?}", run.statuses);
    let total = |k: &str| {
        run.placements_by_kind
            .get(k)
            .map_or(0, |m| m.values().sum::<u64>())
    };
    assert_eq!(total("create"), COUNT, "{:?}", run.placements_by_kind);
    assert_eq!(total("resume"), COUNT, "{:?}", run.placements_by_kind);
    // Every sandbox was killed at the end of its lifecycle: none is left on a node.
    assert_eq!(run.nodes.iter().map(|n| n.sandboxes).sum::<u64>(), 0);
    let json = std::fs::read_to_string(out.dir.join("report.json")).expect("report.json");
    assert!(json.contains("\"placements_by_kind\""));
    let md = std::fs::read_to_string(out.dir.join("report.md")).expect("report.md");
    assert!(md.contains("### Placements by kind"), "{md}");
}
