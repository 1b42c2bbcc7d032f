//! One run of a profile against one API build on a fresh stack: data stores, E2B's
//! schema and seed, a mock-node fleet from the profile, the API, the workload (`stampede
//! run --api ... --mock-admin ...` as a child), both truths, then everything stopped.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::apilog::{LogCompactor, LogSummary};
use super::arrivals::{read_starts, ArrivalSpread};
use super::build::Built;
use super::child::{ChildError, Procs};
use super::database::{free_port, start_postgres, start_redis, StoreError, Stores};
use super::probe_log::{self, ProbeSummary};
use super::provision::{self, ProvisionError};
use crate::placement::AccountingMode;
use crate::report::{Report, SkewStats};

/// E2B's orchestrator port: the API's legacy node-list discovery dials each Nomad node
/// on it (`packages/api/internal/orchestrator/discovery`), so mock-node serves every
/// node on its own loopback IP at this port.
pub const ORCHESTRATOR_PORT: u16 = 5008;
/// How long the API may take to list every node ready (an assumption: E2B's API lists
/// them 0.1-0.5 s after start on an idle machine; a loaded 2-core host is slower).
const READY_DEADLINE: Duration = Duration::from_secs(180);
/// How long mock-node may take to print its ready line.
const FLEET_DEADLINE: Duration = Duration::from_secs(60);
/// Least time between the API's readiness and the workload's start.
const SETTLE: Duration = Duration::from_secs(1);
/// What the env var names the workload child reads its secrets from (the values never
/// reach a command line).
const KEY_VAR: &str = "STAMPEDE_E2B_API_KEY";
const ADMIN_VAR: &str = "STAMPEDE_E2B_ADMIN_TOKEN";
/// The probe's log in a trial's folder.
const PROBE_LOG: &str = "probe.log";
/// Seconds of execution trace a probed run keeps from the workload's start (a burst's
/// decisions all fall in its first second or two here).
const TRACE_SECONDS: u32 = 5;

/// The API a trial starts.
#[derive(Debug, Clone)]
pub enum ApiKind {
    /// E2B's API, built.
    E2b(Built),
    /// Any command standing in for an API (`--api-cmd`): `{port}`, `{nomad}`,
    /// `{mock_admin}`, `{postgres}` and `{redis}` in its words are replaced; it reads
    /// the key from `STAMPEDE_API_KEY` and the admin token from `STAMPEDE_ADMIN_TOKEN`
    /// (also `ADMIN_TOKEN`).
    Command {
        /// The command's words.
        argv: Vec<String>,
        /// A substring of the line it prints at its first node sync.
        sync_line: String,
        /// The accounting mode it runs, for the twin.
        mode: AccountingMode,
    },
}

impl ApiKind {
    /// The accounting mode the twin runs for this API.
    pub fn mode(&self) -> AccountingMode {
        match self {
            ApiKind::E2b(b) => b.mode,
            ApiKind::Command { mode, .. } => *mode,
        }
    }
}

/// One trial to run.
#[derive(Debug, Clone)]
pub struct TrialPlan {
    /// The profile.
    pub profile: PathBuf,
    /// Nodes the profile's fleet has.
    pub nodes: usize,
    /// What each create asks for: E2B's API takes a sandbox's vCPU and memory from its
    /// template's build, so the template is registered with these.
    pub sandbox: crate::profile::SandboxSpec,
    /// The API.
    pub api: ApiKind,
    /// Where the sync phase should be at the workload's start.
    pub target_phase: Duration,
    /// Stores given by the user (`--postgres`, `--redis`), else started per trial.
    pub stores: Option<Stores>,
    /// PostgreSQL's server binaries, if not found by themselves.
    pub pg_bin: Option<PathBuf>,
    /// The trial's folder.
    pub dir: PathBuf,
    /// The stampede binary (for mock-node and the workload).
    pub exe: PathBuf,
    /// The API's sync period.
    pub cycle: Duration,
}

/// Errors of a trial.
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    /// A process could not start.
    #[error(transparent)]
    Child(#[from] ChildError),
    /// A data store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// E2B's schema or seed failed.
    #[error(transparent)]
    Provision(#[from] ProvisionError),
    /// A step failed.
    #[error("{0}")]
    Step(String),
    /// Interrupted (SIGINT, SIGTERM).
    #[error("interrupted")]
    Interrupted,
}

/// One node's counts after a trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeCount {
    /// Node id.
    pub id: String,
    /// Creates that stored a sandbox (mock-node's `creates_ok`).
    pub placed: u64,
    /// Creates the node refused (`creates_rejected`, every reason).
    pub refusals: u64,
    /// The API's own count of creates on it, where it exposes one (E2B's
    /// `createSuccesses` in `GET /nodes`).
    pub api_count: Option<u64>,
}

/// What one trial measured.
#[derive(Debug, Clone, Serialize)]
pub struct TrialResult {
    /// `REV:VARIANT` or the command's label.
    pub label: String,
    /// The phase asked, seconds.
    pub target_phase_s: f64,
    /// The phase met: seconds from the workload's first requests (the run's
    /// `workload started` line, printed as its gate opens) to the API's first periodic
    /// sync after them, from the API's initial-sync log line; `None` when either line
    /// was not seen. The twin runs at this phase.
    pub phase_s: Option<f64>,
    /// The phase at the workload child's start (its `run tag:` line), seconds: what the
    /// start was planned on; the run's own setup lies between it and `phase_s`.
    pub spawn_phase_s: Option<f64>,
    /// Per node, in id order.
    pub nodes: Vec<NodeCount>,
    /// CV of the per-node placements.
    pub cv: f64,
    /// Requests, ok and failed as the workload counted them.
    pub requests: u64,
    /// Answered 2xx.
    pub ok: u64,
    /// Latency p50, ms.
    pub p50_ms: f64,
    /// Latency p99, ms.
    pub p99_ms: f64,
    /// The workload's own report folder.
    pub report_dir: Option<PathBuf>,
    /// The workload's exit code (0 checks passed, 1 a check failed).
    pub run_exit: Option<i32>,
    /// When the Creates of the sandboxes still running reached the nodes; `None` when
    /// none was running at the end or the nodes could not be listed (said as progress).
    pub arrivals: Option<ArrivalSpread>,
    /// Where `phase_s` was measured: `probe` (the first decision's score read, from the
    /// probe's log) or `workload` (the workload's `workload started` line).
    pub phase_from: String,
    /// The timing probe's figures, for a probed build.
    pub probe: Option<ProbeSummary>,
    /// The API's log, compacted.
    #[serde(skip)]
    pub api_log: LogSummary,
    /// What was stopped at the end.
    pub stopped: Vec<String>,
}

impl TrialResult {
    /// Refusals over every node.
    pub fn refusals(&self) -> u64 {
        self.nodes.iter().map(|n| n.refusals).sum()
    }
    /// Placements per node.
    pub fn placed(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.placed).collect()
    }
}

fn step(msg: impl Into<String>) -> TrialError {
    TrialError::Step(msg.into())
}

/// Runs one trial; everything it started is stopped before it returns, whatever the
/// outcome. `say` gets progress lines.
pub async fn run_trial(
    plan: &TrialPlan,
    cancel: &CancellationToken,
    say: &(dyn Fn(&str) + Sync),
) -> Result<TrialResult, TrialError> {
    std::fs::create_dir_all(&plan.dir)
        .map_err(|e| step(format!("creating {}: {e}", plan.dir.display())))?;
    let mut procs = Procs::new(&plan.dir)?;
    let log = Arc::new(Mutex::new(LogCompactor::new(match &plan.api {
        ApiKind::E2b(_) => super::apilog::E2B_INITIAL_SYNC,
        ApiKind::Command { sync_line, .. } => sync_line,
    })));
    let outcome = tokio::select! {
        r = trial_steps(plan, &mut procs, &log, say) => r,
        _ = cancel.cancelled() => Err(TrialError::Interrupted),
    };
    let stopped = procs.stop_all().await;
    if let Ok(summary) = log.lock().map(|l| l.summary().clone()) {
        let _ = std::fs::write(
            plan.dir.join("api-log.json"),
            serde_json::to_vec_pretty(&summary).expect("plain data"),
        );
    }
    let mut r = match outcome {
        Ok(r) => r,
        Err(e) => {
            say(&format!("stopped: {}", stopped.join("; ")));
            return Err(e);
        }
    };
    r.api_log = log.lock().map(|l| l.summary().clone()).unwrap_or_default();
    r.stopped = stopped;
    let sync_wall = log.lock().ok().and_then(|l| l.sync_seen).map(|(_, w)| w);
    read_probe(plan, &mut r, sync_wall, say);
    Ok(r)
}

async fn trial_steps(
    plan: &TrialPlan,
    procs: &mut Procs,
    log: &Arc<Mutex<LogCompactor>>,
    say: &(dyn Fn(&str) + Sync),
) -> Result<TrialResult, TrialError> {
    let label = match &plan.api {
        ApiKind::E2b(b) => b.label(),
        ApiKind::Command { argv, mode, .. } => {
            format!(
                "{}:{mode}",
                argv.first().map(String::as_str).unwrap_or("api")
            )
        }
    };
    let stores = match &plan.stores {
        Some(s) => s.clone(),
        None => {
            let postgres = start_postgres(procs, &plan.dir, plan.pg_bin.as_deref()).await?;
            let redis = start_redis(procs, &plan.dir).await?;
            say(&format!(
                "PostgreSQL and Redis up on loopback ({})",
                plan.dir.display()
            ));
            Stores { postgres, redis }
        }
    };
    let api_key = match &plan.api {
        ApiKind::E2b(b) => {
            let n = provision::migrate(&b.tree, &stores.postgres, &plan.dir).await?;
            let key = provision::seed(&b.tree, &stores.postgres, &plan.dir).await?;
            provision::template_and_limits(&stores.postgres, &plan.sandbox, &plan.dir).await?;
            say(&format!(
                "E2B schema ({n} migrations), local-dev seed, template `{}` ({} vCPU, {} MiB)",
                plan.sandbox.template, plan.sandbox.vcpu, plan.sandbox.ram_mb
            ));
            key
        }
        ApiKind::Command { .. } => secret(),
    };
    let admin = secret();
    write_secrets(&plan.dir, &api_key, &admin)?;
    if let Ok(mut l) = log.lock() {
        l.redact(&api_key);
        l.redact(&admin);
    }

    // The fleet.
    let loopback_ips = matches!(plan.api, ApiKind::E2b(_));
    let mut cmd = Command::new(&plan.exe);
    cmd.arg("mock-node").arg("--config").arg(&plan.profile);
    if loopback_ips {
        cmd.args(["--loopback-ips", "--port", &ORCHESTRATOR_PORT.to_string()]);
    }
    cmd.stdout(Stdio::piped())
        .stderr(file(&plan.dir, "mock-node.err")?);
    let p = procs.spawn("mock-node", cmd, libc::SIGTERM, Duration::from_secs(5))?;
    let stdout = p.child.stdout.take().expect("piped");
    let ready = match read_ready_line(stdout, plan.dir.join("mock-node.log")).await {
        Ok(r) => r,
        Err(e) => {
            let said = std::fs::read_to_string(plan.dir.join("mock-node.err")).unwrap_or_default();
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(step(format!("{e}: {last}")));
        }
    };
    let field = |k: &str| {
        ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .map(str::to_string)
    };
    let mock_admin = field("admin")
        .ok_or_else(|| step(format!("mock-node's ready line has no admin=: {ready}")))?;
    let nomad = field("nomad").unwrap_or_default();
    say(&format!(
        "mock-node fleet ready ({} nodes, admin {mock_admin})",
        plan.nodes
    ));

    // The API.
    let port = free_port().map_err(|e| step(format!("finding a free port: {e}")))?;
    let api_url = format!("http://127.0.0.1:{port}");
    let probed = matches!(&plan.api, ApiKind::E2b(b) if b.probe);
    let pprof_port = if probed {
        free_port().map_err(|e| step(e.to_string()))?
    } else {
        0
    };
    let mut cmd = match &plan.api {
        ApiKind::E2b(b) => {
            let mut c = Command::new(&b.binary);
            c.arg("-port").arg(port.to_string());
            let internal = free_port().map_err(|e| step(e.to_string()))?;
            let edge = free_port().map_err(|e| step(e.to_string()))?;
            for (k, v) in [
                ("ENVIRONMENT", "dev".to_string()),
                ("NODE_ID", "stampede-api".into()),
                ("NOMAD_ADDRESS", nomad.clone()),
                (
                    "NOMAD_ORCHESTRATOR_SERVICE_NAMES",
                    "stampede-orchestrator".into(),
                ),
                ("NOMAD_ORCHESTRATOR_LEGACY_DISCOVERY_ENABLED", "true".into()),
                ("VOLUME_TOKEN_ENABLED", "false".into()),
                // Required by the API's config; only log queries use it.
                ("LOKI_URL", "http://127.0.0.1:9".into()),
                ("POSTGRES_CONNECTION_STRING", stores.postgres.clone()),
                ("REDIS_URL", stores.redis.clone()),
                ("API_INTERNAL_GRPC_PORT", internal.to_string()),
                ("API_EDGE_GRPC_PORT", edge.to_string()),
                ("SANDBOX_ACCESS_TOKEN_HASH_SEED", secret()),
                // Revisions before `VOLUME_TOKEN_ENABLED` existed require a volume-token
                // signer (`cfg/model.go`: `TYPE:base64(VALUE)`); unused by placement.
                ("VOLUME_TOKEN_ISSUER", "stampede.local".into()),
                ("VOLUME_TOKEN_SIGNING_METHOD", "HS256".into()),
                (
                    "VOLUME_TOKEN_SIGNING_KEY",
                    format!("HMAC:{}", base64(secret().as_bytes())),
                ),
                ("VOLUME_TOKEN_SIGNING_KEY_NAME", "stampede".into()),
            ] {
                c.env(k, v);
            }
            if b.probe {
                c.env("STAMPEDE_PROBE_FILE", plan.dir.join(PROBE_LOG));
                c.env("STAMPEDE_PROBE_PPROF", format!("127.0.0.1:{pprof_port}"));
            }
            c
        }
        ApiKind::Command { argv, .. } => {
            let words: Vec<String> = argv
                .iter()
                .map(|w| {
                    w.replace("{port}", &port.to_string())
                        .replace("{nomad}", &nomad)
                        .replace("{mock_admin}", &mock_admin)
                        .replace("{postgres}", &stores.postgres)
                        .replace("{redis}", &stores.redis)
                })
                .collect();
            let mut c = Command::new(&words[0]);
            c.args(&words[1..]).env("STAMPEDE_API_KEY", &api_key);
            c
        }
    };
    cmd.env("ADMIN_TOKEN", &admin)
        .env("STAMPEDE_ADMIN_TOKEN", &admin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let p = procs.spawn("api", cmd, libc::SIGTERM, Duration::from_secs(3))?;
    for pipe in [
        p.child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        p.child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let log = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut l) = log.lock() {
                    l.line(&line);
                }
            }
        });
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .user_agent(concat!("stampede/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| step(format!("HTTP client: {e}")))?;
    if let Err(e) = wait_nodes_ready(&http, &api_url, &admin, plan.nodes, procs).await {
        // Give the API's own last word (a FATAL config error, say) with the failure.
        let last = log
            .lock()
            .ok()
            .and_then(|l| l.summary().errors.last().cloned())
            .unwrap_or_default();
        return Err(if last.is_empty() {
            e
        } else {
            step(format!("{e}; the API's last error: {last}"))
        });
    }
    say(&format!(
        "API ready at {api_url}: {} nodes listed ready",
        plan.nodes
    ));

    // Start the workload at the planned phase of the API's sync cycle. The child's own
    // setup (truth read, leftovers listed) takes a variable while before its first
    // requests, so the phase the twin runs at is measured at its gate, not planned.
    let sync_seen = log.lock().ok().and_then(|l| l.sync_seen);
    let startup = Duration::from_millis(300);
    if let Some((at, _)) = sync_seen {
        let earliest = Instant::now() + SETTLE;
        let start = next_start(at, earliest, plan.target_phase, plan.cycle);
        let spawn_at = start.checked_sub(startup).unwrap_or(start);
        tokio::time::sleep_until(spawn_at.into()).await;
    }
    let report_parent = plan.dir.join("report");
    let mut cmd = Command::new(&plan.exe);
    cmd.arg("run")
        .arg(&plan.profile)
        .args([
            "--api",
            &api_url,
            "--api-key-env",
            KEY_VAR,
            "--admin-token-env",
            ADMIN_VAR,
        ])
        // The sandboxes stay for the arrivals read below; the stack goes with the trial.
        .args([
            "--mock-admin",
            &mock_admin,
            "--keep",
            "--quiet",
            "--report-dir",
        ])
        .arg(&report_parent)
        .env(KEY_VAR, &api_key)
        .env(ADMIN_VAR, &admin)
        .stdout(file(&plan.dir, "run.log")?)
        .stderr(Stdio::piped());
    // Through the registry: its own group, killed with the harness, in stack.json.
    let mut run = procs.spawn_watched("workload", cmd)?;
    let run_pid = run.id().unwrap_or(0);
    // A probed API's execution trace over the workload's first seconds (a burst's whole).
    let trace = probed.then(|| {
        let http = http.clone();
        let file = plan.dir.join("trace.out");
        tokio::spawn(async move {
            let url = format!(
                "http://127.0.0.1:{pprof_port}/debug/pprof/trace?seconds={}",
                TRACE_SECONDS
            );
            let got = async {
                http.get(&url)
                    .send()
                    .await?
                    .error_for_status()?
                    .bytes()
                    .await
            }
            .await;
            match got {
                Ok(b) => std::fs::write(&file, &b).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        })
    });
    let stderr = run.stderr.take().expect("piped");
    let started: Arc<Mutex<Option<Instant>>> = Arc::default();
    let started2 = started.clone();
    let gate: Arc<Mutex<Option<Instant>>> = Arc::default();
    let gate2 = gate.clone();
    let err_log = plan.dir.join("run.err");
    let reader = tokio::spawn(async move {
        let mut out = String::new();
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let stamp = if line.starts_with("run tag:") {
                Some(&started2)
            } else if line == crate::run::WORKLOAD_STARTED {
                Some(&gate2)
            } else {
                None
            };
            if let Some(Ok(mut s)) = stamp.map(|m| m.lock()) {
                s.get_or_insert_with(Instant::now);
            }
            out.push_str(&line);
            out.push('\n');
        }
        let _ = std::fs::write(err_log, out);
    });
    let status = loop {
        tokio::select! {
            s = run.wait() => break s.map_err(|e| step(format!("waiting for the workload: {e}")))?,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {
                if let Some((role, st)) = procs.exited() {
                    let _ = run.start_kill();
                    return Err(step(format!("{role} exited during the workload ({st}); see {}", plan.dir.display())));
                }
            }
        }
    };
    let _ = reader.await;
    procs.forget(run_pid)?;
    if probed {
        for (name, file) in [
            ("mutex?debug=1", "mutex.txt"),
            ("block?debug=1", "block.txt"),
            ("mutex", "mutex.pb.gz"),
            ("block", "block.pb.gz"),
        ] {
            save_profile(&http, pprof_port, name, &plan.dir.join(file), say).await;
        }
    }
    if let Some(t) = trace {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => say(&format!("the API's execution trace not saved: {e}")),
            Err(e) => say(&format!("the API's execution trace not saved: {e}")),
        }
    }
    // The sync line may have reached the log reader only after the API answered ready
    // (a loaded machine): read it again now, so the phase is measured whenever it came.
    let sync_seen = sync_seen.or_else(|| log.lock().ok().and_then(|l| l.sync_seen));
    let phase_of = |at: &Mutex<Option<Instant>>| match (sync_seen, *at.lock().ok()?) {
        (Some((sync, _)), Some(start)) => Some(phase_at(sync, start, plan.cycle).as_secs_f64()),
        _ => None,
    };
    let phase_s = phase_of(&gate);
    let spawn_phase_s = phase_of(&started);

    // Truths: mock-node's counters, when each Create reached a node, and the API's own
    // view.
    let (mut nodes, grpc) = mock_counts(&http, &mock_admin).await?;
    let arrivals = match read_starts(&grpc).await {
        Ok(starts) => ArrivalSpread::from_seconds(starts),
        Err(e) => {
            say(&format!("node arrivals not read: {e}"));
            None
        }
    };
    if let Ok(view) = api_counts(&http, &api_url, &admin).await {
        for n in &mut nodes {
            n.api_count = view.get(&n.id).copied();
        }
    }
    let report_dir = find_report(&report_parent);
    let report: Option<Report> = report_dir
        .as_ref()
        .and_then(|d| crate::report::read_json(&d.join("report.json")).ok());
    let (requests, ok, p50, p99) = report
        .as_ref()
        .and_then(|r| r.runs.first())
        .map(|r| (r.requests, r.ok, r.latency.p50_ms, r.latency.p99_ms))
        .unwrap_or_default();
    let placed: Vec<u64> = nodes.iter().map(|n| n.placed).collect();
    Ok(TrialResult {
        label,
        target_phase_s: plan.target_phase.as_secs_f64(),
        phase_s,
        spawn_phase_s,
        cv: SkewStats::from_counts(&placed).cv,
        nodes,
        requests,
        ok,
        p50_ms: p50,
        p99_ms: p99,
        report_dir,
        run_exit: status.code(),
        arrivals,
        phase_from: "workload".into(),
        probe: None,
        api_log: LogSummary::default(),
        stopped: Vec::new(),
    })
}

/// The probe's log of a probed build, summed up; the phase re-measured at the first
/// decision's score read (when the probe saw one and the API's sync line was seen).
fn read_probe(
    plan: &TrialPlan,
    r: &mut TrialResult,
    sync_wall: Option<SystemTime>,
    say: &(dyn Fn(&str) + Sync),
) {
    let ApiKind::E2b(b) = &plan.api else {
        return;
    };
    if !b.probe {
        return;
    }
    let path = plan.dir.join(PROBE_LOG);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            say(&format!("the probe's log {} not read: {e}", path.display()));
            return;
        }
    };
    let p = probe_log::summarise(&text);
    if let (Some(ns), Some(wall)) = (p.first_read_unix_ns, sync_wall) {
        let sync_ns = wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let since = Duration::from_nanos(ns.saturating_sub(sync_ns).max(0) as u64);
        let into = Duration::from_nanos((since.as_nanos() % plan.cycle.as_nanos().max(1)) as u64);
        r.phase_s = Some((plan.cycle - into).as_secs_f64());
        r.phase_from = "probe".into();
    }
    r.probe = Some(p);
}

/// Saves one of the probed API's Go profiles (`/debug/pprof/NAME`) into the trial's
/// folder; a failure is said, not fatal.
async fn save_profile(
    http: &reqwest::Client,
    port: u16,
    name: &str,
    file: &Path,
    say: &(dyn Fn(&str) + Sync),
) {
    let url = format!("http://127.0.0.1:{port}/debug/pprof/{name}");
    let got = async {
        let resp = http.get(&url).send().await?.error_for_status()?;
        resp.bytes().await
    }
    .await;
    match got {
        Ok(bytes) => {
            if let Err(e) = std::fs::write(file, &bytes) {
                say(&format!("writing {}: {e}", file.display()));
            }
        }
        Err(e) => say(&format!("the API's profile {name} not read: {e}")),
    }
}

/// The first instant at or after `earliest` whose phase (time to the next sync of a
/// cycle that ticked at `sync`) is `phase`.
pub fn next_start(sync: Instant, earliest: Instant, phase: Duration, cycle: Duration) -> Instant {
    // Syncs at sync + k*cycle; start = sync + k*cycle - phase for the least k that is late enough.
    let mut k: u32 = 1;
    loop {
        let t = sync + cycle * k;
        if let Some(start) = t.checked_sub(phase) {
            if start >= earliest {
                return start;
            }
        }
        k += 1;
    }
}

/// Time from `start` to the first sync after it, in `(0, cycle]`.
pub fn phase_at(sync: Instant, start: Instant, cycle: Duration) -> Duration {
    let since = start.saturating_duration_since(sync);
    let into = Duration::from_nanos((since.as_nanos() % cycle.as_nanos()) as u64);
    cycle - into
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A fresh random secret (128 bits, hex).
fn secret() -> String {
    use rand::RngCore;
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The secrets of a trial, readable by the owner only (for a user who wants to talk to
/// the API by hand while it runs); never printed.
fn write_secrets(dir: &Path, key: &str, admin: &str) -> Result<(), TrialError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("secrets.env");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| step(format!("writing {}: {e}", path.display())))?;
    writeln!(f, "{KEY_VAR}={key}\n{ADMIN_VAR}={admin}")
        .map_err(|e| step(format!("writing {}: {e}", path.display())))
}

fn file(dir: &Path, name: &str) -> Result<std::fs::File, TrialError> {
    std::fs::File::create(dir.join(name)).map_err(|e| step(format!("creating {name}: {e}")))
}

/// Reads mock-node's stdout until its ready line, then copies the rest into `log`.
async fn read_ready_line(
    stdout: tokio::process::ChildStdout,
    log: PathBuf,
) -> Result<String, TrialError> {
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(FLEET_DEADLINE, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("mock-node ready") {
                return Some(line);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| {
        step("mock-node exited or printed no ready line within 60 s; see mock-node.err")
    })?;
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        if let Ok(mut f) = tokio::fs::File::create(log).await {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = f.write_all(format!("{line}\n").as_bytes()).await;
            }
        }
    });
    Ok(ready)
}

async fn wait_nodes_ready(
    http: &reqwest::Client,
    api: &str,
    admin: &str,
    want: usize,
    procs: &mut Procs,
) -> Result<(), TrialError> {
    let end = Instant::now() + READY_DEADLINE;
    let mut last = String::from("no answer yet");
    while Instant::now() < end {
        if let Some((role, st)) = procs.exited() {
            return Err(step(format!(
                "{role} exited before the API was ready ({st})"
            )));
        }
        match http
            .get(format!("{api}/nodes"))
            .header("X-Admin-Token", admin)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                let nodes: Vec<serde_json::Value> = r.json().await.unwrap_or_default();
                let ready = nodes
                    .iter()
                    .filter(|n| n.get("status").and_then(|s| s.as_str()) == Some("ready"))
                    .count();
                if ready >= want {
                    return Ok(());
                }
                last = format!("{ready} of {want} nodes ready");
            }
            Ok(r) => last = format!("GET /nodes: {}", r.status()),
            Err(e) => last = format!("GET /nodes: {}", crate::error_chain::chain_text(&e)),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(step(format!(
        "the API did not list every node ready within {READY_DEADLINE:?} (last: {last})"
    )))
}

/// mock-node's counters per node, in id order, and every node's gRPC address.
async fn mock_counts(
    http: &reqwest::Client,
    admin: &str,
) -> Result<(Vec<NodeCount>, Vec<SocketAddr>), TrialError> {
    let body: mock_node::api::NodesResponse = http
        .get(format!("{admin}/nodes"))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| step(format!("reading mock-node's counters: {e}")))?
        .json()
        .await
        .map_err(|e| step(format!("reading mock-node's counters: {e}")))?;
    let grpc = body.nodes.iter().map(|n| n.grpc_addr).collect();
    let mut out: Vec<NodeCount> = body
        .nodes
        .into_iter()
        .map(|n| NodeCount {
            id: n.id,
            placed: n.creates_ok,
            refusals: n.creates_rejected.values().sum(),
            api_count: None,
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok((out, grpc))
}

/// E2B's per-node `createSuccesses` (its cumulative count) by node id.
async fn api_counts(
    http: &reqwest::Client,
    api: &str,
    admin: &str,
) -> Result<BTreeMap<String, u64>, reqwest::Error> {
    let nodes: Vec<serde_json::Value> = http
        .get(format!("{api}/nodes"))
        .header("X-Admin-Token", admin)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(nodes
        .iter()
        .filter_map(|n| {
            let id = n
                .get("nodeID")
                .or_else(|| n.get("id"))?
                .as_str()?
                .to_string();
            let c = n.get("createSuccesses")?.as_u64()?;
            Some((id, c))
        })
        .collect())
}

fn find_report(parent: &Path) -> Option<PathBuf> {
    std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("report.json").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads_as_the_standard_says() {
        assert_eq!(base64(b"secret"), "c2VjcmV0");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
    }

    #[test]
    fn the_planned_start_meets_the_asked_phase() {
        let sync = Instant::now();
        let cycle = Duration::from_secs(20);
        for phase_ms in [500u64, 5_000, 10_000, 19_500, 20_000] {
            let phase = Duration::from_millis(phase_ms);
            let start = next_start(sync, sync + Duration::from_secs(3), phase, cycle);
            assert!(start >= sync + Duration::from_secs(3));
            assert_eq!(phase_at(sync, start, cycle), phase, "{phase_ms}");
        }
    }
}
