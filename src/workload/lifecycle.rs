//! A sandbox's lifecycle after its create, over the wire: holds, pauses, resumes (or
//! connects) and its kill, each step's outcome folded into the ledger.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::ledger::Outcome;
use super::request::{delete, NODE_HEADER};
use crate::api_key::ApiKey;
use crate::profile::PlannedStep;

/// Which lifecycle call a [`StepEntry`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// `POST /sandboxes/{id}/pause` (204 on success).
    Pause,
    /// `POST /sandboxes/{id}/resume` (201 on success: a placement).
    Resume,
    /// `POST /sandboxes/{id}/connect` on a paused sandbox (201 on success: a placement).
    Connect,
}

impl StepKind {
    /// Whether a success of this step placed the sandbox on a node.
    pub fn places(self) -> bool {
        matches!(self, StepKind::Resume | StepKind::Connect)
    }
}

/// One lifecycle call of one sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEntry {
    /// Slot index of the sandbox's create.
    pub index: usize,
    /// Which call.
    pub kind: StepKind,
    /// From send to answer, in microseconds.
    pub latency_us: u64,
    /// What came back.
    pub outcome: Outcome,
    /// Node the service reported placing it on (`X-Stampede-Node`), for a resume.
    pub node: Option<String>,
}

impl StepEntry {
    /// Whether the call did what it asked (pause 204, resume or connect 201).
    pub fn succeeded(&self) -> bool {
        match self.kind {
            StepKind::Pause => self.outcome == Outcome::Status(204),
            StepKind::Resume | StepKind::Connect => self.outcome == Outcome::Status(201),
        }
    }
}

/// What the lifecycle task needs of the run.
pub(crate) struct StepCtx {
    pub client: reqwest::Client,
    pub base: String,
    pub key: ApiKey,
    pub id: String,
    pub index: usize,
    /// The sandbox's `timeout`, sent with a resume or connect.
    pub sandbox_timeout: Duration,
    pub request_timeout: Duration,
    pub cancel: CancellationToken,
}

/// What one planned step produced.
pub(crate) enum Done {
    /// A pause, resume or connect.
    Step(StepEntry),
    /// The kill's outcome.
    Killed(Outcome),
}

/// Runs `steps` in order, handing each outcome to `out`. Stops at a failed call (the
/// run's cleanup removes what is left) or on cancel.
pub(crate) async fn run_steps(ctx: StepCtx, steps: Vec<PlannedStep>, mut out: impl FnMut(Done)) {
    for step in steps {
        let kind = match step {
            PlannedStep::Hold(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => continue,
                    _ = ctx.cancel.cancelled() => return,
                }
            }
            PlannedStep::Kill => {
                let o = delete(
                    &ctx.client,
                    &ctx.base,
                    &ctx.key,
                    &ctx.id,
                    ctx.request_timeout,
                );
                tokio::select! {
                    o = o => out(Done::Killed(o)),
                    _ = ctx.cancel.cancelled() => {}
                }
                return;
            }
            PlannedStep::Pause => StepKind::Pause,
            PlannedStep::Resume => StepKind::Resume,
            PlannedStep::Connect => StepKind::Connect,
        };
        let entry = tokio::select! {
            e = call(&ctx, kind) => e,
            _ = ctx.cancel.cancelled() => return,
        };
        let ok = entry.succeeded();
        out(Done::Step(entry));
        if !ok {
            return;
        }
    }
}

async fn call(ctx: &StepCtx, kind: StepKind) -> StepEntry {
    let verb = match kind {
        StepKind::Pause => "pause",
        StepKind::Resume => "resume",
        StepKind::Connect => "connect",
    };
    let url = format!("{}/{verb}", super::sandbox_url(&ctx.base, &ctx.id));
    let mut req = ctx
        .client
        .post(url)
        .header("X-API-Key", ctx.key.expose())
        .timeout(ctx.request_timeout);
    if kind.places() {
        req = req.json(&serde_json::json!({ "timeout": ctx.sandbox_timeout.as_secs() }));
    }
    let sent = Instant::now();
    let (outcome, node) = match req.send().await {
        Ok(r) => {
            let node = r
                .headers()
                .get(NODE_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            (Outcome::Status(r.status().as_u16()), node)
        }
        Err(e) if e.is_timeout() => (Outcome::Timeout, None),
        Err(e) => (Outcome::TransportError(e.to_string()), None),
    };
    StepEntry {
        index: ctx.index,
        kind,
        latency_us: sent.elapsed().as_micros() as u64,
        outcome,
        node,
    }
}
