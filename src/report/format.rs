//! Number and bar formatting shared by the text reporters, so that Markdown, terminal
//! and comparison output agree to the digit.

use super::model::{Figure, Report, RunResult, NOT_MEASURED};
use crate::placement::AccountingMode;

/// The verdict of a complete report whose profile has no checks: nothing passed,
/// because nothing was judged.
pub const NOTHING_CHECKED: &str = "NOTHING CHECKED (the profile has no checks)";

/// Width in characters of a full per-node bar.
pub const BAR_WIDTH: usize = 30;

/// A ratio such as CV or Jain: three decimals.
pub fn ratio(x: f64) -> String {
    format!("{x:.3}")
}

/// Milliseconds: one decimal below 10 s, whole numbers above.
pub fn ms(x: f64) -> String {
    if x.abs() >= 10_000.0 {
        format!("{x:.0} ms")
    } else {
        format!("{x:.1} ms")
    }
}

/// An optional figure in milliseconds, `-` when absent.
pub fn opt_ms(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), ms)
}

/// A fraction as a percentage with two decimals.
pub fn percent(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// vCPU with one decimal.
pub fn vcpu(x: f64) -> String {
    format!("{x:.1}")
}

/// Final sandbox count of a run (sum over nodes).
pub fn total_sandboxes(run: &RunResult) -> u64 {
    run.skew.counts.iter().sum()
}

/// Headline of a report: PASSED, FAILED, INCOMPLETE (with the reason), or
/// [`NOTHING_CHECKED`] when it passed with no check to judge it.
pub fn verdict(report: &Report) -> String {
    if report.incomplete {
        match &report.incomplete_reason {
            Some(r) => format!("INCOMPLETE ({r})"),
            None => "INCOMPLETE".to_string(),
        }
    } else if report.passed && report.checks.is_empty() {
        NOTHING_CHECKED.to_string()
    } else if report.passed {
        "PASSED".to_string()
    } else {
        "FAILED".to_string()
    }
}

/// A bar of `value` out of `max`, [`BAR_WIDTH`] cells wide, padded with spaces.
pub fn bar(value: u64, max: u64) -> String {
    let filled = if max == 0 {
        0
    } else {
        // Round to the nearest cell; any non-zero value shows at least one cell.
        let cells = ((value as f64 / max as f64) * BAR_WIDTH as f64).round() as usize;
        if value > 0 {
            cells.clamp(1, BAR_WIDTH)
        } else {
            0
        }
    };
    format!("{}{}", "█".repeat(filled), " ".repeat(BAR_WIDTH - filled))
}

/// The final counts per node: E2B benchmark-style bars, one line per node
/// (`node-03 |█████     | 47`), or a compact distribution above
/// [`MAX_NODE_BARS`](super::MAX_NODE_BARS) nodes.
pub fn node_bars(run: &RunResult) -> Vec<String> {
    let ids: Vec<&str> = run.nodes.iter().map(|n| n.id.as_str()).collect();
    let counts: Vec<u64> = run.nodes.iter().map(|n| n.sandboxes).collect();
    super::distribution::distribution(&ids, &counts)
}

/// `k=v k=v` of a run's settings (empty when none).
pub fn settings_line(run: &RunResult) -> String {
    run.settings
        .to_map()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A run whose sandboxes had lifetimes: its fleet ends empty, so the end-of-run skew
/// (CV 0, Jain 1 of nothing) says nothing, and its skew is judged while sandboxes ran.
/// The summaries of such a run lead with the running figures.
pub fn leads_with_running(run: &RunResult) -> bool {
    run.skew.counts.iter().all(|&c| c == 0)
        && run
            .skew_over_time
            .as_ref()
            .is_some_and(|o| o.steady_samples > 0)
}

/// The skew columns a report's summaries lead with: the running figures when every
/// run ends with an empty fleet after its sandboxes ran ([`leads_with_running`]),
/// else the final counts'.
pub fn headline_header(report: &Report) -> &'static [&'static str] {
    if !report.runs.is_empty() && report.runs.iter().all(leads_with_running) {
        &RUNNING_HEADLINE
    } else {
        &FINAL_HEADLINE
    }
}

/// Skew columns of a run judged while its sandboxes ran.
pub const RUNNING_HEADLINE: [&str; 5] = [
    "running CV mean",
    "running CV peak",
    "steady window (s)",
    "CV of placements",
    "placements min / max",
];

/// Skew columns of a run judged on its final counts.
pub const FINAL_HEADLINE: [&str; 6] = ["sandboxes", "CV", "max/mean", "Jain", "min", "max"];

/// The cells of `run` under `header` ([`headline_header`]).
pub fn headline_cells(run: &RunResult, header: &[&str]) -> Vec<String> {
    if header == RUNNING_HEADLINE {
        let Some(o) = &run.skew_over_time else {
            return vec!["-".into(); RUNNING_HEADLINE.len()];
        };
        return vec![
            ratio(o.running_cv_mean),
            ratio(o.running_cv_peak),
            format!(
                "{:.1}..{:.1}",
                o.steady_from_ms / 1000.0,
                o.steady_to_ms / 1000.0
            ),
            ratio(o.placements.cv),
            format!("{} / {}", o.placements.min, o.placements.max),
        ];
    }
    vec![
        total_sandboxes(run).to_string(),
        ratio(run.skew.cv),
        ratio(run.skew.max_over_mean),
        ratio(run.skew.jain),
        run.skew.min.to_string(),
        run.skew.max.to_string(),
    ]
}

/// Columns of the cross-run comparison table after the headline ones.
const COMPARISON_TAIL: [&str; 5] = ["acct err (vCPU)", "p50", "p99", "error rate", "retries"];

/// Header of the cross-run comparison table of `report`.
pub fn comparison_header(report: &Report) -> Vec<&'static str> {
    let mut h = vec!["run"];
    h.extend_from_slice(headline_header(report));
    h.extend_from_slice(&COMPARISON_TAIL);
    h
}

/// One row of the cross-run comparison table of `report`.
pub fn comparison_row(report: &Report, run: &RunResult) -> Vec<String> {
    let mut row = vec![run.label.clone()];
    row.extend(headline_cells(run, headline_header(report)));
    row.extend([
        accounting_error_cell(run),
        ms(run.latency.p50_ms),
        ms(run.latency.p99_ms),
        percent(run.error_rate),
        run.shown(Figure::Retries, run.retries),
    ]);
    row
}

/// The mean accounting error of `run` (vCPU), [`NOT_MEASURED`] when the run could not
/// observe it, `-` when it has none.
pub fn accounting_error_cell(run: &RunResult) -> String {
    match run.accounting_error {
        Some(a) => vcpu(a.mean_abs_vcpu),
        None if !run.measured(Figure::AccountingError) => NOT_MEASURED.into(),
        None => "-".into(),
    }
}

/// Placements to the faulty nodes, with the failed RPCs among them when known
/// (`12 (9 failed)`).
pub fn to_faulty(f: &super::model::FaultWindow) -> String {
    match f.failed_on_faulty {
        Some(failed) => format!("{} ({failed} failed)", f.placements_to_faulty),
        None => f.placements_to_faulty.to_string(),
    }
}

/// Column headers of a fault-window table.
pub const FAULT_HEADERS: [&str; 12] = [
    "fault",
    "kind",
    "nodes",
    "applied",
    "healed",
    "attempted",
    "ok",
    "failed",
    "to faulty",
    "time to avoid",
    "time to reuse",
    "timed out (latency)",
];

/// One row of a fault-window table, in [`FAULT_HEADERS`] order.
pub fn fault_row(f: &super::model::FaultWindow) -> Vec<String> {
    vec![
        f.id.clone(),
        f.kind.clone(),
        f.nodes.join(", "),
        ms(f.applied_at_ms),
        opt_ms(f.healed_at_ms),
        f.attempted.to_string(),
        f.ok.to_string(),
        f.failed.to_string(),
        to_faulty(f),
        opt_ms(f.time_to_avoid_ms),
        opt_ms(f.time_to_reuse_ms),
        timed_out(f),
    ]
}

/// The window's 504s with their latency range (`3 (69.9 s..70.0 s)`), `0` when none.
pub fn timed_out(f: &super::model::FaultWindow) -> String {
    match (f.timed_out_min_ms, f.timed_out_max_ms) {
        (Some(lo), Some(hi)) => format!("{} ({}..{})", f.timed_out, ms(lo), ms(hi)),
        _ => f.timed_out.to_string(),
    }
}

/// Header of the checks table's first columns (every writer's).
pub const CHECK_HEADER: [&str; 5] = ["run", "check", "unit", "bound", "actual"];

/// The first cells of a check row: run, check, unit, bound and actual in that unit
/// (`-` when missing). A latency's bound is written as a duration in the outcome
/// (`<= 5s`) and its figure in ms: both are shown in ms here.
pub fn check_cells(c: &super::model::CheckOutcome) -> Vec<String> {
    let unit = check_unit(&c.check);
    let bound = if unit == "ms" {
        latency_bound_ms(&c.bound).unwrap_or_else(|| c.bound.clone())
    } else {
        c.bound.clone()
    };
    let actual = c.actual.map_or_else(
        || "-".into(),
        |a| match unit {
            "ms" => format!("{a:.1}"),
            "sandboxes" | "retries/s" => format!("{a:.0}"),
            _ => format!("{a:.4}"),
        },
    );
    vec![c.run.clone(), c.check.clone(), unit.into(), bound, actual]
}

/// `<= 5s` as `<= 5000`.
fn latency_bound_ms(bound: &str) -> Option<String> {
    let d = humantime::parse_duration(bound.strip_prefix("<= ")?.trim()).ok()?;
    Some(format!("<= {}", d.as_millis()))
}

/// The unit of check `name`'s figure and bound.
pub fn check_unit(name: &str) -> &'static str {
    use crate::profile::{CheckId, CHECKS};
    let Some(def) = CHECKS.iter().find(|d| d.name == name) else {
        return "";
    };
    match def.id {
        CheckId::Cv
        | CheckId::MaxOverMean
        | CheckId::Jain
        | CheckId::PlacementsCv
        | CheckId::RunningCvMean
        | CheckId::RunningCvPeak => "ratio",
        CheckId::ErrorRate | CheckId::Limited => "fraction",
        CheckId::P99Latency => "ms",
        CheckId::Lost | CheckId::Duplicated | CheckId::Cancelled => "sandboxes",
        CheckId::RetriesPerSPeak => "retries/s",
        CheckId::AccountingError => "vCPU",
    }
}

/// CV of every run by accounting mode (rows) and Best-of-K `k` (columns), when the
/// report's runs compare several `k` (E2B's benchmark runs K3 and K5): the header and
/// the rows, `-` where a combination did not run. `None` when one `k` or fewer ran.
pub fn cv_by_mode_and_k(report: &Report) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let mut modes: Vec<AccountingMode> = Vec::new();
    let mut ks: Vec<usize> = Vec::new();
    for run in &report.runs {
        let (Some(m), Some(k)) = (run.settings.accounting, run.settings.k) else {
            continue;
        };
        if !modes.contains(&m) {
            modes.push(m);
        }
        if !ks.contains(&k) {
            ks.push(k);
        }
    }
    if ks.len() < 2 {
        return None;
    }
    let mut header = vec!["mode".to_string()];
    header.extend(ks.iter().map(|k| format!("CV K{k}")));
    let rows = modes
        .iter()
        .map(|&m| {
            let mut row = vec![m.to_string()];
            for &k in &ks {
                let run = report
                    .runs
                    .iter()
                    .find(|r| r.settings.accounting == Some(m) && r.settings.k == Some(k));
                row.push(run.map_or_else(|| "-".to_string(), |r| ratio(r.skew.cv)));
            }
            row
        })
        .collect();
    Some((header, rows))
}

/// Rows `(figure, value)` of the skew-over-time and retry-storm figures of `run`, for
/// the terminal and Markdown summaries (none when the run has neither).
pub fn over_time_rows(run: &RunResult) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    if let Some(o) = &run.skew_over_time {
        let p = &o.placements;
        rows.push((
            "CV of placements",
            run.shown(Figure::Placements, ratio(p.cv)),
        ));
        rows.push((
            "placements min / mean / max",
            run.shown(
                Figure::Placements,
                format!("{} / {:.2} / {}", p.min, p.mean, p.max),
            ),
        ));
        if o.steady_samples > 0 {
            rows.push((
                "running CV mean / peak",
                format!(
                    "{} / {} (steady {:.1}..{:.1} s, {} samples)",
                    ratio(o.running_cv_mean),
                    ratio(o.running_cv_peak),
                    o.steady_from_ms / 1000.0,
                    o.steady_to_ms / 1000.0,
                    o.steady_samples
                ),
            ));
        }
    }
    if let Some(r) = &run.retry_storm {
        let busiest = r
            .node_peak_per_second
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)));
        let node = busiest
            .and_then(|(k, &c)| run.nodes.get(k).map(|n| format!("{} {c}/s", n.id)))
            .unwrap_or_default();
        rows.push((
            "RE retries/s peak",
            format!(
                "{} (second {}; busiest node {node})",
                r.peak_per_second, r.peak_second
            ),
        ));
    }
    rows
}
