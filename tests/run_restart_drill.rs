//! The shipped chaos-restart drill over the real wire (shortened): the sandboxes a node
//! loses when it restarts are reported as `lost_to_node_restart`, never as `lost`.

use stampede::run::{run_profile, RunOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_losses_are_reported_apart_from_lost() {
    let dir = std::env::temp_dir().join(format!("stampede-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let shipped = std::fs::read_to_string("profiles/chaos-restart.yaml").unwrap();
    let short = shipped
        .replace(
            "rate: {per_second: 20, duration: 20s}",
            "rate: {per_second: 20, duration: 8s}",
        )
        .replace("  - at: 10s", "  - at: 4s");
    assert_ne!(short, shipped, "the drill was shortened");
    let path = dir.join("restart.yaml");
    std::fs::write(&path, short).unwrap();
    let opts = RunOptions {
        report_dir: Some(dir.join("reports")),
        quiet: true,
        ..Default::default()
    };
    let out = tokio::time::timeout(std::time::Duration::from_secs(90), run_profile(&path, opts))
        .await
        .expect("the drill ends within 90 s")
        .expect("the drill produces a report");
    let report = out.report;
    assert!(!report.incomplete, "{:?}", report.incomplete_reason);
    let run = &report.runs[0];
    let checker = run.checker.as_ref().expect("the checker ran");
    assert_eq!(checker.lost.count, 0, "{checker:?}");
    assert_eq!(checker.duplicated.count, 0, "{checker:?}");
    assert!(
        checker.lost_to_node_restart.count > 0,
        "the restarted node held sandboxes that are now gone: {checker:?}"
    );
    assert_eq!(run.faults.len(), 1);
    assert_eq!(run.faults[0].kind, "restart");
    assert!(report.passed, "{:?}", report.checks);
    let _ = std::fs::remove_dir_all(&dir);
}
