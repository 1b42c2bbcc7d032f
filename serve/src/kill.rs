//! Killing a sandbox, for `DELETE /sandboxes/{id}` ([`kill`]) and the evictor
//! ([`delete_sandbox`]).
//!
//! A DELETE that finds its sandbox in a move (a pause, a resume, a snapshot, another
//! kill) waits for the move to end and then kills it where it landed; it does not cancel
//! the move. E2B's kill does the same with a pause in flight: `StartRemoving` sees the
//! transition key, waits for the transition's result and retries the removal
//! (`packages/api/internal/sandbox/storage/redis/state_change.go`,
//! `handleExistingTransition`), and its handler then deletes the snapshot the pause made
//! (`handlers/sandbox_kill.go`). A second kill joins the first and answers 204
//! (`orchestrator/delete_instance.go`, the `StateKilling` case). A failed pause answers
//! the waiting kill with a 500 (the transition's error). E2B's kill does not see a
//! resume in flight at all (a starting sandbox is only a reservation, and the resume
//! adds it to the store after the kill answered); here it is waited for like a pause.
//! Cancelling instead would stop the API's side only: a Create or a Pause the node has
//! taken runs to its end there, so the sandbox could live on after the answer.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::http::StatusCode;
use tonic::Code;

use super::error::ApiError;
use super::lifecycle_api::{changing_state, not_found};
use super::state::{lock, SandboxRecord, Shared};
use super::transition::{begin_from_running, delete_snapshot, Move, MoveGuard, Whereabouts};
use stampede_placement::{DeleteOutcome, Input};

/// Moves a DELETE waits out before it answers 409 "changing state": a sandbox paused
/// and resumed over and over could otherwise hold it forever. Each move is bounded by
/// its own deadline (the RPC timeout, or the request timeout of a resume's placement).
pub(crate) const MAX_MOVES_WAITED: usize = 4;

/// `DELETE /sandboxes/{id}`: a running sandbox is killed on its node, a paused one's
/// snapshot deleted, one in a move killed once the move ends; 404 only when this
/// instance knows the id nowhere.
pub(crate) async fn kill(shared: Arc<Shared>, id: String) -> Result<(), ApiError> {
    for _ in 0..MAX_MOVES_WAITED {
        let seen = match begin_from_running(&shared, &id, Move::Kill) {
            Ok((guard, record)) => return kill_on_node(&shared, guard, &id, &record).await,
            Err(Whereabouts::Paused) => match delete_snapshot(&shared, &id) {
                Ok(()) => return Ok(()),
                Err(w) => w,
            },
            Err(w) => w,
        };
        match seen {
            Whereabouts::Unknown => {
                shared.telemetry.deletes_not_found.fetch_add(1, Relaxed);
                return Err(not_found(&id));
            }
            Whereabouts::Moving(m) => {
                let what = m.what;
                let done = m.settled().await;
                match (what, done) {
                    (Move::Kill, _) => return Ok(()),
                    (Move::Pause, false) => {
                        return Err(ApiError::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "Error killing sandbox: its pause failed",
                        ))
                    }
                    // Paused, running again, or back to paused: kill it there.
                    (Move::Pause | Move::Resume | Move::Snapshot, _) => {}
                }
            }
            // It moved between two looks: look again.
            Whereabouts::Running(_) | Whereabouts::Paused => {}
        }
    }
    Err(changing_state(&id))
}

/// The evictor's kill of a running sandbox (already in `removing`, which it leaves): as
/// E2B's evictor, a sandbox in another move is left to it (`ErrEvictionInProgress`), a
/// 404 when it is not running.
pub(crate) async fn delete_sandbox(
    shared: Arc<Shared>,
    sandbox_id: String,
) -> Result<(), ApiError> {
    match begin_from_running(&shared, &sandbox_id, Move::Kill) {
        Ok((guard, record)) => kill_on_node(&shared, guard, &sandbox_id, &record).await,
        Err(w) => {
            // A pause, kill or snapshot in flight holds the id in `removing` and takes
            // it out.
            if !matches!(
                w,
                Whereabouts::Moving(ref m) if matches!(m.what, Move::Pause | Move::Kill | Move::Snapshot)
            ) {
                lock(&shared.removing).remove(&sandbox_id);
            }
            shared.telemetry.deletes_not_found.fetch_add(1, Relaxed);
            Err(not_found(&sandbox_id))
        }
    }
}

/// The kill of a sandbox whose snapshot failed on its node (E2B's `CreateSnapshotTemplate`
/// then removes it), under the snapshot's move.
pub(crate) async fn kill_after_snapshot(
    shared: &Shared,
    guard: MoveGuard,
    sandbox_id: &str,
    record: &SandboxRecord,
) -> Result<(), ApiError> {
    kill_on_node(shared, guard, sandbox_id, record).await
}

/// The node's `Delete` as E2B's `killSandboxOnNode`: the store entry is gone whatever
/// the node answers, and a node's NotFound is a 204.
async fn kill_on_node(
    shared: &Shared,
    mut guard: MoveGuard,
    sandbox_id: &str,
    record: &SandboxRecord,
) -> Result<(), ApiError> {
    let (outcome, why) = match shared.nodes.get(&record.node) {
        None => (
            DeleteOutcome::Failed,
            format!("node '{}' not found", record.node),
        ),
        Some(node) => match node.client.delete(sandbox_id, shared.cfg.rpc_timeout).await {
            Ok(()) => (DeleteOutcome::Deleted, String::new()),
            Err(s) if s.code() == Code::NotFound => (DeleteOutcome::NotOnNode, String::new()),
            Err(s) => (DeleteOutcome::Failed, s.message().to_string()),
        },
    };
    shared.handle(Input::DeleteEnded {
        node: record.node.as_str().into(),
        sandbox_id: sandbox_id.into(),
        vcpu: record.vcpu,
        released: outcome.releases_vcpu(),
    });
    lock(&shared.removing).remove(sandbox_id);
    let status = outcome.status();
    match outcome {
        DeleteOutcome::Deleted => shared.telemetry.deletes_ok.fetch_add(1, Relaxed),
        DeleteOutcome::NotOnNode => shared.telemetry.deletes_not_found.fetch_add(1, Relaxed),
        DeleteOutcome::Failed => 0,
    };
    if status == StatusCode::NO_CONTENT.as_u16() {
        guard.succeeded();
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        format!("Error killing sandbox: {why}"),
    ))
}
