//! A lifecycle over the wire: creates that hold, pause, hold, resume and are killed,
//! against the reference service on a mock-node fleet.

use std::time::Duration;

use stampede::api_key::ApiKey;
use stampede::placement::AccountingMode;
use stampede::profile::Lifecycle;
use stampede::serve::DEFAULT_API_KEY;
use stampede::workload::{run_workload, Outcome, StepKind};

use crate::support::bare_target::burst;
use crate::support::serve::{cluster, serve_config, Rig};

const COUNT: usize = 24;

fn lifecycle(mix: f64) -> Lifecycle {
    let yaml = format!(
        "mix: {mix}\nsteps:\n  - hold: {{dist: uniform, min: 10ms, max: 60ms}}\n  - pause\n  \
         - hold: {{dist: constant, value: 30ms}}\n  - resume\n  \
         - hold: {{dist: constant, value: 10ms}}\n  - kill\n"
    );
    serde_yaml_ng::from_str(&yaml).expect("lifecycle parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_resume_is_answered_and_counted_as_a_resume() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let rig = Rig::start(cluster(3, &[]), serve_config(AccountingMode::Reconciled)).await;
    let life = lifecycle(0.5);
    let mut run = burst(vec![rig.svc.url()], COUNT);
    run.api_key = ApiKey::new(DEFAULT_API_KEY);
    run.seed = 5;
    run.lifecycle = Some(life.clone());
    let out = tokio::time::timeout(Duration::from_secs(60), run_workload(run, None))
        .await
        .expect("the run ends within 60 s")
        .expect("the workload runs");
    let ledger = out.ledger;
    assert_eq!(ledger.created(), COUNT, "{:?}", ledger.statuses());

    // The mix is drawn per slot from the seed: exactly these slots follow the steps.
    let following: Vec<usize> = (0..COUNT)
        .filter(|&i| life.plan(5, i as u64).is_some())
        .collect();
    assert!(
        !following.is_empty() && following.len() < COUNT,
        "{following:?}"
    );
    for e in &ledger.entries {
        let steps: Vec<_> = ledger.steps.iter().filter(|s| s.index == e.index).collect();
        if !following.contains(&e.index) {
            assert!(steps.is_empty() && e.deleted.is_none(), "slot {}", e.index);
            continue;
        }
        let kinds: Vec<StepKind> = steps.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [StepKind::Pause, StepKind::Resume],
            "slot {}",
            e.index
        );
        assert!(
            steps.iter().all(|s| s.succeeded()),
            "slot {}: {steps:?}",
            e.index
        );
        assert!(steps[1].node.is_some(), "a resume names its node");
        assert_eq!(e.deleted, Some(Outcome::Status(204)), "slot {}", e.index);
    }

    let by_kind = ledger.placements_by_kind();
    let total = |k: &str| by_kind.get(k).map_or(0, |m| m.values().sum::<u64>());
    assert_eq!(total("create"), COUNT as u64);
    assert_eq!(total("resume"), following.len() as u64);
    // Nothing lost: the sandboxes that were killed are gone, the others still run.
    let (status, listed) = rig.get_json("/sandboxes").await;
    assert_eq!(status, 200);
    let running = listed.as_array().map_or(0, Vec::len);
    assert_eq!(running, COUNT - following.len(), "{listed}");
    rig.stop().await;
}

#[test]
fn a_resume_before_a_pause_is_named() {
    let bad: Lifecycle =
        serde_yaml_ng::from_str("steps: [resume, pause, kill, pause]").expect("parses");
    let fields: Vec<String> = bad.problems().into_iter().map(|(f, _)| f).collect();
    assert_eq!(fields, ["steps[0]", "steps[2]", "steps[3]"]);
}
