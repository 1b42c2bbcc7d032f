//! `stampede run` end to end: the real binary, real servers on loopback, exit codes,
//! partial reports and secrets.

use crate::short_nightly::short_nightly;
use crate::support::staging::tempdir;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn stampede() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stampede"))
}

fn run(profile: &Path, reports: &Path) -> Output {
    stampede()
        .args(["run", "--quiet", "--report-dir"])
        .arg(reports)
        .arg(profile)
        .output()
        .expect("stampede runs")
}

fn only_report(reports: &Path) -> serde_json::Value {
    let dirs: Vec<_> = std::fs::read_dir(reports)
        .expect("report dir")
        .flatten()
        .filter(|e| e.path().join("report.json").exists())
        .collect();
    assert_eq!(dirs.len(), 1, "one report directory");
    let text = std::fs::read_to_string(dirs[0].path().join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

#[test]
fn nightly_guard_passes_for_optimistic_and_fails_for_reported() {
    let dir = tempdir("nightly");
    let good = dir.join("good.yaml");
    std::fs::write(&good, short_nightly(Some("optimistic"), 50, 4)).unwrap();
    let out = run(&good, &dir.join("good"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "optimistic passes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = only_report(&dir.join("good"));
    assert_eq!(report["passed"], true);
    assert_eq!(report["runs"][0]["ok"], 200);
    // The run keeps no ledger (it audits no sets): its timeline was binned as the run
    // went, and the final read, after every answer, counts every placement.
    let timeline = report["runs"][0]["timeline"].as_array().expect("timeline");
    assert!(timeline.len() >= 2, "{} samples", timeline.len());
    let placed = |p: &serde_json::Value| -> Vec<u64> {
        p["placed"]
            .as_array()
            .expect("placed")
            .iter()
            .filter_map(|n| n.as_u64())
            .collect()
    };
    for pair in timeline.windows(2) {
        let (a, b) = (placed(&pair[0]), placed(&pair[1]));
        assert!(
            a.iter().zip(&b).all(|(x, y)| x <= y),
            "placed went down: {a:?} -> {b:?}"
        );
    }
    let last: u64 = placed(&timeline[timeline.len() - 1]).iter().sum();
    assert_eq!(last, 200, "the final sample counts every placement");
    // goose's HTML needs a CDN: not written unless the profile asks for it.
    let written: Vec<String> = std::fs::read_dir(dir.join("good"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !written.iter().any(|f| f.starts_with("goose-")),
        "{written:?}"
    );

    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, short_nightly(Some("reported"), 50, 4)).unwrap();
    let out = run(&bad, &dir.join("bad"));
    assert_eq!(out.status.code(), Some(1), "reported must fail the guard");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("check failed"), "{stderr}");
    let report = only_report(&dir.join("bad"));
    assert_eq!(report["passed"], false);
    let cv = report["runs"][0]["skew_over_time"]["running_cv_mean"]
        .as_f64()
        .unwrap();
    assert!(
        cv > 0.2,
        "the herd is back under reported: running cv mean {cv}"
    );
}

/// The nightly guard bites on the wire too: with a double count after a sync planted in
/// the service's placement core (the test-only `mutations` feature this binary is built
/// with), the short nightly's `accounting_error` check fails and the run exits 1.
#[test]
fn nightly_guard_catches_a_double_count_on_the_wire() {
    let dir = tempdir("nightly-mutated");
    let profile = dir.join("nightly.yaml");
    std::fs::write(&profile, short_nightly(Some("optimistic"), 50, 4)).unwrap();
    let out = stampede()
        .args(["run", "--quiet", "--report-dir"])
        .arg(dir.join("r"))
        .arg(&profile)
        .env("STAMPEDE_MUTATION", "double-count")
        .output()
        .expect("stampede runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the guard must fail: {stderr}");
    let report = only_report(&dir.join("r"));
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["passed"] != true)
        .filter_map(|c| c["check"].as_str())
        .collect();
    assert!(failed.contains(&"accounting_error"), "{failed:?} {stderr}");
    let error = report["runs"][0]["accounting_error"]["mean_abs_vcpu"]
        .as_f64()
        .expect("an accounting error is measured");
    assert!(error > 4.0, "double count reads {error} vCPU");
}

#[test]
fn non_loopback_target_is_refused_unless_allowed() {
    let dir = tempdir("targets");
    let p = dir.join("p.yaml");
    std::fs::write(
        &p,
        "name: t\nplacement:\n  external:\n    url: http://10.1.2.3:3000\nworkload:\n  shape:\n    burst: {count: 1}\n",
    )
    .unwrap();
    let out = run(&p, &dir);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("10.1.2.3"), "{stderr}");
    assert!(stderr.contains("allow_targets"), "{stderr}");
}

#[test]
fn ctrl_c_writes_a_partial_report_marked_incomplete() {
    let dir = tempdir("sigint");
    let p = dir.join("long.yaml");
    let src = std::fs::read_to_string("profiles/nightly.yaml")
        .unwrap()
        .replace(
            "rate: {per_second: 40, duration: 90s}",
            "rate: {per_second: 20, duration: 60s}",
        );
    std::fs::write(&p, src).unwrap();
    let reports = dir.join("r");
    let mut child = stampede()
        .args(["run", "--quiet", "--report-dir"])
        .arg(&reports)
        .arg(&p)
        .env("RUST_LOG", "stampede=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the workload's gate has opened, then let some creates land.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("first create answered") {
                let _ = tx.send(());
            }
        }
    });
    // Wait until a create has been answered (so the ledger has something to keep).
    rx.recv_timeout(Duration::from_secs(60))
        .expect("a create was answered within 60 s");
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "stampede did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(2));
    let report = only_report(&reports);
    assert_eq!(report["incomplete"], true);
    let sent = report["runs"][0]["requests"].as_u64().unwrap_or(0);
    assert!(sent > 0 && sent < 1200, "partial ledger kept: {sent}");
}

#[test]
fn stampede_mock_node_is_the_mock_node_binary() {
    use std::io::BufRead;
    let mut child = stampede()
        .args(["mock-node", "--nodes", "3", "--base-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a ready line");
    child.kill().unwrap();
    let _ = child.wait();
    assert!(
        line.starts_with("mock-node ready admin=http://127.0.0.1:"),
        "{line}"
    );
    assert_eq!(line.matches("@127.0.0.1:").count(), 3, "{line}");
}

/// `stampede validate … | head -1` exited 101, a panic on the closed stdout. With
/// stdout's reader gone before the verb writes, every printing verb exits with its own
/// code and no panic.
#[test]
fn a_closed_stdout_is_no_panic() {
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/burst-500.yaml");
    for args in [
        vec!["validate", profile, profile],
        vec!["schema", "--report"],
        vec!["schema"],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        // The reader is gone before the verb starts: every write fails with EPIPE.
        drop(reader);
        let out = stampede()
            .args(&args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("stampede runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// `compare`, `replay` and `mock-node --config` opened a FIFO and blocked until a writer
/// came. They refuse one at once, saying what it is.
#[test]
fn a_fifo_is_refused_by_every_verb_that_reads_a_file() {
    let dir = tempdir("cli-fifo");
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("path");
    // SAFETY: mkfifo reads a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let f = fifo.to_str().expect("utf-8");
    for args in [
        vec!["compare", f, f],
        vec!["replay", f],
        vec!["mock-node", "--config", f],
    ] {
        let mut child = stampede()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawns");
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().expect("waits") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?} blocked on the FIFO");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        assert_ne!(status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains("FIFO"), "{args:?}: {stderr}");
    }
}

/// `stampede sim P 2>&1 | head -1` panicked (exit 101) and `sim P | head -1` exited 2
/// although the verdict was 0. With stdout (and stderr) closed, `sim` exits with its
/// verdict's code, `--quiet` or not.
#[test]
fn sim_on_a_closed_pipe_exits_with_its_verdict() {
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/burst-500.yaml");
    let dir = tempdir("cli-sim-closed");
    for quiet in [false, true] {
        let sim = |reports: &str| {
            let mut c = stampede();
            c.arg("sim").arg("--report-dir").arg(dir.join(reports));
            if quiet {
                c.arg("--quiet");
            }
            c.arg(profile);
            c
        };
        let verdict = sim("open")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("stampede runs");
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let closed = sim("closed")
            .stdout(writer.try_clone().expect("dup"))
            .stderr(writer)
            .status()
            .expect("stampede runs");
        assert_ne!(closed.code(), Some(101), "quiet={quiet}: a panic");
        assert_eq!(closed.code(), verdict.code(), "quiet={quiet}");
    }
}
