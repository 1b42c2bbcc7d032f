//! `report.html`: self-contained (inline CSS and SVG, no scripts), a pure function of
//! a finished [`Report`] into a writer.

use std::io::{self, Write};

use super::format::*;
use super::html_charts::{
    chart, landed_per_second, latency_over_time, running_cv_chart, upper_bound, ChartSpec, RunAxes,
};
use super::markdown::set_audit_rows;
use super::model::{Figure, Report, RunResult, SetAudit};
use super::svg::{bars, esc, legend, BarChart, LegendItem};
use super::svg_time::{BoundLine, Steps};

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.fail{color:#b00;font-weight:bold}\
.pass{color:#070}pre{background:#f7f7f7;padding:.5em;overflow-x:auto}\
.scroll{max-width:100%;overflow-x:auto}\
svg.chart{display:block;width:100%;max-width:1000px;height:auto;margin:.5em 0}\
.legend{display:flex;flex-wrap:wrap;gap:.2em 1.2em;max-width:1000px;margin:.2em 0 1em}\
.legend>span{white-space:nowrap}nav ul{columns:2 20em}";

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
    if report.runs.len() > 1 {
        contents(w, report)?;
    }
    // The checks first: the verdict's reasons before the figures behind them.
    if !report.checks.is_empty() {
        writeln!(w, "<h2 id=\"checks\">Checks</h2>")?;
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
        writeln!(w, "<h2 id=\"comparison\">Comparison</h2>")?;
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
        let (title, check, y_label) = if running {
            (
                "Running CV mean per run",
                "running_cv_mean",
                "running CV mean (ratio)",
            )
        } else {
            ("CV per run", "cv", "CV of final sandboxes per node (ratio)")
        };
        let bounds: Vec<Option<f64>> = report
            .runs
            .iter()
            .map(|r| upper_bound(report, &r.label, check).map(|b| b.value))
            .collect();
        writeln!(w, "<h3>{title}</h3>")?;
        let chart = BarChart {
            title,
            x_label: "run",
            y_label,
            unit: "",
            bounds: &bounds,
        };
        writeln!(w, "{}", bars(&chart, &cvs))?;
        let mut items = vec![LegendItem::Series(0, y_label.to_string())];
        if bounds.iter().any(Option::is_some) {
            items.push(LegendItem::Bound(format!("{check} bound per run")));
        }
        writeln!(w, "{}", legend(&items))?;
    }
    for (i, run) in report.runs.iter().enumerate() {
        write_run(w, report, run, i)?;
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
    let chart = BarChart {
        title: "Final sandboxes per node",
        x_label: "node",
        y_label: "sandboxes",
        ..BarChart::default()
    };
    writeln!(w, "{}", bars(&chart, &items))?;
    writeln!(w, "<pre>{}</pre>", esc(&node_bars(run).join("\n")))?;
    Ok(())
}

/// The table of contents of a page with several runs: anchors to its parts.
fn contents(w: &mut impl Write, report: &Report) -> io::Result<()> {
    writeln!(w, "<nav><h2>Contents</h2><ul>")?;
    if !report.checks.is_empty() {
        writeln!(w, "<li><a href=\"#checks\">Checks</a></li>")?;
    }
    writeln!(w, "<li><a href=\"#comparison\">Comparison</a></li>")?;
    for (i, run) in report.runs.iter().enumerate() {
        writeln!(
            w,
            "<li><a href=\"#{}\">Run {}</a></li>",
            run_anchor(i),
            esc(&run.label)
        )?;
    }
    writeln!(w, "</ul></nav>")
}

/// The anchor of the `i`th run's section (labels may hold any character).
fn run_anchor(i: usize) -> String {
    format!("run-{}", i + 1)
}

fn write_run(w: &mut impl Write, report: &Report, run: &RunResult, i: usize) -> io::Result<()> {
    let axes = RunAxes::of(run);
    writeln!(
        w,
        "<h2 id=\"{}\">Run {}</h2>",
        run_anchor(i),
        esc(&run.label)
    )?;
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
    if let Some((intervals, ly)) = landed_per_second(run) {
        let xs: Vec<f64> = intervals.iter().map(|iv| iv.1).collect();
        let s = vec![("creates landed per second".to_string(), ly)];
        let spec = ChartSpec {
            unit: "creates/s",
            steps: Steps::Intervals(&intervals),
            ..ChartSpec::default()
        };
        chart(w, &axes, "Creates landed per second", spec, &xs, &s)?;
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
        let spec = ChartSpec {
            unit: "sandboxes",
            ..ChartSpec::default()
        };
        chart(w, &axes, "Sandboxes per node over time", spec, &xs, &series)?;
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
            let bounds: Vec<BoundLine> = upper_bound(report, &run.label, "accounting_error")
                .into_iter()
                .collect();
            let spec = ChartSpec {
                unit: "vCPU",
                bounds: &bounds,
                ..ChartSpec::default()
            };
            chart(w, &axes, "Accounting error over time", spec, &xs, &s)?;
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
            running_cv_chart(w, report, run, &axes)?;
        }
        if let Some(r) = &run.retry_storm {
            let intervals: Vec<(f64, f64)> = (0..r.per_second.len())
                .map(|s| (s as f64 * 1000.0, (s + 1) as f64 * 1000.0))
                .collect();
            let xs: Vec<f64> = intervals.iter().map(|iv| iv.0 + 500.0).collect();
            let ys: Vec<f64> = r.per_second.iter().map(|&c| c as f64).collect();
            let s = vec![("ResourceExhausted retries per second".to_string(), ys)];
            let spec = ChartSpec {
                unit: "retries/s",
                steps: Steps::Intervals(&intervals),
                ..ChartSpec::default()
            };
            chart(
                w,
                &axes,
                "ResourceExhausted retries per second",
                spec,
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
    let chart = BarChart {
        title: "Create latency percentiles",
        x_label: "percentile",
        y_label: "latency (ms)",
        unit: " ms",
        ..BarChart::default()
    };
    writeln!(w, "{}", bars(&chart, &lat))?;
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

fn table(w: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    write!(w, "<div class=\"scroll\"><table><tr>")?;
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
    writeln!(w, "</table></div>")
}
