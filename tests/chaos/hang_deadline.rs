//! The hang drill over the wire, with a 3 s request deadline instead of E2B's 70 s so
//! that it stays fast: creates the hung node holds end at the deadline with a 504 (E2B
//! bounds a create only by the request's deadline, `packages/api/main.go`), the
//! report's fault window shows them and their latency, and none leaves a sandbox.

use std::time::Duration;

use crate::support::inline_run;
use inline_run::run_inline;

const PROFILE: &str = r#"
name: chaos-hang-deadline-test
seed: 12
cluster:
  nodes: 4
  node:
    cpu_count: 64
    create_latency: {dist: constant, value: 2ms}
placement:
  embedded:
    accounting: optimistic
    sync_interval: 1s
    request_timeout: 3s
workload:
  shape:
    rate: {per_second: 20, duration: 4s}
  max_in_flight: 64
collect:
  interval: 250ms
report:
  goose_html: false
chaos:
  - at: 1s
    fault: hang
    nodes: [node-01]
checks:
  lost: {max: 0}
  duplicated: {max: 0}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_held_by_a_hung_node_end_at_the_deadline_and_leave_nothing() {
    let (_dir, out) = run_inline("chaos-hang-deadline", PROFILE, Duration::from_secs(60)).await;
    let report = out.report;
    assert!(!report.incomplete, "{:?}", report.incomplete_reason);
    let run = &report.runs[0];
    let w = &run.faults[0];
    eprintln!("{w:?}");
    // A sync cycle on the hung node takes 20 s to fail, longer than the run: the node
    // stays routable and every create sent to it is held.
    assert!(w.timed_out > 0, "{w:?}");
    assert_eq!(
        run.statuses.get("504").copied(),
        Some(w.timed_out),
        "{:?}",
        run.statuses
    );
    let lo = w.timed_out_min_ms.expect("latency of the 504s");
    let hi = w.timed_out_max_ms.expect("latency of the 504s");
    assert!(lo >= 3_000.0, "answered before the deadline: {w:?}");
    // Latency counts from the intended send, so a loaded runner adds its lateness; the
    // client itself would give up at 8 s (deadline + 5 s).
    assert!(hi < 6_000.0, "held well past the deadline: {w:?}");
    let audit = run.set_audit.as_ref().expect("checked");
    assert_eq!(audit.lost.count, 0, "{audit:?}");
    assert_eq!(audit.duplicated.count, 0, "{audit:?}");
    // A held create that landed once the node woke up would be an orphan.
    assert_eq!(audit.orphaned.count, 0, "{audit:?}");
    assert!(report.passed, "{:?}", report.checks);
}
