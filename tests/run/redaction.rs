//! A password in `--api` or `--mock-admin` (`http://user:PASSWORD@host`) reached
//! report.json, .md, .html, junit.xml and every error line. Now every output says
//! `http://***@host`.

use crate::support::staging::*;

const PASSWORD: &str = "url-password-7c1e";

/// `http://user:PASSWORD@host:port` of a loopback base URL.
fn with_password(url: &str) -> String {
    url.replacen("http://", &format!("http://user:{PASSWORD}@"), 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_api_or_mock_admin_url_is_in_no_output() {
    let dir = tempdir("redaction");
    let c = start_cluster(&dir, &roomy_nodes("{dist: constant, value: 2ms}"), &[]);
    let profile = dir.join("p.yaml");
    // A failing check, so that junit.xml and stderr carry a failure too.
    std::fs::write(
        &profile,
        "name: redact\nseed: 1\nworkload:\n  shape:\n    burst: {count: 4}\n  \
         sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 300s}\nreport:\n  goose_html: false\n\
         checks:\n  error_rate: {max: 0.0}\n  p99_latency: {max: 1us}\n",
    )
    .expect("profile");
    let reports = dir.join("reports");
    let (api, admin) = (with_password(&c.api), with_password(&c.admin));
    let (status, report, stderr) =
        run_to_end(&["--api", &api, "--mock-admin", &admin], &profile, &reports).await;
    assert_eq!(status.code(), Some(1), "the p99 check fails: {stderr}");
    assert_eq!(node_sum(&report["runs"][0]), 4, "the run reached both URLs");
    assert!(
        report["runs"][0]["settings"]["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("http://***@127.0.0.1:")),
        "{}",
        report["runs"][0]["settings"]
    );
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    assert_eq!(grep_dir(&reports, PASSWORD), Vec::<String>::new());

    // An error line: the fleet's admin URL with a password on a closed port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let dead = with_password(&format!("http://{}", closed.local_addr().unwrap()));
    drop(closed);
    let out = stampede()
        .args(["run", "--report-dir"])
        .arg(&reports)
        .arg(&profile)
        .args(["--api", &api, "--mock-admin", &dead])
        .env("STAMPEDE_API_KEY", KEY)
        .env("RUST_LOG", "stampede=debug")
        .output()
        .expect("run");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("***@127.0.0.1"),
        "the URL is named: {stderr}"
    );
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "{stderr}"
    );
    let out = stampede()
        .args(["cleanup", "--api", &dead, "--tag", "t"])
        .env("STAMPEDE_API_KEY", KEY)
        .output()
        .expect("cleanup");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
    assert_eq!(grep_dir(&reports, PASSWORD), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}
