//! `stampede run`: start what the profile embeds, drive the workload, collect, check,
//! report. One function per stage; every embedded part is stopped on every path.

mod abort;
mod api_override;
mod chaos_stage;
mod cleanup;
mod drive;
mod embedded;
mod external;
mod final_read;
mod leftovers;
mod progress;
mod result;
mod services;
mod setup;
mod telemetry;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

pub use abort::{AbortState, AbortSummary, LeftActive, SandboxesLeft};
pub use api_override::ApiOverride;
pub use external::WORKLOAD_STARTED;
pub use leftovers::{cleanup_leftovers, CleanupError, CleanupRequest, CleanupSummary, Selector};
pub use telemetry::Telemetry;

use crate::goose_glue::GooseScratch;
use crate::profile::{self, PlacementSection, Profile};
use crate::report::{self, Report};

/// How to run a profile.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Parent directory of the report (default: the profile's `report.dir`).
    pub report_dir: Option<PathBuf>,
    /// No progress line and no terminal tables: only the verdict and the report path.
    pub quiet: bool,
    /// Fired on SIGINT, SIGTERM or SIGHUP: the run stops, heals faults and writes a
    /// partial report.
    pub cancel: CancellationToken,
    /// What a second signal must clean up and report before the process exits.
    pub abort: AbortState,
    /// Run against this API instead of what the profile's placement says.
    pub api: Option<ApiOverride>,
    /// Leave the sandboxes an external run created running (no cleanup).
    pub keep: bool,
    /// Record each embedded replica's placement inputs and outputs in this directory
    /// (`<run label>.jsonl`, `.jsonl.<i>` with several replicas) for `stampede replay`.
    pub placement_trace: Option<PathBuf>,
    /// Non-loopback hosts allowed as targets on top of the profile's `allow_targets`.
    pub allow_targets: Vec<String>,
    /// Where each run's live figures are published as Prometheus metrics.
    pub metrics: Option<Telemetry>,
}

/// A finished (or interrupted) run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The report as written.
    pub report: Report,
    /// Where it was written.
    pub dir: PathBuf,
}

/// Why a run could not produce a report at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The profile is invalid (every problem, with file:line:col).
    #[error("{0}")]
    Profile(#[from] profile::ProfileErrors),
    /// The profile names a non-loopback target it does not allow.
    #[error("{0}")]
    Target(profile::ProfileIssue),
    /// The report could not be written.
    #[error("writing the report: {0}")]
    Io(#[from] std::io::Error),
    /// The report directory cannot be written, found before the run started.
    #[error("the report directory cannot be written (nothing was run): {0}")]
    ReportDir(std::io::Error),
}

/// A stage of one run that failed; the run's report is then marked incomplete.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The mock-node fleet did not start.
    #[error("starting mock nodes: {0}")]
    Fleet(#[source] mock_node::fleet::FleetError),
    /// The placement service did not start.
    #[error("starting the placement service: {0}")]
    Placement(#[source] crate::serve::ServeError),
    /// The placement trace directory cannot be created.
    #[error("placement trace {}: {source}", path.display())]
    TraceDir {
        /// The directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The workload failed.
    #[error("workload: {0}")]
    Workload(#[from] crate::workload::WorkloadError),
    /// A required secret is missing.
    #[error("environment variable {0} is not set (it must hold the API key)")]
    MissingKey(String),
    /// A secret no HTTP header can carry (a space, a control character, non-ASCII).
    #[error("environment variable {var}: {why}")]
    UnusableKey {
        /// The variable.
        var: String,
        /// What is wrong with its value.
        #[source]
        why: stampede_http_kit::EmptySecret,
    },
    /// The chaos schedule could not be resolved or applied.
    #[error("chaos: {0}")]
    Chaos(String),
    /// Per-node truth could not be read at the end.
    #[error("collecting node truth: {0}")]
    Collect(String),
    /// A stage failed; cleanup ran after it.
    #[error("{error} (cleanup: {cleanup})")]
    AfterCleanup {
        /// What failed.
        #[source]
        error: Box<StageError>,
        /// What cleanup did.
        cleanup: String,
    },
}

/// Loads, validates and runs the profile at `path`, then writes its report.
pub async fn run_profile(path: &Path, opts: RunOptions) -> Result<RunOutcome, RunError> {
    let mut profile = load(path, opts.api.as_ref())?;
    profile
        .allow_targets
        .extend(opts.allow_targets.iter().cloned());
    profile::validate_targets(&profile).map_err(RunError::Target)?;
    report::check_report_parent(&report_parent(&profile, &opts)).map_err(RunError::ReportDir)?;
    let started = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let mut report = Report::new(&profile.name, &profile.description, profile.seed, &started);
    tracing::info!(profile = %profile.name, seed = profile.seed, "run starting");
    let scratch = GooseScratch::new(&report_parent(&profile, &opts), opts.abort.scratch_dirs());
    // A long run frees request buffers between the records it keeps: without a trim its
    // resident memory grows with the holes they leave.
    let trimming = tokio_util::sync::CancellationToken::new();
    let trimmer = stampede_http_kit::spawn_trimmer(trimming.clone());
    let outcome = match &profile.placement {
        PlacementSection::Embedded(e) => {
            report.fleet_seed = Some(profile.cluster.fleet_seed(profile.seed));
            embedded::run_all(&profile, e, &opts, &mut report).await
        }
        PlacementSection::External(x) => external::run(&profile, x, &opts, &mut report).await,
    };
    trimming.cancel();
    let _ = trimmer.await;
    let unhealed = unhealed_faults(&report);
    let setup = report.runs.iter().find_map(setup::setup_failure);
    if let Err(e) = outcome {
        report.incomplete = true;
        report.incomplete_reason = Some(e.to_string());
    } else if !unhealed.is_empty() {
        report.incomplete = true;
        report.incomplete_reason = Some(format!(
            "the harness could not heal {}: it may still be in force",
            unhealed.join(", ")
        ));
    } else if opts.cancel.is_cancelled() {
        report.incomplete = true;
        report.incomplete_reason =
            Some("interrupted by a signal (SIGINT, SIGTERM or SIGHUP)".into());
    } else if let Some(why) = setup {
        report.incomplete = true;
        report.incomplete_reason = Some(why);
    }
    finish(&profile, report, &opts, &scratch)
}

/// Every fault a run applied and could not heal, named (`fault 3 (kill on node-01)`).
fn unhealed_faults(report: &Report) -> Vec<String> {
    report
        .runs
        .iter()
        .flat_map(|r| &r.faults)
        .filter(|f| !f.id.is_empty() && f.healed_at_ms.is_none())
        .map(|f| format!("fault {} ({} on {})", f.id, f.kind, f.nodes.join(",")))
        .collect()
}

/// Loads and validates the profile at `path`, turned into an external run by `api`.
fn load(path: &Path, api: Option<&ApiOverride>) -> Result<Profile, profile::ProfileErrors> {
    let Some(api) = api else {
        return profile::load_and_validate(path);
    };
    let source = profile::Source::read(path)?;
    let mut p = profile::parse(&source)?;
    api.apply(&mut p);
    let issues = profile::validate(&p, &source);
    if issues.is_empty() {
        Ok(p)
    } else {
        Err(profile::ProfileErrors::Invalid(issues))
    }
}

/// Parent directory of this run's report.
fn report_parent(profile: &Profile, opts: &RunOptions) -> PathBuf {
    opts.report_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&profile.report.dir))
}

/// Where goose writes its HTML report for run `label` until the report directory
/// exists (its name is only fixed when the report is written).
pub(crate) fn goose_report_path(
    profile: &Profile,
    opts: &RunOptions,
    label: &str,
) -> Option<PathBuf> {
    profile.report.goose_html.then(|| {
        GooseScratch::dir_under(&report_parent(profile, opts)).join(format!("goose-{label}.html"))
    })
}

fn finish(
    profile: &Profile,
    mut report: Report,
    opts: &RunOptions,
    scratch: &GooseScratch,
) -> Result<RunOutcome, RunError> {
    let checks = report::evaluate(&profile.checks, &report);
    report.set_checks(checks);
    if report.incomplete {
        report.passed = false;
    }
    let report = redacted(report);
    let parent = report_parent(profile, opts);
    let dir = match report::write_report_dir(&report, &parent) {
        Ok(dir) => dir,
        Err(e) => {
            // The verdict must not be lost with the report.
            let _ = print_unwritten(&report, &e, &mut std::io::stdout().lock());
            return Err(RunError::Io(e));
        }
    };
    // On error too the scratch directory goes when `scratch` drops.
    scratch.move_into(&dir)?;
    report::append_to_step_summary(&report);
    // The report is written: a stdout that is closed or full (`stampede run | head -1`)
    // loses the summary but must not turn the verdict into a harness failure.
    if let Err(e) = print_summary(&report, &dir, opts.quiet, &mut std::io::stdout().lock()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("warning: cannot print the summary on stdout: {e}");
        }
    }
    Ok(RunOutcome { report, dir })
}

/// `report` with the userinfo of every URL in it redacted (`--api
/// http://user:PASSWORD@host`): nothing written or printed from it carries a credential.
fn redacted(report: Report) -> Report {
    let Ok(original) = serde_json::to_value(&report) else {
        return report;
    };
    let mut v = original.clone();
    crate::redact::redact_json(&mut v);
    if v == original {
        return report;
    }
    match serde_json::from_value::<Report>(v) {
        Ok(r) => r,
        Err(_) => report,
    }
}

/// What is left to say when the report could not be written: why, and the verdict.
fn print_unwritten(
    report: &Report,
    error: &std::io::Error,
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(out, "report: not written ({error})")?;
    report::write_verdict(report, &mut *out)?;
    out.flush()
}

/// The tables (none with `quiet`), where the report is, and the verdict last.
fn print_summary(
    report: &Report,
    dir: &Path,
    quiet: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if !quiet {
        report::write_terminal(report, &mut *out)?;
    }
    writeln!(out, "report: {}", dir.display())?;
    // The verdict is the last line, where a reader (and `tail -1`) looks.
    report::write_verdict(report, &mut *out)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report that could not be written took the verdict with it.
    #[test]
    fn an_unwritten_report_still_prints_its_verdict() {
        for passed in [true, false] {
            let mut report = Report::new("p", "", 1, "2026-01-01T00:00:00Z");
            report.set_checks(vec![report::CheckOutcome {
                run: "r".into(),
                check: "cv".into(),
                bound: "<= 0.1".into(),
                actual: Some(0.0),
                passed,
                message: String::new(),
            }]);
            let mut out = Vec::new();
            let e = std::io::Error::other("disk full");
            print_unwritten(&report, &e, &mut out).expect("to a Vec");
            let text = String::from_utf8(out).expect("utf-8");
            assert!(text.contains("report: not written (disk full)"), "{text}");
            let word = if passed { "PASSED" } else { "FAILED" };
            let last = text.lines().last().expect("a verdict line");
            assert!(last.contains(word), "{text}");
        }
    }
}
