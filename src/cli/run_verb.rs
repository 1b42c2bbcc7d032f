//! `stampede run`: a profile's run, embedded or against an external API.

use std::path::PathBuf;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use super::{ApiFlags, CliError, DEFAULT_PROFILE};
use crate::redact::redact_userinfo;
use crate::run::{run_profile, AbortState, ApiOverride, RunOptions, Telemetry};

/// `stampede run`'s arguments.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Profile to run.
    #[arg(default_value = DEFAULT_PROFILE)]
    pub profile: PathBuf,
    /// Parent directory of the report (default: the profile's `report.dir`).
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// Print nothing but the final summary (verdict and report path): no progress
    /// line, no tables.
    #[arg(long, short)]
    pub quiet: bool,
    /// The API and its key.
    #[command(flatten)]
    pub target: ApiFlags,
    /// Serve the run's live figures as Prometheus metrics at
    /// `http://ADDR/metrics` (a loopback address, e.g. `127.0.0.1:9464`; port 0:
    /// any free port, printed).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Allow this non-loopback host as a target, as if listed in the profile's
    /// `allow_targets` (repeatable).
    #[arg(long, value_name = "HOST")]
    pub allow_target: Vec<String>,
    /// With `--api`: env var holding the admin token for `GET /nodes`.
    #[arg(long, value_name = "VAR", requires = "api")]
    pub admin_token_env: Option<String>,
    /// With `--api`: mock-node admin URL to read per-node truth from (repeatable).
    #[arg(long, value_name = "URL", requires = "api")]
    pub mock_admin: Vec<String>,
    /// With `--mock-admin`: env var holding the bearer token those admin APIs
    /// require (`mock-node --admin-token`). The token itself is never taken on the
    /// command line.
    #[arg(long, value_name = "VAR", requires = "mock_admin")]
    pub mock_admin_token_env: Option<String>,
    /// External runs: leave the sandboxes the run created running (no cleanup).
    #[arg(long)]
    pub keep: bool,
    /// Embedded runs: record every placement input and output of each replica in
    /// this directory (JSON lines), for `stampede replay`.
    #[arg(long, value_name = "DIR")]
    pub placement_trace: Option<PathBuf>,
}

/// Runs the profile; the exit code says how it went (see the verb's help).
pub async fn run(
    args: RunArgs,
    cancel: CancellationToken,
    abort: AbortState,
) -> Result<ExitCode, CliError> {
    if let Some(url) = &args.target.api {
        if let Err(why) = check_api_flag(url) {
            eprintln!("error: --api `{url}`: {why}");
            return Ok(ExitCode::from(2));
        }
    }
    let metrics = match args.metrics_addr.map(start_metrics) {
        None => None,
        Some(started) => match started.await {
            Ok(t) => Some(t),
            Err(()) => return Ok(ExitCode::from(2)),
        },
    };
    let api = args.target.api.map(|url| ApiOverride {
        url,
        api_key_env: args.target.api_key_env,
        admin_token_env: args.admin_token_env,
        mock_admin: args.mock_admin,
        mock_admin_token_env: args.mock_admin_token_env,
    });
    let options = RunOptions {
        report_dir: args.report_dir,
        quiet: args.quiet,
        cancel,
        abort,
        api,
        keep: args.keep,
        placement_trace: args.placement_trace,
        allow_targets: args.allow_target,
        metrics: metrics.clone(),
    };
    let out = run_profile(&args.profile, options).await;
    if let Some(t) = &metrics {
        t.stop();
    }
    Ok(match out {
        Ok(o) if o.report.incomplete => {
            // The report was redacted before it was written.
            eprintln!(
                "run incomplete: {}",
                o.report.incomplete_reason.as_deref().unwrap_or("unknown")
            );
            ExitCode::from(2)
        }
        Ok(o) if !o.report.passed => {
            for c in o.report.checks.iter().filter(|c| !c.passed) {
                eprintln!("check failed: {}", c.message);
            }
            ExitCode::from(1)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", redact_userinfo(&e.to_string()));
            ExitCode::from(2)
        }
    })
}

/// Serves the run's live metrics at `addr` (loopback only: the endpoint has no
/// authentication); `Err` once the reason is printed.
async fn start_metrics(addr: std::net::SocketAddr) -> Result<Telemetry, ()> {
    if !addr.ip().is_loopback() {
        eprintln!(
            "error: --metrics-addr {addr}: not a loopback address (the endpoint has no authentication)"
        );
        return Err(());
    }
    match Telemetry::serve(addr).await {
        Ok(t) => {
            eprintln!("metrics: http://{}/metrics", t.addr());
            Ok(t)
        }
        Err(e) => {
            eprintln!("error: --metrics-addr {addr}: {e}");
            Err(())
        }
    }
}

/// Why `--api`'s value is not an API base URL: it needs a scheme and a host
/// (`http://127.0.0.1:3000`), else the profile it overrides would be blamed for it.
fn check_api_flag(url: &str) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(()),
        Ok(u) if !matches!(u.scheme(), "http" | "https") && !url.contains("://") => {
            Err(format!("no scheme: write it as a URL, e.g. `http://{url}`"))
        }
        Ok(u) => Err(format!(
            "scheme `{}` is not http or https (e.g. `http://127.0.0.1:3000`)",
            u.scheme()
        )),
        Err(_) if !url.contains("://") => {
            Err(format!("no scheme: write it as a URL, e.g. `http://{url}`"))
        }
        Err(e) => Err(format!("not a URL ({e})")),
    }
}
