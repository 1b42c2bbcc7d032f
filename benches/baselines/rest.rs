//! The embedded service's `POST /sandboxes`, placing on one mock node, against a bare
//! axum handler that parses the same body (into the service's own request type) and
//! answers the same JSON (the first answer the service gave, as bytes).
//!
//! The service runs on the server runtime, its mock node on a runtime of its own
//! ([`MOCK_THREADS`]), so the server-CPU row is the service's own cost of a create; the
//! mock node's cost of the Create RPC it answers is a row of its own.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::routing::post;
use mock_node::config::{ClusterConfig, LatencyDist, NodeSpec};
use mock_node::fleet::{self, FleetHandle, FleetOptions};
use stampede::serve::rest::NewSandbox;
use stampede::serve::{self, NodeTarget, ServeConfig, ServiceHandle};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use crate::load::{
    closed_loop, cpu_of, measured, runtime, Measured, Rate, MOCK_THREADS, SERVER_THREADS,
};
use crate::table::{Row, Table};

/// Creates in flight at once (one pooled connection each).
const CONCURRENCY: usize = 64;
const KEY: &str = "e2b_bench";
const BODY: &str = r#"{"templateID":"base","timeout":300,"cpuCount":1,"memoryMB":512}"#;

async fn start_fleet() -> FleetHandle {
    let cluster = ClusterConfig {
        nodes: 1,
        seed: Some(14),
        node: NodeSpec {
            max_sandboxes: 0,
            max_starting: 0,
            overcommit: 0.0,
            create_latency: LatencyDist::Constant {
                value: Duration::ZERO,
            },
            ..NodeSpec::default()
        },
        ..ClusterConfig::default()
    };
    fleet::start(cluster, FleetOptions::default())
        .await
        .expect("mock-node fleet")
}

async fn start_service(fleet: &FleetHandle) -> ServiceHandle {
    let cfg = ServeConfig {
        api_key: KEY.to_string(),
        ..ServeConfig::default()
    };
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    serve::start(cfg, NodeTarget::all_of(fleet), listen)
        .await
        .expect("placement service")
}

async fn start_bare(answer: Bytes, stop: CancellationToken) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().route(
        "/sandboxes",
        post(move |body: Bytes| {
            let answer = answer.clone();
            async move {
                if serde_json::from_slice::<NewSandbox>(&body).is_err() {
                    return (
                        StatusCode::BAD_REQUEST,
                        [(header::CONTENT_TYPE, "text/plain")],
                        Bytes::new(),
                    );
                }
                (
                    StatusCode::CREATED,
                    [(header::CONTENT_TYPE, "application/json")],
                    answer,
                )
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    addr
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(CONCURRENCY)
        .tcp_nodelay(true)
        .build()
        .expect("http client")
}

async fn create_once(c: &reqwest::Client, base: &str) -> Option<Bytes> {
    let r = c
        .post(format!("{base}/sandboxes"))
        .header("x-api-key", KEY)
        .header(header::CONTENT_TYPE, "application/json")
        .body(BODY)
        .send()
        .await
        .ok()?;
    if r.status() != StatusCode::CREATED {
        return None;
    }
    r.bytes().await.ok()
}

async fn create_rate(base: String, n: usize) -> Rate {
    let c = client();
    closed_loop(n, CONCURRENCY, move |_, _| {
        let (c, base) = (c.clone(), base.clone());
        async move { create_once(&c, &base).await.is_some() }
    })
    .await
}

/// One round: the client's rate and the service's CPU ([`Measured`]), and the mock
/// node's CPU seconds.
fn round(
    server: &Runtime,
    mock: &Runtime,
    client_rt: &Runtime,
    bare: bool,
    n: usize,
) -> (Measured, f64) {
    let fleet = mock.block_on(start_fleet());
    let service = server.block_on(start_service(&fleet));
    let stop = CancellationToken::new();
    let base = if bare {
        let answer = client_rt
            .block_on(create_once(&client(), &service.url()))
            .expect("the service answers a create");
        let addr = server.block_on(start_bare(answer, stop.clone()));
        format!("http://{addr}")
    } else {
        service.url()
    };
    let mock_before = cpu_of(MOCK_THREADS);
    let got = measured(|| client_rt.block_on(create_rate(base, n)), n);
    let mock_cpu = cpu_of(MOCK_THREADS).saturating_sub(mock_before);
    stop.cancel();
    server.block_on(service.shutdown());
    mock.block_on(fleet.shutdown());
    (got, mock_cpu.as_secs_f64())
}

/// `rounds` alternations of bare and service: the client's rate, the service's own
/// requests per CPU-second, and the service and its mock node together per CPU-second,
/// each as a row.
pub fn run(n: usize, rounds: usize, table: &mut Table) {
    let server = runtime(SERVER_THREADS, 1);
    let mock = runtime(MOCK_THREADS, 1);
    let client_rt = runtime("bench-client", 1);
    let what = "embedded service POST /sandboxes (1 mock node)";
    let baseline = "bare axum, parses the body, same JSON answer";
    let mut rate = Row::new(what, baseline, "req/s");
    let mut cpu = Row::new(&format!("{what}, service CPU"), baseline, "req/CPU-s");
    let mut both = Row::new(
        &format!("{what}, service and mock node CPU"),
        baseline,
        "req/CPU-s",
    );
    for _ in 0..rounds {
        let (b, _) = round(&server, &mock, &client_rt, true, n);
        let (s, mock_cpu) = round(&server, &mock, &client_rt, false, n);
        rate.base.push(b.rate.per_second);
        rate.subject.push(s.rate.per_second);
        cpu.base.push(b.per_cpu_second);
        cpu.subject.push(s.per_cpu_second);
        let answered = (n - s.rate.errors.min(n)) as f64;
        both.base.push(b.per_cpu_second);
        both.subject
            .push(answered / (answered / s.per_cpu_second + mock_cpu));
        rate.errors += b.rate.errors + s.rate.errors;
    }
    cpu.errors = rate.errors;
    both.errors = rate.errors;
    table.push(rate);
    table.push(cpu);
    table.push(both);
}
