//! The shipped chaos-restart drill over the real wire (shortened): the sandboxes a node
//! loses when it restarts are reported as `lost_to_node_restart`, never as `lost`.

use crate::support::inline_run;
use inline_run::run_inline;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_losses_are_reported_apart_from_lost() {
    let shipped = std::fs::read_to_string("profiles/chaos-restart.yaml").unwrap();
    let short = shipped
        .replace(
            "rate: {per_second: 20, duration: 20s}",
            "rate: {per_second: 20, duration: 8s}",
        )
        .replace("  - at: 10s", "  - at: 4s");
    assert_ne!(short, shipped, "the drill was shortened");
    let (_dir, out) = run_inline("restart", &short, std::time::Duration::from_secs(90)).await;
    let report = out.report;
    assert!(!report.incomplete, "{:?}", report.incomplete_reason);
    let run = &report.runs[0];
    let audit = run.set_audit.as_ref().expect("the set audit ran");
    assert_eq!(audit.lost.count, 0, "{audit:?}");
    assert_eq!(audit.duplicated.count, 0, "{audit:?}");
    assert!(
        audit.lost_to_node_restart.count > 0,
        "the restarted node held sandboxes that are now gone: {audit:?}"
    );
    assert_eq!(run.faults.len(), 1);
    assert_eq!(run.faults[0].kind, "restart");
    assert!(report.passed, "{:?}", report.checks);
}
