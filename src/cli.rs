//! The `stampede` command line: verbs parsed with clap, each calling the library.

use crate::redact::redact_userinfo;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::stdout::{closed_is_fine, out};
use tokio_util::sync::CancellationToken;

use crate::run::{
    cleanup_leftovers, run_profile, AbortState, ApiOverride, CleanupRequest, CleanupSummary,
    RunOptions, Selector,
};

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
    Run {
        /// Profile to run.
        #[arg(default_value = DEFAULT_PROFILE)]
        profile: PathBuf,
        /// Parent directory of the report (default: the profile's `report.dir`).
        #[arg(long)]
        report_dir: Option<PathBuf>,
        /// Print nothing but the final summary (verdict and report path): no progress
        /// line, no tables.
        #[arg(long, short)]
        quiet: bool,
        /// The API and its key.
        #[command(flatten)]
        target: ApiFlags,
        /// Serve the run's live figures as Prometheus metrics at
        /// `http://ADDR/metrics` (a loopback address, e.g. `127.0.0.1:9464`; port 0:
        /// any free port, printed).
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<std::net::SocketAddr>,
        /// Allow this non-loopback host as a target, as if listed in the profile's
        /// `allow_targets` (repeatable).
        #[arg(long, value_name = "HOST")]
        allow_target: Vec<String>,
        /// With `--api`: env var holding the admin token for `GET /nodes`.
        #[arg(long, value_name = "VAR", requires = "api")]
        admin_token_env: Option<String>,
        /// With `--api`: mock-node admin URL to read per-node truth from (repeatable).
        #[arg(long, value_name = "URL", requires = "api")]
        mock_admin: Vec<String>,
        /// With `--mock-admin`: env var holding the bearer token those admin APIs
        /// require (`mock-node --admin-token`). The token itself is never taken on the
        /// command line.
        #[arg(long, value_name = "VAR", requires = "mock_admin")]
        mock_admin_token_env: Option<String>,
        /// External runs: leave the sandboxes the run created running (no cleanup).
        #[arg(long)]
        keep: bool,
        /// Embedded runs: record every placement input and output of each replica in
        /// this directory (JSON lines), for `stampede replay`.
        #[arg(long, value_name = "DIR")]
        placement_trace: Option<PathBuf>,
    },
    /// Find (and delete) the sandboxes that runs against an external API left running,
    /// by their `stampede-run` metadata tag (a run prints its tag when it starts). Exit
    /// 0 = every selected sandbox deleted (or listed, with --dry-run), 1 = some could not
    /// be deleted, 2 = the API could not be listed.
    #[command(mut_arg("api", |a| a.required(true).help("The E2B-compatible API to clean up")))]
    #[command(mut_arg("api_key_env", |a| a.help("Env var holding the API key (default: STAMPEDE_API_KEY). The key itself is never taken on the command line")))]
    Cleanup {
        /// The API and its key (the same flags as `run`).
        #[command(flatten)]
        target: ApiFlags,
        /// The sandboxes of the run with this tag.
        #[arg(
            long,
            value_name = "TAG",
            required_unless_present = "older_than",
            conflicts_with = "older_than"
        )]
        tag: Option<String>,
        /// The sandboxes of every stampede run that started longer ago than this
        /// (e.g. `1h`, `30m`).
        #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
        older_than: Option<std::time::Duration>,
        /// List what would be deleted; delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Replay a placement trace (`run --placement-trace`, `serve --placement-trace`)
    /// through the placement core and check that every decision comes out the same.
    /// Exit 0 = identical, 1 = a difference (printed).
    Replay {
        /// The trace file.
        trace: PathBuf,
    },
    /// Check a profile and list every problem with file:line:col.
    Validate {
        /// Profile(s) to check.
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
    },
    /// Print the JSON Schema of the profile format (`stampede.schema.json`), or with
    /// `--report` that of `report.json` (`report.schema.json`).
    Schema {
        /// The schema of `report.json` instead of the profile's.
        #[arg(long)]
        report: bool,
    },
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
    Compare {
        /// Baseline report.json file(s), then the candidate B's.
        #[arg(required = true, num_args = 2.., value_name = "REPORT")]
        reports: Vec<PathBuf>,
        /// Relative tolerance before a figure other than latency counts as regressed
        /// (0.1 = 10% worse).
        #[arg(long, default_value_t = crate::report::DEFAULT_TOLERANCE)]
        tolerance: f64,
        /// Relative tolerance of p99 latency (3 = up to 4x A's), wide enough that a
        /// loaded CI runner does not trip it on its own.
        #[arg(long, default_value_t = crate::report::DEFAULT_LATENCY_TOLERANCE)]
        latency_tolerance: f64,
        /// A's run that B's external run stands for (e.g. `reported`), when A has
        /// several; with one, it is that one.
        #[arg(long, value_name = "LABEL")]
        baseline_run: Option<String>,
        /// Also write the comparison as JUnit XML to this file.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Chart each check's figure over the last runs, with its bound: `trend.html`
    /// (script-free SVG) and `trend.md` in the output directory; with
    /// `GITHUB_STEP_SUMMARY` set, the Markdown is appended to it. Exit 0 = written,
    /// 2 = a report could not be read.
    Trend {
        /// report.json files, report directories, or directories of report directories
        /// (e.g. `reports/`).
        #[arg(required = true, value_name = "REPORT_OR_DIR")]
        inputs: Vec<PathBuf>,
        /// How many of the newest runs to show.
        #[arg(long, default_value_t = crate::report::DEFAULT_TREND_RUNS, value_name = "N")]
        last: usize,
        /// Directory to write `trend.html` and `trend.md` into.
        #[arg(long, value_name = "DIR", default_value = "reports/trend")]
        out: PathBuf,
    },
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
        Command::Run {
            profile,
            report_dir,
            quiet,
            target,
            metrics_addr,
            allow_target,
            admin_token_env,
            mock_admin,
            mock_admin_token_env,
            keep,
            placement_trace,
        } => {
            if let Some(url) = &target.api {
                if let Err(why) = check_api_flag(url) {
                    eprintln!("error: --api `{url}`: {why}");
                    return Ok(ExitCode::from(2));
                }
            }
            let api = target.api.map(|url| ApiOverride {
                url,
                api_key_env: target.api_key_env,
                admin_token_env,
                mock_admin,
                mock_admin_token_env,
            });
            let metrics = match metrics_addr {
                None => None,
                Some(addr) if !addr.ip().is_loopback() => {
                    eprintln!(
                        "error: --metrics-addr {addr}: not a loopback address (the endpoint has no authentication)"
                    );
                    return Ok(ExitCode::from(2));
                }
                Some(addr) => match crate::run::Telemetry::serve(addr).await {
                    Ok(t) => {
                        eprintln!("metrics: http://{}/metrics", t.addr());
                        Some(t)
                    }
                    Err(e) => {
                        eprintln!("error: --metrics-addr {addr}: {e}");
                        return Ok(ExitCode::from(2));
                    }
                },
            };
            let out = run_profile(
                &profile,
                RunOptions {
                    report_dir,
                    quiet,
                    cancel,
                    abort,
                    api,
                    keep,
                    placement_trace,
                    allow_targets: allow_target,
                    metrics: metrics.clone(),
                },
            )
            .await;
            if let Some(t) = &metrics {
                t.stop();
            }
            match out {
                Ok(o) if o.report.incomplete => {
                    // The report was redacted before it was written.
                    eprintln!(
                        "run incomplete: {}",
                        o.report.incomplete_reason.as_deref().unwrap_or("unknown")
                    );
                    Ok(ExitCode::from(2))
                }
                Ok(o) if !o.report.passed => {
                    for c in o.report.checks.iter().filter(|c| !c.passed) {
                        eprintln!("check failed: {}", c.message);
                    }
                    Ok(ExitCode::from(1))
                }
                Ok(_) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("error: {}", redact_userinfo(&e.to_string()));
                    Ok(ExitCode::from(2))
                }
            }
        }
        Command::Cleanup {
            target,
            tag,
            older_than,
            dry_run,
        } => {
            let selector = match (tag, older_than) {
                (Some(t), _) => Selector::Tag(t),
                (None, Some(age)) => Selector::OlderThan(age),
                // clap requires one of them.
                (None, None) => return Ok(ExitCode::from(2)),
            };
            let req = CleanupRequest {
                api: target.api.unwrap_or_default(),
                api_key_env: target
                    .api_key_env
                    .unwrap_or_else(crate::profile::ExternalPlacement::default_api_key_env),
                selector,
                dry_run,
            };
            match cleanup_leftovers(&req).await {
                Ok(summary) => {
                    closed_is_fine(print_cleanup(&req, &summary, &mut std::io::stdout().lock()))?;
                    Ok(if summary.failed.is_empty() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    })
                }
                Err(e) => {
                    eprintln!("error: {}", redact_userinfo(&e.to_string()));
                    Ok(ExitCode::from(2))
                }
            }
        }
        Command::Validate { profiles } => {
            let mut bad = false;
            for p in profiles {
                match crate::profile::load_checked(&p) {
                    Ok((_, warnings)) => {
                        for w in warnings {
                            eprintln!("warning: {w}");
                        }
                        out(format_args!("{}: ok", p.display()))?
                    }
                    Err(e) => {
                        bad = true;
                        eprintln!("{e}");
                    }
                }
            }
            Ok(if bad {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Schema { report } => {
            let schema = if report {
                crate::report::json_schema()
            } else {
                crate::profile::json_schema()
            };
            out(format_args!("{}", serde_json::to_string_pretty(&schema)?))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::MockNode(args) => {
            mock_node::cli::run(args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            crate::serve_cmd::run(args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Collect(args) => Ok(crate::collect_cmd::run(args).await?),
        Command::Compare {
            mut reports,
            tolerance,
            latency_tolerance,
            baseline_run,
            junit,
        } => {
            let b_path = reports.pop().unwrap_or_default();
            let baseline = reports
                .iter()
                .map(|p| crate::report::read_json(p))
                .collect::<Result<Vec<_>, _>>()?;
            let rb = crate::report::read_json(&b_path)?;
            let opts = crate::report::CompareOptions {
                tolerance,
                latency_tolerance,
                baseline_run,
            };
            let cmp = match crate::report::compare_with_baseline(&baseline, &rb, &opts) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            closed_is_fine(crate::report::write_comparison(
                &cmp,
                std::io::stdout().lock(),
            ))?;
            if let Some(path) = junit {
                let mut out = Vec::new();
                crate::report::write_comparison_junit(&cmp, &mut out)?;
                std::fs::write(&path, out).map_err(|source| CliError::Open { path, source })?;
            }
            if let Some(path) = crate::report::step_summary_path() {
                let mut md = b"\n".to_vec();
                crate::report::write_comparison_markdown(&cmp, &mut md)?;
                let appended = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, &md));
                if let Err(e) = appended {
                    eprintln!(
                        "warning: cannot append the comparison to {} ({}): {e}",
                        crate::report::STEP_SUMMARY_ENV,
                        path.display()
                    );
                }
            }
            Ok(if cmp.regressed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Trend { inputs, last, out } => {
            let (reports, skipped) =
                crate::report::read_reports_skipping(&inputs).map_err(CliError::TrendInput)?;
            for e in &skipped {
                eprintln!("trend: skipped {e}");
            }
            if reports.is_empty() {
                let inputs = inputs
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(CliError::TrendEmpty { inputs });
            }
            let profiles: std::collections::BTreeSet<&str> =
                reports.iter().map(|r| r.profile.as_str()).collect();
            if profiles.len() > 1 {
                let profiles = profiles.into_iter().collect::<Vec<_>>().join(", ");
                return Err(CliError::TrendMixed { profiles });
            }
            let series = crate::report::trend(&reports, last);
            let runs = reports.len().min(last.max(1));
            let (mut html, mut md) = (Vec::new(), Vec::new());
            crate::report::write_trend_html(&series, runs, &mut html)?;
            crate::report::write_trend_markdown(&series, runs, &mut md)?;
            let write = |name: &str, bytes: &[u8]| {
                let path = out.join(name);
                std::fs::create_dir_all(&out)
                    .and_then(|()| std::fs::write(&path, bytes))
                    .map_err(|source| CliError::Open { path, source })
            };
            write("trend.html", &html)?;
            write("trend.md", &md)?;
            if let Some(path) = crate::report::step_summary_path() {
                let appended = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, &md));
                if let Err(e) = appended {
                    eprintln!(
                        "warning: cannot append the trend to {}: {e}",
                        path.display()
                    );
                }
            }
            println!(
                "trend of {} checks over {runs} runs: {}",
                series.len(),
                out.join("trend.html").display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay { trace } => {
            let file = mock_node::open_regular(&trace, "a placement trace").map_err(|source| {
                CliError::Open {
                    path: trace.clone(),
                    source,
                }
            })?;
            let r = crate::placement::replay(std::io::BufReader::new(file))?;
            out(format_args!(
                "{}: {} inputs, {} outputs ({} creates sent, {} requests answered)",
                trace.display(),
                r.inputs,
                r.outputs,
                r.decisions,
                r.answers
            ))?;
            match &r.first_mismatch {
                None => {
                    out(format_args!("identical: every output came out as recorded"))?;
                    Ok(ExitCode::SUCCESS)
                }
                Some((line, want, got)) => {
                    out(format_args!(
                        "differs at line {line}:\n  recorded: {want:?}\n  replayed: {got:?}"
                    ))?;
                    Ok(ExitCode::from(1))
                }
            }
        }
        // Printed here with `{e}` like `run` and `validate` do: through anyhow's `{:#}`
        // chain each profile problem would be printed once per wrapping error.
        Command::E2b(args) => match crate::e2b::run(args, cancel).await {
            Ok(code) => Ok(code),
            Err(e) => {
                eprintln!("error: {}", crate::error_chain::chain_text(&e));
                Ok(ExitCode::from(2))
            }
        },
        Command::Sim(args) => match crate::sim::run_sim_cli(args) {
            Ok(true) => Ok(ExitCode::SUCCESS),
            Ok(false) => Ok(ExitCode::from(1)),
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::from(2))
            }
        },
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

/// What `stampede cleanup` found and did, one sandbox a line.
fn print_cleanup(
    req: &CleanupRequest,
    s: &CleanupSummary,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let verb = if req.dry_run { "would delete" } else { "found" };
    for (id, tag) in &s.found {
        writeln!(out, "{verb} {id} (stampede-run={tag})")?;
    }
    for (id, why) in &s.failed {
        writeln!(out, "could not delete {id}: {}", redact_userinfo(why))?;
    }
    if req.dry_run {
        writeln!(
            out,
            "dry run: {} sandboxes on {}, none deleted",
            s.found.len(),
            redact_userinfo(&req.api)
        )
    } else {
        writeln!(
            out,
            "deleted {} of {} sandboxes on {} ({} already gone, {} could not be deleted)",
            s.deleted,
            s.found.len(),
            redact_userinfo(&req.api),
            s.already_gone,
            s.failed.len()
        )?;
        // A killed run's ledger is gone with it: how many of its creates were still
        // unanswered is not known here.
        writeln!(
            out,
            "creates still unanswered when a run was killed may never have been recorded by \
             the API, so no listing finds them: the API's orphan sweep removes them"
        )
    }
}
