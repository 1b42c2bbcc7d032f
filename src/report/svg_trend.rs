//! A trend chart for `stampede trend`: one check's figure over successive reports (x =
//! each report's date and name, oldest first), with the check's bound drawn as a dashed
//! line and the runs that failed marked red. Script-free SVG on the axes of
//! [`super::svg`].

use std::fmt::Write as _;

use super::svg::{
    axes, colour, esc, open_svg, value, x_label, y_axis, YMap, YScale, BOTTOM, BOUND, H, LEFT,
    RIGHT, W,
};

/// Room under the plot for the second line of the report labels.
const LABELS: f64 = 18.0;
/// Width a two-line report label needs, in chart units.
const LABEL_WIDTH: f64 = 120.0;

/// One point of a trend: the run's name (its report's time) and the figure, none when
/// the run lacked it; whether its check passed.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    /// The run's name on hover (its `started_at`).
    pub name: String,
    /// The report's name (its profile's), beside its date on the x axis.
    pub report: String,
    /// The figure; none when the report lacked it.
    pub value: Option<f64>,
    /// Whether the check passed in that run.
    pub passed: bool,
}

/// The chart of `points` in `unit`, with lines at `bounds` (a check's min and/or max).
pub fn trend_chart(title: &str, unit: &str, points: &[TrendPoint], bounds: &[f64]) -> String {
    let mut out = String::new();
    let height = H + LABELS;
    let bottom = height - BOTTOM - LABELS;
    open_svg(&mut out, title, height);
    axes(&mut out, bottom);
    let values: Vec<f64> = points
        .iter()
        .filter_map(|p| p.value)
        .chain(bounds.iter().copied())
        .collect();
    let y = YMap::over(YScale::Linear, values.into_iter(), bottom);
    y_axis(&mut out, &y, unit);
    let n = points.len().max(1);
    let px = |i: usize| {
        let span = (n.max(2) - 1) as f64;
        LEFT + 10.0 + i as f64 / span * (W - LEFT - RIGHT - 20.0)
    };
    // A label per point where they fit, else on every k-th point (and the newest);
    // each point's hover names its report.
    let room = (W - LEFT - RIGHT - 20.0) / (n.max(2) - 1) as f64;
    let every = (LABEL_WIDTH / room).ceil().max(1.0) as usize;
    for (i, p) in points.iter().enumerate() {
        let x = px(i);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{}" stroke="#444"/>"##,
            bottom + 4.0
        );
        // Labelled: every k-th point at least k before the newest, and the newest.
        let last = i + 1 == points.len();
        if !last && (i % every != 0 || points.len() - 1 - i < every) {
            continue;
        }
        let anchor = match (i, last) {
            (0, _) if n > 1 => "start",
            (_, true) if n > 1 => "end",
            _ => "middle",
        };
        let (date, name) = point_label_lines(p);
        let _ = write!(
            out,
            r#"<text class="x-tick" x="{x:.1}" y="{}" text-anchor="{anchor}">{}</text><text class="x-tick" x="{x:.1}" y="{}" text-anchor="{anchor}">{}</text>"#,
            bottom + 18.0,
            esc(&date),
            bottom + 34.0,
            esc(&name)
        );
    }
    x_label(&mut out, "report (date UTC and name, oldest first)", height);
    for b in bounds {
        let py = y.py(*b);
        let _ = write!(
            out,
            r#"<line class="bound" x1="{LEFT}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="{BOUND}" stroke-width="1.5" stroke-dasharray="6 4"><title>bound {}</title></line>"#,
            W - RIGHT,
            value(*b)
        );
    }
    // One line per stretch of runs that have the figure: a missing run is a gap, not
    // bridged.
    let mut stretches: Vec<Vec<String>> = vec![Vec::new()];
    for (i, p) in points.iter().enumerate() {
        match p.value {
            Some(v) => stretches.last_mut().expect("never empty").push(format!(
                "{:.1},{:.1}",
                px(i),
                y.py(v)
            )),
            None => stretches.push(Vec::new()),
        }
    }
    for pts in stretches.iter().filter(|s| s.len() > 1) {
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
            colour(0),
            pts.join(" ")
        );
    }
    for (i, p) in points.iter().enumerate() {
        let Some(v) = p.value else { continue };
        let fill = if p.passed { colour(0) } else { BOUND };
        let _ = write!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{fill}"><title>{}: {} {}{}</title></circle>"#,
            px(i),
            y.py(v),
            esc(&p.name),
            value(v),
            esc(unit),
            if p.passed { "" } else { " (failed)" }
        );
    }
    out.push_str("</svg>");
    out
}

/// A point's x axis label: its report's date and time (`2026-12-07 11:02`, from
/// `started_at`) and name.
pub fn point_label(p: &TrendPoint) -> String {
    let (date, name) = point_label_lines(p);
    format!("{date} {name}").trim().to_string()
}

/// [`point_label`] on two lines: the date, then the time (UTC) and the name.
fn point_label_lines(p: &TrendPoint) -> (String, String) {
    let t = &p.name;
    match (t.get(..10), t.get(11..16)) {
        (Some(d), Some(hm)) if t.as_bytes().get(10) == Some(&b'T') => (
            d.to_string(),
            format!("{hm} {}", p.report).trim().to_string(),
        ),
        _ => (t.clone(), p.report.clone()),
    }
}
