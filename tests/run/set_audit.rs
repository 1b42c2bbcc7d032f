//! One rule decides whether a run keeps its client ledger for the set audit, for a
//! real run and a simulation alike: a `lost` check named only under `checks.per_mode`
//! runs the set audit in both (the real run used to ignore `per_mode` here).

use crate::support::inline_run;

use std::time::Duration;

use inline_run::run_inline;
use stampede::aggregate::needs_set_audit;
use stampede::profile::{parse, Source};
use stampede::report::RunResult;
use stampede::sim::simulate_profile;

const PROFILE: &str = "name: per-mode-lost
seed: 9
cluster:
  nodes: 2
placement:
  embedded:
    accounting: optimistic
    best_of_k: {k: 2}
    sync_interval: 2s
workload:
  shape:
    burst: {count: 6}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 60s}
collect:
  interval: 250ms
checks:
  per_mode:
    optimistic:
      lost: {max: 0}
";

fn checked(r: &RunResult) -> (u64, u64) {
    let c = r.set_audit.as_ref().expect("the set audit ran");
    (c.lost.count, c.duplicated.count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_mode_lost_check_runs_the_set_audit_in_a_run_and_in_a_sim() {
    let profile = parse(&Source::inline("per-mode-lost", PROFILE)).expect("profile parses");
    assert!(profile.chaos.is_empty() && profile.checks.lost.is_none());
    assert!(needs_set_audit(&profile));

    let sim = simulate_profile(&profile).expect("simulates");
    let sim = sim.runs.first().expect("one simulated run");
    assert_eq!(sim.ok, 6, "{:?}", sim.statuses);
    assert_eq!(checked(sim), (0, 0));

    let (_dir, out) = run_inline("per-mode-lost", PROFILE, Duration::from_secs(60)).await;
    assert!(!out.report.incomplete, "{:?}", out.report.incomplete_reason);
    let real = out.report.runs.first().expect("one real run");
    assert_eq!(real.ok, 6, "{:?}", real.statuses);
    assert_eq!(checked(real), (0, 0));
}

/// Two nodes, a steady trickle of 1 s sandboxes, both nodes restarted before the end;
/// `EVICTOR` says whether the embedded service evicts.
const EXPIRING: &str = "name: expiring
seed: 12
cluster:
  nodes: 2
  node: {cpu_count: 16, create_latency: {dist: constant, value: 1ms}}
placement:
  embedded:
    accounting: optimistic
    best_of_k: {k: 2}
    sync_interval: 1s
    request_timeout: 15s
    evictor: EVICTOR
workload:
  shape:
    rate: {per_second: 4, duration: 3s}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 1s}
collect:
  interval: 250ms
chaos:
  - at: 2500ms
    fault: restart
    nodes: [node-00, node-01]
checks:
  lost: {max: 0}
";

/// The set audit forgives only the sandboxes the service's evictor deleted (read from
/// its `/admin/evicted`), not every one past its timeout: without an evictor, the
/// sandboxes the restarts wiped are restart losses though their timeout has passed by
/// the final read; with one, those it evicted first are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_evictors_deletes_are_forgiven_not_every_expired_sandbox() {
    let limit = Duration::from_secs(90);
    let (_d, off) = run_inline("expiring-off", &EXPIRING.replace("EVICTOR", "false"), limit).await;
    let run = &off.report.runs[0];
    let c = run.set_audit.as_ref().expect("the set audit ran");
    assert_eq!((c.lost.count, c.duplicated.count), (0, 0), "{c:?}");
    // Sandboxes created in the first 1.5 s were past their timeout at the restart and
    // at the final read; the old rule forgave them all.
    assert!(
        c.lost_to_node_restart.count >= 2,
        "the wiped sandboxes are reported: {c:?}"
    );

    let (_d, on) = run_inline("expiring-on", &EXPIRING.replace("EVICTOR", "true"), limit).await;
    let run = &on.report.runs[0];
    let c = run.set_audit.as_ref().expect("the set audit ran");
    assert_eq!((c.lost.count, c.duplicated.count), (0, 0), "{c:?}");
    let created = run.ok;
    assert!(
        c.lost_to_node_restart.count < created,
        "the evicted ones are forgiven: {c:?} of {created} created"
    );
}

/// The set audit asked every API for `GET /admin/evicted`, a route only stampede's
/// service has: against one that answers 404 the evictions are not known (`None`),
/// not an error; stampede's own list is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_without_admin_evicted_leaves_the_evictions_not_known() {
    use axum::routing::get;
    use stampede::api_key::ApiKey;
    use stampede::audit::read_evicted;

    async fn serve(app: axum::Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }
    let without = serve(axum::Router::new().route("/health", get(|| async { "ok" }))).await;
    let with = serve(axum::Router::new().route(
        "/admin/evicted",
        get(|| async { axum::Json(serde_json::json!({"sandboxIDs": ["sb-1"]})) }),
    ))
    .await;
    let client = reqwest::Client::new();
    let token = ApiKey::new("admin-token");
    let read = |url: String| {
        let (client, token) = (client.clone(), token.clone());
        async move { read_evicted(&client, &[url], Some(&token)).await }
    };
    assert_eq!(read(without).await.expect("a 404 is an answer"), None);
    assert_eq!(
        read(with).await.expect("listed"),
        Some(vec!["sb-1".to_string()])
    );
}
