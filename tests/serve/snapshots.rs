//! The snapshot routes over the wire: a snapshot leaves its sandbox running where it
//! was, named snapshots share a template, the list pages by E2B's cursor, a sandbox is
//! created from a snapshot id, and E2B's codes for bad input, wrong states and a busy
//! node.

use mock_node::api::{FailureCode, FaultKind};
use serde_json::{json, Value};
use stampede::placement::AccountingMode;
use stampede::serve::DEFAULT_API_KEY;

use crate::support::serve::*;

async fn create(rig: &Rig) -> String {
    let (s, body) = rig
        .create(json!({"templateID": "base", "timeout": 600, "cpuCount": 2}))
        .await;
    assert_eq!(s, 201, "{body}");
    body["sandboxID"].as_str().expect("id").to_string()
}

async fn snapshot(rig: &Rig, id: &str, body: Value) -> (u16, Value) {
    rig.post(&format!("/sandboxes/{id}/snapshots"), Some(body))
        .await
}

/// GET `path` with the API key: (status, body, `X-Next-Token`).
async fn list(rig: &Rig, path: &str) -> (u16, Value, Option<String>) {
    let r = rig
        .http
        .get(rig.url(path))
        .header("X-API-Key", DEFAULT_API_KEY)
        .send()
        .await
        .expect("request sent");
    let status = r.status().as_u16();
    let next = r
        .headers()
        .get("x-next-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, r.json().await.unwrap_or(Value::Null), next)
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|i| i["snapshotID"].as_str().expect("snapshotID"))
        .collect()
}

#[tokio::test]
async fn snapshot_keeps_the_sandbox_running_and_lists_by_template() {
    let rig = Rig::start(cluster(2, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;
    let id = create(&rig).await;
    let node = rig.truth_node_of(&id).expect("placed");
    let allocated = |rig: &Rig| rig.allocated_vcpu(&node);
    let before = allocated(&rig);

    let (s, bare) = snapshot(&rig, &id, json!({})).await;
    assert_eq!(s, 201, "{bare}");
    let bare_id = bare["snapshotID"].as_str().expect("snapshotID").to_string();
    assert!(bare_id.ends_with(":default"), "{bare}");
    assert_eq!(bare["names"], json!([]));
    assert_eq!(rig.truth_node_of(&id).as_deref(), Some(node.as_str()));
    assert_eq!(allocated(&rig), before, "the sandbox keeps its vCPU");
    let (s, got) = rig.get_json(&format!("/sandboxes/{id}")).await;
    assert_eq!((s, got["state"].as_str()), (200, Some("running")), "{got}");

    let (s, named) = snapshot(&rig, &id, json!({"name": "Nightly-Snap"})).await;
    assert_eq!(s, 201, "{named}");
    assert_eq!(
        named,
        json!({"snapshotID": "stampede/nightly-snap:default", "names": ["stampede/nightly-snap"]})
    );
    let (s, tagged) = snapshot(&rig, &id, json!({"name": "stampede/nightly-snap:v2"})).await;
    assert_eq!(s, 201, "{tagged}");
    assert_eq!(tagged["snapshotID"], "stampede/nightly-snap:v2");

    // One entry per template, newest first, by its newest build.
    let (s, all, next) = list(&rig, "/snapshots").await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(
        ids(&all),
        vec!["stampede/nightly-snap:v2", bare_id.as_str()]
    );
    assert_eq!(next, None);
    let (_, by_tag, _) = list(&rig, "/snapshots?name=nightly-snap:default").await;
    assert_eq!(ids(&by_tag), vec!["stampede/nightly-snap:default"]);
    let (_, of_id, _) = list(&rig, &format!("/snapshots?sandboxID={id}")).await;
    assert_eq!(ids(&of_id).len(), 2);
    let (_, none, _) = list(&rig, "/snapshots?sandboxID=i00000000000000000000").await;
    assert_eq!(none, json!([]));
    let (_, unknown, _) = list(&rig, "/snapshots?name=nothing").await;
    assert_eq!(unknown, json!([]));

    // Pages of one, by the cursor.
    let (s, first, next) = list(&rig, "/snapshots?limit=1").await;
    assert_eq!(s, 200);
    assert_eq!(ids(&first), vec!["stampede/nightly-snap:v2"]);
    let token = next.expect("a next page");
    let (s, second, next) = list(&rig, &format!("/snapshots?limit=1&nextToken={token}")).await;
    assert_eq!(s, 200, "{second}");
    assert_eq!(ids(&second), vec![bare_id.as_str()]);
    assert_eq!(next, None);

    // A sandbox from a snapshot: an ordinary create with its id as the template, of the
    // snapshot's size (2 vCPU; the service's default is 1) unless the body says.
    for (template, cpu, want) in [
        (bare_id.as_str(), None, 2),
        ("stampede/nightly-snap:v2", None, 2),
        ("nightly-snap", Some(1), 1),
    ] {
        let mut body = json!({"templateID": template});
        if let Some(c) = cpu {
            body["cpuCount"] = json!(c);
        }
        let (s, made) = rig.create(body).await;
        assert_eq!(s, 201, "{template}: {made}");
        assert_eq!(made["templateID"], template);
        let new_id = made["sandboxID"].as_str().expect("id");
        let (_, got) = rig.get_json(&format!("/sandboxes/{new_id}")).await;
        assert_eq!(got["cpuCount"], want, "{template}: {got}");
    }
    rig.stop().await;
}

#[tokio::test]
async fn snapshot_answers_e2bs_codes_for_bad_input_wrong_states_and_a_busy_node() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;
    let id = create(&rig).await;
    let p = format!("/sandboxes/{id}/snapshots");
    let unknown = "/sandboxes/i00000000000000000000/snapshots";
    for (path, body, want) in [
        (p.as_str(), None, 400),
        (p.as_str(), Some(json!([1])), 400),
        (p.as_str(), Some(json!({"name": 5})), 400),
        (p.as_str(), Some(json!({"name": null})), 400),
        (p.as_str(), Some(json!({"name": "other-team/snap"})), 400),
        (p.as_str(), Some(json!({"name": "bad name"})), 400),
        ("/sandboxes/a-b-c/snapshots", Some(json!({})), 400),
        (unknown, Some(json!({})), 404),
    ] {
        let (s, b) = rig.post(path, body.clone()).await;
        assert_eq!(s, want, "POST {path} {body:?}: {b}");
        assert_eq!(b["code"], want, "E2B's Error body: {b}");
    }
    for (query, want) in [
        ("limit=0", 400),
        ("limit=101", 400),
        ("limit=x", 400),
        ("nextToken=garbage", 400),
        ("nextToken=", 200),
        ("sandboxID=a-b-c", 400),
        ("name=a%20b", 400),
    ] {
        let (s, b, _) = list(&rig, &format!("/snapshots?{query}")).await;
        assert_eq!(s, want, "GET /snapshots?{query}: {b}");
    }
    for (method, path) in [("POST", p.as_str()), ("GET", "/snapshots")] {
        let r = rig
            .http
            .request(method.parse().unwrap(), rig.url(path))
            .json(&json!({}))
            .send()
            .await
            .expect("request sent");
        assert_eq!(r.status().as_u16(), 401, "{method} {path} without a key");
    }

    // A node that refuses the checkpoint as busy: 503, the sandbox runs on.
    let node = rig.truth_node_of(&id).expect("placed");
    let busy = rig
        .fault(
            FaultKind::Errors {
                probability: 1.0,
                code: FailureCode::ResourceExhausted,
            },
            &node,
        )
        .await;
    let (s, b) = snapshot(&rig, &id, json!({})).await;
    assert_eq!(s, 503, "{b}");
    rig.fleet.heal_fault(busy).await.expect("healed");
    let (s, got) = rig.get_json(&format!("/sandboxes/{id}")).await;
    assert_eq!((s, got["state"].as_str()), (200, Some("running")), "{got}");
    let (_, listed, _) = list(&rig, "/snapshots").await;
    assert_eq!(listed, json!([]), "a refused snapshot is not listed");

    // A paused sandbox is not in the running store: 404, as in E2B.
    let (s, b) = rig.post(&format!("/sandboxes/{id}/pause"), None).await;
    assert_eq!(s, 204, "{b}");
    let (s, b) = snapshot(&rig, &id, json!({})).await;
    assert_eq!(s, 404, "{b}");
    rig.stop().await;
}

/// No route deleted a snapshot and a name of any length was taken (2,000 snapshots with
/// 100 KiB names: 223 MB, a 20.5 MB list page). `DELETE /templates/{templateID}` removes a
/// template by name or id (204, then 404), and a name over 128 bytes is a 400.
#[tokio::test]
async fn snapshots_are_deleted_by_template_id_and_names_are_capped() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    rig.svc.sync_now().await;
    let id = create(&rig).await;
    let (s, long) = snapshot(&rig, &id, json!({"name": "a".repeat(129)})).await;
    assert_eq!(s, 400, "{long}");
    let (s, named) = snapshot(&rig, &id, json!({"name": "to-delete"})).await;
    assert_eq!(s, 201, "{named}");
    let (s, bare) = snapshot(&rig, &id, json!({})).await;
    assert_eq!(s, 201, "{bare}");
    let bare_id = bare["snapshotID"]
        .as_str()
        .expect("id")
        .split(':')
        .next()
        .expect("id");
    let delete = |path: String| {
        rig.http
            .delete(rig.url(&path))
            .header("X-API-Key", DEFAULT_API_KEY)
            .send()
    };
    for path in [
        "/templates/to-delete".to_string(),
        format!("/templates/{bare_id}"),
    ] {
        let r = delete(path.clone()).await.expect("request sent");
        assert_eq!(r.status().as_u16(), 204, "{path}");
        let r = delete(path.clone()).await.expect("request sent");
        assert_eq!(r.status().as_u16(), 404, "{path}");
        // E2B's message (`cache/templates/errors.go`), lower-case `template`.
        let err: Value = r.json().await.expect("a JSON error");
        let alias = path.trim_start_matches("/templates/");
        assert_eq!(
            err["message"],
            format!("template '{alias}' not found"),
            "{path}"
        );
    }
    let r = delete(format!("/templates/{}", "a".repeat(129)))
        .await
        .expect("request sent");
    assert_eq!(r.status().as_u16(), 400);
    let (s, page, _) = list(&rig, "/snapshots").await;
    assert_eq!((s, ids(&page).len()), (200, 0), "{page}");
}
