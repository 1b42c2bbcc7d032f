//! The `stampede` command line: verbs parsed with clap, each calling the library. Each
//! verb's arguments and its run live in a module of its own; `dispatch` picks one.

mod cleanup_verb;
mod profile_verbs;
mod replay_verb;
mod report_verbs;
mod run_verb;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::run::AbortState;

pub use cleanup_verb::CleanupArgs;
pub use profile_verbs::{SchemaArgs, ValidateArgs};
pub use replay_verb::ReplayArgs;
pub use report_verbs::{CompareArgs, TrendArgs};
pub use run_verb::RunArgs;

/// Profile run when `stampede run` is given none.
pub const DEFAULT_PROFILE: &str = "profiles/e2b-pr2201.yaml";

/// Load-testing and chaos harness for sandbox placement.
#[derive(Debug, Parser)]
#[command(name = "stampede", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a profile: embedded mock nodes + placement service (or an external API),
    /// workload, chaos, report. Exit 0 = checks passed (or the profile has none: the
    /// verdict then says that nothing was checked), 1 = a check failed (a regression),
    /// 2 = the harness or the setup failed (every create answered 401/403, the API
    /// unreachable) or the run was interrupted (SIGINT, SIGTERM or SIGHUP: faults
    /// healed, partial report), 130 = aborted by a second signal (no report; the faults
    /// left active are printed).
    Run(run_verb::RunArgs),
    /// Find (and delete) the sandboxes that runs against an external API left running,
    /// by their `stampede-run` metadata tag (a run prints its tag when it starts). Exit
    /// 0 = every selected sandbox deleted (or listed, with --dry-run), 1 = some could not
    /// be deleted, 2 = the API could not be listed.
    #[command(mut_arg("api", |a| a.required(true).help("The E2B-compatible API to clean up")))]
    #[command(mut_arg("api_key_env", |a| a.help("Env var holding the API key (default: STAMPEDE_API_KEY). The key itself is never taken on the command line")))]
    Cleanup(cleanup_verb::CleanupArgs),
    /// Replay a placement trace (`run --placement-trace`, `serve --placement-trace`)
    /// through the placement core and check that every decision comes out the same.
    /// Exit 0 = identical, 1 = a difference (printed).
    Replay(replay_verb::ReplayArgs),
    /// Check a profile and list every problem with file:line:col.
    Validate(profile_verbs::ValidateArgs),
    /// Print the JSON Schema of the profile format (`stampede.schema.json`), or with
    /// `--report` that of `report.json` (`report.schema.json`).
    Schema(profile_verbs::SchemaArgs),
    /// Serve a fleet of virtual orchestrator nodes (same as the `mock-node` binary).
    MockNode(mock_node::cli::MockNodeArgs),
    /// Run the reference placement service alone.
    Serve(crate::serve_cmd::ServeCmdArgs),
    /// Print the placement skew of a live cluster now.
    Collect(crate::collect_cmd::CollectArgs),
    /// Compare report.json files: B (the last) against a baseline (the others: one
    /// report, or several runs of the same profile whose spread widens the margin), on
    /// every figure the baseline's profile checks plus error rate and p99. Exit 1 when
    /// B regressed beyond the tolerance or failed its own checks, 2 when they cannot be
    /// compared. An external run of B is compared as A's run of the mode it stands for.
    /// With `GITHUB_STEP_SUMMARY` set, the comparison is appended to it as Markdown.
    Compare(report_verbs::CompareArgs),
    /// Chart each check's figure over the last runs, with its bound: `trend.html`
    /// (script-free SVG) and `trend.md` in the output directory; with
    /// `GITHUB_STEP_SUMMARY` set, the Markdown is appended to it. Exit 0 = written,
    /// 2 = a report could not be read.
    Trend(report_verbs::TrendArgs),
    /// Simulate a profile in virtual time (deterministic).
    Sim(crate::sim::SimArgs),
    /// E2B's own API: build a revision of an e2b-dev/infra checkout (in a named
    /// variant), run a profile against it on mock-node's fleet with the twin beside
    /// each run, or A/B two builds.
    E2b(crate::e2b::E2bArgs),
}

/// The API a verb talks to and the env var holding its key: `run` (optional, it then
/// overrides the profile's placement) and `cleanup` (required).
#[derive(Debug, Clone, clap::Args)]
pub struct ApiFlags {
    /// Run the profile (embedded or not) against this E2B-compatible API instead,
    /// with the same workload and checks (a URL with its scheme,
    /// `http://127.0.0.1:3000`). A non-loopback host must be allowed with
    /// `--allow-target HOST` or listed in the profile's `allow_targets`.
    #[arg(long, value_name = "URL")]
    pub api: Option<String>,
    /// With `--api`: env var holding the API key (default: the profile's, else
    /// STAMPEDE_API_KEY). The key itself is never taken on the command line.
    #[arg(long, value_name = "VAR", requires = "api")]
    pub api_key_env: Option<String>,
}

/// Why a verb could not run (its own failures are exit codes, not errors).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// `mock-node` failed.
    #[error("mock nodes")]
    MockNode(#[from] mock_node::cli::MockNodeError),
    /// `serve` failed.
    #[error("placement service")]
    Serve(#[from] crate::serve_cmd::ServeCmdError),
    /// `collect` failed.
    #[error("collect")]
    Collect(#[from] crate::collect_cmd::CollectCmdError),
    /// A report given to `compare` cannot be read.
    #[error("compare")]
    Report(#[from] crate::report::ReadReportError),
    /// A report directory given to `trend` cannot be read.
    #[error("trend")]
    TrendInput(#[source] crate::report::ReadReportError),
    /// `trend` found no readable report in its inputs.
    #[error("trend: no readable report.json in {inputs}")]
    TrendEmpty {
        /// The inputs, as given.
        inputs: String,
    },
    /// `trend` was given reports of more than one profile, whose figures do not compare.
    #[error("trend: the reports are of different profiles ({profiles}): give the reports of one profile")]
    TrendMixed {
        /// The profiles, comma-separated.
        profiles: String,
    },
    /// A file given on the command line cannot be opened.
    #[error("cannot open {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A placement trace cannot be replayed.
    #[error("replay")]
    Replay(#[from] crate::placement::TraceError),
    /// Writing to stdout failed.
    #[error("writing the output")]
    Output(#[from] std::io::Error),
    /// The schema cannot be printed.
    #[error("printing the schema")]
    Schema(#[from] serde_json::Error),
}

/// Runs the parsed command; `cancel` fires on the first signal of a `run`, `abort`
/// holds what a second one must clean up.
pub async fn dispatch(
    cli: Cli,
    cancel: CancellationToken,
    abort: AbortState,
) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Run(args) => run_verb::run(args, cancel, abort).await,
        Command::Cleanup(args) => cleanup_verb::run(args).await,
        Command::Validate(args) => profile_verbs::validate(args),
        Command::Schema(args) => profile_verbs::schema(args),
        Command::MockNode(args) => Ok(mock_node::cli::run(args)
            .await
            .map(|()| ExitCode::SUCCESS)?),
        Command::Serve(args) => Ok(crate::serve_cmd::run(args)
            .await
            .map(|()| ExitCode::SUCCESS)?),
        Command::Collect(args) => Ok(crate::collect_cmd::run(args).await?),
        Command::Compare(args) => report_verbs::compare(args),
        Command::Trend(args) => report_verbs::trend(args),
        Command::Replay(args) => replay_verb::run(args),
        Command::E2b(args) => Ok(e2b_verb(args, cancel).await),
        Command::Sim(args) => Ok(sim_verb(args)),
    }
}

/// `stampede e2b`: its errors are printed here with `{e}` like `run` and `validate` do:
/// through anyhow's `{:#}` chain each profile problem would be printed once per
/// wrapping error.
async fn e2b_verb(args: crate::e2b::E2bArgs, cancel: CancellationToken) -> ExitCode {
    match crate::e2b::run(args, cancel).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", crate::error_chain::chain_text(&e));
            ExitCode::from(2)
        }
    }
}

/// `stampede sim`: 0 = checks passed, 1 = a check failed, 2 = the profile could not be
/// simulated.
fn sim_verb(args: crate::sim::SimArgs) -> ExitCode {
    match crate::sim::run_sim_cli(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
