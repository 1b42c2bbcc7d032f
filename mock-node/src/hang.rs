//! The `hang` fault as a tower layer: every request on the node, health checks
//! included, waits while the node is hung. Connections are still accepted.

use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use tonic::codegen::http;

use crate::serve::NodeConnInfo;

/// Layer holding requests while a `hang` fault is in force on the node whose listener
/// accepted their connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct HangLayer;

impl<S> tower::Layer<S> for HangLayer {
    type Service = Hang<S>;
    fn layer(&self, inner: S) -> Hang<S> {
        Hang { inner }
    }
}

/// Service produced by [`HangLayer`].
#[derive(Debug, Clone)]
pub struct Hang<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for Hang<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<S::Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
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
