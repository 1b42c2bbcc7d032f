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
        ("CV of running sandboxes over time", "CV"),
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
