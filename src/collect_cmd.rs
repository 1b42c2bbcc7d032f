//! `stampede collect`: the placement skew of a live cluster, now.

use std::process::ExitCode;

use crate::api_key::ApiKey;
use crate::collect::{fetch_truth, TruthSource};
use crate::profile::is_loopback_host;
use crate::report::{format, SkewStats};

/// Where to read the cluster from (one source).
#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// mock-node admin URL(s) (`GET /nodes`).
    #[arg(long = "mock-admin")]
    pub mock_admin: Vec<String>,
    /// E2B API base URL (`GET /nodes` with `X-Admin-Token`).
    #[arg(long)]
    pub api: Option<String>,
    /// Env var holding the admin token for `--api`.
    #[arg(long, default_value = "E2B_ADMIN_TOKEN")]
    pub admin_token_env: String,
    /// Orchestrator gRPC address(es) to read with `SandboxService/List`.
    #[arg(long = "orchestrator")]
    pub orchestrators: Vec<String>,
    /// Hosts allowed although not loopback.
    #[arg(long = "allow-target")]
    pub allow_targets: Vec<String>,
}

/// Why a collection was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CollectCmdError {
    /// No source, or several.
    #[error("give exactly one of --mock-admin, --api or --orchestrator")]
    Source,
    /// A non-loopback host not allowed with --allow-target.
    #[error("{0} is not a loopback address; pass --allow-target {0} to allow it")]
    NotAllowed(String),
    /// The read failed.
    #[error(transparent)]
    Collect(#[from] crate::collect::CollectError),
}

fn host_of(target: &str) -> String {
    let rest = target.split("://").nth(1).unwrap_or(target);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6).to_string();
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .to_string()
}

fn source_of(args: &CollectArgs) -> Result<TruthSource, CollectCmdError> {
    let given = [
        !args.mock_admin.is_empty(),
        args.api.is_some(),
        !args.orchestrators.is_empty(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(CollectCmdError::Source);
    }
    let targets: Vec<&String> = args
        .mock_admin
        .iter()
        .chain(args.api.iter())
        .chain(args.orchestrators.iter())
        .collect();
    for t in targets {
        let h = host_of(t);
        if !is_loopback_host(&h) && !args.allow_targets.contains(&h) {
            return Err(CollectCmdError::NotAllowed(h));
        }
    }
    Ok(if let Some(url) = &args.api {
        TruthSource::E2bApi {
            url: url.clone(),
            admin_token: ApiKey::from_env(&args.admin_token_env),
        }
    } else if !args.mock_admin.is_empty() {
        TruthSource::MockAdmin(args.mock_admin.clone(), None)
    } else {
        TruthSource::Orchestrators(args.orchestrators.clone())
    })
}

/// Reads the cluster once and prints per-node counts, bars and skew figures.
pub async fn run(args: CollectArgs) -> Result<ExitCode, CollectCmdError> {
    let source = source_of(&args)?;
    let truth = fetch_truth(&crate::http_client::client(), &source).await?;
    let counts: Vec<u64> = truth.nodes.iter().map(|n| n.sandboxes).collect();
    let max = counts.iter().copied().max().unwrap_or(0);
    for n in &truth.nodes {
        // A closed stdout ends nothing but the table; the exit code stays the verdict.
        let _ = crate::stdout::out(format_args!(
            "{:<12} |{}| {:>5}  {:>7.1} vCPU  {}",
            n.id,
            format::bar(n.sandboxes, max),
            n.sandboxes,
            n.allocated_vcpu,
            n.status
        ));
    }
    let s = SkewStats::from_counts(&counts);
    let _ = crate::stdout::out(format_args!(
        "nodes {}  mean {:.2}  std {:.2}  CV {:.3}  min {}  max {}  max/mean {:.2}  Jain {:.3}",
        counts.len(),
        s.mean,
        s.std_dev,
        s.cv,
        s.min,
        s.max,
        s.max_over_mean,
        s.jain
    ));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn hosts_are_extracted_from_urls_and_addresses() {
        assert_eq!(host_of("http://127.0.0.1:3000/x"), "127.0.0.1");
        assert_eq!(host_of("https://api.example.com"), "api.example.com");
        assert_eq!(host_of("10.0.0.1:5008"), "10.0.0.1");
        assert_eq!(host_of("http://[::1]:80"), "::1");
    }
}
