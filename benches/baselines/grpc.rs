//! mock-node's `Create` (unique ids) and `ServiceInfo` against a bare tonic server with
//! the same protos that answers the mock node's own reply bytes: `Create` stores the
//! config in a map and answers the node's id as `client_id` (as the mock node does),
//! `ServiceInfo` answers a constant, namely the very reply the mock node gave first.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mock_node::config::{ClusterConfig, LatencyDist, NodeSpec};
use mock_node::fleet::{self, FleetHandle, FleetOptions};
use stampede_proto::info_service_client::InfoServiceClient;
use stampede_proto::info_service_server::{InfoService, InfoServiceServer};
use stampede_proto::sandbox_service_client::SandboxServiceClient;
use stampede_proto::sandbox_service_server::{SandboxService, SandboxServiceServer};
use stampede_proto::{
    SandboxCheckpointRequest, SandboxCheckpointResponse, SandboxConfig, SandboxCreateRequest,
    SandboxCreateResponse, SandboxDeleteRequest, SandboxListResponse, SandboxPauseRequest,
    SandboxPauseResponse, SandboxUpdateRequest, ServiceInfoResponse,
};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

use crate::load::{closed_loop, measured, runtime, Measured, SERVER_THREADS};
use crate::table::{Row, Table};

/// Connections of the client, and RPCs in flight on each (h2load's `-c 8 -m 16`).
const CONNECTIONS: usize = 8;
const STREAMS: usize = 16;

/// The bare baseline: nothing but the protos' generated servers.
#[derive(Clone)]
struct Bare {
    store: Arc<Mutex<HashMap<String, SandboxConfig>>>,
    info: Arc<ServiceInfoResponse>,
    /// The mock node's `client_id` (its node id), so a Create's reply is the same bytes.
    client_id: Arc<str>,
}

#[tonic::async_trait]
impl SandboxService for Bare {
    async fn create(
        &self,
        request: Request<SandboxCreateRequest>,
    ) -> Result<Response<SandboxCreateResponse>, Status> {
        let config = request.into_inner().sandbox.unwrap_or_default();
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        store.insert(config.sandbox_id.clone(), config);
        Ok(Response::new(SandboxCreateResponse {
            client_id: self.client_id.to_string(),
        }))
    }
    async fn update(&self, _: Request<SandboxUpdateRequest>) -> Result<Response<()>, Status> {
        Ok(Response::new(()))
    }
    async fn list(&self, _: Request<()>) -> Result<Response<SandboxListResponse>, Status> {
        Ok(Response::new(SandboxListResponse::default()))
    }
    async fn delete(&self, _: Request<SandboxDeleteRequest>) -> Result<Response<()>, Status> {
        Ok(Response::new(()))
    }
    async fn pause(
        &self,
        _: Request<SandboxPauseRequest>,
    ) -> Result<Response<SandboxPauseResponse>, Status> {
        Ok(Response::new(SandboxPauseResponse::default()))
    }
    async fn checkpoint(
        &self,
        _: Request<SandboxCheckpointRequest>,
    ) -> Result<Response<SandboxCheckpointResponse>, Status> {
        Ok(Response::new(SandboxCheckpointResponse::default()))
    }
}

#[tonic::async_trait]
impl InfoService for Bare {
    async fn service_info(&self, _: Request<()>) -> Result<Response<ServiceInfoResponse>, Status> {
        Ok(Response::new((*self.info).clone()))
    }
}

/// The Create every bench client sends: 1 vCPU, 512 MiB, team `bench`, execution `e{i}`.
pub fn create_request(template_id: String, sandbox_id: String, i: u64) -> SandboxCreateRequest {
    SandboxCreateRequest {
        sandbox: Some(SandboxConfig {
            template_id,
            sandbox_id,
            vcpu: 1,
            ram_mb: 512,
            team_id: "bench".to_string(),
            execution_id: format!("e{i}"),
            ..SandboxConfig::default()
        }),
        start_time: None,
        end_time: None,
    }
}

/// A bare server on a free loopback port, on the current runtime, answering `info`
/// (the mock node's first ServiceInfo reply) and the same node id on a Create.
pub async fn start_bare(info: ServiceInfoResponse) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let bare = Bare {
        store: Arc::default(),
        client_id: info.node_id.as_str().into(),
        info: Arc::new(info),
    };
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(SandboxServiceServer::new(bare.clone()))
            .add_service(InfoServiceServer::new(bare))
            .serve_with_incoming(incoming)
            .await;
    });
    addr
}

/// One mock node that never refuses a create and answers at once.
async fn start_mock() -> FleetHandle {
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

async fn channels(addr: SocketAddr) -> Vec<Channel> {
    let mut out = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let ch = Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect");
        out.push(ch);
    }
    out
}

async fn service_info_rate(addr: SocketAddr, n: usize) -> crate::load::Rate {
    let clients: Vec<_> = channels(addr)
        .await
        .into_iter()
        .map(InfoServiceClient::new)
        .collect();
    closed_loop(n, CONNECTIONS * STREAMS, move |w, _| {
        let mut c = clients[w % CONNECTIONS].clone();
        async move { c.service_info(()).await.is_ok() }
    })
    .await
}

async fn create_rate(addr: SocketAddr, n: usize, round: usize) -> crate::load::Rate {
    let clients: Vec<_> = channels(addr)
        .await
        .into_iter()
        .map(SandboxServiceClient::new)
        .collect();
    closed_loop(n, CONNECTIONS * STREAMS, move |w, i| {
        let mut c = clients[w % CONNECTIONS].clone();
        let body = create_request("base".to_string(), format!("r{round}-i{i:019}"), i as u64);
        async move { c.create(body).await.is_ok() }
    })
    .await
}

#[derive(Clone, Copy)]
enum Rpc {
    ServiceInfo,
    Create,
}

/// A fresh server on the `server` runtime: the mock node, or (`bare`) the bare server
/// answering the reply a fresh mock node gave first. Creates pile up, so every round
/// starts both sides empty. The fleet is returned to be shut down after the round.
pub fn start(server: &Runtime, bare: bool) -> (SocketAddr, Option<FleetHandle>) {
    server.block_on(async {
        let fleet = start_mock().await;
        let mock_addr = fleet.nodes()[0].addr;
        if !bare {
            return (mock_addr, Some(fleet));
        }
        let mut c = InfoServiceClient::connect(format!("http://{mock_addr}"))
            .await
            .expect("mock info");
        let info = c.service_info(()).await.expect("info").into_inner();
        fleet.shutdown().await;
        (start_bare(info).await, None)
    })
}

fn round(server: &Runtime, client: &Runtime, rpc: Rpc, bare: bool, n: usize, k: usize) -> Measured {
    let (addr, fleet) = start(server, bare);
    let got = measured(
        || {
            client.block_on(async {
                match rpc {
                    Rpc::ServiceInfo => service_info_rate(addr, n).await,
                    Rpc::Create => create_rate(addr, n, k).await,
                }
            })
        },
        n,
    );
    if let Some(f) = fleet {
        server.block_on(f.shutdown());
    }
    got
}

/// Both RPCs, `rounds` alternations of bare and mock each: the client's rate and the
/// server's requests per CPU-second, each as a row.
pub fn run(n: usize, rounds: usize, table: &mut Table) {
    let server = runtime(SERVER_THREADS, 1);
    let client = runtime("bench-client", 1);
    for (rpc, what, baseline) in [
        (
            Rpc::ServiceInfo,
            "mock-node ServiceInfo",
            "bare tonic, the mock's reply bytes",
        ),
        (
            Rpc::Create,
            "mock-node Create (unique ids)",
            "bare tonic, map store, the mock's reply bytes",
        ),
    ] {
        let mut rate = Row::new(what, baseline, "req/s");
        let mut cpu = Row::new(&format!("{what}, server CPU"), baseline, "req/CPU-s");
        for k in 0..rounds {
            let b = round(&server, &client, rpc, true, n, k);
            let m = round(&server, &client, rpc, false, n, k);
            rate.base.push(b.rate.per_second);
            rate.subject.push(m.rate.per_second);
            cpu.base.push(b.per_cpu_second);
            cpu.subject.push(m.per_cpu_second);
            rate.errors += b.rate.errors + m.rate.errors;
        }
        cpu.errors = rate.errors;
        table.push(rate);
        table.push(cpu);
    }
}
