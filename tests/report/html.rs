//! `report.html`'s over-time charts: latency over time (its series, its values, its
//! "no data"), and axes with units and fault shading on every chart over time.

use crate::support::report as report_support;

use report_support::chaos_report;
use stampede::report::*;

fn html(r: &Report) -> String {
    let mut buf = Vec::new();
    write_html(r, &mut buf).expect("write to a Vec");
    String::from_utf8(buf).expect("utf-8 output")
}

/// The `<svg>` titled `title`.
fn svg<'a>(html: &'a str, title: &str) -> Option<&'a str> {
    let at = html.find(&format!("<title>{title}</title>"))?;
    let start = html[..at].rfind("<svg")?;
    let end = at + html[at..].find("</svg>")?;
    Some(&html[start..end])
}

fn bin(from_ms: f64, p50_ms: f64, p99_ms: f64) -> LatencyBin {
    LatencyBin {
        from_ms,
        count: 10,
        p50_ms,
        p99_ms,
    }
}

/// The chaos drill (a kill from 1 s to 3 s) with creates slow in its second second.
fn slow_in_the_fault() -> Report {
    let mut r = chaos_report();
    r.runs[0].latency_over_time = Some(LatencyOverTime {
        bin_ms: 1000.0,
        bins: vec![
            bin(0.0, 1.5, 3.0),
            bin(1000.0, 20.0, 40.0),
            bin(2000.0, 2.0, 4.25),
        ],
    });
    r
}

#[test]
fn latency_over_time_charts_p50_and_p99_per_second_with_the_fault_shaded() {
    let out = html(&slow_in_the_fault());
    let chart = svg(&out, "Create latency over time").expect("a latency over time chart");
    for (name, ys) in [
        ("p50 per second", ["1.5", "20", "2"]),
        ("p99 per second", ["3", "40", "4.25"]),
    ] {
        assert!(chart.contains(&format!("<title>{name}</title>")), "{chart}");
        // Each bin's point sits at its middle.
        for (y, at) in ys.iter().zip(["0.5", "1.5", "2.5"]) {
            let point = format!("<title>{name}: {y} ms at {at} s</title>");
            assert!(chart.contains(&point), "missing {point} in {chart}");
        }
    }
    assert!(
        chart.contains(">ms (log scale)</text>"),
        "y axis in ms: {chart}"
    );
    assert!(chart.contains("time (s)"), "x axis in s: {chart}");
    assert!(
        chart.contains(r#"class="fault""#) && chart.contains("<title>fault 1 s to 3 s</title>"),
        "the kill's window is shaded: {chart}"
    );
    let legend = &out[out
        .find("<title>Create latency over time</title>")
        .expect("chart")..];
    let legend = &legend[legend.find(r#"<p class="legend">"#).expect("a legend")..];
    let legend = &legend[..legend.find("</p>").expect("legend end")];
    for item in ["p50 per second", "p99 per second", "fault window"] {
        assert!(legend.contains(item), "{item} not in {legend}");
    }
    // Requests and latency over time come before the per-node charts.
    assert!(
        out.find("<h3>Create latency over time</h3>")
            < out.find("<h3>Sandboxes per node over time</h3>")
    );
}

#[test]
fn a_run_without_latency_over_time_says_there_is_no_data() {
    let out = html(&chaos_report());
    assert!(svg(&out, "Create latency over time").is_none(), "{out}");
    assert!(out.contains("<h3>Create latency over time</h3>"));
    assert!(out.contains("no data: no create was answered"), "{out}");
    // One bin (a burst meant to leave at once) is no line either.
    let mut one = slow_in_the_fault();
    if let Some(t) = &mut one.runs[0].latency_over_time {
        t.bins.truncate(1);
    }
    let out = html(&one);
    assert!(svg(&out, "Create latency over time").is_none());
    assert!(out.contains("no data over time"), "{out}");
}

#[test]
fn wider_bins_are_named_in_the_legend() {
    let mut r = slow_in_the_fault();
    if let Some(t) = &mut r.runs[0].latency_over_time {
        t.bin_ms = 4000.0;
        for (i, b) in t.bins.iter_mut().enumerate() {
            b.from_ms = i as f64 * 4000.0;
        }
    }
    let out = html(&r);
    let chart = svg(&out, "Create latency over time").expect("chart");
    assert!(
        chart.contains("<title>p99 per 4 s: 40 ms at 6 s</title>"),
        "{chart}"
    );
}

/// Every chart over time has a time axis in seconds, a y axis with its unit, a
/// legend, and the run's fault windows shaded.
#[test]
fn every_chart_over_time_has_axes_with_units_and_the_faults_shaded() {
    let mut r = slow_in_the_fault();
    let run = &mut r.runs[0];
    run.skew_over_time = SkewOverTime::from_timeline(&run.timeline, &[10, 0, 12]);
    run.retry_storm = RetryStorm::from_bins(&[vec![1, 0, 0], vec![4, 0, 2]], 3);
    let out = html(&r);
    let charts = [
        ("Creates landed per second", "creates/s"),
        ("Create latency over time", "ms (log scale)"),
        ("Sandboxes per node over time", "sandboxes"),
        ("Accounting error over time", "vCPU"),
        ("CV of running sandboxes over time", "CV (ratio)"),
        ("ResourceExhausted retries per second", "retries/s"),
    ];
    for (title, unit) in charts {
        let chart = svg(&out, title).unwrap_or_else(|| panic!("no chart {title} in {out}"));
        assert!(chart.contains("time (s)"), "{title}: no time axis");
        assert!(
            chart.contains(&format!(">{unit}</text>")),
            "{title}: no unit {unit}"
        );
        assert!(
            chart.contains(r#"class="fault""#),
            "{title}: fault not shaded"
        );
        let after = &out[out.find(chart).expect("chart in page") + chart.len()..];
        assert!(
            after
                .trim_start_matches("</svg>")
                .trim_start()
                .starts_with(r#"<p class="legend">"#),
            "{title}: no legend"
        );
    }
    assert_eq!(
        out.matches("time (s)").count(),
        charts.len(),
        "a chart over time is missing from the list"
    );
}

/// The numbers of attribute `attr` on the elements of class `class` in `svg`.
fn attrs(svg: &str, class: &str, attr: &str) -> Vec<f64> {
    svg.split(&format!(r#"class="{class}""#))
        .skip(1)
        .filter_map(|rest| {
            let tag = &rest[..rest.find('>')?];
            let at = tag.find(&format!(r#"{attr}=""#))? + attr.len() + 2;
            tag[at..at + tag[at..].find('"')?].parse().ok()
        })
        .collect()
}

/// A nightly-like run: the fleet fills (CV spikes), holds a steady window from 2 s to
/// 8 s, and empties; `running_cv_mean <= 0.2` checked on it; two syncs.
fn steady_run_report() -> Report {
    let mut r = chaos_report();
    r.runs[0].faults.clear();
    let run = &mut r.runs[0];
    let counts: [[u64; 3]; 11] = [
        [0, 0, 0],
        [3, 0, 0],
        [10, 9, 11],
        [10, 10, 10],
        [11, 9, 10],
        [10, 10, 10],
        [9, 11, 10],
        [10, 10, 10],
        [10, 10, 11],
        [2, 0, 0],
        [0, 0, 0],
    ];
    run.timeline = counts
        .iter()
        .enumerate()
        .map(|(i, c)| TimelinePoint {
            t_ms: i as f64 * 1000.0,
            sandboxes: c.to_vec(),
            accounting_error_vcpu: Some(1.0),
            placed: Vec::new(),
        })
        .collect();
    run.nodes.iter_mut().for_each(|n| n.sandboxes = 0);
    run.skew = SkewStats::from_counts(&[0, 0, 0]);
    run.skew_over_time = SkewOverTime::from_timeline(&run.timeline, &[100, 100, 100]);
    run.sync_at_ms = Some(vec![3000.0, 7000.0]);
    run.latency_over_time = None;
    r.checks = vec![CheckOutcome {
        run: "optimistic".into(),
        check: "running_cv_mean".into(),
        bound: "<= 0.2".into(),
        actual: Some(0.05),
        passed: true,
        message: String::new(),
    }];
    r
}

#[test]
fn the_cv_chart_draws_the_bound_and_shades_the_steady_window_it_averages() {
    let r = steady_run_report();
    let o = r.runs[0].skew_over_time.clone().expect("skew over time");
    assert_eq!((o.steady_from_ms, o.steady_to_ms), (2000.0, 8000.0));
    let out = html(&r);
    let chart = svg(&out, "CV of running sandboxes over time").expect("the CV chart");
    assert_eq!(attrs(chart, "bound", "data-value"), vec![0.2], "{chart}");
    assert!(chart.contains("<title>bound: running_cv_mean &lt;= 0.2</title>"));
    // The bound line sits on the y axis' 0.2 tick (a tick's text is 4 units below it).
    let tick_y = chart
        .split("text-anchor=\"end\">0.2</text>")
        .next()
        .and_then(|s| s.rsplit("y=\"").next())
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse::<f64>().ok())
        .expect("a 0.2 tick");
    assert_eq!(attrs(chart, "bound", "y1"), vec![tick_y - 4.0], "{chart}");
    // The window from 2 s to 8 s of a 10 s axis: x = 64 + t / 10 s x 720.
    assert_eq!(attrs(chart, "window", "data-from-ms"), vec![2000.0]);
    assert_eq!(attrs(chart, "window", "data-until-ms"), vec![8000.0]);
    assert_eq!(attrs(chart, "window", "x"), vec![64.0 + 0.2 * 720.0]);
    assert_eq!(attrs(chart, "window", "width"), vec![0.6 * 720.0]);
    // The fill's CV (1.41 at 1 s) is cut off so that 0..0.23 stays readable, and said.
    assert!(
        chart.contains(
            "y axis cut at 0.23 (window and bound): 2 samples above, up to 1.414, at the top (▲)"
        ),
        "{chart}"
    );
    assert_eq!(chart.matches(r#"class="clipped""#).count(), 2, "{chart}");
    let legend = &out[out.find(chart).expect("in page") + chart.len()..];
    let legend = &legend[..legend.find("</p>").expect("legend")];
    assert!(legend.contains("steady window 2.0 s to 8.0 s"), "{legend}");
    assert!(legend.contains("running_cv_mean &lt;= 0.2"), "{legend}");
}

#[test]
fn every_chart_over_time_marks_each_sync_or_says_they_are_not_known() {
    let mut r = steady_run_report();
    let out = html(&r);
    let titles = [
        "Sandboxes per node over time",
        "Accounting error over time",
        "CV of running sandboxes over time",
    ];
    for title in titles {
        let chart = svg(&out, title).expect(title);
        assert_eq!(
            attrs(chart, "sync", "data-t-ms"),
            vec![3000.0, 7000.0],
            "{title}"
        );
    }
    assert_eq!(out.matches(r#"class="sync""#).count(), 2 * titles.len());
    r.runs[0].sync_at_ms = None;
    let out = html(&r);
    assert_eq!(out.matches(">syncs not known</text>").count(), titles.len());
    assert!(!out.contains(r#"class="sync""#));
}

/// A burst sampled twice: the creates landed between the two samples are one bar over
/// that interval, not a line rising from the first sample to the second.
#[test]
fn a_burst_renders_bars_not_a_ramp_between_two_samples() {
    let mut r = chaos_report();
    let run = &mut r.runs[0];
    run.timeline.truncate(1);
    run.timeline.push(TimelinePoint {
        t_ms: 500.0,
        sandboxes: vec![100, 110, 115],
        accounting_error_vcpu: None,
        placed: vec![100, 110, 115],
    });
    let out = html(&r);
    let chart = svg(&out, "Creates landed per second").expect("landed per second");
    assert!(!chart.contains("<polyline"), "{chart}");
    assert_eq!(attrs(chart, "bar", "x"), vec![64.0], "{chart}");
    assert_eq!(attrs(chart, "bar", "width").len(), 1);
    assert!(chart.contains("<title>creates landed per second: 650 creates/s at 0.5 s</title>"));
    let d = chart.split(" d=\"").nth(1).expect("a step path");
    let d = &d[..d.find('"').expect("end")];
    assert!(d.starts_with('M') && d.matches('H').count() == 1, "{d}");
}

/// Every chart of a page has a heading, an SVG title, an x and a y axis label, and
/// scales to its column.
#[test]
fn every_chart_has_a_title_axis_labels_and_scales_to_the_window() {
    let mut r = super::support::report::two_mode_report();
    for run in &mut r.runs {
        run.skew_over_time = SkewOverTime::from_timeline(&run.timeline, &[1, 1, 1, 1, 1]);
    }
    r.checks = vec![CheckOutcome {
        run: "reported".into(),
        check: "cv".into(),
        bound: "<= 0.2".into(),
        actual: Some(0.9),
        passed: false,
        message: String::new(),
    }];
    let out = html(&r);
    let charts: Vec<&str> = out.split("<svg").skip(1).collect();
    assert!(charts.len() >= 10, "{}", charts.len());
    for c in &charts {
        let c = &c[..c.find("</svg>").expect("closed")];
        assert!(
            c.contains(r#"width="100%""#) && c.contains("viewBox="),
            "{c}"
        );
        assert!(c.contains("<title>"), "{c}");
        assert!(c.contains(r#"class="x-label""#), "no x label: {c}");
        assert!(c.contains(r#"class="y-label""#), "no y label: {c}");
    }
    assert_eq!(out.matches("<svg").count(), out.matches("</svg>\n").count());
    // The mode comparison: its heading, its y label and the bound of the run that has one.
    let cmp = svg(&out, "CV per run").expect("the comparison chart");
    assert!(out.contains("<h3>CV per run</h3>"));
    assert!(
        cmp.contains(">CV of final sandboxes per node (ratio)</text>"),
        "{cmp}"
    );
    assert_eq!(attrs(cmp, "bound", "data-value"), vec![0.2], "{cmp}");
}

#[test]
fn a_page_of_several_runs_has_contents_whose_anchors_resolve() {
    let out = html(&super::support::report::two_mode_report());
    let nav = &out[out.find("<nav>").expect("contents")..out.find("</nav>").expect("end")];
    let targets: Vec<&str> = nav
        .split("href=\"#")
        .skip(1)
        .map(|s| &s[..s.find('"').expect("quoted")])
        .collect();
    assert_eq!(targets, ["comparison", "run-1", "run-2"]);
    for t in targets {
        assert_eq!(out.matches(&format!(r#"id="{t}""#)).count(), 1, "{t}");
    }
    assert!(nav.contains(">Run reported</a>") && nav.contains(">Run optimistic</a>"));
    // One run: no contents.
    assert!(!html(&chaos_report()).contains("<nav>"));
}
