//! `stampede e2b` end to end, with `stampede serve` standing in for E2B's API through
//! `--api-cmd`: real PostgreSQL and Redis on loopback per run, a mock-node fleet, the
//! API's readiness, both truths and the matched twin, the A/B verdict, and teardown
//! after success, SIGINT and a SIGKILLed harness (then `stampede e2b cleanup`).
//! E2B's own source is not available here: the build verb is exercised by hand (see
//! docs/real-e2b-api.md) and its variant edits by unit tests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const STAMPEDE: &str = env!("CARGO_BIN_EXE_stampede");
/// The API command: stampede's service in the variant's accounting mode, syncing every
/// 2 s (the fixture's cycle; E2B's is 20 s).
const API_CMD: &str = "{stampede} serve --listen 127.0.0.1:{port} --mock-admin {mock_admin} --accounting {mode} --sync-interval 2s";
/// Longest a whole verb may take here (a loaded 2-core CI host).
const VERB_DEADLINE: Duration = Duration::from_secs(240);

fn profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/profiles/e2b-small.yaml")
}

/// A fresh folder for one test's cache and reports.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("stampede-e2b-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn cache(&self) -> PathBuf {
        self.0.join("cache")
    }
    fn reports(&self) -> PathBuf {
        self.0.join("reports")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether PostgreSQL's server and Redis are installed; under CI they must be.
fn stores_available() -> bool {
    let pg = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("bin/initdb").is_file());
    let redis = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let psql = Command::new("psql")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let found = pg && redis && psql;
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "PostgreSQL (postgresql) and Redis (redis-server) must be installed under CI: .ci/run installs them"
        );
        eprintln!("PostgreSQL or Redis not installed: skipped");
    }
    found
}

fn e2b(s: &Scratch, verb: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(STAMPEDE);
    c.args(["e2b", verb])
        .arg(profile())
        .args([
            "--api-cmd",
            API_CMD,
            "--sync-cycle",
            "2s",
            "--twin-phases",
            "4",
        ])
        .arg("--cache")
        .arg(s.cache())
        .arg("--report-dir")
        .arg(s.reports())
        .args(extra)
        .env_remove("RUST_LOG")
        .env("RUST_LOG", "info");
    c
}

/// Pids of live processes started for any run folder under `root`.
fn leftovers(root: &Path) -> Vec<u32> {
    let needle = format!("STAMPEDE_E2B_RUN_DIR={}", root.display());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| {
                    env.split(|b| *b == 0)
                        .any(|v| v.starts_with(needle.as_bytes()))
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Waits until no process of `root` is alive (the kernel's parent-death signals and
/// process-group kills land asynchronously).
fn assert_none_left(root: &Path) {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let left = leftovers(root);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < end, "processes left running: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `cmd` to its end within the deadline; (exit code, stderr).
fn finish(mut cmd: Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, _) = stderr_lines(&mut child);
    let end = Instant::now() + VERB_DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("stampede e2b did not finish within {VERB_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err: Vec<String> = lines.try_iter().collect();
    (status.code(), err.join("\n"))
}

/// A thread forwarding the child's stderr lines.
fn stderr_lines(child: &mut Child) -> (mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, h)
}

/// Waits for a stderr line containing `what`; all lines seen so far.
fn wait_line(rx: &mpsc::Receiver<String>, what: &str, child: &mut Child) -> Vec<String> {
    let end = Instant::now() + VERB_DEADLINE;
    let mut seen = Vec::new();
    while Instant::now() < end {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) => {
                let hit = l.contains(what);
                seen.push(l);
                if hit {
                    return seen;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(s) = child.try_wait().unwrap() {
                    panic!("stampede e2b exited ({s}) before `{what}`: {seen:#?}");
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    panic!("no `{what}` within {VERB_DEADLINE:?}: {seen:#?}");
}

/// A one-run `stampede e2b run` started and waited on until its API is ready; its
/// stderr lines keep coming through the receiver.
fn start_until_api_ready(s: &Scratch) -> (Child, mpsc::Receiver<String>) {
    let mut cmd = e2b(s, "run", &["--variant", "optimistic"]);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (rx, _reader) = stderr_lines(&mut child);
    wait_line(&rx, "API ready", &mut child);
    (child, rx)
}

fn summary(s: &Scratch) -> serde_json::Value {
    let dir = std::fs::read_dir(s.reports())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("e2b.json").is_file())
        .expect("an e2b report folder");
    serde_json::from_slice(&std::fs::read(dir.join("e2b.json")).unwrap()).unwrap()
}

/// What is left under the cache's run folders (empty when everything was removed).
fn runs_left(s: &Scratch) -> Vec<PathBuf> {
    let mut left = Vec::new();
    let mut stack = vec![s.cache().join("runs")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            left.push(p);
        }
    }
    left
}

#[test]
fn a_run_reports_the_api_the_nodes_and_the_twin_and_leaves_nothing_running() {
    if !stores_available() {
        return;
    }
    let s = Scratch::new("run");
    let (code, err) = finish(e2b(&s, "run", &["--variant", "optimistic", "--runs", "2"]));
    assert_eq!(code, Some(0), "{err}");
    assert_none_left(&s.0);
    let left = runs_left(&s);
    assert!(
        left.is_empty(),
        "the run folders were not removed: {left:#?}"
    );
    let j = summary(&s);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{j:#}");
    for r in runs {
        let nodes = r["real"]["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 4);
        let placed: u64 = nodes.iter().map(|n| n["placed"].as_u64().unwrap()).sum();
        assert_eq!(placed, 60, "mock-node's creates_ok over the fleet: {r:#}");
        let twin: u64 = r["twin"]["placed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(twin, 60, "{r:#}");
        assert!(r["diff"].as_u64().is_some(), "{r:#}");
        let phase = r["real"]["phase_s"]
            .as_f64()
            .expect("the phase read from the API's sync line");
        assert!(phase > 0.0 && phase <= 2.0, "phase {phase}");
        assert_eq!(r["real"]["ok"].as_u64(), Some(60), "{r:#}");
    }
    let b = &j["summaries"][0];
    assert_eq!(b["mode"], "optimistic");
    assert_eq!(b["cv"]["n"], 2);
    assert_eq!(b["twin_over_phases"]["n"], 4);
}

#[test]
fn an_ab_of_a_herd_against_optimistic_says_regressed_and_the_reverse_does_not() {
    if !stores_available() {
        return;
    }
    // One run each: the twin gives reported CV 1.00 and optimistic 0.03 on this fixture
    // (stampede sim, 5 seeds x 3 phases), far beyond the bound's 0.01 floor either way.
    let s = Scratch::new("ab-herd");
    let (code, err) = finish(e2b(
        &s,
        "ab",
        &[
            "--base",
            "x:optimistic",
            "--head",
            "x:reported",
            "--runs",
            "1",
        ],
    ));
    assert_eq!(code, Some(1), "{err}");
    let j = summary(&s);
    assert_eq!(j["verdict"]["regressed"], true, "{j:#}");
    assert_none_left(&s.0);
    let junit = std::fs::read_dir(s.reports())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("junit.xml"))
        .find(|p| p.is_file())
        .expect("junit.xml");
    assert!(std::fs::read_to_string(junit).unwrap().contains("<failure"));

    let s = Scratch::new("ab-fixed");
    let (code, err) = finish(e2b(
        &s,
        "ab",
        &[
            "--base",
            "x:reported",
            "--head",
            "x:optimistic",
            "--runs",
            "1",
        ],
    ));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(summary(&s)["verdict"]["regressed"], false);
    assert_none_left(&s.0);
}

#[test]
fn sigint_stops_postgres_redis_the_api_and_mock_node() {
    if !stores_available() {
        return;
    }
    let s = Scratch::new("sigint");
    let (mut child, rx) = start_until_api_ready(&s);
    assert!(
        !leftovers(&s.0).is_empty(),
        "the stack should be running now"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let end = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "no exit within 60 s of SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(2));
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("stopped:") && l.contains("postgres")),
        "{rest:#?}"
    );
    assert_none_left(&s.0);
}

#[test]
fn after_a_sigkilled_harness_the_kernel_and_cleanup_leave_nothing() {
    if !stores_available() {
        return;
    }
    let s = Scratch::new("sigkill");
    let (mut child, _rx) = start_until_api_ready(&s);
    child.kill().unwrap();
    child.wait().unwrap();
    let out = Command::new(STAMPEDE)
        .args(["e2b", "cleanup", "--cache"])
        .arg(s.cache())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("removed"), "cleanup reaped nothing: {said}");
    assert_none_left(&s.0);
    let left = runs_left(&s);
    assert!(left.is_empty(), "cleanup left: {left:#?}");
}
