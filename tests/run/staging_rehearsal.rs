//! Rehearsal of a staging run, with the real binaries: a mock-node fleet and
//! `stampede serve` started as separate processes on loopback, then `stampede run`
//! against them as a platform engineer would run it against staging.
//!
//! - a burst with checks, then 0 sandboxes left on the nodes after cleanup;
//! - the same with a SIGINT in the middle of the burst: the process exits within 5 s,
//!   sends nothing after the signal and leaves 0 sandboxes;
//! - a second run on nodes that already hold sandboxes reports only its own;
//! - `profiles/nightly.yaml --api URL` passes against an optimistic serve and fails its
//!   checks (exit 1) against a `--accounting reported` one.

use crate::short_nightly::short_nightly;
use crate::support::staging as staging_support;

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use serde_json::Value;
use staging_support::*;
use stampede::collect::{fetch_truth, TruthSource};

/// A burst leaves nothing on the nodes; `--keep` leaves it all; a later run on those
/// nodes reports its own placements only (a second identical run used to report
/// counts summing to both runs') and cleans up only its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_is_cleaned_up_and_a_second_run_counts_only_its_own() {
    let dir = tempdir("rehearsal-burst");
    let c = start_cluster(
        &dir,
        &roomy_nodes("{dist: constant, value: 2ms}"),
        &["--sync-interval", "1s"],
    );
    let profile = burst_profile(&dir, &c, 60);
    let reports = dir.join("reports");

    let (status, report, stderr) = run_to_end(&[], &profile, &reports).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let run = &report["runs"][0];
    let cleanup = &run["staging"]["cleanup"];
    assert_eq!(u(&run["ok"]), 60, "{run}");
    assert_eq!(u(&cleanup["created"]), 60, "{cleanup}");
    assert_eq!(u(&cleanup["cleaned"]), 60, "{cleanup}");
    assert_eq!(cleanup["not_cleaned"].as_array().map(Vec::len), Some(0));
    assert_eq!(node_sum(run), 60, "the report counts the burst");
    assert_eq!(on_nodes(&c.admin).await, 0, "sandboxes left after cleanup");

    let (status, kept, stderr) = run_to_end(&["--keep"], &profile, &reports).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(kept["runs"][0]["staging"]["cleanup"]["kept"], true);
    assert_eq!(
        on_nodes(&c.admin).await,
        60,
        "--keep left the burst running"
    );

    let (status, second, stderr) = run_to_end(&[], &profile, &reports).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let run = &second["runs"][0];
    let staging = &run["staging"];
    assert_eq!(u(&staging["before"]["sandboxes"]), 60, "{staging}");
    assert_eq!(staging["before"]["by_id"], true);
    assert_eq!(node_sum(run), u(&run["ok"]), "only this run's placements");
    assert_eq!(u(&staging["cleanup"]["cleaned"]), 60);
    assert_eq!(
        on_nodes(&c.admin).await,
        60,
        "the kept sandboxes were not touched"
    );
    let text = std::fs::read_to_string(&profile).unwrap();
    assert!(!stderr.contains(KEY) && !text.contains(KEY));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An interrupted external run kept sending until its schedule ended and exited 95 s
/// after the signal, leaving its sandboxes. Now: out within 5 s, nothing sent after the
/// signal, nothing left on the nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_mid_burst_exits_fast_sends_nothing_after_and_leaves_nothing() {
    let dir = tempdir("rehearsal-sigint");
    let c = start_cluster(
        &dir,
        &roomy_nodes("{dist: uniform, min: 300ms, max: 1200ms}"),
        &["--sync-interval", "1s"],
    );
    let profile = burst_profile(&dir, &c, 150);
    let reports = dir.join("reports");
    let mut run = start_run(&[], &profile, &reports);
    wait_for_line(&mut run, "first create answered", Duration::from_secs(60)).await;
    let (status, took, stderr) = interrupt(&mut run, Duration::from_secs(30)).await;
    assert!(
        took < Duration::from_secs(5),
        "exited {took:?} after SIGINT\n{stderr}"
    );
    assert_eq!(status.code(), Some(2), "interrupted: {stderr}");
    let report = new_report(&reports, &[]);
    assert_eq!(report["incomplete"], true);
    let run = &report["runs"][0];
    let staging = &run["staging"];
    assert_eq!(staging["sent_after_signal"], 0, "{staging}");
    let cleanup = &staging["cleanup"];
    assert!(u(&cleanup["cleaned"]) > 0, "{cleanup}");
    assert_eq!(cleanup["not_cleaned"].as_array().map(Vec::len), Some(0));
    assert_eq!(on_nodes(&c.admin).await, 0, "left at exit\n{stderr}");
    // Nothing arrives late either: past the nodes' longest create latency, still 0.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(on_nodes(&c.admin).await, 0, "appeared after exit");
    eprintln!(
        "sigint: exited {:?} after the signal; requests {} ok {} cancelled {} cleaned {}",
        took, run["requests"], run["ok"], staging["cancelled"], cleanup["cleaned"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The nightly guard's cluster section, for the separately started fleet.
fn nightly_cluster() -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/profiles/nightly.yaml"
    ))
    .expect("nightly profile");
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("nightly YAML");
    serde_yaml_ng::to_string(&doc["cluster"]).expect("cluster YAML")
}

/// A nightly run against a serve in `accounting` mode: its exit, report and stderr, and
/// `stampede compare` of its report against the shipped baseline (exit, stdout).
async fn nightly_against(accounting: &str) -> ((ExitStatus, Value, String), (Option<i32>, String)) {
    let dir = tempdir(&format!("rehearsal-nightly-{accounting}"));
    let c = start_cluster(&dir, &nightly_cluster(), &["--accounting", accounting]);
    let reports = dir.join("reports");
    // The shipped 90 s would make this test minutes long: 4 s of its load.
    let short = short_nightly(None, 50, 4);
    let profile = dir.join("nightly-short.yaml");
    std::fs::write(&profile, short).expect("short nightly profile");
    let out = run_to_end(
        // Truth from the fleet, belief from the API's `GET /nodes`: two sources, so the
        // accounting error is measured (one source for both would make it unmeasured).
        &[
            "--api",
            &c.api,
            "--admin-token-env",
            "REHEARSAL_ADMIN",
            "--mock-admin",
            &c.admin,
        ],
        &profile,
        &reports,
    )
    .await;
    assert_eq!(
        on_nodes(&c.admin).await,
        0,
        "nightly left sandboxes\n{}",
        out.2
    );
    for secret in [KEY, ADMIN] {
        assert!(!out.2.contains(secret), "secret on stderr");
        let hits = grep_dir(&reports, secret);
        assert!(hits.is_empty(), "secret written into {hits:?}");
    }
    let report = report_dirs(&reports)
        .pop()
        .expect("a report")
        .join("report.json");
    // The test's run is short (200 creates, not 2400): its running CV is 2-3x the full
    // run's (0.09..0.16 over simulated seeds 1..20 against 0.05 for the full run), so B
    // may be 3.5x the baseline here. A returning herd is still far beyond on running CV
    // (0.51).
    let cmp = stampede()
        .args(["compare", "--tolerance", "2.5"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/reports/baselines/nightly.json"
        ))
        .arg(&report)
        .output()
        .expect("stampede compare runs");
    let compared = (
        cmp.status.code(),
        String::from_utf8_lossy(&cmp.stdout).into_owned() + &String::from_utf8_lossy(&cmp.stderr),
    );
    let _ = std::fs::remove_dir_all(&dir);
    (out, compared)
}

/// The compare rows marked REGRESSED: their figure names.
fn regressed_figures(compare_out: &str) -> Vec<String> {
    compare_out
        .lines()
        .filter(|l| l.contains("REGRESSED") && l.contains('│'))
        .filter_map(|l| l.split('│').nth(2).map(|f| f.trim().to_string()))
        .collect()
}

/// `--api` does not lift the loopback rule: a staging host must be in `allow_targets`.
#[test]
fn api_override_to_a_non_loopback_host_needs_allow_targets() {
    let out = stampede()
        .args(["run", "--quiet", "--api", "http://api.staging.example.com"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/profiles/nightly.yaml"
        ))
        .env("STAMPEDE_API_KEY", KEY)
        .output()
        .expect("stampede runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("allow_targets"), "{stderr}");
    assert!(!stderr.contains(KEY));
}

/// The nightly profile guards staging as it guards the twin: it passes against an
/// optimistic serve and fails its skew checks against a `reported` one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nightly_profile_guards_an_external_serve() {
    let ((status, report, stderr), (cmp_code, cmp_out)) = nightly_against("optimistic").await;
    let run = &report["runs"][0];
    assert_eq!(
        status.code(),
        Some(0),
        "optimistic: {stderr}\n{}",
        report["checks"]
    );
    assert_eq!(
        run["staging"]["truth_source"]
            .as_str()
            .map(|s| s.contains("GET /nodes")),
        Some(true)
    );
    eprintln!(
        "nightly optimistic: cv {} max/mean {} cleaned {}",
        run["skew"]["cv"], run["skew"]["max_over_mean"], run["staging"]["cleanup"]["cleaned"]
    );
    // Compared with the shipped baseline (an embedded run of the full profile), the
    // short optimistic run is no worse on any figure the profile guards.
    assert_eq!(
        cmp_code,
        Some(0),
        "optimistic against the baseline:\n{cmp_out}"
    );
    let ((status, report, stderr), (cmp_code, cmp_out)) = nightly_against("reported").await;
    assert_eq!(
        status.code(),
        Some(1),
        "reported: {stderr}\n{}",
        report["checks"]
    );
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["passed"] == false)
        .filter_map(|c| c["check"].as_str())
        .collect();
    assert!(
        failed.contains(&"running_cv_mean"),
        "the skew check failed: {failed:?}"
    );
    // The herd is back: compared with the baseline it regresses, on the figures the
    // nightly exists for (its final fleet is empty, so the final CV says nothing).
    assert_eq!(
        cmp_code,
        Some(1),
        "reported against the baseline:\n{cmp_out}"
    );
    // Truth from the fleet, belief from the API: the accounting error is measured, and
    // the herd's stale heartbeats put it beyond the baseline's too.
    let regressed = regressed_figures(&cmp_out);
    for figure in ["running_cv_mean", "accounting_error"] {
        assert!(
            regressed.iter().any(|f| f == figure),
            "{figure} not regressed: {regressed:?}\n{cmp_out}"
        );
    }
    eprintln!("nightly reported against the baseline:\n{cmp_out}");
    eprintln!(
        "nightly reported: running cv mean {} failed {failed:?}",
        report["runs"][0]["skew_over_time"]["running_cv_mean"]
    );
}

/// A staging run's finding: `rate: {per_second: 20, duration: 30s}` on full nodes (every
/// create refused and retried by the service until its 70 s deadline), interrupted
/// early, kept sending until the schedule ended and exited 95 s after the signal. Now
/// the creates in flight are given up within the grace and recorded as cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_on_full_nodes_gives_up_creates_in_flight_as_cancelled() {
    let dir = tempdir("rehearsal-full");
    // One 1-vCPU sandbox per node; another tenant's burst (kept) fills them.
    let full = "nodes: 3\nseed: 5\nnode:\n  cpu_count: 1\n  overcommit: 1.0\n";
    let c = start_cluster(&dir, full, &["--sync-interval", "1s"]);
    let reports = dir.join("reports");
    let other = burst_profile(&dir, &c, 3);
    let (status, _, stderr) = run_to_end(&["--keep"], &other, &reports).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(on_nodes(&c.admin).await, 3, "the nodes are full");
    let p = dir.join("full.yaml");
    std::fs::write(
        &p,
        format!(
            "name: full\nseed: 5\nplacement:\n  external:\n    url: {}\n    mock_admin: [\"{}\"]\n\
             workload:\n  shape:\n    rate: {{per_second: 20, duration: 30s}}\n  \
             sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 300s}}\n  max_in_flight: 64\n\
             collect:\n  interval: 250ms\nreport:\n  goose_html: false\n",
            c.api, c.admin
        ),
    )
    .unwrap();
    let before = report_dirs(&reports);
    let mut run = start_run(&[], &p, &reports);
    wait_for_line(&mut run, "workload gate open", Duration::from_secs(60)).await;
    // Some of the schedule's 600 creates are in flight (the service keeps retrying them).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (status, took, stderr) = interrupt(&mut run, Duration::from_secs(90)).await;
    assert!(
        took < Duration::from_secs(5),
        "exited {took:?} after SIGINT\n{stderr}"
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    let report = new_report(&reports, &before);
    let run = &report["runs"][0];
    let staging = &run["staging"];
    assert_eq!(staging["sent_after_signal"], 0, "{staging}");
    assert_eq!(u(&staging["before"]["sandboxes"]), 3, "{staging}");
    let requests = u(&run["requests"]);
    assert!(requests < 600, "the schedule was cut short: {requests}");
    assert!(
        u(&staging["cancelled"]) > 0,
        "{staging}\n{}",
        run["statuses"]
    );
    assert_eq!(
        u(&run["statuses"]["cancelled"]),
        u(&staging["cancelled"]),
        "{}",
        run["statuses"]
    );
    assert_eq!(
        on_nodes(&c.admin).await,
        3,
        "only the other tenant's are left"
    );
    eprintln!(
        "full nodes: exited {took:?} after the signal; requests {requests} cancelled {} statuses {}",
        staging["cancelled"], run["statuses"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A second SIGINT during cleanup aborts it (exit 130) and names every sandbox it
/// leaves running, with the DELETE that kills it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_sigint_aborts_cleanup_and_names_what_is_left() {
    let dir = tempdir("rehearsal-abort-cleanup");
    // Deletes take 1 s: 48 sandboxes, 16 deletes at a time, take 3 s or more to clean.
    let nodes = format!(
        "{}  delete_latency: {{dist: constant, value: 1s}}\n",
        roomy_nodes("{dist: constant, value: 1ms}")
    );
    let c = start_cluster(&dir, &nodes, &["--sync-interval", "1s"]);
    let profile = burst_profile(&dir, &c, 48);
    let reports = dir.join("reports");
    let mut run = start_run(&[], &profile, &reports);
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = |run: &Run, what: &str| run.stderr.lock().unwrap().contains(what);
    while !seen(&run, "cleanup: killing") {
        assert!(
            run.proc.0.try_wait().unwrap().is_none(),
            "ended before cleanup"
        );
        assert!(Instant::now() < deadline, "no cleanup within 60 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    sigint(&run);
    while !seen(&run, "interrupted") {
        assert!(
            run.proc.0.try_wait().unwrap().is_none(),
            "ended before the 2nd signal"
        );
        assert!(Instant::now() < deadline, "first signal not handled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The gap is the scenario, not a wait for a state: a signal within 1 s of the first
    // is the same interrupt; 1.3 s is past that window and inside the 3 s cleanup.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(
        run.proc.0.try_wait().unwrap().is_none(),
        "ended before the 2nd signal"
    );
    sigint(&run);
    let status = wait_exit(&mut run, Duration::from_secs(30)).await;
    let stderr = run.stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cleanup cut short"), "{stderr}");
    let truth = fetch_truth(
        &reqwest::Client::new(),
        &TruthSource::MockAdmin(vec![c.admin.clone()], None),
    )
    .await
    .expect("fleet truth");
    let left: Vec<String> = truth
        .nodes
        .iter()
        .flat_map(|n| n.ids.clone().unwrap_or_default())
        .collect();
    for id in &left {
        let named = format!("DELETE {}/sandboxes/{id}", c.api);
        assert!(stderr.contains(&named), "{id} left but not named\n{stderr}");
    }
    eprintln!(
        "abort during cleanup: {} sandboxes left, all named; stderr:\n{}",
        left.len(),
        stderr
            .lines()
            .filter(|l| l.starts_with("aborted"))
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// goose builds its users synchronously (one HTTP client each, loading the system's CA
/// store): for the 512 users of a default `rate` workload that took ~30 s in a debug
/// build, and a SIGINT meanwhile waited for all of it. Now the run lets goose go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_while_goose_builds_its_users_exits_fast() {
    let dir = tempdir("rehearsal-building");
    let c = start_cluster(
        &dir,
        &roomy_nodes("{dist: constant, value: 1ms}"),
        &["--sync-interval", "1s"],
    );
    let p = dir.join("rate.yaml");
    std::fs::write(
        &p,
        format!(
            "name: building\nseed: 5\nplacement:\n  external:\n    url: {}\n    mock_admin: [\"{}\"]\n\
             workload:\n  shape:\n    rate: {{per_second: 20, duration: 30s}}\n  \
             sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 300s}}\n\
             report:\n  goose_html: false\n",
            c.api, c.admin
        ),
    )
    .unwrap();
    let reports = dir.join("reports");
    let mut run = start_run(&[], &p, &reports);
    wait_for_line(&mut run, "workload starting", Duration::from_secs(60)).await;
    let (status, took, stderr) = interrupt(&mut run, Duration::from_secs(90)).await;
    assert!(
        took < Duration::from_secs(5),
        "exited {took:?} after SIGINT\n{stderr}"
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    let report = new_report(&reports, &[]);
    assert_eq!(report["runs"][0]["staging"]["sent_after_signal"], 0);
    assert_eq!(on_nodes(&c.admin).await, 0);
    eprintln!("building users: exited {took:?} after the signal");
    let _ = std::fs::remove_dir_all(&dir);
}
