//! Every node's port (gRPC and `GET /health` on the same listener) under the project's
//! listener policy: floods of silent and stalled clients, and the deadlines that close
//! them.

use std::net::SocketAddr;
use std::time::Duration;

use mock_node::config::ClusterConfig;
use mock_node::fleet::{self, Addressing, FleetHandle, FleetOptions};
use stampede_proto::info_service_client::InfoServiceClient;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::flood::{flood_size, hold, one_at_a_time, ANSWER_WITHIN, PROBES};
use crate::support::own_loopback_ip;

/// A one-node fleet whose port is under `edit`ed [`mock_node::NODE_LIMITS`].
async fn fleet_limited(edit: impl FnOnce(&mut stampede_http_kit::HttpLimits)) -> FleetHandle {
    let mut node_limits = mock_node::NODE_LIMITS;
    edit(&mut node_limits);
    let cfg = ClusterConfig {
        nodes: 1,
        seed: Some(42),
        ..Default::default()
    };
    let opts = FleetOptions {
        addressing: Addressing::Ports {
            ip: own_loopback_ip(),
            base_port: 0,
        },
        node_limits,
        ..FleetOptions::default()
    };
    fleet::start(cfg, opts).await.expect("fleet starts")
}

/// A connection cap below the flood (as a descriptor limit of about 1,300 would give), so
/// that the flood fills it and the cap must evict the flood's own connections.
const FLOOD_CAP: usize = 1_000;

fn node_addr(f: &FleetHandle) -> SocketAddr {
    f.nodes()[0].addr
}

/// An HPACK literal header field, never indexed, no Huffman (RFC 7541, section 6.2.3).
fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
    block.push(0x10);
    for s in [name, value] {
        block.push(u8::try_from(s.len()).expect("short"));
        block.extend_from_slice(s.as_bytes());
    }
}

/// An HTTP/2 frame header (RFC 9113, section 4.1).
fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = u32::try_from(payload.len()).expect("small").to_be_bytes();
    out.extend_from_slice(&len[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// What a stalled HTTP/2 client sends: the preface, its settings, and the head of a
/// ServiceInfo call (END_HEADERS, not END_STREAM) whose body never follows.
fn stalled_h2_call() -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/InfoService/ServiceInfo"),
        (":authority", "node"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        literal(&mut block, name, value);
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut out, 0x4, 0, 0, &[]);
    frame(&mut out, 0x1, 0x4, 1, &block);
    out
}

/// One ServiceInfo call on a new connection, within [`ANSWER_WITHIN`].
async fn service_info(addr: SocketAddr) -> Result<Duration, String> {
    let t0 = std::time::Instant::now();
    let call = async {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map_err(|e| format!("connect: {e}"))?;
        InfoServiceClient::new(ch)
            .service_info(())
            .await
            .map_err(|s| format!("status: {s}"))
    };
    match tokio::time::timeout(ANSWER_WITHIN, call).await {
        Ok(Ok(_)) => Ok(t0.elapsed()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no answer within {ANSWER_WITHIN:?}")),
    }
}

/// A node's gRPC server accepted every connection and kept it for ever: silent ones
/// waited on the protocol sniff and stalled streams on their body, until the process
/// ran out of descriptors. With 2,000 silent connections and 2,000 HTTP/2 streams whose
/// body never comes held against a node (more than its connection cap), a ServiceInfo
/// call on a new connection is answered within a second, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_stalled_clients_does_not_keep_a_node_from_answering_service_info() {
    let f = fleet_limited(|l| l.max_connections = FLOOD_CAP).await;
    let addr = node_addr(&f);
    let _turn = one_at_a_time().await;
    let n = flood_size();
    let flood = hold(addr, n, &stalled_h2_call()).await;
    assert!(
        flood.len() >= n,
        "the flood opened {} connections",
        flood.len()
    );
    for i in 0..PROBES {
        if let Err(e) = service_info(addr).await {
            panic!("probe {i} during a flood of {n} + {n}: {e}");
        }
    }
    drop(flood);
    f.shutdown().await;
}

/// The same flood with stalled HTTP/1 bodies keeps no health check (`GET /health` on
/// the node's port, as a Nomad check or a probe sends it) from its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_stalled_clients_does_not_keep_a_node_from_answering_its_health_check() {
    let f = fleet_limited(|l| l.max_connections = FLOOD_CAP).await;
    crate::flood::withstands(
        node_addr(&f),
        b"POST /InfoService/ServiceInfo HTTP/1.1\r\nHost: x\r\nContent-Type: application/grpc\r\nContent-Length: 100\r\n\r\n\0",
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    )
    .await;
    f.shutdown().await;
}

/// Reads from `c` until the server closes it (end of stream or reset), for at most `limit`.
async fn closed_within(c: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(limit, async {
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// A silent connection and one that stopped mid-head are closed at the header deadline;
/// an HTTP/2 connection that sent its preface and settings is not (it is a gRPC channel
/// between calls).
#[tokio::test]
async fn silent_and_stalled_heads_are_closed_at_the_header_deadline_an_idle_channel_is_not() {
    use tokio::io::AsyncWriteExt;
    let header_read = Duration::from_millis(300);
    let f = fleet_limited(|l| l.header_read = header_read).await;
    let addr = node_addr(&f);
    let mut silent = TcpStream::connect(addr).await.expect("connects");
    let mut half = TcpStream::connect(addr).await.expect("connects");
    half.write_all(b"GET /health HTTP/1.1\r\nHo")
        .await
        .expect("writes");
    let mut channel = TcpStream::connect(addr).await.expect("connects");
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut hello, 0x4, 0, 0, &[]);
    channel.write_all(&hello).await.expect("writes");
    assert!(
        closed_within(&mut silent, Duration::from_secs(10)).await,
        "silent kept open"
    );
    assert!(
        closed_within(&mut half, Duration::from_secs(10)).await,
        "stalled head kept open"
    );
    // Both are closed, so the deadline has passed for the channel too: it stays open.
    assert!(
        !closed_within(&mut channel, 2 * header_read).await,
        "an idle HTTP/2 connection was closed at the header deadline"
    );
    f.shutdown().await;
}
