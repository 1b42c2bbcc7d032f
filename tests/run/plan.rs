//! The `plan` shape (goose's own test plan, closed model) over the real wire, and
//! goose's HTML report landing next to ours.

use stampede::run::{run_profile, RunOptions};

const PROFILE: &str = r#"
name: plan-test
seed: 11
cluster:
  nodes: 3
placement:
  embedded:
    accounting: reconciled
    sync_interval: 1s
workload:
  shape:
    plan: {steps: "4,1s;4,2s;0,1s"}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 60s}
  lifetime: {dist: constant, value: 50ms}
collect:
  interval: 250ms
report:
  goose_html: true
checks:
  error_rate: {max: 0.0}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_shape_runs_goose_test_plan_and_deletes_after_lifetime() {
    let dir = std::env::temp_dir().join(format!("stampede-plan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.yaml");
    std::fs::write(&path, PROFILE).unwrap();
    let opts = RunOptions {
        report_dir: Some(dir.join("reports")),
        quiet: true,
        ..Default::default()
    };
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), run_profile(&path, opts))
        .await
        .expect("the plan ends within 60 s")
        .expect("a report");
    let run = &out.report.runs[0];
    assert!(!out.report.incomplete, "{:?}", out.report.incomplete_reason);
    assert!(
        run.requests >= 4,
        "goose users sent creates: {}",
        run.requests
    );
    assert_eq!(run.ok, run.requests, "{:?}", run.statuses);
    // Every sandbox was deleted after its 50 ms lifetime, so the nodes end empty.
    assert_eq!(
        run.skew.counts.iter().sum::<u64>(),
        0,
        "{:?}",
        run.skew.counts
    );
    let goose = out.dir.join("goose-reconciled.html");
    assert!(goose.exists(), "goose's report at {}", goose.display());
    // Asked for, it is goose's page as is: its charts need the network (a CDN script),
    // which is why stampede does not write it unless `report.goose_html` says so.
    let page = std::fs::read_to_string(&goose).expect("goose's page");
    assert!(
        page.contains("<script src=\"https://"),
        "goose's page changed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
