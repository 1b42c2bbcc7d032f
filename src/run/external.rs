//! Runs against an E2B-compatible API that stampede did not start (staging).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::drive::{drive, Target};
use super::{RunOptions, StageError};
use crate::collect::TruthSource;
use crate::profile::{ExternalPlacement, Profile};
use crate::report::Report;
use crate::workload::ApiKey;

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
    let truth = if !x.mock_admin.is_empty() {
        TruthSource::MockAdmin(x.mock_admin.clone())
    } else if !x.orchestrators.is_empty() {
        TruthSource::Orchestrators(x.orchestrators.clone())
    } else {
        TruthSource::E2bApi {
            url: x.url.clone(),
            admin_token: admin_token.clone(),
        }
    };
    let node_ids = match crate::collect::fetch_truth(&reqwest::Client::new(), &truth).await {
        Ok(t) => t.nodes.into_iter().map(|n| n.id).collect(),
        Err(e) => return Err(StageError::Collect(e.to_string())),
    };
    let mut settings = BTreeMap::new();
    settings.insert("target".to_string(), x.url.clone());
    let target = Target {
        label: "external".into(),
        settings,
        urls: vec![x.url.clone()],
        key,
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
        // E2B syncs nodes every 20 s.
        settle: Duration::from_secs(21),
        request_timeout: Duration::from_secs(75),
    };
    let mut r = drive(profile, target, opts, |_gate| {}, || (0, 0)).await?;
    r.wall_ms = wall.elapsed().as_secs_f64() * 1000.0;
    report.runs.push(r);
    Ok(())
}
