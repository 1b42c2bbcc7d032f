//! The gRPC channel state of each node, observed without a task per node: the node's
//! [`NodeChannel`](super::node_channel::NodeChannel) opens every connection through a
//! [`WatchedConnector`], which records into the node's
//! [`ChannelCell`] each connect attempt (Connecting), its result (Ready or
//! TransientFailure), and the end of the connection's byte stream (EOF or an IO error:
//! Idle, as grpc-go's pick_first goes when its connection is lost, reconnecting on the
//! next RPC). The connection's own reader notices a reset at once, so a killed node is
//! seen when it dies, and unroutable as soon as the next RPC fails to reconnect: the
//! status rule is the core's ([`node_status`](stampede_placement::node_status)).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::Uri;

use stampede_placement::{ChannelCell, ChannelState};

/// Where one node's connections report; only the newest connection may change the state.
#[derive(Debug, Clone)]
struct Watch {
    cell: Arc<ChannelCell>,
    generation: Arc<AtomicU64>,
}

impl Watch {
    fn set_if_current(&self, mine: u64, state: ChannelState) {
        if self.generation.load(Relaxed) == mine {
            self.cell.set(state);
        }
    }
}

/// A connector over plain TCP that records the channel state of one node.
#[derive(Debug, Clone)]
pub(crate) struct WatchedConnector {
    watch: Watch,
    connect_timeout: Duration,
}

impl WatchedConnector {
    /// A connector recording into `cell`; a connect taking longer than
    /// `connect_timeout` fails (TransientFailure).
    pub(crate) fn new(cell: Arc<ChannelCell>, connect_timeout: Duration) -> Self {
        Self {
            watch: Watch {
                cell,
                generation: Arc::new(AtomicU64::new(0)),
            },
            connect_timeout,
        }
    }
}

type Connecting = Pin<Box<dyn Future<Output = Result<TokioIo<Watched>, io::Error>> + Send>>;

impl tower::Service<Uri> for WatchedConnector {
    type Response = TokioIo<Watched>;
    type Error = io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Connecting {
        let watch = self.watch.clone();
        let limit = self.connect_timeout;
        Box::pin(async move {
            let mine = watch.generation.fetch_add(1, Relaxed) + 1;
            watch.cell.set(ChannelState::Connecting);
            let host = uri
                .host()
                .unwrap_or("127.0.0.1")
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(80);
            let connected =
                match tokio::time::timeout(limit, TcpStream::connect((host, port))).await {
                    Ok(r) => r,
                    Err(_) => Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("connect to {uri} took over {limit:?}"),
                    )),
                };
            match connected {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    watch.set_if_current(mine, ChannelState::Ready);
                    Ok(TokioIo::new(Watched {
                        stream,
                        watch,
                        mine,
                    }))
                }
                Err(e) => {
                    watch.set_if_current(mine, ChannelState::TransientFailure);
                    Err(e)
                }
            }
        })
    }
}

/// One connection's byte stream; its end (EOF, IO error) marks the channel Idle.
#[derive(Debug)]
pub(crate) struct Watched {
    stream: TcpStream,
    watch: Watch,
    mine: u64,
}

impl Watched {
    fn lost(&self) {
        self.watch.set_if_current(self.mine, ChannelState::Idle);
    }

    fn check<T>(&self, p: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(_)) = &p {
            self.lost();
        }
        p
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        let p = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(p, Poll::Ready(Ok(()))) && room && buf.filled().len() == before {
            self.lost();
        }
        self.check(p)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.check(p)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let p = Pin::new(&mut self.stream).poll_flush(cx);
        self.check(p)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let p = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.check(p)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.check(p)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
