//! Runs against an E2B-compatible API that stampede did not start (staging): counts
//! are this run's only (the truth read before is subtracted), and every sandbox the
//! run created and did not delete is killed at the end unless `--keep`.

use std::time::{Duration, Instant};

use super::cleanup::{self, CleanupTarget, Leftovers};
use super::drive::{drive, StagingTarget, Target};
use super::{RunOptions, StageError};
use crate::aggregate::ServiceCounters;
use crate::api_key::ApiKey;
use crate::collect::{Before, TruthSource};
use crate::error_chain::chain_text;
use crate::placement::{REQUEST_TIMEOUT, SYNC_INTERVAL};
use crate::profile::RunSettings;
use crate::profile::{ExternalPlacement, Profile};
use crate::redact::redact_userinfo;
use crate::report::{CleanupReport, Report};
use crate::workload::RUN_TAG_KEY;

/// The line an external run prints on stderr as its workload's gate opens (the first
/// requests go out): `stampede e2b` measures the sync phase at it.
pub const WORKLOAD_STARTED: &str = "workload started";

/// One run against `x.url`, truth from the first source the profile gives:
/// mock-node admin URLs, else orchestrators over gRPC, else the API's `/nodes`.
pub(super) async fn run(
    profile: &Profile,
    x: &ExternalPlacement,
    opts: &RunOptions,
    report: &mut Report,
) -> Result<(), StageError> {
    let wall = Instant::now();
    let key = ApiKey::from_env(&x.api_key_env)
        .ok_or_else(|| StageError::MissingKey(x.api_key_env.clone()))?;
    let admin_token = match &x.admin_token_env {
        Some(var) => {
            Some(ApiKey::from_env(var).ok_or_else(|| StageError::MissingKey(var.clone()))?)
        }
        None => None,
    };
    let mock_admin_token = match &x.mock_admin_token_env {
        Some(var) => {
            Some(ApiKey::from_env(var).ok_or_else(|| StageError::MissingKey(var.clone()))?)
        }
        None => None,
    };
    // Refused before any request: a key no header can carry never matches.
    let sendable = |var: &str, k: &ApiKey| {
        stampede_http_kit::validate_not_blank("its value", k.expose()).map_err(|why| {
            StageError::UnusableKey {
                var: var.to_string(),
                why,
            }
        })
    };
    sendable(&x.api_key_env, &key)?;
    if let (Some(var), Some(t)) = (&x.admin_token_env, &admin_token) {
        sendable(var, t)?;
    }
    if let (Some(var), Some(t)) = (&x.mock_admin_token_env, &mock_admin_token) {
        sendable(var, t)?;
    }
    let truth = if !x.mock_admin.is_empty() {
        TruthSource::MockAdmin(x.mock_admin.clone(), mock_admin_token)
    } else if !x.orchestrators.is_empty() {
        TruthSource::Orchestrators(x.orchestrators.clone())
    } else {
        TruthSource::E2bApi {
            url: x.url.clone(),
            admin_token: admin_token.clone(),
        }
    };
    let first = crate::collect::fetch_truth(&crate::http_client::client(), &truth)
        .await
        .map_err(|e| StageError::Collect(chain_text(&e)))?;
    report.fleet_seed = fleet_seed(&truth).await;
    let node_ids = first.nodes.iter().map(|n| n.id.clone()).collect();
    let tag = cleanup::run_tag(&profile.name);
    // Printed first, so that a run killed before its cleanup can still be cleaned up.
    eprintln!(
        "run tag: {RUN_TAG_KEY}={tag} (if this run dies before its cleanup: stampede cleanup --api {} --tag {tag})",
        redact_userinfo(&x.url)
    );
    warn_of_leftovers(&x.url, &key, &tag).await;
    let settings = RunSettings::external(redact_userinfo(&x.url).into_owned());
    let target = Target {
        label: "external".into(),
        urls: vec![x.url.clone()],
        key: key.clone(),
        truth,
        believers: if admin_token.is_some() {
            vec![x.url.clone()]
        } else {
            Vec::new()
        },
        admin_token,
        chaos_admin: x.mock_admin.clone(),
        chaos_outlives_run: true,
        node_ids,
        services: Vec::new(),
        // A node's count lags up to one of E2B's syncs; a second more for the read.
        settle: SYNC_INTERVAL + Duration::from_secs(1),
        // E2B's request deadline, plus the margin an embedded run's client also gets.
        request_timeout: REQUEST_TIMEOUT + Duration::from_secs(5),
        staging: Some(StagingTarget {
            before: Before::of(&first),
            tag: tag.clone(),
        }),
        position: None,
    };
    opts.abort.watch_sandboxes(&x.url, &tag);
    let driven = drive(
        profile,
        target,
        opts,
        |_gate| eprintln!("{WORKLOAD_STARTED}"),
        ServiceCounters::default,
    )
    .await;
    let left = match &driven {
        Ok(d) => d.leftovers.clone(),
        // The ledger is gone: listing by tag finds what the run made.
        Err(_) => Leftovers {
            gave_up: true,
            ..Leftovers::default()
        },
    };
    let cleaned = if opts.keep {
        opts.abort.cleanup_finished();
        CleanupReport {
            kept: true,
            created: left.created,
            deleted: left.deleted,
            ..CleanupReport::default()
        }
    } else {
        let c = CleanupTarget {
            api: x.url.clone(),
            key,
            tag,
        };
        cleanup::clean(&c, &left, &opts.abort).await
    };
    let mut d = match driven {
        Ok(d) => d,
        Err(error) => {
            return Err(StageError::AfterCleanup {
                error: Box::new(error),
                cleanup: cleanup_text(&cleaned),
            })
        }
    };
    d.aggregate.cleanup(cleaned);
    let wall_ms = wall.elapsed().as_secs_f64() * 1000.0;
    report
        .runs
        .push(d.aggregate.finish("external".into(), settings, wall_ms));
    Ok(())
}

/// The seed of the mock-node fleet behind the first `--mock-admin` URL, when it says.
async fn fleet_seed(truth: &TruthSource) -> Option<u64> {
    let (urls, token) = truth.mock_admin()?;
    let token = token.map(ApiKey::expose);
    let admin =
        crate::mock_admin::MockAdmin::new(crate::http_client::client(), urls.first()?, token);
    admin.nodes().await.ok()?.fleet_seed
}

/// One line on what cleanup did, for a run that has no report entry to hold it.
fn cleanup_text(c: &CleanupReport) -> String {
    if c.kept {
        return "skipped (--keep)".into();
    }
    let ids: Vec<&str> = c.not_cleaned.iter().map(|n| n.id.as_str()).collect();
    format!(
        "cleaned {}, could not clean {}{}",
        c.cleaned,
        ids.len(),
        if ids.is_empty() {
            String::new()
        } else {
            format!(": {}", ids.join(", "))
        }
    )
}

/// Warns on stderr when earlier runs left tagged sandboxes on `api` (they weigh on the
/// nodes this run measures). A listing that fails is only logged: the run goes on.
async fn warn_of_leftovers(url: &str, key: &ApiKey, own_tag: &str) {
    let api = redact_userinfo(url);
    match super::leftovers::others_left(url, key, own_tag).await {
        Ok(by_tag) if !by_tag.is_empty() => {
            let total: usize = by_tag.values().sum();
            let tags: Vec<String> = by_tag.iter().map(|(t, n)| format!("{t} ({n})")).collect();
            eprintln!(
                "warning: {total} sandboxes of earlier stampede runs are still running on {api}: {}; \
                 remove them with `stampede cleanup --api {api} --tag TAG` (or `--older-than AGE`)",
                tags.join(", ")
            );
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(%api, error = %redact_userinfo(&e.to_string()), "cannot list earlier runs' sandboxes")
        }
    }
}
