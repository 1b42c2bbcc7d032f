//! `compare`: a worse B regresses, an equal or better B does not, noise on tiny
//! figures is absorbed by the absolute floor.

use crate::support::report as report_support;

use report_support::{run, two_mode_report};
use stampede::report::*;

fn cmp(a: &Report, b: &Report) -> Comparison {
    compare(a, b, &CompareOptions::default()).expect("comparable")
}

/// B: one run against an external API, with `a`'s figures of `like`.
fn external_like(a: &Report, like: &str) -> Report {
    let mut b = a.clone();
    let mut r = a.run(like).expect("run").clone();
    r.label = "external".into();
    r.settings = [("target".to_string(), "http://127.0.0.1:3000".to_string())].into();
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
        .all(|d| d.delta == 0.0));
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
    assert!(cv.regressed && cv.delta > 1.0, "{cv:?}");
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
