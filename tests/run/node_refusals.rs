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

/// A fleet whose admin API requires a bearer token (`mock-node --admin-token`): an
/// external run reads it with `--mock-admin-token-env VAR`, and without the token it
/// cannot read the truth. The token is never printed nor written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_admin_api_behind_a_token_is_read_with_mock_admin_token_env() {
    const FLEET_TOKEN: &str = "fleet-admin-token-4f1c9a";
    let dir = tempdir("mock-admin-token");
    let config = dir.join("cluster.yaml");
    std::fs::write(&config, roomy_nodes("{dist: constant, value: 2ms}")).expect("config");
    let mut fleet = stampede();
    fleet
        .args(["mock-node", "--base-port", "0", "--config"])
        .arg(&config)
        .env("MOCK_NODE_ADMIN_TOKEN", FLEET_TOKEN);
    let (_fleet, line) = spawn_ready(fleet, "mock-node ready");
    let admin = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("admin="))
        .expect("admin URL")
        .to_string();
    let mut serve = stampede();
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--mock-admin", &admin])
        .env("STAMPEDE_MOCK_ADMIN_TOKEN", FLEET_TOKEN)
        .env("STAMPEDE_API_KEY", KEY)
        .env("STAMPEDE_ADMIN_TOKEN", ADMIN);
    let (_serve, line) = spawn_ready(serve, "stampede serve: ");
    let api = serve_url(&line);
    let profile = dir.join("p.yaml");
    std::fs::write(
        &profile,
        "name: token\nseed: 1\nworkload:\n  shape:\n    burst: {count: 5}\n  \
         sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 300s}\nreport:\n  goose_html: false\n",
    )
    .expect("profile");
    let reports = dir.join("reports");
    let base = ["--api", api.as_str(), "--mock-admin", admin.as_str()];

    let mut run = start_run(&base, &profile, &reports);
    let status = wait_exit(&mut run, std::time::Duration::from_secs(60)).await;
    let stderr = run.stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(2), "no token, no truth: {stderr}");
    assert!(stderr.contains("401"), "{stderr}");

    let mut args = base.to_vec();
    args.extend(["--mock-admin-token-env", "FLEET_TOKEN_FOR_TEST"]);
    let before = report_dirs(&reports);
    let mut cmd = stampede();
    let out = cmd
        .args(["run", "--report-dir"])
        .arg(&reports)
        .arg(&profile)
        .args(&args)
        .env("STAMPEDE_API_KEY", KEY)
        .env("FLEET_TOKEN_FOR_TEST", FLEET_TOKEN)
        .output()
        .expect("run");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let report = new_report(&reports, &before);
    assert_eq!(node_sum(&report["runs"][0]), 5, "the truth was read");
    assert!(!stdout.contains(FLEET_TOKEN) && !stderr.contains(FLEET_TOKEN));
    assert!(
        grep_dir(&reports, FLEET_TOKEN).is_empty(),
        "the token is in a report"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
