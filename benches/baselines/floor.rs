//! The floor of any service that asks its node before answering: a bare axum handler
//! that parses the same body, makes one gRPC `Create` call to the bare tonic server of
//! the `grpc` part (on a runtime of its own, as the service's mock node is) and answers
//! the same JSON. Nothing else: no placement, no records, no clocks, no counters.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::routing::post;
use stampede::serve::NewSandbox;
use stampede_proto::sandbox_service_client::SandboxServiceClient;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint};

/// The handler's state: one tonic channel to the bare node (cloned per call, as
/// tonic's clients are meant to be) and a counter for unique sandbox ids.
#[derive(Clone)]
struct Floor {
    node: SandboxServiceClient<Channel>,
    next: Arc<AtomicU64>,
    answer: Bytes,
}

impl Floor {
    async fn create(
        self,
        body: Bytes,
    ) -> (StatusCode, [(header::HeaderName, &'static str); 1], Bytes) {
        let plain = [(header::CONTENT_TYPE, "text/plain")];
        let Ok(new) = serde_json::from_slice::<NewSandbox>(&body) else {
            return (StatusCode::BAD_REQUEST, plain, Bytes::new());
        };
        let i = self.next.fetch_add(1, Relaxed);
        let request = crate::grpc::create_request(new.template_id, format!("f{i:019}"), i);
        let mut node = self.node;
        match node.create(request).await {
            Ok(_) => (
                StatusCode::CREATED,
                [(header::CONTENT_TYPE, "application/json")],
                self.answer,
            ),
            Err(_) => (StatusCode::BAD_GATEWAY, plain, Bytes::new()),
        }
    }
}

/// The floor handler on a free loopback port, on the current runtime (its channel's
/// tasks too), calling the bare node at `node` and answering `answer` (the service's
/// first answer, as bytes). It stops when `stop` is cancelled.
pub async fn start(node: SocketAddr, answer: Bytes, stop: CancellationToken) -> SocketAddr {
    let channel = Endpoint::from_shared(format!("http://{node}"))
        .expect("endpoint")
        .tcp_nodelay(true)
        .connect()
        .await
        .expect("connect to the bare node");
    let floor = Floor {
        node: SandboxServiceClient::new(channel),
        next: Arc::default(),
        answer,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().route(
        "/sandboxes",
        post(move |body: Bytes| floor.clone().create(body)),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    addr
}
