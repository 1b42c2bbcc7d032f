//! Starting and stopping the embedded placement replicas of one run.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use mock_node::fleet::FleetHandle;

use super::StageError;
use crate::profile::{EmbeddedPlacement, Profile, RunVariant};
use crate::report::RetryStorm;
use crate::serve::storm::add_rows;
use crate::serve::{
    self, ArrivalWindow, NodeTarget, ServeConfig, ServiceHandle, SyncPhaser, TelemetryReader,
};
use crate::workload::ApiKey;

/// The running replicas of one run.
pub(super) struct Replicas {
    handles: Vec<ServiceHandle>,
}

impl Replicas {
    /// Base URLs, one per replica.
    pub(super) fn urls(&self) -> Vec<String> {
        self.handles.iter().map(ServiceHandle::url).collect()
    }

    /// (retries, ResourceExhausted refusals) summed over replicas, read from each
    /// replica's own Prometheus counters.
    pub(super) fn telemetry(&self) -> (u64, u64) {
        let mut retries = 0;
        let mut refusals = 0;
        for h in &self.handles {
            let text = h.metrics_text();
            retries += counter(&text, "stampede_serve_create_retries_total");
            refusals += counter(&text, "stampede_serve_create_refusals_total");
        }
        (retries, refusals)
    }

    /// Readers of each replica's counters, for the live progress line.
    pub(super) fn readers(&self) -> Vec<TelemetryReader> {
        self.handles
            .iter()
            .map(ServiceHandle::telemetry_reader)
            .collect()
    }

    /// The retry storm over every replica, binned from the last
    /// [`TelemetryReader::restart_storm`], per node of `nodes`; `None` without a refusal.
    pub(super) fn retry_storm(&self, nodes: &[String]) -> Option<RetryStorm> {
        let mut rows = Vec::new();
        for h in &self.handles {
            add_rows(&mut rows, h.telemetry_reader().storm_rows(nodes));
        }
        RetryStorm::from_bins(&rows, nodes.len())
    }

    /// When the creates reached the replicas, merged over replicas (one clock).
    pub(super) fn arrivals(&self) -> ArrivalWindow {
        self.handles
            .iter()
            .map(ServiceHandle::arrivals)
            .fold(ArrivalWindow::default(), ArrivalWindow::merge)
    }

    /// What phases the replicas' periodic syncs from the workload's gate as the
    /// simulator does: replica `r` of `n` first syncs `r / n` of an interval after the
    /// gate (a whole interval for replica 0), then every interval. The replicas' retry
    /// storms are binned from the gate too.
    pub(super) fn sync_phasing(&self) -> impl FnOnce(Instant) + Send + 'static {
        let phasers: Vec<SyncPhaser> = self
            .handles
            .iter()
            .map(ServiceHandle::sync_phaser)
            .collect();
        let readers = self.readers();
        move |gate| {
            // The storm's seconds count from the gate, as the ledger's and the sim's.
            for r in &readers {
                r.restart_storm(gate);
            }
            let n = phasers.len().max(1) as u32;
            for (r, p) in phasers.iter().enumerate() {
                let interval = p.interval();
                let phase = interval
                    .checked_mul(r as u32)
                    .map_or(Duration::ZERO, |d| d / n);
                let first = if phase.is_zero() { interval } else { phase };
                if let Some(at) = gate.checked_add(first) {
                    p.next_sync_at(at);
                }
            }
        }
    }

    /// Stops every replica and frees its port.
    pub(super) async fn shutdown(self) {
        for h in self.handles {
            h.shutdown().await;
        }
    }
}

/// Value of a counter in Prometheus text (`name{labels} value`); 0 when absent.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let metric = key.split('{').next()?;
            (metric == name).then(|| value.trim().parse::<u64>().ok())?
        })
        .sum()
}

/// Starts `e.replicas` instances of `run` on free loopback ports, placing on `fleet`.
pub(super) async fn start_replicas(
    profile: &Profile,
    e: &EmbeddedPlacement,
    run: RunVariant,
    fleet: &FleetHandle,
    (key, admin_token): (&ApiKey, &ApiKey),
    placement_trace: Option<std::path::PathBuf>,
) -> Result<Replicas, StageError> {
    let cfg = ServeConfig {
        placement: e.placement_config(run),
        sync_interval: e.sync_interval,
        request_timeout: e.request_timeout,
        retry_backoff: e.retry_backoff,
        api_key: key.expose().to_string(),
        admin_token: Some(admin_token.expose().to_string()),
        seed: profile.seed,
        default_vcpu: profile.workload.sandbox.vcpu,
        default_memory_mb: profile.workload.sandbox.ram_mb,
        // Replicas do not share a store: each would kill the others' sandboxes.
        kill_orphans: e.replicas <= 1,
        placement_trace,
        ..ServeConfig::default()
    };
    let nodes = NodeTarget::all_of(fleet);
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let handles = serve::start_replicas(cfg, nodes, listen, e.replicas.max(1) as usize)
        .await
        .map_err(|e| StageError::Placement(e.to_string()))?;
    Ok(Replicas { handles })
}

#[cfg(test)]
mod tests {
    use super::counter;

    #[test]
    fn counters_are_read_from_prometheus_text() {
        let text =
            "# HELP x y\nstampede_serve_create_retries_total{accounting=\"reported\"} 7\nother 3\n";
        assert_eq!(counter(text, "stampede_serve_create_retries_total"), 7);
        assert_eq!(counter(text, "missing"), 0);
    }
}
