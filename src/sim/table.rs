//! A sweep as one table: Markdown for the terminal and READMEs, CSV for tools.

use std::io::{self, Write};

use super::sweep::Sweep;

const FIGURES: [&str; 8] = [
    "CV mean",
    "CV sd",
    "CV min",
    "CV max",
    "max/mean",
    "max/mean max",
    "error rate",
    "runs",
];

fn rows(sweep: &Sweep, precision: usize) -> Vec<Vec<String>> {
    sweep
        .points
        .iter()
        .map(|p| {
            let f = |x: f64| format!("{x:.precision$}");
            let mut row = p.values.clone();
            row.extend([
                f(p.cv.mean),
                f(p.cv.population_sd),
                f(p.cv.min),
                f(p.cv.max),
                f(p.max_over_mean.mean),
                f(p.max_over_mean.max),
                f(p.error_rate.mean),
                p.runs.len().to_string(),
            ]);
            row
        })
        .collect()
}

fn header(sweep: &Sweep) -> Vec<String> {
    sweep
        .keys
        .iter()
        .cloned()
        .chain(FIGURES.iter().map(|s| s.to_string()))
        .collect()
}

/// Write `sweep` as an aligned Markdown table (figures over the sweep's seeds).
pub fn write_sweep_table(sweep: &Sweep, mut w: impl Write) -> io::Result<()> {
    let header = header(sweep);
    let rows = rows(sweep, 3);
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |w: &mut dyn Write, cells: &[String]| -> io::Result<()> {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, n)| format!("{c:<n$}"))
            .collect();
        writeln!(w, "| {} |", padded.join(" | "))
    };
    line(&mut w, &header)?;
    let rule: Vec<String> = widths.iter().map(|n| "-".repeat(*n)).collect();
    writeln!(w, "|-{}-|", rule.join("-|-"))?;
    for r in &rows {
        line(&mut w, r)?;
    }
    Ok(())
}

/// Write `sweep` as CSV: one row per combination, full precision.
pub fn write_sweep_csv(sweep: &Sweep, mut w: impl Write) -> io::Result<()> {
    let header: Vec<String> = header(sweep)
        .iter()
        .map(|h| h.replace([' ', '/'], "_"))
        .collect();
    writeln!(w, "{}", header.join(","))?;
    for r in rows(sweep, 6) {
        let cells: Vec<String> = r.iter().map(|c| csv_cell(c)).collect();
        writeln!(w, "{}", cells.join(","))?;
    }
    Ok(())
}

fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}
