//! What every request on a node's port passes before the routes, in one tower layer:
//! the message-size limit ([`limit`](crate::limit)) and the `hang` fault.
//!
//! Every request, health checks included, waits while the node whose listener accepted
//! its connection is hung (connections are still accepted). Its body is wrapped so that
//! a message longer than the limit fails it with RESOURCE_EXHAUSTED. One layer for both
//! rules: a request is looked at once, and one that needs no wait is answered by the
//! routes' own future.

use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use tonic::body::Body;
use tonic::codegen::http;

use crate::limit::Limited;
use crate::serve::NodeConnInfo;

/// Layer limiting request messages to `limit` bytes and holding requests while a `hang`
/// fault is in force on their node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IntakeLayer {
    limit: usize,
}

impl IntakeLayer {
    /// Refuses messages of more than `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self { limit }
    }
}

impl<S> tower::Layer<S> for IntakeLayer {
    type Service = Intake<S>;
    fn layer(&self, inner: S) -> Intake<S> {
        Intake {
            inner,
            limit: self.limit,
        }
    }
}

/// Service produced by [`IntakeLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Intake<S> {
    inner: S,
    limit: usize,
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
    type Future = Either<S::Future, BoxFuture<'static, Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let limit = self.limit;
        // Handed on as it is, not boxed again: the router boxes every body once anyway.
        let req = req.map(|body| Limited::new(body, limit));
        // The node is cloned only for a request that waits.
        let node = match req.extensions().get::<NodeConnInfo>() {
            Some(c) if c.node.is_hung() => c.node.clone(),
            _ => return Either::Left(self.inner.call(req)),
        };
        // The clone is not ready yet: keep the ready one and hand it to the future.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Either::Right(Box::pin(async move {
            let killed = node.rpc_cancel();
            tokio::select! {
                _ = node.wait_unhung() => inner.call(req).await,
                // A hung node that is then killed still answers its waiters UNAVAILABLE.
                _ = killed.cancelled() => Ok(tonic::Status::unavailable("node killed").into_http()),
            }
        }))
    }
}
