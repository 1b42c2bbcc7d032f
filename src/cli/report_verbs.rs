//! `stampede compare` and `stampede trend`: verbs over finished reports.

use std::path::PathBuf;
use std::process::ExitCode;

use super::CliError;
use crate::report;
use crate::stdout::closed_is_fine;

/// `stampede compare`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Baseline report.json file(s), then the candidate B's.
    #[arg(required = true, num_args = 2.., value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// Relative tolerance before a figure other than latency counts as regressed
    /// (0.1 = 10% worse).
    #[arg(long, default_value_t = crate::report::DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// Relative tolerance of p99 latency (3 = up to 4x A's), wide enough that a
    /// loaded CI runner does not trip it on its own.
    #[arg(long, default_value_t = crate::report::DEFAULT_LATENCY_TOLERANCE)]
    pub latency_tolerance: f64,
    /// A's run that B's external run stands for (e.g. `reported`), when A has
    /// several; with one, it is that one.
    #[arg(long, value_name = "LABEL")]
    pub baseline_run: Option<String>,
    /// Also write the comparison as JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// `stampede trend`'s arguments.
#[derive(Debug, clap::Args)]
pub struct TrendArgs {
    /// report.json files, report directories, or directories of report directories
    /// (e.g. `reports/`).
    #[arg(required = true, value_name = "REPORT_OR_DIR")]
    pub inputs: Vec<PathBuf>,
    /// How many of the newest runs to show.
    #[arg(long, default_value_t = crate::report::DEFAULT_TREND_RUNS, value_name = "N")]
    pub last: usize,
    /// Directory to write `trend.html` and `trend.md` into.
    #[arg(long, value_name = "DIR", default_value = "reports/trend")]
    pub out: PathBuf,
}

/// Compares B (the last report) with the baseline: 0 = not regressed, 1 = regressed,
/// 2 = the reports cannot be compared.
pub fn compare(args: CompareArgs) -> Result<ExitCode, CliError> {
    let mut reports = args.reports;
    let b_path = reports.pop().unwrap_or_default();
    let baseline = reports
        .iter()
        .map(|p| report::read_json(p))
        .collect::<Result<Vec<_>, _>>()?;
    let rb = report::read_json(&b_path)?;
    let opts = report::CompareOptions {
        tolerance: args.tolerance,
        latency_tolerance: args.latency_tolerance,
        baseline_run: args.baseline_run,
    };
    let cmp = match report::compare_with_baseline(&baseline, &rb, &opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    closed_is_fine(report::write_comparison(&cmp, std::io::stdout().lock()))?;
    if let Some(path) = args.junit {
        let mut out = Vec::new();
        report::write_comparison_junit(&cmp, &mut out)?;
        std::fs::write(&path, out).map_err(|source| CliError::Open { path, source })?;
    }
    if report::step_summary_path().is_some() {
        let mut md = Vec::new();
        report::write_comparison_markdown(&cmp, &mut md)?;
        report::append_markdown_to_step_summary("comparison", &md);
    }
    Ok(if cmp.regressed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes `trend.html` and `trend.md` for the newest runs of one profile.
pub fn trend(args: TrendArgs) -> Result<ExitCode, CliError> {
    let TrendArgs { inputs, last, out } = args;
    let (reports, skipped) =
        report::read_reports_skipping(&inputs).map_err(CliError::TrendInput)?;
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
    let series = report::trend(&reports, last);
    let runs = reports.len().min(last.max(1));
    let (mut html, mut md) = (Vec::new(), Vec::new());
    report::write_trend_html(&series, runs, &mut html)?;
    report::write_trend_markdown(&series, runs, &mut md)?;
    let write = |name: &str, bytes: &[u8]| {
        let path = out.join(name);
        std::fs::create_dir_all(&out)
            .and_then(|()| std::fs::write(&path, bytes))
            .map_err(|source| CliError::Open { path, source })
    };
    write("trend.html", &html)?;
    write("trend.md", &md)?;
    report::append_markdown_to_step_summary("trend", &md);
    println!(
        "trend of {} checks over {runs} runs: {}",
        series.len(),
        out.join("trend.html").display()
    );
    Ok(ExitCode::SUCCESS)
}
