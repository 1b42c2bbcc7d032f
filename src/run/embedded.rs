//! Runs against stampede's own mock-node fleet and reference placement service,
//! once per accounting mode and Best-of-K `k`, all on loopback.

use std::time::{Duration, Instant};

use mock_node::fleet::{self, FleetOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::drive::{drive, Target};
use super::{RunOptions, StageError};
use crate::api_key::ApiKey;
use crate::collect::TruthSource;
use crate::profile::{EmbeddedPlacement, Profile, RunVariant};
use crate::report::{Report, RunResult};

use super::services::start_replicas;

/// Runs every (k, accounting mode) the profile lists, appending one result per run.
/// Stops at the first failing stage (the report is then marked incomplete).
pub(super) async fn run_all(
    profile: &Profile,
    e: &EmbeddedPlacement,
    opts: &RunOptions,
    report: &mut Report,
) -> Result<(), StageError> {
    let runs = e.runs();
    let n = runs.len();
    for (i, run) in runs.into_iter().enumerate() {
        if opts.cancel.is_cancelled() {
            break;
        }
        let r = run_one(profile, e, run, opts, (i + 1, n)).await?;
        report.runs.push(r);
    }
    Ok(())
}

/// A per-run key for the embedded service: derived from the seed (nothing random
/// escapes the profile's seed), never printed.
fn embedded_key(seed: u64, purpose: u64) -> ApiKey {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ purpose);
    ApiKey::new(format!("e2b_{:032x}", rng.random::<u128>()))
}

async fn run_one(
    profile: &Profile,
    e: &EmbeddedPlacement,
    run: RunVariant,
    opts: &RunOptions,
    position: (usize, usize),
) -> Result<RunResult, StageError> {
    let wall = Instant::now();
    let trace = match &opts.placement_trace {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|source| StageError::TraceDir {
                path: dir.clone(),
                source,
            })?;
            Some(dir.join(format!("{}.jsonl", run.label())))
        }
        None => None,
    };
    let mut cluster = profile.cluster.clone();
    cluster.seed = Some(profile.cluster.fleet_seed(profile.seed));
    let key = embedded_key(profile.seed, 0x6b65_7973);
    let admin = embedded_key(profile.seed, 0x6164_6d69);
    let fleet = fleet::start(cluster, FleetOptions::default())
        .await
        .map_err(StageError::Fleet)?;
    let replicas = match start_replicas(profile, e, run, &fleet, (&key, &admin), trace).await {
        Ok(r) => r,
        Err(err) => {
            fleet.shutdown().await;
            return Err(err);
        }
    };
    let node_ids: Vec<String> = fleet.nodes().into_iter().map(|n| n.id).collect();
    if !opts.quiet {
        let services: Vec<String> = replicas
            .urls()
            .iter()
            .map(|u| format!("{u}/metrics"))
            .collect();
        eprintln!(
            "{}: placement service metrics {}, mock nodes' metrics {}/metrics",
            run.label(),
            services.join(" "),
            fleet.admin_url()
        );
    }
    let target = Target {
        label: run.label(),
        urls: replicas.urls(),
        key,
        truth: TruthSource::MockAdmin(vec![fleet.admin_url()], None),
        believers: replicas.urls(),
        admin_token: Some(admin),
        chaos_admin: vec![fleet.admin_url()],
        chaos_outlives_run: false,
        node_ids: node_ids.clone(),
        services: replicas.readers(),
        settle: e.sync_interval + Duration::from_millis(500),
        request_timeout: e.request_timeout + Duration::from_secs(5),
        staging: None,
        position: Some(position),
    };
    let result = drive(profile, target, opts, replicas.sync_phasing(), || {
        replicas.counters()
    })
    .await;
    let arrivals = replicas.arrivals();
    let mut agg = match result {
        Ok(r) => r.aggregate,
        Err(e) => {
            replicas.shutdown().await;
            fleet.shutdown().await;
            return Err(e);
        }
    };
    let until_ms = agg.last_sample_ms().unwrap_or(0.0);
    agg.syncs(replicas.sync_schedule(until_ms));
    replicas.shutdown().await;
    fleet.shutdown().await;
    agg.server_arrivals(arrivals);
    let wall_ms = wall.elapsed().as_secs_f64() * 1000.0;
    Ok(agg.finish(run.label(), run.settings(), wall_ms))
}
