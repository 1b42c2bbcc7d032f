//! `report.html`: self-contained (inline CSS and SVG, no scripts), a pure function of
//! a finished [`Report`] into a writer.

use std::io::{self, Write};

use super::format::*;
use super::markdown::set_audit_rows;
use super::model::{Figure, Report, RunResult, SetAudit};
use super::svg::{bars, esc, legend, lines, TimeChart, YScale};

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.fail{color:#b00;font-weight:bold}\
.pass{color:#070}pre{background:#f7f7f7;padding:.5em}svg{display:block;margin:.5em 0}";

/// Write `report` as one HTML page with inline charts.
pub fn write_html(report: &Report, mut w: impl Write) -> io::Result<()> {
    let w = &mut w;
    writeln!(
        w,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
    )?;
    writeln!(
        w,
        "<title>stampede: {}</title><style>{CSS}</style></head><body>",
        esc(&report.profile)
    )?;
    writeln!(w, "<h1>stampede report: {}</h1>", esc(&report.profile))?;
    if !report.description.is_empty() {
        writeln!(w, "<p>{}</p>", esc(report.description.trim()))?;
    }
    let class = if report.passed && !report.incomplete {
        "pass"
    } else {
        "fail"
    };
    writeln!(
        w,
        "<p class=\"{class}\">{}</p><p>{} · seed {} · started {}{} · schema v{}</p>",
        esc(&verdict(report)),
        esc(&report.tool),
        report.seed,
        esc(&report.started_at),
        if report.simulated {
            " · simulated"
        } else {
            ""
        },
        report.schema_version
    )?;
    // The checks first: the verdict's reasons before the figures behind them.
    if !report.checks.is_empty() {
        writeln!(w, "<h2>Checks</h2>")?;
        let rows: Vec<Vec<String>> = report
            .checks
            .iter()
            .map(|c| {
                let mut row = check_cells(c);
                row.push(if c.passed {
                    "pass".into()
                } else {
                    "FAIL".into()
                });
                row.push(c.message.clone());
                row
            })
            .collect();
        table(
            w,
            &[&CHECK_HEADER[..], &["result", "message"]].concat(),
            &rows,
        )?;
    }
    if report.runs.len() > 1 {
        writeln!(w, "<h2>Comparison</h2>")?;
        let rows: Vec<Vec<String>> = report
            .runs
            .iter()
            .map(|r| comparison_row(report, r))
            .collect();
        table(w, &comparison_header(report), &rows)?;
        if let Some((header, rows)) = cv_by_mode_and_k(report) {
            writeln!(w, "<h2>CV by mode and K</h2>")?;
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            table(w, &header, &rows)?;
        }
        let running = report.runs.iter().all(leads_with_running);
        let cvs: Vec<(String, f64)> = report
            .runs
            .iter()
            .map(|r| match (&r.skew_over_time, running) {
                (Some(o), true) => (r.label.clone(), o.running_cv_mean),
                _ => (r.label.clone(), r.skew.cv),
            })
            .collect();
        let title = if running {
            "running CV mean per run"
        } else {
            "CV per run"
        };
        writeln!(w, "{}", bars(title, &cvs, ""))?;
    }
    for run in &report.runs {
        write_run(w, run)?;
    }
    writeln!(w, "</body></html>")
}

/// The final sandboxes per node, as bars.
fn final_bars(w: &mut impl Write, run: &RunResult) -> io::Result<()> {
    writeln!(w, "<h3>Final sandboxes per node</h3>")?;
    let items: Vec<(String, f64)> = run
        .nodes
        .iter()
        .map(|n| (n.id.clone(), n.sandboxes as f64))
        .collect();
    writeln!(w, "{}", bars("final sandboxes per node", &items, ""))?;
    writeln!(w, "<pre>{}</pre>", esc(&node_bars(run).join("\n")))?;
    Ok(())
}

/// The run's fault windows `(applied, healed)` in ms, an unhealed one to the run's end.
fn fault_shade(run: &RunResult) -> Vec<(f64, f64)> {
    let end = run.timeline.last().map_or(run.wall_ms, |p| p.t_ms);
    run.faults
        .iter()
        .map(|f| {
            (
                f.applied_at_ms,
                f.healed_at_ms.unwrap_or(end).max(f.applied_at_ms),
            )
        })
        .collect()
}

/// Creates that landed per second between consecutive samples (from the cumulative
/// per-node placements), at each sample's time; none without placements.
fn landed_per_second(run: &RunResult) -> Option<(Vec<f64>, Vec<f64>)> {
    if !run.measured(Figure::Placements) {
        return None;
    }
    let pts: Vec<(f64, u64)> = run
        .timeline
        .iter()
        .filter(|p| !p.placed.is_empty())
        .map(|p| (p.t_ms, p.placed.iter().sum()))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let (xs, ys) = pts
        .windows(2)
        .map(|w| {
            let dt = (w[1].0 - w[0].0) / 1000.0;
            let rate = if dt > 0.0 {
                w[1].1.saturating_sub(w[0].1) as f64 / dt
            } else {
                0.0
            };
            (w[1].0, rate)
        })
        .unzip();
    Some((xs, ys))
}

fn write_run(w: &mut impl Write, run: &RunResult) -> io::Result<()> {
    let axes = RunAxes::of(run);
    writeln!(w, "<h2>Run {}</h2>", esc(&run.label))?;
    let settings = settings_line(run);
    if !settings.is_empty() {
        writeln!(w, "<p><code>{}</code></p>", esc(&settings))?;
    }
    let l = &run.latency;
    let head: &[&str] = if leads_with_running(run) {
        &RUNNING_HEADLINE
    } else {
        &FINAL_HEADLINE
    };
    let mut cells = headline_cells(run, head);
    cells.extend([
        accounting_error_cell(run),
        percent(run.error_rate),
        run.shown(Figure::Retries, run.retries),
        run.shown(Figure::Refusals, run.refusals),
    ]);
    table(
        w,
        &[
            head,
            &["acct err (vCPU)", "error rate", "retries", "refusals"],
        ]
        .concat(),
        &[cells],
    )?;
    if let Some((lx, ly)) = landed_per_second(run) {
        let s = vec![("creates landed per second".to_string(), ly)];
        let unit = ("creates/s", YScale::Linear);
        chart(w, &axes, "Creates landed per second", unit, &lx, &s)?;
    }
    latency_over_time(w, run, &axes)?;
    if !run.timeline.is_empty() {
        let xs: Vec<f64> = run.timeline.iter().map(|p| p.t_ms).collect();
        let series: Vec<(String, Vec<f64>)> = run
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let ys = run
                    .timeline
                    .iter()
                    .map(|p| p.sandboxes.get(i).copied().unwrap_or(0) as f64)
                    .collect();
                (n.id.clone(), ys)
            })
            .collect();
        let unit = ("sandboxes", YScale::Linear);
        chart(w, &axes, "Sandboxes per node over time", unit, &xs, &series)?;
        if run
            .timeline
            .iter()
            .any(|p| p.accounting_error_vcpu.is_some())
        {
            let errs: Vec<f64> = run
                .timeline
                .iter()
                .map(|p| p.accounting_error_vcpu.unwrap_or(0.0))
                .collect();
            let s = vec![("mean |believed - true| over nodes".to_string(), errs)];
            let unit = ("vCPU", YScale::Linear);
            chart(w, &axes, "Accounting error over time", unit, &xs, &s)?;
        }
    }
    let over_time = over_time_rows(run);
    if !over_time.is_empty() {
        writeln!(w, "<h3>Skew over time</h3>")?;
        let rows: Vec<Vec<String>> = over_time
            .into_iter()
            .map(|(k, v)| vec![k.to_string(), v])
            .collect();
        table(w, &["figure", "value"], &rows)?;
        if !run.timeline.is_empty() {
            let xs: Vec<f64> = run.timeline.iter().map(|p| p.t_ms).collect();
            let cv: Vec<f64> = run
                .timeline
                .iter()
                .map(|p| super::SkewStats::from_counts(&p.sandboxes).cv)
                .collect();
            let s = vec![("CV of running sandboxes per node".to_string(), cv)];
            let unit = ("CV", YScale::Linear);
            chart(w, &axes, "CV of running sandboxes over time", unit, &xs, &s)?;
        }
        if let Some(r) = &run.retry_storm {
            let xs: Vec<f64> = (0..r.per_second.len()).map(|s| s as f64 * 1000.0).collect();
            let ys: Vec<f64> = r.per_second.iter().map(|&c| c as f64).collect();
            let s = vec![("ResourceExhausted retries per second".to_string(), ys)];
            let unit = ("retries/s", YScale::Linear);
            chart(
                w,
                &axes,
                "ResourceExhausted retries per second",
                unit,
                &xs,
                &s,
            )?;
        }
    }
    if leads_with_running(run) {
        writeln!(
            w,
            "<p>The fleet ended empty ({} nodes, 0 sandboxes: they had lifetimes); the skew \
             above is that of the sandboxes while they ran.</p>",
            run.skew.counts.len()
        )?;
    } else {
        final_bars(w, run)?;
    }
    writeln!(w, "<h3>Create latency ({} samples)</h3>", l.count)?;
    let lat = vec![
        ("p50".to_string(), l.p50_ms),
        ("p90".to_string(), l.p90_ms),
        ("p99".to_string(), l.p99_ms),
        ("p99.9".to_string(), l.p999_ms),
        ("max".to_string(), l.max_ms),
    ];
    writeln!(w, "{}", bars("latency percentiles", &lat, " ms"))?;
    if !run.statuses.is_empty() {
        let rows: Vec<Vec<String>> = run
            .statuses
            .iter()
            .map(|(k, v)| vec![k.clone(), v.to_string()])
            .collect();
        table(w, &["status", "count"], &rows)?;
    }
    if !run.faults.is_empty() {
        writeln!(w, "<h3>Fault timeline</h3>")?;
        let rows: Vec<Vec<String>> = run.faults.iter().map(fault_row).collect();
        table(w, &FAULT_HEADERS, &rows)?;
    }
    if let Some(c) = &run.set_audit {
        writeln!(w, "<h3>Set audit</h3>")?;
        let rows: Vec<Vec<String>> = set_audit_rows(c)
            .iter()
            .map(|(name, f)| vec![name.to_string(), f.count.to_string(), f.ids.join(", ")])
            .collect();
        table(w, &["finding", "count", "ids (first 20)"], &rows)?;
        if c.evictions_unknown {
            writeln!(w, "<p>{}</p>", esc(SetAudit::EVICTIONS_UNKNOWN))?;
        }
    }
    Ok(())
}

/// The axes and shading every chart over time of one run shares.
struct RunAxes {
    /// The fault windows.
    shade: Vec<(f64, f64)>,
    /// End of the time axis, ms: the last sample (the final read), else the run's end.
    end_ms: f64,
}

impl RunAxes {
    fn of(run: &RunResult) -> Self {
        RunAxes {
            shade: fault_shade(run),
            end_ms: run.timeline.last().map_or(run.wall_ms, |p| p.t_ms),
        }
    }
}

/// One chart over time: its heading, the chart (time axis in seconds, y axis in
/// `unit`, fault windows shaded) and its legend.
fn chart(
    w: &mut impl Write,
    axes: &RunAxes,
    heading: &str,
    (unit, scale): (&str, YScale),
    xs: &[f64],
    series: &[(String, Vec<f64>)],
) -> io::Result<()> {
    let spec = TimeChart {
        title: heading,
        unit,
        scale,
        shade: &axes.shade,
        end_ms: axes.end_ms,
    };
    writeln!(w, "<h3>{}</h3>", esc(heading))?;
    writeln!(w, "{}", lines(&spec, xs, series))?;
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    writeln!(w, "{}", legend(&names, !axes.shade.is_empty()))
}

/// p50 and p99 of create latency per bin of intended send time, or why there is no
/// chart.
fn latency_over_time(w: &mut impl Write, run: &RunResult, axes: &RunAxes) -> io::Result<()> {
    const HEADING: &str = "Create latency over time";
    let bins = run
        .latency_over_time
        .as_ref()
        .map_or(&[][..], |t| &t.bins[..]);
    if bins.len() < 2 {
        writeln!(w, "<h3>{HEADING}</h3>")?;
        let why = if bins.is_empty() {
            "no data: no create was answered"
        } else {
            "no data over time: every create was meant to leave in one bin"
        };
        return writeln!(w, "<p class=\"nodata\">{why}.</p>");
    }
    let half = run
        .latency_over_time
        .as_ref()
        .map_or(0.0, |t| t.bin_ms / 2.0);
    // A bin's point sits at its middle: the creates of the bin left around then.
    let xs: Vec<f64> = bins.iter().map(|b| b.from_ms + half).collect();
    let bin_s = half * 2.0 / 1000.0;
    let per = if bin_s == 1.0 {
        "per second".to_string()
    } else {
        format!("per {bin_s} s")
    };
    let series = vec![
        (
            format!("p50 {per}"),
            bins.iter().map(|b| b.p50_ms).collect(),
        ),
        (
            format!("p99 {per}"),
            bins.iter().map(|b| b.p99_ms).collect(),
        ),
    ];
    chart(w, axes, HEADING, ("ms", YScale::Log), &xs, &series)
}

fn table(w: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    write!(w, "<table><tr>")?;
    for h in header {
        write!(w, "<th>{}</th>", esc(h))?;
    }
    write!(w, "</tr>")?;
    for r in rows {
        write!(w, "<tr>")?;
        for c in r {
            let class = if c == "FAIL" { " class=\"fail\"" } else { "" };
            write!(w, "<td{class}>{}</td>", esc(c))?;
        }
        write!(w, "</tr>")?;
    }
    writeln!(w, "</table>")
}
