//! What a placement failure answers over HTTP, decided once in the core for the service
//! and the simulator. Each test names the E2B file whose behaviour it pins.

use crate::{
    AccountingMode, CreateErrorCode, CreateOutcome, CreateStatus, Decision, DeleteOutcome,
    ErrorCode, FailureAnswers, NodeMetrics, NodeStatus, PlacementAttempt, PlacementConfig,
    PlacementCore, PlacementFailure, SyncSnapshot, FAILED_TO_PLACE,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn core_with(nodes: &[&str], status: NodeStatus) -> PlacementCore {
    let mut core = PlacementCore::new(PlacementConfig {
        mode: AccountingMode::Optimistic,
        ..PlacementConfig::default()
    });
    for &id in nodes {
        core.add_node(id);
        core.apply_sync(
            id,
            SyncSnapshot {
                status,
                metrics: NodeMetrics {
                    cpu_count: 8,
                    ..NodeMetrics::default()
                },
                sandboxes: Some(vec![]),
                listed_now: None,
            },
        );
    }
    core
}

fn e2b(f: &PlacementFailure) -> (u16, Option<&'static str>, String) {
    let a = FailureAnswers::E2b.answer(f);
    (
        a.status.code(),
        a.error_code.map(ErrorCode::as_str),
        a.message,
    )
}

/// `placement/placement.go`: an empty cluster is `NoNodesAvailableError`, which
/// `placement_errors.go` answers 503 `sandbox_capacity_unavailable`.
#[test]
fn empty_fleet_is_503_capacity_unavailable() {
    let mut core = core_with(&[], NodeStatus::Ready);
    let mut att = PlacementAttempt::new("s", 1);
    let f = att
        .next(&mut core, &mut ChaCha8Rng::seed_from_u64(1))
        .unwrap_err();
    assert_eq!(f, PlacementFailure::NoNodesAvailable);
    let (status, code, message) = e2b(&f);
    assert_eq!((status, code), (503, Some("sandbox_capacity_unavailable")));
    assert_eq!(
        message,
        "Failed to place sandbox: not enough capacity for the requested resources right now, \
         please retry shortly"
    );
}

/// `placement/placement.go` (`deadline()`): nothing but ResourceExhausted refusals until
/// the deadline is a lack of capacity, 503, not a timeout.
#[test]
fn deadline_after_only_refusals_is_503_capacity_unavailable() {
    let mut core = core_with(&["a"], NodeStatus::Ready);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut att = PlacementAttempt::new("s", 1);
    for _ in 0..3 {
        att.next(&mut core, &mut rng).unwrap();
        assert_eq!(
            att.report(&mut core, CreateOutcome::ResourceExhausted),
            Decision::Retry
        );
    }
    let f = att.deadline_reached(&mut core);
    assert_eq!(f, PlacementFailure::NoNodesAvailable);
    assert_eq!(e2b(&f).0, 503);
    assert_eq!(e2b(&f).1, Some("sandbox_capacity_unavailable"));
}

/// `placement/placement.go` and `placement_errors.go`: any other deadline is a 504
/// `sandbox_placement_timeout`, its message counting the failed attempts; a create in
/// flight at the deadline is forgotten.
#[test]
fn other_deadlines_are_504_placement_timeout() {
    let mut core = core_with(&["a", "b"], NodeStatus::Ready);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut att = PlacementAttempt::new("s", 1);
    let f = att.deadline_reached(&mut core);
    assert_eq!(f, PlacementFailure::Timeout { attempts: 0 });
    assert_eq!(
        e2b(&f),
        (
            504,
            Some("sandbox_placement_timeout"),
            "Failed to place sandbox: placement timed out, please retry".to_string()
        )
    );
    att.next(&mut core, &mut rng).unwrap();
    att.report(&mut core, CreateOutcome::Failed);
    let node = att.next(&mut core, &mut rng).unwrap();
    assert_eq!(core.in_flight(&node), Some(1));
    let f = att.deadline_reached(&mut core);
    assert_eq!(core.in_flight(&node), Some(0), "in-flight create forgotten");
    assert_eq!(f, PlacementFailure::Timeout { attempts: 1 });
    assert_eq!(
        e2b(&f).2,
        "Failed to place sandbox: placement timed out after 1 attempt(s), please retry"
    );
}

/// `placement/placement.go` (`SandboxCreateError`) and `placement_errors.go`: no
/// candidate left after create errors is a 500 `sandbox_create_failed`; the message of a
/// FailedPrecondition or InvalidArgument is forwarded, any other stays internal.
#[test]
fn no_candidate_after_create_errors_is_500_create_failed() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for (code, text, want) in [
        (
            CreateErrorCode::FailedPrecondition,
            "template build is not ready",
            "Failed to place sandbox: template build is not ready".to_string(),
        ),
        (
            CreateErrorCode::InvalidArgument,
            "vcpu must be positive",
            "Failed to place sandbox: vcpu must be positive".to_string(),
        ),
        (
            CreateErrorCode::Other,
            "disk on fire at /dev/nvme0",
            "Failed to place sandbox: sandbox creation failed on 1 node(s), please retry; \
             if the problem persists, contact us"
                .to_string(),
        ),
    ] {
        let mut core = core_with(&["only"], NodeStatus::Ready);
        let mut att = PlacementAttempt::new("s", 1);
        att.next(&mut core, &mut rng).unwrap();
        assert_eq!(att.report_error(&mut core, code, text), Decision::Retry);
        let f = att.next(&mut core, &mut rng).unwrap_err();
        assert!(matches!(
            f,
            PlacementFailure::CreateFailed { attempts: 1, .. }
        ));
        assert_eq!(e2b(&f), (500, Some("sandbox_create_failed"), want));
    }
}

/// `placement/placement.go`: the error forwarded is the last one; a later unsafe error
/// replaces an earlier safe message.
#[test]
fn only_the_last_create_error_is_forwarded() {
    let mut core = core_with(&["a", "b"], NodeStatus::Ready);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut att = PlacementAttempt::new("s", 1);
    att.next(&mut core, &mut rng).unwrap();
    att.report_error(&mut core, CreateErrorCode::FailedPrecondition, "safe");
    att.next(&mut core, &mut rng).unwrap();
    att.report_error(&mut core, CreateErrorCode::Other, "secret");
    let f = att.next(&mut core, &mut rng).unwrap_err();
    assert_eq!(
        f,
        PlacementFailure::CreateFailed {
            attempts: 2,
            forwarded: None
        }
    );
    assert!(e2b(&f).2.contains("on 2 node(s)"));
}

/// `placement/placement_best_of_K.go` (`FailedToPlaceSandboxError`) and
/// `placement_errors.go`: no node can accept, before any create failed, is a 503
/// `sandbox_no_compatible_node`.
#[test]
fn no_ready_node_is_503_no_compatible_node() {
    let mut core = core_with(&["a", "b"], NodeStatus::Draining);
    let mut att = PlacementAttempt::new("s", 1);
    let f = att
        .next(&mut core, &mut ChaCha8Rng::seed_from_u64(6))
        .unwrap_err();
    assert!(matches!(f, PlacementFailure::NoCandidate(_)), "{f:?}");
    let (status, code, message) = e2b(&f);
    assert_eq!((status, code), (503, Some("sandbox_no_compatible_node")));
    assert!(message.starts_with(FAILED_TO_PLACE), "{message}");
}

/// E2B's `orchestrator/create_instance.go` before 2026-08-13 (commit 063aa20c8's
/// parent): every placement failure is a 500 "Failed to place sandbox" without
/// `error_code`.
#[test]
fn legacy_answers_every_failure_500_failed_to_place() {
    for f in [
        PlacementFailure::NoNodesAvailable,
        PlacementFailure::Timeout { attempts: 2 },
        PlacementFailure::CreateFailed {
            attempts: 3,
            forwarded: Some("x".into()),
        },
    ] {
        let a = FailureAnswers::Legacy.answer(&f);
        assert_eq!(a.status, CreateStatus::InternalServerError, "{f:?}");
        assert_eq!(a.error_code, None);
        assert_eq!(a.message, "Failed to place sandbox");
    }
    assert_eq!(
        PlacementConfig::default().failure_answers,
        FailureAnswers::E2b
    );
}

/// `orchestrator/delete_instance.go` (`killSandboxOnNode`): a node's NotFound is a
/// success that releases the optimistic vCPU; another error is a 500 that keeps it.
#[test]
fn delete_not_found_on_node_is_204_and_releases_vcpu() {
    let mut core = core_with(&["a"], NodeStatus::Ready);
    for (id, outcome, status, left) in [
        ("s1", DeleteOutcome::NotOnNode, 204, 1),
        ("s2", DeleteOutcome::Failed, 500, 1),
        ("s3", DeleteOutcome::Deleted, 204, 0),
    ] {
        if id == "s1" {
            for s in ["s1", "s2"] {
                core.start_placing("a", s, 1);
                core.create_succeeded("a", s, 1);
            }
            assert_eq!(core.believed_allocated_vcpu("a"), Some(2));
        }
        let sandbox = if id == "s3" { "s2" } else { id };
        assert_eq!(core.delete_ended("a", sandbox, 1, outcome), status);
        assert_eq!(core.believed_allocated_vcpu("a"), Some(left), "{id}");
    }
}
