//! `/metrics` of mock-node's admin API and of `stampede serve` pass Prometheus' own
//! linter, `promtool check metrics` (Debian package `prometheus`; `.ci/run` installs it).
//!
//! Without promtool on PATH the test says so and passes, except under CI (`CI` set),
//! where a missing linter is a failure: the check must never pass by not running.

use crate::support::serve as serve_common;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::AccountingMode;
use stampede::serve::DEFAULT_API_KEY;

/// `promtool check metrics` on `text`: `Ok(None)` when clean, `Ok(Some(findings))`
/// otherwise, `Err` when promtool cannot be run.
fn promtool(text: &str) -> Result<Option<String>, String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("promtool: {e}"))?;
    child
        .stdin
        .take()
        .ok_or("promtool: no stdin")?
        .write_all(text.as_bytes())
        .map_err(|e| format!("promtool stdin: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("promtool: {e}"))?;
    let findings = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && findings.trim().is_empty() {
        Ok(None)
    } else {
        Ok(Some(findings))
    }
}

fn promtool_available() -> bool {
    let found = Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is not on PATH under CI: .ci/run must install Debian's `prometheus`"
        );
        eprintln!("promtool not on PATH: skipped (apt-get install prometheus to run it)");
    }
    found
}

#[tokio::test]
async fn mock_node_and_serve_metrics_pass_promtool() {
    if !promtool_available() {
        return;
    }
    let rig = Rig::start(cluster(3, &[]), serve_config(AccountingMode::Reconciled)).await;
    // Some traffic first, so that every labelled series has samples: creates, and a
    // pause and a resume of one of them (the by-kind series).
    let mut last = String::new();
    for _ in 0..5 {
        let (status, body) = rig.create(json!({"templateID": "base"})).await;
        assert_eq!(status, 201);
        last = body["sandboxID"].as_str().expect("sandbox id").to_string();
    }
    for (verb, body, want) in [
        ("pause", None, 204),
        ("resume", Some(json!({"timeout": 60})), 201),
    ] {
        let mut r = rig
            .http
            .post(rig.url(&format!("/sandboxes/{last}/{verb}")))
            .header("X-API-Key", DEFAULT_API_KEY);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let status = r.send().await.expect("request sent").status().as_u16();
        assert_eq!(status, want, "{verb}");
    }
    let get = |url: String| {
        let http = rig.http.clone();
        async move {
            http.get(url)
                .send()
                .await
                .expect("GET /metrics")
                .text()
                .await
                .expect("body")
        }
    };
    let serve = get(rig.url("/metrics")).await;
    let mock = get(format!("{}/metrics", rig.fleet.admin_url())).await;
    assert!(serve.contains("stampede_serve_creates_ok_total"), "{serve}");
    for line in [
        "stampede_serve_placements_placed_total{accounting=\"reconciled\",kind=\"create\"} 5",
        "stampede_serve_placements_placed_total{accounting=\"reconciled\",kind=\"resume\"} 1",
        "stampede_serve_placement_seconds_count{accounting=\"reconciled\",kind=\"resume\"} 1",
    ] {
        assert!(serve.contains(line), "{line} missing:\n{serve}");
    }
    assert!(mock.contains("mock_node_sandboxes"), "{mock}");
    for (who, text) in [("serve", &serve), ("mock-node", &mock)] {
        if let Some(findings) = promtool(text).expect("promtool runs") {
            panic!("promtool check metrics on {who}'s /metrics:\n{findings}\n--- metrics:\n{text}");
        }
    }
    // The linter does flag a bad exposition (the check can fail).
    let bad = "# TYPE requests counter\nrequests 1\n";
    assert!(promtool(bad).expect("promtool runs").is_some());
    rig.stop().await;
}

/// `name{labels}` of every sample of `family` in a Prometheus text exposition.
fn series_of(text: &str, family: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter_map(|l| l.rsplit_once(' ').map(|(series, _)| series.to_string()))
        .collect()
}

/// A node id with a quote and a backslash (`NODE_ID='edge"node\1'`) made mock-node's
/// `/metrics` unparsable, and `mock_node_up` carried the status as a label, so a status
/// change ended one series and started another.
#[tokio::test]
async fn node_id_with_quote_and_backslash_is_escaped_and_status_keeps_series() {
    let id = "edge\"node\\1";
    let opts = mock_node::fleet::FleetOptions {
        node_id: Some(id.to_string()),
        ..Default::default()
    };
    let fleet = mock_node::fleet::start(cluster(1, &[]), opts)
        .await
        .expect("fleet starts");
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("client");
    let metrics = || async {
        http.get(format!("{}/metrics", fleet.admin_url()))
            .send()
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("body")
    };
    let before = metrics().await;
    assert!(
        before.contains(r#"mock_node_up{node="edge\"node\\1"} 1"#),
        "{before}"
    );
    let r = http
        .post(format!("{}/faults", fleet.admin_url()))
        .json(&json!({"kind": "status", "nodes": [id], "status": "draining"}))
        .send()
        .await
        .expect("POST /faults");
    assert_eq!(r.status().as_u16(), 201);
    let after = metrics().await;
    for family in ["mock_node_up", "mock_node_status"] {
        let (b, a) = (series_of(&before, family), series_of(&after, family));
        assert!(!b.is_empty(), "{family} present: {before}");
        assert_eq!(
            b, a,
            "{family}: the same series before and after a status change"
        );
    }
    assert!(
        after.contains(r#"mock_node_status{node="edge\"node\\1",status="draining"} 1"#)
            && after.contains(r#"mock_node_status{node="edge\"node\\1",status="healthy"} 0"#),
        "{after}"
    );
    if promtool_available() {
        for text in [&before, &after] {
            if let Some(findings) = promtool(text).expect("promtool runs") {
                panic!("promtool check metrics:\n{findings}\n--- metrics:\n{text}");
            }
        }
    }
    fleet.shutdown().await;
}
