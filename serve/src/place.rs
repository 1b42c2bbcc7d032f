//! The create driver: the RPCs and the waiting of E2B's placement loop,
//! whose every decision is the sans-IO [`Placer`](stampede_placement::Placer)'s. What a failure answers is the core's decision
//! ([`FailureAnswers::answer`](stampede_placement::FailureAnswers::answer)).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use tokio_util::sync::CancellationToken;
use tonic::Code;

use super::config::DEFAULT_SANDBOX_TIMEOUT;
use super::error::ApiError;
use super::node_client::CreateSpec;
use super::rest::{NewSandbox, Sandbox};
use super::state::{lock, SandboxRecord, Shared};
use stampede_placement::{
    Answered, CreateReply, ErrorKind, FailureKind, Input, Output, PlacementKind,
};

/// E2B's `clientID` of every sandbox (`packages/shared/pkg/consts/sandboxes.go`).
pub(crate) const CLIENT_ID: &str = "6532622b";

/// Place and create one sandbox. The route runs this in a task of its own, so a client
/// hanging up does not drop it: a Create RPC in flight is always awaited and its reply
/// recorded, since the node may run the sandbox whatever the socket does. Were this
/// future dropped all the same, the placer forgets the request at once
/// ([`OpenRequest`]'s drop), as at its deadline.
pub(crate) async fn create_sandbox(
    shared: &Arc<Shared>,
    body: NewSandbox,
) -> Result<Sandbox, ApiError> {
    let sandbox_id = shared.new_sandbox_id();
    let _reserved = Reserved {
        shared,
        sandbox_id: &sandbox_id,
    };
    let warmed = std::sync::Mutex::new(None);
    place_inner(shared, &sandbox_id, body, None, None, &warmed).await
}

/// A create's id in `placing`, released however the create ends (answered or dropped).
struct Reserved<'a> {
    shared: &'a Shared,
    sandbox_id: &'a str,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        lock(&self.shared.placing).remove(self.sandbox_id);
    }
}

/// A request the placer holds open until it is answered; dropped unanswered (its
/// client hung up), it is cancelled in the placer and counted as its answer would be.
struct OpenRequest<'a> {
    shared: &'a Shared,
    req: u64,
    open: bool,
}

impl OpenRequest<'_> {
    /// The request is answered: nothing to cancel.
    fn answered(&mut self) {
        self.open = false;
    }
}

impl Drop for OpenRequest<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        tracing::debug!(req = self.req, "client gone: placement stopped");
        if let Some(Output::Answer(a)) = self.shared.handle(Input::Cancel { req: self.req }) {
            count_answer(self.shared, &a);
        }
    }
}

/// A placement from a snapshot (a resume or a fork): the node waits for a starting
/// slot, and the placer tries `origin` first ([`PreferredNode`](stampede_placement::PreferredNode)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FromSnapshot {
    /// The node the snapshot was taken on.
    pub origin: Option<String>,
    /// A resume (or connect) or a fork, as `/metrics` counts it.
    pub kind: PlacementKind,
}

/// Place `sandbox_id` (already reserved in `placing` by the caller, who releases it)
/// from a snapshot, with the settings of `body`; the answer carries the node and, after
/// a timeout, the node that warmed (see [`Answered::warmed`]).
pub(crate) async fn place_from_snapshot(
    shared: &Arc<Shared>,
    sandbox_id: &str,
    body: NewSandbox,
    from: FromSnapshot,
    gone: &CancellationToken,
) -> Result<Sandbox, (ApiError, Option<String>)> {
    let warmed = std::sync::Mutex::new(None);
    place_inner(shared, sandbox_id, body, Some(from), Some(gone), &warmed)
        .await
        .map_err(|e| (e, lock(&warmed).take()))
}

/// [`place_loop`], counted by kind in `/metrics`.
async fn place_inner(
    shared: &Arc<Shared>,
    sandbox_id: &str,
    body: NewSandbox,
    from: Option<FromSnapshot>,
    gone: Option<&CancellationToken>,
    warmed: &std::sync::Mutex<Option<String>>,
) -> Result<Sandbox, ApiError> {
    let kind = from.as_ref().map_or(PlacementKind::Create, |f| f.kind);
    let started = Instant::now();
    let r = place_loop(shared, sandbox_id, body, from, kind, gone, warmed).await;
    shared
        .telemetry
        .by_kind
        .ended(kind, r.is_ok(), started.elapsed());
    r
}

async fn place_loop(
    shared: &Arc<Shared>,
    sandbox_id: &str,
    body: NewSandbox,
    from: Option<FromSnapshot>,
    kind: PlacementKind,
    gone: Option<&CancellationToken>,
    warmed: &std::sync::Mutex<Option<String>>,
) -> Result<Sandbox, ApiError> {
    let cfg = &shared.cfg;
    let now = SystemTime::now();
    let spec = CreateSpec {
        sandbox_id: sandbox_id.to_string(),
        template_id: body.template_id,
        vcpu: body.cpu_count.unwrap_or(cfg.default_vcpu),
        ram_mb: body.memory_mb.unwrap_or(cfg.default_memory_mb),
        metadata: body.metadata.unwrap_or_default(),
        start: now,
        end: now
            + body.timeout.map_or(DEFAULT_SANDBOX_TIMEOUT, |s| {
                Duration::from_secs(u64::from(s))
            }),
        envd_version: cfg.envd_version.clone(),
        max_length_hours: cfg.max_length_hours,
        snapshot: from.is_some(),
    };
    let req = shared.next_request();
    let mut open = OpenRequest {
        shared,
        req,
        open: true,
    };
    let first = match from {
        None => Input::Create {
            req,
            sandbox_id: sandbox_id.into(),
            vcpu: spec.vcpu,
        },
        Some(FromSnapshot { origin, .. }) => Input::Resume {
            req,
            sandbox_id: sandbox_id.into(),
            vcpu: spec.vcpu,
            origin: origin.map(Into::into),
        },
    };
    let mut next = decide(shared, first);
    loop {
        let reply = match next {
            Some(Output::Answer(a)) => {
                open.answered();
                *lock(warmed) = a.warmed.as_deref().map(str::to_string);
                return answered(shared, spec, a);
            }
            Some(Output::RetryAt { at, .. }) => {
                let pause = at.saturating_sub(shared.now());
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = hung_up(gone) => return client_gone(&mut open, spec, warmed),
                }
                next = decide(shared, Input::RetryDue { req });
                continue;
            }
            // The API stage: the placer's schedule says when this request's workers are
            // done with it; the wait is the service's share of that work.
            Some(Output::DecideAt { at, .. }) => {
                let pause = at.saturating_sub(shared.now());
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = hung_up(gone) => return client_gone(&mut open, spec, warmed),
                }
                next = decide(shared, Input::DecideDue { req });
                continue;
            }
            // The choice is made on the view as it was; it counts on its node only once
            // the placer's drawn lag is over (nothing is held meanwhile).
            Some(Output::CommitAt { at, .. }) => {
                let pause = at.saturating_sub(shared.now());
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = hung_up(gone) => return client_gone(&mut open, spec, warmed),
                }
                next = decide(shared, Input::CommitDue { req });
                continue;
            }
            // The node runs the sandbox; the placer learns it after the drawn return
            // time, whatever the client does meanwhile.
            Some(Output::ReplyAt { at, .. }) => {
                tokio::time::sleep(at.saturating_sub(shared.now())).await;
                next = decide(shared, Input::ReplyDue { req });
                continue;
            }
            Some(Output::SendCreate {
                node,
                deadline,
                retry,
                ..
            }) => {
                if retry {
                    shared.telemetry.retries.fetch_add(1, Relaxed);
                }
                // No deadline of its own: E2B bounds the Create RPC by the request's only
                // (`packages/api/main.go` requestTimeout), so a hung node holds the request.
                let left = deadline.saturating_sub(shared.now());
                let Some(conn) = shared.nodes.get(node.as_str()) else {
                    // Unreachable: the placer only knows nodes of `shared.nodes`.
                    let reply = failed_reply(&node);
                    next = decide(shared, Input::CreateReplied { req, reply });
                    continue;
                };
                // Boxed: the RPC's future is most of this one's size, and only lives
                // while a Create is in flight.
                // Never given up for a hang-up: the node may run the sandbox whatever
                // the socket does, so its answer is always read and recorded.
                let answer = Box::pin(conn.client.create(&spec, left)).await;
                create_reply(shared, &spec, kind, &node, answer)
            }
            // A sync's transit is never a request's output.
            Some(Output::SyncAt { .. }) | None => {
                open.answered();
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "placement state lost",
                ));
            }
        };
        // A reply is handed to the placer even when the client has gone: a sandbox the
        // node runs is recorded (a hang-up ends the loop only while it waits).
        next = decide(shared, Input::CreateReplied { req, reply });
    }
}

/// Feed a request's input to the placer, timing the Best-of-K decision it makes (a
/// choice to commit, a Create to send, or no node to send it to). A Create sent as a
/// committed choice's lag ends was timed as that choice.
fn decide(shared: &Shared, input: Input) -> Option<Output> {
    let committing = matches!(input, Input::CommitDue { .. });
    let t0 = Instant::now();
    let out = shared.handle(input);
    let decided = match &out {
        Some(Output::CommitAt { .. }) => true,
        Some(Output::SendCreate { .. }) => !committing,
        Some(Output::Answer(a)) => a.failure.is_some(),
        _ => false,
    };
    if decided {
        shared.telemetry.record_decision(t0.elapsed());
    }
    out
}

fn failed_reply(node: &str) -> CreateReply {
    CreateReply::Failed {
        code: ErrorKind::Other,
        message: format!("node '{node}' not found"),
    }
}

/// What the Create's answer tells the placer. A created sandbox is registered before
/// the placer forgets the create in flight, so that a concurrent sync never takes it for
/// an orphan.
fn create_reply(
    shared: &Shared,
    spec: &CreateSpec,
    kind: PlacementKind,
    node: &str,
    answer: Result<String, tonic::Status>,
) -> CreateReply {
    match answer {
        Ok(_) => {
            // E2B's store gets a new start and end once placement succeeds
            // (`create_instance.go`), and its evictor reads those; the node keeps the
            // end time it was sent. A long storm so does not shorten the sandbox's life.
            let placed = SystemTime::now();
            let life = spec.end.duration_since(spec.start).unwrap_or_default();
            lock(&shared.sandboxes).insert(
                spec.sandbox_id.clone(),
                SandboxRecord {
                    node: node.to_string(),
                    template_id: spec.template_id.clone(),
                    vcpu: spec.vcpu,
                    ram_mb: spec.ram_mb,
                    metadata: spec.metadata.clone(),
                    started_at: placed,
                    end_at: placed.checked_add(life).unwrap_or(spec.end),
                    placed_at: Instant::now(),
                },
            );
            CreateReply::Created
        }
        Err(s) if s.code() == Code::ResourceExhausted => {
            shared.telemetry.refusals.fetch_add(1, Relaxed);
            shared.telemetry.storm.record(node);
            // E2B's orchestrator refuses a snapshot Create whose wait ran out with this
            // message (`waitForAcquire`), a fresh one with "starting".
            let waited = spec.snapshot && s.message().contains("resuming");
            shared.telemetry.by_kind.refused(kind, waited);
            CreateReply::Refused
        }
        Err(s) => {
            tracing::debug!(node, sandbox = %spec.sandbox_id, error = %s, "create failed");
            shared.telemetry.attempt_failures.fetch_add(1, Relaxed);
            CreateReply::Failed {
                code: error_kind(s.code()),
                message: s.message().to_string(),
            }
        }
    }
}

/// Resolves when `gone` is cancelled; never without one (a create's hang-up drops its
/// future instead).
async fn hung_up(gone: Option<&CancellationToken>) {
    match gone {
        Some(g) => g.cancelled().await,
        None => std::future::pending().await,
    }
}

/// The client hung up: the placer forgets the create in flight (if any) as at the
/// deadline (E2B's loop ends on `ctx.Done()` either way); nobody reads the answer.
fn client_gone(
    open: &mut OpenRequest<'_>,
    spec: CreateSpec,
    warmed: &std::sync::Mutex<Option<String>>,
) -> Result<Sandbox, ApiError> {
    tracing::debug!(sandbox = %spec.sandbox_id, "client gone: placement stopped");
    open.answered();
    let shared = open.shared;
    match shared.handle(Input::Cancel { req: open.req }) {
        Some(Output::Answer(a)) => {
            *lock(warmed) = a.warmed.as_deref().map(str::to_string);
            answered(shared, spec, a)
        }
        _ => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "placement state lost",
        )),
    }
}

fn error_kind(code: Code) -> ErrorKind {
    match code {
        Code::FailedPrecondition => ErrorKind::FailedPrecondition,
        Code::InvalidArgument => ErrorKind::InvalidArgument,
        _ => ErrorKind::Other,
    }
}

/// Counts a request's answer in the service's counters.
fn count_answer(shared: &Shared, a: &Answered) {
    let t = &shared.telemetry;
    let counter = match a.failure.as_ref().map(|f| f.kind) {
        None => &t.creates_ok,
        Some(FailureKind::CreateFailed) => &t.creates_failed,
        Some(FailureKind::TimedOut) => &t.creates_timed_out,
        Some(FailureKind::Unplaceable) => &t.creates_unplaceable,
        Some(FailureKind::Abandoned) => &t.creates_abandoned,
    };
    counter.fetch_add(1, Relaxed);
}

/// The request's answer: counted, then the sandbox or the error E2B answers with.
fn answered(shared: &Shared, spec: CreateSpec, a: Answered) -> Result<Sandbox, ApiError> {
    count_answer(shared, &a);
    let Some(f) = a.failure else {
        return Ok(Sandbox {
            template_id: spec.template_id,
            sandbox_id: spec.sandbox_id,
            alias: None,
            client_id: CLIENT_ID.to_string(),
            envd_version: shared.cfg.envd_version.clone(),
            domain: None,
        });
    };
    let status = StatusCode::from_u16(f.status.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Err(ApiError {
        error_code: f.error_code.map(|c| c.as_str()),
        ..ApiError::new(status, f.message)
    })
}
