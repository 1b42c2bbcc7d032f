//! `DELETE /sandboxes/{id}` as E2B answers it, and the legacy failure answers, over the
//! real wire.

use crate::support::serve as serve_common;

use std::time::Duration;

use mock_node::api::{FailureCode, FaultKind};
use serde_json::json;
use serve_common::{cluster, serve_config, Rig};
use stampede::placement::{AccountingMode, FailureAnswers};

/// E2B's `orchestrator/delete_instance.go` (`killSandboxOnNode`): a sandbox the node no
/// longer has (a restart lost it) is killed with 204, and a second kill is a 404.
#[tokio::test]
async fn kill_of_a_sandbox_the_node_lost_is_204() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    let (status, body) = rig
        .create(json!({"templateID": "base", "timeout": 300}))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["sandboxID"].as_str().unwrap().to_string();
    rig.fault(FaultKind::Restart, "node-00").await;
    assert_eq!(rig.truth_node_of(&id), None, "the restart lost it");
    assert_eq!(rig.delete(&id).await, 204);
    assert_eq!(rig.delete(&id).await, 404);
    rig.stop().await;
}

/// E2B's `orchestrator/delete_instance.go` (`RemoveSandbox` removes the store entry in a
/// defer) and `handlers/sandbox_kill.go`: a node error is a 500, and the sandbox is gone
/// from the API all the same.
#[tokio::test]
async fn kill_with_a_node_error_is_500_and_forgets_the_sandbox() {
    let rig = Rig::start(cluster(1, &[]), serve_config(AccountingMode::Optimistic)).await;
    let (status, body) = rig
        .create(json!({"templateID": "base", "timeout": 300}))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["sandboxID"].as_str().unwrap().to_string();
    rig.fault(
        FaultKind::Errors {
            probability: 1.0,
            code: FailureCode::Internal,
        },
        "node-00",
    )
    .await;
    assert_eq!(rig.delete(&id).await, 500);
    assert_eq!(rig.get_json(&format!("/sandboxes/{id}")).await.0, 404);
    let (_, listed) = rig.get_json("/sandboxes").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "{listed}");
    assert_eq!(rig.truth_node_of(&id).as_deref(), Some("node-00"));
    rig.stop().await;
}

/// E2B's `orchestrator/create_instance.go` before 2026-08-13: with `legacy` answers a
/// placement failure is a 500 "Failed to place sandbox" without `error_code`.
#[tokio::test]
async fn legacy_answers_are_500_failed_to_place() {
    let mut cfg = serve_config(AccountingMode::Reported);
    cfg.placement.failure_answers = FailureAnswers::Legacy;
    cfg.request_timeout = Duration::from_millis(400);
    let rig = Rig::start(cluster(1, &[]), cfg).await;
    rig.fault(FaultKind::Exhaust, "node-00").await;
    let (status, body) = rig.create(json!({"templateID": "base"})).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["message"], "Failed to place sandbox");
    assert!(body.get("error_code").is_none(), "{body}");
    rig.stop().await;
}
