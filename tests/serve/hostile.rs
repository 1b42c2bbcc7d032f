//! `stampede serve` against hostile clients: sizes no node can hold, metadata
//! beyond its caps, and connections that never finish a request head or sit idle.

use crate::support::serve as serve_common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::AccountingMode;
use stampede::serve::{
    NodeTarget, ServeConfig, MAX_METADATA_KEYS, MAX_METADATA_KEY_BYTES, MAX_METADATA_VALUE_BYTES,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A create that a node would refuse forever must not be retried until the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_count_u32_max_is_a_400_not_70_s_of_refused_creates() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    let t0 = Instant::now();
    for body in [
        json!({"templateID": "base", "cpuCount": 4_294_967_295u64}),
        // Within E2B's int32 range but above every node (16 vCPU, 64 GiB).
        json!({"templateID": "base", "cpuCount": 17}),
        json!({"templateID": "base", "memoryMB": 65_537}),
    ] {
        let (status, err) = rig.create(body.clone()).await;
        assert_eq!(status, 400, "{body} -> {err}");
        assert_eq!(err["code"], 400);
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{err}"
        );
    }
    // serve_config's request deadline is 10 s: a retry loop would have used it up.
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let metrics = rig
        .http
        .get(rig.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("stampede_serve_create_refusals_total{accounting=\"optimistic\"} 0"),
        "no node was asked: {metrics}"
    );
    // The largest size a node reports still places.
    let (status, body) = rig
        .create(json!({"templateID": "base", "cpuCount": 16, "memoryMB": 65_536}))
        .await;
    assert_eq!(status, 201, "{body}");
    rig.stop().await;
}

/// With no node known yet there is nothing to judge a size against: normal placement
/// answers (no node to place on), not a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_check_falls_through_when_no_node_has_reported() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let cfg = ServeConfig {
        request_timeout: Duration::from_secs(3),
        ..serve_config(AccountingMode::Optimistic)
    };
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let nodes = vec![NodeTarget {
        id: Some("node-x".into()),
        addr: addr.to_string(),
    }];
    let svc = stampede::serve::start(cfg, nodes, listen)
        .await
        .expect("service starts");
    let r = reqwest::Client::new()
        .post(format!("{}/sandboxes", svc.url()))
        .header("X-API-Key", stampede::serve::DEFAULT_API_KEY)
        .json(&json!({"templateID": "base", "cpuCount": 4096}))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("an answer");
    let status = r.status().as_u16();
    assert_ne!(status, 400, "no node known: the size is not judged");
    assert!(status >= 500, "{status}");
    svc.shutdown().await;
}

/// 40 creates with 2 MB of metadata each took the service from 19 to 102 MB RSS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_up_to_the_body_limit_is_refused_with_a_400() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    let keys = |n: usize, value: &str| -> Value {
        (0..n)
            .map(|i| (format!("k{i}"), Value::String(value.to_string())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let long_key: Value = json!({ "k".repeat(MAX_METADATA_KEY_BYTES + 1): "v" });
    for (what, metadata) in [
        ("too many keys", keys(MAX_METADATA_KEYS + 1, "v")),
        ("key too long", long_key),
        (
            "value too long",
            keys(1, &"v".repeat(MAX_METADATA_VALUE_BYTES + 1)),
        ),
        // Each value within its cap, the whole beyond the total cap.
        (
            "too many bytes",
            keys(8, &"v".repeat(MAX_METADATA_VALUE_BYTES)),
        ),
        // What the finding sent: one value of almost 2 MB.
        ("near the body limit", keys(1, &"v".repeat(2_000_000))),
    ] {
        let (status, err) = rig
            .create(json!({"templateID": "base", "metadata": metadata}))
            .await;
        assert_eq!(status, 400, "{what}: {err}");
        assert!(
            err["message"]
                .as_str()
                .is_some_and(|m| m.contains("metadata")),
            "{what}: {err}"
        );
    }
    let (status, body) = rig
        .create(json!({"templateID": "base", "metadata": keys(MAX_METADATA_KEYS, "ok")}))
        .await;
    assert_eq!(status, 201, "metadata within the caps: {body}");
    let (_, listed) = rig.get_json("/sandboxes").await;
    let kept = listed.as_array().expect("a list");
    assert_eq!(kept.len(), 1, "only the accepted sandbox is kept: {listed}");
    rig.stop().await;
}

async fn rig_with_timeouts(header_read: Duration, idle: Duration) -> Rig {
    let cfg = ServeConfig {
        header_read_timeout: header_read,
        idle_timeout: idle,
        ..serve_config(AccountingMode::Optimistic)
    };
    Rig::start(cluster(1, &[]), cfg).await
}

/// Reads until the server closes the connection (EOF or reset); `Err` with what was
/// read if it is still open at `deadline`.
async fn closed_by_server(conn: &mut TcpStream, within: Duration) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + within;
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(String::from_utf8_lossy(&seen).into_owned()),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Err(_) => return Err(String::from_utf8_lossy(&seen).into_owned()),
        }
    }
}

/// A partial request head stayed open for 45 s; 500 slowloris connections for 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_header_connections_are_closed_at_the_header_read_timeout() {
    let rig = rig_with_timeouts(Duration::from_millis(500), Duration::from_secs(60)).await;
    let addr = rig.svc.addr();
    let mut conns = Vec::new();
    for i in 0..20 {
        let mut c = TcpStream::connect(addr).await.expect("connect");
        if i % 2 == 0 {
            // A head that never ends.
            c.write_all(b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await
                .unwrap();
        }
        // Odd ones send nothing at all.
        conns.push(c);
    }
    let t0 = Instant::now();
    for (i, c) in conns.iter_mut().enumerate() {
        let closed = closed_by_server(c, Duration::from_secs(10)).await;
        assert!(closed.is_ok(), "connection {i} still open: {closed:?}");
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
    // The service still answers.
    let health = rig.http.get(rig.url("/health")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 204);
    rig.stop().await;
}

/// A kept-alive connection with nothing in progress is closed at the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connection_is_closed_at_the_idle_timeout() {
    let rig = rig_with_timeouts(Duration::from_secs(30), Duration::from_millis(500)).await;
    let mut c = TcpStream::connect(rig.svc.addr()).await.expect("connect");
    c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = closed_by_server(&mut c, Duration::from_secs(10)).await;
    let text = answer.expect("closed within 10 s, well before the 30 s header-read timeout");
    assert!(text.starts_with("HTTP/1.1 204"), "answered first: {text}");
    rig.stop().await;
}

/// `stampede serve` with these flags, the environment's secrets removed; (exit code,
/// stderr). Each case is refused before the service binds or dials anything.
fn serve_refused(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stampede"));
    cmd.arg("serve")
        .args(["--node", "127.0.0.1:1"])
        .args(args)
        .env_remove("STAMPEDE_API_KEY")
        .env_remove("STAMPEDE_ADMIN_TOKEN")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("stampede runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return (status.code(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "still running after 30 s: it started".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An empty admin token or API key let an empty header in (`GET /nodes`,
/// `/admin/counters`, drains); the published default key was accepted on any address.
#[test]
fn blank_secrets_and_the_default_key_off_loopback_are_refused_at_start() {
    /// Flags, environment, and what the refusal names.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (&["--api-key", ""], &[], "API key"),
        (&[], &[("STAMPEDE_API_KEY", "  ")], "API key"),
        (&["--admin-token", ""], &[], "admin token"),
        (&[], &[("STAMPEDE_ADMIN_TOKEN", "")], "admin token"),
        (&["--listen", "0.0.0.0:0"], &[], "--api-key"),
    ];
    for (args, env, names) in cases {
        let (code, err) = serve_refused(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {err}");
        assert!(err.contains(names), "{args:?} {env:?} names {names}: {err}");
    }
    let (_, err) = serve_refused(&["--listen", "0.0.0.0:0"], &[]);
    assert!(
        err.contains("not a loopback address") && err.contains("default"),
        "{err}"
    );
}

/// The same refusal for an embedded instance: an empty admin token never reaches the
/// routes, and an empty API key is not a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_service_refuses_blank_secrets() {
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    for cfg in [
        ServeConfig {
            admin_token: Some(stampede_http_kit::Secret::new("")),
            ..serve_config(AccountingMode::Optimistic)
        },
        ServeConfig {
            api_key: stampede_http_kit::Secret::new(" \t"),
            ..serve_config(AccountingMode::Optimistic)
        },
    ] {
        let started =
            stampede::serve::start(cfg, vec![NodeTarget::addr("127.0.0.1:1")], listen).await;
        match started {
            Ok(svc) => {
                svc.shutdown().await;
                panic!("a blank secret was accepted");
            }
            Err(e) => assert!(format!("{e:#}").contains("empty"), "{e:#}"),
        }
    }
}

/// A stalled create with the service's key (a wrong key is answered 401 before the
/// body is read): its head and part of its body, the rest never sent.
async fn stalled_create(addr: SocketAddr) -> TcpStream {
    let mut c = TcpStream::connect(addr).await.expect("connect");
    c.write_all(
        b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: e2b_stampede_local_key\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"templateID\":",
    )
    .await
    .expect("write");
    c
}

/// A service with these connection bounds, and `n` stalled creates open on it.
async fn flooded(body_read: Duration, max_connections: usize, n: usize) -> (Rig, Vec<TcpStream>) {
    let cfg = ServeConfig {
        body_read_timeout: body_read,
        max_connections,
        ..serve_config(AccountingMode::Optimistic)
    };
    let rig = Rig::start(cluster(1, &[]), cfg).await;
    let mut stalled = Vec::with_capacity(n);
    for _ in 0..n {
        stalled.push(stalled_create(rig.svc.addr()).await);
    }
    (rig, stalled)
}

/// `GET /health` answered 204; how long it took.
async fn health_took(rig: &Rig) -> Duration {
    let t0 = Instant::now();
    let health = rig
        .http
        .get(rig.url("/health"))
        .send()
        .await
        .expect("health");
    assert_eq!(health.status().as_u16(), 204);
    t0.elapsed()
}

/// Every stalled connection answered 408 and closed within 15 s.
async fn all_cut(stalled: &mut [TcpStream]) {
    for (i, c) in stalled.iter_mut().enumerate() {
        let closed = closed_by_server(c, Duration::from_secs(15)).await;
        let text = closed.unwrap_or_else(|t| panic!("connection {i} still open: {t}"));
        assert!(text.starts_with("HTTP/1.1 408"), "connection {i}: {text}");
    }
}

/// A POST whose body never came held its connection for ever: 1,100 of them exhausted
/// the descriptors and locked every client out. Each is answered 408 and closed at the
/// body deadline, and others are served during the flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_are_cut_at_the_body_deadline_and_others_served_meanwhile() {
    let body_read = Duration::from_secs(1);
    let (rig, mut stalled) = flooded(body_read, 10_000, 200).await;
    let took = health_took(&rig).await;
    assert!(took < body_read, "served during the flood: {took:?}");
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 201, "a create is served during the flood: {body}");
    all_cut(&mut stalled).await;
    rig.stop().await;
}

/// Past the connection cap, the connection that waited longest on its client is closed
/// to admit a new one: a flood larger than the cap evicts its own connections, a client
/// is served at once, and the process's descriptors stay below the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_beyond_the_connection_cap_evicts_its_own_stalled_connections() {
    let (rig, mut stalled) = flooded(Duration::from_secs(1), 20, 40).await;
    let took = health_took(&rig).await;
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Each stalled connection ends: evicted with no answer, or 408 at its deadline.
    for (i, c) in stalled.iter_mut().enumerate() {
        let closed = closed_by_server(c, Duration::from_secs(15)).await;
        let text = closed.unwrap_or_else(|t| panic!("connection {i} still open: {t}"));
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 408"),
            "connection {i}: {text}"
        );
    }
    rig.stop().await;
}

/// 768 stalled bodies locked every other client out for up to the body deadline (70 s),
/// renewable by reconnecting. With 2,000 silent connections and 2,000 stalled creates
/// held against a service capped at 1,000 connections, a normal request is answered
/// within a second, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_stalled_clients_does_not_keep_the_service_from_answering() {
    let cfg = ServeConfig {
        max_connections: 1_000,
        ..serve_config(AccountingMode::Optimistic)
    };
    let rig = Rig::start(cluster(1, &[]), cfg).await;
    crate::support::flood::withstands(
        rig.svc.addr(),
        b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: e2b_stampede_local_key\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"templateID\":",
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 204",
    )
    .await;
    rig.stop().await;
}
