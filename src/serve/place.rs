//! The create and delete drivers: E2B's placement loop over real RPCs, driving the
//! sans-IO [`PlacementAttempt`]. What a failure answers is the core's decision
//! ([`FailureAnswers::answer`](crate::placement::FailureAnswers::answer)).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use tokio_util::sync::CancellationToken;
use tonic::Code;

use super::error::ApiError;
use super::node_client::CreateSpec;
use super::rest::{NewSandbox, Sandbox};
use super::state::{lock, SandboxRecord, Shared};
use crate::placement::{
    CreateErrorCode, CreateOutcome, Decision, DeleteOutcome, PlacementAttempt, PlacementFailure,
};

/// E2B's `clientID` of every sandbox (`packages/shared/pkg/consts/sandboxes.go`).
pub const CLIENT_ID: &str = "6532622b";

/// Place and create one sandbox. The caller spawns it, so it is never dropped mid-way
/// (the core never keeps a create in flight forever); `gone` is cancelled when the HTTP
/// client hangs up, and the placement then stops as E2B's loop does with the request's
/// context (`packages/api/internal/orchestrator/placement/placement.go`): the Create
/// RPC in flight is cancelled and no new attempt starts.
pub async fn create_sandbox(
    shared: Arc<Shared>,
    body: NewSandbox,
    gone: CancellationToken,
) -> Result<Sandbox, ApiError> {
    let sandbox_id = shared.new_sandbox_id();
    let result = place(&shared, &sandbox_id, body, &gone).await;
    lock(&shared.placing).remove(&sandbox_id);
    result
}

async fn place(
    shared: &Arc<Shared>,
    sandbox_id: &str,
    body: NewSandbox,
    gone: &CancellationToken,
) -> Result<Sandbox, ApiError> {
    let cfg = &shared.cfg;
    let deadline = Instant::now() + cfg.request_timeout;
    let now = SystemTime::now();
    let spec = CreateSpec {
        sandbox_id: sandbox_id.to_string(),
        template_id: body.template_id.clone(),
        vcpu: body.cpu_count.unwrap_or(cfg.default_vcpu),
        ram_mb: body.memory_mb.unwrap_or(cfg.default_memory_mb),
        metadata: body.metadata.clone().unwrap_or_default(),
        start: now,
        end: now + Duration::from_secs(u64::from(body.timeout.unwrap_or(15))),
        envd_version: cfg.envd_version.clone(),
        max_length_hours: cfg.max_length_hours,
    };
    let mut attempt = PlacementAttempt::new(sandbox_id, spec.vcpu);
    let mut rpcs = 0u64;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            shared.telemetry.creates_timed_out.fetch_add(1, Relaxed);
            let f = attempt.deadline_reached(&mut lock(&shared.core));
            return Err(failure(shared, &f));
        }
        if gone.is_cancelled() {
            return Err(client_gone(shared, &mut attempt));
        }
        let t0 = Instant::now();
        let chosen = {
            let mut core = lock(&shared.core);
            let mut rng = lock(&shared.rng);
            attempt.next(&mut core, &mut *rng)
        };
        shared.telemetry.record_decision(t0.elapsed());
        let node_id = match chosen {
            Ok(n) => n,
            Err(f) => {
                count_failure(shared, &f);
                return Err(failure(shared, &f));
            }
        };
        let Some(node) = shared.nodes.get(&node_id) else {
            // Unreachable: the core only knows nodes of `shared.nodes`.
            let mut core = lock(&shared.core);
            attempt.report(&mut core, CreateOutcome::Failed);
            continue;
        };
        if rpcs > 0 {
            shared.telemetry.retries.fetch_add(1, Relaxed);
        }
        rpcs += 1;
        // No deadline of its own: E2B bounds the Create RPC by the request's only
        // (`packages/api/main.go` requestTimeout), so a hung node holds the request.
        let answer = tokio::select! {
            a = node.client.create(&spec, left) => a,
            () = gone.cancelled() => return Err(client_gone(shared, &mut attempt)),
        };
        // Register before the core forgets the create in flight, so that a concurrent
        // sync never takes the new sandbox for an orphan.
        if answer.is_ok() {
            lock(&shared.sandboxes).insert(
                sandbox_id.to_string(),
                SandboxRecord {
                    node: node_id.clone(),
                    template_id: spec.template_id.clone(),
                    vcpu: spec.vcpu,
                    ram_mb: spec.ram_mb,
                    metadata: spec.metadata.clone(),
                    started_at: spec.start,
                    end_at: spec.end,
                    placed_at: Instant::now(),
                },
            );
        }
        let decision = {
            let mut core = lock(&shared.core);
            match &answer {
                Ok(_) => attempt.report(&mut core, CreateOutcome::Created),
                Err(s) if s.code() == Code::ResourceExhausted => {
                    shared.telemetry.refusals.fetch_add(1, Relaxed);
                    shared.telemetry.storm.record(&node_id);
                    attempt.report(&mut core, CreateOutcome::ResourceExhausted)
                }
                Err(s) => {
                    tracing::debug!(node = %node_id, sandbox = sandbox_id, error = %s, "create failed");
                    shared.telemetry.attempt_failures.fetch_add(1, Relaxed);
                    attempt.report_error(&mut core, error_code(s.code()), s.message())
                }
            }
        };
        match decision {
            Decision::Placed(_) => {
                shared.telemetry.creates_ok.fetch_add(1, Relaxed);
                return Ok(Sandbox {
                    template_id: spec.template_id,
                    sandbox_id: sandbox_id.to_string(),
                    alias: None,
                    client_id: CLIENT_ID.to_string(),
                    envd_version: cfg.envd_version.clone(),
                    domain: None,
                });
            }
            Decision::Retry => {
                let refused = matches!(&answer, Err(s) if s.code() == Code::ResourceExhausted);
                if let Some(pause) = cfg.retry_backoff.filter(|_| refused) {
                    // Never past the deadline: the loop's check answers right after.
                    let left = deadline.saturating_duration_since(Instant::now());
                    tokio::time::sleep(pause.min(left)).await;
                }
            }
        }
    }
}

/// The client hung up: the create in flight (if any) is forgotten as at the deadline
/// (E2B's loop ends on `ctx.Done()` either way); nobody reads the answer.
fn client_gone(shared: &Shared, attempt: &mut PlacementAttempt) -> ApiError {
    tracing::debug!(
        sandbox = attempt.sandbox_id(),
        "client gone: placement stopped"
    );
    shared.telemetry.creates_abandoned.fetch_add(1, Relaxed);
    let f = attempt.deadline_reached(&mut lock(&shared.core));
    failure(shared, &f)
}

fn error_code(code: Code) -> CreateErrorCode {
    match code {
        Code::FailedPrecondition => CreateErrorCode::FailedPrecondition,
        Code::InvalidArgument => CreateErrorCode::InvalidArgument,
        _ => CreateErrorCode::Other,
    }
}

fn count_failure(shared: &Shared, f: &PlacementFailure) {
    let counter = match f {
        PlacementFailure::CreateFailed { .. } => &shared.telemetry.creates_failed,
        PlacementFailure::Timeout { .. } => &shared.telemetry.creates_timed_out,
        PlacementFailure::NoNodesAvailable | PlacementFailure::NoCandidate(_) => {
            &shared.telemetry.creates_unplaceable
        }
    };
    counter.fetch_add(1, Relaxed);
}

fn failure(shared: &Shared, f: &PlacementFailure) -> ApiError {
    let a = shared.cfg.placement.failure_answers.answer(f);
    let status = StatusCode::from_u16(a.status.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    ApiError {
        error_code: a.error_code.map(|c| c.as_str()),
        ..ApiError::new(status, a.message)
    }
}

/// Kill one sandbox as E2B does: 404 when this instance does not know it; otherwise the
/// entry is removed whatever the node answers, and a node's NotFound is a 204.
pub async fn delete_sandbox(shared: Arc<Shared>, sandbox_id: String) -> Result<(), ApiError> {
    let removed = lock(&shared.sandboxes).remove(&sandbox_id);
    let Some(record) = removed else {
        lock(&shared.removing).remove(&sandbox_id);
        shared.telemetry.deletes_not_found.fetch_add(1, Relaxed);
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("sandbox \"{sandbox_id}\" doesn't exist or you don't have access to it"),
        ));
    };
    lock(&shared.removing).insert(sandbox_id.clone());
    let result = kill_on_node(&shared, &sandbox_id, &record).await;
    lock(&shared.removing).remove(&sandbox_id);
    result
}

async fn kill_on_node(
    shared: &Shared,
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
    let status = lock(&shared.core).delete_ended(&record.node, sandbox_id, record.vcpu, outcome);
    match outcome {
        DeleteOutcome::Deleted => shared.telemetry.deletes_ok.fetch_add(1, Relaxed),
        DeleteOutcome::NotOnNode => shared.telemetry.deletes_not_found.fetch_add(1, Relaxed),
        DeleteOutcome::Failed => 0,
    };
    if status == StatusCode::NO_CONTENT.as_u16() {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        format!("Error killing sandbox: {why}"),
    ))
}
