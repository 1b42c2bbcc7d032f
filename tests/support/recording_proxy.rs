//! A reverse proxy on loopback that forwards every request to an upstream and records
//! its method, path and `User-Agent`: what a server sees of the harness's requests.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::response::Response;

/// One request the proxy forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub user_agent: Option<String>,
}

/// A running proxy: its base URL and what it has seen so far.
pub struct RecordingProxy {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

#[derive(Clone)]
struct Upstream {
    base: String,
    http: reqwest::Client,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Starts a proxy to `upstream` (a base URL) on 127.0.0.1, port 0.
pub async fn start(upstream: &str) -> RecordingProxy {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = Upstream {
        base: upstream.trim_end_matches('/').to_string(),
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("client"),
        seen: seen.clone(),
    };
    let app = axum::Router::new().fallback(forward).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    RecordingProxy { url, seen }
}

async fn forward(State(up): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    up.seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        user_agent: parts
            .headers
            .get("user-agent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    });
    let body = to_bytes(body, 64 << 20).await.unwrap_or_default();
    let mut out = up
        .http
        .request(parts.method.clone(), format!("{}{path}", up.base))
        .body(body);
    for (k, v) in &parts.headers {
        if k != "host" && k != "content-length" {
            out = out.header(k, v);
        }
    }
    match out.send().await {
        Ok(r) => {
            let mut resp = Response::builder().status(r.status());
            for (k, v) in r.headers() {
                if k != "content-length" && k != "transfer-encoding" {
                    resp = resp.header(k, v);
                }
            }
            let bytes = r.bytes().await.unwrap_or_default();
            resp.body(Body::from(bytes)).expect("response")
        }
        Err(e) => Response::builder()
            .status(502)
            .body(Body::from(e.to_string()))
            .expect("response"),
    }
}
