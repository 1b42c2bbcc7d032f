//! `stampede run --metrics-addr ADDR`: the live figures of a run as Prometheus metrics
//! (`GET /metrics`), read from the same feeds as the progress line, one label set per
//! run (accounting mode, or `external`). A finished run keeps its last figures. The
//! endpoint is bounded as every listener of the project
//! ([`stampede_http_kit::serve_bounded`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use stampede_http_kit::{write_header, write_sample};
use tokio_util::sync::CancellationToken;

use super::progress::{faults_in_force, ProgressFeed};
use crate::report::SkewStats;

/// The metrics endpoint of one `stampede run`; dropping it stops the server.
#[derive(Clone)]
pub struct Telemetry {
    runs: Arc<Mutex<Vec<Arc<ProgressFeed>>>>,
    addr: SocketAddr,
    stop: CancellationToken,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Telemetry {
    /// Binds `addr` and serves `GET /metrics` until [`stop`](Self::stop).
    pub async fn serve(addr: SocketAddr) -> std::io::Result<Telemetry> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let t = Telemetry {
            runs: Arc::default(),
            addr: listener.local_addr()?,
            stop: CancellationToken::new(),
        };
        let app = axum::Router::new()
            .route("/metrics", get(metrics))
            .with_state(t.runs.clone());
        // The policy of every listener of the project: deadlines, idle timeout, a fair
        // cap below the descriptor limit.
        tokio::spawn(stampede_http_kit::serve_bounded(
            listener,
            app,
            stampede_http_kit::LOCAL_API_LIMITS,
            t.stop.clone(),
            body_timed_out,
        ));
        Ok(t)
    }

    /// The address bound (its port chosen by the OS for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Publishes a run's feed (kept after the run ends, with its last figures).
    pub(crate) fn register(&self, feed: Arc<ProgressFeed>) {
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(feed);
    }
}

fn body_timed_out(e: stampede_http_kit::BodyTimedOut) -> axum::response::Response {
    (axum::http::StatusCode::REQUEST_TIMEOUT, e.to_string()).into_response()
}

async fn metrics(State(runs): State<Arc<Mutex<Vec<Arc<ProgressFeed>>>>>) -> impl IntoResponse {
    let feeds = runs.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (
        [("content-type", "text/plain; version=0.0.4")],
        render(&feeds, Instant::now()),
    )
}

/// One metric family: name, type, help.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&Figures) -> Option<f64>,
}

/// The figures of one run at one instant.
struct Figures {
    planned: Option<u64>,
    answered: u64,
    ok: u64,
    failed: u64,
    cv: Option<f64>,
    max_over_mean: Option<f64>,
    faults: usize,
    refusals: Option<u64>,
}

/// Every family exposed, in output order.
const FAMILIES: [Family; 8] = [
    Family {
        name: "stampede_creates_planned",
        kind: "gauge",
        help: "Creates the workload will send (absent when open-ended).",
        value: |f| f.planned.map(|n| n as f64),
    },
    Family {
        name: "stampede_creates_answered_total",
        kind: "counter",
        help: "Creates answered so far, any outcome.",
        value: |f| Some(f.answered as f64),
    },
    Family {
        name: "stampede_creates_ok_total",
        kind: "counter",
        help: "Creates answered 201 so far.",
        value: |f| Some(f.ok as f64),
    },
    Family {
        name: "stampede_creates_failed_total",
        kind: "counter",
        help: "Creates failed so far (neither 201, nor a 429 limit, nor given up on a signal).",
        value: |f| Some(f.failed as f64),
    },
    Family {
        name: "stampede_placements_cv",
        kind: "gauge",
        help: "Coefficient of variation of the creates landed per node so far.",
        value: |f| f.cv,
    },
    Family {
        name: "stampede_placements_max_over_mean",
        kind: "gauge",
        help: "Busiest node's landed creates over the mean so far.",
        value: |f| f.max_over_mean,
    },
    Family {
        name: "stampede_faults_active",
        kind: "gauge",
        help: "Chaos faults in force now, as planned.",
        value: |f| Some(f.faults as f64),
    },
    Family {
        name: "stampede_service_refusals_total",
        kind: "counter",
        help: "ResourceExhausted answers the embedded placement service got from nodes, each retried (absent against an external API).",
        value: |f| f.refusals.map(|n| n as f64),
    },
];

fn figures(feed: &ProgressFeed, now: Instant) -> Figures {
    let s = feed.live.snapshot();
    let since_gate = feed.gate.get().map(|g| now.saturating_duration_since(*g));
    let landed = s.placed.iter().sum::<u64>() > 0;
    let skew = landed.then(|| SkewStats::from_counts(&s.placed));
    Figures {
        planned: feed.total,
        answered: s.done,
        ok: s.created,
        failed: s.errors,
        cv: skew.as_ref().map(|k| k.cv),
        max_over_mean: skew.as_ref().map(|k| k.max_over_mean),
        faults: since_gate.map_or(0, |t| faults_in_force(&feed.faults, t)),
        refusals: (!feed.services.is_empty())
            .then(|| feed.services.iter().map(|r| r.refusals()).sum()),
    }
}

/// The exposition text of `feeds` at `now` (Prometheus text format 0.0.4).
fn render(feeds: &[Arc<ProgressFeed>], now: Instant) -> String {
    let figs: Vec<(&str, Figures)> = feeds
        .iter()
        .map(|f| (f.label.as_str(), figures(f, now)))
        .collect();
    let mut out = String::new();
    for fam in &FAMILIES {
        write_header(&mut out, fam.name, fam.kind, fam.help);
        for (label, f) in &figs {
            if let Some(v) = (fam.value)(f).filter(|v| v.is_finite()) {
                write_sample(&mut out, fam.name, &[("run", label)], v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::LiveCounts;
    use std::sync::OnceLock;
    use std::time::Duration;

    #[test]
    fn every_family_is_declared_and_a_run_label_is_escaped() {
        let ids = vec!["a".to_string(), "b".to_string()];
        let feed = Arc::new(ProgressFeed {
            label: "odd \"label\"".into(),
            position: None,
            total: Some(10),
            live: Arc::new(LiveCounts::new(&ids)),
            services: Vec::new(),
            faults: vec![(Duration::ZERO, None)],
            gate: Arc::new(OnceLock::new()),
        });
        let _ = feed.gate.set(Instant::now());
        let text = render(&[feed], Instant::now() + Duration::from_millis(5));
        for fam in &FAMILIES {
            assert!(text.contains(&format!("# TYPE {} {}", fam.name, fam.kind)));
        }
        assert!(
            text.contains("stampede_creates_planned{run=\"odd \\\"label\\\"\"} 10"),
            "{text}"
        );
        assert!(
            text.contains("stampede_faults_active{run=\"odd \\\"label\\\"\"} 1"),
            "{text}"
        );
        // No landing yet: no CV, and no refusals against an external API.
        assert!(!text.contains("stampede_placements_cv{"), "{text}");
        assert!(!text.contains("stampede_service_refusals_total{"), "{text}");
    }

    /// The Grafana dashboard in deploy/ queries only metrics this endpoint serves.
    #[test]
    fn the_dashboard_names_only_served_metrics() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/grafana/stampede-run.json"
        );
        let text = std::fs::read_to_string(path).expect("dashboard");
        let names: Vec<&str> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("stampede_"))
            .collect();
        assert!(names.len() >= FAMILIES.len(), "{names:?}");
        for n in names {
            assert!(FAMILIES.iter().any(|f| f.name == n), "{n} is not served");
        }
    }
}
