//! A profile's `checks:` evaluated against a finished report. A figure the report
//! lacks fails its check with a message saying so: a guard must never pass silently.
//! So does a skew figure (cv, max_over_mean, jain) of a run that ends with no sandbox
//! on any node: CV 0 and Jain 1 of nothing are not an even spread.

use std::time::Duration;

use crate::placement::AccountingMode;
use crate::profile::{Bound, Checks};

use super::model::{CheckOutcome, Report, RunResult};
use super::staging::CANCELLED_KEY;

/// Evaluate `checks` on every run of `report`, in run order then check order
/// (cv, max_over_mean, jain, error_rate, p99_latency, lost, duplicated, limited,
/// cancelled, placements_cv, running_cv_mean, running_cv_peak, retries_per_s_peak). A
/// run whose `settings["accounting"]` names a mode listed under `per_mode` (or whose
/// `settings["k"]` is listed under `per_k`) uses those checks in place of the shared ones
/// they name.
pub fn evaluate(checks: &Checks, report: &Report) -> Vec<CheckOutcome> {
    let mut out = Vec::new();
    for run in &report.runs {
        let c = effective(checks, run);
        let bounded = |out: &mut Vec<CheckOutcome>, name: &str, b: &Option<Bound>, actual| {
            if let Some(b) = b {
                out.push(check_bound(&run.label, name, b, actual));
            }
        };
        // CV 0 and Jain 1 on an empty fleet would pass any bound: no skew figure can be
        // judged when no sandbox is on any node at the end of the run.
        let skew = |f: fn(&RunResult) -> f64| {
            if run.skew.counts.is_empty() {
                Err("no per-node counts in this run".to_string())
            } else if run.skew.counts.iter().all(|&c| c == 0) {
                Err(format!(
                    "no sandbox on any node at the end of the run ({} of {} creates \
                     placed): skew cannot be judged on an empty fleet",
                    run.ok, run.requests
                ))
            } else {
                Ok(f(run))
            }
        };
        bounded(&mut out, "cv", &c.cv, skew(|r| r.skew.cv));
        bounded(
            &mut out,
            "max_over_mean",
            &c.max_over_mean,
            skew(|r| r.skew.max_over_mean),
        );
        bounded(&mut out, "jain", &c.jain, skew(|r| r.skew.jain));
        let error_rate = if run.requests == 0 {
            Err("no requests were sent".to_string())
        } else {
            Ok(run.error_rate)
        };
        bounded(&mut out, "error_rate", &c.error_rate, error_rate);
        if let Some(l) = &c.p99_latency {
            let bound = Bound {
                min: None,
                max: Some(l.max.as_secs_f64() * 1000.0),
            };
            let actual = if run.latency.count == 0 {
                Err("no latency samples".to_string())
            } else {
                Ok(run.latency.p99_ms)
            };
            let mut o = check_bound(&run.label, "p99_latency", &bound, actual);
            o.bound = format!("<= {}", humantime::format_duration(round_ms(l.max)));
            out.push(o);
        }
        let finding = |pick: fn(&super::model::CheckerResult) -> u64, name: &str| match &run.checker
        {
            Some(ch) => Ok(pick(ch) as f64),
            None => Err(format!(
                "no checker result in this run: `{name}` cannot be checked"
            )),
        };
        bounded(
            &mut out,
            "lost",
            &c.lost,
            finding(|ch| ch.lost.count, "lost"),
        );
        bounded(
            &mut out,
            "duplicated",
            &c.duplicated,
            finding(|ch| ch.duplicated.count, "duplicated"),
        );
        let limited = if run.requests == 0 {
            Err("no requests were sent".to_string())
        } else {
            Ok(super::staging::limited_count(&run.statuses) as f64 / run.requests as f64)
        };
        bounded(&mut out, "limited", &c.limited, limited);
        let cancelled = run.statuses.get(CANCELLED_KEY).copied().unwrap_or(0) as f64;
        bounded(&mut out, "cancelled", &c.cancelled, Ok(cancelled));
        over_time(&mut out, &c, run);
    }
    out
}

/// The skew-over-time and retry-storm checks of `run`.
fn over_time(out: &mut Vec<CheckOutcome>, c: &Checks, run: &RunResult) {
    let o = run.skew_over_time.as_ref();
    let none = || "no skew over time in this run (no timeline sample)".to_string();
    let placed = match o {
        None => Err(none()),
        Some(o) if o.placements.counts.iter().all(|&n| n == 0) => {
            Err("no create landed on any node: placements skew cannot be judged".to_string())
        }
        Some(o) => Ok(o.placements.cv),
    };
    let steady = |f: fn(&super::SkewOverTime) -> f64| match o {
        None => Err(none()),
        Some(o) if o.steady_samples == 0 => {
            Err("no sample with a sandbox running: no steady window".to_string())
        }
        Some(o) => Ok(f(o)),
    };
    let storm = match &run.retry_storm {
        Some(r) => Ok(r.peak_per_second as f64),
        None if run.retries == 0 => Ok(0.0),
        None => Err(format!(
            "{} retries counted, but not per second in this run",
            run.retries
        )),
    };
    for (name, bound, actual) in [
        ("placements_cv", &c.placements_cv, placed),
        (
            "running_cv_mean",
            &c.running_cv_mean,
            steady(|o| o.running_cv_mean),
        ),
        (
            "running_cv_peak",
            &c.running_cv_peak,
            steady(|o| o.running_cv_peak),
        ),
        ("retries_per_s_peak", &c.retries_per_s_peak, storm),
    ] {
        if let Some(b) = bound {
            out.push(check_bound(&run.label, name, b, actual));
        }
    }
}

/// The checks that apply to `run`: the shared ones, then its `k`'s, its mode's, and its
/// mode's `k`'s overrides, each replacing the checks it names.
fn effective(checks: &Checks, run: &RunResult) -> Checks {
    let mode: Option<AccountingMode> = run.setting("accounting").and_then(|m| m.parse().ok());
    let k: Option<usize> = run.setting("k").and_then(|k| k.parse().ok());
    let by_k = |c: &Checks| k.and_then(|k| c.per_k.get(&k)).cloned();
    let by_mode = mode.and_then(|m| checks.per_mode.get(&m));
    let layers = [by_k(checks), by_mode.cloned(), by_mode.and_then(by_k)];
    layers
        .into_iter()
        .flatten()
        .fold(flat(checks), |base, o| overlay(&base, &o))
}

/// `c` without its overrides.
fn flat(c: &Checks) -> Checks {
    Checks {
        per_mode: Default::default(),
        per_k: Default::default(),
        ..c.clone()
    }
}

/// `base` with every check `o` names replaced.
fn overlay(base: &Checks, o: &Checks) -> Checks {
    Checks {
        cv: o.cv.or(base.cv),
        max_over_mean: o.max_over_mean.or(base.max_over_mean),
        jain: o.jain.or(base.jain),
        error_rate: o.error_rate.or(base.error_rate),
        p99_latency: o.p99_latency.or(base.p99_latency),
        lost: o.lost.or(base.lost),
        duplicated: o.duplicated.or(base.duplicated),
        limited: o.limited.or(base.limited),
        cancelled: o.cancelled.or(base.cancelled),
        placements_cv: o.placements_cv.or(base.placements_cv),
        running_cv_mean: o.running_cv_mean.or(base.running_cv_mean),
        running_cv_peak: o.running_cv_peak.or(base.running_cv_peak),
        retries_per_s_peak: o.retries_per_s_peak.or(base.retries_per_s_peak),
        per_mode: Default::default(),
        per_k: Default::default(),
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis().min(u128::from(u64::MAX)) as u64)
}

/// `>= 0.9, <= 1` style text of a bound.
pub fn bound_text(b: &Bound) -> String {
    let mut parts = Vec::new();
    if let Some(min) = b.min {
        parts.push(format!(">= {min}"));
    }
    if let Some(max) = b.max {
        parts.push(format!("<= {max}"));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn check_bound(run: &str, name: &str, b: &Bound, actual: Result<f64, String>) -> CheckOutcome {
    let bound = bound_text(b);
    let (actual, passed, message) = match actual {
        Err(why) => (None, false, format!("{name}: {why}")),
        Ok(x) if !x.is_finite() => (Some(x), false, format!("{name} is not a finite number")),
        Ok(x) => {
            if let Some(min) = b.min.filter(|&m| x < m) {
                (Some(x), false, format!("{name} {} < min {min}", fmt(x)))
            } else if let Some(max) = b.max.filter(|&m| x > m) {
                (Some(x), false, format!("{name} {} > max {max}", fmt(x)))
            } else {
                (Some(x), true, format!("{name} {} within {bound}", fmt(x)))
            }
        }
    };
    CheckOutcome {
        run: run.to_string(),
        check: name.to_string(),
        bound,
        actual,
        passed,
        message,
    }
}

fn fmt(x: f64) -> String {
    format!("{x:.4}")
}
