//! What every request on a node's port passes before the routes, in one tower layer:
//! the listener policy's body deadline and request mark, the message-size limit
//! ([`limit`](crate::limit)) and the `hang` fault.
//!
//! A request's body must be whole within the body deadline of its head (a stalled
//! body fails its RPC, which tonic answers with the body's error); the request is
//! marked on its connection from its head until its answer is made, so the connection
//! cap never evicts a connection being answered.
//!
//! Every request, health checks included, waits while the node whose listener accepted
//! its connection is hung (connections are still accepted). Its body is wrapped so that
//! a message longer than the limit fails it with RESOURCE_EXHAUSTED. One layer for both
//! rules: a request is looked at once, and one that needs no wait is answered by the
//! routes' own future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::{BoxFuture, Either};
use http_body::Body as _;
use stampede_http_kit::{DeadlineBody, RequestMark};
use tonic::body::Body;
use tonic::codegen::http;

use crate::limit::Limited;
use crate::serve::NodeConnInfo;

/// Layer bounding request bodies in time (`body_read`) and messages in size (`limit`
/// bytes), and holding requests while a `hang` fault is in force on their node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IntakeLayer {
    limit: usize,
    body_read: Duration,
}

impl IntakeLayer {
    /// Refuses messages of more than `limit` bytes and bodies not whole `body_read`
    /// after their head.
    pub(crate) fn new(limit: usize, body_read: Duration) -> Self {
        Self { limit, body_read }
    }
}

impl<S> tower::Layer<S> for IntakeLayer {
    type Service = Intake<S>;
    fn layer(&self, inner: S) -> Intake<S> {
        Intake {
            inner,
            limit: self.limit,
            body_read: self.body_read,
        }
    }
}

/// Service produced by [`IntakeLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Intake<S> {
    inner: S,
    limit: usize,
    body_read: Duration,
}

pin_project_lite::pin_project! {
    /// An answer being made, holding its request's mark on the connection until it is.
    pub(crate) struct Marked<F> {
        #[pin]
        inner: F,
        mark: Option<Arc<RequestMark>>,
    }
}

impl<F: Future> Future for Marked<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let out = std::task::ready!(this.inner.poll(cx));
        this.mark.take();
        Poll::Ready(out)
    }
}

impl<S> tower::Service<http::Request<Body>> for Intake<S>
where
    S: tower::Service<http::Request<Limited>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Marked<Either<S::Future, BoxFuture<'static, Result<S::Response, S::Error>>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let limit = self.limit;
        let mark = req
            .extensions()
            .get::<NodeConnInfo>()
            .map(|c| c.mark.request());
        let body_read = self.body_read;
        let req = req.map(|body| {
            let Some(mark) = &mark else {
                return Limited::new(body, limit);
            };
            if body.is_end_stream() {
                mark.answering();
            }
            let (body, _) = DeadlineBody::new(body, body_read);
            Limited::new(Body::new(body.marked(mark.clone())), limit)
        });
        // The node is cloned only for a request that waits.
        let node = match req.extensions().get::<NodeConnInfo>() {
            Some(c) if c.node.is_hung() => c.node.clone(),
            _ => {
                return Marked {
                    inner: Either::Left(self.inner.call(req)),
                    mark,
                }
            }
        };
        // The clone is not ready yet: keep the ready one and hand it to the future.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let waiting = Either::Right(Box::pin(async move {
            let killed = node.rpc_cancel();
            tokio::select! {
                _ = node.wait_unhung() => inner.call(req).await,
                // A hung node that is then killed still answers its waiters UNAVAILABLE.
                _ = killed.cancelled() => Ok(tonic::Status::unavailable("node killed").into_http()),
            }
        }) as BoxFuture<'static, _>);
        Marked {
            inner: waiting,
            mark,
        }
    }
}
