//! A burst user's own HTTP/1.1 connection to its target (plain or TLS), opened and
//! warmed before the gate, whose create is held by its final byte in a [`Gate`].
//!
//! goose's users send through reqwest, which owns its sockets; a burst needs the
//! socket itself so that one loop can release 500 final bytes ([`super::gated_io`]).
//! So a burst's creates go over hyper's client connection on a [`GatedIo`], and each
//! is still recorded in goose's metrics. Connections go straight to the target: a
//! proxy set in the environment is not used for them.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use axum::body::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::client::conn::http1;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::gated_io::{Gate, GatedIo};
use crate::api_key::ApiKey;

/// What a target answered.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// TLS for the https targets of one workload, set up once on first use.
#[derive(Default)]
pub(crate) struct Tls(OnceLock<Result<tokio_rustls::TlsConnector, String>>);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0.get() {
            None => "Tls(not set up)",
            Some(Ok(_)) => "Tls(ready)",
            Some(Err(_)) => "Tls(failed)",
        })
    }
}

impl Tls {
    fn connector(&self) -> Result<&tokio_rustls::TlsConnector, String> {
        self.0
            .get_or_init(|| {
                use rustls_platform_verifier::ConfigVerifierExt;
                let mut config = tokio_rustls::rustls::ClientConfig::with_platform_verifier()
                    .map_err(|e| format!("TLS setup: {e}"))?;
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// A request body given in one frame; it tells the gate when it has been handed over.
#[derive(Debug)]
struct OneFrame {
    data: Option<Bytes>,
    len: u64,
    gate: Option<Arc<Gate>>,
}

impl OneFrame {
    fn empty() -> Self {
        Self {
            data: None,
            len: 0,
            gate: None,
        }
    }
}

impl http_body::Body for OneFrame {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let data = self.data.take();
        if let Some(g) = self.gate.take() {
            g.body_done();
        }
        Poll::Ready(data.map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

/// An open connection to one target.
#[derive(Debug)]
pub(crate) struct BurstConn {
    sender: http1::SendRequest<OneFrame>,
    gate: Arc<Gate>,
    /// `Host` header.
    host: HeaderValue,
    /// The base URL's path, without a trailing slash (`""` for most targets).
    prefix: String,
}

impl BurstConn {
    /// Connects to `base` (`http://` or `https://`) and sends one `GET /health` on the
    /// connection (E2B's API answers it without a key), reading its answer to the end
    /// so that the create reuses the connection. A target that closes the connection
    /// after it gets a fresh one, open (not warmed) before the gate all the same.
    pub(crate) async fn open_warm(base: &str, tls: &Tls) -> Result<Self, String> {
        let url = reqwest::Url::parse(base).map_err(|e| format!("target {base}: {e}"))?;
        let mut conn = Self::connect(&url, base, tls).await?;
        let req = conn.request(Method::GET, "/health", OneFrame::empty())?;
        let answer = conn.send(req).await?;
        let closes = answer
            .headers
            .get(hyper::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        if closes || conn.sender.is_closed() {
            conn = Self::connect(&url, base, tls).await?;
        }
        Ok(conn)
    }

    async fn connect(url: &reqwest::Url, base: &str, tls: &Tls) -> Result<Self, String> {
        let host = url
            .host_str()
            .ok_or_else(|| format!("target {base}: no host"))?
            .to_owned();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| format!("target {base}: no port"))?;
        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| format!("connecting to {base}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let (io, gate) = GatedIo::new(tcp);
        let sender = match url.scheme() {
            "https" => {
                let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|e| format!("target {base}: {e}"))?;
                let stream = tls
                    .connector()?
                    .connect(name, io)
                    .await
                    .map_err(|e| format!("TLS to {base}: {e}"))?;
                start(stream).await?
            }
            _ => start(io).await?,
        };
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        };
        Ok(Self {
            sender,
            gate,
            host: HeaderValue::from_str(&authority).map_err(|e| format!("host: {e}"))?,
            prefix: url.path().trim_end_matches('/').to_owned(),
        })
    }

    /// The gate holding this connection's final byte.
    pub(crate) fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    /// Sends `POST /sandboxes` with `body` as JSON and reads the answer. Once the gate
    /// holds (see [`Gate::hold`]) the create leaves but for its final byte.
    pub(crate) fn create(
        &mut self,
        key: &ApiKey,
        body: Bytes,
    ) -> impl Future<Output = Result<Answer, String>> + '_ {
        let frame = OneFrame {
            len: body.len() as u64,
            data: Some(body),
            gate: Some(self.gate.clone()),
        };
        let req = self
            .request(Method::POST, "/sandboxes", frame)
            .and_then(|mut r| {
                let mut key = HeaderValue::from_str(key.expose())
                    .map_err(|_| "the API key is not a valid header value".to_string())?;
                key.set_sensitive(true);
                r.headers_mut().insert("x-api-key", key);
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Ok(r)
            });
        async move { self.send(req?).await }
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: OneFrame,
    ) -> Result<Request<OneFrame>, String> {
        Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(HOST, self.host.clone())
            .header(USER_AGENT, crate::http_client::USER_AGENT)
            .body(body)
            .map_err(|e| format!("building request: {e}"))
    }

    async fn send(&mut self, req: Request<OneFrame>) -> Result<Answer, String> {
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection: {e}"))?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok(Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }
}

/// HTTP/1.1 over `io`; the connection runs on its own task until either side closes.
async fn start<I>(io: I) -> Result<http1::SendRequest<OneFrame>, String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP/1 handshake: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "burst connection ended with an error");
        }
    });
    Ok(sender)
}
