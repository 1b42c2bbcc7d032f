//! The `hang` fault as a tower layer: every request on the node, health checks
//! included, waits while the node is hung. Connections are still accepted.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tonic::codegen::http;

use crate::node::NodeRuntime;

/// Layer holding requests while a `hang` fault is in force on its node.
#[derive(Debug, Clone)]
pub struct HangLayer {
    node: Arc<NodeRuntime>,
}

impl HangLayer {
    /// The layer of `node`.
    pub fn new(node: Arc<NodeRuntime>) -> Self {
        Self { node }
    }
}

impl<S> tower::Layer<S> for HangLayer {
    type Service = Hang<S>;
    fn layer(&self, inner: S) -> Hang<S> {
        Hang {
            inner,
            node: self.node.clone(),
        }
    }
}

/// Service produced by [`HangLayer`].
#[derive(Debug, Clone)]
pub struct Hang<S> {
    inner: S,
    node: Arc<NodeRuntime>,
}

impl<S, Req> tower::Service<Req> for Hang<S>
where
    S: tower::Service<Req, Response = http::Response<tonic::body::Body>> + Clone + Send + 'static,
    S::Future: Send,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The clone is not ready yet: keep the ready one and hand it to the future.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let node = self.node.clone();
        Box::pin(async move {
            let killed = node.rpc_cancel();
            tokio::select! {
                _ = node.wait_unhung() => inner.call(req).await,
                // A hung node that is then killed still answers its waiters UNAVAILABLE.
                _ = killed.cancelled() => Ok(tonic::Status::unavailable("node killed").into_http()),
            }
        })
    }
}
