//! The Nomad-style discovery API over HTTP: what E2B's API reads, faults, bad input.

use crate::support as common;

use std::time::Duration;

use common::*;
use mock_node::fleet::FleetHandle;
use serde_json::{json, Value};

/// `GET {nomad}{path}`: status, headers and body text.
async fn get(f: &FleetHandle, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let r = http()
        .get(format!("{}{path}", f.nomad_url()))
        .send()
        .await
        .expect("Nomad endpoint answers");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.expect("body"))
}

/// The registrations of the default service name.
async fn registrations(f: &FleetHandle) -> Vec<Value> {
    let (status, _, body) = get(f, "/v1/service/stampede-orchestrator").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("JSON list")
}

fn node_ids(regs: &[Value]) -> Vec<String> {
    regs.iter()
        .map(|r| r["NodeID"].as_str().expect("NodeID").to_string())
        .collect()
}

#[tokio::test]
async fn registrations_pair_node_ids_with_names_and_routable_addresses() {
    let f = fleet_with(3, |_| {}).await;
    let (status, h, body) = get(&f, "/v1/service/stampede-orchestrator").await;
    assert_eq!(status, 200);
    for name in [
        "x-nomad-index",
        "x-nomad-lastcontact",
        "x-nomad-knownleader",
    ] {
        assert!(h.contains_key(name), "{name} missing");
    }
    let regs: Vec<Value> = serde_json::from_str(&body).expect("JSON");
    assert_eq!(regs.len(), 3);
    let ids = f.nomad_identities();
    for (r, (ident, ep)) in regs.iter().zip(ids.iter().zip(f.nodes())) {
        assert_eq!(r["NodeID"], ident.node_id.as_str());
        assert_eq!(r["Address"], ep.addr.ip().to_string().as_str());
        assert_eq!(r["Port"], ep.addr.port());
        assert_eq!(r["ServiceName"], "stampede-orchestrator");
        assert_eq!(ident.name, ep.id);
    }
    // The node list pairs each id with the node's name, which its ServiceInfo reports.
    let (status, _, body) = get(&f, "/v1/nodes").await;
    assert_eq!(status, 200);
    let nodes: Vec<Value> = serde_json::from_str(&body).expect("JSON");
    for (n, ep) in nodes.iter().zip(f.nodes()) {
        let (_, mut info) = clients(ep.addr).await;
        let si = info
            .service_info(())
            .await
            .expect("ServiceInfo")
            .into_inner();
        assert_eq!(n["Name"], si.node_id.as_str());
        assert_eq!(n["Status"], "ready");
    }
}

#[tokio::test]
async fn legacy_node_filter_is_answered_faithfully() {
    let f = fleet_with(4, |_| {}).await;
    let q =
        "/v1/nodes?filter=Status%20%3D%3D%20%22ready%22%20and%20NodePool%20%3D%3D%20%22default%22";
    let (status, _, body) = get(&f, q).await;
    assert_eq!(status, 200, "{body}");
    let nodes: Vec<Value> = serde_json::from_str(&body).expect("JSON");
    let ids: Vec<&str> = nodes
        .iter()
        .map(|n| n["ID"].as_str().expect("ID"))
        .collect();
    let regs = registrations(&f).await;
    assert_eq!(ids, node_ids(&regs), "same ids as the registrations");
    // Another pool selects nothing; a prefix selects one node.
    let (_, _, body) = get(&f, "/v1/nodes?filter=NodePool%20%3D%3D%20%22gpu%22").await;
    assert_eq!(body, "[]");
    let (_, _, body) = get(&f, &format!("/v1/nodes?prefix={}", &ids[2][..8])).await;
    let one: Vec<Value> = serde_json::from_str(&body).expect("JSON");
    assert_eq!(one.len(), 1);
    // Template managers: E2B's allocation query gets an empty JSON list, never 0 bytes.
    let (status, h, body) = get(
        &f,
        "/v1/allocations?resources=true&filter=ClientStatus%20%3D%3D%20%22running%22",
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "[]"));
    assert!(h.contains_key("x-nomad-index"));
}

#[tokio::test]
async fn a_killed_node_has_no_registration_while_the_fault_lasts() {
    let f = fleet_with(3, |_| {}).await;
    let before = node_ids(&registrations(&f).await);
    let killed = before[1].clone();
    let id = fault(&f, json!({"kind": "kill", "nodes": ["node-01"]})).await;
    let regs = node_ids(&registrations(&f).await);
    assert_eq!(regs.len(), 2);
    assert!(!regs.contains(&killed), "killed node still registered");
    // Its Nomad node stays ready, as a node whose allocation failed does.
    let (_, _, body) = get(&f, "/v1/nodes").await;
    assert!(body.contains(&killed));
    assert_eq!(heal(&f, id).await, 204);
    assert_eq!(node_ids(&registrations(&f).await), before);

    // A timed kill: gone during (3 s is far longer than one local GET), back after,
    // without anyone healing it.
    fault(
        &f,
        json!({"kind": "kill", "nodes": ["node-02"], "duration": "3s"}),
    )
    .await;
    assert_eq!(registrations(&f).await.len(), 2);
    assert!(
        eventually(Duration::from_secs(15), async || registrations(&f)
            .await
            .len()
            == 3)
        .await,
        "registration back after the fault"
    );
}

#[tokio::test]
async fn a_restart_replaces_the_allocation_and_moves_the_index() {
    let f = fleet_with(2, |_| {}).await;
    let (_, h0, body) = get(&f, "/v1/service/stampede-orchestrator").await;
    let before: Vec<Value> = serde_json::from_str(&body).expect("JSON");
    fault(&f, json!({"kind": "restart", "nodes": ["node-00"]})).await;
    let (_, h1, body) = get(&f, "/v1/service/stampede-orchestrator").await;
    let after: Vec<Value> = serde_json::from_str(&body).expect("JSON");
    assert_eq!(after[0]["NodeID"], before[0]["NodeID"]);
    assert_ne!(after[0]["AllocID"], before[0]["AllocID"]);
    assert_eq!(after[1]["AllocID"], before[1]["AllocID"]);
    let index = |h: &reqwest::header::HeaderMap| -> u64 {
        h["x-nomad-index"]
            .to_str()
            .expect("ascii")
            .parse()
            .expect("number")
    };
    assert!(index(&h1) > index(&h0));
}

/// Bad input gets the answer a Nomad agent gives (`command/agent/http.go`,
/// `service_registration_endpoint.go`, `nomad/state/paginator`):
/// - unknown path: 404, empty body (`handleRootFallthrough`);
/// - unknown service name: 200 `[]` (the RPC's nil list becomes an empty one);
/// - `/v1/service/` with no name: 400 `missing service name`;
/// - more path parts: 400 `invalid URI`; a write method: 405 `Invalid method`;
/// - filter that does not parse: 400 `failed to create result paginator: failed to
///   read filter expression: ...`;
/// - filter naming an unknown field: 400 `failed to read result page: error finding
///   value in datum: ...`;
/// - another region: 500 `No path to region`; bad `index`: 400 `Invalid index`.
///
/// Errors are `text/plain`, as Nomad writes them.
#[tokio::test]
async fn bad_input_is_answered_as_nomad_does() {
    let f = fleet_with(2, |_| {}).await;
    let cases: &[(&str, u16, &str)] = &[
        ("/v1/nope", 404, ""),
        ("/", 404, ""),
        ("/v1/service/orchestrator", 200, "[]"),
        ("/v1/service/", 400, "missing service name"),
        ("/v1/service/a/b/c", 400, "invalid URI"),
        ("/v1/service/a/b", 405, "Invalid method"),
        ("/v1/nodes?index=x", 400, "Invalid index"),
        ("/v1/nodes?wait=soon", 400, "Invalid wait time"),
        ("/v1/nodes?region=mars", 500, "No path to region"),
        (
            "/v1/nodes?filter=Status%20%3D%3D",
            400,
            "failed to create result paginator: failed to read filter expression: ",
        ),
        (
            "/v1/service/stampede-orchestrator?filter=(((",
            400,
            "failed to create result paginator: failed to read filter expression: ",
        ),
        (
            "/v1/nodes?filter=Bogus%20%3D%3D%20%22x%22",
            400,
            "failed to read result page: error finding value in datum: /Bogus",
        ),
        (
            "/v1/allocations?filter=%25%25",
            400,
            "failed to create result paginator: failed to read filter expression: ",
        ),
        (
            "/v1/service/stampede-orchestrator?namespace=prod",
            200,
            "[]",
        ),
    ];
    for &(path, status, prefix) in cases {
        let (got, h, body) = get(&f, path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(body.starts_with(prefix), "{path}: {body:?}");
        if status >= 400 && !body.is_empty() {
            assert_eq!(h["content-type"], "text/plain", "{path}");
        }
    }
    let r = http()
        .post(format!("{}/v1/nodes", f.nomad_url()))
        .send()
        .await
        .expect("answers");
    assert_eq!(r.status().as_u16(), 405);
    // Hostile filters: deep nesting and odd bytes are answered, never a crash.
    for (depth, status) in [(20, 200), (5_000, 400)] {
        let deep = format!(
            "/v1/nodes?filter={}Status%20%3D%3D%20%22ready%22{}",
            "%28".repeat(depth),
            "%29".repeat(depth)
        );
        let (got, _, body) = get(&f, &deep).await;
        assert_eq!(got, status, "depth {depth}: {body}");
    }
    let (status, _, _) = get(&f, "/v1/nodes?filter=%E2%82%AC%00").await;
    assert_eq!(status, 400);
}

/// The HTTP check a Nomad job (or a Kubernetes probe) points at the gRPC port.
#[tokio::test]
async fn health_is_served_over_http_on_the_grpc_port() {
    let f = fleet_with(1, |_| {}).await;
    let url = format!("http://{}/health", f.nodes()[0].addr);
    let r = http().get(&url).send().await.expect("answers");
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.expect("JSON");
    assert_eq!(v["status"], "healthy");
    let id = fault(
        &f,
        json!({"kind": "status", "nodes": ["node-00"], "status": "unhealthy"}),
    )
    .await;
    let r = http().get(&url).send().await.expect("answers");
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(heal(&f, id).await, 204);
    // gRPC on the same port still works.
    let (_, mut info) = clients(f.nodes()[0].addr).await;
    info.service_info(()).await.expect("ServiceInfo");
}

/// The admin API and the registrations show the address callers should dial.
#[tokio::test]
async fn admin_and_registrations_advertise_the_given_ip() {
    let opts = mock_node::fleet::FleetOptions {
        advertise_ip: Some("127.0.0.2".parse().expect("ip")),
        ..Default::default()
    };
    let cfg = mock_node::config::ClusterConfig {
        nodes: 2,
        ..Default::default()
    };
    let f = mock_node::fleet::start(cfg, opts)
        .await
        .expect("fleet starts");
    for n in nodes(&f).await.nodes {
        assert_eq!(n.grpc_addr.ip().to_string(), "127.0.0.2");
    }
    for r in registrations(&f).await {
        assert_eq!(r["Address"], "127.0.0.2");
    }
    let line = mock_node::cli::ready_line(&f);
    assert!(line.contains(&format!("nomad={}", f.nomad_url())), "{line}");
}

/// The Nomad API never closed idle connections: a process holding sockets cut the
/// fleet's discovery. With 2,000 silent connections and 2,000 stalled bodies held
/// against it, a node list is answered within a second, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_stalled_clients_does_not_keep_the_nomad_api_from_answering() {
    let f = fleet_with(2, |_| {}).await;
    let addr = f
        .nomad_url()
        .trim_start_matches("http://")
        .parse()
        .expect("nomad address");
    crate::flood::withstands(
        addr,
        b"PUT /v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
        b"GET /v1/nodes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    )
    .await;
    f.shutdown().await;
}

/// `--nomad-addr 0.0.0.0` was accepted without a token, and the ready line printed
/// `nomad=http://0.0.0.0:PORT`, which no client can dial. A wildcard bind needs the
/// admin token, which the Nomad API then asks for as Nomad does (`X-Nomad-Token`), and
/// the ready line names a reachable address. Only loopback is dialled here.
#[tokio::test]
async fn a_wildcard_nomad_bind_needs_a_token_and_is_announced_reachable() {
    use mock_node::fleet::{self, FleetError, FleetOptions};
    let cfg = mock_node::config::ClusterConfig {
        nodes: 1,
        ..Default::default()
    };
    let mut exposed = FleetOptions::default();
    exposed.nomad.addr = "0.0.0.0:0".parse().expect("addr");
    let e = fleet::start(cfg.clone(), exposed.clone())
        .await
        .expect_err("refused");
    assert!(matches!(e, FleetError::NomadNotLoopback(_)), "{e}");

    exposed.admin_token = Some(stampede_http_kit::Secret::new("s3cret"));
    let f = fleet::start(cfg, exposed).await.expect("starts");
    let line = mock_node::cli::ready_line(&f);
    assert!(!line.contains("0.0.0.0"), "{line}");
    let port = f.nomad_url().rsplit(':').next().expect("port").to_string();
    let url = format!("http://127.0.0.1:{port}/v1/nodes");
    let r = http().get(&url).send().await.expect("nomad");
    assert_eq!(r.status().as_u16(), 403);
    let r = http()
        .get(&url)
        .header("X-Nomad-Token", "s3cret")
        .send()
        .await
        .expect("nomad");
    assert_eq!(r.status().as_u16(), 200);
    f.shutdown().await;
}

/// `filter=Name matches "<pattern>"` for `GET /v1/nodes`, percent-encoded.
fn nodes_filtered(filter: &str) -> String {
    let enc: String = filter
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("/v1/nodes?filter={enc}")
}

/// The status of `GET {nomad}{path}` once it is not mock-node's 503 (filter threads busy
/// or over their time budget on a loaded machine: retry later), within 60 s.
async fn answered(f: &FleetHandle, path: &str) -> u16 {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _, body) = get(f, path).await;
        if status != 503 {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still 503 after 60 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The costliest filter the limits accept, found over the wire: `distinct` patterns of
/// the form `[^x]{1,N}y<k>`, N the largest the pattern limit takes (a binary search on
/// 200 against 400), repeated with `or` up to the filter's length limit. None matches,
/// so every expression is evaluated on every node.
async fn costliest_filter(f: &FleetHandle, distinct: usize) -> String {
    let pattern = |n: usize, k: usize| format!("Name matches \"[^x]{{1,{n}}}y{k}\"");
    let (mut lo, mut hi) = (1usize, 4096usize);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let status = answered(f, &nodes_filtered(&pattern(mid, 0))).await;
        match status {
            200 => lo = mid,
            400 => hi = mid - 1,
            _ => panic!("a lone pattern is answered 200 or 400, got {status}"),
        }
    }
    let mut parts = Vec::new();
    let mut len = 0;
    for k in (0..distinct).cycle() {
        let p = pattern(lo, k);
        if len + p.len() + 4 > 4096 {
            break;
        }
        len += p.len() + 4;
        parts.push(p);
    }
    parts.join(" or ")
}

/// A filter is refused as Nomad refuses a bad one (400, text) when it has more distinct
/// patterns than the limit, before anything is compiled; the costliest one within the
/// limits is answered.
#[tokio::test]
async fn a_filter_with_too_many_distinct_patterns_is_a_400() {
    let f = fleet_with(2, |_| {}).await;
    let many: Vec<String> = (0..9).map(|k| format!("Name matches \"n{k}\"")).collect();
    let (status, _, body) = get(&f, &nodes_filtered(&many.join(" or "))).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.starts_with("failed to create result paginator: failed to read filter expression: 9 distinct patterns"),
        "{body}"
    );
    let worst = costliest_filter(&f, 8).await;
    assert_eq!(answered(&f, &nodes_filtered(&worst)).await, 200);
    f.shutdown().await;
}

/// How much slower than its CPU time a fixed piece of work runs on this machine now:
/// wall time over thread CPU time of 20 ms of spinning, the largest of three (1 on an
/// idle machine; about the number of runnable threads per core under load).
fn stretch() -> f64 {
    fn cpu() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes the calling thread's CPU clock into `ts`, which it owns.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
    (0..3)
        .map(|_| {
            std::thread::spawn(|| {
                let (wall, start) = (std::time::Instant::now(), cpu());
                let mut x = 0u64;
                while cpu() - start < Duration::from_millis(20) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                wall.elapsed().as_secs_f64() / (cpu() - start).as_secs_f64()
            })
            .join()
            .expect("spins")
        })
        .fold(1.0, f64::max)
}

/// 64 hostile filters at once held a node's `ServiceInfo` for seconds: they were
/// compiled on the async threads that serve the nodes. Now they run on the filter
/// threads behind a bounded queue (503 beyond it), and a node answers `ServiceInfo`
/// within 100 ms while they run, every call. The bound is 100 ms of an idle machine:
/// it is scaled by how much slower than its CPU time work runs here now ([`stretch`],
/// measured before the flood), as every thread of this process, the nodes' included,
/// gets that share of a core. Measured (debug build, 20-100 nodes, load 4-5 on 2 cores):
/// slowest 9-70 ms; with two busy loops at nice 0 against this test at nice 19: 100-220
/// ms with a quiet slowest of 8-10 ms, and 1.1 s at a stretch of 66.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_filters_at_once_leave_service_info_answering_within_100_ms() {
    let f = fleet_with(20, |_| {}).await;
    let worst = costliest_filter(&f, 8).await;
    let (_, mut info) = clients(f.nodes()[0].addr).await;
    // The same node, paced the same way, for a second without filters: the slowest
    // answer this machine gives under its present load.
    let mut quiet = Duration::ZERO;
    let quiet_until = std::time::Instant::now() + Duration::from_secs(1);
    for _ in 0..200 {
        if std::time::Instant::now() >= quiet_until {
            break;
        }
        let t = std::time::Instant::now();
        info.service_info(()).await.expect("ServiceInfo");
        quiet = quiet.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The hostile clients are other processes: their side runs on a runtime of its own,
    // not on the fleet's executor.
    let stretch = stretch();
    let bound = Duration::from_millis(100).mul_f64(stretch);
    let url = format!("{}{}", f.nomad_url(), nodes_filtered(&worst));
    let flood = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .expect("client");
            let sent: Vec<_> = (0..64)
                .map(|_| {
                    let (client, url) = (client.clone(), url.clone());
                    tokio::spawn(async move {
                        let r = client.get(url).send().await.expect("answered");
                        r.status().as_u16()
                    })
                })
                .collect();
            let mut statuses = Vec::new();
            for h in sent {
                statuses.push(h.await.expect("joins"));
            }
            statuses
        })
    });
    let mut slowest = Duration::ZERO;
    let mut calls = 0u32;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !flood.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the filters finish within 120 s"
        );
        let t = std::time::Instant::now();
        info.service_info(()).await.expect("ServiceInfo");
        slowest = slowest.max(t.elapsed());
        calls += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let statuses = flood.join().expect("the flood joins");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "each filter is answered or refused as busy: {statuses:?}"
    );
    assert!(statuses.contains(&200), "some are answered: {statuses:?}");
    assert!(calls > 0, "ServiceInfo was called while the filters ran");
    eprintln!(
        "ServiceInfo: quiet max {quiet:?}, stretch {stretch:.2}, {calls} calls during the flood, slowest {slowest:?}; statuses 200={} 503={}",
        statuses.iter().filter(|s| **s == 200).count(),
        statuses.iter().filter(|s| **s == 503).count()
    );
    assert!(
        slowest < bound,
        "slowest ServiceInfo {slowest:?} during {calls} calls, more than {bound:?} (100 ms x stretch {stretch:.2}; quiet max {quiet:?})"
    );
    f.shutdown().await;
}
