//! A broken setup is told apart from a regression, over the real binaries (a mock-node
//! fleet and `stampede serve` as separate processes, `stampede run` against them):
//! a wrong API key and an unreachable API exit 2 and say which; `--allow-target` admits
//! a host the profile does not list; a profile without checks never prints PASSED; an
//! external run shows the figures it cannot observe as not measured.

use crate::support::staging as staging_support;

use std::path::Path;
use std::process::{Output, Stdio};

use staging_support::*;

/// `stampede run --quiet` of `profile` with `env` set, to its end (bounded by the
/// profile: a burst of a few creates).
fn run_with(profile: &Path, reports: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = stampede();
    cmd.args(["run", "--quiet", "--report-dir"])
        .arg(reports)
        .arg(profile)
        .args(args)
        .env_remove("STAMPEDE_API_KEY")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("stampede run")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A key the API refuses: every create answered 401, exit 2 naming the key, not 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_api_key_is_a_setup_failure_not_a_regression() {
    let dir = tempdir("setup-key");
    let c = start_cluster(&dir, &roomy_nodes("{dist: constant, value: 1ms}"), &[]);
    let profile = burst_profile(&dir, &c, 8);
    let reports = dir.join("reports");
    let out = run_with(
        &profile,
        &reports,
        &[],
        &[("STAMPEDE_API_KEY", "not-the-key")],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("setup:") && stderr.contains("401/403"),
        "{stderr}"
    );
    assert!(!stderr.contains("check failed"), "{stderr}");
    let report = new_report(&reports, &[]);
    assert_eq!(report["incomplete"], true);
    assert_eq!(on_nodes(&c.admin).await, 0);
    // The right key on the same cluster passes: the exit 2 was the key's.
    let out = run_with(&profile, &reports, &[], &[("STAMPEDE_API_KEY", KEY)]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
}

/// An API nobody listens on (truth still read from the fleet): exit 2, "unreachable".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_is_a_setup_failure() {
    let dir = tempdir("setup-down");
    let c = start_cluster(&dir, &roomy_nodes("{dist: constant, value: 1ms}"), &[]);
    // Bound, never listening: connects are refused, and the port stays ours.
    let held = tokio::net::TcpSocket::new_v4().expect("socket");
    held.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let closed = held.local_addr().expect("addr");
    let profile = burst_profile(&dir, &c, 4);
    let reports = dir.join("reports");
    let out = run_with(
        &profile,
        &reports,
        &[
            "--api",
            &format!("http://{closed}"),
            "--mock-admin",
            &c.admin,
        ],
        &[("STAMPEDE_API_KEY", KEY)],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("unreachable"), "{stderr}");
    drop(held);
}

/// A profile with no checks: exit 0, and the verdict says nothing was checked. The
/// external run's retries and accounting error read "not measured"; its refusals are
/// the fleet's own counters (none on roomy nodes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_checks_is_not_passed_and_unobservable_figures_are_not_measured() {
    let dir = tempdir("setup-nochecks");
    let c = start_cluster(&dir, &roomy_nodes("{dist: constant, value: 1ms}"), &[]);
    let with_checks = burst_profile(&dir, &c, 6);
    let yaml = std::fs::read_to_string(&with_checks).expect("profile");
    let profile = dir.join("no-checks.yaml");
    std::fs::write(&profile, yaml.split("checks:").next().expect("head")).expect("write");
    let reports = dir.join("reports");
    let mut cmd = stampede();
    let out = cmd
        .args(["run", "--report-dir"])
        .arg(&reports)
        .arg(&profile)
        .env("STAMPEDE_API_KEY", KEY)
        .output()
        .expect("run");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains("PASSED"), "{stdout}");
    assert!(stdout.contains("NOTHING CHECKED"), "{stdout}");
    assert!(stdout.contains("retries / refusals"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("retries / refusals"))
        .expect("row");
    assert!(line.contains("not measured / 0"), "{line}");
    let report = new_report(&reports, &[]);
    assert_eq!(
        report["runs"][0]["not_measured"],
        serde_json::json!(["retries", "accounting_error"])
    );
}

/// `--allow-target HOST` admits a non-loopback host as the profile's `allow_targets`
/// would. TEST-NET-1 (192.0.2.1, RFC 5737) is never routed, and the run stops at the
/// missing key before any request: nothing leaves the machine.
#[test]
fn allow_target_admits_a_host_the_profile_does_not_list() {
    let dir = tempdir("setup-allow");
    let profile = dir.join("p.yaml");
    std::fs::write(
        &profile,
        "name: allow\nseed: 1\nplacement:\n  external:\n    url: http://192.0.2.1:3000\n    \
         api_key_env: STAMPEDE_TEST_UNSET_KEY\nworkload:\n  shape:\n    burst: {count: 1}\n",
    )
    .expect("profile");
    let reports = dir.join("reports");
    let refused = run_with(&profile, &reports, &[], &[]);
    let (_, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("allow_targets"), "{stderr}");
    let admitted = run_with(&profile, &reports, &["--allow-target", "192.0.2.1"], &[]);
    let (_, stderr) = text(&admitted);
    assert_eq!(admitted.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("allow_targets"), "{stderr}");
    assert!(
        stderr.contains("STAMPEDE_TEST_UNSET_KEY is not set"),
        "{stderr}"
    );
}

/// A `--report-dir` that cannot be written is found before the run starts (exit 2,
/// the directory named), not after its workload, when the report is all there is.
#[test]
fn an_unwritable_report_dir_stops_the_run_before_it_starts() {
    let dir = tempdir("setup-report-dir");
    let file = dir.join("a-file");
    std::fs::write(&file, "not a directory").expect("file");
    // Nothing listens there: a workload that started would fail on it instead.
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let api = format!("http://{}", held.local_addr().expect("addr"));
    drop(held);
    let profile = dir.join("p.yaml");
    std::fs::write(
        &profile,
        format!(
            "name: rd\nseed: 1\nplacement:\n  external:\n    url: {api}\n\
             workload:\n  shape:\n    burst: {{count: 1}}\n"
        ),
    )
    .expect("profile");
    for report_dir in [file.clone(), file.join("under-a-file")] {
        let out = stampede()
            .args(["run", "--report-dir"])
            .arg(&report_dir)
            .arg(&profile)
            .env("STAMPEDE_API_KEY", KEY)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("report directory cannot be written")
                && stderr.contains(&report_dir.display().to_string()),
            "{stderr}"
        );
        assert!(!stderr.contains("run tag"), "the run started: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A key that is not visible ASCII was accepted at start and could never match. It is
/// refused before any request, naming the variable, never printing the key.
#[test]
fn an_api_key_no_header_can_carry_is_refused_at_start() {
    let dir = tempdir("setup-oddkey");
    let profile = dir.join("p.yaml");
    std::fs::write(
        &profile,
        "name: oddkey\nseed: 1\nplacement:\n  external:\n    url: http://127.0.0.1:9\n    \
         api_key_env: STAMPEDE_TEST_ODD_KEY\nworkload:\n  shape:\n    burst: {count: 1}\n",
    )
    .expect("profile");
    let reports = dir.join("reports");
    let out = run_with(
        &profile,
        &reports,
        &[],
        &[("STAMPEDE_TEST_ODD_KEY", "sécret key")],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("STAMPEDE_TEST_ODD_KEY"), "{stderr}");
    assert!(stderr.contains("not visible ASCII"), "{stderr}");
    assert!(!stderr.contains("sécret"), "{stderr}");
}
