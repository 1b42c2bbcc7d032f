//! Small inline SVG charts for `report.html`: no scripts, no external assets.

use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 240.0;
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 28.0;
const TOP: f64 = 12.0;
const RIGHT: f64 = 12.0;

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
    let (x0, y0, x1) = (LEFT, H - BOTTOM, W - RIGHT);
    let _ = write!(
        out,
        r##"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#444"/><line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{y0}" stroke="#444"/>"##
    );
}

fn y_axis(out: &mut String, max: f64, unit: &str) {
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" font-size="10" text-anchor="end">{}{unit}</text><text x="{}" y="{}" font-size="10" text-anchor="end">0</text>"#,
        LEFT - 4.0,
        TOP + 8.0,
        trim_num(max),
        LEFT - 4.0,
        H - BOTTOM
    );
}

fn trim_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// Line chart: one polyline per series over shared x values (`xs` in ms).
pub fn lines(title: &str, xs: &[f64], series: &[(String, Vec<f64>)], unit: &str) -> String {
    let mut out = String::new();
    open(&mut out, title);
    let xmax = xs.iter().copied().fold(0.0_f64, f64::max).max(1.0);
    let ymax = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(1.0);
    y_axis(&mut out, ymax, unit);
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" font-size="10" text-anchor="end">{} s</text>"#,
        W - RIGHT,
        H - BOTTOM + 14.0,
        trim_num(xmax / 1000.0)
    );
    let px = |x: f64| LEFT + x / xmax * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - y / ymax * (H - BOTTOM - TOP);
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
    out.push_str("</svg>");
    out
}

/// An HTML legend for the series of [`lines`]: a coloured name per series.
pub fn legend(names: &[String]) -> String {
    let items: Vec<String> = names
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
    format!("<p>{}</p>", items.join(""))
}

/// Vertical bar chart with one labelled bar per item.
pub fn bars(title: &str, items: &[(String, f64)], unit: &str) -> String {
    let mut out = String::new();
    open(&mut out, title);
    let ymax = items
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0_f64, f64::max)
        .max(1.0);
    y_axis(&mut out, ymax, unit);
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
