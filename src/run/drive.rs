//! One run against a target that is up: sample, (chaos), workload, settle, judge.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::chaos_stage;
use super::cleanup::Leftovers;
use super::progress::{Progress, ProgressFeed};
use super::result::{aggregate, RunRecords};
use super::{RunOptions, StageError};
use crate::aggregate::{
    needs_set_audit, RunAggregate, RunShape, RunTimeline, ServiceCounters, SettledIds,
};
use crate::api_key::ApiKey;
use crate::collect::{Before, SampleHistory, SampleSink, Sampler, TruthSource};
use crate::goose_glue::MutedStdout;
use crate::profile::{Profile, Shape};
use crate::report::{Baseline, StagingFacts};
use crate::serve::TelemetryReader;
use crate::workload::{
    run_workload, Ledger, LedgerAudit, LimitRetry, LiveCounts, Outcome, Pacing, PlacementFeed,
    WorkloadRun,
};

/// After a signal, how long a create in flight may still answer before it is given up.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_millis(1500);

/// A placement service that is up, and where to read its nodes.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Run label (accounting mode, or `external`).
    pub label: String,
    /// Base URLs to send creates to (round-robin).
    pub urls: Vec<String>,
    /// `X-API-Key`.
    pub key: ApiKey,
    /// Per-node truth.
    pub truth: TruthSource,
    /// Services whose `/nodes` belief is sampled.
    pub believers: Vec<String>,
    /// Admin token for the believers.
    pub admin_token: Option<ApiKey>,
    /// mock-node admin URLs faults are applied through (empty: no chaos possible).
    pub chaos_admin: Vec<String>,
    /// Whether those fleets outlive this process (external), so that an abort must name
    /// the faults it leaves on them.
    pub chaos_outlives_run: bool,
    /// Node ids, for resolving chaos selectors (and the live placements CV).
    pub node_ids: Vec<String>,
    /// The embedded replicas' counters, for the live progress line (none: external).
    pub services: Vec<TelemetryReader>,
    /// Wait after healing before the inventory is read (one sync plus margin).
    pub settle: Duration,
    /// Client deadline of one request.
    pub request_timeout: Duration,
    /// An API stampede did not start: what its nodes held before the run (subtracted
    /// from every count) and the metadata tag of this run's creates. `None`: embedded.
    pub staging: Option<StagingTarget>,
    /// This run's place among the profile's runs (`(1, 2)`: the first of two), shown
    /// on the progress line.
    pub position: Option<(usize, usize)>,
}

/// What a run against an external API adds to its target.
#[derive(Debug, Clone)]
pub(crate) struct StagingTarget {
    /// Truth read before the run.
    pub before: Before,
    /// `stampede-run` metadata of every create.
    pub tag: String,
}

/// One driven run: its aggregate (every fact but the wall time and an external run's
/// cleanup fed in, not yet finished) and what it left on the nodes.
#[derive(Debug)]
pub(crate) struct Driven {
    /// The run's fold, finished by the caller once the run's wall time is known.
    pub aggregate: RunAggregate,
    /// Sandboxes the run created and did not delete.
    pub leftovers: Leftovers,
}

/// Drives one run; `on_gate` is called when the workload's gate opens, `telemetry`
/// returns the placement service's counters at the end.
pub(crate) async fn drive(
    profile: &Profile,
    target: Target,
    opts: &RunOptions,
    on_gate: impl FnOnce(Instant) + Send + 'static,
    telemetry: impl FnOnce() -> ServiceCounters,
) -> Result<Driven, StageError> {
    let sampler = Sampler {
        source: target.truth.clone(),
        believers: target.believers.clone(),
        admin_token: target.admin_token.clone(),
        interval: profile.collect.interval,
    };
    let start = Instant::now();
    let stop_sampling = CancellationToken::new();
    let judging = needs_set_audit(profile);
    let baseline = target.staging.as_ref().map(|s| s.before.clone());
    // Samples and placements are binned into the timeline as they come. Sandbox ids
    // are read only by the set audit and the fault windows (which come with chaos,
    // which is judged): they are folded into the samples' history as they come, which
    // forgets a sandbox once the ledger has settled it and the truth no longer lists it.
    let timeline = Arc::new(Mutex::new(RunTimeline::new()));
    let chaos_windows = !profile.chaos.is_empty();
    let audit = judging.then(|| LedgerAudit {
        settled: SettledIds::default(),
        windows: chaos_windows,
    });
    let new_history = || {
        audit.as_ref().map(|a| {
            let h = SampleHistory::new().forgetting(a.settled.clone());
            if chaos_windows {
                h.with_windows()
            } else {
                h
            }
        })
    };
    let new_sink = || SampleSink::new(timeline.clone(), baseline.clone(), new_history());
    let sampling = tokio::spawn(
        sampler
            .clone()
            .record(start, stop_sampling.clone(), new_sink()),
    );

    let before = if judging {
        chaos_stage::inventory_before(&target).await
    } else {
        None
    };
    let pacing = pacing_of(profile);
    let gate_seen = Arc::new(OnceLock::<Instant>::new());
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<Instant>();
    let (chaos_gate_tx, chaos_gate_rx) = tokio::sync::oneshot::channel();
    let seen = gate_seen.clone();
    tokio::spawn(async move {
        if let Ok(at) = gate_rx.await {
            let _ = seen.set(at);
            on_gate(at);
            let _ = chaos_gate_tx.send(at);
        }
    });
    let signalled = Arc::new(OnceLock::<Instant>::new());
    let signal_watch = {
        let (cancel, at) = (opts.cancel.clone(), signalled.clone());
        tokio::spawn(async move {
            cancel.cancelled().await;
            let _ = at.set(Instant::now());
        })
    };
    let watch = target.chaos_outlives_run.then_some(&opts.abort);
    let chaos = chaos_stage::spawn(profile, &target, chaos_gate_rx, watch).await?;
    let live = (!opts.quiet || opts.metrics.is_some())
        .then(|| Arc::new(LiveCounts::new(&target.node_ids)));
    let feed = live.as_ref().map(|live| {
        Arc::new(ProgressFeed {
            label: target.label.clone(),
            position: target.position,
            total: pacing.total().map(|n| n as u64),
            live: live.clone(),
            services: target.services.clone(),
            faults: chaos.windows(),
            gate: gate_seen.clone(),
        })
    });
    if let (Some(t), Some(f)) = (&opts.metrics, &feed) {
        t.register(f.clone());
    }
    let progress = feed.filter(|_| !opts.quiet).map(Progress::start);
    // goose prints "N users launched." on stdout from a worker thread, with a `println!`
    // that panics when stdout is closed (`stampede run | head -1`); the run's own output
    // is the summary printed at the end, and its progress goes to stderr.
    let muted = MutedStdout::mute();
    let workload = run_workload(
        WorkloadRun {
            targets: target.urls.clone(),
            api_key: target.key.clone(),
            pacing: pacing.clone(),
            sandbox: profile.workload.sandbox.clone(),
            lifetime: profile.workload.lifetime.clone(),
            lifecycle: profile.workload.lifecycle.clone(),
            seed: profile.seed,
            request_timeout: target.request_timeout,
            goose_report: super::goose_report_path(profile, opts, &target.label),
            cancel: opts.cancel.clone(),
            progress: live,
            cancel_grace: CANCEL_GRACE,
            run_tag: target.staging.as_ref().map(|s| s.tag.clone()),
            limit_retry: profile.workload.on_429.map(|o| LimitRetry {
                max_retries: o.retries,
                honour_retry_after: o.honour_retry_after,
                backoff: o.backoff,
                max_wait: o.max_wait,
            }),
            keep_entries: false,
            audit: audit.clone(),
            placements: Some(PlacementFeed {
                timeline: timeline.clone(),
                origin: start,
            }),
        },
        Some(gate_tx),
    )
    .await;
    drop(muted);
    if let Some(p) = progress {
        p.finish().await;
    }
    let applied = chaos.finish().await;
    signal_watch.abort();
    let mut workload = workload?;
    if judging && !opts.cancel.is_cancelled() {
        // Let the service see the healed cluster before the inventory is read.
        tokio::time::sleep(target.settle).await;
    }
    let client = crate::http_client::client();
    let leftovers = leftovers_of(&workload.ledger);
    let signal_ms = signalled.get().map(|at| {
        workload.gate.map_or(0.0, |g| {
            at.saturating_duration_since(g).as_secs_f64() * 1000.0
        })
    });
    let counted = Counted::of(&workload.ledger, signal_ms);
    // The sampler stops before the final read, which is the timeline's last sample.
    stop_sampling.cancel();
    let mut sink = sampling.await.unwrap_or_else(|_| new_sink());
    let (last, final_read) = super::final_read::read(
        &sampler,
        &client,
        start,
        baseline.as_ref(),
        leftovers.live.len() as u64,
        opts.cancel.is_cancelled(),
    )
    .await;
    let last =
        last.ok_or_else(|| StageError::Collect("the final read of node truth failed".into()))?;
    let last = sink.take_final(last);
    let mut history = sink.into_history();
    // Ledger and fault times run from the gate; put the samples on that clock too.
    let offset_ms = workload.gate.map_or(0.0, |g| {
        g.saturating_duration_since(start).as_secs_f64() * 1000.0
    });
    if let Some(h) = &mut history {
        h.shift(offset_ms);
    }

    let counters = telemetry();
    let shape = match pacing {
        Pacing::Burst { .. } => RunShape::Burst,
        _ => RunShape::Paced,
    };
    let settled = workload.ledger.take_settled();
    let mut agg = {
        let timeline = timeline.lock().map_err(|_| {
            StageError::Collect("the run's timeline was poisoned by a panic".into())
        })?;
        let mut agg = aggregate(RunRecords {
            ledger: &workload.ledger,
            settled,
            timeline: &timeline,
            offset_ms,
            final_truth: &last.truth,
            final_believed: &last.believed,
            shape,
            counters: &counters,
        });
        if target.staging.is_some() {
            timeline.feed_refusals(&mut agg, offset_ms);
        }
        agg
    };
    agg.release_realtime(workload.release_realtime);
    if profile.workload.lifecycle.is_some() {
        let by_kind = workload.ledger.placements_by_kind();
        agg.placements_by_kind(by_kind.into_iter().map(|(k, v)| (k.into(), v)).collect());
        agg.resumes(workload.ledger.resume_figures());
    }
    if judging {
        chaos_stage::judge(
            &mut agg,
            &applied,
            &workload,
            history.unwrap_or_default(),
            &target,
            before.as_ref(),
        )
        .await?;
    }
    if let Some(st) = &target.staging {
        // A signal after the workload ended came after its last send.
        let sent_after_signal = counted
            .sent_after_signal
            .or_else(|| signalled.get().map(|_| 0));
        agg.staging(StagingFacts {
            truth_source: target.truth.name().to_string(),
            truth_lag: target.truth.lag_text(),
            final_read,
            before: Baseline {
                sandboxes: st.before.total(),
                per_node: st.before.per_node(),
                by_id: st.before.by_id(),
            },
            cancelled: counted.cancelled,
            limited: counted.limited,
            sent_after_signal,
            cleanup: None,
        });
    }
    Ok(Driven {
        aggregate: agg,
        leftovers,
    })
}

/// Counts of a run's creates, read before its aggregate takes the settled ones.
struct Counted {
    cancelled: u64,
    limited: u64,
    /// Creates sent after the signal that stopped the run, if one did.
    sent_after_signal: Option<u64>,
}

impl Counted {
    /// The counts of `ledger`, whose run a signal stopped `signal_ms` after its gate.
    fn of(ledger: &Ledger, signal_ms: Option<f64>) -> Self {
        match ledger.settled() {
            Some(s) => Counted {
                cancelled: s.cancelled(),
                limited: s.limited(),
                sent_after_signal: signal_ms.map(|cut| s.sent_after(cut)),
            },
            None => Counted {
                cancelled: ledger.count(|o| matches!(o, Outcome::Cancelled)) as u64,
                limited: ledger.count(Outcome::is_limited) as u64,
                sent_after_signal: signal_ms
                    .map(|cut| ledger.entries.iter().filter(|e| e.sent_ms > cut).count() as u64),
            },
        }
    }
}

/// What `ledger` says the run left on the nodes.
fn leftovers_of(ledger: &Ledger) -> Leftovers {
    if let Some(s) = ledger.settled() {
        let live = s.left().to_vec();
        let acked: std::collections::BTreeSet<String> =
            s.recently_deleted().chain(&live).cloned().collect();
        return Leftovers {
            created: s.created(),
            deleted: s.deleted(),
            live,
            acked,
            gave_up: s.gave_up(),
        };
    }
    let acked: std::collections::BTreeSet<String> = ledger
        .entries
        .iter()
        .filter(|e| e.outcome.is_created())
        .filter_map(|e| e.sandbox_id.clone())
        .collect();
    let live = ledger.live_ids();
    Leftovers {
        created: acked.len() as u64,
        deleted: (acked.len() - live.len().min(acked.len())) as u64,
        live,
        acked,
        gave_up: ledger.entries.iter().any(|e| e.outcome.is_uncertain()),
    }
}

/// The pacing a workload spec describes.
fn pacing_of(profile: &Profile) -> Pacing {
    match &profile.workload.shape {
        Shape::Burst { count } => Pacing::Burst { count: *count },
        Shape::Rate {
            per_second,
            duration,
        } => Pacing::Rate {
            per_second: *per_second,
            duration: *duration,
            workers: profile.workload.max_in_flight,
        },
        Shape::Plan { steps } => Pacing::Plan {
            steps: steps.clone(),
        },
    }
}
