//! `compare`: a worse B regresses, an equal or better B does not, noise on tiny
//! figures is absorbed by the absolute floor.

use crate::support::report as report_support;

use report_support::{run, two_mode_report};
use stampede::report::*;

#[test]
fn equal_reports_do_not_regress() {
    let a = two_mode_report();
    let c = compare(&a, &a, 0.1);
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
    let c = compare(&a, &b, 0.1);
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
    let c = compare(&a, &b, 0.1);
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
    assert!(!compare(&a, &b, 0.1).regressed);
    b.runs[1].skew.cv = 0.05;
    assert!(compare(&a, &b, 0.1).regressed);
}

#[test]
fn a_run_missing_in_b_is_a_regression() {
    let a = two_mode_report();
    let mut b = a.clone();
    b.runs.pop();
    let c = compare(&a, &b, 0.1);
    assert!(c.regressed);
    assert_eq!(c.missing_in_b, vec!["optimistic".to_string()]);
}
