//! One node's HTTP/2 connection as the tower service its gRPC clients call: a call
//! clones the connection's `h2` handle and sends on it from the caller's own task.
//!
//! tonic's `Channel` hands every call to a buffer task through a queue, and hyper's
//! client hands it again to the connection's task and spawns a task per request; here
//! a call writes its stream into the shared `h2` state directly and polls its own
//! answer. The connection is opened on first use through the node's
//! [`WatchedConnector`] (which records the channel state) and opened again by the
//! first call after it ends. Deadlines stay where they were: the connector bounds the
//! TCP connect, and every call is bounded by its caller (`node_client::bounded`), which
//! drops the call, and so resets its stream, when the bound runs out.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame};
use http_body_util::BodyExt;
use tonic::codegen::http::uri::{Authority, Scheme};
use tonic::codegen::http::{Request, Response, Uri};
use tonic::Status;

use super::channel_watch::WatchedConnector;

/// An error of a call, which tonic turns into the call's status.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One open connection: its handle and whether its driver has ended.
#[derive(Debug)]
struct Open {
    send: h2::client::SendRequest<Bytes>,
    ended: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Inner {
    origin: Uri,
    scheme: Scheme,
    authority: Authority,
    connector: WatchedConnector,
    open: Mutex<Option<Open>>,
    /// Held while connecting, so that concurrent first calls share one connection.
    connecting: tokio::sync::Mutex<()>,
}

/// A node's lazily opened, reopened-on-loss HTTP/2 connection (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct NodeChannel {
    inner: Arc<Inner>,
}

impl NodeChannel {
    /// A channel to `origin` (`http://host:port`), connecting through `connector`
    /// on first use. `None` if `origin` has no scheme or authority.
    pub(crate) fn new(origin: Uri, connector: WatchedConnector) -> Option<Self> {
        let scheme = origin.scheme()?.clone();
        let authority = origin.authority()?.clone();
        Some(Self {
            inner: Arc::new(Inner {
                origin,
                scheme,
                authority,
                connector,
                open: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
            }),
        })
    }
}

impl Inner {
    fn current(&self) -> Option<(h2::client::SendRequest<Bytes>, Arc<AtomicBool>)> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.as_ref()
            .filter(|o| !o.ended.load(Ordering::Acquire))
            .map(|o| (o.send.clone(), o.ended.clone()))
    }

    /// The open connection's handle and its ended flag, opening one if there is none
    /// (or it ended).
    async fn handle(&self) -> Result<(h2::client::SendRequest<Bytes>, Arc<AtomicBool>), BoxError> {
        if let Some(send) = self.current() {
            return Ok(send);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(send) = self.current() {
            return Ok(send);
        }
        let io = tower::Service::call(&mut self.connector.clone(), self.origin.clone())
            .await
            .map_err(|e| unavailable(&self.origin, &e))?
            .into_inner();
        let (send, connection) = h2::client::handshake(io)
            .await
            .map_err(|e| unavailable(&self.origin, &e))?;
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        tokio::spawn(async move {
            // The connection ends when every handle is dropped or its stream fails;
            // either way the next call opens another.
            let _ = connection.await;
            flag.store(true, Ordering::Release);
        });
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        *open = Some(Open {
            send: send.clone(),
            ended: ended.clone(),
        });
        Ok((send, ended))
    }

    async fn call<B>(self: Arc<Self>, req: Request<B>) -> Result<Response<NodeBody>, BoxError>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let (mut parts, body) = req.into_parts();
        let mut uri = std::mem::take(&mut parts.uri).into_parts();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = Some(self.authority.clone());
        parts.uri = Uri::from_parts(uri)?;
        // The request's message (a unary call's one frame), read whole.
        let message = body.collect().await.map_err(Into::into)?.to_bytes();
        let (send, ended) = self.handle().await?;
        let sent = async move {
            let mut send = send.ready().await?;
            let (answer, mut stream) = send.send_request(Request::from_parts(parts, ()), false)?;
            stream.send_data(message, true)?;
            answer.await
        };
        let answer = sent.await.inspect_err(|e| {
            // The connection is gone even if its driver has not noticed yet: the next
            // call (a retry among them) opens a fresh one instead of failing on it.
            if connection_lost(e) {
                ended.store(true, Ordering::Release);
            }
        })?;
        let (parts, recv) = answer.into_parts();
        Ok(Response::from_parts(
            parts,
            NodeBody {
                recv,
                data_done: false,
            },
        ))
    }
}

/// Whether `e` says the call's connection was lost (an I/O error: a reset, a close; a
/// GOAWAY; a stream refused) rather than that the node answered the call with an error.
/// A call that failed so was not answered, and the node took it only if it was sent
/// before the loss.
pub(crate) fn connection_lost(e: &h2::Error) -> bool {
    e.is_io() || e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM)
}

fn unavailable(origin: &Uri, e: &dyn std::fmt::Display) -> BoxError {
    Box::new(Status::unavailable(format!("connect to {origin}: {e}")))
}

impl<B> tower::Service<Request<B>> for NodeChannel
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<NodeBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<NodeBody>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        Box::pin(self.inner.clone().call(req))
    }
}

/// A node's answer body: its data, then its trailers (where gRPC puts the status).
#[derive(Debug)]
pub(crate) struct NodeBody {
    recv: h2::RecvStream,
    data_done: bool,
}

impl HttpBody for NodeBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        if !self.data_done {
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Hand the window back, or the connection stalls once the node
                    // has sent a window's worth.
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => self.data_done = true,
            }
        }
        match ready!(self.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }
}
