//! `stampede run --metrics-addr`: the run's live figures scraped mid-run over HTTP and
//! passed through Prometheus' linter, `promtool check metrics` (Debian `prometheus`;
//! `.ci/run` installs it; without it the lint is skipped, except under CI).

use crate::support::staging as staging_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use staging_support::*;

/// `promtool check metrics` findings on `text` (empty: clean); `None` without promtool.
fn promtool(text: &str) -> Option<String> {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is not on PATH under CI: .ci/run must install Debian's `prometheus`"
        );
        eprintln!("promtool not on PATH: the lint is skipped");
        return None;
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    let findings = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() || !findings.trim().is_empty(),
        "promtool failed silently"
    );
    Some(findings)
}

/// The value of `name{run="label"}` in an exposition.
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    let prefix = format!("{name}{{run=\"{label}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// Scraped while the first mode runs, the endpoint shows its creates, CV and
/// refusal counter, and passes promtool; the embedded services' `/metrics` are printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_during_the_run_and_pass_promtool() {
    let dir = tempdir("metrics");
    let profile = dir.join("p.yaml");
    std::fs::write(
        &profile,
        "name: metrics\nseed: 2\ncluster:\n  nodes: 3\n  node: {cpu_count: 64}\n\
         placement:\n  embedded:\n    accounting: [optimistic]\n    sync_interval: 1s\n\
         workload:\n  shape:\n    rate: {per_second: 20, duration: 8s}\n\
         report:\n  goose_html: false\n",
    )
    .expect("profile");
    let mut run = {
        let mut child = stampede()
            .args(["run", "--metrics-addr", "127.0.0.1:0", "--report-dir"])
            .arg(dir.join("reports"))
            .arg(&profile)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run");
        let stderr = child.stderr.take().expect("stderr");
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = text.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let mut t = sink.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
            }
        });
        Run {
            proc: Proc(child),
            stderr: text,
        }
    };
    wait_for_line(&mut run, "metrics: http://", Duration::from_secs(30)).await;
    let url = {
        let err = run.stderr.lock().unwrap();
        err.lines()
            .find_map(|l| l.strip_prefix("metrics: "))
            .expect("metrics line")
            .trim()
            .to_string()
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let body = client
            .get(&url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .expect("scrape")
            .text()
            .await
            .expect("body");
        if sample(&body, "stampede_creates_ok_total", "optimistic").is_some_and(|n| n >= 5.0) {
            break body;
        }
        assert!(
            run.proc.0.try_wait().expect("wait").is_none(),
            "the run ended before 5 creates were seen: {body}"
        );
        assert!(Instant::now() < deadline, "no creates within 60 s: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        sample(&body, "stampede_creates_planned", "optimistic"),
        Some(160.0),
        "{body}"
    );
    assert!(
        sample(&body, "stampede_placements_cv", "optimistic").is_some(),
        "{body}"
    );
    assert!(
        sample(&body, "stampede_service_refusals_total", "optimistic").is_some(),
        "{body}"
    );
    let stderr = run.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("placement service metrics http://127.0.0.1:"),
        "{stderr}"
    );
    if let Some(findings) = promtool(&body) {
        assert!(findings.trim().is_empty(), "promtool: {findings}\n{body}");
    }
    let status = wait_exit(&mut run, Duration::from_secs(120)).await;
    assert_eq!(status.code(), Some(0), "{}", run.stderr.lock().unwrap());
}

/// A metrics address that is not loopback is refused before anything runs.
#[test]
fn a_non_loopback_metrics_address_is_refused() {
    let out = stampede()
        .args([
            "run",
            "--metrics-addr",
            "0.0.0.0:0",
            "profiles/nightly.yaml",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
}

/// The metrics endpoint had no timeouts or connection cap: 1,012 half-open connections
/// took the run's descriptors. With 2,000 silent connections and 2,000 stalled bodies
/// held against it, a scrape is answered within a second, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_stalled_clients_does_not_keep_the_metrics_endpoint_from_answering() {
    let t = stampede::run::Telemetry::serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("binds");
    crate::support::flood::withstands(
        t.addr(),
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    )
    .await;
    t.stop();
}
