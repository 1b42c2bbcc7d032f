//! `stampede compare BASELINE... B`: B's figures against the baseline's, on every figure
//! the profile guards, and a regression verdict.
//!
//! The figures compared for a run are those its profile checks in the baseline (every
//! entry of A's `checks` for that run, e.g. `running_cv_mean` and `accounting_error`),
//! plus error rate and p99 latency always, plus the end-of-run skew (CV, max/mean, Jain)
//! when A's run ends with sandboxes on its nodes (with lifetimes the fleet ends empty
//! and those figures say nothing). B regresses on a figure when it is worse than the
//! baseline by more than `max(tolerance x |baseline|, floor)`; a baseline of several
//! reports is judged by its worst value, and its spread (worst - best) widens the margin.
//! A B that failed its own checks or is incomplete never compares as "no regression".

use serde::{Deserialize, Serialize};

use crate::profile::{CheckId, CHECKS};

use super::checks::figure;
use super::model::{Report, RunResult};

/// How a figure is judged: which way is better, the absolute change below which a
/// difference is noise, and which tolerance applies.
struct Judge {
    lower_is_better: bool,
    floor: f64,
    latency: bool,
}

/// The judgement of each check's figure. Floors are the smallest change that means
/// something at the figure's scale (an assumption, stated here once): CV-like figures
/// 0.01 (max/mean 0.05, a running peak 0.02), fractions of creates 0.001 (0.1 point),
/// latency 5 ms, accounting error 0.1 vCPU, a peak of retries 1/s; counts of lost,
/// duplicated or cancelled sandboxes 0 (any increase counts).
fn judge(id: CheckId) -> Judge {
    let lower = |floor: f64| Judge {
        lower_is_better: true,
        floor,
        latency: false,
    };
    match id {
        CheckId::Cv | CheckId::PlacementsCv | CheckId::RunningCvMean => lower(0.01),
        CheckId::RunningCvPeak => lower(0.02),
        CheckId::MaxOverMean => lower(0.05),
        CheckId::Jain => Judge {
            lower_is_better: false,
            floor: 0.01,
            latency: false,
        },
        CheckId::ErrorRate | CheckId::Limited => lower(0.001),
        CheckId::P99Latency => Judge {
            lower_is_better: true,
            floor: 5.0,
            latency: true,
        },
        CheckId::Lost | CheckId::Duplicated | CheckId::Cancelled => lower(0.0),
        CheckId::RetriesPerSPeak => lower(1.0),
        CheckId::AccountingError => lower(0.1),
    }
}

/// Figures compared whether or not the profile checks them.
const ALWAYS: [CheckId; 2] = [CheckId::ErrorRate, CheckId::P99Latency];

/// End-of-run skew figures, compared when the baseline's run ends with sandboxes placed.
const FINAL_SKEW: [CheckId; 3] = [CheckId::Cv, CheckId::MaxOverMean, CheckId::Jain];

/// Relative tolerance of `p99_latency` by default: B's p99 may be up to 4x A's. The same
/// embedded nightly run ten times on a 2-core machine at load 8.7 spread its p99 over
/// 22-66 ms, a largest ratio of 2.95 between two runs (docs/benchmarks.md, "p99 from
/// run to run"); 4x leaves room over that. The other figures, which do not depend on
/// the runner's load, keep the tight tolerance.
pub const DEFAULT_LATENCY_TOLERANCE: f64 = 3.0;

/// Relative tolerance of every figure but latency by default (0.1 = 10%).
pub const DEFAULT_TOLERANCE: f64 = 0.1;

/// How `stampede compare` judges B against the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// Relative tolerance of every figure but latency (0.1 = 10% worse).
    pub tolerance: f64,
    /// Relative tolerance of latency (`p99_latency`).
    pub latency_tolerance: f64,
    /// A's run that B's external run stands for (its accounting mode, e.g.
    /// `reported`); needed only when A has several runs.
    pub baseline_run: Option<String>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            tolerance: DEFAULT_TOLERANCE,
            latency_tolerance: DEFAULT_LATENCY_TOLERANCE,
            baseline_run: None,
        }
    }
}

/// Why two reports cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// B's external run could stand for several of A's runs.
    #[error(
        "B's run `{external}` ran against an external API; A has several runs ({}): \
         name the one it stands for with --baseline-run",
        candidates.join(", ")
    )]
    Ambiguous {
        /// B's run.
        external: String,
        /// A's runs.
        candidates: Vec<String>,
    },
    /// `--baseline-run` names no run of A.
    #[error("--baseline-run `{0}`: A has no such run")]
    NoSuchRun(String),
    /// No baseline report was given.
    #[error("no baseline report to compare with")]
    NoBaseline,
}

/// Result of comparing report B against a baseline of one report or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Profile of A.
    pub a_profile: String,
    /// Profile of B.
    pub b_profile: String,
    /// Reports the baseline is made of.
    pub baseline_reports: usize,
    /// Relative tolerance used (0.1 = 10%).
    pub tolerance: f64,
    /// Relative tolerance used for latency.
    pub latency_tolerance: f64,
    /// (B's external run, A's run it was compared as).
    pub mapped: Option<(String, String)>,
    /// A's runs left out because B is one external run compared as another of them.
    pub not_compared: Vec<String>,
    /// Runs present in both, in A's order.
    pub runs: Vec<RunComparison>,
    /// Labels of A's runs that B lacks (a regression: the guard lost coverage).
    pub missing_in_b: Vec<String>,
    /// Labels of B's runs that A lacks (informational).
    pub new_in_b: Vec<String>,
    /// B's own failed checks, `run: message` (a regression whatever the figures say).
    pub b_failed_checks: Vec<String>,
    /// Why B is incomplete, when it is (a regression: its figures cover part of a run).
    pub b_incomplete: Option<String>,
    /// True when a figure regressed, a run is missing in B, B failed its own checks or
    /// B is incomplete.
    pub regressed: bool,
}

/// Deltas of one run present in both reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    /// The run label (A's).
    pub label: String,
    /// One entry per compared figure.
    pub deltas: Vec<Delta>,
    /// True when any figure regressed.
    pub regressed: bool,
}

/// One figure in the baseline and in B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// Figure name: the check's (`running_cv_mean`, `accounting_error`, `p99_latency`
    /// in ms, ...).
    pub metric: String,
    /// The baseline's value: its worst over the baseline's reports.
    pub a: f64,
    /// Worst minus best over the baseline's reports (0 for one report).
    pub spread: f64,
    /// Value in B; none when B lacks the figure (a regression: coverage lost).
    pub b: Option<f64>,
    /// b - a.
    pub delta: Option<f64>,
    /// How much worse than `a` B may be: max(tolerance x |a|, spread, floor).
    pub allowed: f64,
    /// B is worse than `a` by more than `allowed`, or lacks the figure.
    pub regressed: bool,
    /// Why B has no value, when it has none.
    pub note: Option<String>,
}

/// Compare B against baseline A, pairing runs by label; an external run of B (against
/// an API stampede did not start) that A lacks is paired with `opts.baseline_run`, or
/// with A's only run.
pub fn compare(a: &Report, b: &Report, opts: &CompareOptions) -> Result<Comparison, CompareError> {
    compare_with_baseline(std::slice::from_ref(a), b, opts)
}

/// Compare B against a baseline made of one report or several runs of the same profile
/// (`baseline[0]` gives the runs and checks; the others add their figures to the spread).
pub fn compare_with_baseline(
    baseline: &[Report],
    b: &Report,
    opts: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let a = baseline.first().ok_or(CompareError::NoBaseline)?;
    let clean = |t: f64| if t.is_finite() { t.max(0.0) } else { 0.0 };
    let (tolerance, latency_tolerance) = (clean(opts.tolerance), clean(opts.latency_tolerance));
    let mapped = external_pairing(a, b, opts)?;
    let mut runs = Vec::new();
    let mut missing_in_b = Vec::new();
    let mut not_compared = Vec::new();
    for ra in &a.runs {
        let rb = match &mapped {
            Some((ext, base)) if *base == ra.label => b.run(ext),
            Some(_) => {
                not_compared.push(ra.label.clone());
                continue;
            }
            None => b.run(&ra.label),
        };
        let Some(rb) = rb else {
            missing_in_b.push(ra.label.clone());
            continue;
        };
        let same_runs: Vec<&RunResult> = baseline.iter().filter_map(|r| r.run(&ra.label)).collect();
        let deltas: Vec<Delta> = compared_figures(a, ra)
            .into_iter()
            .filter_map(|id| {
                let t = if judge(id).latency {
                    latency_tolerance
                } else {
                    tolerance
                };
                delta(id, &same_runs, rb, t)
            })
            .collect();
        runs.push(RunComparison {
            label: ra.label.clone(),
            regressed: deltas.iter().any(|d| d.regressed),
            deltas,
        });
    }
    let new_in_b = b
        .runs
        .iter()
        .filter(|r| a.run(&r.label).is_none())
        .filter(|r| mapped.as_ref().is_none_or(|(ext, _)| *ext != r.label))
        .map(|r| r.label.clone())
        .collect();
    let b_failed_checks: Vec<String> = b
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{}: {}", c.run, c.message))
        .collect();
    let b_incomplete = b.incomplete.then(|| {
        b.incomplete_reason
            .clone()
            .unwrap_or_else(|| "unknown".into())
    });
    Ok(Comparison {
        a_profile: a.profile.clone(),
        b_profile: b.profile.clone(),
        baseline_reports: baseline.len(),
        tolerance,
        latency_tolerance,
        regressed: !missing_in_b.is_empty()
            || runs.iter().any(|r| r.regressed)
            || !b_failed_checks.is_empty()
            || b_incomplete.is_some(),
        mapped,
        not_compared,
        runs,
        missing_in_b,
        new_in_b,
        b_failed_checks,
        b_incomplete,
    })
}

/// The figures compared for A's run `ra`, in the order of [`CHECKS`]: those A's profile
/// checks on it, error rate and p99 always, the end-of-run skew when it is measurable.
fn compared_figures(a: &Report, ra: &RunResult) -> Vec<CheckId> {
    let checked = |name: &str| {
        a.checks
            .iter()
            .any(|c| c.run == ra.label && c.check == name)
    };
    CHECKS
        .iter()
        .filter(|d| {
            checked(d.name)
                || ALWAYS.contains(&d.id)
                || (FINAL_SKEW.contains(&d.id) && figure(d.id, ra).is_ok())
        })
        .map(|d| d.id)
        .collect()
}

/// One figure judged; none when no baseline report measured it.
fn delta(id: CheckId, baseline: &[&RunResult], rb: &RunResult, tolerance: f64) -> Option<Delta> {
    let j = judge(id);
    let name = CHECKS.iter().find(|d| d.id == id).map_or("?", |d| d.name);
    let values: Vec<f64> = baseline
        .iter()
        .filter_map(|r| figure(id, r).ok())
        .filter(|v| v.is_finite())
        .collect();
    let (lo, hi) = values
        .iter()
        .fold(None, |acc: Option<(f64, f64)>, &v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })?;
    let (a, spread) = (if j.lower_is_better { hi } else { lo }, hi - lo);
    let allowed = (tolerance * a.abs()).max(spread).max(j.floor);
    let (b, note) = match figure(id, rb) {
        Ok(v) => (Some(v), None),
        Err(why) => (None, Some(why)),
    };
    let regressed = match b {
        Some(v) if v.is_finite() => {
            let worse_by = if j.lower_is_better { v - a } else { a - v };
            worse_by > allowed
        }
        _ => true,
    };
    Some(Delta {
        metric: name.to_string(),
        a,
        spread,
        b,
        delta: b.map(|v| v - a),
        allowed,
        regressed,
        note,
    })
}

/// (B's run, A's run it stands for), when B is one run that A lacks: an external run,
/// or one named otherwise when `--baseline-run` names A's run or A has one run.
fn external_pairing(
    a: &Report,
    b: &Report,
    opts: &CompareOptions,
) -> Result<Option<(String, String)>, CompareError> {
    let [rb] = b.runs.as_slice() else {
        return Ok(None);
    };
    if a.run(&rb.label).is_some() {
        return Ok(None);
    }
    // A run of stampede's own services named otherwise (`optimistic` vs `reported`) is
    // paired when the pairing is unambiguous: `--baseline-run`, or A's only run.
    if rb.staging.is_none() && opts.baseline_run.is_none() && a.runs.len() != 1 {
        return Ok(None);
    }
    let base = match (&opts.baseline_run, a.runs.as_slice()) {
        (Some(l), _) if a.run(l).is_some() => l.clone(),
        (Some(l), _) => return Err(CompareError::NoSuchRun(l.clone())),
        (None, [only]) => only.label.clone(),
        (None, []) => return Ok(None),
        (None, many) => {
            return Err(CompareError::Ambiguous {
                external: rb.label.clone(),
                candidates: many.iter().map(|r| r.label.clone()).collect(),
            })
        }
    };
    Ok(Some((rb.label.clone(), base)))
}
