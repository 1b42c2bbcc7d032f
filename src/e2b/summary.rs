//! What `stampede e2b run` and `ab` report: per run E2B's counts beside the twin's and
//! their difference, per build the distribution, the twin over many phases, and for an
//! A/B the verdict. Rendering is a pure function of the summary into a writer.

use std::io::{self, Write};

use serde::Serialize;

use super::build::Built;
use super::trial::TrialResult;
use super::twin::TwinRun;
pub use crate::report::Spread;

/// One real run and its matched twin.
#[derive(Debug, Clone, Serialize)]
pub struct MatchedRun {
    /// The build (`REV:VARIANT`) or command.
    pub label: String,
    /// Index of the run within its build.
    pub run: usize,
    /// The real run.
    pub real: TrialResult,
    /// The twin at the phase the real run met (or asked, when not measured).
    pub twin: Option<TwinRun>,
    /// Sum over nodes of |real - twin| placements.
    pub diff: Option<u64>,
}

impl MatchedRun {
    /// Pairs a real run with its twin.
    pub fn new(label: String, run: usize, real: TrialResult, twin: Option<TwinRun>) -> Self {
        let diff = twin.as_ref().and_then(|t| {
            (t.placed.len() == real.nodes.len()).then(|| {
                t.placed
                    .iter()
                    .zip(real.placed())
                    .map(|(a, b)| a.abs_diff(b))
                    .sum()
            })
        });
        MatchedRun {
            label,
            run,
            real,
            twin,
            diff,
        }
    }

    /// The run's result in one line, printed as it finishes.
    pub fn one_line(&self) -> String {
        let phase = self
            .real
            .phase_s
            .map(|p| format!("{p:.1} s ({})", self.real.phase_from))
            .unwrap_or_else(|| "not measured".into());
        let twin = self
            .twin
            .as_ref()
            .map(|t| format!("twin CV {} ({})", f3(t.cv), counts(&t.placed)))
            .unwrap_or_else(|| "no twin".into());
        let probe = self
            .real
            .probe
            .as_ref()
            .map(|p| {
                format!(
                    "; commit lag p50/p95/max {:.1}/{:.1}/{:.1} ms, figure age p50/p95 {:.1}/{:.1} ms, {} stale commits",
                    p.commit_lag_ms.p50, p.commit_lag_ms.p95, p.commit_lag_ms.max, p.figure_age_ms.p50, p.figure_age_ms.p95, p.stale_commits
                )
            })
            .unwrap_or_default();
        format!(
            "run {} of {}: CV {} ({}), {twin}; phase met {phase}; p50/p99 {:.0}/{:.0} ms{probe}",
            self.run + 1,
            self.label,
            f3(self.real.cv),
            counts(&self.real.placed()),
            self.real.p50_ms,
            self.real.p99_ms,
        )
    }
}

/// One build's runs, summarised.
#[derive(Debug, Clone, Serialize)]
pub struct BuildSummary {
    /// The build (`REV:VARIANT`) or command.
    pub label: String,
    /// The stampede mode it behaves as.
    pub mode: String,
    /// CV of per-node placements over its real runs.
    pub cv: Spread,
    /// Least per-node placements over its runs.
    pub placed_min: u64,
    /// Most per-node placements over its runs.
    pub placed_max: u64,
    /// Node refusals per run.
    pub refusals: Spread,
    /// Latency p50 per run, ms.
    pub p50_ms: Spread,
    /// Latency p99 per run, ms.
    pub p99_ms: Spread,
    /// The matched twins' CV.
    pub twin_cv: Spread,
    /// The matched twins' refusals.
    pub twin_refusals: Spread,
    /// Sum of per-node differences to the twin, per run.
    pub diff: Spread,
    /// The twin over phases spread evenly across the sync cycle.
    pub twin_over_phases: Spread,
}

impl BuildSummary {
    /// Summarises `runs` (all of one build) and the twin's phase sweep.
    pub fn new(label: &str, mode: &str, runs: &[&MatchedRun], phases: &[TwinRun]) -> Self {
        let real = |f: &dyn Fn(&TrialResult) -> f64| {
            Spread::of(&runs.iter().map(|r| f(&r.real)).collect::<Vec<_>>())
        };
        let twins: Vec<&TwinRun> = runs.iter().filter_map(|r| r.twin.as_ref()).collect();
        BuildSummary {
            label: label.to_string(),
            mode: mode.to_string(),
            cv: real(&|r| r.cv),
            placed_min: runs.iter().flat_map(|r| r.real.placed()).min().unwrap_or(0),
            placed_max: runs.iter().flat_map(|r| r.real.placed()).max().unwrap_or(0),
            refusals: real(&|r| r.refusals() as f64),
            p50_ms: real(&|r| r.p50_ms),
            p99_ms: real(&|r| r.p99_ms),
            twin_cv: Spread::of(&twins.iter().map(|t| t.cv).collect::<Vec<_>>()),
            twin_refusals: Spread::of(&twins.iter().map(|t| t.refusals as f64).collect::<Vec<_>>()),
            diff: Spread::of(
                &runs
                    .iter()
                    .filter_map(|r| r.diff)
                    .map(|d| d as f64)
                    .collect::<Vec<_>>(),
            ),
            twin_over_phases: Spread::of(&phases.iter().map(|t| t.cv).collect::<Vec<_>>()),
        }
    }
}

/// The A/B verdict: head regressed when its mean CV exceeds base's mean by more than
/// three of base's sample standard deviations plus 0.01 (the 0.01 keeps a base whose
/// runs agree exactly from failing on noise).
#[derive(Debug, Clone, Serialize)]
pub struct AbVerdict {
    /// Base's label.
    pub base: String,
    /// Head's label.
    pub head: String,
    /// Base's mean CV.
    pub base_cv: f64,
    /// Base's CV standard deviation.
    pub base_sd: f64,
    /// Head's mean CV.
    pub head_cv: f64,
    /// The bound head's mean is held to.
    pub bound: f64,
    /// Whether head regressed.
    pub regressed: bool,
    /// How the bound is made, in words.
    pub rule: String,
}

/// Standard deviations of base's spread the bound allows.
pub const AB_SIGMAS: f64 = 3.0;
/// Absolute CV added to the bound.
pub const AB_FLOOR: f64 = 0.01;

impl AbVerdict {
    /// Judges `head` against `base`.
    pub fn judge(base: &BuildSummary, head: &BuildSummary) -> Self {
        let bound = base.cv.mean + AB_SIGMAS * base.cv.sample_sd + AB_FLOOR;
        AbVerdict {
            base: base.label.clone(),
            head: head.label.clone(),
            base_cv: base.cv.mean,
            base_sd: base.cv.sample_sd,
            head_cv: head.cv.mean,
            bound,
            regressed: head.cv.mean > bound,
            rule: format!(
                "head's mean CV of per-node placements <= base's mean + {AB_SIGMAS} x base's sample sd + {AB_FLOOR} (base over {} runs)",
                base.cv.n
            ),
        }
    }
}

/// Everything a `stampede e2b` verb measured.
#[derive(Debug, Clone, Serialize)]
pub struct E2bSummary {
    /// The profile.
    pub profile: String,
    /// The fleet seed mock-node and the twin used.
    pub fleet_seed: u64,
    /// When the verb started (UTC).
    pub started_at: String,
    /// The builds.
    pub builds: Vec<Built>,
    /// Every run with its twin, in run order.
    pub runs: Vec<MatchedRun>,
    /// Per build.
    pub summaries: Vec<BuildSummary>,
    /// The A/B verdict, for `ab`.
    pub verdict: Option<AbVerdict>,
}

fn f3(x: f64) -> String {
    format!("{x:.3}")
}

fn spread3(s: &Spread) -> String {
    if s.n == 0 {
        return "-".into();
    }
    format!(
        "{:.3} ± {:.3} ({:.3}..{:.3})",
        s.mean, s.sample_sd, s.min, s.max
    )
}

fn spread0(s: &Spread) -> String {
    if s.n == 0 {
        return "-".into();
    }
    format!("{:.0} ({:.0}..{:.0})", s.mean, s.min, s.max)
}

fn mean_median0(s: &Spread) -> String {
    if s.n == 0 {
        return "-".into();
    }
    format!(
        "{:.0} / {:.0} ({:.0}..{:.0})",
        s.mean, s.median, s.min, s.max
    )
}

fn counts(xs: &[u64]) -> String {
    xs.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
}

/// The summary as Markdown.
pub fn write_markdown(s: &E2bSummary, mut w: impl Write) -> io::Result<()> {
    writeln!(w, "# stampede e2b: {}\n", s.profile)?;
    writeln!(
        w,
        "Started {}; fleet seed {}.\n",
        s.started_at, s.fleet_seed
    )?;
    if !s.builds.is_empty() {
        writeln!(
            w,
            "| build | commit | as committed | built | mode | stand-ins |"
        )?;
        writeln!(w, "|---|---|---|---|---|---|")?;
        for b in &s.builds {
            writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} |",
                b.label(),
                &b.commit[..12.min(b.commit.len())],
                b.committed,
                b.built,
                b.mode,
                if b.stand_ins.is_empty() {
                    "none".into()
                } else {
                    b.stand_ins.join(", ")
                }
            )?;
        }
        writeln!(w)?;
    }
    writeln!(
        w,
        "## Runs: the API's placements (mock-node's `creates_ok`) beside the twin's\n"
    )?;
    writeln!(w, "| build | run | phase s (asked / met) | real per node | twin per node | sum of differences | real CV | twin CV | refusals real / twin | p50 / p99 ms | node arrivals from the first, p5 / p50 / p95 / last ms |")?;
    writeln!(w, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for r in &s.runs {
        let t = r.twin.as_ref();
        writeln!(
            w,
            "| {} | {} | {:.1} / {} | {} | {} | {} | {} | {} | {} / {} | {:.0} / {:.0} | {} |",
            r.label,
            r.run + 1,
            r.real.target_phase_s,
            r.real
                .phase_s
                .map(|p| format!("{p:.1}"))
                .unwrap_or_else(|| "not measured".into()),
            counts(&r.real.placed()),
            t.map(|t| counts(&t.placed)).unwrap_or_else(|| "-".into()),
            r.diff.map(|d| d.to_string()).unwrap_or_else(|| "-".into()),
            f3(r.real.cv),
            t.map(|t| f3(t.cv)).unwrap_or_else(|| "-".into()),
            r.real.refusals(),
            t.map(|t| t.refusals.to_string())
                .unwrap_or_else(|| "-".into()),
            r.real.p50_ms,
            r.real.p99_ms,
            r.real
                .arrivals
                .as_ref()
                .map(|a| format!(
                    "{:.0} / {:.0} / {:.0} / {:.0}",
                    a.p5_ms, a.p50_ms, a.p95_ms, a.span_ms
                ))
                .unwrap_or_else(|| "-".into()),
        )?;
    }
    write_probe(s, &mut w)?;
    writeln!(w, "\n## Per build\n")?;
    writeln!(w, "| build | mode | runs | CV mean ± sd (min..max) | per node min..max | refusals per run | p50 ms | p99 ms | matched twin CV | sum of differences per run, mean / median (min..max) | twin CV over 20 phases |")?;
    writeln!(w, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for b in &s.summaries {
        writeln!(
            w,
            "| {} | {} | {} | {} | {}..{} | {} | {} | {} | {} | {} | {} |",
            b.label,
            b.mode,
            b.cv.n,
            spread3(&b.cv),
            b.placed_min,
            b.placed_max,
            spread0(&b.refusals),
            spread0(&b.p50_ms),
            spread0(&b.p99_ms),
            spread3(&b.twin_cv),
            mean_median0(&b.diff),
            spread3(&b.twin_over_phases),
        )?;
    }
    if let Some(v) = &s.verdict {
        writeln!(w, "\n## Verdict\n")?;
        writeln!(
            w,
            "{}: head `{}` mean CV {:.3} against base `{}` {:.3} ± {:.3}; bound {:.3}. Rule: {}.",
            if v.regressed {
                "REGRESSED"
            } else {
                "NO REGRESSION"
            },
            v.head,
            v.head_cv,
            v.base,
            v.base_cv,
            v.base_sd,
            v.bound,
            v.rule
        )?;
    }
    Ok(())
}

/// The A/B verdict as JUnit XML (one suite, one case).
pub fn write_junit(v: &AbVerdict, mut w: impl Write) -> io::Result<()> {
    use crate::report::junit::{attr, text};
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="stampede e2b ab" tests="1" failures="{}">"#,
        u8::from(v.regressed)
    )?;
    writeln!(
        w,
        r#"  <testsuite name="{}" tests="1" failures="{}">"#,
        attr(&format!("{} vs {}", v.head, v.base)),
        u8::from(v.regressed)
    )?;
    writeln!(
        w,
        r#"    <testcase classname="e2b.ab" name="cv_of_placements">"#
    )?;
    let figures = format!(
        "head `{}` mean CV {:.3} against base `{}` {:.3} ± {:.3}; bound {:.3}",
        v.head, v.head_cv, v.base, v.base_cv, v.base_sd, v.bound
    );
    if v.regressed {
        writeln!(
            w,
            r#"      <failure message="{}">{}</failure>"#,
            attr(&format!(
                "head mean CV {:.3} > bound {:.3}",
                v.head_cv, v.bound
            )),
            text(&v.rule)
        )?;
    }
    writeln!(
        w,
        "      <system-out>{}</system-out>",
        text(&format!("{figures}. Rule: {}.", v.rule))
    )?;
    writeln!(w, "    </testcase>\n  </testsuite>\n</testsuites>")
}

/// The probed runs' timings: the commit lag, the time in progress, the waves and the
/// syncs that landed in the workload.
fn write_probe(s: &E2bSummary, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let probed: Vec<_> = s
        .runs
        .iter()
        .filter_map(|r| r.real.probe.as_ref().map(|p| (r, p)))
        .collect();
    if probed.is_empty() {
        return Ok(());
    }
    let ms = |m: &super::probe_log::MsSpread| {
        if m.n == 0 {
            "-".to_string()
        } else {
            format!("{:.1} / {:.1} / {:.1} / {:.1}", m.p5, m.p50, m.p95, m.max)
        }
    };
    writeln!(
        w,
        "\n## The probe: E2B's time inside and after each decision\n"
    )?;
    writeln!(w, "Commit lag: from `chooseNode` reading its K scores to `StartPlacing` (the choice counting for the others). View age: from `chooseNode` starting to read them to `StartPlacing` (the oldest figure's age). Figure age: per decision, the mean of its K scores' ages at `StartPlacing`. In progress: from `StartPlacing` to the Create's return to the API. A stale commit went to a node that was no longer the best of its candidates, re-scored just before its mark. ms as p5 / p50 / p95 / max.\n")?;
    writeln!(w, "| build | run | commits | commit lag ms | view age ms | figure age ms | in progress ms | stale commits (top nodes) | syncs in the workload (node before→after vCPU, at ms) | sync round trip ms | dropped |")?;
    writeln!(w, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for (r, p) in probed {
        let waves: Vec<String> = p
            .waves
            .iter()
            .take(3)
            .map(|v| {
                format!(
                    "{} {} (lag p50 {:.0})",
                    v.node, v.stale_commits, v.lag_ms.p50
                )
            })
            .collect();
        let syncs: Vec<String> = p
            .syncs_in_workload
            .iter()
            .take(12)
            .map(|x| format!("{} {}→{} @{:.0}", x.node, x.before, x.after, x.at_ms))
            .collect();
        let more = p.syncs_in_workload.len().saturating_sub(12);
        writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} | {}{} | {}{} | {} | {} |",
            r.label,
            r.run + 1,
            p.commits,
            ms(&p.commit_lag_ms),
            ms(&p.view_age_ms),
            ms(&p.figure_age_ms),
            ms(&p.in_progress_ms),
            p.stale_commits,
            if waves.is_empty() {
                String::new()
            } else {
                format!(": {}", waves.join(", "))
            },
            if syncs.is_empty() {
                "none".to_string()
            } else {
                syncs.join("; ")
            },
            if more > 0 {
                format!(" (+{more})")
            } else {
                String::new()
            },
            ms(&p.sync_round_trip_ms),
            p.dropped,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(label: &str, cvs: &[f64]) -> BuildSummary {
        BuildSummary {
            label: label.into(),
            mode: "x".into(),
            cv: Spread::of(cvs),
            placed_min: 0,
            placed_max: 0,
            refusals: Spread::default(),
            p50_ms: Spread::default(),
            p99_ms: Spread::default(),
            twin_cv: Spread::default(),
            twin_refusals: Spread::default(),
            diff: Spread::default(),
            twin_over_phases: Spread::default(),
        }
    }

    #[test]
    fn a_herd_regresses_against_a_spread_base() {
        let base = build("base", &[0.05, 0.04, 0.06]);
        let herd = build("head", &[0.31, 0.29, 0.33]);
        let v = AbVerdict::judge(&base, &herd);
        assert!(v.regressed);
        assert!(
            (v.bound - (0.05 + 3.0 * 0.01 + 0.01)).abs() < 1e-9,
            "{}",
            v.bound
        );
        let same = build("head", &[0.05, 0.06, 0.05]);
        assert!(!AbVerdict::judge(&base, &same).regressed);
        let mut xml = Vec::new();
        write_junit(&v, &mut xml).unwrap();
        let xml = String::from_utf8(xml).unwrap();
        assert!(
            xml.contains(r#"failures="1""#) && xml.contains("<failure"),
            "{xml}"
        );
    }

    #[test]
    fn a_passing_verdicts_junit_still_carries_the_rule_and_the_figures() {
        let base = build("base", &[0.05, 0.04, 0.06]);
        let same = build("head", &[0.05, 0.06, 0.05]);
        let v = AbVerdict::judge(&base, &same);
        assert!(!v.regressed);
        let mut xml = Vec::new();
        write_junit(&v, &mut xml).unwrap();
        let xml = String::from_utf8(xml).unwrap();
        assert!(
            xml.contains(r#"failures="0""#) && !xml.contains("<failure"),
            "{xml}"
        );
        let out = xml
            .split("<system-out>")
            .nth(1)
            .and_then(|t| t.split("</system-out>").next())
            .unwrap_or_else(|| panic!("no system-out: {xml}"));
        assert!(
            out.contains("mean CV 0.053") && out.contains("bound"),
            "{out}"
        );
        assert!(out.contains(&crate::report::junit::text(&v.rule)), "{out}");
    }
}
