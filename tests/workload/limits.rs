//! The workload against a real HTTP server on loopback that answers like E2B's limits:
//! a 429 is its own outcome (rate limit with `Retry-After` vs the team's concurrency
//! limit), `Retry-After` is waited when the profile asks, and a create that never
//! answers is given up within the grace once the run is cancelled.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use stampede::api_key::ApiKey;
use stampede::profile::SandboxSpec;
use stampede::workload::{run_workload, LimitKind, LimitRetry, Outcome, Pacing, WorkloadRun};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy)]
enum Answer {
    /// 429 `Rate limit exceeded` with `Retry-After: 1` this many times, then 201.
    RateLimitedThenOk(usize),
    /// 429 with E2B's team concurrency message, always.
    TeamLimit,
    /// Never answers a create.
    Silent,
}

#[derive(Clone)]
struct Server {
    answer: Answer,
    posts: Arc<Mutex<Vec<Instant>>>,
}

async fn create(State(s): State<Server>) -> Response {
    let n = {
        let mut p = s.posts.lock().unwrap();
        p.push(Instant::now());
        p.len()
    };
    match s.answer {
        Answer::RateLimitedThenOk(k) if n <= k => {
            let mut h = HeaderMap::new();
            h.insert("retry-after", HeaderValue::from_static("1"));
            let body = Json(serde_json::json!({"code": 429, "message": "Rate limit exceeded"}));
            (StatusCode::TOO_MANY_REQUESTS, h, body).into_response()
        }
        Answer::RateLimitedThenOk(_) => (
            StatusCode::CREATED,
            Json(serde_json::json!({"sandboxID": format!("sb-{n}")})),
        )
            .into_response(),
        Answer::TeamLimit => (
            StatusCode::TOO_MANY_REQUESTS,
            Json(serde_json::json!({"code": 429, "message":
                "you have reached the maximum number of concurrent E2B sandboxes (2). If you need more, please visit 'https://e2b.dev/docs/billing'"})),
        )
            .into_response(),
        Answer::Silent => {
            tokio::time::sleep(Duration::from_secs(120)).await;
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn serve(answer: Answer) -> (String, Arc<Mutex<Vec<Instant>>>) {
    let posts = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/health", get(|| async { StatusCode::NO_CONTENT }))
        .route("/sandboxes", post(create))
        .with_state(Server {
            answer,
            posts: posts.clone(),
        });
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, posts)
}

fn workload(url: String, count: usize, retry: Option<LimitRetry>) -> WorkloadRun {
    WorkloadRun {
        keep_entries: true,
        audit: None,
        placements: None,
        targets: vec![url],
        api_key: ApiKey::new("k"),
        pacing: Pacing::Burst { count },
        sandbox: SandboxSpec::default(),
        lifetime: None,
        lifecycle: None,
        seed: 1,
        request_timeout: Duration::from_secs(100),
        goose_report: None,
        cancel: CancellationToken::new(),
        progress: None,
        cancel_grace: Duration::from_millis(300),
        run_tag: None,
        limit_retry: retry,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_recorded_as_its_own_outcome_and_told_apart() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (url, _) = serve(Answer::RateLimitedThenOk(usize::MAX)).await;
    let out = run_workload(workload(url, 2, None), None)
        .await
        .expect("runs");
    for e in &out.ledger.entries {
        let Outcome::Limited(l) = &e.outcome else {
            panic!("not a limit: {:?}", e.outcome)
        };
        assert_eq!(l.kind, LimitKind::Rate);
        assert_eq!(l.retry_after_ms, Some(1000));
    }
    assert_eq!(out.ledger.statuses().get("429_rate_limit"), Some(&2));

    let (url, _) = serve(Answer::TeamLimit).await;
    let out = run_workload(workload(url, 2, None), None)
        .await
        .expect("runs");
    assert_eq!(out.ledger.statuses().get("429_team_limit"), Some(&2));
    assert!(out.ledger.entries.iter().all(|e| !e.outcome.is_uncertain()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_only_when_asked() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let policy = LimitRetry {
        max_retries: 2,
        honour_retry_after: true,
        backoff: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
    };
    let (url, posts) = serve(Answer::RateLimitedThenOk(1)).await;
    let out = run_workload(workload(url, 1, Some(policy)), None)
        .await
        .expect("runs");
    assert_eq!(out.ledger.entries[0].outcome, Outcome::Status(201));
    let p = posts.lock().unwrap().clone();
    assert_eq!(p.len(), 2, "one 429, one retry");
    let gap = p[1] - p[0];
    assert!(
        gap >= Duration::from_millis(990),
        "waited {gap:?} for Retry-After: 1"
    );

    let (url, posts) = serve(Answer::RateLimitedThenOk(1)).await;
    let ignore = LimitRetry {
        honour_retry_after: false,
        ..policy
    };
    let out = run_workload(workload(url, 1, Some(ignore)), None)
        .await
        .expect("runs");
    assert_eq!(out.ledger.entries[0].outcome, Outcome::Status(201));
    let p = posts.lock().unwrap().clone();
    let gap = p[1] - p[0];
    assert!(gap < Duration::from_millis(900), "backoff only: {gap:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_that_never_answer_are_given_up_within_the_grace() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (url, posts) = serve(Answer::Silent).await;
    let run = workload(url, 3, None);
    let cancel = run.cancel.clone();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(run_workload(run, Some(gate_tx)));
    gate_rx.await.expect("the gate opens");
    // Wait until the server holds every create, then cancel.
    let deadline = Instant::now() + Duration::from_secs(30);
    while posts.lock().unwrap().len() < 3 {
        assert!(Instant::now() < deadline, "creates did not arrive");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cancelled_at = Instant::now();
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the workload ends")
        .expect("joins")
        .expect("runs");
    let took = cancelled_at.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} (grace 300 ms)"
    );
    assert!(out.cancelled);
    assert_eq!(
        out.ledger.statuses().get("cancelled"),
        Some(&3),
        "{:?}",
        out.ledger.statuses()
    );
}
