//! The E2B orchestrator gRPC surface of one node: `SandboxService` and `InfoService`.
//!
//! Every RPC first passes the node's fault gate ([`gate`](stampede_node_model::gate): kill, hang, slow,
//! injected errors, sampled failures, and for a Create `exhaust` and admission), then
//! calls the sans-IO [`NodeModel`](crate::model::NodeModel). `Pause` behaves like
//! `Delete` (E2B's pause snapshots the sandbox and removes it from the node): the
//! sandbox leaves the node, unknown ids get NotFound. A Create from a snapshot and a
//! `Checkpoint` wait for a starting slot ([`resume`](crate::resume)); a `Checkpoint`
//! leaves the sandbox running.
//!
//! Hostile input gets InvalidArgument, never a panic or a stored megabyte: ids longer
//! than [`MAX_ID_BYTES`], sandboxes larger than the node, and an `end_time` that is not
//! after `start_time`. Oversized messages are refused earlier, by
//! [`IntakeLayer`](crate::intake::IntakeLayer).

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use stampede_proto::info_service_server::InfoService;
use stampede_proto::prost_types::Timestamp;
use stampede_proto::sandbox_service_server::SandboxService;
use stampede_proto::{
    MachineInfo, RunningSandbox, SandboxCheckpointRequest, SandboxCheckpointResponse,
    SandboxConfig, SandboxCreateRequest, SandboxCreateResponse, SandboxDeleteRequest,
    SandboxIdList, SandboxListResponse, SandboxPauseRequest, SandboxPauseResponse,
    SandboxUpdateRequest, SchedulingMetadata, ServiceInfoResponse, ServiceInfoRole,
};
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use crate::config::{FailureCode, RpcKind};
use crate::model::{CreateRejection, CreateRequest, Sandbox, MAX_ID_BYTES};
use crate::node::NodeRuntime;
use crate::serve::NodeConnInfo;
use stampede_node_model::effect::FaultEffect;
use stampede_node_model::gate::{on_send, Arrival, CreateArrival, Sent};

/// Both gRPC services, for every node of the fleet: each RPC runs on the node whose
/// listener accepted its connection ([`NodeConnInfo`] in the request's extensions).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NodeService;

/// The node an RPC was sent to.
fn node_of<T>(request: &Request<T>) -> Result<NodeRpcs, Status> {
    request
        .extensions()
        .get::<NodeConnInfo>()
        .map(|c| NodeRpcs {
            node: c.node.clone(),
        })
        .ok_or_else(|| Status::internal("connection of no node"))
}

/// The RPCs of one node.
#[derive(Debug, Clone)]
struct NodeRpcs {
    node: Arc<NodeRuntime>,
}

impl NodeRpcs {
    /// Runs one RPC; a kill of the node answers it UNAVAILABLE (dropping its future).
    async fn guarded<T>(
        &self,
        rpc: impl std::future::Future<Output = Result<Response<T>, Status>>,
    ) -> Result<Response<T>, Status> {
        let mut rpc = std::pin::pin!(rpc);
        // Most RPCs answer on their first poll: those never take the kill token (a clone
        // and a drop each lock the token's tree).
        let first = std::future::poll_fn(|cx| Poll::Ready(rpc.as_mut().poll(cx))).await;
        if let Poll::Ready(r) = first {
            return r;
        }
        // Boxed: the wait for a kill is only for an RPC that did not answer at once.
        Box::pin(async move {
            let killed = self.node.rpc_cancel();
            tokio::select! {
                // The RPC first, as above; a kill already in force is seen at once.
                biased;
                r = &mut rpc => r,
                _ = killed.cancelled() => Err(Status::unavailable("node killed")),
            }
        })
        .await
    }

    /// The gate of one RPC as it is sent ([`on_send`]): the faults in force once it
    /// reaches the node (a hang is mostly held earlier, by the
    /// [`IntakeLayer`](crate::intake::IntakeLayer)).
    async fn send(&self) -> Result<FaultEffect, Status> {
        let eff = self.node.effect();
        match on_send(&eff) {
            Sent::Refused => Err(Status::unavailable("node killed")),
            Sent::Arrives => Ok(eff),
            // Boxed, as the waits below: only a call under a fault waits, and an unboxed
            // wait would make every RPC's future (moved as it starts) that much larger.
            Sent::Held => {
                Box::pin(self.node.wait_unhung()).await;
                Ok(self.node.effect())
            }
            Sent::Delayed(d) => {
                Box::pin(tokio::time::sleep(d)).await;
                // Faults may have changed while this call was held.
                Ok(self.node.effect())
            }
        }
    }

    /// [`send`](Self::send) for a Create, and when the orchestrator's own `timeout`
    /// starts: as the call reaches the handler, so a `slow` delay counts against it, a
    /// `hang` (held before the handler, until the fault ends) does not. A delay that
    /// outlasts `timeout` fails there.
    async fn send_create(&self, timeout: Duration) -> Result<(FaultEffect, Instant), Status> {
        let eff = self.node.effect();
        match on_send(&eff) {
            Sent::Refused => Err(Status::unavailable("node killed")),
            Sent::Arrives => Ok((eff, Instant::now())),
            Sent::Held => {
                self.node.wait_unhung().await;
                Ok((self.node.effect(), Instant::now()))
            }
            Sent::Delayed(d) => {
                let arrived = Instant::now();
                if d >= timeout {
                    tokio::time::sleep(timeout).await;
                    self.node.model().count_failed_create();
                    return Err(create_timed_out());
                }
                tokio::time::sleep(d).await;
                Ok((self.node.effect(), arrived))
            }
        }
    }

    /// The whole gate of one RPC other than Create ([`NodeModel::gate`](crate::model::NodeModel::gate)).
    async fn gate(&self, rpc: RpcKind) -> Result<(), Status> {
        let eff = self.send().await?;
        match self.node.model().gate(&eff, rpc) {
            Arrival::Failed(code) => Err(injected(code)),
            Arrival::Passed => Ok(()),
        }
    }

    fn running_sandbox(&self, s: &Sandbox) -> RunningSandbox {
        let clock = &self.node.clock;
        let config = SandboxConfig {
            template_id: s.template_id.to_string(),
            sandbox_id: s.sandbox_id.to_string(),
            vcpu: i64::from(s.vcpu),
            ram_mb: i64::try_from(s.ram_mb).unwrap_or(i64::MAX),
            team_id: s.team_id.to_string(),
            execution_id: s.execution_id.to_string(),
            ..Default::default()
        };
        RunningSandbox {
            config: Some(config),
            client_id: self.node.id.clone(),
            start_time: Some(clock.timestamp(s.start)),
            end_time: s.end.map(|e| clock.timestamp(e)),
            sandbox_id: s.sandbox_id.to_string(),
            team_id: s.team_id.to_string(),
            execution_id: s.execution_id.to_string(),
            vcpu: i64::from(s.vcpu),
            ram_mb: i64::try_from(s.ram_mb).unwrap_or(i64::MAX),
        }
    }

    async fn remove(&self, sandbox_id: &str) -> Result<Response<()>, Status> {
        self.gate(RpcKind::Delete).await?;
        validate_id_len(sandbox_id)?;
        let latency = self.node.model().sample_delete_latency();
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let now = self.node.clock.now();
        let mut m = self.node.model();
        // As for creates: a killed node changes nothing.
        if self.node.effect().killed {
            return Err(Status::unavailable("node killed"));
        }
        match m.delete(sandbox_id, now) {
            Ok(_) => Ok(Response::new(())),
            Err(e) => Err(Status::not_found(e.to_string())),
        }
    }
}

/// Releases a create's admission slot if the RPC is dropped before it finishes
/// (client deadline, connection reset by a kill).
struct StartingGuard<'a> {
    node: &'a NodeRuntime,
    sandbox_id: Option<String>,
}

impl Drop for StartingGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.sandbox_id.take() {
            let now = self.node.clock.now();
            self.node.model().abort_create(&id, now);
        }
    }
}

impl NodeRpcs {
    async fn create(
        &self,
        request: Request<SandboxCreateRequest>,
    ) -> Result<Response<SandboxCreateResponse>, Status> {
        self.guarded(async move {
            let req = request.into_inner();
            let clock = self.node.clock;
            let lifetime = validate_lifetime(req.start_time.as_ref(), req.end_time.as_ref());
            let cfg = req.sandbox.unwrap_or_default();
            let from_snapshot = cfg.snapshot;
            let mut guard = StartingGuard {
                node: &self.node,
                sandbox_id: None,
            };
            let sandbox_id = cfg.sandbox_id.clone();
            let create = CreateRequest {
                sandbox_id: cfg.sandbox_id.into(),
                vcpu: cfg.vcpu,
                ram_mb: cfg.ram_mb,
                end_time: clock.offset_of_timestamp(req.end_time.as_ref()),
                template_id: cfg.template_id.into(),
                team_id: cfg.team_id.into(),
                execution_id: cfg.execution_id.into(),
            };
            let timeout = self.node.model().spec().create_timeout;
            let (eff, arrived) = self.send_create(timeout).await?;
            let turn = if from_snapshot {
                Some(crate::resume::wait_for_starting_slot(&self.node).await?)
            } else {
                None
            };
            let arrival = {
                let mut m = self.node.model();
                let eff = match turn {
                    Some(turn) => {
                        turn.claim(&mut m);
                        // Faults may have changed during the wait; read under the model
                        // lock, a kill that holds admits nothing more.
                        let eff = self.node.effect();
                        if eff.killed {
                            return Err(Status::unavailable("node killed"));
                        }
                        eff
                    }
                    None => eff,
                };
                m.gate_create(&eff, lifetime.map(|()| create), clock.now())
            };
            let latency = match arrival {
                CreateArrival::Failed(code) => return Err(injected(code)),
                CreateArrival::Refused(r) => return Err(rejection(&r)),
                CreateArrival::Admitted { latency, .. } => latency,
            };
            guard.sandbox_id = Some(sandbox_id);
            let left = timeout.saturating_sub(arrived.elapsed());
            if latency >= left {
                // The orchestrator's own deadline fires first: the start is abandoned
                // (the guard frees the slot and counts the create failed).
                tokio::time::sleep(left).await;
                return Err(create_timed_out());
            }
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            let done = {
                let mut m = self.node.model();
                // Decided under the model lock, which a kill takes to install itself: a
                // create commits before the kill holds or not at all (the guard aborts it).
                match guard.sandbox_id.take() {
                    Some(id) if !self.node.is_killed() => {
                        Some(m.finish_create(&id, clock.now()).map(|_| ()))
                    }
                    kept => {
                        guard.sandbox_id = kept;
                        None
                    }
                }
            };
            let Some(done) = done else {
                return Err(Status::unavailable("node killed"));
            };
            match done {
                Ok(_) => Ok(Response::new(SandboxCreateResponse {
                    client_id: self.node.id.clone(),
                })),
                Err(_) => Err(Status::unavailable(
                    "node restarted while the sandbox was starting",
                )),
            }
        })
        .await
    }

    async fn update(&self, request: Request<SandboxUpdateRequest>) -> Result<Response<()>, Status> {
        self.guarded(async move {
            let req = request.into_inner();
            self.gate(RpcKind::Any).await?;
            validate_id_len(&req.sandbox_id)?;
            let clock = self.node.clock;
            let end = clock.offset_of_timestamp(req.end_time.as_ref());
            self.node
                .model()
                .update_end_time(&req.sandbox_id, end, clock.now())
                .map_err(|e| Status::not_found(e.to_string()))?;
            Ok(Response::new(()))
        })
        .await
    }

    async fn list(&self, _request: Request<()>) -> Result<Response<SandboxListResponse>, Status> {
        self.guarded(async move {
            self.gate(RpcKind::List).await?;
            let sandboxes = self.node.model().list(self.node.clock.now());
            let sandboxes = sandboxes.iter().map(|s| self.running_sandbox(s)).collect();
            Ok(Response::new(SandboxListResponse { sandboxes }))
        })
        .await
    }

    async fn delete(&self, request: Request<SandboxDeleteRequest>) -> Result<Response<()>, Status> {
        self.guarded(async move { self.remove(&request.into_inner().sandbox_id).await })
            .await
    }

    async fn pause(
        &self,
        request: Request<SandboxPauseRequest>,
    ) -> Result<Response<SandboxPauseResponse>, Status> {
        self.guarded(async move {
            let req = request.into_inner();
            self.remove(&req.sandbox_id).await?;
            Ok(Response::new(SandboxPauseResponse {
                scheduling_metadata: Some(scheduling_metadata(&req.build_id)),
            }))
        })
        .await
    }

    async fn checkpoint(
        &self,
        request: Request<SandboxCheckpointRequest>,
    ) -> Result<Response<SandboxCheckpointResponse>, Status> {
        self.guarded(async move {
            let req = request.into_inner();
            self.gate(RpcKind::Any).await?;
            validate_id_len(&req.sandbox_id)?;
            if !self.node.model().is_running(&req.sandbox_id) {
                return Err(Status::not_found(format!(
                    "sandbox '{}' not found",
                    req.sandbox_id
                )));
            }
            // The mock's checkpoint takes no time: the slot is let go at once.
            drop(crate::resume::wait_for_starting_slot(&self.node).await?);
            Ok(Response::new(SandboxCheckpointResponse {
                scheduling_metadata: Some(scheduling_metadata(&req.build_id)),
            }))
        })
        .await
    }
}

/// A snapshot of one build with no layers below it (a mock node keeps no artifacts).
fn scheduling_metadata(build_id: &str) -> SchedulingMetadata {
    SchedulingMetadata {
        memfile_base_build_id: build_id.to_string(),
        rootfs_base_build_id: build_id.to_string(),
        build_id: build_id.to_string(),
        memfile_build_ids: vec![build_id.to_string()],
        rootfs_build_ids: vec![build_id.to_string()],
        ..SchedulingMetadata::default()
    }
}

impl NodeRpcs {
    async fn service_info(
        &self,
        _request: Request<()>,
    ) -> Result<Response<ServiceInfoResponse>, Status> {
        // Without a fault in force there is no gate to wait at and nothing to race a kill
        // against: the reply is made at once. The wait is boxed, so the future every
        // call moves stays small.
        if !self.node.is_faulted() {
            return self.service_info_now(&FaultEffect::default());
        }
        Box::pin(self.guarded(async move {
            let eff = self.send().await?;
            self.service_info_now(&eff)
        }))
        .await
    }

    /// The reply of a ServiceInfo that reached the node under `eff`.
    fn service_info_now(&self, eff: &FaultEffect) -> Result<Response<ServiceInfoResponse>, Status> {
        let clock = self.node.clock;
        let (snap, status, service_id, started) = {
            // The gate and the reading under one lock of the model.
            let mut m = self.node.model();
            if let Arrival::Failed(code) = m.gate(eff, RpcKind::ServiceInfo) {
                return Err(injected(code));
            }
            let snap = m.metrics(clock.now());
            (snap, m.status(), m.service_id().to_string(), m.started_at())
        };
        let status = status.wire();
        Ok(Response::new(ServiceInfoResponse {
            node_id: self.node.id.clone(),
            service_id,
            service_version: env!("CARGO_PKG_VERSION").to_string(),
            service_commit: "mock-node".to_string(),
            service_status: status as i32,
            service_roles: vec![ServiceInfoRole::Orchestrator as i32],
            service_startup: Some(clock.timestamp(started)),
            machine_info: Some({
                let cpu = crate::machine::host_cpu();
                MachineInfo {
                    cpu_architecture: cpu.architecture.clone(),
                    cpu_family: cpu.family.clone(),
                    cpu_model: cpu.model.clone(),
                    cpu_model_name: cpu.model_name.clone(),
                }
            }),
            labels: self.node.labels.clone(),
            metric_sandboxes_running: snap.sandboxes_running,
            metric_cpu_percent: snap.cpu_percent,
            metric_memory_used_bytes: snap.memory_used_bytes,
            metric_cpu_count: snap.cpu_count,
            metric_memory_total_bytes: snap.memory_total_bytes,
            metric_cpu_allocated: snap.allocated_vcpu,
            metric_memory_allocated_bytes: snap.memory_allocated_bytes,
            metric_disk_allocated_bytes: 0,
            stampede_sandbox_ids: Some(SandboxIdList {
                ids: snap.sandbox_ids,
            }),
        }))
    }
}

#[tonic::async_trait]
impl SandboxService for NodeService {
    async fn create(
        &self,
        request: Request<SandboxCreateRequest>,
    ) -> Result<Response<SandboxCreateResponse>, Status> {
        node_of(&request)?.create(request).await
    }

    async fn update(&self, request: Request<SandboxUpdateRequest>) -> Result<Response<()>, Status> {
        node_of(&request)?.update(request).await
    }

    async fn list(&self, request: Request<()>) -> Result<Response<SandboxListResponse>, Status> {
        node_of(&request)?.list(request).await
    }

    async fn delete(&self, request: Request<SandboxDeleteRequest>) -> Result<Response<()>, Status> {
        node_of(&request)?.delete(request).await
    }

    async fn pause(
        &self,
        request: Request<SandboxPauseRequest>,
    ) -> Result<Response<SandboxPauseResponse>, Status> {
        node_of(&request)?.pause(request).await
    }

    async fn checkpoint(
        &self,
        request: Request<SandboxCheckpointRequest>,
    ) -> Result<Response<SandboxCheckpointResponse>, Status> {
        node_of(&request)?.checkpoint(request).await
    }
}

#[tonic::async_trait]
impl InfoService for NodeService {
    async fn service_info(
        &self,
        request: Request<()>,
    ) -> Result<Response<ServiceInfoResponse>, Status> {
        node_of(&request)?.service_info(request).await
    }
}

/// A Create past the orchestrator's own deadline: its sandbox start fails and E2B's
/// handler answers INTERNAL (`packages/orchestrator/pkg/server/sandboxes.go`), which the
/// API treats as a failed attempt: the node is excluded and another tried.
fn create_timed_out() -> Status {
    Status::internal("failed to create sandbox: request timed out")
}

/// An id no sandbox can have is refused before any lookup, and not echoed back.
fn validate_id_len(sandbox_id: &str) -> Result<(), Status> {
    if sandbox_id.len() > MAX_ID_BYTES {
        return Err(Status::invalid_argument(format!(
            "sandbox_id is {} bytes long, at most {MAX_ID_BYTES} allowed",
            sandbox_id.len()
        )));
    }
    Ok(())
}

/// A timestamp that is set: absent or zero means "not given", as E2B sends it.
fn given(ts: Option<&Timestamp>) -> Option<(i64, i32)> {
    let ts = ts?;
    (ts.seconds > 0 || ts.nanos > 0).then_some((ts.seconds, ts.nanos.clamp(0, 999_999_999)))
}

/// A create giving both times must not end before it starts. A zero lifetime (end at
/// start) is taken, as E2B's orchestrator takes any end time: the sandbox is due at
/// once (a connect with `timeout: 0` resumes one). An end before the start can only
/// be a client's bug, and is refused.
fn validate_lifetime(
    start: Option<&Timestamp>,
    end: Option<&Timestamp>,
) -> Result<(), CreateRejection> {
    match (given(start), given(end)) {
        (Some(s), Some(e)) if e < s => Err(CreateRejection::InvalidArgument(format!(
            "end_time ({}.{:09}) must not be before start_time ({}.{:09})",
            e.0, e.1, s.0, s.1
        ))),
        _ => Ok(()),
    }
}

fn rejection(r: &CreateRejection) -> Status {
    match r {
        CreateRejection::InvalidArgument(_) => Status::invalid_argument(r.to_string()),
        CreateRejection::AlreadyExists(_) => Status::already_exists(r.to_string()),
        _ => Status::resource_exhausted(r.to_string()),
    }
}

fn injected(code: FailureCode) -> Status {
    let msg = "injected failure";
    match code {
        FailureCode::Unavailable => Status::unavailable(msg),
        FailureCode::Internal => Status::internal(msg),
        FailureCode::ResourceExhausted => Status::resource_exhausted(msg),
        FailureCode::DeadlineExceeded => Status::deadline_exceeded(msg),
        FailureCode::Unknown => Status::unknown(msg),
    }
}
