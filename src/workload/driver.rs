//! Runs the workload through goose and folds every outcome into a [`Ledger`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use goose::config::{GooseConfiguration, GooseDefault, GooseDefaultType};
use goose::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use stampede_node_model::config::LatencyDist;
use tokio::sync::{mpsc, Barrier};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::burst::{BurstConn, Release, Tls};
use super::ledger::{Ledger, LedgerEntry, Outcome};
use super::lifecycle::{run_steps, Done, StepCtx, StepEntry};
use super::limited::LimitRetry;
use super::live::LiveCounts;
use super::pacing::{Pacing, SlotCounter};
use super::placements::PlacementFeed;
use super::request::{
    answered, create_body, delete, prepare_create, send_create, timed_out, transport, CreateResult,
    PreparedCreate, CREATE_NAME,
};
use crate::aggregate::SettledIds;
use crate::api_key::ApiKey;
use crate::goose_glue::killswitch;
use crate::profile::{Lifecycle, PlannedStep, SandboxSpec};

/// Everything one workload run needs.
#[derive(Debug, Clone)]
pub struct WorkloadRun {
    /// Base URLs of the placement service (one per replica; requests round-robin).
    pub targets: Vec<String>,
    /// Sent as `X-API-Key`.
    pub api_key: ApiKey,
    /// How requests are paced.
    pub pacing: Pacing,
    /// What each create asks for.
    pub sandbox: SandboxSpec,
    /// Delete each sandbox after a lifetime drawn from this; `None`: never.
    pub lifetime: Option<LatencyDist>,
    /// What a `mix` of sandboxes do after their create; `None`: plain creates.
    pub lifecycle: Option<Lifecycle>,
    /// Seed of the lifetimes and lifecycles.
    pub seed: u64,
    /// Client deadline of one request.
    pub request_timeout: Duration,
    /// Where goose writes its HTML report, if anywhere.
    pub goose_report: Option<PathBuf>,
    /// Stops the run early (Ctrl-C); what was recorded so far is kept.
    pub cancel: CancellationToken,
    /// Counts folded from every finished create as the ledger is, for a live view.
    pub progress: Option<Arc<LiveCounts>>,
    /// After `cancel` fires, how long a create already in flight may still answer
    /// before it is given up and recorded as [`Outcome::Cancelled`].
    pub cancel_grace: Duration,
    /// Sent as metadata `stampede-run` on every create, so cleanup can find sandboxes
    /// whose answer the run never read. `None`: no metadata.
    pub run_tag: Option<String>,
    /// What to do on a 429; `None`: record it and move on.
    pub limit_retry: Option<LimitRetry>,
    /// Keep every create's entry in the ledger; otherwise, for a run without a
    /// lifecycle, the ledger is [`audited`](Ledger::audited) when `audit` is given, else
    /// [`bounded`](Ledger::bounded): an entry is kept only until its create is settled.
    pub keep_entries: bool,
    /// What a set-audited run's ledger keeps beyond a bounded one's.
    pub audit: Option<LedgerAudit>,
    /// Where each placement is reported as its answer comes (a run's timeline).
    pub placements: Option<PlacementFeed>,
}

/// What a set-audited run's ledger keeps (see [`Ledger::audited`]).
#[derive(Debug, Clone)]
pub struct LedgerAudit {
    /// Where its settled creates go as digests (shared with the samples' history).
    pub settled: SettledIds,
    /// Whether every create's record is kept for the fault windows (a chaos run).
    pub windows: bool,
}

/// What a workload run produced.
#[derive(Debug)]
pub struct WorkloadOutput {
    /// Every request and outcome.
    pub ledger: Ledger,
    /// When the start gate opened (slot times are relative to it).
    pub gate: Option<Instant>,
    /// Whether the run was cut short by its cancel token.
    pub cancelled: bool,
    /// Burst: whether the loop releasing the final bytes ran at real-time priority
    /// (`None`: not a burst, or the gate never opened).
    pub release_realtime: Option<bool>,
    /// Burst: when the last of the burst's connections was open (client side, after its
    /// connect and warm-up); before `gate` unless the gate opened on its wait limit.
    pub last_connected: Option<Instant>,
}

/// Why a workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// No target URL was given.
    #[error("workload has no target URL")]
    NoTargets,
    /// goose refused the configuration or failed.
    #[error("goose: {0}")]
    Goose(#[source] Box<GooseError>),
    /// A task of the workload (goose's, or the ledger's fold) panicked or was dropped.
    #[error("workload task: {0}")]
    Task(#[source] tokio::task::JoinError),
}

enum Event {
    Created(LedgerEntry),
    Deleted(usize, Outcome),
    Step(StepEntry),
    /// Nothing more is recorded (goose was abandoned; its users may still hold senders).
    Close,
}

/// After a cancel and the grace, how much longer goose may take to stop its users
/// before the run stops waiting for it (its HTML report is then not written).
const GOOSE_STOP_MARGIN: Duration = Duration::from_millis(500);

/// Longest a worker waits at the start gate for the others (defined beside the service's
/// body deadline, which must exceed it).
pub use crate::serve::GATE_WAIT;

struct Shared {
    run: WorkloadRun,
    body: serde_json::Value,
    /// `body` as JSON bytes (a burst's own connections send these).
    body_bytes: axum::body::Bytes,
    slots: SlotCounter,
    barrier: Barrier,
    gate: Arc<OnceLock<Instant>>,
    /// Wakes the gate's watcher once `gate` is set (a stored permit if it is not waiting).
    gate_opened: tokio::sync::Notify,
    /// Releases the final bytes of a burst's creates.
    release: Release,
    /// TLS of a burst's own connections to https targets.
    tls: Tls,
    events: mpsc::UnboundedSender<Event>,
    deletes: std::sync::Mutex<JoinSet<()>>,
    delete_client: reqwest::Client,
    /// Creates sent and not yet recorded.
    in_flight: AtomicUsize,
    /// Burst: the latest instant one of its connections was open.
    last_connected: std::sync::Mutex<Option<Instant>>,
}

impl Shared {
    /// The gate's instant: now if no user opened it before (the first caller opens it).
    fn open_gate(&self) -> Instant {
        let gate = *self.gate.get_or_init(Instant::now);
        self.gate_opened.notify_one();
        gate
    }
}

/// Runs the workload to completion (or cancellation) and returns its ledger. Gate
/// release is announced on `gate_tx` so that a chaos schedule can align with it.
pub async fn run_workload(
    run: WorkloadRun,
    gate_tx: Option<tokio::sync::oneshot::Sender<Instant>>,
) -> Result<WorkloadOutput, WorkloadError> {
    if run.targets.is_empty() {
        return Err(WorkloadError::NoTargets);
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let workers = run.pacing.workers();
    let body = create_body(&run.sandbox, run.run_tag.as_deref());
    let shared = Arc::new(Shared {
        body_bytes: serde_json::to_vec(&body).unwrap_or_default().into(),
        body,
        slots: SlotCounter::default(),
        barrier: Barrier::new(workers.max(1)),
        gate: Arc::new(OnceLock::new()),
        gate_opened: tokio::sync::Notify::new(),
        release: Release::default(),
        tls: Tls::default(),
        events: tx,
        deletes: std::sync::Mutex::new(JoinSet::new()),
        delete_client: crate::http_client::client(),
        in_flight: AtomicUsize::new(0),
        last_connected: std::sync::Mutex::new(None),
        run,
    });
    let live = shared.run.progress.clone();
    let mut ledger = if shared.run.keep_entries || shared.run.lifecycle.is_some() {
        Ledger::new()
    } else {
        let shape = match shared.run.pacing {
            Pacing::Burst { .. } => crate::aggregate::RunShape::Burst,
            _ => crate::aggregate::RunShape::Paced,
        };
        let deletes = shared.run.lifetime.is_some();
        match &shared.run.audit {
            Some(a) => Ledger::audited(shape, deletes, a.settled.clone(), a.windows),
            None => Ledger::bounded(shape, deletes),
        }
    };
    let placements = shared.run.placements.clone();
    let gate = shared.gate.clone();
    let fold = tokio::spawn(async move {
        let mut first = true;
        while let Some(ev) = rx.recv().await {
            match ev {
                Event::Created(e) => {
                    if std::mem::take(&mut first) {
                        // A readiness mark for whoever drives the process (tests, CI).
                        tracing::info!("first create answered");
                    }
                    if let Some(l) = &live {
                        l.record(&e.outcome, e.node.as_deref());
                    }
                    // The gate opens before the first send, so before any answer.
                    if let (Some(p), Some(g)) = (&placements, gate.get()) {
                        p.answered(*g, &e);
                    }
                    ledger.record(e)
                }
                Event::Deleted(i, o) => {
                    if let Some(l) = &live {
                        l.lifetime_ended();
                    }
                    ledger.record_delete(i, o)
                }
                Event::Step(e) => ledger.record_step(e),
                Event::Close => break,
            }
        }
        ledger
    });

    let gate_watch = {
        let shared = shared.clone();
        tokio::spawn(async move {
            loop {
                if let Some(g) = shared.gate.get() {
                    tracing::info!("workload gate open");
                    if let Some(tx) = gate_tx {
                        let _ = tx.send(*g);
                    }
                    return;
                }
                tokio::select! {
                    _ = shared.gate_opened.notified() => {}
                    _ = shared.run.cancel.cancelled() => return,
                }
            }
        })
    };

    let attack = build_attack(shared.clone())?;
    let cancel = shared.run.cancel.clone();
    killswitch::reset();
    // On its own task: goose builds its users synchronously (one HTTP client each, which
    // loads the system's CA store), which can take many seconds for hundreds of users in
    // a debug build. A cancel must not wait for that.
    tracing::info!(workers, "workload starting");
    let mut exec = tokio::spawn(attack.execute());
    let goose = |r: Result<Result<_, GooseError>, tokio::task::JoinError>| match r {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(WorkloadError::Goose(Box::new(e))),
        Err(e) => Err(WorkloadError::Task(e)),
    };
    let result = tokio::select! {
        r = &mut exec => goose(r),
        _ = cancel.cancelled() => {
            shared.release.abort();
            killswitch::pull("stampede run cancelled");
            stop_goose(&shared, &mut exec).await.map_or(Ok(()), goose)
        }
    };
    gate_watch.abort();
    // Pending deletes finish (or stop on cancel) before the ledger closes.
    let mut deletes = std::mem::take(&mut *shared.deletes.lock().expect("delete set lock"));
    tokio::select! {
        _ = async { while deletes.join_next().await.is_some() {} } => {}
        _ = cancel.cancelled() => deletes.abort_all(),
    }
    let gate = shared.gate.get().copied();
    let release_realtime = shared.release.realtime();
    let last_connected = *shared.last_connected.lock().expect("last connected lock");
    let _ = shared.events.send(Event::Close);
    drop(shared);
    let mut ledger = fold.await.map_err(WorkloadError::Task)?;
    ledger.finish();
    result?;
    Ok(WorkloadOutput {
        ledger,
        gate,
        cancelled: cancel.is_cancelled(),
        release_realtime,
        last_connected,
    })
}

/// After a cancel: waits until every create in flight has been recorded (answered, or
/// given up at the end of the grace), then gives goose [`GOOSE_STOP_MARGIN`] to stop
/// its users. goose stops only between launches and transactions, so a run cancelled
/// while goose is still building hundreds of users is not held for it: `None` when
/// goose was abandoned (its HTML report is then not written).
async fn stop_goose<T>(
    shared: &Shared,
    exec: &mut tokio::task::JoinHandle<T>,
) -> Option<Result<T, tokio::task::JoinError>> {
    let drained_by = Instant::now() + shared.run.cancel_grace + GOOSE_STOP_MARGIN;
    loop {
        tokio::select! {
            r = &mut *exec => return Some(r),
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
        if shared.in_flight.load(Ordering::SeqCst) == 0 || Instant::now() >= drained_by {
            break;
        }
    }
    match tokio::time::timeout(GOOSE_STOP_MARGIN, &mut *exec).await {
        Ok(r) => Some(r),
        Err(_) => {
            tracing::warn!("goose did not stop after the cancel; its report is not written");
            None
        }
    }
}

fn build_attack(shared: Arc<Shared>) -> Result<GooseAttack, WorkloadError> {
    let g = |e: GooseError| WorkloadError::Goose(Box::new(e));
    let mut config = GooseConfiguration::default();
    config.host = Some(shared.run.targets[0].clone());
    config.no_print_metrics = true;
    config.no_error_summary = true;
    config.no_telnet = true;
    config.quiet = 1;
    config.timeout = Some(format!("{:.3}", shared.run.request_timeout.as_secs_f64()));
    if let Some(path) = &shared.run.goose_report {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        config.report_file = vec![path.display().to_string()];
    }
    let is_plan = matches!(shared.run.pacing, Pacing::Plan { .. });
    let mut attack = GooseAttack::initialize_with_config(config).map_err(g)?;
    match &shared.run.pacing {
        Pacing::Plan { steps } => {
            attack = *attack
                .set_default(GooseDefault::TestPlan, steps.as_str())
                .map_err(g)?;
        }
        _ => {
            let users = shared.run.pacing.workers();
            attack = *attack.set_default(GooseDefault::Users, users).map_err(g)?;
            attack = *attack
                .set_default(GooseDefault::IncreaseRate, "5000")
                .map_err(g)?;
            attack = *attack.set_default(GooseDefault::Iterations, 1).map_err(g)?;
        }
    }
    let s = shared.clone();
    let tx: goose::goose::TransactionFunction = Arc::new(move |user| {
        let s = s.clone();
        Box::pin(async move {
            if is_plan {
                plan_step(&s, user).await;
            } else {
                open_worker(&s, user).await;
            }
            Ok(())
        })
    });
    let scenario =
        scenario!("sandboxes").register_transaction(Transaction::new(tx).set_name("create"));
    Ok(attack.register_scenario(scenario))
}

/// Burst and rate: claim a slot, open and warm the connection it will use, wait at the
/// gate, then send and claim the next. Each request is built before its send time and
/// its connection is already open, so the gate releases sends, not TCP handshakes.
async fn open_worker(s: &Shared, user: &mut GooseUser) {
    let total = s.run.pacing.total();
    let mut slot = s.slots.claim(total);
    if matches!(s.run.pacing, Pacing::Burst { .. }) {
        // One slot per worker in a burst.
        if let Some(i) = slot {
            burst_slot(s, user, i).await;
        }
        return;
    }
    if let Some(i) = slot {
        warm(s, user, i).await;
    }
    let mut prepared = slot.map(|i| prepare(s, user, i));
    tokio::select! {
        _ = tokio::time::timeout(GATE_WAIT, s.barrier.wait()) => {}
        _ = s.run.cancel.cancelled() => return,
    }
    let gate = s.open_gate();
    while let (Some(i), Some(req)) = (slot, prepared.take()) {
        if s.run.cancel.is_cancelled() {
            break;
        }
        let intended = gate + s.run.pacing.intended_offset(i);
        if intended > Instant::now() {
            // A signal stops a worker waiting for its slot's time: nothing leaves after it.
            tokio::select! {
                _ = tokio::time::sleep_until(intended.into()) => {}
                _ = s.run.cancel.cancelled() => break,
            }
        }
        send_slot(s, user, gate, i, intended, req).await;
        slot = s.slots.claim(total);
        prepared = slot.map(|i| prepare(s, user, i));
    }
}

/// Plan: one create per goose iteration, sent now (closed model).
async fn plan_step(s: &Shared, user: &mut GooseUser) {
    let gate = s.open_gate();
    if s.run.cancel.is_cancelled() {
        return;
    }
    if let Some(i) = s.slots.claim(None) {
        let req = prepare(s, user, i);
        send_slot(s, user, gate, i, Instant::now(), req).await;
    }
}

/// Opens the user's connection to the target of slot `i` with one `GET /health` (E2B's
/// API answers it without a key); its client keeps the connection for the create. The
/// body is read to its end: a connection with an unread body is not reused.
async fn warm(s: &Shared, user: &mut GooseUser, i: usize) {
    let base = s.run.targets[i % s.run.targets.len()].trim_end_matches('/');
    let url = format!("{base}/health");
    let Ok(rb) = user.get_request_builder(&GooseMethod::Get, &url) else {
        return;
    };
    let rb = rb.header("User-Agent", crate::http_client::USER_AGENT);
    let req = GooseRequest::builder()
        .set_request_builder(rb)
        .name("GET /health")
        .build();
    if let Ok(r) = user.request(req).await {
        if let Ok(resp) = r.response {
            let _ = resp.bytes().await;
        }
    }
}

/// A burst slot: on a connection of its own, opened and warmed now, the create
/// leaves at once but for its final byte; once it is out (or failed), the worker waits
/// at the barrier, whose leader opens the gate and releases every final byte in one
/// loop ([`Release::open`]).
async fn burst_slot(s: &Shared, user: &mut GooseUser, i: usize) {
    let base = &s.run.targets[i % s.run.targets.len()];
    let conn = BurstConn::open_warm(base, &s.tls).await;
    if conn.is_ok() {
        let now = Instant::now();
        let mut last = s.last_connected.lock().expect("last connected lock");
        *last = Some(last.map_or(now, |l| l.max(now)));
    }
    let held = conn.as_ref().ok().map(|c| {
        let armed = c.gate().hold();
        s.release.register(c.gate().clone());
        (c.gate().clone(), armed)
    });
    let (gate_of, armed) = held.unzip();
    let at_gate = async {
        if let Some(armed) = armed {
            let _ = armed.await;
        }
        let waited = tokio::select! {
            w = tokio::time::timeout(GATE_WAIT, s.barrier.wait()) => w,
            // A cancel before the gate aborts the held bytes (`run_workload`).
            _ = s.run.cancel.cancelled() => return,
        };
        if waited.is_err() || waited.is_ok_and(|w| w.is_leader()) {
            s.open_gate();
            s.release.open();
        }
    };
    let send = async {
        let r = match conn {
            Ok(mut c) => {
                let create = c.create(&s.run.api_key, s.body_bytes.clone());
                match tokio::time::timeout(s.run.request_timeout, create).await {
                    Ok(Ok(a)) => answered(a.status, &a.headers, &a.body),
                    Ok(Err(e)) => transport(e),
                    Err(_) => timed_out(),
                }
            }
            Err(e) => transport(e),
        };
        // A create that failed before it was armed does not hold the gate.
        if let Some(g) = &gate_of {
            g.give_up();
        }
        r
    };
    s.in_flight.fetch_add(1, Ordering::SeqCst);
    let (r, ()) = tokio::join!(or_give_up(s, send), at_gate);
    let done = Instant::now();
    let gate = s.open_gate();
    // A create that failed before the gate counts as sent at the gate.
    let sent = gate_of.and_then(|g| g.released_at()).unwrap_or(gate);
    record_in_goose(user, &r, done.saturating_duration_since(sent)).await;
    let r = retry_limited(s, user, i, r).await;
    record(s, i, gate, gate, sent, done, r);
}

/// A create goose did not send, in goose's metrics as its own would be.
async fn record_in_goose(user: &mut GooseUser, r: &CreateResult, took: Duration) {
    let (status, error) = match &r.outcome {
        Outcome::Status(code) => (Some(*code), None),
        Outcome::Limited(_) => (Some(429), None),
        other => (None, Some(format!("{other:?}"))),
    };
    let ok = status == Some(201);
    let _ = user
        .record_custom_request_duration("POST", CREATE_NAME, took, ok, status, error.as_deref())
        .await;
}

fn prepare(s: &Shared, user: &GooseUser, i: usize) -> PreparedCreate {
    let base = &s.run.targets[i % s.run.targets.len()];
    prepare_create(user, base, &s.run.api_key, &s.body)
}

async fn send_slot(
    s: &Shared,
    user: &mut GooseUser,
    gate: Instant,
    i: usize,
    intended: Instant,
    req: PreparedCreate,
) {
    let sent = Instant::now();
    s.in_flight.fetch_add(1, Ordering::SeqCst);
    // Counted first, checked second: a cancel either sees this create in flight (and
    // waits for it) or this create sees the cancel (and is not sent).
    if s.run.cancel.is_cancelled() {
        s.in_flight.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let r = send_or_give_up(s, user, req).await;
    let r = retry_limited(s, user, i, r).await;
    record(s, i, gate, intended, sent, Instant::now(), r);
}

/// Sends a 429'd create again as the profile's `on_429` asks (none: `r` as it is).
async fn retry_limited(
    s: &Shared,
    user: &mut GooseUser,
    i: usize,
    mut r: CreateResult,
) -> CreateResult {
    let mut retries = 0;
    while let (Outcome::Limited(limit), Some(policy)) = (&r.outcome, &s.run.limit_retry) {
        if retries >= policy.max_retries || s.run.cancel.is_cancelled() {
            break;
        }
        retries += 1;
        tokio::select! {
            _ = tokio::time::sleep(policy.wait(limit)) => {}
            _ = s.run.cancel.cancelled() => break,
        }
        r = send_or_give_up(s, user, prepare(s, user, i)).await;
    }
    r
}

/// Folds one finished create into the ledger (and schedules its delete); the create
/// stops counting as in flight.
fn record(
    s: &Shared,
    i: usize,
    gate: Instant,
    intended: Instant,
    sent: Instant,
    done: Instant,
    r: CreateResult,
) {
    let target = i % s.run.targets.len();
    let ms = |t: Instant| t.saturating_duration_since(gate).as_secs_f64() * 1000.0;
    let plan = s
        .run
        .lifecycle
        .as_ref()
        .and_then(|l| l.plan(s.run.seed, i as u64));
    match (&r.sandbox_id, plan, &s.run.lifetime) {
        (Some(id), Some(steps), _) => schedule_steps(s, i, target, id.clone(), steps),
        (Some(id), None, Some(dist)) => schedule_delete(s, i, target, id.clone(), dist),
        _ => {}
    }
    let _ = s.events.send(Event::Created(LedgerEntry {
        index: i,
        target,
        intended_ms: ms(intended),
        sent_ms: ms(sent),
        latency_us: done.saturating_duration_since(intended).as_micros() as u64,
        outcome: r.outcome,
        sandbox_id: r.sandbox_id,
        node: r.node,
        deleted: None,
    }));
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
}

/// Sends a create; once the run is cancelled it has `cancel_grace` left to answer.
async fn send_or_give_up(s: &Shared, user: &mut GooseUser, req: PreparedCreate) -> CreateResult {
    or_give_up(s, send_create(user, req)).await
}

/// `create`, unless the run is cancelled and `cancel_grace` passes first.
async fn or_give_up(
    s: &Shared,
    create: impl std::future::Future<Output = CreateResult>,
) -> CreateResult {
    let cancel = s.run.cancel.clone();
    let stopping = s.run.cancel.clone();
    let grace = s.run.cancel_grace;
    let give_up = async move {
        cancel.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        biased;
        // A connection that breaks once the run is stopping broke with the stop (goose
        // closing its users, a loaded host's late grace timer): the create is given up,
        // as one the grace ran out on, not a fault of the target.
        r = create => match r.outcome {
            Outcome::TransportError(_) if stopping.is_cancelled() => CreateResult {
                outcome: Outcome::Cancelled,
                sandbox_id: None,
                node: None,
            },
            _ => r,
        },
        _ = give_up => CreateResult {
            outcome: Outcome::Cancelled,
            sandbox_id: None,
            node: None,
        },
    }
}

fn schedule_delete(s: &Shared, i: usize, target: usize, id: String, dist: &LatencyDist) {
    // One RNG per slot: the lifetime of slot i does not depend on arrival order.
    let mut rng =
        ChaCha8Rng::seed_from_u64(s.run.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let life = dist.sample(&mut rng);
    if let Some(l) = &s.run.progress {
        l.lifetime_scheduled(Some(Instant::now() + life));
    }
    let client = s.delete_client.clone();
    let base = s.run.targets[target].clone();
    let key = s.run.api_key.clone();
    let events = s.events.clone();
    let timeout = s.run.request_timeout;
    let cancel = s.run.cancel.clone();
    let mut set = s.deletes.lock().expect("delete set lock");
    // A finished task keeps its allocation in the set until it is joined: reap them as
    // the run goes, or a long run holds every delete it ever made (~1.5 KB each).
    while set.try_join_next().is_some() {}
    set.spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(life) => {}
            _ = cancel.cancelled() => return,
        }
        let outcome = delete(&client, &base, &key, &id, timeout).await;
        let _ = events.send(Event::Deleted(i, outcome));
    });
}

/// Runs sandbox `i`'s lifecycle beside the workload (tracked with the deletes, so the
/// run waits for it before the ledger closes).
fn schedule_steps(s: &Shared, i: usize, target: usize, id: String, steps: Vec<PlannedStep>) {
    let ctx = StepCtx {
        client: s.delete_client.clone(),
        base: s.run.targets[target].clone(),
        key: s.run.api_key.clone(),
        id,
        index: i,
        sandbox_timeout: s.run.sandbox.timeout,
        request_timeout: s.run.request_timeout,
        cancel: s.run.cancel.clone(),
    };
    let events = s.events.clone();
    if let Some(l) = &s.run.progress {
        l.lifetime_scheduled(None);
    }
    let mut set = s.deletes.lock().expect("delete set lock");
    while set.try_join_next().is_some() {}
    set.spawn(run_steps(ctx, steps, move |d| {
        let _ = events.send(match d {
            Done::Step(e) => Event::Step(e),
            Done::Killed(o) => Event::Deleted(i, o),
        });
    }));
}
