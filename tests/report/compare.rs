//! `compare`: a worse B regresses, an equal or better B does not, noise on tiny
//! figures is absorbed by the absolute floor.

use crate::support::report as report_support;

use report_support::{run, two_mode_report};
use stampede::profile::{Checks, RunSettings};
use stampede::report::*;

fn cmp(a: &Report, b: &Report) -> Comparison {
    compare(a, b, &CompareOptions::default()).expect("comparable")
}

/// B: one run against an external API, with `a`'s figures of `like`.
fn external_like(a: &Report, like: &str) -> Report {
    let mut b = a.clone();
    let mut r = a.run(like).expect("run").clone();
    r.label = "external".into();
    r.settings = RunSettings::external("http://127.0.0.1:3000".to_string());
    r.staging = Some(StagingFacts::default());
    r.not_measured = vec![Figure::Retries, Figure::Refusals, Figure::AccountingError];
    b.runs = vec![r];
    b
}

#[test]
fn an_external_run_is_compared_as_the_baseline_mode_it_stands_for() {
    let a = two_mode_report();
    let b = external_like(&a, "optimistic");
    // A has two modes: which one the external API stands for must be said.
    let err = compare(&a, &b, &CompareOptions::default()).unwrap_err();
    assert!(err.to_string().contains("--baseline-run"), "{err}");
    let opts = |l: &str| CompareOptions {
        baseline_run: Some(l.into()),
        ..CompareOptions::default()
    };
    assert!(matches!(
        compare(&a, &b, &opts("nope")),
        Err(CompareError::NoSuchRun(_))
    ));
    let c = compare(&a, &b, &opts("optimistic")).expect("comparable");
    assert!(!c.regressed, "{c:?}");
    assert_eq!(
        c.mapped,
        Some(("external".to_string(), "optimistic".to_string()))
    );
    assert_eq!(c.not_compared, vec!["reported".to_string()]);
    assert!(c.missing_in_b.is_empty() && c.new_in_b.is_empty(), "{c:?}");
    let mut out = Vec::new();
    write_comparison(&c, &mut out).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("compared as A's run `optimistic`"), "{text}");
    assert!(text.contains("result: no regression"), "{text}");
    // The herded mode's figures against the even one's: a regression is still one.
    let herd = compare(&a, &external_like(&a, "reported"), &opts("optimistic")).unwrap();
    assert!(herd.regressed, "{herd:?}");
    // A baseline of one run needs no flag.
    let mut one = a.clone();
    one.runs.truncate(1);
    let c = cmp(&one, &external_like(&a, "reported"));
    assert_eq!(c.mapped.map(|m| m.1).as_deref(), Some("reported"));
    assert!(!c.regressed);
}

/// p99 doubles on a loaded runner with nothing regressed: the latency tolerance
/// absorbs it; a tenfold p99 still regresses.
#[test]
fn latency_has_a_tolerance_of_its_own() {
    let a = two_mode_report();
    let mut b = a.clone();
    b.runs[0].latency.p99_ms = a.runs[0].latency.p99_ms * 2.5;
    let c = cmp(&a, &b);
    assert!(!c.regressed, "{c:?}");
    b.runs[0].latency.p99_ms = a.runs[0].latency.p99_ms * 10.0;
    assert!(cmp(&a, &b).regressed);
    // The skew figures keep the tight tolerance.
    let tight = CompareOptions {
        latency_tolerance: 0.1,
        ..CompareOptions::default()
    };
    let mut b = a.clone();
    b.runs[0].latency.p99_ms = a.runs[0].latency.p99_ms * 2.5;
    assert!(compare(&a, &b, &tight).unwrap().regressed);
}

#[test]
fn equal_reports_do_not_regress() {
    let a = two_mode_report();
    let c = cmp(&a, &a);
    assert!(!c.regressed, "{c:?}");
    assert_eq!(c.runs.len(), 2);
    assert!(c
        .runs
        .iter()
        .flat_map(|r| &r.deltas)
        .all(|d| d.delta == Some(0.0)));
}

#[test]
fn a_returning_herd_regresses() {
    let a = two_mode_report();
    let mut b = a.clone();
    b.runs[1] = run("optimistic", "optimistic", &[300, 150, 50, 0, 0]);
    let c = cmp(&a, &b);
    assert!(c.regressed);
    let opt = &c.runs[1];
    assert!(opt.regressed);
    let cv = opt
        .deltas
        .iter()
        .find(|d| d.metric == "cv")
        .expect("cv delta");
    assert!(cv.regressed && cv.delta.unwrap() > 1.0, "{cv:?}");
    let mut out = Vec::new();
    write_comparison(&c, &mut out).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("REGRESSED"), "{text}");
    assert!(text.contains("result: B REGRESSED against A"), "{text}");
}

#[test]
fn a_better_b_does_not_regress() {
    let a = two_mode_report();
    let mut b = a.clone();
    b.runs[0] = run("reported", "reported", &[100, 100, 100, 100, 100]);
    let c = cmp(&a, &b);
    assert!(!c.regressed, "{c:?}");
    let mut out = Vec::new();
    write_comparison(&c, &mut out).expect("write");
    assert!(String::from_utf8(out)
        .expect("utf-8")
        .contains("result: no regression"));
}

/// CV 0.010 -> 0.012 is +20% but only 0.002 absolute: under the 0.01 floor.
#[test]
fn tiny_absolute_changes_are_noise() {
    let mut a = two_mode_report();
    a.runs[1].skew.cv = 0.010;
    let mut b = a.clone();
    b.runs[1].skew.cv = 0.012;
    assert!(!cmp(&a, &b).regressed);
    b.runs[1].skew.cv = 0.05;
    assert!(cmp(&a, &b).regressed);
}

#[test]
fn a_run_missing_in_b_is_a_regression() {
    let a = two_mode_report();
    let mut b = a.clone();
    b.runs.pop();
    let c = cmp(&a, &b);
    assert!(c.regressed);
    assert_eq!(c.missing_in_b, vec!["optimistic".to_string()]);
}

/// A report whose fleet ends empty (lifetimes), with running figures and checks on
/// them, as the nightly writes.
fn lifetimes_report(running_cv_mean: f64, accounting_error: f64) -> Report {
    let mut r = Report::new("nightly", "", 7, "2026-11-30T02:00:00Z");
    let mut run = run("optimistic", "optimistic", &[0, 0, 0, 0, 0]);
    (run.requests, run.ok, run.error_rate) = (505, 500, 5.0 / 505.0);
    run.statuses.insert("201".into(), 500);
    run.skew_over_time = Some(SkewOverTime {
        placements: SkewStats::from_counts(&[100, 101, 99, 100, 100]),
        running_cv_mean,
        running_cv_peak: running_cv_mean * 2.0,
        steady_from_ms: 1000.0,
        steady_to_ms: 9000.0,
        steady_samples: 9,
    });
    run.accounting_error.as_mut().unwrap().mean_abs_vcpu = accounting_error;
    r.runs.push(run);
    let checks: Checks = serde_yaml_ng::from_str(
        "running_cv_mean: {max: 0.2}\nerror_rate: {max: 0.01}\naccounting_error: {max: 3.0}\n",
    )
    .expect("checks");
    r.checks = evaluate(&checks, &r);
    r.passed = r.checks.iter().all(|c| c.passed);
    r
}

/// The nightly's final fleet is empty: comparing its final CV (0 against 0) let a
/// returning herd through as "no regression". The checked running figures are compared
/// now, and the empty fleet's final skew is not.
#[test]
fn a_herd_that_only_shows_in_running_figures_regresses() {
    let a = lifetimes_report(0.05, 0.5);
    let herd = lifetimes_report(0.345, 2.0);
    let c = cmp(&a, &herd);
    assert!(c.regressed, "{c:?}");
    let names = |regressed: bool| -> Vec<String> {
        c.runs[0]
            .deltas
            .iter()
            .filter(|d| d.regressed == regressed)
            .map(|d| d.metric.clone())
            .collect()
    };
    assert_eq!(names(true), ["running_cv_mean", "accounting_error"]);
    assert!(!names(false).contains(&"cv".to_string()), "{c:?}");
    let mut out = Vec::new();
    write_comparison(&c, &mut out).expect("write");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("running_cv_mean"), "{text}");
    assert!(text.contains("B failed its own check"), "{text}");
    assert!(!cmp(&a, &lifetimes_report(0.055, 0.55)).regressed);
}

/// A B that failed its own checks is a regression even when every figure is as good as
/// the baseline's (a baseline that failed the same way), in all three writers.
#[test]
fn a_b_that_failed_its_checks_never_compares_as_no_regression() {
    let a = lifetimes_report(0.4, 0.5);
    let b = lifetimes_report(0.4, 0.5);
    let c = cmp(&a, &b);
    assert!(c.runs.iter().all(|r| !r.regressed), "{c:?}");
    assert!(c.regressed && !c.b_failed_checks.is_empty(), "{c:?}");
    let (mut md, mut junit) = (Vec::new(), Vec::new());
    write_comparison_markdown(&c, &mut md).expect("md");
    write_comparison_junit(&c, &mut junit).expect("junit");
    let (md, junit) = (
        String::from_utf8(md).unwrap(),
        String::from_utf8(junit).unwrap(),
    );
    assert!(md.contains("B REGRESSED"), "{md}");
    assert!(junit.contains(r#"name="own checks passed">"#), "{junit}");
    assert!(junit.contains("failures=\"1\""), "{junit}");
}

/// A baseline of several runs: B within their spread passes, beyond it regresses.
#[test]
fn a_baseline_of_several_runs_allows_their_spread() {
    let base = [lifetimes_report(0.05, 1.0), lifetimes_report(0.09, 1.8)];
    let within = compare_with_baseline(&base, &lifetimes_report(0.12, 2.5), &Default::default())
        .expect("comparable");
    assert!(!within.regressed, "{within:?}");
    let d = &within.runs[0].deltas;
    let acc = d.iter().find(|d| d.metric == "accounting_error").unwrap();
    assert!(acc.a == 1.8 && (acc.spread - 0.8).abs() < 1e-9, "{acc:?}");
    let beyond = compare_with_baseline(&base, &lifetimes_report(0.14, 2.7), &Default::default())
        .expect("comparable");
    let bad: Vec<&str> = beyond.runs[0]
        .deltas
        .iter()
        .filter(|d| d.regressed)
        .map(|d| d.metric.as_str())
        .collect();
    assert_eq!(bad, ["running_cv_mean", "accounting_error"], "{beyond:?}");
}

/// B's only run named otherwise than A's is judged against A's run (its only one, or
/// the one `--baseline-run` names), and the figures it judged are shown.
#[test]
fn a_run_named_otherwise_is_compared_with_its_figures_shown() {
    let two = two_mode_report();
    let mut a = two.clone();
    a.runs.retain(|r| r.label == "optimistic");
    let mut b = a.clone();
    b.runs[0].label = "reported-renamed".into();
    let c = cmp(&a, &b);
    assert_eq!(c.runs.len(), 1, "{c:?}");
    assert!(!c.runs[0].deltas.is_empty(), "figures judged: {c:?}");

    let opts = CompareOptions {
        baseline_run: Some("optimistic".into()),
        ..CompareOptions::default()
    };
    let c = compare(&two, &b, &opts).expect("comparable");
    let judged: Vec<&RunComparison> = c.runs.iter().filter(|r| !r.deltas.is_empty()).collect();
    assert_eq!(judged.len(), 1, "{c:?}");
    assert_eq!(judged[0].label, "optimistic");
}
