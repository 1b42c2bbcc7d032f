//! The charts over time of one run in `report.html` (and the bound lookup they and the
//! mode comparison share): what each chart draws, on the axes the run's charts share.

use std::io::{self, Write};

use super::checks::bound_values;
use super::format::check_unit;
use super::model::{Figure, Report, RunResult};
use super::svg::{esc, legend, LegendItem, YScale};
use super::svg_time::{time_chart, BoundLine, Steps, TimeChart};

/// The upper bound of check `check` on run `run`, when the profile set one.
pub(super) fn upper_bound(report: &Report, run: &str, check: &str) -> Option<BoundLine> {
    let c = report
        .checks
        .iter()
        .find(|c| c.run == run && c.check == check)?;
    let max = c.bound.split(',').find(|p| p.trim().starts_with("<="))?;
    let value = *bound_values(max, check_unit(check)).first()?;
    Some(BoundLine {
        value,
        name: format!("{check} {}", c.bound),
    })
}

/// The run's fault windows `(applied, healed)` in ms, an unhealed one to the run's end.
fn fault_shade(run: &RunResult) -> Vec<(f64, f64)> {
    let end = run.timeline.last().map_or(run.wall_ms, |p| p.t_ms);
    run.faults
        .iter()
        .map(|f| {
            (
                f.applied_at_ms,
                f.healed_at_ms.unwrap_or(end).max(f.applied_at_ms),
            )
        })
        .collect()
}

/// A stretch of time `(from, until)`, ms.
pub(super) type Interval = (f64, f64);

/// Creates that landed per second between consecutive samples (from the cumulative
/// per-node placements): each rate over its interval `(from, until)`, ms; none without
/// placements.
pub(super) fn landed_per_second(run: &RunResult) -> Option<(Vec<Interval>, Vec<f64>)> {
    if !run.measured(Figure::Placements) {
        return None;
    }
    let pts: Vec<(f64, u64)> = run
        .timeline
        .iter()
        .filter(|p| !p.placed.is_empty())
        .map(|p| (p.t_ms, p.placed.iter().sum()))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let (xs, ys) = pts
        .windows(2)
        .map(|w| {
            let dt = (w[1].0 - w[0].0) / 1000.0;
            let rate = if dt > 0.0 {
                w[1].1.saturating_sub(w[0].1) as f64 / dt
            } else {
                0.0
            };
            ((w[0].0, w[1].0), rate)
        })
        .unzip();
    Some((xs, ys))
}

/// The axes, shading and marks every chart over time of one run shares.
pub(super) struct RunAxes {
    /// The fault windows.
    shade: Vec<(f64, f64)>,
    /// End of the time axis, ms: the last sample (the final read), else the run's end.
    end_ms: f64,
    /// The node syncs, ms; none when not known.
    syncs: Option<Vec<f64>>,
}

impl RunAxes {
    pub(super) fn of(run: &RunResult) -> Self {
        RunAxes {
            shade: fault_shade(run),
            end_ms: run.timeline.last().map_or(run.wall_ms, |p| p.t_ms),
            syncs: run.sync_at_ms.clone(),
        }
    }
}

/// What one chart over time shows besides the run's shared axes.
#[derive(Default)]
pub(super) struct ChartSpec<'a> {
    /// The y axis label, with its unit.
    pub unit: &'a str,
    /// How the y axis maps values.
    pub scale: YScale,
    /// The time each value stands for.
    pub steps: Steps<'a>,
    /// The bounds of the checks that judge this figure.
    pub bounds: &'a [BoundLine],
    /// The window a check averages over, `(from, until, mean)` ms, and its name.
    pub window: Option<((f64, f64, f64), String)>,
}

/// One chart over time: its heading, the chart (time axis in seconds, y axis in
/// `spec.unit`, fault windows shaded, syncs marked) and its legend.
pub(super) fn chart(
    w: &mut impl Write,
    axes: &RunAxes,
    heading: &str,
    spec: ChartSpec<'_>,
    xs: &[f64],
    series: &[(String, Vec<f64>)],
) -> io::Result<()> {
    let chart = TimeChart {
        title: heading,
        unit: spec.unit,
        scale: spec.scale,
        steps: spec.steps,
        shade: &axes.shade,
        end_ms: axes.end_ms,
        syncs: axes.syncs.as_deref(),
        bounds: spec.bounds,
        window: spec.window.as_ref().map(|(w, _)| *w),
    };
    writeln!(w, "<h3>{}</h3>", esc(heading))?;
    writeln!(w, "{}", time_chart(&chart, xs, series))?;
    let mut items: Vec<LegendItem> = series
        .iter()
        .enumerate()
        .map(|(i, (n, _))| LegendItem::Series(i, n.clone()))
        .collect();
    items.extend(
        spec.bounds
            .iter()
            .map(|b| LegendItem::Bound(b.name.clone())),
    );
    if let Some((_, name)) = spec.window {
        items.push(LegendItem::Window(name));
    }
    if !axes.shade.is_empty() {
        items.push(LegendItem::Fault);
    }
    if axes.syncs.as_ref().is_some_and(|s| !s.is_empty()) {
        items.push(LegendItem::Syncs);
    }
    writeln!(w, "{}", legend(&items))
}

/// The CV of running sandboxes per node at each sample, with what `running_cv_mean`
/// judges: its steady window shaded, the mean over it dotted, its bound dashed. The y
/// axis covers the window's values and the bound (the CV of a filling or emptying fleet
/// spikes far above them), and the chart says what it cut.
pub(super) fn running_cv_chart(
    w: &mut impl Write,
    report: &Report,
    run: &RunResult,
    axes: &RunAxes,
) -> io::Result<()> {
    let xs: Vec<f64> = run.timeline.iter().map(|p| p.t_ms).collect();
    let cv: Vec<f64> = run
        .timeline
        .iter()
        .map(|p| super::SkewStats::from_counts(&p.sandboxes).cv)
        .collect();
    let bounds: Vec<BoundLine> = ["running_cv_mean", "running_cv_peak"]
        .into_iter()
        .filter_map(|c| upper_bound(report, &run.label, c))
        .collect();
    let steady = run.skew_over_time.as_ref().filter(|o| o.steady_samples > 0);
    let mut spec = ChartSpec {
        unit: "CV (ratio)",
        bounds: &bounds,
        ..ChartSpec::default()
    };
    if let Some(o) = steady {
        let (from, to) = (o.steady_from_ms, o.steady_to_ms);
        let in_window = xs
            .iter()
            .zip(&cv)
            .filter(|(x, _)| (from..=to).contains(*x))
            .map(|(_, c)| *c);
        let top = in_window
            .chain(bounds.iter().map(|b| b.value))
            .fold(0.0_f64, f64::max);
        let all_top = cv.iter().copied().fold(0.0_f64, f64::max);
        if top > 0.0 && all_top > top * 1.15 {
            spec.scale = YScale::UpTo(top * 1.15);
        }
        spec.window = Some((
            (from, to, o.running_cv_mean),
            format!(
                "steady window {:.1} s to {:.1} s (running_cv_mean {} over it, dotted)",
                from / 1000.0,
                to / 1000.0,
                super::svg::value(o.running_cv_mean)
            ),
        ));
    }
    let s = vec![("CV of running sandboxes per node".to_string(), cv)];
    chart(w, axes, "CV of running sandboxes over time", spec, &xs, &s)
}

/// p50 and p99 of create latency per bin of intended send time, or why there is no
/// chart.
pub(super) fn latency_over_time(
    w: &mut impl Write,
    run: &RunResult,
    axes: &RunAxes,
) -> io::Result<()> {
    const HEADING: &str = "Create latency over time";
    let bins = run
        .latency_over_time
        .as_ref()
        .map_or(&[][..], |t| &t.bins[..]);
    if bins.len() < 2 {
        writeln!(w, "<h3>{HEADING}</h3>")?;
        let why = if bins.is_empty() {
            "no data: no create was answered"
        } else {
            "no data over time: every create was meant to leave in one bin"
        };
        return writeln!(w, "<p class=\"nodata\">{why}.</p>");
    }
    let width = run.latency_over_time.as_ref().map_or(0.0, |t| t.bin_ms);
    let half = width / 2.0;
    // A bin's value covers the bin; its hover mark sits at its middle.
    let intervals: Vec<(f64, f64)> = bins
        .iter()
        .map(|b| (b.from_ms, b.from_ms + width))
        .collect();
    let xs: Vec<f64> = bins.iter().map(|b| b.from_ms + half).collect();
    let bin_s = width / 1000.0;
    let per = if bin_s == 1.0 {
        "per second".to_string()
    } else {
        format!("per {bin_s} s")
    };
    let series = vec![
        (
            format!("p50 {per}"),
            bins.iter().map(|b| b.p50_ms).collect(),
        ),
        (
            format!("p99 {per}"),
            bins.iter().map(|b| b.p99_ms).collect(),
        ),
    ];
    let spec = ChartSpec {
        unit: "ms",
        scale: YScale::Log,
        steps: Steps::Intervals(&intervals),
        ..ChartSpec::default()
    };
    chart(w, axes, HEADING, spec, &xs, &series)
}
