//! [`Placer`]: one placement instance's whole create lifecycle, sans-IO, in quinn-proto's
//! shape. The driver feeds [`Input`]s stamped with the time it keeps (a [`Duration`]
//! since its own epoch) and acts on the one [`Output`] each input may give: send a
//! Create to a node, call back at a time, answer the request. The deadline, exclusion,
//! attempts, what counts as a retry, the failure and its HTTP answer, the sync snapshot
//! and node status are decided here, for the service and the simulator alike.
//!
//! Rules from E2B's `packages/api/internal/orchestrator/placement/placement.go` (the
//! loop), `packages/api/main.go` (the 70 s request deadline that bounds the loop and
//! every Create in it), `nodemanager/sync.go` (a failed sync cycle).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::answer::{CreateStatus, ErrorCode, FailureAnswer};
use super::api_stage::{ApiStage, StageDraws, StageQueue};
use super::attempt::{
    Chosen, CreateErrorCode, CreateOutcome, Decision, PlacementAttempt, PlacementFailure,
};
use super::channel::ChannelState;
use super::config::PlacementConfig;
use super::core::PlacementCore;
use super::node_view::{NodeId, NodeStatus};
use super::preferred::PreferredNode;
use super::sync_reply::{snapshot, InfoReply, Listed};
use super::sync_timer::SyncTimer;
use super::trace::TraceSink;
use stampede_id::Id;

/// A driver's name for one create request (unique while it is open).
pub type RequestId = u64;

/// How the loop around the core runs: the request deadline and the refusal backoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlacerConfig {
    /// Best-of-K parameters and accounting mode.
    pub placement: PlacementConfig,
    /// Seed of the sampling RNG.
    pub seed: u64,
    /// Deadline of a whole request, from when its [`Input::Create`] arrives (E2B: 70 s).
    pub request_timeout: Duration,
    /// Pause after a ResourceExhausted refusal before the next try (E2B: none).
    pub retry_backoff: Option<Duration>,
    /// Answer every refusal with [`Output::RetryAt`], even without a backoff, so that
    /// the driver decides when the retry runs (the simulator, which settles retries it
    /// can prove refused without deciding them). Off: a refusal without backoff is
    /// retried at once.
    pub defer_retries: bool,
    /// Time each request spends in the API before its first decision, and how many the
    /// API works on at once. Default E2B's as measured ([`ApiStage::default`]).
    #[serde(default, skip_serializing_if = "ApiStage::is_default")]
    pub api_stage: ApiStage,
}

/// How a Create RPC ended, as the driver saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CreateReply {
    /// The sandbox runs on the node.
    Created,
    /// gRPC ResourceExhausted.
    Refused,
    /// Any other error, its code as far as the answer depends on it, and its message.
    Failed {
        /// Which kind of error.
        code: ErrorKind,
        /// The node's message.
        message: String,
    },
}

/// The serializable form of [`CreateErrorCode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// FailedPrecondition.
    FailedPrecondition,
    /// InvalidArgument.
    InvalidArgument,
    /// Anything else (a timeout or a lost connection included).
    Other,
}

impl From<ErrorKind> for CreateErrorCode {
    fn from(k: ErrorKind) -> Self {
        match k {
            ErrorKind::FailedPrecondition => CreateErrorCode::FailedPrecondition,
            ErrorKind::InvalidArgument => CreateErrorCode::InvalidArgument,
            ErrorKind::Other => CreateErrorCode::Other,
        }
    }
}

/// Something the driver tells the placer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// A create request arrived: place `sandbox_id` needing `vcpu`.
    Create {
        /// The driver's id for it.
        req: RequestId,
        /// The sandbox id chosen for it.
        sandbox_id: Id,
        /// vCPU.
        vcpu: u32,
    },
    /// A resume or fork request arrived: place `sandbox_id` needing `vcpu`, trying
    /// `origin` first when it can accept ([`PreferredNode`]).
    Resume {
        /// The driver's id for it.
        req: RequestId,
        /// The sandbox id (a resume keeps its own, a fork has a new one).
        sandbox_id: Id,
        /// vCPU.
        vcpu: u32,
        /// The node the snapshot was taken on, when known.
        origin: Option<NodeId>,
    },
    /// The Create RPC sent for `req` ended.
    CreateReplied {
        /// The request.
        req: RequestId,
        /// How it ended.
        reply: CreateReply,
    },
    /// The time of an [`Output::RetryAt`] for `req` came.
    RetryDue {
        /// The request.
        req: RequestId,
    },
    /// The time of an [`Output::DecideAt`] for `req` came: it leaves the API stage.
    DecideDue {
        /// The request.
        req: RequestId,
    },
    /// The time of an [`Output::CommitAt`] for `req` came: its choice counts on its
    /// node and its Create is sent.
    CommitDue {
        /// The request.
        req: RequestId,
    },
    /// The time of an [`Output::ReplyAt`] for `req` came: the placement learns that
    /// its create succeeded.
    ReplyDue {
        /// The request.
        req: RequestId,
    },
    /// The time of an [`Output::SyncAt`] for `node` came: its oldest reply in transit
    /// is applied.
    SyncArrived {
        /// The node.
        node: NodeId,
    },
    /// A retry of `req` the driver proved refused whatever node a draw returns (the
    /// simulator's settled retries): its round trip's node is a Best-of-K draw as any
    /// retry's, from an RNG seeded by `seed` rather than the placer's own (whose
    /// sequence the decided retries keep), and its create is in progress there until
    /// the next [`Input::CreateReplied`] or [`Input::SettledRetry`]. A create still in
    /// progress for `req` is refused first (its mark freed). Answers
    /// [`Output::SendCreate`] with the node, which the driver does not send.
    SettledRetry {
        /// The request.
        req: RequestId,
        /// Seed of this retry's draw.
        seed: u64,
    },
    /// The client of `req` hung up: stop placing it (E2B's request context).
    Cancel {
        /// The request.
        req: RequestId,
    },
    /// A sync of `node` read `info` and, unless that `List` failed, `listed`.
    Synced {
        /// The node.
        node: NodeId,
        /// The `ServiceInfo` answer.
        info: InfoReply,
        /// The `List` answer.
        listed: Option<Vec<Listed>>,
    },
    /// A sync cycle of `node` never completed; `answered`: some `ServiceInfo` of it did.
    SyncFailed {
        /// The node.
        node: NodeId,
        /// Whether the node answered at all in the cycle.
        answered: bool,
    },
    /// The state of `node`'s gRPC channel changed.
    Channel {
        /// The node.
        node: NodeId,
        /// Its new state.
        state: ChannelState,
    },
    /// A Delete of `sandbox_id` on `node` ended (a success or NotFound releases `vcpu`).
    DeleteEnded {
        /// The node.
        node: NodeId,
        /// The sandbox.
        sandbox_id: Id,
        /// Its vCPU.
        vcpu: u32,
        /// Whether the node deleted it (or no longer had it).
        released: bool,
    },
}

/// What the driver does next for one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// Send the request's Create to `node`; it must end by `deadline`.
    SendCreate {
        /// The request.
        req: RequestId,
        /// The node chosen.
        node: NodeId,
        /// The request's deadline (the RPC has none of its own).
        deadline: Duration,
        /// Whether this is a retry (not the request's first Create).
        retry: bool,
    },
    /// Feed [`Input::RetryDue`] for `req` at `at` (never past its deadline).
    RetryAt {
        /// The request.
        req: RequestId,
        /// When.
        at: Duration,
    },
    /// The request is in the API stage ([`ApiStage`]): feed [`Input::DecideDue`] for
    /// `req` at `at` (never past its deadline), when its first decision is made.
    DecideAt {
        /// The request.
        req: RequestId,
        /// When.
        at: Duration,
    },
    /// The request's Best-of-K choice is made but counts nowhere yet
    /// ([`ApiStage::commit_lag`]): feed [`Input::CommitDue`] for `req` at `at` (never
    /// past its deadline).
    CommitAt {
        /// The request.
        req: RequestId,
        /// When.
        at: Duration,
    },
    /// The request's create succeeded on its node, and the placement learns it later
    /// ([`ApiStage::create_return`]): feed [`Input::ReplyDue`] for `req` at `at`.
    ReplyAt {
        /// The request.
        req: RequestId,
        /// When.
        at: Duration,
    },
    /// A sync reply of `node` is in transit ([`ApiStage::sync_transit`]): feed
    /// [`Input::SyncArrived`] for `node` at `at`.
    SyncAt {
        /// The node.
        node: NodeId,
        /// When.
        at: Duration,
    },
    /// The request is over.
    Answer(Answered),
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answered {
    /// The request.
    pub req: RequestId,
    /// The node it runs on, when placed.
    pub node: Option<NodeId>,
    /// Why it was not placed, and what the client is told (`None` when placed).
    pub failure: Option<Failure>,
    /// Create RPCs sent for it.
    pub rpcs: u32,
    /// ResourceExhausted refusals among them.
    pub refusals: u32,
    /// Failed attempts counted (other errors).
    pub attempts: u32,
    /// When the request timed out (or its client hung up): the first node that got as
    /// far as trying its Create (not a ResourceExhausted refusal), E2B's `WarmedNode`;
    /// a resume's origin may be remapped to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmed: Option<NodeId>,
}

/// A request that was not placed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// Which kind of failure (what the service's counters count).
    pub kind: FailureKind,
    /// HTTP status of the answer.
    pub status: CreateStatus,
    /// E2B's `error_code`, when the answers carry one.
    pub error_code: Option<ErrorCode>,
    /// The answer's message.
    pub message: String,
}

/// The kind of a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Creates failed and no candidate was left.
    CreateFailed,
    /// The deadline passed.
    TimedOut,
    /// No node could be chosen (no capacity, no compatible node).
    Unplaceable,
    /// The client hung up.
    Abandoned,
}

impl Answered {
    /// The HTTP status of the answer (201 when placed).
    pub fn status(&self) -> CreateStatus {
        self.failure
            .as_ref()
            .map_or(CreateStatus::Created, |f| f.status)
    }
}

struct Open {
    attempt: PlacementAttempt,
    deadline: Duration,
    rpcs: u32,
    preferred: PreferredNode,
    first_tried: Option<NodeId>,
    /// The choice waiting for its commit ([`Output::CommitAt`]).
    chosen: Option<Chosen>,
    /// Whether its create succeeded and the placement waits to learn it
    /// ([`Output::ReplyAt`]).
    returning: bool,
}

/// A sync reply on its way to the placement.
struct InTransit {
    at: Duration,
    info: InfoReply,
    listed: Option<Vec<Listed>>,
}

/// One placement instance: the core, its RNG and the open requests.
pub struct Placer {
    cfg: PlacerConfig,
    core: PlacementCore,
    rng: ChaCha8Rng,
    /// The API stage's queue, when the stage is on.
    stage: Option<StageQueue>,
    /// The API's drawn times inside and after a decision.
    draws: StageDraws,
    /// Each node's sync replies in transit, oldest first.
    in_transit: HashMap<NodeId, VecDeque<InTransit>, foldhash::fast::RandomState>,
    open: HashMap<RequestId, Open, foldhash::fast::RandomState>,
    trace: Option<TraceSink>,
    /// The periodic sync, once a driver starts it.
    syncs: Option<SyncTimer>,
}

impl std::fmt::Debug for Placer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placer")
            .field("nodes", &self.core.len())
            .field("open", &self.open.len())
            .field("tracing", &self.trace.is_some())
            .finish()
    }
}

impl Placer {
    /// A placer over `nodes` (all `connecting` until their first sync).
    pub fn new(cfg: PlacerConfig, nodes: impl IntoIterator<Item = NodeId>) -> Self {
        let mut core = PlacementCore::new(cfg.placement.clone());
        for n in nodes {
            core.add_node(n);
        }
        Self {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            stage: StageQueue::new(&cfg.api_stage, cfg.seed),
            draws: StageDraws::new(&cfg.api_stage, cfg.seed),
            in_transit: HashMap::default(),
            core,
            cfg,
            open: HashMap::default(),
            trace: None,
            syncs: None,
        }
    }

    /// Record every input and output to `sink` from now on (a trace to replay).
    pub fn record(&mut self, mut sink: TraceSink) {
        sink.header(&self.cfg, self.core.nodes().map(|n| n.id().into()));
        self.trace = Some(sink);
    }

    /// The settings.
    pub fn config(&self) -> &PlacerConfig {
        &self.cfg
    }

    /// The core (read-only: node views, believed allocations, counters).
    pub fn core(&self) -> &PlacementCore {
        &self.core
    }

    /// The core, for a driver that attaches channel cells to its nodes.
    pub fn core_mut(&mut self) -> &mut PlacementCore {
        &mut self.core
    }

    /// The attempt state of an open request.
    pub fn attempt(&self, req: RequestId) -> Option<&PlacementAttempt> {
        self.open.get(&req).map(|o| &o.attempt)
    }

    /// Sync every node periodically as `timer` says, from now on.
    pub fn start_syncs(&mut self, timer: SyncTimer) {
        self.syncs = Some(timer);
    }

    /// The next periodic sync comes at `first`, then every interval after it.
    pub fn reset_syncs(&mut self, first: Duration) {
        if let Some(t) = &mut self.syncs {
            t.reset(first);
        }
    }

    /// When the driver should next call [`handle_timeout`](Self::handle_timeout): the
    /// next periodic sync (`None` before [`start_syncs`](Self::start_syncs)).
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.syncs.as_ref().map(SyncTimer::poll_timeout)
    }

    /// The driver's clock reads `now`: whether to sync every node now (see
    /// [`SyncTimer::handle_timeout`]).
    pub fn handle_timeout(&mut self, now: Duration) -> bool {
        self.syncs.as_mut().is_some_and(|t| t.handle_timeout(now))
    }

    /// Handle one input at `now`; at most one output follows from it.
    pub fn handle(&mut self, now: Duration, input: Input) -> Option<Output> {
        if let Some(t) = &mut self.trace {
            t.channels(now, &self.core);
            t.input(now, &input);
        }
        let out = self.apply(now, input);
        if let (Some(t), Some(o)) = (&mut self.trace, &out) {
            t.output(o);
        }
        out
    }

    fn apply(&mut self, now: Duration, input: Input) -> Option<Output> {
        match input {
            Input::Create {
                req,
                sandbox_id,
                vcpu,
            } => {
                self.open_request(now, req, sandbox_id, vcpu, None);
                self.staged(now, req)
            }
            Input::Resume {
                req,
                sandbox_id,
                vcpu,
                origin,
            } => {
                self.open_request(now, req, sandbox_id, vcpu, origin);
                self.staged(now, req)
            }
            Input::CreateReplied { req, reply } => self.replied(now, req, reply),
            Input::RetryDue { req } | Input::DecideDue { req } => self.decide(now, req),
            Input::CommitDue { req } => self.commit(now, req),
            Input::ReplyDue { req } => self.learn_created(req),
            Input::SyncArrived { node } => {
                let t = self.in_transit.get_mut(&node)?.pop_front()?;
                self.apply_synced(&node, &t.info, t.listed.as_deref());
                None
            }
            Input::SettledRetry { req, seed } => {
                let o = self.open.get_mut(&req)?;
                o.attempt
                    .report(&mut self.core, CreateOutcome::ResourceExhausted);
                self.decide_from(now, req, Some(seed))
            }
            Input::Cancel { req } => {
                let mut o = self.open.remove(&req)?;
                let f = o.attempt.deadline_reached(&mut self.core);
                Some(self.fail(req, &o, FailureKind::Abandoned, &f))
            }
            Input::Synced { node, info, listed } => {
                self.core.node(&node)?;
                let Some(transit) = self.draws.sync_transit() else {
                    self.apply_synced(&node, &info, listed.as_deref());
                    return None;
                };
                let queue = self.in_transit.entry(node.clone()).or_default();
                // A node's replies arrive in the order it built them.
                let after = queue.back().map_or(Duration::ZERO, |t| t.at);
                let at = now.saturating_add(transit).max(after);
                queue.push_back(InTransit { at, info, listed });
                Some(Output::SyncAt { node, at })
            }
            Input::SyncFailed { node, answered } => {
                let synced = self.core.node(&node)?.counters().syncs > 0;
                let status = if synced || answered {
                    NodeStatus::Unhealthy
                } else {
                    NodeStatus::Connecting
                };
                self.core.set_status(&node, status);
                None
            }
            Input::Channel { node, state } => {
                self.core.set_channel(&node, state);
                None
            }
            Input::DeleteEnded {
                node,
                sandbox_id,
                vcpu,
                released,
            } => {
                if released {
                    self.core.delete_succeeded(&node, &sandbox_id, vcpu);
                }
                None
            }
        }
    }

    /// A sync reply of `node` reaches the placement: status and metrics applied, the
    /// accounting reconciled against the figures as they are now.
    fn apply_synced(&mut self, node: &NodeId, info: &InfoReply, listed: Option<&[Listed]>) {
        let Some(view) = self.core.node(node) else {
            return;
        };
        let snap = snapshot(info, listed, view.accounting());
        self.core.apply_sync(node, snap);
    }

    fn open_request(
        &mut self,
        now: Duration,
        req: RequestId,
        sandbox_id: Id,
        vcpu: u32,
        origin: Option<NodeId>,
    ) {
        let open = Open {
            attempt: PlacementAttempt::new(sandbox_id, vcpu),
            deadline: now.saturating_add(self.cfg.request_timeout),
            rpcs: 0,
            preferred: PreferredNode::new(&self.core, origin),
            first_tried: None,
            chosen: None,
            returning: false,
        };
        self.open.insert(req, open);
    }

    /// A request just opened: through the API stage when it is on, else decided now.
    fn staged(&mut self, now: Duration, req: RequestId) -> Option<Output> {
        let Some(stage) = &mut self.stage else {
            return self.decide(now, req);
        };
        let deadline = self.open.get(&req)?.deadline;
        let at = stage.admit(now).min(deadline);
        Some(Output::DecideAt { req, at })
    }

    fn replied(&mut self, now: Duration, req: RequestId, reply: CreateReply) -> Option<Output> {
        let o = self.open.get_mut(&req)?;
        if reply != CreateReply::Refused && o.first_tried.is_none() {
            o.first_tried = o.attempt.current_node().cloned();
        }
        if reply == CreateReply::Created && !o.returning {
            if let Some(ret) = self.draws.create_return() {
                // The node runs it; the create stays in progress here until then.
                o.returning = true;
                let at = now.saturating_add(ret).min(o.deadline.max(now));
                return Some(Output::ReplyAt { req, at });
            }
        }
        let decision = match &reply {
            CreateReply::Created => o.attempt.report(&mut self.core, CreateOutcome::Created),
            CreateReply::Refused => o
                .attempt
                .report(&mut self.core, CreateOutcome::ResourceExhausted),
            CreateReply::Failed { code, message } => {
                o.attempt
                    .report_error(&mut self.core, (*code).into(), message)
            }
        };
        if let Decision::Placed(node) = decision {
            let o = self.open.remove(&req)?;
            return Some(Output::Answer(Answered {
                req,
                node: Some(node),
                failure: None,
                rpcs: o.rpcs,
                refusals: o.attempt.refusals(),
                attempts: o.attempt.attempts(),
                warmed: None,
            }));
        }
        if reply == CreateReply::Refused && now < o.deadline {
            let pause = self.cfg.retry_backoff.unwrap_or_default();
            if !pause.is_zero() || self.cfg.defer_retries {
                let at = now.saturating_add(pause).min(o.deadline);
                return Some(Output::RetryAt { req, at });
            }
        }
        self.decide(now, req)
    }

    /// The placement learns that the create of `req` succeeded (its return time over).
    fn learn_created(&mut self, req: RequestId) -> Option<Output> {
        let o = self.open.get_mut(&req)?;
        if !o.returning {
            return None;
        }
        o.returning = false;
        let node = match o.attempt.report(&mut self.core, CreateOutcome::Created) {
            Decision::Placed(node) => node,
            Decision::Retry => return None,
        };
        let o = self.open.remove(&req)?;
        Some(Output::Answer(Answered {
            req,
            node: Some(node),
            failure: None,
            rpcs: o.rpcs,
            refusals: o.attempt.refusals(),
            attempts: o.attempt.attempts(),
            warmed: None,
        }))
    }

    /// The commit of the choice `req` made: past its deadline the request times out
    /// (nothing was held), else the create counts on its node and is sent.
    fn commit(&mut self, now: Duration, req: RequestId) -> Option<Output> {
        let o = self.open.get_mut(&req)?;
        let chosen = o.chosen.take()?;
        if now >= o.deadline {
            let f = o.attempt.deadline_reached(&mut self.core);
            let o = self.open.remove(&req)?;
            return Some(self.fail(req, &o, FailureKind::TimedOut, &f));
        }
        let node = o.attempt.commit(&mut self.core, chosen);
        Some(Self::send(req, o, node))
    }

    /// The Create of `req` goes to `node`.
    fn send(req: RequestId, o: &mut Open, node: NodeId) -> Output {
        let retry = o.rpcs > 0;
        o.rpcs += 1;
        Output::SendCreate {
            req,
            node,
            deadline: o.deadline,
            retry,
        }
    }

    /// The next try of an open request: its deadline, then a Best-of-K decision.
    fn decide(&mut self, now: Duration, req: RequestId) -> Option<Output> {
        self.decide_from(now, req, None)
    }

    /// [`decide`](Self::decide), drawing from an RNG seeded by `seed` when given.
    fn decide_from(&mut self, now: Duration, req: RequestId, seed: Option<u64>) -> Option<Output> {
        let mut own;
        let rng = match seed {
            Some(s) => {
                own = ChaCha8Rng::seed_from_u64(s);
                &mut own
            }
            None => &mut self.rng,
        };
        let o = self.open.get_mut(&req)?;
        let failure = if now >= o.deadline {
            let f = o.attempt.deadline_reached(&mut self.core);
            (FailureKind::TimedOut, f)
        } else {
            let preferred = o.preferred.take();
            // A settled retry is proven refused whatever it chose: it commits at once.
            let lag = match (&preferred, seed) {
                (None, None) => self.draws.commit_lag(),
                _ => None,
            };
            let tried = match (preferred, lag) {
                (Some(node), _) => o.attempt.place_on(&mut self.core, node),
                (None, None) => o.attempt.next(&mut self.core, rng),
                (None, Some(lag)) => match o.attempt.choose(&mut self.core, rng) {
                    Ok(chosen) => {
                        o.chosen = Some(chosen);
                        let at = now.saturating_add(lag).min(o.deadline);
                        return Some(Output::CommitAt { req, at });
                    }
                    Err(f) => Err(f),
                },
            };
            match tried {
                Ok(node) => return Some(Self::send(req, o, node)),
                Err(f) => {
                    let kind = match f {
                        PlacementFailure::CreateFailed { .. } => FailureKind::CreateFailed,
                        PlacementFailure::Timeout { .. } => FailureKind::TimedOut,
                        PlacementFailure::NoNodesAvailable | PlacementFailure::NoCandidate(_) => {
                            FailureKind::Unplaceable
                        }
                    };
                    (kind, f)
                }
            }
        };
        let o = self.open.remove(&req)?;
        Some(self.fail(req, &o, failure.0, &failure.1))
    }

    fn fail(&self, req: RequestId, o: &Open, kind: FailureKind, f: &PlacementFailure) -> Output {
        let FailureAnswer {
            status,
            error_code,
            message,
        } = self.cfg.placement.failure_answers.answer(f);
        let warmed = match kind {
            FailureKind::TimedOut | FailureKind::Abandoned => o.first_tried.clone(),
            FailureKind::CreateFailed | FailureKind::Unplaceable => None,
        };
        Output::Answer(Answered {
            req,
            node: None,
            failure: Some(Failure {
                kind,
                status,
                error_code,
                message,
            }),
            rpcs: o.rpcs,
            refusals: o.attempt.refusals(),
            attempts: o.attempt.attempts(),
            warmed,
        })
    }
}
