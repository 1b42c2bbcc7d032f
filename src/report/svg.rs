//! Small inline SVG charts for `report.html`: no scripts, no external assets. Every
//! chart has a `viewBox` and scales to its column (`width="100%"`, the page's CSS caps
//! it), so that it fits any window; text is sized for that scale (14 units, about 13 px
//! in an 800 px window and 17 px in a 1400 px one).

use std::fmt::Write as _;

/// Width of a chart's coordinate system.
pub(super) const W: f64 = 800.0;
/// Height of a chart's coordinate system.
pub(super) const H: f64 = 300.0;
/// Room left of the plot (y ticks and their values).
pub(super) const LEFT: f64 = 64.0;
/// Room under the plot (x ticks, their values and the x axis label).
pub(super) const BOTTOM: f64 = 44.0;
/// Room above the plot (the y axis label, notes).
pub(super) const TOP: f64 = 30.0;
/// Room right of the plot.
pub(super) const RIGHT: f64 = 16.0;
/// Size of every chart text, in chart units.
pub(super) const FONT: f64 = 14.0;
/// Colour and opacity of a shaded fault window (and of its legend swatch).
pub(super) const FAULT_FILL: &str = "#d62728";
pub(super) const FAULT_OPACITY: f64 = 0.12;
/// Colour of a check's bound line.
pub(super) const BOUND: &str = "#d62728";

/// A colour per series index (repeats after ten).
pub fn colour(i: usize) -> &'static str {
    const C: [&str; 10] = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
        "#bcbd22", "#17becf",
    ];
    C[i % C.len()]
}

/// Escape text for XML/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The opening `<svg>` of a chart `height` units high, scaling to its column, with its
/// accessible `title`.
pub(super) fn open_svg(out: &mut String, title: &str, height: f64) {
    let _ = write!(
        out,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="100%" preserveAspectRatio="xMinYMin meet" font-size="{FONT}" role="img"><title>{}</title>"#,
        esc(title)
    );
}

/// The two axis lines of a plot whose bottom edge is at `y0`.
pub(super) fn axes(out: &mut String, y0: f64) {
    let x1 = W - RIGHT;
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#444"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{y0}" stroke="#444"/>"##
    );
}

/// A round step that cuts `span` into at most about five intervals (1, 2 or 5 x 10^n).
fn tick_step(span: f64) -> f64 {
    let raw = (span / 5.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// Ticks 0, step, 2 step... up to `max`.
fn ticks(max: f64) -> Vec<f64> {
    let step = tick_step(max);
    (0..=50)
        .map(|i| i as f64 * step)
        .take_while(|t| *t <= max * (1.0 + 1e-9))
        .collect()
}

/// How a chart's y axis is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum YScale {
    /// From 0 to a little above the largest value.
    #[default]
    Linear,
    /// Whole decades around the positive values (a latency's p50 and p99 may lie three
    /// decades apart); values at or below 0 sit on the bottom edge.
    Log,
    /// From 0 to this value: larger values are clipped at the top edge (the chart
    /// says so).
    UpTo(f64),
}

/// A y axis: values to pixels, and its ticks.
pub(super) struct YMap {
    log: bool,
    lo: f64,
    hi: f64,
    /// Pixel row of the axis' bottom edge.
    bottom: f64,
}

impl YMap {
    /// The axis of `values` in `scale` (linear when no value is positive), over a plot
    /// whose bottom edge is at `H - BOTTOM`.
    pub(super) fn new(scale: YScale, values: impl Iterator<Item = f64> + Clone) -> Self {
        Self::over(scale, values, H - BOTTOM)
    }

    /// As [`YMap::new`], for a plot whose bottom edge is at pixel row `bottom`.
    pub(super) fn over(
        scale: YScale,
        values: impl Iterator<Item = f64> + Clone,
        bottom: f64,
    ) -> Self {
        let max = values.clone().fold(0.0_f64, f64::max);
        let min_pos = values.filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let linear = |hi| YMap {
            log: false,
            lo: 0.0,
            hi,
            bottom,
        };
        match scale {
            YScale::Log if max > 0.0 => {
                let lo = 10f64.powf(min_pos.log10().floor());
                let hi = 10f64.powf(max.log10().ceil()).max(lo * 10.0);
                YMap {
                    log: true,
                    lo,
                    hi,
                    bottom,
                }
            }
            YScale::UpTo(hi) if hi > 0.0 => linear(hi),
            _ => linear(if max > 0.0 { max * 1.05 } else { 1.0 }),
        }
    }

    /// The top of the axis.
    pub(super) fn hi(&self) -> f64 {
        self.hi
    }

    /// Share of the axis height at `y`, 0 (bottom) to 1 (top), clipped to the axis.
    fn frac(&self, y: f64) -> f64 {
        let f = if self.log {
            let y = y.max(self.lo);
            (y.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            y / self.hi
        };
        f.clamp(0.0, 1.0)
    }

    /// The pixel row of `y`.
    pub(super) fn py(&self, y: f64) -> f64 {
        self.bottom - self.frac(y) * (self.bottom - TOP)
    }

    /// Round values: 1, 2, 5 x 10^n over up to three decades, whole decades beyond.
    fn ticks(&self) -> Vec<f64> {
        if !self.log {
            return ticks(self.hi);
        }
        let decades = (self.hi / self.lo).log10().round() as i32;
        let steps: &[f64] = if decades <= 3 {
            &[1.0, 2.0, 5.0]
        } else {
            &[1.0]
        };
        let mut out = Vec::new();
        for d in 0..=decades {
            for m in steps {
                let t = self.lo * 10f64.powi(d) * m;
                if t <= self.hi * (1.0 + 1e-9) {
                    out.push(t);
                }
            }
        }
        out
    }
}

/// The y axis: a tick and a faint grid line per round value, its label (the unit)
/// above it.
pub(super) fn y_axis(out: &mut String, y: &YMap, label: &str) {
    for t in y.ticks() {
        let py = y.py(t);
        let _ = write!(
            out,
            r##"<line x1="{}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#ddd"/><line x1="{}" y1="{py:.1}" x2="{LEFT}" y2="{py:.1}" stroke="#444"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT,
            W - RIGHT,
            LEFT - 3.0,
            LEFT - 5.0,
            py + 4.0,
            value(t)
        );
    }
    let label = match (label.trim(), y.log) {
        ("", _) => return,
        (u, false) => u.to_string(),
        (u, true) => format!("{u} (log scale)"),
    };
    let _ = write!(
        out,
        r#"<text class="y-label" x="4" y="{}">{}</text>"#,
        TOP - 12.0,
        esc(&label)
    );
}

/// The x axis of a time chart (`xmax` in ms): ticks in seconds, labelled `time (s)`.
pub(super) fn time_axis(out: &mut String, xmax: f64) {
    let px = |x: f64| LEFT + x / xmax * (W - LEFT - RIGHT);
    for t in ticks(xmax / 1000.0) {
        let x = px(t * 1000.0);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#444"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 4.0,
            H - BOTTOM + 18.0,
            trim_num(t)
        );
    }
    x_label(out, "time (s)", H);
}

/// The x axis label, at the bottom right of a chart `height` high.
pub(super) fn x_label(out: &mut String, label: &str, height: f64) {
    let _ = write!(
        out,
        r#"<text class="x-label" x="{}" y="{}" text-anchor="end">{}</text>"#,
        W - RIGHT,
        height - 4.0,
        esc(label)
    );
}

pub(super) fn trim_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// `x` to at most three decimals, trailing zeros dropped.
pub(super) fn value(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// One entry of a chart's legend.
#[derive(Debug, Clone, PartialEq)]
pub enum LegendItem {
    /// A series, in the colour of its index.
    Series(usize, String),
    /// The shaded fault windows.
    Fault,
    /// A check's bound line, named.
    Bound(String),
    /// The shaded window a check averages over, named.
    Window(String),
    /// The marks of the node syncs.
    Syncs,
}

/// An HTML legend: a coloured name per item; it wraps in a narrow window.
pub fn legend(items: &[LegendItem]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|item| match item {
            LegendItem::Series(i, n) => {
                format!(
                    r#"<span style="color:{}">&#9632; {}</span>"#,
                    colour(*i),
                    esc(n)
                )
            }
            LegendItem::Fault => format!(
                r#"<span><span style="background:{FAULT_FILL};opacity:{FAULT_OPACITY}">&#160;&#160;&#160;&#160;</span> fault window</span>"#
            ),
            LegendItem::Bound(name) => format!(
                r#"<span style="color:{BOUND}">&#8212; &#8212; {}</span>"#,
                esc(name)
            ),
            LegendItem::Window(name) => format!(
                r#"<span><span style="background:{WINDOW_FILL};opacity:.25">&#160;&#160;&#160;&#160;</span> {}</span>"#,
                esc(name)
            ),
            LegendItem::Syncs => {
                format!(r#"<span style="color:{SYNC_STROKE}">&#8942; node sync</span>"#)
            }
        })
        .collect();
    format!(r#"<p class="legend">{}</p>"#, items.join(""))
}

/// Colour of the shaded window a check averages over.
pub(super) const WINDOW_FILL: &str = "#1f77b4";
/// Colour of a sync mark.
pub(super) const SYNC_STROKE: &str = "#333";

/// What a [`bars`] chart shows besides its bars.
#[derive(Debug, Clone, Copy, Default)]
pub struct BarChart<'a> {
    /// The chart's title (its SVG `<title>`).
    pub title: &'a str,
    /// What the bars are (the x axis label).
    pub x_label: &'a str,
    /// What their height is, with its unit (the y axis label).
    pub y_label: &'a str,
    /// Unit appended to a bar's value on hover (`" ms"`).
    pub unit: &'a str,
    /// A check's bound per bar (none where the bar's check has none).
    pub bounds: &'a [Option<f64>],
}

/// Vertical bar chart with one labelled bar per item, and a dashed bound line over each
/// bar that has one.
pub fn bars(chart: &BarChart<'_>, items: &[(String, f64)]) -> String {
    let mut out = String::new();
    // Long or many labels are slanted, with the room they need.
    let n = items.len().max(1) as f64;
    let slot = (W - LEFT - RIGHT) / n;
    let longest = items
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let slant = longest * FONT * 0.6 > slot * 0.95;
    let extra = if slant {
        (longest * FONT * 0.6 * 0.6).min(160.0)
    } else {
        0.0
    };
    let height = H + extra;
    let bottom = height - BOTTOM - extra;
    open_svg(&mut out, chart.title, height);
    axes(&mut out, bottom);
    let values = items
        .iter()
        .map(|(_, v)| *v)
        .chain(chart.bounds.iter().flatten().copied());
    let y = YMap::over(
        YScale::Linear,
        values.collect::<Vec<_>>().into_iter(),
        bottom,
    );
    y_axis(&mut out, &y, chart.y_label);
    for (i, (label, v)) in items.iter().enumerate() {
        let top = y.py(*v);
        let x = LEFT + slot * i as f64 + slot * 0.1;
        let _ = write!(
            out,
            r#"<rect class="bar" x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}{}</title></rect>"#,
            slot * 0.8,
            bottom - top,
            colour(0),
            esc(label),
            value(*v),
            chart.unit
        );
        if items.len() <= 40 {
            let cx = x + slot * 0.4;
            let ty = bottom + 18.0;
            if slant {
                let _ = write!(
                    out,
                    r#"<text x="{cx:.1}" y="{ty:.1}" text-anchor="end" transform="rotate(-35 {cx:.1} {ty:.1})">{}</text>"#,
                    esc(label)
                );
            } else {
                let _ = write!(
                    out,
                    r#"<text x="{cx:.1}" y="{ty:.1}" text-anchor="middle">{}</text>"#,
                    esc(label)
                );
            }
        }
        if let Some(Some(b)) = chart.bounds.get(i) {
            let py = y.py(*b);
            let _ = write!(
                out,
                r#"<line class="bound" data-value="{}" x1="{:.1}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="{BOUND}" stroke-width="2" stroke-dasharray="6 4"><title>bound {}</title></line>"#,
                value(*b),
                LEFT + slot * i as f64,
                LEFT + slot * (i as f64 + 1.0),
                value(*b)
            );
        }
    }
    x_label(&mut out, chart.x_label, height);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.9), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8]);
        assert_eq!(ticks(47.0).last(), Some(&40.0));
    }

    #[test]
    fn a_log_axis_spans_whole_decades_and_ticks_round_values() {
        let y = YMap::new(YScale::Log, [14.0, 60_030.0, 0.0].into_iter());
        assert_eq!((y.lo, y.hi), (10.0, 100_000.0));
        assert_eq!(y.ticks(), vec![10.0, 100.0, 1000.0, 10_000.0, 100_000.0]);
        assert_eq!(
            (y.frac(10.0), y.frac(0.0), y.frac(100_000.0)),
            (0.0, 0.0, 1.0)
        );
        assert!((y.frac(1000.0) - 0.5).abs() < 1e-12);
        let narrow = YMap::new(YScale::Log, [3.0, 40.0].into_iter());
        assert_eq!(narrow.ticks(), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        // Nothing positive: linear from 0.
        assert!(!YMap::new(YScale::Log, [0.0].into_iter()).log);
    }

    #[test]
    fn a_capped_axis_clips_larger_values_at_its_top() {
        let y = YMap::new(YScale::UpTo(0.5), [3.0, 0.25].into_iter());
        assert_eq!(y.hi(), 0.5);
        assert_eq!(y.py(3.0), TOP);
        assert!((y.frac(0.25) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn values_are_written_to_three_decimals_at_most() {
        assert_eq!(value(12.25), "12.25");
        assert_eq!(value(1.0 / 3.0), "0.333");
        assert_eq!(value(40.0), "40");
        assert_eq!(value(-0.0001), "0");
    }

    #[test]
    fn a_bar_chart_has_its_title_axis_labels_and_bound_lines() {
        let chart = BarChart {
            title: "running CV mean per run",
            x_label: "run",
            y_label: "running CV mean (ratio)",
            unit: "",
            bounds: &[Some(0.2), None],
        };
        let svg = bars(&chart, &[("a".into(), 0.1), ("b".into(), 0.4)]);
        assert!(
            svg.contains(r#"viewBox="0 0 800 300" width="100%""#),
            "{svg}"
        );
        assert!(svg.contains("<title>running CV mean per run</title>"));
        assert!(svg.contains(">run</text>") && svg.contains(">running CV mean (ratio)</text>"));
        assert_eq!(svg.matches(r#"class="bound""#).count(), 1, "{svg}");
        assert!(svg.contains("<title>bound 0.2</title>"));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 2);
    }
}
