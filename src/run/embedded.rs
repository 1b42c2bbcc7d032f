//! Runs against stampede's own mock-node fleet and reference placement service,
//! once per accounting mode, all on loopback.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mock_node::fleet::{self, FleetOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::drive::{drive, Target};
use super::{RunOptions, StageError};
use crate::collect::TruthSource;
use crate::placement::AccountingMode;
use crate::profile::{EmbeddedPlacement, Profile};
use crate::report::{Report, RunResult};
use crate::workload::ApiKey;

use super::placement::start_replicas;
use super::sut::SutRuntime;

/// Runs every accounting mode the profile lists, appending one result per mode.
/// Stops at the first failing stage (the report is then marked incomplete).
pub(super) async fn run_all(
    profile: &Profile,
    e: &EmbeddedPlacement,
    opts: &RunOptions,
    report: &mut Report,
) -> Result<(), StageError> {
    for mode in e.accounting.to_vec() {
        if opts.cancel.is_cancelled() {
            break;
        }
        let r = run_mode(profile, e, mode, opts).await?;
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

async fn run_mode(
    profile: &Profile,
    e: &EmbeddedPlacement,
    mode: AccountingMode,
    opts: &RunOptions,
) -> Result<RunResult, StageError> {
    let wall = Instant::now();
    let mut cluster = profile.cluster.clone();
    cluster.seed.get_or_insert(profile.seed);
    let key = embedded_key(profile.seed, 0x6b65_7973);
    let admin = embedded_key(profile.seed, 0x6164_6d69);
    let sut = SutRuntime::start()?;
    let started = {
        let (profile, e, key, admin) = (profile.clone(), e.clone(), key.clone(), admin.clone());
        sut.run(async move {
            let fleet = fleet::start(cluster, FleetOptions::default())
                .await
                .map_err(|e| StageError::Fleet(e.to_string()))?;
            match start_replicas(&profile, &e, mode, &fleet, &key, &admin).await {
                Ok(r) => Ok((fleet, r)),
                Err(err) => {
                    fleet.shutdown().await;
                    Err(err)
                }
            }
        })
        .await
    };
    let (fleet, replicas) = match started {
        Ok(Ok(parts)) => parts,
        Ok(Err(err)) | Err(err) => {
            sut.stop();
            return Err(err);
        }
    };
    let mut settings = BTreeMap::new();
    settings.insert("accounting".to_string(), mode.to_string());
    settings.insert("k".to_string(), e.best_of_k.k.to_string());
    settings.insert("replicas".to_string(), e.replicas.to_string());
    settings.insert(
        "sync_interval".to_string(),
        humantime::format_duration(e.sync_interval).to_string(),
    );
    let target = Target {
        label: mode.to_string(),
        settings,
        urls: replicas.urls(),
        key,
        truth: TruthSource::MockAdmin(vec![fleet.admin_url()]),
        believers: replicas.urls(),
        admin_token: Some(admin),
        chaos_admin: vec![fleet.admin_url()],
        chaos_outlives_run: false,
        node_ids: fleet.nodes().into_iter().map(|n| n.id).collect(),
        settle: e.sync_interval + Duration::from_millis(500),
        request_timeout: e.request_timeout + Duration::from_secs(5),
    };
    let result = drive(profile, target, opts, replicas.sync_phasing(), || {
        replicas.telemetry()
    })
    .await;
    let arrivals = replicas.arrivals();
    let stopped = sut
        .run(async move {
            replicas.shutdown().await;
            fleet.shutdown().await;
        })
        .await;
    sut.stop();
    stopped?;
    let mut r = result?;
    if r.send.burst_spread_ms.is_some() {
        r.send.server_arrival_spread_ms = arrivals.spread().map(|d| d.as_secs_f64() * 1000.0);
        r.send.server_arrivals = Some(arrivals.count);
    }
    r.wall_ms = wall.elapsed().as_secs_f64() * 1000.0;
    Ok(r)
}
