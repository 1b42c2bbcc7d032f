//! E2B's retry storm on the real wire: a node that refuses (`max_starting: 1`) makes
//! the embedded service retry ResourceExhausted once per refusal round trip (E2B's own
//! time per refused retry, `rpc_round_trip`), and the run's report carries the refusals
//! per second and per node; `retry_backoff` spaces the retries out further.

use std::time::Duration;

use stampede::report::RunResult;

use crate::support::inline_run;
use inline_run::run_inline;

const BURST: u64 = 8;

/// One node admitting one create at a time, each taking 100 ms: a burst of 8 waits in
/// line, refused with ResourceExhausted while it waits.
fn profile(backoff: Option<&str>) -> String {
    let backoff = backoff.map_or(String::new(), |b| format!("    retry_backoff: {b}\n"));
    format!(
        "name: retry-storm
seed: 5
cluster:
  nodes: 1
  node:
    max_starting: 1
    create_latency: {{dist: constant, value: 100ms}}
placement:
  embedded:
    accounting: optimistic
    best_of_k: {{k: 1}}
    sync_interval: 20s
{backoff}workload:
  shape:
    burst: {{count: {BURST}}}
  sandbox: {{template: base, vcpu: 1, ram_mb: 256, timeout: 60s}}
collect:
  interval: 250ms
"
    )
}

async fn run(name: &str, backoff: Option<&str>) -> RunResult {
    let (_dir, out) = run_inline(
        &format!("storm-{name}"),
        &profile(backoff),
        Duration::from_secs(60),
    )
    .await;
    assert!(!out.report.incomplete, "{:?}", out.report.incomplete_reason);
    out.report.runs.into_iter().next().expect("one run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusing_node_makes_a_storm_and_a_backoff_thins_it() {
    let storm = run("none", None).await;
    assert_eq!(storm.ok, BURST, "{:?}", storm.statuses);
    let s = storm
        .retry_storm
        .as_ref()
        .expect("a real run reports its retry storm");
    assert!(s.peak_per_second > 0, "{s:?}");
    assert_eq!(s.node_total.len(), 1);
    // Binned where the refusal counter counts, from the gate on (nothing before it).
    assert_eq!(s.per_second.iter().sum::<u64>(), storm.refusals, "{s:?}");
    assert_eq!(s.node_total[0], storm.refusals);

    let backoff = Duration::from_millis(100);
    let thin = run("backoff", Some("100ms")).await;
    assert_eq!(thin.ok, BURST, "{:?}", thin.statuses);
    // Each request waits at most its latency, so with a pause of `backoff` after every
    // refusal it is refused at most latency / backoff + 1 times.
    let worst = Duration::from_secs_f64(thin.latency.max_ms / 1000.0);
    let bound = BURST * (worst.as_secs_f64() / backoff.as_secs_f64()).ceil() as u64 + BURST;
    eprintln!(
        "no backoff: {} refusals (peak {}/s); 100 ms backoff: {} (bound {bound})",
        storm.refusals, s.peak_per_second, thin.refusals
    );
    assert!(
        thin.refusals <= bound,
        "{} refusals with a 100 ms backoff, at most {bound} possible",
        thin.refusals
    );
    assert!(
        storm.refusals > thin.refusals,
        "no backoff: {} refusals, 100 ms backoff: {}",
        storm.refusals,
        thin.refusals
    );
}
