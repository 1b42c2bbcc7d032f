//! Starting and stopping the embedded placement replicas of one run.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use mock_node::fleet::FleetHandle;

use super::StageError;
use crate::aggregate::ServiceCounters;
use crate::api_key::ApiKey;
use crate::placement::first_periodic_sync;
use crate::profile::{EmbeddedPlacement, Profile, RunVariant};
use crate::serve::{self, ArrivalWindow, ServeConfig, ServiceHandle, SyncPhaser, TelemetryReader};

/// The running replicas of one run.
pub(super) struct Replicas {
    handles: Vec<ServiceHandle>,
    /// When replica 0 first syncs after the gate (the profile's first sync phase).
    sync_phase: Duration,
}

impl Replicas {
    /// Base URLs, one per replica.
    pub(super) fn urls(&self) -> Vec<String> {
        self.handles.iter().map(ServiceHandle::url).collect()
    }

    /// Every replica's counters, added up (typed values, not Prometheus text).
    pub(super) fn counters(&self) -> ServiceCounters {
        let mut sum = ServiceCounters::default();
        for h in &self.handles {
            sum.add(&h.telemetry_reader().counters());
        }
        sum
    }

    /// Readers of each replica's counters, for the live progress line.
    pub(super) fn readers(&self) -> Vec<TelemetryReader> {
        self.handles
            .iter()
            .map(ServiceHandle::telemetry_reader)
            .collect()
    }

    /// When the creates reached the replicas, merged over replicas (one clock).
    pub(super) fn arrivals(&self) -> ArrivalWindow {
        self.handles
            .iter()
            .map(ServiceHandle::arrivals)
            .fold(ArrivalWindow::default(), ArrivalWindow::merge)
    }

    /// What phases the replicas' periodic syncs from the workload's gate as the
    /// simulator does ([`first_periodic_sync`]): replica 0 at the profile's `sync_phase`
    /// (one interval by default), replica `r` of `n` `r / n` of an interval after it,
    /// then every interval. The replicas' retry storms are binned from the gate too.
    pub(super) fn sync_phasing(&self) -> impl FnOnce(Instant) + Send + 'static {
        let phasers: Vec<SyncPhaser> = self
            .handles
            .iter()
            .map(ServiceHandle::sync_phaser)
            .collect();
        let readers = self.readers();
        let phase = self.sync_phase;
        move |gate| {
            // The storm's seconds count from the gate, as the ledger's and the sim's.
            for r in &readers {
                r.restart_storm(gate);
            }
            let n = phasers.len();
            for (r, p) in phasers.iter().enumerate() {
                let interval = p.interval();
                let first = first_periodic_sync(interval, phase, r, n);
                if let Some(at) = gate.checked_add(first) {
                    p.next_sync_at(at);
                }
            }
        }
    }

    /// When each replica's periodic sync is due, ms after the workload's gate, up to
    /// `until_ms`: the cadence [`sync_phasing`](Self::sync_phasing) sets (a sync timer
    /// holds it; the sync's replies land over the round trips after it).
    pub(super) fn sync_schedule(&self, until_ms: f64) -> Vec<f64> {
        let interval = self.handles.first().map(|h| h.sync_phaser().interval());
        interval.map_or_else(Vec::new, |i| {
            sync_schedule(i, self.sync_phase, self.handles.len(), until_ms)
        })
    }

    /// Stops every replica and frees its port.
    pub(super) async fn shutdown(self) {
        for h in self.handles {
            h.shutdown().await;
        }
    }
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
        // The API's own time per refused retry, which the simulator prices a refusal at,
        // is spent here as a wait before the retry (the wire's own round trip comes on
        // top), so that a storm retries as often on the wire as in the simulator.
        retry_backoff: Some(e.retry_backoff.unwrap_or_default() + e.rpc_round_trip),
        api_stage: e.api_stage.clone(),
        api_key: key.clone(),
        admin_token: Some(admin_token.clone()),
        seed: profile.seed,
        default_vcpu: profile.workload.sandbox.vcpu,
        default_memory_mb: profile.workload.sandbox.ram_mb,
        templates: vec![profile.workload.sandbox.template.clone()],
        // Replicas do not share a store: each would kill the others' sandboxes.
        kill_orphans: e.replicas <= 1,
        placement_trace,
        evictor: e.evictor,
        ..ServeConfig::default()
    };
    let nodes = crate::serve_cmd::targets_of(fleet);
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let handles = serve::start_replicas(cfg, nodes, listen, e.replicas.max(1) as usize)
        .await
        .map_err(StageError::Placement)?;
    Ok(Replicas {
        handles,
        sync_phase: e.first_sync_phase(),
    })
}

/// When `replicas` replicas syncing every `interval` from `phase` are due, ms after the gate, up to `until_ms`, in order ([`first_periodic_sync`]).
fn sync_schedule(interval: Duration, phase: Duration, replicas: usize, until_ms: f64) -> Vec<f64> {
    let step = interval.as_secs_f64() * 1000.0;
    let mut at = Vec::new();
    if step <= 0.0 {
        return at;
    }
    for r in 0..replicas {
        let first = first_periodic_sync(interval, phase, r, replicas);
        let mut t = first.as_secs_f64() * 1000.0;
        while t <= until_ms {
            at.push(t);
            t += step;
        }
    }
    at.sort_by(f64::total_cmp);
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sync_schedule_is_each_replicas_phase_then_every_interval() {
        let s = Duration::from_secs;
        assert_eq!(
            sync_schedule(s(20), s(7), 1, 70_000.0),
            [7000.0, 27_000.0, 47_000.0, 67_000.0]
        );
        // Two replicas at a phase of one interval: the second half an interval after
        // the first.
        assert_eq!(
            sync_schedule(s(20), s(20), 2, 45_000.0),
            [10_000.0, 20_000.0, 30_000.0, 40_000.0]
        );
        assert!(sync_schedule(s(20), s(20), 1, 5_000.0).is_empty());
    }
}
