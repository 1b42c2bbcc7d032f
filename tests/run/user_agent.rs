//! Every HTTP request the harness sends names it: `User-Agent: stampede/<version>`.
//! Only the burst's creates did; rate-shaped creates, deletes, truth and belief reads,
//! the set audit, listings and cleanup sent goose's or reqwest's default or none.

use std::collections::BTreeSet;

use crate::support::recording_proxy;
use crate::support::staging::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_of_a_run_and_a_cleanup_carries_stampedes_user_agent() {
    let dir = tempdir("user-agent");
    let c = start_cluster(&dir, &roomy_nodes("{dist: constant, value: 2ms}"), &[]);
    let api = recording_proxy::start(&c.api).await;
    let admin = recording_proxy::start(&c.admin).await;
    // Rate-shaped creates through goose, each deleted after a short lifetime; truth
    // from the fleet's admin API, beliefs from the API's `/nodes`. (The set audit's
    // reads take the same client; a set audit waits a node sync, too long here.)
    let profile = dir.join("ua.yaml");
    std::fs::write(
        &profile,
        format!(
            "name: ua\nseed: 3\nplacement:\n  external:\n    url: {}\n    mock_admin: [\"{}\"]\n    \
             admin_token_env: REHEARSAL_ADMIN\n\
             workload:\n  shape:\n    rate: {{per_second: 20, duration: 1s}}\n  \
             sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 300s}}\n  \
             lifetime: {{dist: uniform, min: 100ms, max: 300ms}}\n\
             collect:\n  interval: 250ms\nreport:\n  goose_html: false\n",
            api.url, admin.url
        ),
    )
    .expect("profile");
    let reports = dir.join("reports");
    let (status, _report, stderr) = run_to_end(&[], &profile, &reports).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let out = stampede()
        .args(["cleanup", "--api", &api.url, "--tag", "no-such-run"])
        .env("STAMPEDE_API_KEY", KEY)
        .output()
        .expect("cleanup runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let want = format!("stampede/{}", env!("CARGO_PKG_VERSION"));
    let mut routes = BTreeSet::new();
    for proxy in [&api, &admin] {
        for s in proxy.seen.lock().unwrap().iter() {
            assert_eq!(s.user_agent.as_deref(), Some(want.as_str()), "{s:?}");
            let route = match s.path.as_str() {
                p if p.starts_with("/sandboxes/") => "/sandboxes/{id}",
                p => p,
            };
            routes.insert(format!("{} {route}", s.method));
        }
    }
    for route in [
        "POST /sandboxes",
        "DELETE /sandboxes/{id}",
        "GET /v2/sandboxes",
        "GET /nodes",
    ] {
        assert!(routes.contains(route), "{route} was not sent: {routes:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
