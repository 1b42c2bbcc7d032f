//! Per-instance placement counters and their Prometheus text rendering.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use stampede_http_kit::{write_header, write_sample};

use super::storm::StormBins;
use super::telemetry_kind::KindTelemetry;
use crate::counters::ServiceCounters;

/// Upper bounds (seconds) of the decision-time histogram buckets.
const DECISION_BUCKETS: [f64; 10] = [1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 5e-4, 1e-3, 1e-2];

/// Counters of one placement instance; all monotonic.
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    /// Create requests answered 201.
    pub creates_ok: AtomicU64,
    /// Create requests that failed after retries (500).
    pub creates_failed: AtomicU64,
    /// Create requests with no node to try (503).
    pub creates_unplaceable: AtomicU64,
    /// Create requests past their deadline (504).
    pub creates_timed_out: AtomicU64,
    /// Create RPCs refused with ResourceExhausted (each retried).
    pub refusals: AtomicU64,
    /// Create RPCs that failed otherwise (each excludes the node).
    pub attempt_failures: AtomicU64,
    /// Retries: every create RPC after the first of a request.
    pub retries: AtomicU64,
    /// Deletes answered 204.
    pub deletes_ok: AtomicU64,
    /// Deletes answered 404.
    pub deletes_not_found: AtomicU64,
    /// Syncs applied.
    pub syncs: AtomicU64,
    /// Syncs that failed.
    pub sync_failures: AtomicU64,
    /// Orphan sandboxes seen (summed over syncs).
    pub orphans_seen: AtomicU64,
    /// Orphan sandboxes killed.
    pub orphans_killed: AtomicU64,
    /// Create requests whose client hung up before the answer (placement stopped).
    pub creates_abandoned: AtomicU64,
    /// Sandboxes killed by the evictor at their end time.
    pub evictions: AtomicU64,
    /// ResourceExhausted refusals per second and per node (the retry storm).
    pub storm: StormBins,
    /// Placements by kind (create, resume, fork).
    pub by_kind: KindTelemetry,
    decisions: AtomicU64,
    decision_nanos: AtomicU64,
    decision_buckets: [AtomicU64; DECISION_BUCKETS.len()],
}

impl Telemetry {
    /// Record the time one Best-of-K decision took.
    pub(crate) fn record_decision(&self, took: Duration) {
        self.decisions.fetch_add(1, Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.decision_nanos.fetch_add(nanos, Relaxed);
        let secs = took.as_secs_f64();
        for (b, &le) in self.decision_buckets.iter().zip(&DECISION_BUCKETS) {
            if secs <= le {
                b.fetch_add(1, Relaxed);
            }
        }
    }

    /// The counters a run reads, as typed values.
    pub(crate) fn counters(&self) -> ServiceCounters {
        ServiceCounters {
            creates_ok: self.creates_ok.load(Relaxed),
            creates_failed: self.creates_failed.load(Relaxed),
            creates_unplaceable: self.creates_unplaceable.load(Relaxed),
            creates_timed_out: self.creates_timed_out.load(Relaxed),
            refusals: self.refusals.load(Relaxed),
            attempt_failures: self.attempt_failures.load(Relaxed),
            retries: self.retries.load(Relaxed),
            refusals_per_second: self.storm.by_node(),
        }
    }

    /// Prometheus text exposition of every counter, labelled with the accounting mode
    /// (label values escaped by the project's one Prometheus writer, `stampede-http-kit`).
    pub(crate) fn render(&self, accounting: &str) -> String {
        let mut out = String::new();
        let counters: [(&str, &str, &AtomicU64); 15] = [
            (
                "stampede_serve_creates_ok_total",
                "Create requests answered 201.",
                &self.creates_ok,
            ),
            (
                "stampede_serve_creates_failed_total",
                "Create requests failed after retries (500).",
                &self.creates_failed,
            ),
            (
                "stampede_serve_creates_unplaceable_total",
                "Create requests with no node to try (503).",
                &self.creates_unplaceable,
            ),
            (
                "stampede_serve_creates_timed_out_total",
                "Create requests past their deadline (504).",
                &self.creates_timed_out,
            ),
            (
                "stampede_serve_create_refusals_total",
                "Create RPCs refused with ResourceExhausted.",
                &self.refusals,
            ),
            (
                "stampede_serve_create_attempt_failures_total",
                "Create RPCs failed with another error.",
                &self.attempt_failures,
            ),
            (
                "stampede_serve_create_retries_total",
                "Create RPCs after the first of a request.",
                &self.retries,
            ),
            (
                "stampede_serve_deletes_ok_total",
                "Deletes answered 204.",
                &self.deletes_ok,
            ),
            (
                "stampede_serve_deletes_not_found_total",
                "Deletes answered 404.",
                &self.deletes_not_found,
            ),
            (
                "stampede_serve_syncs_total",
                "Node syncs applied.",
                &self.syncs,
            ),
            (
                "stampede_serve_sync_failures_total",
                "Node syncs failed.",
                &self.sync_failures,
            ),
            (
                "stampede_serve_orphans_seen_total",
                "Unknown sandboxes seen on nodes, summed over syncs.",
                &self.orphans_seen,
            ),
            (
                "stampede_serve_orphans_killed_total",
                "Unknown sandboxes killed.",
                &self.orphans_killed,
            ),
            (
                "stampede_serve_creates_abandoned_total",
                "Create requests whose client hung up (placement stopped).",
                &self.creates_abandoned,
            ),
            (
                "stampede_serve_evictions_total",
                "Sandboxes killed at their end time.",
                &self.evictions,
            ),
        ];
        let by_mode = [("accounting", accounting)];
        for (name, help, v) in counters {
            write_header(&mut out, name, "counter", help);
            write_sample(&mut out, name, &by_mode, v.load(Relaxed));
        }
        let name = "stampede_serve_decision_seconds";
        write_header(
            &mut out,
            name,
            "histogram",
            "Time of one Best-of-K decision.",
        );
        let bucket = format!("{name}_bucket");
        for (b, le) in self.decision_buckets.iter().zip(DECISION_BUCKETS) {
            let le = le.to_string();
            let labels = [("accounting", accounting), ("le", le.as_str())];
            write_sample(&mut out, &bucket, &labels, b.load(Relaxed));
        }
        let n = self.decisions.load(Relaxed);
        let sum = self.decision_nanos.load(Relaxed) as f64 / 1e9;
        let inf = [("accounting", accounting), ("le", "+Inf")];
        write_sample(&mut out, &bucket, &inf, n);
        write_sample(&mut out, &format!("{name}_sum"), &by_mode, sum);
        write_sample(&mut out, &format!("{name}_count"), &by_mode, n);
        self.by_kind.render(&mut out, accounting);
        out
    }
}
