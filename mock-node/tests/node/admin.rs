//! The admin endpoint: refusals, authentication, Prometheus text.

use crate::support as common;

use common::*;
use mock_node::fleet::{self, FleetError, FleetOptions};
use serde_json::json;

#[tokio::test]
async fn admin_rejects_bad_faults_with_400() {
    let f = fleet_with(1, |_| {}).await;
    for body in [
        json!({"kind": "explode", "nodes": ["node-00"]}),
        json!({"kind": "kill", "nodes": ["node-77"]}),
        json!({"kind": "kill", "nodes": []}),
        json!({"kind": "slow", "nodes": ["node-00"]}),
        json!({"kind": "errors", "nodes": ["node-00"], "probability": 2.0}),
        json!({"kind": "status", "nodes": ["node-00"], "status": "sleepy"}),
        json!({"kind": "kill", "nodes": ["node-00"], "duration": "soon"}),
    ] {
        let (status, v) = post_fault(&f, body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
    let (_, v) = post_fault(&f, json!({"kind": "kill", "nodes": ["node-77"]})).await;
    assert!(v["error"].as_str().unwrap_or("").contains("node-77"));
    assert_eq!(heal(&f, 999).await, 404);
    let r = http()
        .delete(format!("{}/faults/abc", f.admin_url()))
        .send()
        .await
        .expect("admin");
    assert_eq!(r.status().as_u16(), 404);
    f.shutdown().await;
}

#[tokio::test]
async fn admin_token_is_required_when_set_and_for_non_loopback() {
    let cfg = mock_node::config::ClusterConfig {
        nodes: 1,
        ..Default::default()
    };
    let exposed = FleetOptions {
        admin_addr: "0.0.0.0:0".parse().expect("addr"),
        ..Default::default()
    };
    let e = fleet::start(cfg.clone(), exposed)
        .await
        .expect_err("refused");
    assert!(matches!(e, FleetError::AdminNotLoopback(_)), "{e}");

    let opts = FleetOptions {
        admin_token: Some(stampede_http_kit::Secret::new("s3cret")),
        ..Default::default()
    };
    let f = fleet::start(cfg, opts).await.expect("starts");
    let url = format!("{}/nodes", f.admin_url());
    let r = http().get(&url).send().await.expect("admin");
    assert_eq!(r.status().as_u16(), 401);
    let r = http()
        .get(&url)
        .bearer_auth("wrong")
        .send()
        .await
        .expect("admin");
    assert_eq!(r.status().as_u16(), 401);
    let r = http()
        .get(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .expect("admin");
    assert_eq!(r.status().as_u16(), 200);
    f.shutdown().await;
}

#[tokio::test]
async fn metrics_endpoint_labels_every_node() {
    let f = fleet_with(3, |_| {}).await;
    let (mut sb, _) = clients(f.nodes()[2].addr).await;
    sb.create(create("a", 1, 1)).await.expect("create");
    let text = http()
        .get(format!("{}/metrics", f.admin_url()))
        .send()
        .await
        .expect("admin")
        .text()
        .await
        .expect("text");
    assert!(
        text.contains("mock_node_sandboxes{node=\"node-02\"} 1"),
        "{text}"
    );
    assert!(text.contains("mock_node_sandboxes{node=\"node-00\"} 0"));
    let health = http()
        .get(format!("{}/health", f.admin_url()))
        .send()
        .await
        .expect("admin");
    assert_eq!(health.status().as_u16(), 200);
    f.shutdown().await;
}

/// `GET /faults` over HTTP: the status and the body, whatever it is.
async fn list_faults(f: &mock_node::fleet::FleetHandle) -> (u16, String) {
    let r = http()
        .get(format!("{}/faults", f.admin_url()))
        .send()
        .await
        .expect("admin answers GET /faults");
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

#[tokio::test]
async fn fault_duration_overflowing_the_clock_is_400_not_a_handler_panic() {
    // `now + 18446744073709551615s` overflowed and panicked the handler.
    let f = fleet_with(1, |_| {}).await;
    for duration in ["18446744073709551615s", "9223372036854775807s"] {
        let (status, v) = post_fault(
            &f,
            json!({"kind": "hang", "nodes": ["node-00"], "duration": duration}),
        )
        .await;
        assert_eq!(status, 400, "{duration}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|m| m.contains("duration")),
            "{v}"
        );
    }
    let (status, body) = list_faults(&f).await;
    assert_eq!(status, 200, "{body}");
    f.shutdown().await;
}

#[tokio::test]
async fn fault_duration_8000y_is_400_and_get_faults_keeps_answering() {
    // "8000y" was accepted with 201, after which every GET /faults panicked
    // (an expiry past year 9999 cannot be written as RFC 3339), even once deleted.
    let f = fleet_with(1, |_| {}).await;
    let (status, v) = post_fault(
        &f,
        json!({"kind": "hang", "nodes": ["node-00"], "duration": "8000y"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    let msg = v["error"].as_str().unwrap_or("");
    assert!(msg.contains("duration") && msg.contains("at most"), "{v}");
    let (status, v) = post_fault(
        &f,
        json!({"kind": "slow", "nodes": ["node-00"], "latency": "8000y"}),
    )
    .await;
    assert_eq!(status, 400, "latency past the ceiling: {v}");
    let (status, body) = list_faults(&f).await;
    assert_eq!(status, 200, "{body}");
    // The ceiling itself is accepted, and listing it still works.
    let max = humantime::format_duration(mock_node::MAX_FAULT_DURATION).to_string();
    let id = fault(
        &f,
        json!({"kind": "hang", "nodes": ["node-00"], "duration": max}),
    )
    .await;
    let (status, body) = list_faults(&f).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(heal(&f, id).await, 204);
    let (status, body) = list_faults(&f).await;
    assert_eq!(status, 200, "{body}");
    f.shutdown().await;
}

#[tokio::test]
async fn fault_request_with_an_unknown_field_is_400_naming_it() {
    // A misspelt field (`durration`) was silently ignored, so the fault never healed.
    let f = fleet_with(1, |_| {}).await;
    for (body, field) in [
        (
            json!({"kind": "hang", "nodes": ["node-00"], "durration": "1s"}),
            "durration",
        ),
        (
            json!({"kind": "slow", "nodes": ["node-00"], "latency": "1ms", "extra": {"a": 1}}),
            "extra",
        ),
    ] {
        let (status, v) = post_fault(&f, body.clone()).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|m| m.contains(field)),
            "error names `{field}`: {v}"
        );
    }
    let (_, body) = list_faults(&f).await;
    let listed: mock_node::api::FaultsResponse = serde_json::from_str(&body).expect("json");
    assert!(listed.faults.is_empty(), "nothing applied: {body}");
    f.shutdown().await;
}

#[tokio::test]
async fn fault_book_is_bounded_healed_faults_forgotten_and_active_ones_capped() {
    // No unbounded growth: every POST used to stay listed forever.
    use mock_node::api::{FaultKind, FaultRequest, FaultsResponse};
    use mock_node::{MAX_ACTIVE_FAULTS, MAX_HEALED_FAULTS_KEPT};
    let f = fleet_with(1, |_| {}).await;
    let req = |kind| FaultRequest {
        kind,
        nodes: vec!["node-00".into()],
        duration: None,
    };
    let extra = 10;
    for _ in 0..MAX_HEALED_FAULTS_KEPT + extra {
        let id = f.apply_fault(req(FaultKind::Hang)).await.expect("applied");
        f.heal_fault(id).await.expect("healed");
    }
    let listed = |body: String| -> FaultsResponse { serde_json::from_str(&body).expect("json") };
    let (status, body) = list_faults(&f).await;
    assert_eq!(status, 200);
    let book = listed(body);
    assert_eq!(book.faults.len(), MAX_HEALED_FAULTS_KEPT);
    assert_eq!(
        book.faults[0].id,
        extra as u64 + 1,
        "the oldest are forgotten"
    );
    assert_eq!(heal(&f, 1).await, 404);

    let mut last = 0;
    for _ in 0..MAX_ACTIVE_FAULTS {
        last = f
            .apply_fault(req(FaultKind::Exhaust))
            .await
            .expect("applied");
    }
    let (status, v) = post_fault(&f, json!({"kind": "exhaust", "nodes": ["node-00"]})).await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap_or("").contains("in force"),
        "{v}"
    );
    assert_eq!(heal(&f, last).await, 204);
    fault(&f, json!({"kind": "exhaust", "nodes": ["node-00"]})).await;
    let (_, body) = list_faults(&f).await;
    let book = listed(body);
    assert_eq!(
        book.faults.iter().filter(|x| x.active).count(),
        MAX_ACTIVE_FAULTS
    );
    assert!(book.faults.len() <= MAX_ACTIVE_FAULTS + MAX_HEALED_FAULTS_KEPT);
    f.shutdown().await;
}

#[tokio::test]
async fn fault_naming_a_node_twice_targets_it_once() {
    let f = fleet_with(2, |_| {}).await;
    let id = fault(
        &f,
        json!({"kind": "hang", "nodes": ["node-01", "node-00", "node-01"]}),
    )
    .await;
    let (_, body) = list_faults(&f).await;
    let book: mock_node::api::FaultsResponse = serde_json::from_str(&body).expect("json");
    assert_eq!(book.faults[0].id, id);
    assert_eq!(book.faults[0].nodes, vec!["node-01", "node-00"]);
    f.shutdown().await;
}

/// An empty admin token was read as "no token" (`--admin-token ""`) or let an empty
/// `Bearer` in; it is refused at start, whichever way it is given.
#[tokio::test]
async fn blank_admin_token_is_refused_at_start() {
    let cfg = mock_node::config::ClusterConfig {
        nodes: 1,
        ..Default::default()
    };
    for blank in ["", "   ", "\t"] {
        let opts = FleetOptions {
            admin_token: Some(stampede_http_kit::Secret::new(blank)),
            ..Default::default()
        };
        let e = fleet::start(cfg.clone(), opts)
            .await
            .expect_err("a blank token is refused");
        assert!(
            matches!(e, FleetError::BlankAdminToken(_)),
            "{blank:?}: {e}"
        );
        assert!(e.to_string().contains("empty"), "{e}");
    }
    let flag: [&str; 2] = ["--admin-token", ""];
    for (args, env) in [(&flag[..], ""), (&[][..], " ")] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mock-node"));
        cmd.args(["--nodes", "1"]).args(args);
        if env.is_empty() {
            cmd.env_remove("MOCK_NODE_ADMIN_TOKEN");
        } else {
            cmd.env("MOCK_NODE_ADMIN_TOKEN", env);
        }
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .expect("mock-node runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} refused: {stderr}");
        assert!(stderr.contains("admin token is empty"), "{stderr}");
    }
}

/// Fault kinds are kebab-case (`freeze-metrics`) and so are error codes
/// (`resource-exhausted`); the snake_case codes of earlier versions are still accepted.
#[tokio::test]
async fn error_codes_are_kebab_case_like_fault_kinds_and_snake_case_still_reads() {
    let f = fleet_with(2, |_| {}).await;
    for (node, code) in [
        ("node-00", "resource-exhausted"),
        ("node-01", "deadline_exceeded"),
    ] {
        let (status, v) = post_fault(
            &f,
            json!({"kind": "errors", "nodes": [node], "probability": 1.0, "code": code}),
        )
        .await;
        assert_eq!(status, 201, "{code}: {v}");
    }
    let (status, body) = list_faults(&f).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"resource-exhausted\"") && body.contains("\"deadline-exceeded\""),
        "codes are listed in kebab-case: {body}"
    );
    assert!(!body.contains("_exceeded"), "{body}");
    let (mut sb, _) = clients(f.nodes()[0].addr).await;
    let r = sb.create(create("sbx-1", 1, 512)).await;
    assert_eq!(
        r.expect_err("injected").code(),
        tonic::Code::ResourceExhausted
    );
    let (status, v) = post_fault(
        &f,
        json!({"kind": "errors", "nodes": ["node-00"], "probability": 1.0, "code": "resource exhausted"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|m| m.contains("resource-exhausted")),
        "the error lists the kebab-case names: {v}"
    );
    f.shutdown().await;
}

/// A POST whose body never came held its admin connection for ever; enough of them
/// exhaust the descriptors. Each is answered 408 and closed at the body deadline, and
/// the endpoint keeps answering others meanwhile.
#[tokio::test]
async fn stalled_admin_bodies_are_cut_at_the_deadline_and_others_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let f = fleet_with(1, |_| {}).await;
    let addr = f.admin_url().trim_start_matches("http://").to_string();
    let mut stalled = Vec::new();
    for _ in 0..50 {
        let mut c = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        c.write_all(
            b"POST /faults HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"kind\":",
        )
        .await
        .expect("write");
        stalled.push(c);
    }
    let t0 = std::time::Instant::now();
    let (status, body) = list_faults(&f).await;
    assert_eq!(status, 200, "served during the flood: {body}");
    let limit = mock_node::ADMIN_LIMITS.body_read + std::time::Duration::from_secs(5);
    for (i, c) in stalled.iter_mut().enumerate() {
        let mut seen = Vec::new();
        let closed = tokio::time::timeout_at(
            tokio::time::Instant::from_std(t0 + limit),
            c.read_to_end(&mut seen),
        )
        .await;
        assert!(
            closed.is_ok(),
            "stalled connection {i} still open after {limit:?}"
        );
        let text = String::from_utf8_lossy(&seen);
        assert!(text.starts_with("HTTP/1.1 408"), "connection {i}: {text}");
    }
    f.shutdown().await;
}

/// 1,100 silent connections locked every client out of the admin API, the harness's
/// fault and heal channel. With 2,000 silent connections and 2,000 stalled bodies held
/// against it, a normal request is answered within a second, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_stalled_clients_does_not_keep_the_admin_api_from_answering() {
    let f = fleet_with(1, |_| {}).await;
    crate::flood::withstands(
        f.admin_addr(),
        b"POST /faults HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"kind\":",
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    )
    .await;
    f.shutdown().await;
}
