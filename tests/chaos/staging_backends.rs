//! Fault backends of a drill against a cluster stampede did not start, with the real
//! binaries as separate processes (a mock-node fleet standing in for the nodes,
//! `stampede serve` for E2B's API, `stampede run` against it with no mock-node admin
//! API, as against staging): a `drain` through `POST /nodes/{nodeID}` and a `command`
//! step, each healed at the end of its window and on SIGINT.

use crate::support::staging as staging_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use staging_support::*;

/// `GET /nodes/{id}` status on the API, as an operator reads it.
async fn api_status(api: &str, node: &str) -> String {
    let resp = reqwest::Client::new()
        .get(format!("{api}/nodes/{node}"))
        .header("X-Admin-Token", ADMIN)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("GET /nodes/{id}");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("json");
    body["status"].as_str().expect("status").to_string()
}

/// Waits (bounded) until the API reports `node` as `want`: a status set by `POST
/// /nodes/{id}` shows from the next sync on.
async fn wait_status(api: &str, node: &str, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = api_status(api, node).await;
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{node} is {got}, not {want}, after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An external profile on `c`'s API: `rate` creates a second for `secs`, then `chaos`.
/// `set_check`: per-node truth (sandbox ids) from the fleet's admin API, read as the
/// orchestrators would be on staging, and the set audit's `lost`/`duplicated`
/// checks; without it the run has no mock-node admin API at all (truth from the API's
/// `GET /nodes`), as against a real cluster.
fn profile(dir: &Path, c: &Cluster, rate: u32, secs: u32, chaos: &str, set_check: bool) -> PathBuf {
    let p = dir.join("drill.yaml");
    let (truth, checks) = if set_check {
        (
            format!("    mock_admin: [\"{}\"]\n", c.admin),
            "checks:\n  lost: {max: 0}\n  duplicated: {max: 0}\n",
        )
    } else {
        (String::new(), "")
    };
    let text = format!(
        "name: staging-drill\nseed: 5\nplacement:\n  external:\n    url: {}\n    \
         admin_token_env: REHEARSAL_ADMIN\n{truth}workload:\n  shape:\n    \
         rate: {{per_second: {rate}, duration: {secs}s}}\n  \
         sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 300s}}\n\
         collect:\n  interval: 250ms\nreport:\n  goose_html: false\nchaos:\n{chaos}{checks}",
        c.api
    );
    std::fs::write(&p, text).expect("profile written");
    p
}

/// The node drained for the window takes nothing new once the API's next sync has
/// seen it (100 ms here), is `ready` after, and nothing is lost; `validate` accepts
/// the drill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_through_the_api_holds_for_its_window_and_is_ready_after() {
    let dir = tempdir("drain-drill");
    let c = start_cluster(
        &dir,
        &roomy_nodes("{dist: constant, value: 1ms}"),
        &["--sync-interval", "100ms"],
    );
    let chaos = "  - {at: 1s, fault: drain, nodes: [node-00], duration: 2s}\n";
    let p = profile(&dir, &c, 20, 4, chaos, true);
    let v = stampede()
        .arg("validate")
        .arg(&p)
        .output()
        .expect("validate");
    assert!(v.status.success(), "{v:?}");
    let reports = dir.join("reports");
    let (status, report, stderr) = run_to_end(&[], &p, &reports).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let run = &report["runs"][0];
    let w = &run["faults"][0];
    assert_eq!(w["kind"], "drain", "{w}");
    assert!(w["healed_at_ms"].is_number(), "{w}");
    // 40 creates in the window over 3 nodes; before the sync that shows the drain
    // (100 ms, a 2-creates' worth at 20/s) a few may still land. Undrained, node-00
    // takes about a third (13).
    let to_drained = u(&w["placements_to_faulty"]);
    assert!(
        to_drained <= 4,
        "{to_drained} placements to the drained node: {w}"
    );
    assert_eq!(u(&run["checker"]["lost"]["count"]), 0, "{run}");
    wait_status(&c.api, "node-00", "ready").await;
}

/// SIGINT in the middle of a drain and of a command, with no mock-node admin API in the
/// profile: the run exits 2, the drained node is `ready` again and the command's
/// `heal` ran (the marker file says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_and_command_are_healed_on_sigint() {
    let dir = tempdir("drill-sigint");
    let c = start_cluster(
        &dir,
        &roomy_nodes("{dist: constant, value: 1ms}"),
        &["--sync-interval", "100ms"],
    );
    let marker = dir.join("fault-state");
    let chaos = format!(
        "  - {{at: 0s, fault: drain, nodes: [node-01], duration: 60s}}\n  \
         - {{at: 0s, fault: command, nodes: [node-02], duration: 60s, params: {{\
         run: [sh, -c, 'echo applied $STAMPEDE_FAULT_NODES > {m}'], \
         heal: [sh, -c, 'echo healed $STAMPEDE_FAULT_NODES > {m}'], timeout: 10s}}}}\n",
        m = marker.display()
    );
    let p = profile(&dir, &c, 5, 60, &chaos, false);
    let reports = dir.join("reports");
    let mut run = start_run(&[], &p, &reports);
    // Both applied: the marker is written and the API reports the drain. The faults
    // start at the workload's gate, after its 300 workers have warmed their connections:
    // seconds alone, tens of seconds on a starved machine, so the deadline only bounds a
    // hang.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while std::fs::read_to_string(&marker).unwrap_or_default() != "applied node-02\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "the command did not run: {}",
            run.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_status(&c.api, "node-01", "draining").await;
    let (status, _, stderr) = interrupt(&mut run, Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&marker).expect("marker"),
        "healed node-02\n",
        "{stderr}"
    );
    wait_status(&c.api, "node-01", "ready").await;
    let report = new_report(&reports, &[]);
    let faults = report["runs"][0]["faults"].as_array().expect("faults");
    let kinds: Vec<&str> = faults.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert_eq!(kinds, ["drain", "command"], "{faults:?}");
    assert!(
        faults.iter().all(|f| f["healed_at_ms"].is_number()),
        "{faults:?}"
    );
}

/// `validate` names a command step's missing parameters and programs at their field.
#[test]
fn validate_checks_command_steps() {
    let dir = tempdir("command-validate");
    let write = |name: &str, step: &str| {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                "name: v\nplacement:\n  external:\n    url: http://127.0.0.1:3000\n\
                 workload:\n  shape:\n    burst: {{count: 1}}\nchaos:\n  - {step}\n"
            ),
        )
        .expect("write");
        p
    };
    let cases = [
        (
            "{at: 0s, fault: command, nodes: [n], params: {run: [true]}}",
            "chaos[0].params.heal",
        ),
        (
            "{at: 0s, fault: command, nodes: [n], params: {run: [true], heal: [/nonexistent/x]}}",
            "chaos[0].params.heal[0]",
        ),
        (
            "{at: 0s, fault: kill, nodes: [n], params: {run: [true]}}",
            "chaos[0].params.run",
        ),
        (
            "{at: 0s, fault: command, nodes: [n], params: {run: [true], heal: [true], timeout: 0s}}",
            "chaos[0].params.timeout",
        ),
    ];
    for (i, (step, field)) in cases.iter().enumerate() {
        let p = write(&format!("p{i}.yaml"), step);
        let out = stampede()
            .arg("validate")
            .arg(&p)
            .output()
            .expect("validate");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{step}: {err}");
        assert!(err.contains(field), "{step}: wanted {field} in {err}");
    }
    let ok = write(
        "ok.yaml",
        "{at: 0s, fault: command, nodes: [n], params: {run: [true], heal: [true]}}",
    );
    let out = stampede()
        .arg("validate")
        .arg(&ok)
        .output()
        .expect("validate");
    assert!(out.status.success(), "{out:?}");
}
