//! Small inline SVG charts for `report.html`: no scripts, no external assets.

use std::fmt::Write as _;

pub(super) const W: f64 = 640.0;
pub(super) const H: f64 = 240.0;
pub(super) const LEFT: f64 = 48.0;
pub(super) const BOTTOM: f64 = 28.0;
const TOP: f64 = 24.0;
pub(super) const RIGHT: f64 = 12.0;
/// Colour and opacity of a shaded fault window (and of its legend swatch).
const FAULT_FILL: &str = "#d62728";
const FAULT_OPACITY: f64 = 0.12;

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

fn open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img"><title>{}</title>"#,
        esc(title)
    );
    axes(out);
}

/// The two axis lines.
pub(super) fn axes(out: &mut String) {
    let (x0, y0, x1) = (LEFT, H - BOTTOM, W - RIGHT);
    let _ = write!(
        out,
        r##"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#444"/><line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{y0}" stroke="#444"/>"##
    );
}

/// A round step that cuts `max` into at most about five intervals (1, 2 or 5 x 10^n).
fn tick_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(f64::MIN_POSITIVE);
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum YScale {
    /// From 0 to a little above the largest value.
    #[default]
    Linear,
    /// Whole decades around the positive values (a latency's p50 and p99 may lie three
    /// decades apart); values at or below 0 sit on the bottom edge.
    Log,
}

/// A y axis: values to pixels, and its ticks.
pub(super) struct YMap {
    log: bool,
    lo: f64,
    hi: f64,
}

impl YMap {
    /// The axis of `values` in `scale` (linear when no value is positive).
    pub(super) fn new(scale: YScale, values: impl Iterator<Item = f64> + Clone) -> Self {
        let max = values.clone().fold(0.0_f64, f64::max);
        let min_pos = values.filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        if scale == YScale::Log && max > 0.0 {
            let lo = 10f64.powf(min_pos.log10().floor());
            let hi = 10f64.powf(max.log10().ceil()).max(lo * 10.0);
            return YMap { log: true, lo, hi };
        }
        let hi = if max > 0.0 { max * 1.05 } else { 1.0 };
        YMap {
            log: false,
            lo: 0.0,
            hi,
        }
    }

    /// Share of the axis height at `y`, 0 (bottom) to 1 (top).
    fn frac(&self, y: f64) -> f64 {
        if self.log {
            let y = y.max(self.lo);
            (y.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            y / self.hi
        }
    }

    pub(super) fn py(&self, y: f64) -> f64 {
        H - BOTTOM - self.frac(y) * (H - BOTTOM - TOP)
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

/// The y axis: a tick and a faint grid line per round value, the unit on top.
pub(super) fn y_axis(out: &mut String, y: &YMap, unit: &str) {
    for t in y.ticks() {
        let py = y.py(t);
        let _ = write!(
            out,
            r##"<line x1="{}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#ddd"/><line x1="{}" y1="{py:.1}" x2="{LEFT}" y2="{py:.1}" stroke="#444"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            LEFT,
            W - RIGHT,
            LEFT - 3.0,
            LEFT - 5.0,
            py + 3.0,
            value(t)
        );
    }
    let unit = match (unit.trim(), y.log) {
        ("", _) => return,
        (u, false) => u.to_string(),
        (u, true) => format!("{u} (log scale)"),
    };
    let _ = write!(
        out,
        r#"<text x="4" y="{}" font-size="10">{}</text>"#,
        TOP - 10.0,
        esc(&unit)
    );
}

/// The x axis of a time chart (`xmax` in ms): ticks in seconds, labelled `time (s)`.
fn time_axis(out: &mut String, xmax: f64) {
    let px = |x: f64| LEFT + x / xmax * (W - LEFT - RIGHT);
    for t in ticks(xmax / 1000.0) {
        let x = px(t * 1000.0);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#444"/><text x="{x:.1}" y="{}" font-size="10" text-anchor="middle">{}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 3.0,
            H - BOTTOM + 13.0,
            trim_num(t)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" font-size="10" text-anchor="end">time (s)</text>"#,
        W - RIGHT,
        H - 2.0
    );
}

fn trim_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// What a [`lines`] chart shows besides its series.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeChart<'a> {
    /// The chart's title (its SVG `<title>`).
    pub title: &'a str,
    /// Unit of the y axis (`ms`, `sandboxes`).
    pub unit: &'a str,
    /// How the y axis maps values.
    pub scale: YScale,
    /// Windows `(from, until)`, ms, to shade: the fault windows.
    pub shade: &'a [(f64, f64)],
    /// Where the time axis ends, ms, at least (the charts of one run share it, so that
    /// their times line up); the last x and the last window's end extend it.
    pub end_ms: f64,
}

/// Line chart over time: one polyline per series over shared x values (`xs` in ms
/// since the workload started), on the axes and shading `chart` describes.
pub fn lines(chart: &TimeChart<'_>, xs: &[f64], series: &[(String, Vec<f64>)]) -> String {
    let TimeChart {
        title,
        unit,
        scale,
        shade,
        end_ms,
    } = *chart;
    let mut out = String::new();
    let xmax = xs
        .iter()
        .copied()
        .chain(shade.iter().map(|w| w.1))
        .fold(end_ms, f64::max)
        .max(1.0);
    let px = |x: f64| LEFT + x.clamp(0.0, xmax) / xmax * (W - LEFT - RIGHT);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img"><title>{}</title>"#,
        esc(title)
    );
    // Under everything else, so that the lines stay readable.
    for (from, until) in shade {
        let (a, b) = (px(*from), px(*until));
        let _ = write!(
            out,
            r##"<rect class="fault" x="{a:.1}" y="{TOP}" width="{:.1}" height="{}" fill="{FAULT_FILL}" fill-opacity="{FAULT_OPACITY}"><title>fault {} s to {} s</title></rect>"##,
            (b - a).max(1.0),
            H - BOTTOM - TOP,
            trim_num(from / 1000.0),
            trim_num(until / 1000.0)
        );
    }
    axes(&mut out);
    let y = YMap::new(scale, series.iter().flat_map(|(_, v)| v.iter().copied()));
    y_axis(&mut out, &y, unit);
    time_axis(&mut out, xmax);
    let py = |v: f64| y.py(v);
    for (i, (name, ys)) in series.iter().enumerate() {
        let pts: Vec<String> = xs
            .iter()
            .zip(ys)
            .map(|(&x, &y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"><title>{}</title></polyline>"#,
            colour(i),
            pts.join(" "),
            esc(name)
        );
    }
    // A point a reader can hover for its value, while the chart stays small; drawn
    // where the points are few enough to tell apart, an invisible target otherwise.
    if xs.len() * series.len() <= MAX_POINT_MARKS {
        let opacity = if xs.len() <= MAX_VISIBLE_MARKS { 1 } else { 0 };
        for (i, (name, ys)) in series.iter().enumerate() {
            for (&x, &y) in xs.iter().zip(ys) {
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{}" fill-opacity="{opacity}"><title>{}: {} {} at {} s</title></circle>"#,
                    px(x),
                    py(y),
                    colour(i),
                    esc(name),
                    value(y),
                    esc(unit.trim()),
                    value(x / 1000.0)
                );
            }
        }
    }
    out.push_str("</svg>");
    out
}

/// Most points of a [`lines`] chart that get a mark with their value.
const MAX_POINT_MARKS: usize = 2000;
/// Most points of a series drawn as visible marks.
const MAX_VISIBLE_MARKS: usize = 60;

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

/// An HTML legend for the series of [`lines`]: a coloured name per series, and the
/// fault window's swatch when the chart shades any.
pub fn legend(names: &[String], faults: bool) -> String {
    let mut items: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                r#"<span style="color:{};margin-right:1em">&#9632; {}</span>"#,
                colour(i),
                esc(n)
            )
        })
        .collect();
    if faults {
        items.push(format!(
            r#"<span style="margin-right:1em"><span style="background:{FAULT_FILL};opacity:{FAULT_OPACITY}">&#160;&#160;&#160;&#160;</span> fault window</span>"#
        ));
    }
    format!(r#"<p class="legend">{}</p>"#, items.join(""))
}

/// Vertical bar chart with one labelled bar per item.
pub fn bars(title: &str, items: &[(String, f64)], unit: &str) -> String {
    let mut out = String::new();
    open(&mut out, title);
    let y = YMap::new(YScale::Linear, items.iter().map(|(_, v)| *v));
    y_axis(&mut out, &y, unit);
    let ymax = y.hi;
    let n = items.len().max(1) as f64;
    let slot = (W - LEFT - RIGHT) / n;
    for (i, (label, v)) in items.iter().enumerate() {
        let h = v / ymax * (H - BOTTOM - TOP);
        let x = LEFT + slot * i as f64 + slot * 0.1;
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}: {}{unit}</title></rect>"#,
            H - BOTTOM - h,
            slot * 0.8,
            colour(0),
            esc(label),
            trim_num(*v)
        );
        if items.len() <= 40 {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{}" font-size="9" text-anchor="middle">{}</text>"#,
                x + slot * 0.4,
                H - BOTTOM + 12.0,
                esc(label)
            );
        }
    }
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
    fn a_fault_window_is_shaded_under_the_lines() {
        let chart = TimeChart {
            title: "t",
            unit: "sandboxes",
            shade: &[(500.0, 1500.0)],
            ..TimeChart::default()
        };
        let svg = lines(
            &chart,
            &[0.0, 1000.0, 2000.0],
            &[("a".into(), vec![1.0, 2.0, 3.0])],
        );
        let shade = svg.find(r#"class="fault""#).expect("shaded window");
        assert!(shade < svg.find("<polyline").expect("line"), "{svg}");
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
    fn values_are_written_to_three_decimals_at_most() {
        assert_eq!(value(12.25), "12.25");
        assert_eq!(value(1.0 / 3.0), "0.333");
        assert_eq!(value(40.0), "40");
        assert_eq!(value(-0.0001), "0");
    }
}
