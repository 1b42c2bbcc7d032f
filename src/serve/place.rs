//! The create and delete drivers: E2B's placement loop over real RPCs, driving the
//! sans-IO [`PlacementAttempt`].

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use tonic::Code;

use super::error::ApiError;
use super::node_client::CreateSpec;
use super::rest::{NewSandbox, Sandbox};
use super::state::{lock, SandboxRecord, Shared};
use crate::placement::{CreateOutcome, Decision, NoCandidate, PlacementAttempt, PlacementFailure};

/// E2B's message for a create that failed after its retries.
const CREATE_FAILED: &str = "failed to create a new sandbox, if the problem persists, contact us";

/// Place and create one sandbox. Runs to completion even if the HTTP client goes away
/// (the caller spawns it), so the core never keeps a create in flight forever.
pub async fn create_sandbox(shared: Arc<Shared>, body: NewSandbox) -> Result<Sandbox, ApiError> {
    let sandbox_id = shared.new_sandbox_id();
    let result = place(&shared, &sandbox_id, body).await;
    lock(&shared.placing).remove(&sandbox_id);
    result
}

async fn place(
    shared: &Arc<Shared>,
    sandbox_id: &str,
    body: NewSandbox,
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
    };
    let mut attempt = PlacementAttempt::new(sandbox_id, spec.vcpu);
    let mut rpcs = 0u64;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            shared.telemetry.creates_timed_out.fetch_add(1, Relaxed);
            return Err(ApiError::coded(
                StatusCode::GATEWAY_TIMEOUT,
                "sandbox_placement_timeout",
                format!(
                    "no node accepted the sandbox within {:?}",
                    cfg.request_timeout
                ),
            ));
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
            Err(f) => return Err(failure(shared, f)),
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
        let answer = node
            .client
            .create(&spec, cfg.create_rpc_timeout.min(left))
            .await;
        let outcome = match &answer {
            Ok(_) => CreateOutcome::Created,
            Err(s) if s.code() == Code::ResourceExhausted => {
                shared.telemetry.refusals.fetch_add(1, Relaxed);
                CreateOutcome::ResourceExhausted
            }
            Err(s) => {
                tracing::debug!(node = %node_id, sandbox = sandbox_id, error = %s, "create failed");
                shared.telemetry.attempt_failures.fetch_add(1, Relaxed);
                CreateOutcome::Failed
            }
        };
        // Register before the core forgets the create in flight, so that a concurrent
        // sync never takes the new sandbox for an orphan.
        if let Ok(client_id) = &answer {
            let client_id = if client_id.is_empty() {
                node_id.clone()
            } else {
                client_id.clone()
            };
            lock(&shared.sandboxes).insert(
                sandbox_id.to_string(),
                SandboxRecord {
                    node: node_id.clone(),
                    template_id: spec.template_id.clone(),
                    client_id,
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
            attempt.report(&mut core, outcome)
        };
        match decision {
            Decision::Placed(node_id) => {
                shared.telemetry.creates_ok.fetch_add(1, Relaxed);
                let client_id = lock(&shared.sandboxes)
                    .get(sandbox_id)
                    .map(|r| r.client_id.clone())
                    .unwrap_or(node_id);
                return Ok(Sandbox {
                    template_id: spec.template_id,
                    sandbox_id: sandbox_id.to_string(),
                    alias: None,
                    client_id,
                    envd_version: cfg.envd_version.clone(),
                    domain: None,
                });
            }
            Decision::Retry => continue,
            Decision::Failed(f) => return Err(failure(shared, f)),
        }
    }
}

fn failure(shared: &Shared, f: PlacementFailure) -> ApiError {
    match f {
        PlacementFailure::NoCandidate(NoCandidate::NoCompatibleNode) => {
            shared.telemetry.creates_unplaceable.fetch_add(1, Relaxed);
            ApiError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                "sandbox_no_compatible_node",
                f.to_string(),
            )
        }
        PlacementFailure::NoCandidate(NoCandidate::CapacityUnavailable) => {
            shared.telemetry.creates_unplaceable.fetch_add(1, Relaxed);
            ApiError::coded(
                StatusCode::SERVICE_UNAVAILABLE,
                "sandbox_capacity_unavailable",
                f.to_string(),
            )
        }
        PlacementFailure::AttemptsExhausted { .. } => {
            shared.telemetry.creates_failed.fetch_add(1, Relaxed);
            ApiError::coded(
                StatusCode::INTERNAL_SERVER_ERROR,
                "sandbox_create_failed",
                CREATE_FAILED,
            )
        }
    }
}

/// Kill one sandbox: 204 when the node deleted it, 404 when unknown here or on its node.
pub async fn delete_sandbox(shared: Arc<Shared>, sandbox_id: String) -> Result<(), ApiError> {
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("sandbox \"{sandbox_id}\" doesn't exist or you don't have access to it"),
        )
    };
    let Some(record) = lock(&shared.sandboxes).remove(&sandbox_id) else {
        shared.telemetry.deletes_not_found.fetch_add(1, Relaxed);
        return Err(not_found());
    };
    let Some(node) = shared.nodes.get(&record.node) else {
        return Err(not_found());
    };
    match node
        .client
        .delete(&sandbox_id, shared.cfg.rpc_timeout)
        .await
    {
        Ok(()) => {
            lock(&shared.core).delete_succeeded(&record.node, &sandbox_id, record.vcpu);
            shared.telemetry.deletes_ok.fetch_add(1, Relaxed);
            Ok(())
        }
        Err(s) if s.code() == Code::NotFound => {
            lock(&shared.core).delete_succeeded(&record.node, &sandbox_id, record.vcpu);
            shared.telemetry.deletes_not_found.fetch_add(1, Relaxed);
            Err(not_found())
        }
        Err(s) => {
            lock(&shared.sandboxes).insert(sandbox_id.clone(), record);
            Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("error killing sandbox \"{sandbox_id}\": {}", s.message()),
            ))
        }
    }
}
