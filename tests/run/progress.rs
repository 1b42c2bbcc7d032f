//! `stampede run`'s live progress line (stderr) and `-q`, which prints nothing but the
//! final summary: no progress line and not goose's own "N users launched.".

use crate::support::staging::tempdir;
use std::path::Path;
use std::process::{Command, Output};

const PROFILE: &str = "name: tiny-progress
seed: 3
cluster:
  nodes: 3
placement:
  embedded:
    accounting: optimistic
    sync_interval: 1s
workload:
  shape:
    burst: {count: 6}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 60s}
collect:
  interval: 250ms
";

/// Runs the tiny profile (stdout and stderr are pipes, not terminals).
fn run(dir: &Path, quiet: bool) -> Output {
    let profile = dir.join("tiny.yaml");
    std::fs::write(&profile, PROFILE).expect("profile written");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stampede"));
    cmd.arg("run");
    if quiet {
        cmd.arg("-q");
    }
    cmd.arg("--report-dir")
        .arg(dir.join("reports"))
        .arg(&profile)
        // The default log filter: what a user sees.
        .env_remove("RUST_LOG")
        .output()
        .expect("stampede runs")
}

#[test]
fn quiet_run_prints_only_the_final_summary() {
    let dir = tempdir("quiet");
    let out = run(&dir, true);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "the summary and the report path only: {stdout:?}"
    );
    assert!(lines[0].starts_with("report: "), "{stdout:?}");
    assert!(
        lines[1].starts_with("stampede run of `tiny-progress` (seed 3): "),
        "the verdict last: {stdout:?}"
    );
    assert!(!stdout.contains("users launched"), "{stdout:?}");
    assert!(stderr.trim().is_empty(), "nothing on stderr: {stderr:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_without_quiet_prints_a_progress_line() {
    let dir = tempdir("progress");
    let out = run(&dir, false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    // Not a terminal: whole lines; the last one is printed when the workload ends.
    let last = stderr
        .lines()
        .rfind(|l| l.starts_with("optimistic "))
        .unwrap_or_else(|| panic!("a progress line on stderr: {stderr:?}"));
    assert!(last.starts_with("optimistic [1/1] "), "mode i/n: {last}");
    assert!(last.contains("creates 6/6 ok 6 errors 0"), "{last}");
    for figure in [" CV ", " retries/s ", " faults 0"] {
        assert!(last.contains(figure), "{figure:?} in {last}");
    }
    // The tables are on stdout, the verdict last.
    assert!(stdout.contains("report: "), "{stdout}");
    let verdict = stdout.lines().last().unwrap_or_default();
    assert!(
        verdict.starts_with("stampede run of `tiny-progress` (seed 3): NOTHING CHECKED"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
