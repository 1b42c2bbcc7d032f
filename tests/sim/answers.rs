//! The simulator answers placement failures with the statuses the core decides, as the
//! service does (E2B's `orchestrator/placement_errors.go`; legacy: `create_instance.go`
//! before 2026-08-13).

use stampede::profile::{parse, Source};
use stampede::sim::simulate_profile;

fn statuses(answers: &str) -> std::collections::BTreeMap<String, u64> {
    let text = format!(
        "name: sim-answers
seed: 12
cluster:
  nodes: 3
placement:
  embedded:
    failure_answers: {answers}
    request_timeout: 1s
workload:
  shape:
    burst: {{count: 20}}
  sandbox: {{template: base, vcpu: 1, ram_mb: 512, timeout: 60s}}
chaos:
  - at: 0s
    fault: exhaust
    nodes: [node-00, node-01, node-02]
"
    );
    let p = parse(&Source {
        file: "sim-answers.yaml".into(),
        text,
    })
    .expect("profile parses");
    let report = simulate_profile(&p).expect("simulates");
    report.runs[0].statuses.clone()
}

/// Every node refuses with ResourceExhausted until the deadline: E2B answers 503 (no
/// capacity), the legacy deployments 500.
#[test]
fn refusals_until_the_deadline_are_503_or_legacy_500() {
    let e2b = statuses("e2b");
    assert_eq!(e2b.get("503"), Some(&20), "{e2b:?}");
    assert_eq!(e2b.len(), 1, "{e2b:?}");
    let legacy = statuses("legacy");
    assert_eq!(legacy.get("500"), Some(&20), "{legacy:?}");
    assert_eq!(legacy.len(), 1, "{legacy:?}");
}
