//! `report.md`: a pure function of a finished [`Report`] into a writer.

use std::io::{self, Write};

use super::format::*;
use super::model::{FaultWindow, Figure, Report, RunResult, SetAudit, NOT_MEASURED};

/// Write `report` as Markdown.
pub fn write_markdown(report: &Report, mut w: impl Write) -> io::Result<()> {
    let w = &mut w;
    writeln!(w, "# stampede report: {}", report.profile)?;
    writeln!(w)?;
    if !report.description.is_empty() {
        writeln!(w, "{}", report.description.trim())?;
        writeln!(w)?;
    }
    table(
        w,
        &["", ""],
        &[
            vec!["result".into(), format!("**{}**", verdict(report))],
            vec!["tool".into(), report.tool.clone()],
            vec!["seed".into(), report.seed.to_string()],
            vec!["started".into(), report.started_at.clone()],
            vec![
                "simulated".into(),
                if report.simulated { "yes" } else { "no" }.into(),
            ],
            vec!["schema".into(), format!("v{}", report.schema_version)],
        ],
    )?;
    if report.runs.len() > 1 {
        writeln!(w, "## Comparison")?;
        writeln!(w)?;
        let rows: Vec<Vec<String>> = report
            .runs
            .iter()
            .map(|r| comparison_row(report, r))
            .collect();
        table(w, &comparison_header(report), &rows)?;
    }
    if let Some((header, rows)) = cv_by_mode_and_k(report) {
        writeln!(w, "## CV by mode and K")?;
        writeln!(w)?;
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        table(w, &header, &rows)?;
    }
    for run in &report.runs {
        write_run(w, run)?;
        if let Some(f) = &run.staging {
            writeln!(w, "### Staging ({})", run.label)?;
            writeln!(w)?;
            writeln!(w, "```text")?;
            super::staging::write_staging(f, w)?;
            writeln!(w, "```")?;
            writeln!(w)?;
        }
    }
    if !report.checks.is_empty() {
        writeln!(w, "## Checks")?;
        writeln!(w)?;
        let rows: Vec<Vec<String>> = report
            .checks
            .iter()
            .map(|c| {
                let mut row = check_cells(c);
                row.push(if c.passed { "pass" } else { "**FAIL**" }.into());
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
    Ok(())
}

fn write_run(w: &mut impl Write, run: &RunResult) -> io::Result<()> {
    writeln!(w, "## Run `{}`", super::untrusted::code_line(&run.label))?;
    writeln!(w)?;
    let settings = settings_line(run);
    if !settings.is_empty() {
        writeln!(w, "Settings: `{settings}`")?;
        writeln!(w)?;
    }
    if leads_with_running(run) {
        writeln!(w, "### Placement skew while sandboxes ran")?;
        writeln!(w)?;
        let rows: Vec<Vec<String>> = over_time_rows(run)
            .into_iter()
            .map(|(k, v)| vec![k.to_string(), v])
            .collect();
        table(w, &["figure", "value"], &rows)?;
        writeln!(
            w,
            "The fleet ended empty ({} nodes, 0 sandboxes: they had lifetimes).",
            run.skew.counts.len()
        )?;
        writeln!(w)?;
        return write_run_rest(w, run);
    }
    writeln!(w, "### Placement skew (final counts)")?;
    writeln!(w)?;
    let s = &run.skew;
    table(
        w,
        &[
            "nodes",
            "sandboxes",
            "mean",
            "std dev",
            "CV",
            "min",
            "max",
            "max/mean",
            "Jain",
        ],
        &[vec![
            s.counts.len().to_string(),
            total_sandboxes(run).to_string(),
            format!("{:.2}", s.mean),
            format!("{:.2}", s.std_dev),
            ratio(s.cv),
            s.min.to_string(),
            s.max.to_string(),
            ratio(s.max_over_mean),
            ratio(s.jain),
        ]],
    )?;
    if !run.nodes.is_empty() {
        writeln!(w, "```text")?;
        for line in node_bars(run) {
            writeln!(w, "{}", super::untrusted::code_line(&line))?;
        }
        writeln!(w, "```")?;
        writeln!(w)?;
    }
    write_run_rest(w, run)
}

/// A run's sections after its headline skew: placements by kind, skew over time (when
/// the headline did not show it), and what follows.
fn write_run_rest(w: &mut impl Write, run: &RunResult) -> io::Result<()> {
    if !run.placements_by_kind.is_empty() {
        writeln!(w, "### Placements by kind")?;
        writeln!(w)?;
        let rows: Vec<Vec<String>> = run
            .placements_by_kind
            .iter()
            .map(|(kind, nodes)| {
                let per_node: Vec<String> =
                    nodes.iter().map(|(n, c)| format!("{n}: {c}")).collect();
                vec![
                    kind.clone(),
                    nodes.values().sum::<u64>().to_string(),
                    per_node.join(", "),
                ]
            })
            .collect();
        table(w, &["kind", "placements", "per node"], &rows)?;
    }
    let over_time = over_time_rows(run);
    if !over_time.is_empty() && !leads_with_running(run) {
        writeln!(w, "### Skew over time")?;
        writeln!(w)?;
        let rows: Vec<Vec<String>> = over_time
            .into_iter()
            .map(|(k, v)| vec![k.to_string(), v])
            .collect();
        table(w, &["figure", "value"], &rows)?;
        if let Some(o) = run
            .skew_over_time
            .as_ref()
            .filter(|_| run.nodes.len() > super::MAX_NODE_BARS)
            .filter(|_| run.measured(Figure::Placements))
        {
            let ids: Vec<&str> = run.nodes.iter().map(|n| n.id.as_str()).collect();
            writeln!(w, "Placements per node:")?;
            writeln!(w)?;
            writeln!(w, "```text")?;
            for line in super::compact(&ids, &o.placements.counts) {
                writeln!(w, "{}", super::untrusted::code_line(&line))?;
            }
            writeln!(w, "```")?;
            writeln!(w)?;
        }
    }
    if let Some(a) = run.accounting_error {
        writeln!(
            w,
            "Accounting error (|believed - true| vCPU): mean {}, max {} over {} samples.",
            vcpu(a.mean_abs_vcpu),
            vcpu(a.max_abs_vcpu),
            a.samples
        )?;
        writeln!(w)?;
    } else if !run.measured(Figure::AccountingError) {
        writeln!(
            w,
            "Accounting error (|believed - true| vCPU): {NOT_MEASURED}."
        )?;
        writeln!(w)?;
    }
    writeln!(w, "### Requests")?;
    writeln!(w)?;
    let l = &run.latency;
    table(
        w,
        &[
            "requests",
            "ok",
            "failed",
            "error rate",
            "retries",
            "refusals",
            "wall",
        ],
        &[vec![
            run.requests.to_string(),
            run.ok.to_string(),
            run.failed.to_string(),
            percent(run.error_rate),
            run.shown(Figure::Retries, run.retries),
            run.shown(Figure::Refusals, run.refusals),
            ms(run.wall_ms),
        ]],
    )?;
    table(
        w,
        &[
            "latency samples",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "mean",
        ],
        &[vec![
            l.count.to_string(),
            ms(l.p50_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.p999_ms),
            ms(l.max_ms),
            ms(l.mean_ms),
        ]],
    )?;
    if !run.statuses.is_empty() {
        let rows: Vec<Vec<String>> = run
            .statuses
            .iter()
            .map(|(k, v)| vec![k.clone(), v.to_string()])
            .collect();
        table(w, &["status", "count"], &rows)?;
    }
    if let Some(f) = &run.resumes {
        writeln!(w, "### Resumes")?;
        writeln!(w)?;
        let cells = super::resumes::resume_cells(f);
        let header: Vec<&str> = cells.iter().map(|(name, _)| *name).collect();
        table(w, &header, &[cells.into_iter().map(|(_, v)| v).collect()])?;
    }
    let t = &run.send;
    if let Some(spread) = t.burst_spread_ms {
        writeln!(w, "Burst send spread (first to last send): {}.", ms(spread))?;
        if t.burst_release_realtime == Some(false) {
            writeln!(
                w,
                "The final bytes were released at normal priority (no real-time privilege); \
                 a preempted release loop stretches the spread by a scheduler tick."
            )?;
        }
        if let Some(arrival) = t.server_arrival_spread_ms {
            writeln!(
                w,
                "Burst arrival spread at the service (first to last create's last byte \
                 received, kernel time): {}.",
                ms(arrival)
            )?;
        }
        writeln!(w)?;
    }
    if t.lateness_p50_ms.is_some() || t.lateness_p99_ms.is_some() || t.lateness_max_ms.is_some() {
        writeln!(
            w,
            "Send lateness after the intended time: p50 {}, p99 {}, max {}.",
            opt_ms(t.lateness_p50_ms),
            opt_ms(t.lateness_p99_ms),
            opt_ms(t.lateness_max_ms)
        )?;
        writeln!(w)?;
    }
    if !run.faults.is_empty() {
        write_faults(w, &run.faults)?;
    }
    if let Some(c) = &run.set_audit {
        write_set_audit(w, c)?;
    }
    Ok(())
}

fn write_faults(w: &mut impl Write, faults: &[FaultWindow]) -> io::Result<()> {
    writeln!(w, "### Fault timeline")?;
    writeln!(w)?;
    let rows: Vec<Vec<String>> = faults.iter().map(fault_row).collect();
    table(w, &FAULT_HEADERS, &rows)
}

fn write_set_audit(w: &mut impl Write, c: &SetAudit) -> io::Result<()> {
    writeln!(w, "### Set audit")?;
    writeln!(w)?;
    let rows: Vec<Vec<String>> = set_audit_rows(c)
        .into_iter()
        .map(|(name, f)| {
            let mut ids = f.ids.join(", ");
            if f.count > f.ids.len() as u64 {
                ids.push_str(", ...");
            }
            vec![name.to_string(), f.count.to_string(), ids]
        })
        .collect();
    table(w, &["finding", "count", "ids (first 20)"], &rows)?;
    if c.evictions_unknown {
        writeln!(w, "{}.", capitalised(SetAudit::EVICTIONS_UNKNOWN))?;
        writeln!(w)?;
    }
    Ok(())
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The set audit's findings with their report names, in a fixed order.
pub fn set_audit_rows(c: &SetAudit) -> [(&'static str, &super::model::Finding); 5] {
    [
        ("lost", &c.lost),
        ("lost_to_node_restart", &c.lost_to_node_restart),
        ("duplicated", &c.duplicated),
        ("orphaned", &c.orphaned),
        ("recovered", &c.recovered),
    ]
}

/// A GitHub-flavoured Markdown table followed by a blank line; cells escaped
/// ([`markdown_cell`](super::untrusted::markdown_cell)).
fn table(w: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let esc = |s: &str| super::untrusted::markdown_cell(s);
    writeln!(
        w,
        "| {} |",
        header
            .iter()
            .map(|h| esc(h))
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    writeln!(w, "|{}|", vec!["---"; header.len()].join("|"))?;
    for r in rows {
        writeln!(
            w,
            "| {} |",
            r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
        )?;
    }
    writeln!(w)
}
