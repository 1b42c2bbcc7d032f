//! One gRPC server stack for the whole fleet, fed by every node's own listener.
//!
//! Each node binds its own address (a port, or a loopback IP), so callers see one
//! orchestrator per address; behind them runs a single tonic server whose incoming
//! stream merges all listeners. A connection carries its node ([`NodeConnInfo`], in
//! the request extensions), so a fleet of 10,000 nodes costs 10,000 listeners and one
//! server task, not 10,000 servers. [`Stack`] adds and removes listeners at run time.
//!
//! Each accepted connection is wrapped so that killing its node incarnation makes its
//! next read or write fail; hyper then drops it, and SO_LINGER 0 turns the close into
//! a TCP reset. A killed node thus refuses new connections (its listener is dropped)
//! and resets established ones. RPCs in flight at the kill are first answered
//! UNAVAILABLE: every gRPC stack reports a broken connection as UNAVAILABLE except
//! tonic, which says UNKNOWN for a reset stream, and callers must see the same code
//! whatever their client.
//!
//! Every listener of the stack is under the project's one listener policy
//! ([`NODE_LIMITS`]): each accepted connection is admitted by the fleet's one
//! [`ConnectionCap`] (kept below the descriptor limit less the nodes' listeners) and
//! wrapped in a [`GuardedIo`], which closes it when the cap evicts it or when, not yet
//! speaking HTTP/2, it idles past the header deadline; each request's body has a
//! deadline ([`IntakeLayer`]); HTTP/2 connections are pinged when quiet and closed when
//! the ping is not acknowledged. A *stalled HTTP/2 client* is one that opened a
//! connection and then stopped: it never sends the preface (closed at the header
//! deadline), opens a stream and never finishes its body (the stream fails at the body
//! deadline), or no longer reads or acknowledges pings (closed by the keepalive). An
//! HTTP/2 client that acknowledges pings and sends nothing is an idle gRPC channel,
//! which E2B's API keeps open to each orchestrator: it stays open, and a full cap evicts
//! it only once no connection that never had a call answered is left (a renewing flood
//! of silent connections evicts itself, not the API's pooled channel).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use stampede_http_kit::{
    CheckedIo, ConnMark, ConnectionCap, GuardedIo, HttpLimits, IoCheck, Tripwire, TripwireWatch,
};
use stampede_proto::info_service_server::InfoServiceServer;
use stampede_proto::sandbox_service_server::SandboxServiceServer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Connected;

use crate::grpc::NodeService;
use crate::intake::IntakeLayer;
use crate::limit::MAX_MESSAGE_BYTES;
use crate::node::NodeRuntime;

/// Largest header block (gRPC metadata included) a call may send: 16 MiB, grpc-go's
/// default server limit (`defaultServerMaxHeaderListSize` in grpc-go's
/// `internal/transport/defaults.go`), which E2B's orchestrator keeps (its
/// `packages/shared/pkg/grpc/server.go` sets no `MaxHeaderListSize`). hyper's own default,
/// 16 KiB, made h2 answer a larger block with a GOAWAY that failed every call in flight
/// on the connection. Beyond this limit grpc-go resets that stream alone
/// (`RST_STREAM` FRAME_SIZE_ERROR); h2 may still close the connection there.
pub(crate) const MAX_HEADER_LIST_BYTES: u32 = 16 << 20;

/// The listener policy of every node's port: E2B's API server's deadlines for a request
/// head (5 s) and a whole request (10 s, `packages/api/main.go`), as the project's other
/// local APIs ([`LOCAL_API_LIMITS`](stampede_http_kit::LOCAL_API_LIMITS)); HTTP/1
/// connections wait at most the header deadline for their next head; connections are
/// capped only by the descriptor limit (a fleet of N nodes is dialled by at least N
/// connections of each client, so no fixed number fits).
pub const NODE_LIMITS: HttpLimits = HttpLimits {
    header_read: Duration::from_secs(5),
    body_read: Duration::from_secs(10),
    idle: Duration::from_secs(10),
    max_connections: usize::MAX,
};

/// HTTP/2 keepalive of a node's connections, E2B's orchestrator's
/// (`packages/shared/pkg/grpc/server.go`: `keepalive.ServerParameters{Time: 15s,
/// Timeout: 5s}`): a ping after 15 s without a frame from the client, the connection
/// closed when it is not acknowledged within 5 s.
const H2_KEEPALIVE: (Duration, Duration) = (Duration::from_secs(15), Duration::from_secs(5));

/// Time given to in-flight RPCs to send their UNAVAILABLE before connections are reset.
const LAST_WORDS: Duration = Duration::from_millis(30);

/// The node a connection was accepted for.
#[derive(Debug, Clone)]
pub(crate) struct NodeConnInfo {
    /// The node whose listener accepted the connection.
    pub node: Arc<NodeRuntime>,
    /// The connection's standing with the fleet's connection cap, for its requests.
    pub mark: ConnMark,
}

/// One node's listener joining the stack.
struct Joining {
    node: Arc<NodeRuntime>,
    listener: TcpListener,
    /// The kill of this node incarnation: its listener and every connection it accepted.
    kill: Tripwire,
    /// Dropped with the listener, which tells [`ServerTask::stop`] the address is free.
    _closed: oneshot::Sender<()>,
}

/// Adds listeners to the fleet's one server; cheap to clone.
#[derive(Debug, Clone)]
pub struct Stack {
    tx: mpsc::UnboundedSender<Joining>,
}

/// What admits a node's connections: the fleet's one cap and the policy's bounds.
#[derive(Debug, Clone)]
struct Admission {
    cap: ConnectionCap,
    limits: HttpLimits,
}

/// The running server of a fleet.
#[derive(Debug)]
pub(crate) struct StackTask {
    shutdown: CancellationToken,
    join: JoinHandle<()>,
}

impl StackTask {
    /// Stops the server (nodes should have stopped serving first).
    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        let mut join = self.join;
        if tokio::time::timeout(Duration::from_secs(2), &mut join)
            .await
            .is_err()
        {
            join.abort();
            let _ = join.await;
        }
    }
}

/// One node serving on the stack; [`ServerTask::stop`] takes it off.
#[derive(Debug)]
pub struct ServerTask {
    rpcs: CancellationToken,
    kill: Tripwire,
    closed: oneshot::Receiver<()>,
}

impl ServerTask {
    /// Answers in-flight RPCs UNAVAILABLE, closes the listener, resets connections, and
    /// waits until the listener is gone (its address free).
    pub async fn stop(self) {
        self.rpcs.cancel();
        tokio::time::sleep(LAST_WORDS).await;
        self.kill.fire();
        // The sender drops with the listener; an error is that drop.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.closed).await;
    }
}

/// Starts the fleet's server: SandboxService, InfoService and health for every node
/// whose listener is later given to [`Stack::serve`], under `limits`; `listeners` (the
/// fleet's nodes) are kept out of the connection cap's descriptors.
pub(crate) async fn start(limits: HttpLimits, listeners: usize) -> (Stack, StackTask) {
    let room = stampede_http_kit::fd_room().map_or(usize::MAX, |r| r.saturating_sub(listeners));
    let admission = Admission {
        cap: ConnectionCap::new(limits.max_connections.min(room)),
        limits,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let (health, health_svc) = tonic_health::server::health_reporter();
    health
        .set_serving::<SandboxServiceServer<NodeService>>()
        .await;
    health.set_serving::<InfoServiceServer<NodeService>>().await;
    // The message limit answers oversized requests RESOURCE_EXHAUSTED before tonic's own
    // check (set to the same size) would answer OUT_OF_RANGE.
    let routes = tonic::service::Routes::new(health_svc)
        .add_service(
            SandboxServiceServer::new(NodeService).max_decoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(
            InfoServiceServer::new(NodeService).max_decoding_message_size(MAX_MESSAGE_BYTES),
        );
    // HTTP/1.1 `GET /health` beside gRPC on the same port, as E2B's orchestrator serves it.
    let routes = tonic::service::Routes::from(
        routes
            .into_axum_router()
            .route("/health", axum::routing::get(crate::health_http::health)),
    );
    let router = tonic::transport::Server::builder()
        .accept_http1(true)
        .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
        .http2_keepalive_interval(Some(H2_KEEPALIVE.0))
        .http2_keepalive_timeout(Some(H2_KEEPALIVE.1))
        .layer(IntakeLayer::new(MAX_MESSAGE_BYTES, limits.body_read))
        .add_routes(routes);
    let incoming = Incoming {
        admission,
        joining: rx,
        listeners: SelectAll::new(),
        open: true,
    };
    let stop = shutdown.clone().cancelled_owned();
    let join = tokio::spawn(async move {
        // Keep the reporter alive as long as the server: dropping it ends health watches.
        let _health = health;
        if let Err(e) = router.serve_with_incoming_shutdown(incoming, stop).await {
            tracing::warn!(error = %e, "gRPC server ended with an error");
        }
    });
    (Stack { tx }, StackTask { shutdown, join })
}

impl Stack {
    /// Serves `node` on `listener` until the returned task is stopped.
    pub fn serve(&self, node: Arc<NodeRuntime>, listener: TcpListener) -> ServerTask {
        let kill = Tripwire::default();
        let rpcs = CancellationToken::new();
        node.set_rpc_cancel(rpcs.clone());
        let (closed_tx, closed) = oneshot::channel();
        let joined = self.tx.send(Joining {
            node,
            listener,
            kill: kill.clone(),
            _closed: closed_tx,
        });
        if joined.is_err() {
            tracing::warn!("gRPC server is gone: the node does not serve");
        }
        ServerTask { rpcs, kill, closed }
    }
}

/// The merged incoming connections of every serving node.
struct Incoming {
    admission: Admission,
    joining: mpsc::UnboundedReceiver<Joining>,
    listeners: SelectAll<BoxStream<'static, io::Result<KillableStream>>>,
    open: bool,
}

impl Stream for Incoming {
    type Item = io::Result<KillableStream>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        while self.open {
            match self.joining.poll_recv(cx) {
                Poll::Ready(Some(j)) => {
                    let admitting = accepting(j, self.admission.clone()).boxed();
                    self.listeners.push(admitting);
                }
                Poll::Ready(None) => self.open = false,
                Poll::Pending => break,
            }
        }
        match self.listeners.poll_next_unpin(cx) {
            Poll::Ready(Some(conn)) => Poll::Ready(Some(conn)),
            // No listener now; more may join while the stack is open.
            Poll::Ready(None) if self.open => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// One listener's connections, each admitted by the fleet's cap, until its node
/// incarnation is killed; the listener (and with it `closed`) drops when the stream ends.
fn accepting(
    j: Joining,
    admission: Admission,
) -> impl Stream<Item = io::Result<KillableStream>> + Send + 'static {
    futures::stream::unfold((j, admission), |(j, a)| async move {
        loop {
            tokio::select! {
                _ = j.kill.fired() => return None,
                r = j.listener.accept() => match r {
                    Ok((s, _)) => {
                        let _ = s.set_nodelay(true);
                        let admitted = tokio::select! {
                            _ = j.kill.fired() => return None,
                            admitted = a.cap.admit() => admitted,
                        };
                        let s = GuardedIo::new(s, admitted, a.limits);
                        let kill = NodeKill {
                            node: j.node.clone(),
                            mark: s.mark().clone(),
                            kill: j.kill.watch(),
                            dead: false,
                        };
                        let s = CheckedIo::wrap(s, kill);
                        return Some((Ok(s), (j, a)));
                    }
                    Err(e) => {
                        // Out of descriptors and the like: keep serving, do not spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }
    })
}

/// A TCP connection that fails all I/O with `ConnectionReset` once its node incarnation
/// is killed (the first check that sees the kill sets SO_LINGER 0, so that the socket's
/// close is a reset), on top of the listener policy's checks.
///
/// Each read and write loads the kill flag; the kill's wait is polled only when the
/// connection's task polls with a waker the wait does not hold yet (hyper polls a
/// connection from one task, so about once per connection): see [`TripwireWatch`].
pub(crate) type KillableStream = CheckedIo<GuardedIo<TcpStream>, NodeKill>;

/// The kill check of one connection, and the node it tells tonic it serves.
pub(crate) struct NodeKill {
    node: Arc<NodeRuntime>,
    mark: ConnMark,
    kill: TripwireWatch,
    /// The kill was seen (and the socket set to reset on close).
    dead: bool,
}

impl IoCheck<GuardedIo<TcpStream>> for NodeKill {
    fn check(&mut self, cx: &mut Context<'_>, io: &GuardedIo<TcpStream>) -> io::Result<()> {
        if !self.dead && self.kill.fired(cx) {
            self.dead = true;
            // Reset rather than close politely: callers must see the node die.
            let _ = socket2::SockRef::from(io.get_ref()).set_linger(Some(Duration::ZERO));
        }
        if self.dead {
            Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "node killed",
            ))
        } else {
            Ok(())
        }
    }
}

impl Connected for NodeKill {
    type ConnectInfo = NodeConnInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        NodeConnInfo {
            node: self.node.clone(),
            mark: self.mark.clone(),
        }
    }
}
