//! `stampede cleanup` against a hostile or buggy API on loopback: ids listed by the API
//! go into the DELETE URL as one encoded segment, an id listed twice is deleted once, a
//! 404 is "already gone" not "deleted", and a page larger than asked is refused.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::support::staging::*;

#[derive(Clone)]
struct Hostile {
    /// The raw path of every request.
    paths: Arc<Mutex<Vec<String>>>,
    /// The body of `GET /v2/sandboxes`.
    page: Arc<String>,
}

async fn handle(State(h): State<Hostile>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    h.paths
        .lock()
        .unwrap()
        .push(format!("{} {path}", req.method()));
    match (req.method().as_str(), path.as_str()) {
        ("GET", "/v2/sandboxes") => (
            [("content-type", "application/json")],
            h.page.as_ref().clone(),
        )
            .into_response(),
        ("DELETE", p) if p.ends_with("/gone") => StatusCode::NOT_FOUND.into_response(),
        ("DELETE", p) if p.starts_with("/sandboxes/") => StatusCode::NO_CONTENT.into_response(),
        _ => StatusCode::IM_A_TEAPOT.into_response(),
    }
}

async fn hostile(page: String) -> (String, Arc<Mutex<Vec<String>>>) {
    let paths = Arc::new(Mutex::new(Vec::new()));
    let state = Hostile {
        paths: paths.clone(),
        page: Arc::new(page),
    };
    let app = axum::Router::new().fallback(handle).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, paths)
}

fn cleanup(api: &str) -> (Option<i32>, String) {
    let out = stampede()
        .args(["cleanup", "--api", api, "--tag", "t-1"])
        .env("STAMPEDE_API_KEY", KEY)
        .output()
        .expect("cleanup runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_encodes_ids_dedupes_and_tells_already_gone_from_deleted() {
    let item = |id: &str| format!(r#"{{"sandboxID":"{id}","metadata":{{"stampede-run":"t-1"}}}}"#);
    let page = format!(
        "[{},{},{},{}]",
        item("../nodes/node-00"),
        item("sb-a"),
        item("sb-a"),
        item("gone")
    );
    let (api, paths) = hostile(page).await;
    let (code, text) = tokio::task::spawn_blocking(move || cleanup(&api))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("deleted 2 of 3 sandboxes") && text.contains("1 already gone"),
        "{text}"
    );
    assert!(text.contains("orphan sweep"), "{text}");
    let paths = paths.lock().unwrap().clone();
    let deletes: Vec<&String> = paths.iter().filter(|p| p.starts_with("DELETE")).collect();
    assert_eq!(deletes.len(), 3, "one DELETE per distinct id: {paths:?}");
    assert!(
        deletes.iter().all(|p| p.starts_with("DELETE /sandboxes/")),
        "an id left /sandboxes/: {paths:?}"
    );
    assert!(
        deletes.contains(&&"DELETE /sandboxes/%2E%2E%2Fnodes%2Fnode-00".to_string()),
        "{paths:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_refuses_a_page_larger_than_it_can_hold() {
    // 9 MiB of JSON whitespace around an empty list: valid, and too large.
    let page = format!("{}[]", " ".repeat(9 << 20));
    let (api, _paths) = hostile(page).await;
    let (code, text) = tokio::task::spawn_blocking(move || cleanup(&api))
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("larger than"), "{text}");
}
