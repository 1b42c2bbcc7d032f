//! Serving one node's gRPC endpoint with a listener that a `kill` fault can really close.
//!
//! Each accepted connection is wrapped so that cancelling the server's token makes its
//! next read or write fail; hyper then drops it, and SO_LINGER 0 turns the close into a
//! TCP reset. A killed node thus refuses new connections and resets established ones.
//! RPCs in flight at the kill are first answered UNAVAILABLE: every gRPC stack reports
//! a broken connection as UNAVAILABLE except tonic, which says UNKNOWN for a reset
//! stream, and callers must see the same code whatever their client.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Future, Stream};
use stampede_proto::info_service_server::InfoServiceServer;
use stampede_proto::sandbox_service_server::SandboxServiceServer;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::grpc::NodeService;
use crate::hang::HangLayer;
use crate::limit::{MessageLimitLayer, MAX_MESSAGE_BYTES};
use crate::node::NodeRuntime;

/// A running gRPC server of one node.
#[derive(Debug)]
pub struct ServerTask {
    rpcs: CancellationToken,
    cancel: CancellationToken,
    join: JoinHandle<()>,
}

/// Time given to in-flight RPCs to send their UNAVAILABLE before connections are reset.
const LAST_WORDS: Duration = Duration::from_millis(30);

impl ServerTask {
    /// Answers in-flight RPCs UNAVAILABLE, closes the listener, resets connections, and
    /// waits until the server is gone.
    pub async fn stop(self) {
        self.rpcs.cancel();
        tokio::time::sleep(LAST_WORDS).await;
        self.cancel.cancel();
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

/// Serves the node's SandboxService, InfoService and health on `listener`.
pub async fn spawn(node: Arc<NodeRuntime>, listener: TcpListener) -> ServerTask {
    let cancel = CancellationToken::new();
    let rpcs = CancellationToken::new();
    node.set_rpc_cancel(rpcs.clone());
    let incoming = incoming(listener, cancel.clone());
    let (health, health_svc) = tonic_health::server::health_reporter();
    health
        .set_serving::<SandboxServiceServer<NodeService>>()
        .await;
    health.set_serving::<InfoServiceServer<NodeService>>().await;
    let svc = NodeService::new(node.clone());
    // The message limit answers oversized requests RESOURCE_EXHAUSTED before tonic's own
    // check (set to the same size) would answer OUT_OF_RANGE.
    let router = tonic::transport::Server::builder()
        .layer(MessageLimitLayer::new(MAX_MESSAGE_BYTES))
        .layer(HangLayer::new(node.clone()))
        .add_service(health_svc)
        .add_service(
            SandboxServiceServer::new(svc.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(InfoServiceServer::new(svc).max_decoding_message_size(MAX_MESSAGE_BYTES));
    let shutdown = cancel.clone().cancelled_owned();
    let id = node.id.clone();
    let join = tokio::spawn(async move {
        // Keep the reporter alive as long as the server: dropping it ends health watches.
        let _health = health;
        if let Err(e) = router
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
        {
            tracing::warn!(node = %id, error = %e, "gRPC server ended with an error");
        }
    });
    ServerTask { rpcs, cancel, join }
}

fn incoming(
    listener: TcpListener,
    cancel: CancellationToken,
) -> impl Stream<Item = io::Result<KillableStream>> + Send + 'static {
    futures::stream::unfold((listener, cancel), |(l, cancel)| async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return None,
                r = l.accept() => match r {
                    Ok((s, _)) => {
                        let _ = s.set_nodelay(true);
                        let s = KillableStream::new(s, cancel.child_token());
                        return Some((Ok(s), (l, cancel)));
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

/// A TCP connection that fails all I/O once its token is cancelled.
pub struct KillableStream {
    inner: TcpStream,
    killed: Pin<Box<WaitForCancellationFutureOwned>>,
    dead: bool,
}

impl KillableStream {
    fn new(inner: TcpStream, token: CancellationToken) -> Self {
        Self {
            inner,
            killed: Box::pin(token.cancelled_owned()),
            dead: false,
        }
    }

    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.dead && self.killed.as_mut().poll(cx).is_ready() {
            self.dead = true;
            // Reset rather than close politely: callers must see the node die.
            let _ = socket2::SockRef::from(&self.inner).set_linger(Some(Duration::ZERO));
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

impl Connected for KillableStream {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
