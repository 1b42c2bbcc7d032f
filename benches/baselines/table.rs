//! The ratio table the README shows.

use std::fmt::Write;

/// One figure: a subject against its baseline, over rounds.
#[derive(Debug, Clone)]
pub struct Row {
    /// What is measured (`mock-node Create`).
    pub what: String,
    /// Its baseline (`bare tonic, map store`).
    pub baseline: String,
    /// Unit of the values (`req/s`, `ms`).
    pub unit: &'static str,
    /// Baseline value of each round.
    pub base: Vec<f64>,
    /// Subject value of each round.
    pub subject: Vec<f64>,
    /// Requests that failed, both sides, all rounds.
    pub errors: usize,
}

/// Median of `v` (mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

impl Row {
    /// An empty row.
    pub fn new(what: &str, baseline: &str, unit: &'static str) -> Row {
        Row {
            what: what.to_string(),
            baseline: baseline.to_string(),
            unit,
            base: Vec::new(),
            subject: Vec::new(),
            errors: 0,
        }
    }

    /// Median subject over median baseline.
    pub fn ratio(&self) -> f64 {
        median(&self.subject) / median(&self.base)
    }
}

/// Every row measured in this run.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Row>,
}

impl Table {
    /// Adds a row and prints it at once (long runs show progress).
    pub fn push(&mut self, row: Row) {
        eprintln!(
            "{}: subject {:?} vs baseline {:?} {} -> ratio {:.3}",
            row.what,
            round(&row.subject),
            round(&row.base),
            row.unit,
            row.ratio()
        );
        self.rows.push(row);
    }

    /// The table in Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| figure | baseline | subject (median) | baseline (median) | ratio | rounds | errors |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} {} | {:.1} {} | {:.3} | {} | {} |",
                r.what,
                r.baseline,
                median(&r.subject),
                r.unit,
                median(&r.base),
                r.unit,
                r.ratio(),
                r.subject.len(),
                r.errors
            );
        }
        out
    }
}

fn round(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| (x * 10.0).round() / 10.0).collect()
}
