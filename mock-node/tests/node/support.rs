//! Helpers shared by the integration tests: a fleet on loopback and clients for it.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mock_node::api::{FaultCreated, NodeTruth, NodesResponse};
use mock_node::config::ClusterConfig;
use mock_node::fleet::{self, Addressing, FleetHandle, FleetOptions};
use stampede_proto::info_service_client::InfoServiceClient;
use stampede_proto::prost_types::Timestamp;
use stampede_proto::sandbox_service_client::SandboxServiceClient;
use stampede_proto::{SandboxConfig, SandboxCreateRequest};
use tonic::transport::{Channel, Endpoint};

/// A fleet of `nodes` default nodes with `edit` applied to the shared node spec.
pub async fn fleet_with(nodes: usize, edit: impl FnOnce(&mut ClusterConfig)) -> FleetHandle {
    let mut cfg = ClusterConfig {
        nodes,
        seed: Some(42),
        ..Default::default()
    };
    edit(&mut cfg);
    let opts = FleetOptions {
        addressing: Addressing::Ports {
            ip: own_loopback_ip(),
            base_port: 0,
        },
        ..FleetOptions::default()
    };
    fleet::start(cfg, opts).await.expect("fleet starts")
}

/// A loopback address no other fleet of this test binary uses (127.0.0.0/8 routes to lo).
/// The tests of one binary run at once: a node killed by a fault frees its port, and a
/// fleet of another test binding on the same IP could take it meanwhile, so the heal
/// could not re-bind. On its own IP a fleet's ports are its own.
pub fn own_loopback_ip() -> IpAddr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    IpAddr::V4(Ipv4Addr::new(
        127,
        0,
        200 + (n / 250 % 50) as u8,
        (n % 250 + 1) as u8,
    ))
}

/// A channel to `addr` with a per-request timeout.
pub async fn channel(addr: SocketAddr, timeout: Duration) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("valid uri")
        .connect_timeout(Duration::from_secs(2))
        .timeout(timeout)
        .connect()
        .await
        .expect("connects")
}

/// Both clients of one node, 5 s timeout.
pub async fn clients(
    addr: SocketAddr,
) -> (SandboxServiceClient<Channel>, InfoServiceClient<Channel>) {
    let ch = channel(addr, Duration::from_secs(5)).await;
    (
        SandboxServiceClient::new(ch.clone()),
        InfoServiceClient::new(ch),
    )
}

/// A create request for `id` with `vcpu` and `ram_mb`, no expiry.
pub fn create(id: &str, vcpu: i64, ram_mb: i64) -> SandboxCreateRequest {
    SandboxCreateRequest {
        sandbox: Some(SandboxConfig {
            template_id: "base".into(),
            sandbox_id: id.into(),
            vcpu,
            ram_mb,
            team_id: "team-1".into(),
            ..Default::default()
        }),
        start_time: Some(ts_in(Duration::ZERO)),
        end_time: None,
    }
}

/// Wall-clock timestamp `d` from now.
pub fn ts_in(d: Duration) -> Timestamp {
    let t = SystemTime::now() + d;
    let since = t.duration_since(UNIX_EPOCH).expect("after epoch");
    Timestamp {
        seconds: since.as_secs() as i64,
        nanos: since.subsec_nanos() as i32,
    }
}

/// Wall-clock timestamp `d` before now.
pub fn ts_ago(d: Duration) -> Timestamp {
    let t = SystemTime::now() - d;
    let since = t.duration_since(UNIX_EPOCH).expect("after epoch");
    Timestamp {
        seconds: since.as_secs() as i64,
        nanos: since.subsec_nanos() as i32,
    }
}

/// HTTP client for the admin API.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client")
}

/// `POST /faults`; returns the HTTP status and the body as JSON.
pub async fn post_fault(f: &FleetHandle, body: serde_json::Value) -> (u16, serde_json::Value) {
    let r = http()
        .post(format!("{}/faults", f.admin_url()))
        .json(&body)
        .send()
        .await
        .expect("admin answers");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(serde_json::Value::Null))
}

/// Applies a fault that must be accepted; returns its id.
pub async fn fault(f: &FleetHandle, body: serde_json::Value) -> u64 {
    let (status, v) = post_fault(f, body).await;
    assert_eq!(status, 201, "fault accepted: {v}");
    serde_json::from_value::<FaultCreated>(v).expect("id").id
}

/// `DELETE /faults/{id}`; returns the HTTP status.
pub async fn heal(f: &FleetHandle, id: u64) -> u16 {
    http()
        .delete(format!("{}/faults/{id}", f.admin_url()))
        .send()
        .await
        .expect("admin answers")
        .status()
        .as_u16()
}

/// `GET /nodes` over HTTP.
pub async fn nodes(f: &FleetHandle) -> NodesResponse {
    http()
        .get(format!("{}/nodes", f.admin_url()))
        .send()
        .await
        .expect("admin answers")
        .json()
        .await
        .expect("json")
}

/// Truth of one node, in-process.
pub fn truth(f: &FleetHandle, k: usize) -> NodeTruth {
    f.truth().nodes.swap_remove(k)
}

/// Polls `cond` every 20 ms for at most `limit`; true when it held.
pub async fn eventually(limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
