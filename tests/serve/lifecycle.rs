//! The lifecycle beyond create over the wire: a resume lands on its origin node when it
//! can accept, elsewhere through Best-of-K when it cannot; pause frees the node's vCPU;
//! E2B's codes for wrong states, unknown ids and bad timeouts.

use mock_node::api::FaultKind;
use serde_json::{json, Value};
use stampede::placement::AccountingMode;

use crate::support::serve::*;

async fn create(rig: &Rig) -> String {
    let (s, body) = rig
        .create(json!({"templateID": "base", "timeout": 600, "cpuCount": 2}))
        .await;
    assert_eq!(s, 201, "{body}");
    body["sandboxID"].as_str().expect("id").to_string()
}

async fn pause(rig: &Rig, id: &str) {
    let (s, body) = rig.post(&format!("/sandboxes/{id}/pause"), None).await;
    assert_eq!(s, 204, "{body}");
}

async fn resume(rig: &Rig, id: &str) -> (u16, Value) {
    rig.post(
        &format!("/sandboxes/{id}/resume"),
        Some(json!({"timeout": 600})),
    )
    .await
}

/// A sandbox on a node other than `node-00`, which Best-of-K favours (the others carry
/// 40 of their 64 vCPU of capacity): at most 40 creates.
async fn sandbox_off_the_favourite(rig: &Rig) -> (String, String) {
    for _ in 0..40 {
        let id = create(rig).await;
        let node = rig.truth_node_of(&id).expect("runs somewhere");
        if node != "node-00" {
            return (id, node);
        }
    }
    panic!("40 creates all landed on node-00");
}

#[tokio::test]
async fn resume_lands_on_its_origin_node_when_it_can_accept() {
    let rig = Rig::start(
        cluster(4, &[0, 40, 40, 40]),
        serve_config(AccountingMode::Optimistic),
    )
    .await;
    rig.svc.sync_now().await;
    let (id, origin) = sandbox_off_the_favourite(&rig).await;
    // Best-of-K alone sends a resume to node-00 whenever it samples it (3 draws in 4);
    // five resumes in a row on the origin do not happen by chance.
    for round in 0..5 {
        pause(&rig, &id).await;
        assert_eq!(rig.truth_node_of(&id), None, "paused: off every node");
        let (s, body) = resume(&rig, &id).await;
        assert_eq!(s, 201, "round {round}: {body}");
        assert_eq!(body["sandboxID"], id.as_str());
        assert_eq!(
            rig.truth_node_of(&id).as_deref(),
            Some(origin.as_str()),
            "round {round}"
        );
        rig.svc.sync_now().await;
    }
    rig.stop().await;
}

#[tokio::test]
async fn resume_goes_through_best_of_k_when_its_origin_cannot_accept() {
    let rig = Rig::start(cluster(4, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;

    // An origin that refuses every Create: tried first, refused, then Best-of-K.
    let a = create(&rig).await;
    let origin_a = rig.truth_node_of(&a).expect("placed");
    pause(&rig, &a).await;
    let exhaust = rig.fault(FaultKind::Exhaust, &origin_a).await;
    let (s, body) = resume(&rig, &a).await;
    assert_eq!(s, 201, "{body}");
    let landed = rig.truth_node_of(&a).expect("resumed");
    assert_ne!(landed, origin_a);
    let refused = rig
        .fleet
        .truth()
        .nodes
        .into_iter()
        .find(|n| n.id == origin_a)
        .map(|n| n.creates_rejected.values().sum::<u64>())
        .unwrap_or(0);
    assert!(refused >= 1, "the origin was tried first and refused");
    // Healed: an exhausted node that is also the emptiest wins every draw it is in, and
    // a refusal excludes nothing, so it would hold the next placements (E2B's herd).
    rig.fleet.heal_fault(exhaust).await.expect("healed");

    // An origin draining: never tried.
    let mut b = None;
    for _ in 0..40 {
        let id = create(&rig).await;
        if rig.truth_node_of(&id).as_deref() != Some(origin_a.as_str()) {
            b = Some(id);
            break;
        }
    }
    let b = b.expect("a sandbox off the exhausted node within 40 creates");
    let origin_b = rig.truth_node_of(&b).expect("placed");
    pause(&rig, &b).await;
    let (s, _) = admin_post(
        &rig,
        &format!("/nodes/{origin_b}"),
        json!({"status": "draining"}),
    )
    .await;
    assert_eq!(s, 204);
    rig.svc.sync_now().await;
    let before = rig
        .fleet
        .truth()
        .nodes
        .into_iter()
        .find(|n| n.id == origin_b)
        .map(|n| n.creates_ok + n.creates_rejected.values().sum::<u64>());
    let (s, body) = resume(&rig, &b).await;
    assert_eq!(s, 201, "{body}");
    assert_ne!(rig.truth_node_of(&b).as_deref(), Some(origin_b.as_str()));
    let after = rig
        .fleet
        .truth()
        .nodes
        .into_iter()
        .find(|n| n.id == origin_b)
        .map(|n| n.creates_ok + n.creates_rejected.values().sum::<u64>());
    assert_eq!(before, after, "a draining origin gets no Create");
    rig.stop().await;
}

async fn admin_post(rig: &Rig, path: &str, body: Value) -> (u16, Value) {
    let r = rig
        .http
        .post(rig.url(path))
        .header("X-Admin-Token", TEST_ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn pause_frees_the_vcpu_and_wrong_states_get_e2bs_codes() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;
    let id = create(&rig).await;
    let node = rig.truth_node_of(&id).expect("placed");
    let allocated = |rig: &Rig| rig.allocated_vcpu(&node);
    let running = allocated(&rig);
    pause(&rig, &id).await;
    assert_eq!(allocated(&rig), running - 2, "the node let its 2 vCPU go");
    let (s, listed) = rig.get_json("/v2/sandboxes?state=paused").await;
    assert_eq!(s, 200);
    assert_eq!(listed[0]["sandboxID"], id.as_str());
    assert_eq!(listed[0]["state"], "paused");
    let (_, running_list) = rig.get_json("/v2/sandboxes?state=running").await;
    assert_eq!(running_list, json!([]));

    let p = |tail: &str| format!("/sandboxes/{id}/{tail}");
    let unknown = "i00000000000000000000";
    let u = |tail: &str| format!("/sandboxes/{unknown}/{tail}");
    for (path, body, want) in [
        // Wrong states.
        (p("pause"), None, 409),
        (p("timeout"), Some(json!({"timeout": 30})), 404),
        (p("refreshes"), Some(json!({"duration": 30})), 404),
        (p("fork"), None, 409),
        // Unknown ids.
        (u("pause"), None, 404),
        (u("resume"), None, 404),
        (u("connect"), Some(json!({"timeout": 30})), 404),
        (u("timeout"), Some(json!({"timeout": 30})), 404),
        (u("refreshes"), None, 404),
        (u("fork"), None, 404),
        // Bad timeouts and counts.
        (p("resume"), Some(json!({"timeout": 0})), 400),
        (p("resume"), Some(json!({"timeout": -1})), 400),
        (p("resume"), Some(json!({"timeout": 86_401})), 400),
        (p("resume"), Some(json!({"timeout": "60"})), 400),
        (p("connect"), None, 400),
        (p("connect"), Some(json!({})), 400),
        (p("connect"), Some(json!({"timeout": null})), 400),
        (
            p("connect"),
            Some(json!({"timeout": 2_147_483_648_i64})),
            400,
        ),
        (p("timeout"), Some(json!({"timeout": -5})), 400),
        (p("refreshes"), Some(json!({"duration": 3601})), 400),
        (p("fork"), Some(json!({"count": 0})), 400),
        (p("fork"), Some(json!({"count": 101})), 400),
        (p("pause"), Some(json!([1])), 400),
    ] {
        let (s, b) = rig.post(&path, body.clone()).await;
        assert_eq!(s, want, "POST {path} {body:?}: {b}");
        assert_eq!(b["code"], want, "E2B's Error body: {b}");
    }

    let (s, body) = rig.post(&p("connect"), Some(json!({"timeout": 60}))).await;
    assert_eq!(s, 201, "connect resumes a paused sandbox: {body}");
    let (s, _) = rig.post(&p("connect"), Some(json!({"timeout": 60}))).await;
    assert_eq!(s, 200, "connect to a running one");
    let (s, _) = resume(&rig, &id).await;
    assert_eq!(s, 409, "resume of a running sandbox");
    let (s, forks) = rig.post(&p("fork"), Some(json!({"count": 2}))).await;
    assert_eq!(s, 201, "{forks}");
    let forks = forks.as_array().expect("one result per fork").clone();
    assert_eq!(forks.len(), 2);
    for f in &forks {
        let fid = f["sandbox"]["sandboxID"]
            .as_str()
            .expect("each fork started");
        assert!(rig.truth_node_of(fid).is_some());
    }
    assert_eq!(rig.delete(&id).await, 204);
    let (s, _) = rig.post(&p("connect"), Some(json!({"timeout": 60}))).await;
    assert_eq!(s, 404, "connect to a killed sandbox");
    rig.stop().await;
}

/// A resume that times out: its origin refuses at once, every other node hangs. With
/// `resume_origin_remap` the first node that tried the Create becomes the origin (E2B's
/// `maybeRemapResumeOriginNode` behind `resume-origin-node-remap`); off, as E2B's flag
/// by default, the origin stays.
#[tokio::test]
async fn timed_out_resume_remaps_its_origin_only_when_asked() {
    for remap in [false, true] {
        let mut cfg = serve_config(AccountingMode::Optimistic);
        cfg.request_timeout = std::time::Duration::from_secs(2);
        cfg.resume_origin_remap = remap;
        // Four nodes, K = 3: the origin, again the best-scored node once paused, is out
        // of one draw in four, so a hanging node gets tried (with three, every draw
        // would hold the origin and the resume would end refused, E2B's herd).
        let rig = Rig::start(cluster(4, &[]), cfg).await;
        rig.svc.sync_now().await;
        let id = create(&rig).await;
        let origin = rig.truth_node_of(&id).expect("placed");
        pause(&rig, &id).await;
        let mut faults = vec![rig.fault(FaultKind::Exhaust, &origin).await];
        for n in rig.fleet.nodes() {
            if n.id != origin {
                faults.push(rig.fault(FaultKind::Hang, &n.id).await);
            }
        }
        let (s, body) = resume(&rig, &id).await;
        assert_eq!(s, 504, "remap {remap}: {body}");
        for f in faults {
            rig.fleet.heal_fault(f).await.expect("healed");
        }
        let (s, listed) = rig.get_json(&format!("/sandboxes/{id}")).await;
        assert_eq!(s, 200, "{listed}");
        assert_eq!(
            listed["state"], "paused",
            "a failed resume leaves it paused"
        );
        let now = listed["nodeID"].as_str().expect("origin shown").to_string();
        if remap {
            assert_ne!(now, origin, "remapped to the node that tried the Create");
        } else {
            assert_eq!(now, origin, "the origin stays without the flag");
        }
        rig.stop().await;
    }
}

/// `timeout: 0` on a connect to a paused sandbox resumes it with a zero lifetime, as
/// E2B's connect sets no lower bound on it: answered 201, then the evictor ends it.
#[tokio::test]
async fn connect_with_a_zero_timeout_resumes_a_sandbox_that_is_due_at_once() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;
    let id = create(&rig).await;
    pause(&rig, &id).await;
    let (s, body) = rig
        .post(
            &format!("/sandboxes/{id}/connect"),
            Some(json!({"timeout": 0})),
        )
        .await;
    assert_eq!(s, 201, "connect resumes it: {body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (s, _) = rig.get_json(&format!("/sandboxes/{id}")).await;
        if s == 404 && rig.truth_node_of(&id).is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still there 20 s after its zero lifetime (GET {s})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    rig.stop().await;
}
