//! Terminal tables (tabled): a summary per run, one comparison table across runs,
//! and the checks. A pure function of a finished [`Report`] into a writer.

use std::io::{self, Write};

use tabled::builder::Builder;
use tabled::settings::Style;

use super::format::*;
use super::markdown::set_audit_rows;
use super::model::{Figure, Report, RunResult, SetAudit, NOT_MEASURED};

/// Write the one-line verdict that heads the tables (all `run -q` prints, with the
/// report's path).
pub fn write_verdict(report: &Report, w: impl Write) -> io::Result<()> {
    let mut w = super::untrusted::PlainWriter::new(w);
    let kind = if report.simulated { "simulated" } else { "run" };
    writeln!(
        w,
        "stampede {kind} of `{}` (seed {}): {}",
        report.profile,
        report.seed,
        verdict(report)
    )
}

/// Write `report` as plain-text tables for a terminal.
pub fn write_terminal(report: &Report, w: impl Write) -> io::Result<()> {
    let mut w = super::untrusted::PlainWriter::new(w);
    let w = &mut w;
    write_verdict(report, &mut *w)?;
    for run in &report.runs {
        writeln!(w)?;
        write_run(w, run)?;
        if let Some(f) = &run.staging {
            super::staging::write_staging(f, w)?;
        }
    }
    if report.runs.len() > 1 {
        writeln!(w)?;
        writeln!(w, "Comparison")?;
        let mut b = Builder::default();
        b.push_record(comparison_header(report));
        for run in &report.runs {
            b.push_record(comparison_row(report, run));
        }
        print_table(w, b)?;
    }
    if let Some((header, rows)) = cv_by_mode_and_k(report) {
        writeln!(w)?;
        writeln!(w, "CV by mode and K")?;
        let mut b = Builder::default();
        b.push_record(header);
        for row in rows {
            b.push_record(row);
        }
        print_table(w, b)?;
    }
    if !report.checks.is_empty() {
        writeln!(w)?;
        writeln!(w, "Checks")?;
        let mut b = Builder::default();
        b.push_record([&CHECK_HEADER[..], &["result"]].concat());
        for c in &report.checks {
            let mut row = check_cells(c);
            row.push(if c.passed {
                "pass".into()
            } else {
                format!("FAIL: {}", c.message)
            });
            b.push_record(row);
        }
        print_table(w, b)?;
    }
    Ok(())
}

fn write_run(w: &mut impl Write, run: &RunResult) -> io::Result<()> {
    let settings = settings_line(run);
    if settings.is_empty() {
        writeln!(w, "Run {}", run.label)?;
    } else {
        writeln!(w, "Run {} ({settings})", run.label)?;
    }
    let s = &run.skew;
    let l = &run.latency;
    let mut b = Builder::default();
    b.push_record(["figure", "value"]);
    let mut row = |k: &str, v: String| b.push_record([k.to_string(), v]);
    if leads_with_running(run) {
        // The fleet ended empty: the skew while sandboxes ran leads.
        let mut rows = over_time_rows(run);
        rows.sort_by_key(|(k, _)| !k.starts_with("running"));
        for (k, v) in rows {
            row(k, v);
        }
        row(
            "nodes / sandboxes at the end",
            format!("{} / 0 (sandboxes had lifetimes)", s.counts.len()),
        );
    } else {
        row(
            "nodes / sandboxes",
            format!("{} / {}", s.counts.len(), total_sandboxes(run)),
        );
        row("CV of final counts", ratio(s.cv));
        row(
            "final min / mean / max",
            format!("{} / {:.2} / {}", s.min, s.mean, s.max),
        );
        row("max/mean", ratio(s.max_over_mean));
        row("Jain", ratio(s.jain));
        for (k, v) in over_time_rows(run) {
            row(k, v);
        }
    }
    if let Some(a) = run.accounting_error {
        row(
            "acct err mean / max (vCPU)",
            format!("{} / {}", vcpu(a.mean_abs_vcpu), vcpu(a.max_abs_vcpu)),
        );
    } else if !run.measured(Figure::AccountingError) {
        row("acct err mean / max (vCPU)", NOT_MEASURED.into());
    }
    row(
        "requests / ok / failed",
        format!("{} / {} / {}", run.requests, run.ok, run.failed),
    );
    row("error rate", percent(run.error_rate));
    row(
        "retries / refusals",
        format!(
            "{} / {}",
            run.shown(Figure::Retries, run.retries),
            run.shown(Figure::Refusals, run.refusals)
        ),
    );
    row(
        "latency p50 / p99 / max",
        format!("{} / {} / {}", ms(l.p50_ms), ms(l.p99_ms), ms(l.max_ms)),
    );
    if let Some(f) = &run.resumes {
        let cells = super::resumes::resume_cells(f).map(|(name, v)| format!("{name} {v}"));
        row("resumes", cells.join(", "));
    }
    if let Some(spread) = run.send.burst_spread_ms {
        row("burst send spread", ms(spread));
    }
    if let Some(arrival) = run.send.server_arrival_spread_ms {
        row("burst arrival spread (service)", ms(arrival));
    }
    if run.send.lateness_p99_ms.is_some() {
        row(
            "send lateness p50 / p99",
            format!(
                "{} / {}",
                opt_ms(run.send.lateness_p50_ms),
                opt_ms(run.send.lateness_p99_ms)
            ),
        );
    }
    if !run.statuses.is_empty() {
        let st: Vec<String> = run
            .statuses
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        row("statuses", st.join(", "));
    }
    if let Some(c) = &run.set_audit {
        let f: Vec<String> = set_audit_rows(c)
            .iter()
            .map(|(name, f)| format!("{name} {}", f.count))
            .collect();
        row("set audit", f.join(", "));
        if c.evictions_unknown {
            row("evictions", SetAudit::EVICTIONS_UNKNOWN.into());
        }
    }
    print_table(w, b)?;
    if !leads_with_running(run) {
        if run.nodes.len() > super::MAX_NODE_BARS {
            writeln!(w, "Final sandboxes per node:")?;
        }
        for line in node_bars(run) {
            writeln!(w, "  {line}")?;
        }
    }
    if let Some(o) = run.skew_over_time.as_ref() {
        if run.nodes.len() > super::MAX_NODE_BARS && run.measured(Figure::Placements) {
            let ids: Vec<&str> = run.nodes.iter().map(|n| n.id.as_str()).collect();
            writeln!(w, "Placements per node:")?;
            for line in super::compact(&ids, &o.placements.counts) {
                writeln!(w, "  {line}")?;
            }
        }
    }
    if !run.faults.is_empty() {
        writeln!(w, "Faults of run {}", run.label)?;
        let mut b = Builder::default();
        b.push_record(FAULT_HEADERS);
        for f in &run.faults {
            b.push_record(fault_row(f));
        }
        print_table(w, b)?;
    }
    Ok(())
}

fn print_table(w: &mut impl Write, b: Builder) -> io::Result<()> {
    let mut t = b.build();
    t.with(Style::sharp());
    writeln!(w, "{t}")
}
