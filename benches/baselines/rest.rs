//! The embedded service's `POST /sandboxes`, placing on one mock node, against a bare
//! axum handler that parses the same body (into the service's own request type) and
//! answers the same JSON (the first answer the service gave, as bytes).
//!
//! The service runs on the server runtime, its mock node on a runtime of its own
//! ([`MOCK_THREADS`]), so the server-CPU row is the service's own cost of a create; the
//! mock node's cost of the Create RPC it answers is a row of its own.
//!
//! The same rows again against the floor ([`floor`](crate::floor)): the bare handler
//! plus one bare gRPC Create call, what any service that asks its node before
//! answering must spend.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::routing::post;
use mock_node::config::{ClusterConfig, LatencyDist, NodeSpec};
use mock_node::fleet::{self, FleetHandle, FleetOptions};
use stampede::placement::ApiStage;
use stampede::serve::NewSandbox;
use stampede::serve::{self, ServeConfig, ServiceHandle};
use stampede_proto::ServiceInfoResponse;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use crate::load::{
    closed_loop, cpu_of, measured, runtime, Measured, Rate, MOCK_THREADS, SERVER_THREADS,
};
use crate::table::{Row, Table};
use crate::{floor, grpc};

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
    // The API stage off: its drawn wait before each decision is a timer, not CPU, and
    // its few workers would cap the rate; the figure is the service's own CPU a create.
    let cfg = ServeConfig {
        api_key: stampede::api_key::ApiKey::new(KEY),
        api_stage: ApiStage::off(),
        ..ServeConfig::default()
    };
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    serve::start(cfg, stampede::serve_cmd::targets_of(fleet), listen)
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

/// What a round measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Subject {
    /// The bare axum handler.
    Bare,
    /// The bare handler that also makes one Create call to a bare tonic node
    /// ([`floor`](crate::floor)).
    Floor,
    /// The service.
    Service,
}

/// One round: the client's rate and the server runtime's CPU ([`Measured`]), and the
/// CPU seconds of the runtime the node runs on (the mock node, or for
/// [`Subject::Floor`] the bare tonic node).
fn round(
    server: &Runtime,
    mock: &Runtime,
    client_rt: &Runtime,
    subject: Subject,
    n: usize,
) -> (Measured, f64) {
    let fleet = mock.block_on(start_fleet());
    let service = server.block_on(start_service(&fleet));
    let stop = CancellationToken::new();
    let base = if subject == Subject::Service {
        service.url()
    } else {
        let answer = client_rt
            .block_on(create_once(&client(), &service.url()))
            .expect("the service answers a create");
        let addr = if subject == Subject::Bare {
            server.block_on(start_bare(answer, stop.clone()))
        } else {
            let info = ServiceInfoResponse {
                node_id: fleet.nodes()[0].id.to_string(),
                ..ServiceInfoResponse::default()
            };
            let node = mock.block_on(grpc::start_bare(info));
            server.block_on(floor::start(node, answer, stop.clone()))
        };
        format!("http://{addr}")
    };
    let mock_before = cpu_of(MOCK_THREADS);
    let got = measured(|| client_rt.block_on(create_rate(base, n)), n);
    let mock_cpu = cpu_of(MOCK_THREADS).saturating_sub(mock_before);
    stop.cancel();
    server.block_on(service.shutdown());
    mock.block_on(fleet.shutdown());
    (got, mock_cpu.as_secs_f64())
}

/// Answered creates per CPU-second of the server runtime and the node's runtime
/// together.
fn with_node(m: &Measured, node_cpu: f64, n: usize) -> f64 {
    let answered = (n - m.rate.errors.min(n)) as f64;
    answered / (answered / m.per_cpu_second + node_cpu)
}

/// The three rows (rate, server CPU, server and node CPU) of the service against one
/// baseline.
struct Rows {
    rate: Row,
    cpu: Row,
    both: Row,
}

impl Rows {
    fn new(what: &str, baseline: &str, both: &str) -> Rows {
        Rows {
            rate: Row::new(what, baseline, "req/s"),
            cpu: Row::new(&format!("{what}, service CPU"), baseline, "req/CPU-s"),
            both: Row::new(
                &format!("{what}, service and mock node CPU"),
                both,
                "req/CPU-s",
            ),
        }
    }

    /// Adds a round: the baseline `b` (its node's CPU `b_node`) and the service `s`.
    fn push(&mut self, (b, b_node): (Measured, f64), (s, s_node): (Measured, f64), n: usize) {
        self.rate.base.push(b.rate.per_second);
        self.rate.subject.push(s.rate.per_second);
        self.cpu.base.push(b.per_cpu_second);
        self.cpu.subject.push(s.per_cpu_second);
        self.both.base.push(if b_node > 0.0 {
            with_node(&b, b_node, n)
        } else {
            b.per_cpu_second
        });
        self.both.subject.push(with_node(&s, s_node, n));
        self.rate.errors += b.rate.errors + s.rate.errors;
    }

    fn into_table(mut self, table: &mut Table) {
        self.cpu.errors = self.rate.errors;
        self.both.errors = self.rate.errors;
        table.push(self.rate);
        table.push(self.cpu);
        table.push(self.both);
    }
}

/// `rounds` alternations of bare, floor and service: the client's rate, the service's
/// own requests per CPU-second, and the service and its mock node together per
/// CPU-second, each as a row against the bare handler (the bare rounds' node CPU is
/// not counted: they make no call) and again against the floor (with its bare node's
/// CPU in the third row).
pub fn run(n: usize, rounds: usize, table: &mut Table) {
    let server = runtime(SERVER_THREADS, 1);
    let mock = runtime(MOCK_THREADS, 1);
    let client_rt = runtime("bench-client", 1);
    let what = "embedded service POST /sandboxes (1 mock node)";
    let bare = "bare axum, parses the body, same JSON answer";
    let mut vs_bare = Rows::new(what, bare, bare);
    let mut vs_floor = Rows::new(
        what,
        "bare axum, parses the body, one tonic Create to bare tonic, same JSON answer",
        "the same, and the bare tonic node's CPU",
    );
    for _ in 0..rounds {
        let b = round(&server, &mock, &client_rt, Subject::Bare, n);
        let f = round(&server, &mock, &client_rt, Subject::Floor, n);
        let s = round(&server, &mock, &client_rt, Subject::Service, n);
        vs_bare.push((b.0, 0.0), s, n);
        vs_floor.push(f, s, n);
    }
    vs_bare.into_table(table);
    vs_floor.into_table(table);
}
