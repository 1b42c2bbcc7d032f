//! Clients that hang up at every point of a move: before the service has read the
//! request, while the node works, just as the node answers, after the answer. Nodes are
//! slowed so that a move lasts; each client sends its request over a raw connection and
//! closes it (half with a FIN, half with a reset) after a delay spread over the move's
//! length and densely where the answers come back. Once every move has settled, the nodes' truth (mock-node's admin
//! `GET /nodes`) and the service's lists must agree: no id on two nodes, no sandbox on a
//! node the service does not list as running, none listed running that no node runs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use stampede::mock_admin::MockAdmin;
use stampede::serve::DEFAULT_API_KEY;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::serve::*;

/// How long each node RPC takes: long enough that a hang-up can land inside it.
const SLOW: Duration = Duration::from_millis(300);

/// Clients per move: half hang up at delays spread evenly over [`SPAN`], half densely
/// over [`NEAR_ANSWER`], where the nodes' answers come back.
const CLIENTS: usize = 60;

/// The delays' range: from at once to well after the node has answered.
const SPAN: Duration = Duration::from_millis(720);

/// Where the answers come back under this load: from [`SLOW`] on, for 100 ms (the
/// service's own work and the node's create time on top of the added latency).
const NEAR_ANSWER: (Duration, Duration) = (SLOW, Duration::from_millis(100));

/// How long the service may take to settle after the last hang-up.
const SETTLE: Duration = Duration::from_secs(15);

/// The delay of client `i` of [`CLIENTS`]: even ones over [`SPAN`], odd ones over
/// [`NEAR_ANSWER`].
fn delay_of(i: usize) -> Duration {
    let half = u32::try_from(CLIENTS / 2).expect("few clients");
    let k = u32::try_from(i / 2).expect("few clients");
    if i.is_multiple_of(2) {
        SPAN * k / (half - 1)
    } else {
        NEAR_ANSWER.0 + NEAR_ANSWER.1 * k / (half - 1)
    }
}

/// Send `method path` with `body` over a connection of its own, and hang up after
/// `after` (with a reset if `reset`) unless the answer came first; the status if it did.
async fn hang_up_after(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    after: Duration,
    reset: bool,
) -> Option<u16> {
    let mut conn = TcpStream::connect(addr).await.expect("connect to serve");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nX-API-Key: {DEFAULT_API_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.expect("head written");
    conn.write_all(body.as_bytes()).await.expect("body written");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(after, conn.read_to_end(&mut answer)).await;
    if read.is_err() && reset {
        socket2::SockRef::from(&conn)
            .set_linger(Some(Duration::ZERO))
            .expect("linger set");
    }
    drop(conn);
    let line = std::str::from_utf8(&answer)
        .ok()?
        .lines()
        .next()?
        .to_string();
    line.split(' ').nth(1)?.parse().ok()
}

/// `CLIENTS` requests, client `i` for `paths[i % len]`, each hanging up after its delay.
async fn hang_ups(rig: &Rig, method: &str, paths: &[String], body: &str) {
    let addr = rig.svc.addr();
    let mut clients = tokio::task::JoinSet::new();
    for i in 0..CLIENTS {
        let (method, path, body) = (
            method.to_string(),
            paths[i % paths.len()].clone(),
            body.to_string(),
        );
        clients.spawn(async move {
            hang_up_after(addr, &method, &path, &body, delay_of(i), i % 4 >= 2).await
        });
    }
    while let Some(r) = clients.join_next().await {
        r.expect("client task");
    }
}

/// The ids `GET /v2/sandboxes` lists in `state`.
async fn listed(rig: &Rig, state: &str) -> BTreeSet<String> {
    let (s, body) = rig
        .get_json(&format!("/v2/sandboxes?state={state}&limit=100"))
        .await;
    assert_eq!(s, 200, "{body}");
    let all = body.as_array().expect("an array");
    assert!(all.len() < 100, "more than a page: the test lists one");
    all.iter()
        .map(|x| x["sandboxID"].as_str().expect("an id").to_string())
        .collect()
}

/// Where the nodes run each sandbox, as mock-node's admin API says.
async fn on_nodes(admin: &MockAdmin) -> BTreeMap<String, Vec<String>> {
    let truth = admin.nodes().await.expect("admin GET /nodes");
    let mut at: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in truth.nodes {
        for id in node.sandbox_ids {
            at.entry(id).or_default().push(node.id.clone());
        }
    }
    at
}

/// What disagrees between the nodes and the service now (empty: they agree).
async fn disagreements(rig: &Rig, admin: &MockAdmin) -> Vec<String> {
    let at = on_nodes(admin).await;
    let running = listed(rig, "running").await;
    let paused = listed(rig, "paused").await;
    let mut found = Vec::new();
    for (id, nodes) in &at {
        if nodes.len() > 1 {
            found.push(format!("{id} runs on {nodes:?}"));
        }
        if !running.contains(id) {
            let as_what = if paused.contains(id) {
                "listed paused"
            } else {
                "not listed"
            };
            found.push(format!("{id} runs on {nodes:?}, {as_what}"));
        }
    }
    for id in running.difference(&at.keys().cloned().collect()) {
        found.push(format!("{id} listed running, on no node"));
    }
    for id in running.intersection(&paused) {
        found.push(format!("{id} listed running and paused"));
    }
    found
}

/// Wait until the nodes and the service agree; panics with what still disagrees past
/// [`SETTLE`] (`after` names the step).
async fn settled(rig: &Rig, admin: &MockAdmin, after: &str) {
    let until = Instant::now() + SETTLE;
    loop {
        let found = disagreements(rig, admin).await;
        if found.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "after {after}, {} disagreements: {found:?}",
            found.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `verb` for every id of `ids`, one path each.
fn paths(ids: &BTreeSet<String>, verb: &str) -> Vec<String> {
    ids.iter()
        .map(|id| format!("/sandboxes/{id}{verb}"))
        .collect()
}

/// Every answer of a follow-up `verb` on `ids` (sent whole, after the hang-ups settled)
/// is one of `allowed`.
async fn follow_up(rig: &Rig, ids: &BTreeSet<String>, verb: &str, allowed: &[u16]) {
    let mut answers = tokio::task::JoinSet::new();
    for id in ids {
        let (http, url) = (rig.http.clone(), rig.url(&format!("/sandboxes/{id}{verb}")));
        let kill = verb.is_empty();
        answers.spawn(async move {
            let req = if kill {
                http.delete(url)
            } else {
                http.post(url).json(&json!({"timeout": 600}))
            };
            let r = req
                .header("X-API-Key", DEFAULT_API_KEY)
                .send()
                .await
                .expect("answered");
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        });
    }
    while let Some(r) = answers.join_next().await {
        let (status, body) = r.expect("follow-up task");
        assert!(
            allowed.contains(&status),
            "follow-up {verb:?} answered {status}: {body}"
        );
    }
}

/// Create, pause, resume and kill, each with [`CLIENTS`] hang-ups spread from at once to
/// after the node's answer, each followed by the same move sent whole: after every step,
/// no id on two nodes and the service lists exactly what the nodes run. Bounded: four
/// rounds of 60 raw requests and one follow-up per sandbox, each round a few seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_ups_at_every_point_of_a_move_leave_the_nodes_and_the_service_agreeing() {
    let rig = Rig::start(cluster(3, &[]), slow_nodes_config()).await;
    let admin = MockAdmin::new(rig.http.clone(), &rig.fleet.admin_url(), None);
    rig.slow_all(SLOW).await;

    let create = json!({"templateID": "base", "timeout": 600}).to_string();
    hang_ups(&rig, "POST", &["/sandboxes".to_string()], &create).await;
    settled(&rig, &admin, "creates hung up").await;
    let pool = listed(&rig, "running").await;
    assert!(!pool.is_empty(), "no create that hung up late was kept");

    hang_ups(&rig, "POST", &paths(&pool, "/pause"), "{}").await;
    settled(&rig, &admin, "pauses hung up").await;
    follow_up(&rig, &pool, "/pause", &[204, 409]).await;
    settled(&rig, &admin, "pauses sent whole").await;

    let resume = json!({"timeout": 600}).to_string();
    hang_ups(&rig, "POST", &paths(&pool, "/resume"), &resume).await;
    settled(&rig, &admin, "resumes hung up").await;
    follow_up(&rig, &pool, "/resume", &[201, 409]).await;
    settled(&rig, &admin, "resumes sent whole").await;
    assert_eq!(
        listed(&rig, "running").await,
        pool,
        "every sandbox runs once more"
    );

    hang_ups(&rig, "DELETE", &paths(&pool, ""), "").await;
    settled(&rig, &admin, "kills hung up").await;
    follow_up(&rig, &pool, "", &[204, 404]).await;
    settled(&rig, &admin, "kills sent whole").await;
    assert!(
        on_nodes(&admin).await.is_empty(),
        "nothing runs after every kill"
    );
    rig.stop().await;
}
