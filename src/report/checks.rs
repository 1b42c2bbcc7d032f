//! A profile's `checks:` evaluated against a finished report. A figure the report
//! lacks fails its check with a message saying so: a guard must never pass silently.
//! So does a skew figure (cv, max_over_mean, jain) of a run that ends with no sandbox
//! on any node: CV 0 and Jain 1 of nothing are not an even spread.

use std::time::Duration;

use crate::profile::{Bound, CheckId, Checks, SetBound, CHECKS};

use super::model::{CheckOutcome, Figure, Report, RunResult};
use super::staging::CANCELLED_KEY;

/// Evaluate `checks` on every run of `report`, in run order then in the order of
/// [`CHECKS`]. A run whose accounting mode is listed under `per_mode`
/// (or whose `settings.k` is listed under `per_k`) uses those checks in place of the
/// shared ones they name.
pub fn evaluate(checks: &Checks, report: &Report) -> Vec<CheckOutcome> {
    let mut out = Vec::new();
    for run in &report.runs {
        let c = effective(checks, run);
        for def in &CHECKS {
            match (def.get)(&c) {
                Some(SetBound::Figure(b)) => {
                    out.push(check_bound(&run.label, def.name, &b, figure(def.id, run)));
                }
                Some(SetBound::Latency(l)) => {
                    let bound = Bound {
                        min: None,
                        max: Some(l.max.as_secs_f64() * 1000.0),
                    };
                    let mut o = check_bound(&run.label, def.name, &bound, figure(def.id, run));
                    o.bound = format!("<= {}", humantime::format_duration(round_ms(l.max)));
                    out.push(o);
                }
                None => {}
            }
        }
    }
    out
}

/// The figure check `id` judges in `run` (milliseconds for a latency), or why the run
/// has none. A figure that would pass any bound vacuously is refused: CV 0 and Jain 1 of
/// an empty fleet are not an even spread.
pub(super) fn figure(id: CheckId, run: &RunResult) -> Result<f64, String> {
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
    let per_request = |x: f64| {
        if run.requests == 0 {
            Err("no requests were sent".to_string())
        } else {
            Ok(x)
        }
    };
    let finding = |pick: fn(&super::model::SetAudit) -> u64, name: &str| match &run.set_audit {
        Some(ch) => Ok(pick(ch) as f64),
        None => Err(format!(
            "no set audit in this run: `{name}` cannot be checked"
        )),
    };
    let o = run.skew_over_time.as_ref();
    let none = || "no skew over time in this run (no timeline sample)".to_string();
    let steady = |f: fn(&super::SkewOverTime) -> f64| match o {
        None => Err(none()),
        Some(o) if o.steady_samples == 0 => {
            Err("no sample with a sandbox running: no steady window".to_string())
        }
        Some(o) => Ok(f(o)),
    };
    match id {
        CheckId::Cv => skew(|r| r.skew.cv),
        CheckId::MaxOverMean => skew(|r| r.skew.max_over_mean),
        CheckId::Jain => skew(|r| r.skew.jain),
        CheckId::ErrorRate => per_request(run.error_rate),
        CheckId::P99Latency => {
            if run.latency.count == 0 {
                Err("no latency samples".to_string())
            } else {
                Ok(run.latency.p99_ms)
            }
        }
        CheckId::Lost => finding(|ch| ch.lost.count, "lost"),
        CheckId::Duplicated => finding(|ch| ch.duplicated.count, "duplicated"),
        CheckId::Limited => per_request(
            super::staging::limited_count(&run.statuses) as f64 / run.requests.max(1) as f64,
        ),
        CheckId::Cancelled => Ok(run.statuses.get(CANCELLED_KEY).copied().unwrap_or(0) as f64),
        CheckId::PlacementsCv => match o {
            _ if !run.measured(Figure::Placements) => Err(
                "placements are not measured in this run (the API's answers do not name the node)"
                    .to_string(),
            ),
            None => Err(none()),
            Some(o) if o.placements.counts.iter().all(|&n| n == 0) => {
                Err("no create landed on any node: placements skew cannot be judged".to_string())
            }
            Some(o) => Ok(o.placements.cv),
        },
        CheckId::RunningCvMean => steady(|o| o.running_cv_mean),
        CheckId::RunningCvPeak => steady(|o| o.running_cv_peak),
        CheckId::RetriesPerSPeak if !run.measured(Figure::Retries) => {
            Err("retries are not measured in this run (the API exposes no retry counter)".into())
        }
        CheckId::AccountingError => match &run.accounting_error {
            Some(a) => Ok(a.mean_abs_vcpu),
            None => Err(
                "no accounting error in this run (the service's beliefs were not \
                 read)"
                    .to_string(),
            ),
        },
        CheckId::RetriesPerSPeak => match &run.retry_storm {
            Some(r) => Ok(r.peak_per_second as f64),
            None if run.retries == 0 => Ok(0.0),
            None => Err(format!(
                "{} retries counted, but not per second in this run",
                run.retries
            )),
        },
    }
}

/// The checks that apply to `run`: the shared ones, then its `k`'s, its mode's, and its
/// mode's `k`'s overrides, each replacing the checks it names.
fn effective(checks: &Checks, run: &RunResult) -> Checks {
    let mode = run.settings.accounting;
    let k = run.settings.k;
    let by_k = |c: &Checks| k.and_then(|k| c.per_k.get(&k)).cloned();
    let by_mode = mode.and_then(|m| checks.per_mode.get(&m));
    let layers = [by_k(checks), by_mode.cloned(), by_mode.and_then(by_k)];
    layers
        .into_iter()
        .flatten()
        .fold(checks.overlaid(&Checks::default()), |base, o| {
            base.overlaid(&o)
        })
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

/// `>= 0.9, <= 1` as `[0.9, 1]`; a latency's `<= 5s` in ms.
pub(super) fn bound_values(bound: &str, unit: &str) -> Vec<f64> {
    bound
        .split(',')
        .filter_map(|part| {
            let v = part.trim().trim_start_matches(['<', '>', '=']).trim();
            if unit == "ms" {
                humantime::parse_duration(v)
                    .ok()
                    .map(|d| d.as_secs_f64() * 1000.0)
                    .or_else(|| v.parse().ok())
            } else {
                v.parse().ok()
            }
        })
        .collect()
}
