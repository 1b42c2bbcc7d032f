//! `stampede trend REPORT_OR_DIR...`: each check's figure over the last runs, with its
//! bound, as HTML charts (script-free SVG) and Markdown for a CI job summary: what a
//! scheduler team's dashboard shows of a nightly guard.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::PathBuf;

use super::checks::bound_values;
use super::format::check_unit;
use super::model::{CheckOutcome, Report};
use super::output::{read_json, ReadReportError};
use super::svg::esc;
use super::svg_trend::{point_label, trend_chart, TrendPoint};
use super::untrusted::markdown_cell;

/// Most report files a trend reads (directories are listed up to this many entries).
pub const MAX_TREND_INPUTS: usize = 10_000;

/// Runs shown by default: the last 30.
pub const DEFAULT_TREND_RUNS: usize = 30;

/// One check of one run label over successive reports.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendSeries {
    /// The run label (`optimistic`).
    pub run: String,
    /// The check (`running_cv_mean`).
    pub check: String,
    /// The unit of its figure and bound (`ratio`, `ms`, `vCPU`).
    pub unit: &'static str,
    /// The bound as the newest report states it (`<= 0.2`).
    pub bound: String,
    /// The bound's values in the unit (a min and/or a max), for the lines.
    pub bound_values: Vec<f64>,
    /// One point per report, oldest first (none where the report lacks the check).
    pub points: Vec<TrendPoint>,
}

/// The report.json files `inputs` name: a file is read as a report; a directory
/// holding `report.json` is that report; any other directory contributes the
/// `report.json` of each directory in it. Sorted oldest first by `started_at`.
pub fn read_reports(inputs: &[PathBuf]) -> Result<Vec<Report>, ReadReportError> {
    let mut reports = report_files(inputs)?
        .iter()
        .map(|f| read_json(f))
        .collect::<Result<Vec<_>, _>>()?;
    reports.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    Ok(reports)
}

/// As [`read_reports`], but a report file that cannot be read or parsed (a truncated
/// one) is left out and returned beside the reports, so that one bad run does not stop
/// a trend; an unreadable directory is still an error.
pub fn read_reports_skipping(
    inputs: &[PathBuf],
) -> Result<(Vec<Report>, Vec<ReadReportError>), ReadReportError> {
    let (mut reports, mut skipped) = (Vec::new(), Vec::new());
    for f in report_files(inputs)? {
        match read_json(&f) {
            Ok(r) => reports.push(r),
            Err(e) => skipped.push(e),
        }
    }
    reports.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    Ok((reports, skipped))
}

/// The report files `inputs` name (see [`read_reports`]), at most [`MAX_TREND_INPUTS`].
fn report_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, ReadReportError> {
    let mut files: Vec<PathBuf> = Vec::new();
    for p in inputs {
        if p.is_dir() && !p.join("report.json").is_file() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|source| ReadReportError::Read {
                    path: p.clone(),
                    source,
                })?
                .flatten()
                .take(MAX_TREND_INPUTS)
                .map(|e| e.path().join("report.json"))
                .filter(|f| f.is_file())
                .collect();
            inner.sort();
            files.extend(inner);
        } else if p.is_dir() {
            files.push(p.join("report.json"));
        } else {
            files.push(p.clone());
        }
    }
    files.truncate(MAX_TREND_INPUTS);
    Ok(files)
}

/// The series of every (run, check) of the last `last` reports, in the order the
/// newest report lists its checks (then those only older reports have).
pub fn trend(reports: &[Report], last: usize) -> Vec<TrendSeries> {
    let shown = &reports[reports.len().saturating_sub(last.max(1))..];
    // Each report's checks indexed by (run, check) once: the lookups below are linear
    // in the checks, not quadratic.
    let index: Vec<HashMap<(&str, &str), &CheckOutcome>> = shown
        .iter()
        .map(|r| {
            let mut m = HashMap::with_capacity(r.checks.len());
            for c in &r.checks {
                m.entry((c.run.as_str(), c.check.as_str())).or_insert(c);
            }
            m
        })
        .collect();
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in shown.iter().rev() {
        for c in &r.checks {
            let k = (c.run.as_str(), c.check.as_str());
            if seen.insert(k) {
                keys.push(k);
            }
        }
    }
    keys.into_iter()
        .map(|k| {
            let (run, check) = k;
            let unit = check_unit(check);
            let newest = index.iter().rev().find_map(|m| m.get(&k));
            let bound = newest.map(|c| c.bound.clone()).unwrap_or_default();
            let points = shown
                .iter()
                .zip(&index)
                .map(|(r, m)| {
                    let c = m.get(&k);
                    TrendPoint {
                        name: r.started_at.clone(),
                        report: r.profile.clone(),
                        value: c.and_then(|c| c.actual).filter(|v| v.is_finite()),
                        passed: c.is_some_and(|c| c.passed),
                    }
                })
                .collect();
            TrendSeries {
                bound_values: bound_values(&bound, unit),
                run: run.to_string(),
                check: check.to_string(),
                unit,
                bound,
                points,
            }
        })
        .collect()
}

/// The trend as a self-contained HTML page: a chart per check with its bound.
pub fn write_trend_html(series: &[TrendSeries], runs: usize, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>stampede trend</title>\
         <style>body{{font-family:sans-serif;max-width:1000px;margin:1em auto;padding:0 1em}}\
         svg.chart{{display:block;width:100%;height:auto}}</style></head><body>"
    )?;
    writeln!(w, "<h1>Checks over the last {runs} runs</h1>")?;
    writeln!(
        w,
        "<p>Each check's figure per report, oldest first, labelled by the report's date \
         (UTC) and name; the dashed line is its bound, a red point a run that failed it.</p>"
    )?;
    for s in series {
        let title = format!("{} / {} ({}, bound {})", s.run, s.check, s.unit, s.bound);
        writeln!(w, "<h2>{}</h2>", esc(&title))?;
        writeln!(
            w,
            "{}",
            trend_chart(&title, s.unit, &s.points, &s.bound_values)
        )?;
    }
    writeln!(w, "</body></html>")
}

/// The trend as Markdown: a table per check (run, figure, verdict) and a one-line
/// sparkline, for a CI job summary.
pub fn write_trend_markdown(
    series: &[TrendSeries],
    runs: usize,
    mut w: impl Write,
) -> io::Result<()> {
    writeln!(w, "## Checks over the last {runs} runs\n")?;
    writeln!(
        w,
        "| run | check | unit | bound | trend (oldest first) | newest | failed |"
    )?;
    writeln!(w, "|---|---|---|---|---|---|---|")?;
    for s in series {
        let newest = s
            .points
            .last()
            .and_then(|p| p.value)
            .map_or_else(|| "-".into(), |v| format!("{v:.4}"));
        // A report without the figure is missing from the count, not a failure.
        let present = s.points.iter().filter(|p| p.value.is_some()).count();
        let failed = s
            .points
            .iter()
            .filter(|p| p.value.is_some() && !p.passed)
            .count();
        let missing = s.points.len() - present;
        let missing = if missing > 0 {
            format!(" ({missing} missing)")
        } else {
            String::new()
        };
        writeln!(
            w,
            "| {} | {} | {} | {} | `{}` | {newest} | {failed} of {present}{missing} |",
            markdown_cell(&s.run),
            markdown_cell(&s.check),
            s.unit,
            markdown_cell(&s.bound),
            sparkline(&s.points, &s.bound_values),
        )?;
    }
    // The sparklines' columns, by date and name (every series has one point per report).
    if let Some(s) = series.first() {
        let labels: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("`{}`", markdown_cell(&point_label(p))))
            .collect();
        writeln!(w, "\nReports, oldest first: {}", labels.join(", "))?;
    }
    Ok(())
}

/// The points as block characters scaled from 0 to the largest of the figures and the
/// bound; `·` where a run lacked the figure.
fn sparkline(points: &[TrendPoint], bounds: &[f64]) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = points
        .iter()
        .filter_map(|p| p.value)
        .chain(bounds.iter().copied())
        .fold(0.0_f64, f64::max);
    points
        .iter()
        .map(|p| match p.value {
            None => '·',
            Some(_) if max <= 0.0 => BLOCKS[0],
            Some(v) => BLOCKS[((v / max * 7.0).round() as usize).min(7)],
        })
        .collect()
}
