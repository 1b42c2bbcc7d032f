//! Golden tests of the reporters (insta snapshots of hand-built reports), the
//! report.json round trip, and the report directory layout.

use crate::support::report as report_support;

use report_support::{chaos_report, two_mode_report};
use stampede::report::*;

fn render(f: impl Fn(&Report, &mut Vec<u8>) -> std::io::Result<()>, r: &Report) -> String {
    let mut buf = Vec::new();
    f(r, &mut buf).expect("write to a Vec");
    String::from_utf8(buf).expect("utf-8 output")
}

#[test]
fn markdown_of_two_modes() {
    let out = render(|r, w| write_markdown(r, w), &two_mode_report());
    insta::assert_snapshot!(out);
}

#[test]
fn markdown_of_a_chaos_drill() {
    let out = render(|r, w| write_markdown(r, w), &chaos_report());
    insta::assert_snapshot!(out);
}

#[test]
fn terminal_of_two_modes() {
    let out = render(|r, w| write_terminal(r, w), &two_mode_report());
    insta::assert_snapshot!(out);
}

#[test]
fn terminal_of_a_chaos_drill() {
    let out = render(|r, w| write_terminal(r, w), &chaos_report());
    insta::assert_snapshot!(out);
}

/// E2B benchmark style: the busiest node has a full bar, an empty node none.
#[test]
fn node_bars_scale_to_the_busiest_node() {
    let out = render(|r, w| write_markdown(r, w), &two_mode_report());
    let full = format!("node-00 |{}| 300", "█".repeat(30));
    let empty = format!("node-04 |{}| 0", " ".repeat(30));
    let half = format!("node-01 |{}{}| 150", "█".repeat(15), " ".repeat(15));
    for line in [full, empty, half] {
        assert!(out.contains(&line), "missing `{line}` in\n{out}");
    }
}

#[test]
fn report_json_round_trips() {
    for report in [two_mode_report(), chaos_report()] {
        let mut buf = Vec::new();
        write_json(&report, &mut buf).expect("json");
        let back: Report = serde_json::from_slice(&buf).expect("parse back");
        assert_eq!(back, report);
        // Deterministic: the same report serializes to the same bytes.
        let mut again = Vec::new();
        write_json(&back, &mut again).expect("json");
        assert_eq!(buf, again);
    }
}

/// The serialized report fits its own JSON Schema: every field written is declared,
/// every required field is written (checked structurally for the top level and runs).
#[test]
fn report_json_matches_its_schema() {
    let schema = json_schema();
    let value = serde_json::to_value(two_mode_report()).expect("value");
    fits(&schema, &schema, &value, "report");
    let run_schema = resolve(&schema, &schema["properties"]["runs"]["items"]);
    fits(&schema, run_schema, &value["runs"][0], "runs[0]");
    assert_eq!(value["schema_version"], 1);
}

fn resolve<'a>(root: &'a serde_json::Value, s: &'a serde_json::Value) -> &'a serde_json::Value {
    match s.get("$ref").and_then(|r| r.as_str()) {
        Some(r) => {
            let name = r.rsplit('/').next().expect("ref name");
            &root["$defs"][name]
        }
        None => s,
    }
}

fn fits(root: &serde_json::Value, schema: &serde_json::Value, v: &serde_json::Value, at: &str) {
    let props = schema["properties"].as_object().expect("object schema");
    let obj = v.as_object().expect("object value");
    for k in obj.keys() {
        assert!(props.contains_key(k), "{at}.{k} is not in the schema");
    }
    for req in schema["required"].as_array().into_iter().flatten() {
        let k = req.as_str().expect("required name");
        assert!(obj.contains_key(k), "{at}.{k} is required but missing");
    }
    let _ = root;
}

#[test]
fn html_is_self_contained_with_inline_charts() {
    let out = render(|r, w| write_html(r, w), &two_mode_report());
    assert!(out.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        out.matches("<svg").count(),
        1 + 2 * 5,
        "comparison + per run: landed per second, timeline, accounting, final, latency"
    );
    // The checks come before the figures; time charts have a labelled time axis.
    assert!(out.contains("time (s)"));
    assert!(!out.contains("<script"), "no scripts");
    assert!(
        !out.contains("http://")
            || !out
                .replace("http://www.w3.org/2000/svg", "")
                .contains("http://")
    );
    assert!(!out.contains("https://"), "no external assets");
}

#[test]
fn report_dir_holds_json_markdown_and_html() {
    let tmp = std::env::temp_dir().join(format!("stampede-report-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let report = two_mode_report();
    let dir = write_report_dir(&report, &tmp).expect("write dir");
    assert_eq!(dir, tmp.join("unit-20261130T020000Z"));
    for f in ["report.json", "report.md", "report.html", "junit.xml"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let back = read_json(&dir.join("report.json")).expect("read back");
    assert_eq!(back, report);
    // Same start time again: a new directory, never an overwrite.
    let second = write_report_dir(&report, &tmp).expect("write dir");
    assert_eq!(second, tmp.join("unit-20261130T020000Z-2"));
    // A simulation may fix started_at (1970 here): its directory uses the wall clock.
    let mut sim = report.clone();
    sim.simulated = true;
    sim.started_at = "1970-01-01T00:00:00Z".into();
    let sim_dir = write_report_dir(&sim, &tmp).expect("write dir");
    let name = sim_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(
        name.starts_with("unit-20") && !name.contains("1970"),
        "{name}"
    );
    std::fs::remove_dir_all(&tmp).expect("clean up");
}

#[test]
fn compact_utc_formats_the_directory_stamp() {
    assert_eq!(
        compact_utc("2026-11-30T02:12:50Z").as_deref(),
        Some("20261130T021250Z")
    );
    assert_eq!(compact_utc("yesterday"), None);
    assert!(compact_utc(&now_rfc3339()).is_some());
}

/// A run's `resumes` block (as in report.json) shows in report.md and the terminal
/// summary, and a run without one shows none.
#[test]
fn markdown_and_terminal_show_a_runs_resumes() {
    let mut r = two_mode_report();
    let calls = [
        (900_000, true, false),
        (1_800_000, true, true),
        (70_000_000, false, false),
    ]
    .map(|(latency_us, placed, moved)| ResumeCall {
        latency_us,
        placed,
        moved,
    });
    r.runs[0].resumes = ResumeFigures::from_calls(calls);
    let md = render(|r, w| write_markdown(r, w), &r);
    let block = md
        .split("### Resumes\n\n")
        .nth(1)
        .expect("report.md has a resumes block");
    let mut lines = block.lines();
    assert_eq!(
        lines.next(),
        Some("| sent | placed | moved off origin | failed | p50 | p90 | p99 | max |"),
        "{md}"
    );
    let values = lines.nth(1).expect("a row of values");
    assert!(values.starts_with("| 3 | 2 | 1 | 1 | "), "{values}");
    assert_eq!(
        md.matches("### Resumes").count(),
        1,
        "only the run that resumed"
    );
    let term = render(|r, w| write_terminal(r, w), &r);
    assert!(
        term.contains("sent 3, placed 2, moved off origin 1, failed 1, p50 "),
        "{term}"
    );
    let plain = render(|r, w| write_markdown(r, w), &two_mode_report());
    assert!(!plain.contains("Resumes"), "{plain}");
}

/// An external run whose API's answers name no node printed `CV of placements 0.000`
/// and `0 / 0.00 / 0`, and an accounting error of `0.0` when belief and truth were one
/// read: every reporter now says "not measured" for both.
#[test]
fn every_reporter_shows_unmeasured_placements_and_accounting_error_as_not_measured() {
    let mut r = two_mode_report();
    r.runs.truncate(1);
    let run = &mut r.runs[0];
    run.label = "external".into();
    run.staging = Some(StagingFacts::default());
    run.accounting_error = None;
    run.skew_over_time = Some(SkewOverTime {
        placements: SkewStats::from_counts(&[0, 0, 0]),
        ..SkewOverTime::default()
    });
    run.not_measured = vec![Figure::Retries, Figure::AccountingError, Figure::Placements];
    let term = render(|r, w| write_terminal(r, w), &r);
    let md = render(|r, w| write_markdown(r, w), &r);
    let html = render(|r, w| write_html(r, w), &r);
    let reporters = [
        ("terminal", &term, "acct err"),
        ("markdown", &md, "Accounting error ("),
        ("html", &html, "acct err (vCPU)"),
    ];
    for (name, out, acct) in reporters {
        let row = |figure: &str| {
            out.lines()
                .skip_while(|l| !l.contains(figure))
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        };
        for figure in ["CV of placements", "placements min / mean / max", acct] {
            let line = row(figure);
            assert!(
                line.contains(NOT_MEASURED),
                "{name}: `{figure}` is not said to be unmeasured: {line}"
            );
        }
        assert!(!out.contains("0 / 0.00 / 0"), "{name}: {out}");
    }
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(
        json["runs"][0]["not_measured"],
        serde_json::json!(["retries", "accounting_error", "placements"])
    );
}

/// A set audit whose evictions are not known says so in every reporter.
#[test]
fn every_reporter_says_when_the_evictions_are_not_known() {
    let mut r = two_mode_report();
    r.runs[0].set_audit = Some(SetAudit {
        evictions_unknown: true,
        ..SetAudit::default()
    });
    for out in [
        render(|r, w| write_terminal(r, w), &r),
        render(|r, w| write_markdown(r, w), &r),
        render(|r, w| write_html(r, w), &r),
    ] {
        assert!(out.contains("victions not known"), "{out}");
    }
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["runs"][0]["checker"]["evictions_unknown"], true);
    assert!(json["runs"][1]["checker"]
        .get("evictions_unknown")
        .is_none());
}

/// A run whose sandboxes had lifetimes ends with an empty fleet: its summaries led with
/// `sandboxes 0, CV 0.000, Jain 1.000`. They lead with the running figures now, and
/// the checks table states each row's unit once, bound and figure in it.
#[test]
fn a_run_with_lifetimes_leads_with_its_running_figures() {
    let mut r = Report::new("nightly", "", 7, "2026-11-30T02:00:00Z");
    let mut run = report_support::run("optimistic", "optimistic", &[0, 0, 0]);
    run.skew_over_time = Some(SkewOverTime {
        placements: SkewStats::from_counts(&[100, 98, 102]),
        running_cv_mean: 0.057,
        running_cv_peak: 0.116,
        steady_from_ms: 9000.0,
        steady_to_ms: 68000.0,
        steady_samples: 60,
    });
    r.runs.push(run);
    let checks: stampede::profile::Checks =
        serde_yaml_ng::from_str("p99_latency: {max: 5s}\nrunning_cv_mean: {max: 0.2}\n").unwrap();
    r.checks = evaluate(&checks, &r);
    let mut term = Vec::new();
    write_terminal(&r, &mut term).unwrap();
    let term = String::from_utf8(term).unwrap();
    let running = term.find("running CV mean / peak").expect("running row");
    assert!(running < term.find("acct err").unwrap(), "{term}");
    assert!(!term.contains("CV of final counts"), "{term}");
    assert!(term.contains("│ ms ") && term.contains("<= 5000"), "{term}");
    let mut md = Vec::new();
    write_markdown(&r, &mut md).unwrap();
    let md = String::from_utf8(md).unwrap();
    assert!(
        md.contains("### Placement skew while sandboxes ran"),
        "{md}"
    );
    assert!(!md.contains("(final counts)"), "{md}");
    let mut html = Vec::new();
    write_html(&r, &mut html).unwrap();
    let html = String::from_utf8(html).unwrap();
    assert!(html.contains("running CV mean"), "{html}");
    assert!(!html.contains("Final sandboxes per node"), "{html}");
}
