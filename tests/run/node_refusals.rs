//! An external run whose truth source is a mock-node fleet reports the creates the
//! nodes refused (`creates_rejected` of the fleet's admin `GET /nodes`): the run's
//! total, per node, and the storm's bins; before, it listed them as not measured.

use serde_json::Value;
use stampede::mock_admin::MockAdmin;

use crate::support::staging::*;

/// The shipped seed-000 profile (5 nodes admitting 3 creates at once, refusing the rest
/// with ResourceExhausted that the service retries at once) shortened for a test: 150
/// creates of 100 ms median instead of 500 of 500 ms, a few seconds of wall time.
fn short_seed_000() -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/profiles/seed-000-five-node.yaml"
    ))
    .expect("seed-000 profile");
    for line in ["burst: {count: 500}", "median: 500ms"] {
        assert!(text.contains(line), "seed-000 no longer has `{line}`");
    }
    text.replace("burst: {count: 500}", "burst: {count: 150}")
        .replace("median: 500ms", "median: 100ms")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_run_reports_the_refusals_mock_node_counted() {
    let dir = tempdir("node-refusals");
    let profile = dir.join("seed-000-short.yaml");
    let text = short_seed_000();
    std::fs::write(&profile, &text).expect("profile written");
    // The fleet of the profile itself, and stampede's service on it.
    let c = start_cluster(&dir, &text, &[]);
    let reports = dir.join("reports");
    let (status, report, stderr) = run_to_end(
        &["--api", &c.api, "--mock-admin", &c.admin],
        &profile,
        &reports,
    )
    .await;
    assert!(status.code().is_some_and(|c| c <= 1), "{stderr}");
    let run = &report["runs"][0];

    let nodes = MockAdmin::new(reqwest::Client::new(), &c.admin, None)
        .nodes()
        .await
        .expect("GET /nodes")
        .nodes;
    let per_node: Vec<u64> = nodes
        .iter()
        .map(|n| n.creates_rejected.values().sum())
        .collect();
    let total: u64 = per_node.iter().sum();
    assert!(
        total > 0,
        "3 creates at a time per node: the burst was refused"
    );

    let not_measured = run["not_measured"].as_array().cloned().unwrap_or_default();
    assert!(
        !not_measured.contains(&Value::from("refusals")),
        "refusals are measured: {not_measured:?}"
    );
    assert_eq!(
        u(&run["refusals"]),
        total,
        "the run's refusals are the nodes'"
    );
    let storm = &run["retry_storm"];
    let node_total: Vec<u64> = storm["node_total"]
        .as_array()
        .unwrap_or_else(|| panic!("a storm: {run}"))
        .iter()
        .map(u)
        .collect();
    assert_eq!(node_total, per_node, "refusals per node");
    let binned: u64 = storm["per_second"].as_array().unwrap().iter().map(u).sum();
    assert_eq!(binned, total, "the storm's volume");
    assert_eq!(
        report["fleet_seed"], 0,
        "the fleet's seed, read from its admin API"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
