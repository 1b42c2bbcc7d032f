//! `stampede compare A B`: per-run deltas of two reports and a regression verdict.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use tabled::builder::Builder;
use tabled::settings::Style;

use super::model::{Report, RunResult};

/// A compared figure: its name, which direction is better, and the absolute change
/// below which a difference is noise whatever the relative tolerance says.
struct Metric {
    name: &'static str,
    lower_is_better: bool,
    floor: f64,
    /// Judged with the latency tolerance rather than the figures' one.
    latency: bool,
    get: fn(&RunResult) -> f64,
}

/// The figures compared, in output order. Floors: CV and Jain 0.01, max/mean 0.05,
/// error rate 0.001 (0.1 point), p99 5 ms.
const METRICS: [Metric; 5] = [
    Metric {
        name: "cv",
        lower_is_better: true,
        floor: 0.01,
        latency: false,
        get: |r| r.skew.cv,
    },
    Metric {
        name: "max_over_mean",
        lower_is_better: true,
        floor: 0.05,
        latency: false,
        get: |r| r.skew.max_over_mean,
    },
    Metric {
        name: "jain",
        lower_is_better: false,
        floor: 0.01,
        latency: false,
        get: |r| r.skew.jain,
    },
    Metric {
        name: "error_rate",
        lower_is_better: true,
        floor: 0.001,
        latency: false,
        get: |r| r.error_rate,
    },
    Metric {
        name: "p99_ms",
        lower_is_better: true,
        floor: 5.0,
        latency: true,
        get: |r| r.latency.p99_ms,
    },
];

/// Relative tolerance of `p99_ms` by default: B's p99 may be up to 4x A's. The same
/// embedded nightly run ten times on a 2-core machine at load 8.7 spread its p99 over
/// 22-66 ms, a largest ratio of 2.95 between two runs (docs/benchmarks.md, "p99 from
/// run to run"); 4x leaves room over that. The skew figures, which do not depend on the
/// runner's load, keep the tight tolerance.
pub const DEFAULT_LATENCY_TOLERANCE: f64 = 3.0;

/// Relative tolerance of every figure but latency by default (0.1 = 10%).
pub const DEFAULT_TOLERANCE: f64 = 0.1;

/// How `stampede compare` judges B against A.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// Relative tolerance of the skew figures and the error rate (0.1 = 10% worse).
    pub tolerance: f64,
    /// Relative tolerance of latency (`p99_ms`).
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
}

/// Result of comparing report B against baseline A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Profile of A.
    pub a_profile: String,
    /// Profile of B.
    pub b_profile: String,
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
    /// True when any figure regressed or a run is missing in B.
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

/// One figure in A and B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// Figure name (`cv`, `max_over_mean`, `jain`, `error_rate`, `p99_ms`).
    pub metric: String,
    /// Value in A.
    pub a: f64,
    /// Value in B.
    pub b: f64,
    /// b - a.
    pub delta: f64,
    /// B is worse than A by more than max(tolerance * |a|, the figure's floor).
    pub regressed: bool,
}

/// Compare B against baseline A, pairing runs by label; an external run of B (against
/// an API stampede did not start) that A lacks is paired with `opts.baseline_run`, or
/// with A's only run. Tolerances are relative (0.1 = B may be 10% worse); a small
/// absolute floor per figure keeps noise on tiny values (CV 0.010 -> 0.012) from
/// counting as a regression.
pub fn compare(a: &Report, b: &Report, opts: &CompareOptions) -> Result<Comparison, CompareError> {
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
        let deltas: Vec<Delta> = METRICS
            .iter()
            .map(|m| {
                let (va, vb) = ((m.get)(ra), (m.get)(rb));
                let worse_by = if m.lower_is_better { vb - va } else { va - vb };
                let t = if m.latency {
                    latency_tolerance
                } else {
                    tolerance
                };
                let allowed = (t * va.abs()).max(m.floor);
                Delta {
                    metric: m.name.to_string(),
                    a: va,
                    b: vb,
                    delta: vb - va,
                    regressed: !vb.is_finite() || worse_by > allowed,
                }
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
    Ok(Comparison {
        a_profile: a.profile.clone(),
        b_profile: b.profile.clone(),
        tolerance,
        latency_tolerance,
        regressed: !missing_in_b.is_empty() || runs.iter().any(|r| r.regressed),
        mapped,
        not_compared,
        runs,
        missing_in_b,
        new_in_b,
    })
}

/// (B's external run, A's run it stands for), when B is one external run that A lacks.
fn external_pairing(
    a: &Report,
    b: &Report,
    opts: &CompareOptions,
) -> Result<Option<(String, String)>, CompareError> {
    let [rb] = b.runs.as_slice() else {
        return Ok(None);
    };
    if rb.staging.is_none() || a.run(&rb.label).is_some() {
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

/// Print a comparison as a table plus a verdict line.
pub fn write_comparison(c: &Comparison, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "compare {} (A) -> {} (B), tolerance {:.1}% (latency {:.0}%)",
        c.a_profile,
        c.b_profile,
        c.tolerance * 100.0,
        c.latency_tolerance * 100.0
    )?;
    if let Some((ext, base)) = &c.mapped {
        writeln!(
            w,
            "B's run `{ext}` (external API) compared as A's run `{base}`"
        )?;
    }
    let mut t = Builder::default();
    t.push_record(["run", "figure", "A", "B", "delta", "verdict"]);
    for r in &c.runs {
        for d in &r.deltas {
            t.push_record([
                r.label.clone(),
                d.metric.clone(),
                format!("{:.4}", d.a),
                format!("{:.4}", d.b),
                format!("{:+.4}", d.delta),
                if d.regressed {
                    "REGRESSED".into()
                } else {
                    "ok".to_string()
                },
            ]);
        }
    }
    let mut table = t.build();
    table.with(Style::sharp());
    writeln!(w, "{table}")?;
    for l in &c.missing_in_b {
        writeln!(w, "run `{l}` is in A but missing in B: REGRESSED")?;
    }
    for l in &c.not_compared {
        writeln!(w, "run `{l}` of A not compared (B is one external run)")?;
    }
    for l in &c.new_in_b {
        writeln!(w, "run `{l}` is new in B (not compared)")?;
    }
    writeln!(
        w,
        "{}",
        if c.regressed {
            "result: B REGRESSED against A"
        } else {
            "result: no regression"
        }
    )
}
