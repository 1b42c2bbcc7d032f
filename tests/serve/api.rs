//! The placement service over the real wire: mock-node fleet + `stampede serve` on
//! loopback, driven through HTTP like an E2B SDK would.

use crate::support::serve as serve_common;

use std::collections::BTreeSet;

use serde_json::{json, Value};
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::AccountingMode;
use stampede::serve::DEFAULT_API_KEY;

/// E2B's `handlers/sandbox_create.go` + `shared/pkg/id/id.go`: `i` + 20 of [a-z0-9].
fn is_e2b_sandbox_id(id: &str) -> bool {
    id.len() == 21
        && id.starts_with('i')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

#[tokio::test]
async fn create_list_delete_match_node_truth() {
    let rig = Rig::start(cluster(3, &[]), serve_config(AccountingMode::Reconciled)).await;
    let mut ids = Vec::new();
    for i in 0..9 {
        let (status, body) = rig
            .create(json!({"templateID": "base", "timeout": 300, "cpuCount": 1 + i % 2}))
            .await;
        assert_eq!(status, 201, "{body}");
        let id = body["sandboxID"].as_str().expect("sandboxID").to_string();
        assert!(is_e2b_sandbox_id(&id), "{id}");
        assert_eq!(body["templateID"], "base");
        // E2B's `shared/pkg/consts/sandboxes.go`.
        assert_eq!(body["clientID"], "6532622b");
        assert!(body["envdVersion"].as_str().is_some());
        ids.push(id);
    }
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        9,
        "ids are unique"
    );

    // Listing agrees with the nodes' own inventories, node by node.
    for path in ["/sandboxes", "/v2/sandboxes"] {
        let (status, body) = rig.get_json(path).await;
        assert_eq!(status, 200);
        let listed: Vec<&Value> = body.as_array().unwrap().iter().collect();
        assert_eq!(listed.len(), 9, "{path}");
        for s in listed {
            let id = s["sandboxID"].as_str().unwrap();
            assert_eq!(s["state"], "running");
            assert_eq!(
                rig.truth_node_of(id).as_deref(),
                s["nodeID"].as_str(),
                "{id} is where the service says"
            );
        }
    }

    for id in &ids[..4] {
        assert_eq!(rig.delete(id).await, 204);
        assert_eq!(rig.delete(id).await, 404, "second kill of {id}");
        assert_eq!(rig.truth_node_of(id), None);
    }
    let truth_ids: BTreeSet<String> = rig
        .fleet
        .truth()
        .nodes
        .into_iter()
        .flat_map(|n| n.sandbox_ids)
        .collect();
    let expect: BTreeSet<String> = ids[4..].iter().cloned().collect();
    assert_eq!(truth_ids, expect);

    // After one sync, what the service believes equals what the nodes hold.
    rig.svc.sync_now().await;
    let nodes = rig.nodes().await;
    for t in rig.fleet.truth().nodes {
        let n = &nodes[&t.id];
        assert_eq!(n["status"], "ready");
        assert_eq!(
            n["metrics"]["allocatedCPU"].as_u64(),
            Some(t.allocated_vcpu),
            "{}",
            t.id
        );
        assert_eq!(
            n["sandboxCount"].as_u64(),
            Some(t.sandbox_count),
            "{}",
            t.id
        );
        assert_eq!(n["metrics"]["cpuCount"].as_u64(), Some(16));
        assert_eq!(n["sandboxStartingCount"].as_u64(), Some(0));
    }
    let created: u64 = nodes
        .values()
        .map(|n| n["createSuccesses"].as_u64().unwrap())
        .sum();
    assert_eq!(created, 9);
    rig.stop().await;
}

#[tokio::test]
async fn optimistic_belief_tracks_creates_between_syncs() {
    // node-00 idle, the others loaded: reported scoring would pile everything on node-00;
    // optimistic accounting sees each create at once and spreads.
    let rig = Rig::start(
        cluster(3, &[0, 4, 4]),
        serve_config(AccountingMode::Optimistic),
    )
    .await;
    for _ in 0..12 {
        let (status, body) = rig
            .create(json!({"templateID": "base", "timeout": 300}))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let nodes = rig.nodes().await;
    for t in rig.fleet.truth().nodes {
        let believed = nodes[&t.id]["metrics"]["allocatedCPU"].as_u64().unwrap();
        assert_eq!(believed, t.allocated_vcpu, "{} without any sync", t.id);
        assert!(t.sandbox_count >= 2, "{} got {}", t.id, t.sandbox_count);
    }
    rig.stop().await;
}

#[tokio::test]
async fn auth_and_error_paths() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Reported)).await;
    let post = |key: Option<&str>, body: &str| {
        let mut r = rig
            .http
            .post(rig.url("/sandboxes"))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(k) = key {
            r = r.header("X-API-Key", k);
        }
        r.send()
    };
    for (key, body, want) in [
        (None, r#"{"templateID":"base"}"#, 401),
        (Some("e2b_wrong"), r#"{"templateID":"base"}"#, 401),
        (Some(DEFAULT_API_KEY), r#"{"templateID":"#, 400),
        (Some(DEFAULT_API_KEY), r#"{"timeout":15}"#, 400),
        (Some(DEFAULT_API_KEY), r#"{"templateID":""}"#, 400),
        (Some(DEFAULT_API_KEY), r#"[1,2]"#, 400),
        (
            Some(DEFAULT_API_KEY),
            r#"{"templateID":"base","cpuCount":0}"#,
            400,
        ),
    ] {
        let r = post(key, body).await.unwrap();
        assert_eq!(r.status().as_u16(), want, "{key:?} {body}");
        let err: Value = r.json().await.expect("JSON error body");
        assert_eq!(err["code"].as_u64(), Some(want as u64), "{err}");
        assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let r = rig.http.get(rig.url("/sandboxes")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(rig.delete("inosuchsandbox000000").await, 404);
    assert_eq!(rig.get_json("/nodes/node-99").await.0, 404);
    assert_eq!(rig.get_json("/no/such/route").await.0, 404);
    let (status, detail) = rig.get_json("/nodes/node-00").await;
    assert_eq!(status, 200);
    assert_eq!(detail["id"], "node-00");
    assert!(detail["cachedBuilds"].is_array());

    let health = rig.http.get(rig.url("/health")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 204);
    let (status, _) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 201);
    let metrics = rig
        .http
        .get(rig.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("stampede_serve_creates_ok_total{accounting=\"reported\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("stampede_serve_decision_seconds_count{accounting=\"reported\"} 1"));
    rig.stop().await;
}

/// Only what E2B's public OpenAPI promises: camelCase JSON, X-API-Key, 201 on create,
/// 200 on list, 204 on kill. No stampede extension is used or relied on.
#[tokio::test]
async fn an_e2b_openapi_client_can_create_list_and_kill() {
    let rig = Rig::start(cluster(3, &[]), serve_config(AccountingMode::Optimistic)).await;
    let key = DEFAULT_API_KEY;
    let created = rig
        .http
        .post(rig.url("/sandboxes"))
        .header("X-API-Key", key)
        .json(&json!({
            "templateID": "base",
            "timeout": 60,
            "autoPause": false,
            "secure": true,
            "metadata": {"purpose": "sdk-test"},
            "envVars": {"A": "1"}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let sbx: Value = created.json().await.unwrap();
    for field in ["templateID", "sandboxID", "clientID", "envdVersion"] {
        assert!(sbx[field].is_string(), "Sandbox.{field} missing in {sbx}");
    }
    let id = sbx["sandboxID"].as_str().unwrap();

    let list: Value = rig
        .http
        .get(rig.url("/v2/sandboxes?state=running&limit=100"))
        .header("X-API-Key", key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mine = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sandboxID"] == id)
        .expect("listed");
    for field in [
        "templateID",
        "sandboxID",
        "clientID",
        "startedAt",
        "endAt",
        "cpuCount",
        "memoryMB",
        "diskSizeMB",
        "state",
        "envdVersion",
    ] {
        assert!(
            !mine[field].is_null(),
            "ListedSandbox.{field} missing in {mine}"
        );
    }
    assert_eq!(mine["metadata"]["purpose"], "sdk-test");
    assert_eq!(mine["cpuCount"], 1);
    assert_eq!(mine["memoryMB"], 1024);

    let killed = rig
        .http
        .delete(rig.url(&format!("/sandboxes/{id}")))
        .header("X-API-Key", key)
        .send()
        .await
        .unwrap();
    assert_eq!(killed.status().as_u16(), 204);
    let list: Value = rig.get_json("/v2/sandboxes").await.1;
    assert_eq!(list.as_array().map(Vec::len), Some(0));
    rig.stop().await;
}

#[tokio::test]
async fn v2_listing_pages_with_next_token() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    for _ in 0..5 {
        assert_eq!(
            rig.create(json!({"templateID": "base", "timeout": 300}))
                .await
                .0,
            201
        );
    }
    let mut seen = BTreeSet::new();
    let mut token: Option<String> = None;
    for _ in 0..10 {
        let mut url = rig.url("/v2/sandboxes?limit=2");
        if let Some(t) = &token {
            url.push_str(&format!("&nextToken={t}"));
        }
        let r = rig
            .http
            .get(url)
            .header("X-API-Key", DEFAULT_API_KEY)
            .send()
            .await
            .unwrap();
        token = r
            .headers()
            .get("x-next-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let page: Vec<Value> = r.json().await.unwrap();
        assert!(page.len() <= 2);
        for s in page {
            assert!(seen.insert(s["sandboxID"].as_str().unwrap().to_string()));
        }
        if token.is_none() {
            break;
        }
    }
    assert_eq!(seen.len(), 5);
    rig.stop().await;
}

/// A create naming a template serve does not know is refused as E2B's create refuses
/// it (404 `template '<id>' not found`); a configured template is accepted.
#[tokio::test]
async fn an_unknown_template_is_refused_not_created() {
    let mut cfg = serve_config(AccountingMode::Reported);
    cfg.templates = vec!["desktop".into()];
    let rig = Rig::start(cluster(2, &[]), cfg).await;
    let (status, err) = rig.create(json!({"templateID": "nosuchtemplate"})).await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["code"], 404);
    assert_eq!(err["message"], "template 'nosuchtemplate' not found");
    assert_eq!(rig.sandboxes_on_nodes(), 0, "nothing was placed");
    for t in ["base", "desktop", "desktop:v1"] {
        let (status, body) = rig.create(json!({"templateID": t})).await;
        assert_eq!(status, 201, "{t}: {body}");
    }
    rig.stop().await;
}

/// A route of E2B's API that serve lacks answers 501 naming it, not a 404 that an SDK
/// reads as a missing sandbox; a route E2B lacks stays 404.
#[tokio::test]
async fn an_e2b_route_serve_lacks_is_501_not_404() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Reported)).await;
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["sandboxID"].as_str().unwrap().to_string();
    let r = rig
        .http
        .put(rig.url(&format!("/sandboxes/{id}/network")))
        .header("X-API-Key", DEFAULT_API_KEY)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 501);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["code"], 501);
    assert_eq!(
        err["message"],
        "PUT /sandboxes/{sandboxID}/network is not supported by stampede serve"
    );
    assert_eq!(rig.get_json("/templates").await.0, 501);
    assert_eq!(rig.get_json("/no/such/route").await.0, 404);
    rig.stop().await;
}

/// A served path's other E2B methods (serve has only `DELETE /templates/{templateID}`)
/// were axum's bare 405 with an empty body: they are 501 naming the operation as every
/// unserved E2B route is; a method neither E2B nor serve has on a known path is a JSON
/// 405 with `Allow`.
#[tokio::test]
async fn another_method_on_a_served_path_is_501_or_405_not_a_bare_405() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Reported)).await;
    let send = |method: &str, path: &str| {
        rig.http
            .request(method.parse().unwrap(), rig.url(path))
            .header("X-API-Key", DEFAULT_API_KEY)
            .send()
    };
    for (method, op) in [
        ("GET", "GET /templates/{templateID}"),
        ("POST", "POST /templates/{templateID}"),
        ("PATCH", "PATCH /templates/{templateID}"),
    ] {
        let r = send(method, "/templates/base").await.expect("request sent");
        assert_eq!(r.status().as_u16(), 501, "{method}");
        let err: Value = r.json().await.expect("a JSON error");
        assert_eq!(err["code"], 501);
        assert_eq!(
            err["message"],
            format!("{op} is not supported by stampede serve")
        );
    }
    for (method, path, allow) in [
        ("PUT", "/templates/base", "GET, POST, DELETE, PATCH"),
        ("PUT", "/sandboxes/abc", "GET, DELETE"),
        ("TRACE", "/teams", "GET"),
        ("DELETE", "/v2/sandboxes", "GET, POST"),
    ] {
        let r = send(method, path).await.expect("request sent");
        assert_eq!(r.status().as_u16(), 405, "{method} {path}");
        let got = r
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_string());
        assert_eq!(got.as_deref(), Some(allow), "{method} {path}");
        let err: Value = r.json().await.expect("a JSON error");
        assert_eq!(err["code"], 405, "{method} {path}");
    }
    let r = send("GET", "/no/such/route").await.expect("request sent");
    assert_eq!(r.status().as_u16(), 404);
    rig.stop().await;
}

/// `DELETE /templates/tags` (E2B's tag removal, not implemented) was taken as the delete
/// of a snapshot template named `tags`: it is 501, and the snapshot stays (deletable by
/// its id, as in E2B, whose router also prefers the literal path).
#[tokio::test]
async fn delete_of_templates_tags_is_501_not_a_snapshot_delete() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Reported)).await;
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["sandboxID"].as_str().unwrap().to_string();
    let (status, snap) = rig
        .post(
            &format!("/sandboxes/{id}/snapshots"),
            Some(json!({"name": "tags"})),
        )
        .await;
    assert_eq!(status, 201, "{snap}");
    let r = rig
        .http
        .delete(rig.url("/templates/tags"))
        .header("X-API-Key", DEFAULT_API_KEY)
        .send()
        .await
        .expect("request sent");
    assert_eq!(r.status().as_u16(), 501);
    let err: Value = r.json().await.expect("a JSON error");
    assert_eq!(
        err["message"],
        "DELETE /templates/tags is not supported by stampede serve"
    );
    let (status, page) = rig.get_json("/snapshots?name=tags").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page.as_array().map(Vec::len),
        Some(1),
        "the snapshot stays: {page}"
    );
    rig.stop().await;
}
