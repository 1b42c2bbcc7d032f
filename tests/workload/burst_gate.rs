//! The burst's start gate releases requests, not TCP handshakes: every connection a
//! burst uses is open and warm before the gate, and the embedded service records when
//! the creates arrived (server side) next to the client's send spread.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::support::bare_target;
use crate::support::inline_run;
use bare_target::Seen;
use inline_run::run_inline;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_connections_are_open_before_the_gate_on_every_target() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let seen_a = Arc::new(Mutex::new(Seen::default()));
    let seen_b = Arc::new(Mutex::new(Seen::default()));
    let stop = CancellationToken::new();
    let targets = vec![
        bare_target::serve(seen_a.clone(), stop.clone(), None).await,
        bare_target::serve(seen_b.clone(), stop.clone(), None).await,
    ];
    let count = 40;
    let run = bare_target::burst(targets, count);
    let (out, gate) = bare_target::run_all_created(run, &stop).await;
    // Client side: the target's accept loop may be polled after the gate on a busy
    // machine, so when it accepted says nothing about when the connection was open.
    let last = out.last_connected.expect("connections were opened");
    assert!(last < gate, "a connection was opened after the gate");
    let mut creates = 0;
    for seen in [&seen_a, &seen_b] {
        let s = seen.lock().unwrap();
        // Round-robin over two targets: each got half of the burst.
        assert_eq!(s.creates.len(), count / 2, "{s:?}");
        creates += s.creates.len();
        for &(conn, warm) in &s.creates {
            assert!(warm, "a create was the first request of connection {conn}");
        }
        // Held by its final byte: no create is whole at the target before the gate.
        assert_eq!(s.bodies_complete.len(), count / 2);
        for at in &s.bodies_complete {
            assert!(*at >= gate, "a create's body was complete before the gate");
        }
    }
    assert_eq!(creates, count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_closes_after_the_warm_up_gets_a_fresh_connection_before_the_gate() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = CancellationToken::new();
    let url = bare_target::serve_with(seen.clone(), stop.clone(), None, true).await;
    let count = 10;
    let run = bare_target::burst(vec![url], count);
    let (out, gate) = bare_target::run_all_created(run, &stop).await;
    let s = seen.lock().unwrap();
    // One connection warmed and closed, one fresh for the create, per user.
    assert_eq!(s.accepts.len(), 2 * count, "{s:?}");
    let last = out.last_connected.expect("connections were opened");
    assert!(last < gate, "a connection opened after the gate");
    assert!(s.bodies_complete.iter().all(|at| *at >= gate));
}

const PROFILE: &str = r#"
name: burst-arrivals
seed: 14
cluster:
  nodes: 3
  node: {max_sandboxes: 100, max_starting: 0}
placement:
  embedded:
    accounting: reconciled
    sync_interval: 20s
workload:
  shape:
    burst: {count: 30}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 60s}
collect:
  interval: 1s
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_burst_reports_the_server_side_arrival_spread() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (_dir, out) = run_inline("burst-gate", PROFILE, Duration::from_secs(60)).await;
    let run = &out.report.runs[0];
    assert_eq!(run.ok, 30, "{:?}", run.statuses);
    assert_eq!(run.send.server_arrivals, Some(30));
    // Every arrival is the kernel's receive time of the create's last byte.
    assert_eq!(run.send.server_arrivals_kernel_stamped, Some(30));
    assert!(run.send.burst_release_realtime.is_some(), "{:?}", run.send);
    let server = run.send.server_arrival_spread_ms.expect("server spread");
    let client = run.send.burst_spread_ms.expect("client spread");
    assert!(server.is_finite() && server >= 0.0, "{server}");
    assert!(client.is_finite() && client >= 0.0, "{client}");
    // Both figures reach report.json.
    let json = std::fs::read_to_string(out.dir.join("report.json")).unwrap();
    assert!(json.contains("\"server_arrival_spread_ms\""), "{json}");
}
