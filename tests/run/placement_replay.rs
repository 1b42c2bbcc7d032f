//! One implementation of placement: an embedded real run (real mock nodes and service
//! over loopback gRPC/HTTP) records every input its placer handled, with its time; the
//! recorded inputs fed to a new placer built from the trace's header (as the simulator
//! feeds its own) give exactly the same outputs: the node of every Create, every retry,
//! every answer and its status.

use std::io::BufReader;
use std::time::Duration;

use stampede::placement::{replay, Input, Output, TraceLine};

use crate::support::inline_run;
use inline_run::run_inline_with;

/// Four nodes admitting two creates each at a time, a tenth of their creates failing
/// with UNAVAILABLE, syncing every 300 ms, deletes after ~0.5 s: the trace holds
/// ResourceExhausted retries, excluded nodes, syncs and deletes, not just first picks.
const PROFILE: &str = "name: replay
seed: 41
cluster:
  nodes: 4
  node:
    cpu_count: 8
    max_starting: 2
    create_latency: {dist: uniform, min: 5ms, max: 30ms}
    baseline_vcpu: {min: 0, max: 6}
placement:
  embedded:
    accounting: optimistic
    sync_interval: 300ms
    request_timeout: 20s
workload:
  shape:
    rate: {per_second: 60, duration: 3s}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 60s}
  lifetime: {dist: uniform, min: 200ms, max: 800ms}
  max_in_flight: 64
collect:
  interval: 500ms
chaos:
  - at: 500ms
    fault: errors
    nodes: {fraction: 0.5}
    duration: 2s
    params: {probability: 0.1, code: unavailable}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_real_run_replays_to_the_same_decisions() {
    let (dir, out) = run_inline_with("replay", PROFILE, Duration::from_secs(90), |d, o| {
        o.placement_trace = Some(d.join("trace"));
    })
    .await;
    assert!(!out.report.incomplete, "{:?}", out.report.incomplete_reason);
    let run = &out.report.runs[0];
    let trace = dir
        .path()
        .join("trace")
        .join(format!("{}.jsonl", run.label));
    let text = std::fs::read_to_string(&trace).expect("the run wrote its placement trace");

    // What the trace holds: it must exercise more than first picks.
    let lines: Vec<TraceLine> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a trace line"))
        .collect();
    let count = |f: &dyn Fn(&TraceLine) -> bool| lines.iter().filter(|l| f(l)).count();
    let creates = count(&|l| {
        matches!(
            l,
            TraceLine::Input {
                input: Input::Create { .. },
                ..
            }
        )
    });
    let retries =
        count(&|l| matches!(l, TraceLine::Output(Output::SendCreate { retry: true, .. })));
    let syncs = count(&|l| {
        matches!(
            l,
            TraceLine::Input {
                input: Input::Synced { .. },
                ..
            }
        )
    });
    let deletes = count(&|l| {
        matches!(
            l,
            TraceLine::Input {
                input: Input::DeleteEnded { .. },
                ..
            }
        )
    });
    let answers = count(&|l| matches!(l, TraceLine::Output(Output::Answer(_))));
    eprintln!(
        "trace: {} lines, {creates} creates, {retries} retries, {syncs} syncs, {deletes} deletes, \
         {answers} answers; run: {} ok, {} retries",
        lines.len(),
        run.ok,
        run.retries
    );
    assert_eq!(
        creates as u64, run.requests,
        "every request reached the placer"
    );
    assert_eq!(answers, creates, "every request was answered");
    assert!(retries > 0, "the trace holds retries");
    assert!(syncs > 4, "the trace holds syncs");
    assert!(deletes > 0, "the trace holds deletes");

    let r = replay(BufReader::new(text.as_bytes())).expect("the trace replays");
    assert!(r.identical(), "first difference: {:?}", r.first_mismatch);
    assert_eq!(r.answers, answers);
    assert!(r.decisions >= creates);

    // The replay can fail: a trace whose recorded decision was changed is caught.
    let tampered = text.replacen("\"retry\":true", "\"retry\":false", 1);
    let t = replay(BufReader::new(tampered.as_bytes())).expect("still a trace");
    assert!(!t.identical(), "a changed output must be found");
}
