//! Charts over time for `report.html`: each value drawn over the time it stands for
//! (a sample holds until the next one, a rate or a bin covers its interval), so that a
//! burst shows as it happened rather than as a ramp between two samples; fault windows
//! and a check's averaged window shaded, the check's bound as a dashed line, and a mark
//! at every node sync (or a note that the syncs are not known).

use std::fmt::Write as _;

use super::svg::{
    axes, colour, esc, open_svg, time_axis, trim_num, value, y_axis, YMap, YScale, BOTTOM, BOUND,
    FAULT_FILL, FAULT_OPACITY, H, LEFT, RIGHT, SYNC_STROKE, TOP, W, WINDOW_FILL,
};

/// The time each value of a series stands for.
#[derive(Debug, Clone, Copy, Default)]
pub enum Steps<'a> {
    /// Samples of a level: each holds from its time until the next sample (the last
    /// one is a point).
    #[default]
    Hold,
    /// A rate or a bin per value: value `i` covers `intervals[i]` (ms, from..until);
    /// a single series is drawn as bars.
    Intervals(&'a [(f64, f64)]),
}

/// A check's bound drawn across a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundLine {
    /// Its value in the chart's unit.
    pub value: f64,
    /// What it bounds, e.g. `running_cv_mean <= 0.2`.
    pub name: String,
}

/// What a [`time_chart`] shows besides its series.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeChart<'a> {
    /// The chart's title (its SVG `<title>`).
    pub title: &'a str,
    /// Label of the y axis, with its unit (`sandboxes`, `ms`).
    pub unit: &'a str,
    /// How the y axis maps values.
    pub scale: YScale,
    /// The time each value stands for.
    pub steps: Steps<'a>,
    /// Windows `(from, until)`, ms, to shade: the fault windows.
    pub shade: &'a [(f64, f64)],
    /// Where the time axis ends, ms, at least (the charts of one run share it, so that
    /// their times line up); the last x and the last window's end extend it.
    pub end_ms: f64,
    /// When the node syncs were, ms; `None` when they are not known (the chart says so).
    pub syncs: Option<&'a [f64]>,
    /// Bound lines of the checks that judge this chart's figure.
    pub bounds: &'a [BoundLine],
    /// The window `(from, until)`, ms, a check averages over, and the average: shaded
    /// and drawn as a dotted line across it.
    pub window: Option<(f64, f64, f64)>,
}

/// Most points of a chart that get a mark with their value.
const MAX_POINT_MARKS: usize = 2000;
/// Most points of a series drawn as visible marks.
const MAX_VISIBLE_MARKS: usize = 60;

/// The chart of `series` over shared sample times `xs` (ms since the workload
/// started; where a value's hover mark sits), on the axes and overlays `chart`
/// describes.
pub fn time_chart(chart: &TimeChart<'_>, xs: &[f64], series: &[(String, Vec<f64>)]) -> String {
    let intervals: Vec<(f64, f64)> = match chart.steps {
        Steps::Intervals(iv) => iv.to_vec(),
        Steps::Hold => xs
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, xs.get(i + 1).copied().unwrap_or(x)))
            .collect(),
    };
    let xmax = xs
        .iter()
        .copied()
        .chain(intervals.iter().map(|w| w.1))
        .chain(chart.shade.iter().map(|w| w.1))
        .fold(chart.end_ms, f64::max)
        .max(1.0);
    let px = |x: f64| LEFT + x.clamp(0.0, xmax) / xmax * (W - LEFT - RIGHT);
    let mut out = String::new();
    open_svg(&mut out, chart.title, H);
    // Under everything else, so that the lines stay readable.
    let band = |out: &mut String, class: &str, (from, until): (f64, f64), fill: &str, o: f64| {
        let (a, b) = (px(from), px(until));
        let _ = write!(
            out,
            r#"<rect class="{class}" data-from-ms="{}" data-until-ms="{}" x="{a:.1}" y="{TOP}" width="{:.1}" height="{}" fill="{fill}" fill-opacity="{o}"><title>{class} {} s to {} s</title></rect>"#,
            value(from),
            value(until),
            (b - a).max(1.0),
            H - BOTTOM - TOP,
            trim_num(from / 1000.0),
            trim_num(until / 1000.0)
        );
    };
    for w in chart.shade {
        band(&mut out, "fault", *w, FAULT_FILL, FAULT_OPACITY);
    }
    if let Some((from, until, _)) = chart.window {
        band(&mut out, "window", (from, until), WINDOW_FILL, 0.08);
    }
    axes(&mut out, H - BOTTOM);
    let values = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .chain(chart.bounds.iter().map(|b| b.value));
    let y = YMap::new(chart.scale, values);
    y_axis(&mut out, &y, chart.unit);
    time_axis(&mut out, xmax);
    sync_marks(&mut out, chart.syncs, &px);
    let py = |v: f64| y.py(v);
    let single_bars = matches!(chart.steps, Steps::Intervals(_)) && series.len() == 1;
    for (i, (name, ys)) in series.iter().enumerate() {
        if single_bars {
            for (&(a, b), &v) in intervals.iter().zip(ys) {
                let top = py(v);
                let _ = write!(
                    out,
                    r#"<rect class="bar" x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}" fill-opacity="0.35"/>"#,
                    px(a),
                    (px(b) - px(a)).max(1.0),
                    (H - BOTTOM - top).max(0.0),
                    colour(i)
                );
            }
        }
        let _ = write!(
            out,
            r#"<path class="step" fill="none" stroke="{}" stroke-width="1.5" d="{}"><title>{}</title></path>"#,
            colour(i),
            step_path(&intervals, ys, &px, &py),
            esc(name)
        );
    }
    for b in chart.bounds {
        let at = py(b.value);
        let _ = write!(
            out,
            r#"<line class="bound" data-value="{}" x1="{LEFT}" y1="{at:.1}" x2="{}" y2="{at:.1}" stroke="{BOUND}" stroke-width="2" stroke-dasharray="6 4"><title>bound: {}</title></line>"#,
            value(b.value),
            W - RIGHT,
            esc(&b.name)
        );
    }
    if let Some((from, until, mean)) = chart.window {
        let at = py(mean);
        let _ = write!(
            out,
            r##"<line class="window-mean" x1="{:.1}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="#000" stroke-width="1.5" stroke-dasharray="2 2"><title>mean over the window: {}</title></line>"##,
            px(from),
            px(until),
            value(mean)
        );
    }
    if let YScale::UpTo(hi) = chart.scale {
        clip_note(&mut out, &y, series);
        // A small arrow on the top edge over each sample cut off.
        for (_, ys) in series {
            for (&x, &v) in xs.iter().zip(ys).filter(|(_, v)| **v > hi) {
                let cx = px(x);
                let _ = write!(
                    out,
                    r##"<path class="clipped" d="M{:.1},{:.1} L{cx:.1},{:.1} L{:.1},{:.1} Z" fill="#444"><title>{} at {} s (above the axis)</title></path>"##,
                    cx - 4.0,
                    TOP + 2.0,
                    TOP - 5.0,
                    cx + 4.0,
                    TOP + 2.0,
                    value(v),
                    value(x / 1000.0)
                );
            }
        }
    }
    // A point a reader can hover for its value, while the chart stays small; drawn
    // where the points are few enough to tell apart, an invisible target otherwise.
    if xs.len() * series.len() <= MAX_POINT_MARKS {
        let opacity = if xs.len() <= MAX_VISIBLE_MARKS { 1 } else { 0 };
        for (i, (name, ys)) in series.iter().enumerate() {
            for (&x, &v) in xs.iter().zip(ys) {
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{}" fill-opacity="{opacity}"><title>{}: {} {} at {} s</title></circle>"#,
                    px(x),
                    py(v),
                    colour(i),
                    esc(name),
                    value(v),
                    esc(chart.unit.trim()),
                    value(x / 1000.0)
                );
            }
        }
    }
    out.push_str("</svg>");
    out
}

/// A series as horizontal steps over its intervals, joined where one interval ends
/// where the next begins, broken over gaps.
fn step_path(
    intervals: &[(f64, f64)],
    ys: &[f64],
    px: &impl Fn(f64) -> f64,
    py: &impl Fn(f64) -> f64,
) -> String {
    let mut d = String::new();
    let mut end: Option<f64> = None;
    for (&(a, b), &v) in intervals.iter().zip(ys) {
        let (xa, xb, yv) = (px(a), px(b), py(v));
        match end {
            Some(e) if (e - xa).abs() < 0.05 => {
                let _ = write!(d, " V{yv:.1}");
            }
            _ => {
                let _ = write!(d, " M{xa:.1},{yv:.1}");
            }
        }
        let _ = write!(d, " H{xb:.1}");
        end = Some(xb);
    }
    d.trim_start().to_string()
}

/// A vertical dotted mark at each sync, or a note that the syncs are not known.
fn sync_marks(out: &mut String, syncs: Option<&[f64]>, px: &impl Fn(f64) -> f64) {
    let note = match syncs {
        None => "syncs not known",
        Some([]) => "no node sync in this run",
        Some(_) => "",
    };
    if !note.is_empty() {
        let _ = write!(
            out,
            r##"<text class="syncs-note" x="{}" y="{}" text-anchor="end" fill="#555">{note}</text>"##,
            W - RIGHT - 4.0,
            TOP + 14.0
        );
    }
    let Some(syncs) = syncs else {
        return;
    };
    for &t in syncs {
        let x = px(t);
        let _ = write!(
            out,
            r#"<line class="sync" data-t-ms="{}" x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="{SYNC_STROKE}" stroke-width="1.2" stroke-dasharray="3 3"><title>node sync at {} s</title></line>"#,
            value(t),
            H - BOTTOM,
            value(t / 1000.0)
        );
    }
}

/// What a capped y axis left out, said above the plot.
fn clip_note(out: &mut String, y: &YMap, series: &[(String, Vec<f64>)]) {
    let hi = y.hi();
    let above: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| *v > hi)
        .collect();
    let note = if above.is_empty() {
        format!("y axis to {} (window and bound)", value(hi))
    } else {
        let max = above.iter().copied().fold(0.0_f64, f64::max);
        format!(
            "y axis cut at {} (window and bound): {} samples above, up to {}, at the top (▲)",
            value(hi),
            above.len(),
            value(max)
        )
    };
    let _ = write!(
        out,
        r#"<text class="clip-note" x="{}" y="{}" text-anchor="end">{}</text>"#,
        W - RIGHT,
        TOP - 12.0,
        esc(&note)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart<'a>() -> TimeChart<'a> {
        TimeChart {
            title: "t",
            unit: "sandboxes",
            ..TimeChart::default()
        }
    }

    #[test]
    fn a_fault_window_is_shaded_under_the_lines() {
        let c = TimeChart {
            shade: &[(500.0, 1500.0)],
            syncs: Some(&[]),
            ..chart()
        };
        let svg = time_chart(
            &c,
            &[0.0, 1000.0, 2000.0],
            &[("a".into(), vec![1.0, 2.0, 3.0])],
        );
        let shade = svg.find(r#"class="fault""#).expect("shaded window");
        assert!(shade < svg.find("<path").expect("line"), "{svg}");
        assert!(
            svg.contains("time (s)") && svg.contains(">sandboxes<"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>a: 2 sandboxes at 1 s</title>"),
            "{svg}"
        );
    }

    #[test]
    fn a_sample_holds_until_the_next_one() {
        let svg = time_chart(
            &chart(),
            &[0.0, 1000.0, 2000.0],
            &[("a".into(), vec![1.0, 2.0, 3.0])],
        );
        let d = &svg[svg.find(" d=\"").expect("a path") + 4..];
        let d = &d[..d.find('"').expect("end")];
        // Move, across, up, across, up, (a point).
        assert_eq!(d.matches('M').count(), 1, "{d}");
        assert_eq!(d.matches('V').count(), 2, "{d}");
        assert_eq!(d.matches('H').count(), 3, "{d}");
        assert!(!svg.contains("<polyline"), "no ramp between samples");
    }

    #[test]
    fn syncs_are_marked_or_said_unknown() {
        let c = TimeChart {
            syncs: Some(&[7000.0, 27_000.0]),
            end_ms: 30_000.0,
            ..chart()
        };
        let svg = time_chart(&c, &[0.0, 30_000.0], &[("a".into(), vec![1.0, 1.0])]);
        assert_eq!(svg.matches(r#"class="sync""#).count(), 2, "{svg}");
        assert!(svg.contains("<title>node sync at 27 s</title>"));
        assert!(!svg.contains("syncs not known") && !svg.contains("no node sync"));
        let svg = time_chart(&chart(), &[0.0], &[("a".into(), vec![1.0])]);
        assert!(svg.contains(">syncs not known</text>"), "{svg}");
    }

    #[test]
    fn a_gap_between_bins_is_not_bridged() {
        let iv = [(0.0, 1000.0), (1000.0, 2000.0), (5000.0, 6000.0)];
        let d = step_path(&iv, &[1.0, 2.0, 3.0], &|x| x, &|y| y);
        assert_eq!(d, "M0.0,1.0 H1000.0 V2.0 H2000.0 M5000.0,3.0 H6000.0");
    }
}
