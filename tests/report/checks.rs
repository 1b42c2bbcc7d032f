//! Checks decide the exit code: bounds, per-mode overrides, and missing figures that
//! must fail rather than pass silently.

use crate::support::report as report_support;

use std::collections::BTreeMap;
use std::time::Duration;

use report_support::{chaos_report, two_mode_report};
use stampede::placement::AccountingMode;
use stampede::profile::{Bound, Checks, LatencyBound};
use stampede::report::*;

fn max(x: f64) -> Option<Bound> {
    Some(Bound {
        min: None,
        max: Some(x),
    })
}

#[test]
fn cv_bound_fails_the_herded_run_only() {
    let checks = Checks {
        cv: max(0.1),
        ..Default::default()
    };
    let out = evaluate(&checks, &two_mode_report());
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].run.as_str(), out[0].passed), ("reported", false));
    assert!(out[0].message.contains("> max 0.1"), "{}", out[0].message);
    assert!((out[0].actual.expect("cv") - 1.140175).abs() < 1e-5);
    assert_eq!((out[1].run.as_str(), out[1].passed), ("optimistic", true));
}

#[test]
fn per_mode_override_replaces_the_shared_bound_for_that_mode() {
    let mut per_mode = BTreeMap::new();
    per_mode.insert(
        AccountingMode::Reported,
        Checks {
            cv: max(2.0),
            ..Default::default()
        },
    );
    let checks = Checks {
        cv: max(0.1),
        per_mode,
        ..Default::default()
    };
    let out = evaluate(&checks, &two_mode_report());
    assert!(out.iter().all(|c| c.passed), "{out:?}");
    assert_eq!(out[0].bound, "<= 2");
    assert_eq!(out[1].bound, "<= 0.1");
}

#[test]
fn min_bound_and_latency_bound() {
    let checks = Checks {
        jain: Some(Bound {
            min: Some(0.9),
            max: None,
        }),
        p99_latency: Some(LatencyBound {
            max: Duration::from_millis(10),
        }),
        ..Default::default()
    };
    let out = evaluate(&checks, &two_mode_report());
    // reported: jain 0.435 < 0.9 fails; p99 12.25 ms > 10 ms fails (both runs).
    let failed: Vec<(&str, &str)> = out
        .iter()
        .filter(|c| !c.passed)
        .map(|c| (c.run.as_str(), c.check.as_str()))
        .collect();
    assert_eq!(
        failed,
        vec![
            ("reported", "jain"),
            ("reported", "p99_latency"),
            ("optimistic", "p99_latency")
        ]
    );
    assert_eq!(out[1].bound, "<= 10ms");
}

#[test]
fn lost_without_a_set_audit_is_a_failure_not_a_pass() {
    let checks = Checks {
        lost: max(0.0),
        ..Default::default()
    };
    let out = evaluate(&checks, &two_mode_report());
    assert!(out.iter().all(|c| !c.passed && c.actual.is_none()));
    assert!(
        out[0].message.contains("no set audit"),
        "{}",
        out[0].message
    );
}

#[test]
fn set_audit_findings_are_checked() {
    let checks = Checks {
        lost: max(0.0),
        duplicated: max(0.0),
        ..Default::default()
    };
    let out = evaluate(&checks, &chaos_report());
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].check.as_str(), out[0].passed, out[0].actual),
        ("lost", false, Some(2.0))
    );
    assert_eq!(
        (out[1].check.as_str(), out[1].passed, out[1].actual),
        ("duplicated", true, Some(0.0))
    );
}

#[test]
fn error_rate_with_no_requests_fails() {
    let mut r = two_mode_report();
    r.runs[1].requests = 0;
    let checks = Checks {
        error_rate: max(0.01),
        ..Default::default()
    };
    let out = evaluate(&checks, &r);
    assert!(!out[1].passed);
    assert!(out[1].message.contains("no requests"), "{}", out[1].message);
}

#[test]
fn set_checks_derives_passed_and_incomplete_never_passes() {
    let mut r = two_mode_report();
    r.set_checks(evaluate(
        &Checks {
            cv: max(5.0),
            ..Default::default()
        },
        &r,
    ));
    assert!(r.passed);
    r.incomplete = true;
    let checks = r.checks.clone();
    r.set_checks(checks);
    assert!(!r.passed);
}

/// `per_k` (E2B's benchmark runs K3 and K5 in one profile): a `k`'s checks replace the
/// shared ones for the runs of that `k`, and a mode's `per_k` replaces its mode's.
#[test]
fn per_k_overrides_apply_by_k_and_within_a_mode() {
    let mut report = Report::new("p", "", 1, "1970-01-01T00:00:00Z");
    for (k, mode) in [
        ("3", "reported"),
        ("5", "reported"),
        ("3", "optimistic"),
        ("5", "optimistic"),
    ] {
        let mut r = report_support::run(&format!("{mode} K{k}"), mode, &[10, 20, 30]);
        r.settings.k = Some(k.parse().expect("a k"));
        report.runs.push(r);
    }
    let mut reported = Checks {
        cv: max(1.0),
        ..Default::default()
    };
    reported.per_k.insert(
        5,
        Checks {
            cv: max(3.0),
            ..Default::default()
        },
    );
    let checks = Checks {
        cv: max(0.1),
        per_mode: BTreeMap::from([(AccountingMode::Reported, reported)]),
        per_k: BTreeMap::from([(
            5,
            Checks {
                cv: max(2.0),
                ..Default::default()
            },
        )]),
        ..Default::default()
    };
    let bounds: Vec<(String, String)> = evaluate(&checks, &report)
        .into_iter()
        .map(|c| (c.run, c.bound))
        .collect();
    let want = [
        ("reported K3", "<= 1"),
        ("reported K5", "<= 3"),
        ("optimistic K3", "<= 0.1"),
        ("optimistic K5", "<= 2"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(bounds, want);
}

/// Every check of the table is evaluated: a profile that sets all of them gets one
/// outcome per check per run, named as the table names it, in the table's order.
#[test]
fn every_check_in_the_table_is_evaluated() {
    let open = Some(Bound {
        min: None,
        max: Some(f64::MAX),
    });
    let checks = Checks {
        cv: open,
        max_over_mean: open,
        jain: open,
        error_rate: open,
        p99_latency: Some(LatencyBound {
            max: std::time::Duration::from_secs(3600),
        }),
        lost: open,
        duplicated: open,
        limited: open,
        cancelled: open,
        placements_cv: open,
        running_cv_mean: open,
        running_cv_peak: open,
        retries_per_s_peak: open,
        accounting_error: open,
        ..Checks::default()
    };
    for def in &stampede::profile::CHECKS {
        assert!((def.get)(&checks).is_some(), "{} not set above", def.name);
    }
    let report = two_mode_report();
    let outcomes = evaluate(&checks, &report);
    let names: Vec<&str> = stampede::profile::CHECKS.iter().map(|d| d.name).collect();
    for run in &report.runs {
        let got: Vec<&str> = outcomes
            .iter()
            .filter(|o| o.run == run.label)
            .map(|o| o.check.as_str())
            .collect();
        assert_eq!(got, names, "{}", run.label);
    }
}
