//! Lifecycle moves that overlap, over the wire, against nodes slowed so that they do: a
//! kill in the middle of a pause or of a resume, and random interleavings of create,
//! pause, resume, connect, kill and timeout, whose answers are checked against the
//! nodes' truth as the mock-node admin API reports it.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;
use stampede::mock_admin::MockAdmin;

use crate::support::serve::*;

/// How long a condition the service promises may take to hold.
const DEADLINE: Duration = Duration::from_secs(5);

/// Wait until `cond` holds, up to [`DEADLINE`]; whether it did.
async fn eventually<F, Fut>(mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let until = Instant::now() + DEADLINE;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn admin(rig: &Rig) -> MockAdmin {
    MockAdmin::new(rig.http.clone(), &rig.fleet.admin_url(), None)
}

/// Whether a node runs `id`, as the mock-node admin API's `GET /nodes` says.
async fn alive_on_a_node(admin: &MockAdmin, id: &str) -> bool {
    let truth = admin.nodes().await.expect("admin GET /nodes");
    truth
        .nodes
        .iter()
        .any(|n| n.sandbox_ids.iter().any(|s| s == id))
}

/// The ids `GET /v2/sandboxes` lists in `state` (`running`, `paused`).
async fn listed(rig: &Rig, state: &str) -> BTreeSet<String> {
    let (s, body) = rig
        .get_json(&format!("/v2/sandboxes?state={state}&limit=100"))
        .await;
    assert_eq!(s, 200, "{body}");
    body.as_array()
        .expect("array")
        .iter()
        .map(|x| x["sandboxID"].as_str().expect("id").to_string())
        .collect()
}

/// Whether `id` exists anywhere: on a node, or as a paused snapshot of the service.
async fn exists(rig: &Rig, admin: &MockAdmin, id: &str) -> bool {
    alive_on_a_node(admin, id).await || listed(rig, "paused").await.contains(id)
}

async fn create(rig: &Rig) -> String {
    let (s, body) = rig
        .create(json!({"templateID": "base", "timeout": 600}))
        .await;
    assert_eq!(s, 201, "{body}");
    body["sandboxID"].as_str().expect("id").to_string()
}

/// A move of `id` is in flight: the service lists it neither running nor paused.
async fn in_a_move(rig: &Rig, id: &str) -> bool {
    !listed(rig, "running,paused").await.contains(id)
}

/// Nodes this slow make a pause or a resume last long enough to be overlapped.
const SLOW: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_during_a_pause_is_204_and_leaves_no_snapshot() {
    let rig = Arc::new(Rig::start(cluster(1, &[]), slow_nodes_config()).await);
    let id = create(&rig).await;
    rig.slow_all(SLOW).await;
    let pause = {
        let (rig, id) = (rig.clone(), id.clone());
        tokio::spawn(async move { rig.post(&format!("/sandboxes/{id}/pause"), None).await })
    };
    assert!(eventually(|| in_a_move(&rig, &id)).await, "the pause began");
    // E2B's `sandbox_get.go`: a sandbox being paused reads as paused.
    let (s, body) = rig.get_json(&format!("/sandboxes/{id}")).await;
    assert_eq!((s, body["state"].as_str()), (200, Some("paused")), "{body}");
    assert_eq!(rig.delete(&id).await, 204, "a kill during a pause");
    let (s, body) = pause.await.expect("pause task");
    assert_eq!(s, 204, "{body}");
    let admin = admin(&rig);
    assert!(
        !exists(&rig, &admin, &id).await,
        "no snapshot, nothing running"
    );
    let (s, body) = rig
        .post(&format!("/sandboxes/{id}/resume"), Some(json!({})))
        .await;
    assert_eq!(s, 404, "nothing to resume: {body}");
    Arc::into_inner(rig).expect("one owner").stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_during_a_resume_is_204_and_kills_it_on_its_node() {
    let rig = Arc::new(Rig::start(cluster(2, &[]), slow_nodes_config()).await);
    let id = create(&rig).await;
    let (s, body) = rig.post(&format!("/sandboxes/{id}/pause"), None).await;
    assert_eq!(s, 204, "{body}");
    rig.slow_all(SLOW).await;
    let resume = {
        let (rig, id) = (rig.clone(), id.clone());
        tokio::spawn(async move {
            rig.post(
                &format!("/sandboxes/{id}/resume"),
                Some(json!({"timeout": 600})),
            )
            .await
        })
    };
    assert!(
        eventually(|| in_a_move(&rig, &id)).await,
        "the resume began"
    );
    assert_eq!(rig.delete(&id).await, 204, "a kill during a resume");
    let admin = admin(&rig);
    assert!(
        eventually(|| async { !exists(&rig, &admin, &id).await }).await,
        "still on {:?} after the kill answered",
        rig.truth_node_of(&id)
    );
    let (s, body) = resume.await.expect("resume task");
    assert!(s == 201 || s == 404, "resume answered {s}: {body}");
    Arc::into_inner(rig).expect("one owner").stop().await;
}

/// One request of an interleaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Create,
    Pause,
    Resume,
    Connect,
    Kill,
    /// `POST /timeout` of 0 or 1 s: the evictor's kill joins the race.
    Timeout(u8),
}

/// A request sent `at_ms` after the case starts, to sandbox `slot` of the case's pool
/// (modulo its size then).
#[derive(Debug, Clone, Copy)]
struct Step {
    op: Op,
    slot: usize,
    at_ms: u64,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Create),
        3 => Just(Op::Pause),
        3 => Just(Op::Resume),
        2 => Just(Op::Connect),
        3 => Just(Op::Kill),
        1 => (0u8..2).prop_map(Op::Timeout),
    ]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (op(), 0usize..4, 0u64..240).prop_map(|(op, slot, at_ms)| Step { op, slot, at_ms }),
        4..12,
    )
}

/// Sandboxes each case starts with.
const POOL: usize = 2;

/// The answers an op may give with no fault but slowness; anything else (a 500) is a
/// finding.
fn expected(op: Op, status: u16) -> bool {
    let allowed: &[u16] = match op {
        Op::Create => &[201],
        Op::Pause => &[204, 404, 409],
        Op::Resume => &[201, 404, 409],
        Op::Connect => &[200, 201, 404, 409],
        Op::Kill => &[204, 404, 409],
        Op::Timeout(_) => &[204, 404, 409],
    };
    allowed.contains(&status)
}

/// Send `op` to `id`; its status.
async fn send(rig: &Rig, op: Op, id: &str) -> u16 {
    let path = |verb: &str| format!("/sandboxes/{id}/{verb}");
    match op {
        Op::Create => unreachable!("a create has no id"),
        Op::Pause => rig.post(&path("pause"), None).await.0,
        Op::Resume => {
            rig.post(&path("resume"), Some(json!({"timeout": 60})))
                .await
                .0
        }
        Op::Connect => {
            rig.post(&path("connect"), Some(json!({"timeout": 60})))
                .await
                .0
        }
        Op::Kill => rig.delete(id).await,
        Op::Timeout(t) => {
            rig.post(&path("timeout"), Some(json!({"timeout": t})))
                .await
                .0
        }
    }
}

/// Run one interleaving; the findings (empty: the answers agree with the truth).
async fn run_case(rig: &Arc<Rig>, steps: &[Step]) -> Vec<String> {
    let mut pool = Vec::new();
    for _ in 0..POOL {
        pool.push(create(rig).await);
    }
    let pool = Arc::new(Mutex::new(pool));
    let findings = Arc::new(Mutex::new(Vec::new()));
    let killed = Arc::new(Mutex::new(BTreeSet::new()));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for &step in steps {
        let (rig, pool, findings, killed) =
            (rig.clone(), pool.clone(), findings.clone(), killed.clone());
        tasks.spawn(async move {
            tokio::time::sleep_until((started + Duration::from_millis(step.at_ms)).into()).await;
            let note = |f: String| findings.lock().unwrap().push(f);
            if step.op == Op::Create {
                let id = create(&rig).await;
                pool.lock().unwrap().push(id);
                return;
            }
            let id = {
                let p = pool.lock().unwrap();
                p[step.slot % p.len()].clone()
            };
            let status = send(&rig, step.op, &id).await;
            if !expected(step.op, status) {
                note(format!("{:?} of {id} answered {status}", step.op));
            }
            let admin = admin(&rig);
            // A 404 says the id exists nowhere (a timeout's 404 also covers a paused
            // sandbox, as E2B's), and nothing brings an id back from nowhere.
            if status == 404
                && !matches!(step.op, Op::Timeout(_))
                && exists(&rig, &admin, &id).await
            {
                note(format!(
                    "{:?} of {id} answered 404 while it exists",
                    step.op
                ));
            }
            if step.op == Op::Kill && (status == 204 || status == 404) {
                killed.lock().unwrap().insert(id.clone());
                if !eventually(|| async { !alive_on_a_node(&admin, &id).await }).await {
                    note(format!(
                        "{id} alive on a node after its kill answered {status}"
                    ));
                }
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("step task");
    }
    let admin = admin(rig);
    // Killed stays killed once every request has been answered.
    let killed = killed.lock().unwrap().clone();
    for id in &killed {
        if exists(rig, &admin, id).await {
            findings
                .lock()
                .unwrap()
                .push(format!("{id} came back after its kill"));
        }
    }
    // Clean up through the API, which must agree with the truth once more.
    let pool = pool.lock().unwrap().clone();
    for id in &pool {
        let s = rig.delete(id).await;
        if s != 204 && s != 404 {
            findings
                .lock()
                .unwrap()
                .push(format!("cleanup kill of {id} answered {s}"));
        }
        if !eventually(|| async { !exists(rig, &admin, id).await }).await {
            findings
                .lock()
                .unwrap()
                .push(format!("{id} exists after its cleanup kill"));
        }
    }
    let f = findings.lock().unwrap().clone();
    f
}

/// Random interleavings against two nodes slowed 60 ms per RPC: every answer is one E2B
/// gives, a kill answered 204 or 404 leaves the id on no node, and a 404 is only given
/// for an id that exists nowhere. Bounded: 6 cases of at most 11 requests sent within
/// 240 ms, each case well under a second.
#[test]
fn interleaved_lifecycle_answers_agree_with_the_nodes() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let rig = Arc::new(rt.block_on(async {
        let rig = Rig::start(cluster(2, &[]), slow_nodes_config()).await;
        rig.slow_all(Duration::from_millis(60)).await;
        rig
    }));
    let config = Config {
        cases: 6,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&steps(), |steps| {
        let findings = rt.block_on(run_case(&rig, &steps));
        if findings.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(findings.join("; ")))
        }
    });
    rt.block_on(Arc::into_inner(rig).expect("one owner").stop());
    if let Err(e) = result {
        panic!("{e}");
    }
}
