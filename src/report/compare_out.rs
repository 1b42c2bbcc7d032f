//! A [`Comparison`] written out: a terminal table, Markdown for a CI job summary, and
//! JUnit XML (one case per compared figure per run). All three say the same verdict by
//! the same rule: the comparison's `regressed`.

use std::io::{self, Write};

use tabled::builder::Builder;
use tabled::settings::Style;

use super::compare::{Comparison, Delta};
use super::junit::{attr, text};
use super::untrusted::{markdown_cell, plain};

/// The verdict line.
fn verdict(c: &Comparison) -> &'static str {
    if c.regressed {
        "result: B REGRESSED against A"
    } else {
        "result: no regression"
    }
}

/// The header line: what was compared with what, under which tolerances.
fn header(c: &Comparison) -> String {
    let base = if c.baseline_reports > 1 {
        format!(" ({} reports: worst value, spread)", c.baseline_reports)
    } else {
        String::new()
    };
    format!(
        "compare {} (A){base} -> {} (B), tolerance {:.1}% (latency {:.0}%)",
        c.a_profile,
        c.b_profile,
        c.tolerance * 100.0,
        c.latency_tolerance * 100.0
    )
}

/// Lines after the table: runs missing or not compared, B's own failures.
fn notes(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    if let Some((ext, base)) = &c.mapped {
        out.push(format!(
            "B's run `{ext}` (external API) compared as A's run `{base}`"
        ));
    }
    for l in &c.missing_in_b {
        out.push(format!("run `{l}` is in A but missing in B: REGRESSED"));
    }
    for l in &c.not_compared {
        out.push(format!(
            "run `{l}` of A not compared (B is one external run)"
        ));
    }
    for l in &c.new_in_b {
        out.push(format!("run `{l}` is new in B (not compared)"));
    }
    if let Some(why) = &c.b_incomplete {
        out.push(format!("B is incomplete ({why}): REGRESSED"));
    }
    for f in &c.b_failed_checks {
        out.push(format!("B failed its own check: {f}: REGRESSED"));
    }
    out
}

/// The cells of one delta: run, figure, A, B, delta, allowed, verdict.
fn cells(run: &str, d: &Delta) -> [String; 7] {
    [
        run.to_string(),
        d.metric.clone(),
        format!("{:.4}", d.a),
        d.b.map_or_else(|| "none".into(), |b| format!("{b:.4}")),
        d.delta.map_or_else(String::new, |x| format!("{x:+.4}")),
        format!("{:.4}", d.allowed),
        if d.regressed {
            "REGRESSED".into()
        } else {
            "ok".into()
        },
    ]
}

const COLUMNS: [&str; 7] = ["run", "figure", "A", "B", "delta", "allowed", "verdict"];

/// Print a comparison as a table plus a verdict line.
pub fn write_comparison(c: &Comparison, w: impl Write) -> io::Result<()> {
    let mut w = super::untrusted::PlainWriter::new(w);
    writeln!(w, "{}", header(c))?;
    let mut t = Builder::default();
    t.push_record(COLUMNS);
    for r in &c.runs {
        for d in &r.deltas {
            t.push_record(cells(&r.label, d));
        }
    }
    let mut table = t.build();
    table.with(Style::sharp());
    writeln!(w, "{table}")?;
    for n in notes(c) {
        writeln!(w, "{n}")?;
    }
    for r in &c.runs {
        for d in r.deltas.iter().filter(|d| d.note.is_some()) {
            writeln!(
                w,
                "run `{}`: B has no {}: {}",
                r.label,
                d.metric,
                d.note.as_deref().unwrap_or_default()
            )?;
        }
    }
    writeln!(w, "{}", verdict(c))
}

/// A comparison as Markdown (for `GITHUB_STEP_SUMMARY`).
pub fn write_comparison_markdown(c: &Comparison, mut w: impl Write) -> io::Result<()> {
    writeln!(w, "## Comparison with the baseline\n")?;
    writeln!(w, "{}\n", plain(&header(c)))?;
    writeln!(w, "| {} |", COLUMNS.join(" | "))?;
    writeln!(w, "|{}", "---|".repeat(COLUMNS.len()))?;
    for r in &c.runs {
        for d in &r.deltas {
            let mut row: Vec<String> = cells(&r.label, d)
                .iter()
                .map(|c| markdown_cell(c))
                .collect();
            if d.regressed {
                row[6] = "**REGRESSED**".into();
            }
            writeln!(w, "| {} |", row.join(" | "))?;
        }
    }
    writeln!(w)?;
    for n in notes(c) {
        writeln!(w, "- {}", plain(&n))?;
    }
    writeln!(w, "\n**{}**", plain(verdict(c)))
}

/// A comparison as JUnit XML: a case per compared figure per run, one per run of A
/// missing in B, one for B's own checks and one for B's completeness.
pub fn write_comparison_junit(c: &Comparison, mut w: impl Write) -> io::Result<()> {
    let mut cases: Vec<(String, String, Option<String>)> = Vec::new();
    for r in &c.runs {
        for d in &r.deltas {
            let why = d.regressed.then(|| match (d.b, &d.note) {
                (Some(b), _) => format!(
                    "{} {b:.4} against {:.4}: worse by more than {:.4}",
                    d.metric, d.a, d.allowed
                ),
                (None, note) => format!(
                    "{}: B has none ({})",
                    d.metric,
                    note.as_deref().unwrap_or("not measured")
                ),
            });
            cases.push((r.label.clone(), d.metric.clone(), why));
        }
    }
    for l in &c.missing_in_b {
        cases.push((l.clone(), "run present".into(), Some("missing in B".into())));
    }
    let own = (!c.b_failed_checks.is_empty()).then(|| c.b_failed_checks.join("; "));
    cases.push((c.b_profile.clone(), "own checks passed".into(), own));
    let done = c.b_incomplete.as_ref().map(|w| format!("incomplete: {w}"));
    cases.push((c.b_profile.clone(), "run complete".into(), done));
    let failures = cases.iter().filter(|c| c.2.is_some()).count();
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="stampede compare" tests="{}" failures="{failures}">"#,
        cases.len()
    )?;
    writeln!(
        w,
        r#"  <testsuite name="compare {}" tests="{}" failures="{failures}" errors="0" skipped="0">"#,
        attr(&c.b_profile),
        cases.len()
    )?;
    for (class, name, failure) in &cases {
        let open = format!(
            r#"    <testcase classname="{}" name="{}""#,
            attr(class),
            attr(name)
        );
        match failure {
            None => writeln!(w, "{open}/>")?,
            Some(msg) => {
                writeln!(w, "{open}>")?;
                writeln!(
                    w,
                    r#"      <failure message="{}" type="regression">{}</failure>"#,
                    attr(msg),
                    text(msg)
                )?;
                writeln!(w, "    </testcase>")?;
            }
        }
    }
    writeln!(
        w,
        "    <system-out>{}</system-out>",
        text(&format!("{}\n{}", header(c), verdict(c)))
    )?;
    writeln!(w, "  </testsuite>")?;
    writeln!(w, "</testsuites>")
}
