//! `stampede run` and signals, with the real binaries: a mock-node fleet and a
//! placement service started as external processes, a run against them with an
//! open-ended chaos `kill`, then SIGTERM / SIGHUP (stop, heal, partial report), a SIGINT
//! repeated at once (the same interrupt) or two SIGINTs apart (abort, naming the faults
//! left active).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::staging as staging_support;
use staging_support::{serve_url, spawn_ready, stampede, tempdir, Proc};

const KEY: &str = "e2b_signals_test_key";

struct Cluster {
    _fleet: Proc,
    _serve: Proc,
    admin: String,
    api: String,
}

fn start_cluster() -> Cluster {
    start_cluster_with(None)
}

/// Three nodes; with `delete_latency`, each node's Delete takes that long (a run's
/// cleanup then lasts at least as long).
fn start_cluster_with(delete_latency: Option<&str>) -> Cluster {
    let mut fleet = stampede();
    fleet.args(["mock-node", "--base-port", "0"]);
    match delete_latency {
        None => {
            fleet.args(["--nodes", "3", "--seed", "4"]);
        }
        Some(d) => {
            let config = std::env::temp_dir().join(format!(
                "stampede-signals-cluster-{}-{}.yaml",
                std::process::id(),
                d
            ));
            std::fs::write(
                &config,
                format!(
                    "nodes: 3\nseed: 4\nnode:\n  delete_latency: {{dist: constant, value: {d}}}\n"
                ),
            )
            .expect("cluster config written");
            fleet.arg("--config").arg(&config);
        }
    }
    let (fleet, line) = spawn_ready(fleet, "mock-node ready");
    let admin = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("admin="))
        .expect("admin URL in the ready line")
        .to_string();
    let mut serve = stampede();
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--sync-interval", "1s"])
        .args(["--mock-admin", &admin])
        .env("STAMPEDE_API_KEY", KEY);
    let (serve, line) = spawn_ready(serve, "stampede serve: ");
    let api = serve_url(&line);
    Cluster {
        _fleet: fleet,
        _serve: serve,
        admin,
        api,
    }
}

/// A long run against `c` whose chaos `kill` has no duration (in force until the end).
fn write_profile(dir: &Path, c: &Cluster) -> PathBuf {
    let p = dir.join("signals.yaml");
    let text = format!(
        "name: signals\nseed: 3\nplacement:\n  external:\n    url: {}\n    mock_admin: [\"{}\"]\n\
         workload:\n  shape:\n    rate: {{per_second: 10, duration: 120s}}\n  \
         sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 300s}}\n  max_in_flight: 16\n\
         collect:\n  interval: 250ms\n\
         chaos:\n  - at: 300ms\n    fault: kill\n    nodes: {{random: 1}}\n",
        c.api, c.admin
    );
    std::fs::write(&p, text).expect("profile written");
    p
}

/// `stampede run` in `cwd` (its reports go to `cwd/reports`), stderr collected.
fn start_run(cwd: &Path, profile: &Path) -> (Proc, Arc<Mutex<String>>) {
    let mut child = stampede()
        .args(["run", "--quiet"])
        .arg(profile)
        .current_dir(cwd)
        .env("STAMPEDE_API_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stampede run starts");
    let stderr = child.stderr.take().expect("stderr");
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut t = sink.lock().unwrap();
            t.push_str(&line);
            t.push('\n');
        }
    });
    (Proc(child), text)
}

/// Faults of the fleet (`GET /faults`).
async fn faults(admin: &str) -> Vec<Value> {
    let body: Value = reqwest::get(format!("{admin}/faults"))
        .await
        .expect("GET /faults")
        .json()
        .await
        .expect("JSON");
    body["faults"].as_array().cloned().unwrap_or_default()
}

async fn active_fault_ids(admin: &str) -> Vec<u64> {
    faults(admin)
        .await
        .iter()
        .filter(|f| f["active"] == true)
        .filter_map(|f| f["id"].as_u64())
        .collect()
}

/// Waits until the run's fault is in force.
async fn wait_for_active_fault(admin: &str, run: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if !active_fault_ids(admin).await.is_empty() {
            return;
        }
        assert!(
            run.0.try_wait().unwrap().is_none(),
            "the run ended before applying its fault"
        );
        assert!(Instant::now() < deadline, "no fault applied within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the run's stderr has a line starting with `prefix`.
async fn wait_for_line(stderr: &Mutex<String>, prefix: &str, run: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if stderr
            .lock()
            .unwrap()
            .lines()
            .any(|l| l.starts_with(prefix))
        {
            return;
        }
        assert!(
            run.0.try_wait().unwrap().is_none(),
            "the run ended before printing `{prefix}`"
        );
        assert!(Instant::now() < deadline, "no `{prefix}` line within 30 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn signal(run: &Proc, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &run.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(ok.success(), "kill -{sig}");
}

async fn wait_exit(run: &mut Proc, within: Duration) -> ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = run.0.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "stampede run did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `.goose-*` directories anywhere under `dir` (two levels: the working directory and
/// the report parent inside it).
fn goose_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            if e.file_name().to_string_lossy().starts_with(".goose-") {
                out.push(p.clone());
            }
            if depth < 2 {
                stack.push((p, depth + 1));
            }
        }
    }
    out
}

fn only_report(reports: &Path) -> Value {
    let dirs: Vec<_> = std::fs::read_dir(reports)
        .expect("report parent")
        .flatten()
        .filter(|e| e.path().join("report.json").exists())
        .collect();
    assert_eq!(dirs.len(), 1, "one report directory");
    let text = std::fs::read_to_string(dirs[0].path().join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// SIGTERM (`timeout 10 stampede run`) ended the process at once: no report, a
/// `.goose-<pid>/` left behind, the open-ended `kill` left in force on the fleet.
async fn first_signal_stops_heals_and_reports(sig: &str) {
    let dir = tempdir(&format!("signal-{}", sig.to_lowercase()));
    let cluster = start_cluster();
    let profile = write_profile(&dir, &cluster);
    let (mut run, stderr) = start_run(&dir, &profile);
    wait_for_active_fault(&cluster.admin, &mut run).await;
    signal(&run, sig);
    let status = wait_exit(&mut run, Duration::from_secs(90)).await;
    let stderr = stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(2), "{sig}: {status:?}\n{stderr}");
    let report = only_report(&dir.join("reports"));
    assert_eq!(report["incomplete"], true, "{stderr}");
    assert!(
        report["incomplete_reason"]
            .as_str()
            .is_some_and(|r| r.contains("signal")),
        "{}",
        report["incomplete_reason"]
    );
    let active = active_fault_ids(&cluster.admin).await;
    assert!(
        active.is_empty(),
        "faults left active: {active:?}\n{stderr}"
    );
    assert!(
        !faults(&cluster.admin).await.is_empty(),
        "the fault was applied"
    );
    let left = goose_dirs(&dir);
    assert!(left.is_empty(), "goose staging left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_heals_faults_and_writes_a_partial_report_without_goose_leftovers() {
    first_signal_stops_heals_and_reports("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_is_handled_like_sigint() {
    first_signal_stops_heals_and_reports("HUP").await;
}

/// Sandboxes on the fleet's nodes (`GET /nodes`), all nodes.
async fn on_nodes(admin: &str) -> u64 {
    let body: Value = reqwest::get(format!("{admin}/nodes"))
        .await
        .expect("GET /nodes")
        .json()
        .await
        .expect("JSON");
    body["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["sandbox_count"].as_u64())
        .sum()
}

/// Waits until the run has sandboxes on the nodes (its cleanup then has work).
async fn wait_for_sandboxes(admin: &str, run: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while on_nodes(admin).await == 0 {
        assert!(run.0.try_wait().unwrap().is_none(), "the run ended early");
        assert!(Instant::now() < deadline, "no sandbox within 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// GNU `timeout` (and CI runners) forward one SIGINT both to the child and to its
/// process group: `stampede run` saw two signals, aborted with 130 and left its
/// sandboxes. A repeat within the window is the same interrupt: the run cleans up,
/// writes its partial report and exits 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_repeated_at_once_is_one_interrupt_and_the_run_cleans_up() {
    let dir = tempdir("repeated-sigint");
    let cluster = start_cluster();
    let profile = write_profile(&dir, &cluster);
    let (mut run, stderr) = start_run(&dir, &profile);
    wait_for_active_fault(&cluster.admin, &mut run).await;
    wait_for_sandboxes(&cluster.admin, &mut run).await;
    signal(&run, "INT");
    let first = Instant::now();
    // Two signals sent before the process runs merge into one: send the second as soon
    // as the first was handled.
    wait_for_line(&stderr, "interrupted", &mut run).await;
    signal(&run, "INT");
    let gap = first.elapsed();
    let status = wait_exit(&mut run, Duration::from_secs(90)).await;
    let stderr = stderr.lock().unwrap().clone();
    assert!(
        gap < Duration::from_millis(900),
        "the repeat was sent {gap:?} after the first signal: not a repeat"
    );
    assert_eq!(status.code(), Some(2), "{status:?}\n{stderr}");
    assert!(stderr.contains("the same interrupt"), "{stderr}");
    assert!(!stderr.contains("aborted"), "{stderr}");
    let report = only_report(&dir.join("reports"));
    assert_eq!(report["incomplete"], true, "{stderr}");
    assert_eq!(
        on_nodes(&cluster.admin).await,
        0,
        "sandboxes left: {stderr}"
    );
    let active = active_fault_ids(&cluster.admin).await;
    assert!(active.is_empty(), "faults left active: {active:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A second signal well after the first (past the repeat window) aborts, naming what it
/// leaves. Deletes take 3 s here, so the run is still cleaning up when it comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_after_the_window_aborts_naming_what_it_leaves() {
    let dir = tempdir("double-sigint");
    let cluster = start_cluster_with(Some("3s"));
    let profile = write_profile(&dir, &cluster);
    let (mut run, stderr) = start_run(&dir, &profile);
    wait_for_active_fault(&cluster.admin, &mut run).await;
    wait_for_sandboxes(&cluster.admin, &mut run).await;
    signal(&run, "INT");
    wait_for_line(&stderr, "interrupted", &mut run).await;
    // The gap is the scenario, not a wait for a state: past the 1 s repeat window, and
    // well inside the cleanup's first 3 s delete.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(
        run.0.try_wait().unwrap().is_none(),
        "the run ended before the second signal"
    );
    signal(&run, "INT");
    let status = wait_exit(&mut run, Duration::from_secs(30)).await;
    let stderr = stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(130), "{status:?}\n{stderr}");
    assert!(stderr.contains("aborted"), "{stderr}");
    // Whatever the heal managed before the abort, every fault still in force is named
    // with the admin URL that heals it (here the heal came before the cleanup).
    let active = active_fault_ids(&cluster.admin).await;
    for id in &active {
        let heal = format!("DELETE {}/faults/{id}", cluster.admin);
        assert!(stderr.contains(&heal), "fault {id} not named: {stderr}");
    }
    // Cleanup was cut short or had not started: what it leaves is named.
    assert!(stderr.contains("left running on"), "{stderr}");
    let http = reqwest::Client::new();
    for id in active {
        let r = http
            .delete(format!("{}/faults/{id}", cluster.admin))
            .send()
            .await
            .expect("DELETE /faults/{id}");
        assert!(r.status().is_success(), "{}", r.status());
    }
    let left = goose_dirs(&dir);
    assert!(left.is_empty(), "goose staging left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
