//! Helpers of `tests/run/staging_rehearsal.rs`: the real binaries as separate processes
//! (mock-node fleet, `stampede serve`, `stampede run`), reports and node truth.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use stampede::collect::{fetch_truth, TruthSource};

pub const KEY: &str = "e2b_rehearsal_test_key";
pub const ADMIN: &str = "rehearsal_admin_token";

pub fn stampede() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stampede"))
}

/// A fresh, empty `stampede-<name>-<pid>-<n>` under the system temp dir (`n` counts the
/// calls in this process: one test binary holds many tests).
pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stampede-{name}-{}", super::unique()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A child process killed when dropped (also when an assertion fails).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `cmd` and returns it with its first stdout line that starts with `prefix`.
pub fn spawn_ready(mut cmd: Command, prefix: &str) -> (Proc, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let proc = Proc(child);
    let (tx, rx) = std::sync::mpsc::channel();
    let prefix = prefix.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with(&prefix) {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a ready line within 60 s");
    (proc, line)
}

/// A fleet (`stampede mock-node --config`) and a placement service on it
/// (`stampede serve`), both separate processes.
pub struct Cluster {
    pub _fleet: Proc,
    pub _serve: Proc,
    pub admin: String,
    pub api: String,
}

pub fn start_cluster(dir: &Path, cluster_yaml: &str, serve_args: &[&str]) -> Cluster {
    let config = dir.join("cluster.yaml");
    std::fs::write(&config, cluster_yaml).expect("cluster config written");
    let mut fleet = stampede();
    fleet
        .args(["mock-node", "--base-port", "0", "--config"])
        .arg(&config);
    let (fleet, line) = spawn_ready(fleet, "mock-node ready");
    let admin = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("admin="))
        .expect("admin URL in the ready line")
        .to_string();
    let mut serve = stampede();
    serve
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(serve_args)
        .args(["--mock-admin", &admin])
        .env("STAMPEDE_API_KEY", KEY)
        .env("STAMPEDE_ADMIN_TOKEN", ADMIN);
    let (serve, line) = spawn_ready(serve, "stampede serve: ");
    let api = serve_url(&line);
    Cluster {
        _fleet: fleet,
        _serve: serve,
        admin,
        api,
    }
}

/// Three roomy nodes whose creates take `latency` (a mock-node latency distribution).
pub fn roomy_nodes(latency: &str) -> String {
    format!(
        "nodes: 3\nseed: 5\nnode:\n  cpu_count: 64\n  overcommit: 4.0\n  max_sandboxes: 2000\n  \
         max_starting: 0\n  create_latency: {latency}\n"
    )
}

/// An external burst of `count` creates against `c`, truth from its fleet's admin API.
pub fn burst_profile(dir: &Path, c: &Cluster, count: usize) -> PathBuf {
    let p = dir.join(format!("burst-{count}.yaml"));
    let text = format!(
        "name: rehearsal\nseed: 5\nplacement:\n  external:\n    url: {}\n    mock_admin: [\"{}\"]\n\
         workload:\n  shape:\n    burst: {{count: {count}}}\n  \
         sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 300s}}\n\
         collect:\n  interval: 250ms\nreport:\n  goose_html: false\n\
         checks:\n  error_rate: {{max: 0.0}}\n  limited: {{max: 0.0}}\n  cancelled: {{max: 0}}\n",
        c.api, c.admin
    );
    std::fs::write(&p, text).expect("profile written");
    p
}

/// A `stampede run` child with stderr collected.
pub struct Run {
    pub proc: Proc,
    pub stderr: Arc<Mutex<String>>,
}

pub fn start_run(args: &[&str], profile: &Path, reports: &Path) -> Run {
    let mut child = stampede()
        .args(["run", "--quiet", "--report-dir"])
        .arg(reports)
        .arg(profile)
        .args(args)
        .env("STAMPEDE_API_KEY", KEY)
        .env("REHEARSAL_ADMIN", ADMIN)
        .env("RUST_LOG", "stampede=info")
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
    Run {
        proc: Proc(child),
        stderr: text,
    }
}

pub async fn wait_exit(run: &mut Run, within: Duration) -> ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = run.proc.0.try_wait().unwrap() {
            // Let the reader thread take the last lines.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "stampede run did not exit within {within:?}\n{}",
            run.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs to completion and returns the exit status and the new report.
pub async fn run_to_end(
    args: &[&str],
    profile: &Path,
    reports: &Path,
) -> (ExitStatus, Value, String) {
    let before = report_dirs(reports);
    let mut run = start_run(args, profile, reports);
    let status = wait_exit(&mut run, Duration::from_secs(120)).await;
    let stderr = run.stderr.lock().unwrap().clone();
    (status, new_report(reports, &before), stderr)
}

pub fn report_dirs(reports: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(reports)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("report.json").exists())
        .collect();
    v.sort();
    v
}

pub fn new_report(reports: &Path, before: &[PathBuf]) -> Value {
    let fresh: Vec<PathBuf> = report_dirs(reports)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(fresh.len(), 1, "one new report directory: {fresh:?}");
    let text = std::fs::read_to_string(fresh[0].join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// Sandboxes on the fleet's nodes now, all nodes.
pub async fn on_nodes(admin: &str) -> u64 {
    let t = fetch_truth(
        &reqwest::Client::new(),
        &TruthSource::MockAdmin(vec![admin.to_string()], None),
    )
    .await
    .expect("fleet truth");
    t.nodes.iter().map(|n| n.sandboxes).sum()
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

pub fn node_sum(run: &Value) -> u64 {
    run["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| u(&n["sandboxes"]))
        .sum()
}

/// Files under `dir` whose text contains `needle`.
pub fn grep_dir(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            hits.extend(grep_dir(&p, needle));
        } else if std::fs::read_to_string(&p).is_ok_and(|t| t.contains(needle)) {
            hits.push(p.display().to_string());
        }
    }
    hits
}

/// Waits until `run`'s stderr holds `marker`, failing if the run ends first or `within`
/// passes.
pub async fn wait_for_line(run: &mut Run, marker: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !run.stderr.lock().unwrap().contains(marker) {
        assert!(
            run.proc.0.try_wait().unwrap().is_none(),
            "the run ended before logging {marker:?}"
        );
        assert!(Instant::now() < deadline, "no {marker:?} within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Sends SIGINT to `run`.
pub fn sigint(run: &Run) {
    let ok = Command::new("kill")
        .args(["-INT", &run.proc.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(ok.success());
}

/// Sends SIGINT and waits (at most `within`) for the exit: the status, the time from the
/// signal to the exit, and the run's stderr.
pub async fn interrupt(run: &mut Run, within: Duration) -> (ExitStatus, Duration, String) {
    sigint(run);
    let signalled = Instant::now();
    let status = wait_exit(run, within).await;
    let took = signalled.elapsed();
    let stderr = run.stderr.lock().unwrap().clone();
    (status, took, stderr)
}

/// The API URL in `stampede serve`'s ready line (`stampede serve: http://... (...)`).
pub fn serve_url(line: &str) -> String {
    line.trim_start_matches("stampede serve: ")
        .split_whitespace()
        .next()
        .expect("URL in the serve line")
        .to_string()
}
