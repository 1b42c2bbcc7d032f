//! The admin `/nodes` routes and request validation as E2B's `spec/openapi.yml` types
//! them, over the real wire.

use crate::support::serve as serve_common;

use serde_json::{json, Value};
use serve_common::{cluster, serve_config, Rig, TEST_ADMIN_TOKEN};
use stampede::placement::AccountingMode;
use stampede::serve::DEFAULT_API_KEY;

async fn admin(
    rig: &Rig,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = rig
        .http
        .request(method, rig.url(path))
        .header("X-Admin-Token", TEST_ADMIN_TOKEN);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("request sent");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// E2B's `spec/openapi.yml` (`Node`, `NodeMetrics` required lists; `/nodes` security
/// `AdminApiKeyAuth` only) and `orchestrator/admin.go` (sorted by id).
#[tokio::test]
async fn nodes_have_every_required_field_sorted_by_id_admin_token_only() {
    let rig = Rig::start(cluster(12, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;
    let (status, body) = admin(&rig, reqwest::Method::GET, "/nodes", None).await;
    assert_eq!(status, 200, "{body}");
    let nodes = body.as_array().expect("array");
    let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted);
    assert_eq!(ids.len(), 12);
    for n in nodes {
        for f in [
            "id",
            "serviceInstanceID",
            "clusterID",
            "status",
            "statusChangedAt",
            "sandboxCount",
            "metrics",
            "createSuccesses",
            "createFails",
            "sandboxStartingCount",
            "version",
            "commit",
            "machineInfo",
        ] {
            assert!(!n[f].is_null(), "Node.{f} missing in {n}");
        }
        for f in [
            "allocatedCPU",
            "allocatedMemoryBytes",
            "cpuPercent",
            "memoryUsedBytes",
            "cpuCount",
            "memoryTotalBytes",
            "disks",
            "hugePagesTotal",
            "hugePagesUsed",
            "hugePagesReserved",
            "hugePageSizeBytes",
        ] {
            assert!(!n["metrics"][f].is_null(), "NodeMetrics.{f} missing in {n}");
        }
        assert_eq!(n["clusterID"], "00000000-0000-0000-0000-000000000000");
    }
    let with_key = rig
        .http
        .get(rig.url("/nodes"))
        .header("X-API-Key", DEFAULT_API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(
        with_key.status().as_u16(),
        401,
        "an API key is no admin token"
    );
    let wrong = rig
        .http
        .get(rig.url("/nodes"))
        .header("X-Admin-Token", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    rig.stop().await;
}

/// E2B's `spec/openapi.yml`: `clusterID` is `format: uuid` (a 400 otherwise); nodes of
/// another cluster are not listed.
#[tokio::test]
async fn cluster_id_must_be_a_uuid() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    let get = reqwest::Method::GET;
    assert_eq!(
        admin(&rig, get.clone(), "/nodes?clusterID=abc", None)
            .await
            .0,
        400
    );
    let (s, other) = admin(
        &rig,
        get.clone(),
        "/nodes?clusterID=6f1d3c2a-0000-4000-8000-000000000001",
        None,
    )
    .await;
    assert_eq!((s, other), (200, json!([])));
    let (s, local) = admin(
        &rig,
        get.clone(),
        "/nodes?clusterID=00000000-0000-0000-0000-000000000000",
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(local.as_array().map(Vec::len), Some(2));
    assert_eq!(
        admin(&rig, get, "/nodes/node-00?clusterID=x", None).await.0,
        400
    );
    rig.stop().await;
}

/// E2B's `handlers/admin.go` (`PostNodesNodeID`) and `nodemanager/status.go`: a status
/// change is 204 and the node reports it from the next sync (draining: no new
/// sandboxes); `connecting` cannot be set; an unknown node is a 404.
#[tokio::test]
async fn post_node_status_drains_the_node_from_the_next_sync() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;
    let post = reqwest::Method::POST;
    let (s, body) = admin(
        &rig,
        post.clone(),
        "/nodes/node-00",
        Some(json!({"status": "draining"})),
    )
    .await;
    assert_eq!(s, 204, "{body}");
    let before = rig.nodes().await["node-00"]["statusChangedAt"].clone();
    rig.svc.sync_now().await;
    let node = rig.nodes().await["node-00"].clone();
    assert_eq!(node["status"], "draining");
    assert_ne!(node["statusChangedAt"], before, "the change time moved");
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error_code"], "sandbox_no_compatible_node");
    for (path, body, want) in [
        ("/nodes/node-00", json!({"status": "connecting"}), 400),
        ("/nodes/node-00", json!({"status": "sleeping"}), 400),
        ("/nodes/node-00", json!({}), 400),
        (
            "/nodes/node-00",
            json!({"status": "ready", "clusterID": "x"}),
            400,
        ),
        ("/nodes/node-99", json!({"status": "ready"}), 404),
        ("/nodes/node-00", json!({"status": "ready"}), 204),
    ] {
        assert_eq!(
            admin(&rig, post.clone(), path, Some(body.clone())).await.0,
            want,
            "{path} {body}"
        );
    }
    rig.svc.sync_now().await;
    assert_eq!(rig.create(json!({"templateID": "base"})).await.0, 201);
    rig.stop().await;
}

/// E2B validates requests against `spec/openapi.yml`: `startedAfter` is a `date-time`,
/// `state` items and `order` are enums, `limit` is 1..=100, the metadata filter is
/// `key=value` pairs, and the typed `NewSandbox` properties are type-checked (unknown
/// ones are allowed: the schema does not forbid them).
#[tokio::test]
async fn parameters_and_bodies_are_checked_as_the_spec_types_them() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    let (s, a) = rig
        .create(json!({"templateID": "base", "metadata": {"team": "red"}, "someFutureField": 1}))
        .await;
    assert_eq!(s, 201, "{a}");
    let (s, _) = rig
        .create(json!({"templateID": "base", "metadata": {"team": "blue"}}))
        .await;
    assert_eq!(s, 201);
    for (path, want) in [
        ("/v2/sandboxes?startedAfter=yesterday", 400),
        ("/v2/sandboxes?startedAfter=2020-01-01T00:00:00Z", 200),
        (
            "/v2/sandboxes?startedAfter=2020-01-01T01:00:00.5%2B01:00",
            200,
        ),
        ("/v2/sandboxes?state=running,gone", 400),
        ("/v2/sandboxes?state=", 400),
        ("/v2/sandboxes?order=sideways", 400),
        ("/v2/sandboxes?limit=0", 400),
        ("/v2/sandboxes?limit=101", 400),
        ("/v2/sandboxes?metadata=novalue", 400),
        ("/sandboxes?metadata=a%3Db%3Dc", 400),
    ] {
        assert_eq!(rig.get_json(path).await.0, want, "{path}");
    }
    let (_, red) = rig.get_json("/v2/sandboxes?metadata=team%3Dred").await;
    assert_eq!(red.as_array().map(Vec::len), Some(1), "{red}");
    assert_eq!(red[0]["metadata"]["team"], "red");
    let (_, future) = rig
        .get_json("/v2/sandboxes?startedAfter=2999-01-01T00:00:00Z")
        .await;
    assert_eq!(future, json!([]));
    let (_, paused) = rig.get_json("/v2/sandboxes?state=paused").await;
    assert_eq!(paused, json!([]));
    for body in [
        json!({"templateID": "base", "autoPause": "yes"}),
        json!({"templateID": "base", "timeout": -1}),
        json!({"templateID": "base", "timeout": 2_147_483_648u64}),
        json!({"templateID": "base", "metadata": null}),
        json!({"templateID": "base", "envVars": {"A": 1}}),
        json!({"templateID": "bad template!"}),
        json!({"templateID": ""}),
    ] {
        assert_eq!(rig.create(body.clone()).await.0, 400, "{body}");
    }
    rig.stop().await;
}
