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
    get: fn(&RunResult) -> f64,
}

/// The figures compared, in output order. Floors: CV and Jain 0.01, max/mean 0.05,
/// error rate 0.001 (0.1 point), p99 5 ms.
const METRICS: [Metric; 5] = [
    Metric {
        name: "cv",
        lower_is_better: true,
        floor: 0.01,
        get: |r| r.skew.cv,
    },
    Metric {
        name: "max_over_mean",
        lower_is_better: true,
        floor: 0.05,
        get: |r| r.skew.max_over_mean,
    },
    Metric {
        name: "jain",
        lower_is_better: false,
        floor: 0.01,
        get: |r| r.skew.jain,
    },
    Metric {
        name: "error_rate",
        lower_is_better: true,
        floor: 0.001,
        get: |r| r.error_rate,
    },
    Metric {
        name: "p99_ms",
        lower_is_better: true,
        floor: 5.0,
        get: |r| r.latency.p99_ms,
    },
];

/// Result of comparing report B against baseline A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Profile of A.
    pub a_profile: String,
    /// Profile of B.
    pub b_profile: String,
    /// Relative tolerance used (0.1 = 10%).
    pub tolerance: f64,
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
    /// The run label.
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

/// Compare B against baseline A, pairing runs by label. `tolerance` is relative
/// (0.1 = B may be 10% worse); a small absolute floor per figure keeps noise on tiny
/// values (CV 0.010 -> 0.012) from counting as a regression.
pub fn compare(a: &Report, b: &Report, tolerance: f64) -> Comparison {
    let tolerance = if tolerance.is_finite() {
        tolerance.max(0.0)
    } else {
        0.0
    };
    let mut runs = Vec::new();
    let mut missing_in_b = Vec::new();
    for ra in &a.runs {
        let Some(rb) = b.run(&ra.label) else {
            missing_in_b.push(ra.label.clone());
            continue;
        };
        let deltas: Vec<Delta> = METRICS
            .iter()
            .map(|m| {
                let (va, vb) = ((m.get)(ra), (m.get)(rb));
                let worse_by = if m.lower_is_better { vb - va } else { va - vb };
                let allowed = (tolerance * va.abs()).max(m.floor);
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
        .map(|r| r.label.clone())
        .collect();
    Comparison {
        a_profile: a.profile.clone(),
        b_profile: b.profile.clone(),
        tolerance,
        regressed: !missing_in_b.is_empty() || runs.iter().any(|r| r.regressed),
        runs,
        missing_in_b,
        new_in_b,
    }
}

/// Print a comparison as a table plus a verdict line.
pub fn write_comparison(c: &Comparison, mut w: impl Write) -> io::Result<()> {
    writeln!(
        w,
        "compare {} (A) -> {} (B), tolerance {:.1}%",
        c.a_profile,
        c.b_profile,
        c.tolerance * 100.0
    )?;
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
