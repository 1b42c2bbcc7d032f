//! `junit.xml`: the report's checks as JUnit XML for CI test views (one test case per
//! check per run, the figure and its bound in a failed case's message). A pure function
//! of a finished [`Report`] into a writer.

use std::io::{self, Write};

use super::format::verdict;
use super::model::Report;

/// Write `report`'s checks as one JUnit `<testsuite>` named after the profile: a case
/// per check per run (class = the run's label), failed with `<failure>` when the check
/// failed. An incomplete report adds an errored case `run complete` (the reason); a
/// report without checks is a suite of no case whose `<system-out>` says that nothing
/// was checked.
pub fn write_junit(report: &Report, mut w: impl Write) -> io::Result<()> {
    let failures = report.checks.iter().filter(|c| !c.passed).count();
    let errors = usize::from(report.incomplete);
    let tests = report.checks.len() + errors;
    let seconds: f64 = report.runs.iter().map(|r| r.wall_ms).sum::<f64>() / 1000.0;
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="stampede" tests="{tests}" failures="{failures}" errors="{errors}" time="{seconds:.3}">"#
    )?;
    writeln!(
        w,
        r#"  <testsuite name="{}" tests="{tests}" failures="{failures}" errors="{errors}" skipped="0" time="{seconds:.3}" timestamp="{}">"#,
        attr(&report.profile),
        attr(&report.started_at)
    )?;
    writeln!(w, "    <properties>")?;
    for (k, v) in [
        ("seed", report.seed.to_string()),
        ("simulated", report.simulated.to_string()),
        ("tool", report.tool.clone()),
    ] {
        writeln!(w, r#"      <property name="{k}" value="{}"/>"#, attr(&v))?;
    }
    writeln!(w, "    </properties>")?;
    if report.incomplete {
        let why = report.incomplete_reason.as_deref().unwrap_or("unknown");
        writeln!(
            w,
            r#"    <testcase classname="{}" name="run complete" time="0">"#,
            attr(&report.profile)
        )?;
        writeln!(
            w,
            r#"      <error message="{}" type="incomplete"/>"#,
            attr(&format!("run incomplete: {why}"))
        )?;
        writeln!(w, "    </testcase>")?;
    }
    for c in &report.checks {
        let time = report.run(&c.run).map_or(0.0, |r| r.wall_ms / 1000.0);
        let open = format!(
            r#"    <testcase classname="{}" name="{}" time="{time:.3}""#,
            attr(&c.run),
            attr(&c.check)
        );
        if c.passed {
            writeln!(w, "{open}/>")?;
            continue;
        }
        let actual = c
            .actual
            .map_or_else(|| "none".to_string(), |x| x.to_string());
        writeln!(w, "{open}>")?;
        writeln!(
            w,
            r#"      <failure message="{}" type="check">{}</failure>"#,
            attr(&format!("{} (bound {})", c.message, c.bound)),
            text(&format!(
                "run: {}\ncheck: {}\nactual: {actual}\nbound: {}\n",
                c.run, c.check, c.bound
            ))
        )?;
        writeln!(w, "    </testcase>")?;
    }
    writeln!(
        w,
        "    <system-out>{}</system-out>",
        text(&format!("verdict: {}", verdict(report)))
    )?;
    writeln!(w, "  </testsuite>")?;
    writeln!(w, "</testsuites>")
}

/// `s` escaped for an XML attribute value, control characters XML 1.0 forbids dropped.
pub(super) fn attr(s: &str) -> String {
    text(s).replace('"', "&quot;").replace('\n', "&#10;")
}

/// `s` escaped for XML character data, control characters XML 1.0 forbids dropped.
pub(super) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_forbidden_characters_cannot_break_the_document() {
        assert_eq!(
            attr("a<\"b\">&\u{1}c\n"),
            "a&lt;&quot;b&quot;&gt;&amp;c&#10;"
        );
        assert_eq!(text("]]>\u{0}"), "]]&gt;");
    }
}
